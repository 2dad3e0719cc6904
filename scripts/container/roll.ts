/**
 * The rolling update of docs/deploy.md ("Rolling updates, one node at a time"), as far as this
 * machine allows, for the container check (check.ts). The two nodes are the containers that
 * podman-compose plans for `tessera-1` and `tessera-2` of compose.cluster.yaml (their settings,
 * .env, log rotation and health check), and Caddy runs the shipped deploy/Caddyfile in front of
 * them, with what this machine imposes: the host's network instead of the compose network (no
 * bridge here), so each node on a port of its own and the Caddyfile's upstreams those ports;
 * the host's PostgreSQL and Redis instead of the postgres and redis services, and Debian's caddy
 * as a process, on plain HTTP, instead of the caddy image (no registry, so no images of theirs).
 *
 * While two clients keep calling through Caddy (GET /totp/ping and POST /totp/getOTP, each one
 * call after another on kept-alive connections), each node in turn is replaced as
 * `docker compose up -d --no-deps --wait tessera-N` replaces it: SIGTERM and up to the
 * stop_grace_period (20 s: the 6 s drain, then what is in flight) to finish, the container removed, a new one made from the image and
 * waited for until its health check passes; then the other. Every call must be answered 200, and
 * each new container must have served calls before the other node goes.
 */
import { execFile, spawn } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'

const run = promisify(execFile)

/** RollKit: what check.ts lends: its podman, its failure, its steps and its waits. */
export interface RollKit {
  readonly env: NodeJS.ProcessEnv
  /** The repository, and a scratch folder removed after the check. */
  readonly root: string
  readonly work: string
  fail(message: string): never
  step<T>(name: string, run: () => T | Promise<T>): Promise<T>
  freePort(): Promise<number>
  waitReady(url: string, name: string): Promise<void>
  cli(name: string, args: readonly string[]): Record<string, unknown>
}

/** The stop_grace_period of compose.cluster.yaml's nodes. */
const GRACE_SECONDS = 20

/**
 * nodeRun: the `podman run` arguments podman-compose planned for `service`, named `name`, on the host's
 * network, with `overrides` in place of the planned environment variables of the same names.
 */
export function nodeRun(plan: string, project: string, service: string, name: string, overrides: Readonly<Record<string, string>>): string[] {
  const line = plan.split('\n').find((l) => l.startsWith('podman run ') && l.includes(`--name=${project}_${service}_1 `))
  if (line === undefined) throw new Error(`podman-compose planned no ${service}`)
  const words = line.trim().split(/\s+/).slice(2)
  const image = words.pop()!
  const args: string[] = [`--name=${name}`]
  for (let i = 0; i < words.length; i++) {
    const word = words[i]!
    // Its own name; the compose network and the ports published from it, which the host's network replaces.
    if (word.startsWith('--name=')) continue
    if (word === '--net' || word === '--network-alias' || word === '-p') i++
    else if (word === '-e' && Object.hasOwn(overrides, words[i + 1]!.split('=')[0]!)) i++
    else args.push(word)
  }
  return [...args, '--network=host', ...Object.entries(overrides).flatMap(([k, v]) => ['-e', `${k}=${v}`]), image]
}

/**
 * startCaddy runs deploy/Caddyfile in front of `upstreams` on plain HTTP at `port`: DOMAIN is that address
 * (a site on http:// gets no certificate), the upstreams replace the compose network's names, and the admin
 * endpoint is off (another Caddy of the machine may hold its port). It resolves once a call through it answers.
 */
async function startCaddy(kit: RollKit, upstreams: readonly string[], port: number): Promise<{ url: string; stop: () => void }> {
  const shipped = readFileSync(join(kit.root, 'deploy/Caddyfile'), 'utf8')
  const names = 'reverse_proxy tessera-1:3000 tessera-2:3000'
  if (!shipped.includes(names)) kit.fail(`deploy/Caddyfile no longer has "${names}"`)
  const file = join(kit.work, 'Caddyfile')
  writeFileSync(file, `{\n\tadmin off\n}\n${shipped.replace(names, `reverse_proxy ${upstreams.join(' ')}`)}`)
  const url = `http://127.0.0.1:${port}`
  const env = { ...process.env, DOMAIN: url, HOME: kit.work, XDG_DATA_HOME: kit.work, XDG_CONFIG_HOME: kit.work }
  const caddy = spawn('caddy', ['run', '--config', file, '--adapter', 'caddyfile'], { env, stdio: ['ignore', 'ignore', 'pipe'] })
  let log = ''
  caddy.stderr.on('data', (d) => {
    log = `${log}${d}`.slice(-4000)
  })
  caddy.on('error', (error) => kit.fail(`caddy (apt-get install caddy): ${error.message}`))
  const stop = () => caddy.kill('SIGKILL')
  process.on('exit', stop)
  const until = Date.now() + 30_000
  for (;;) {
    if (caddy.exitCode !== null) kit.fail(`caddy exited ${caddy.exitCode}:\n${log}`)
    const ok = await fetch(`${url}/readyz`).then(
      (r) => r.status === 200,
      () => false,
    )
    if (ok) return { url, stop }
    if (Date.now() > until) kit.fail(`caddy did not answer within 30 s:\n${log}`)
    await new Promise((r) => setTimeout(r, 250))
  }
}

export async function rollingUpdate(kit: RollKit, plan: string, project: string, store: Readonly<Record<string, string>>): Promise<void> {
  const podman = async (args: readonly string[]) => (await run('podman', ['--runtime', 'runc', ...args], { env: kit.env, maxBuffer: 64 << 20 })).stdout.trim()
  const nodes = await Promise.all(
    ['tessera-1', 'tessera-2'].map(async (service) => {
      const port = await kit.freePort()
      const name = `tessera-ci-roll-${service}`
      const overrides = { ...store, PORT: String(port), ADMIN_LISTEN: `127.0.0.1:${await kit.freePort()}` }
      return { service, name, port, url: `http://127.0.0.1:${port}`, args: nodeRun(plan, project, service, name, overrides) }
    }),
  )
  let stopCaddy = () => {}
  const removeAll = () => Promise.all(nodes.map((n) => podman(['rm', '-f', '-v', '-t', '0', n.name]).catch(() => '')))
  await removeAll()
  try {
    await kit.step('rolling update: both nodes of compose.cluster.yaml started', async () => {
      for (const node of nodes) await podman(['run', ...node.args])
      await Promise.all(nodes.map((n) => kit.waitReady(n.url, n.name)))
    })
    const key = await kit.step('rolling update: an account and a key made with the CLI in tessera-1', () => {
      const account = kit.cli(nodes[0]!.name, ['account', 'create', '--name', 'rolling update'])
      const accountId = String(account.id)
      kit.cli(nodes[0]!.name, ['subscription', 'grant', '--account', accountId, '--region', 'all', '--group', 'all'])
      const made = kit.cli(nodes[0]!.name, ['key', 'create', '--account', accountId, '--name', 'roll']).apiKey
      if (typeof made !== 'string') return kit.fail('rolling update: key create gave no apiKey')
      // No throttle or quota: the clients call as fast as they can.
      kit.cli(nodes[0]!.name, ['plan', 'set', '--account', accountId, '--rate', '0', '--quota', '0'])
      return made
    })

    const caddy = await kit.step('rolling update: Caddy (deploy/Caddyfile) in front of them', async () =>
      startCaddy(
        kit,
        nodes.map((n) => `127.0.0.1:${n.port}`),
        await kit.freePort(),
      ),
    )

    stopCaddy = caddy.stop
    const proxy = caddy.url
    const tally = { calls: 0, failures: [] as string[] }
    let stopped = false
    /** phase: what the roll is doing, and since when, for a failure to say when it came. */
    let phase = { what: 'both nodes serving', since: Date.now() }
    const at = () => `${((Date.now() - phase.since) / 1000).toFixed(1)} s into "${phase.what}"`
    const call = {
      ping: () => fetch(`${proxy}/totp/ping`, { headers: { 'x-api-key': key }, signal: AbortSignal.timeout(30_000) }),
      getOTP: () =>
        fetch(`${proxy}/totp/getOTP`, {
          method: 'POST',
          headers: { 'x-api-key': key },
          body: new URLSearchParams({ secret: 'JBSWY3DPEHPK3PXP' }),
          signal: AbortSignal.timeout(30_000),
        }),
    }
    /** client makes one kind of call after another, without pause, until the roll is over. */
    const client = async (kind: keyof typeof call) => {
      while (!stopped) {
        tally.calls++
        try {
          const r = await call[kind]()
          const body = await r.text()
          // An empty body is Caddy's own answer (the nodes' every error has a JSON body).
          if (r.status !== 200)
            tally.failures.push(`${kind}: HTTP ${r.status} ${body === '' ? "(empty body: Caddy's own answer)" : body.slice(0, 200)} at ${at()}`)
        } catch (error) {
          tally.failures.push(`${kind}: ${String((error as Error).cause ?? error)} at ${at()}`)
        }
      }
    }
    /** served: the clients' calls a node's container has logged (its request lines name the path). */
    const served = async (name: string) => (await podman(['logs', name])).split('"path":"/totp/').length - 1
    const healthy = (name: string) =>
      podman(['healthcheck', 'run', name]).then(
        () => true,
        () => false,
      )
    /** sharing waits until Caddy has sent a node `n` of the clients' calls. */
    const sharing = async (node: (typeof nodes)[number], n: number, until: number) => {
      while ((await served(node.name)) < n) {
        if (Date.now() > until) kit.fail(`rolling update: ${node.service} served ${await served(node.name)} calls through Caddy, not ${n}`)
        await new Promise((r) => setTimeout(r, 500))
      }
    }
    const clients = [client('ping'), client('getOTP')]
    const started = Date.now()
    for (const node of nodes) await sharing(node, 20, Date.now() + 30_000)
    for (const node of nodes) {
      await kit.step(`rolling update: ${node.service} replaced while the clients call`, async () => {
        const stopping = Date.now()
        phase = { what: `${node.service}: SIGTERM and its drain`, since: stopping }
        await podman(['stop', '-t', String(GRACE_SECONDS), node.name])
        const code = await podman(['inspect', '--format', '{{.State.ExitCode}}', node.name])
        if (code !== '0') kit.fail(`rolling update: ${node.service} exited ${code} after SIGTERM`)
        // compose.cluster.yaml's drain reached the node.
        if (!(await podman(['logs', node.name])).includes('"drainMs":6000,"msg":"shutting down"')) kit.fail(`rolling update: ${node.service} did not drain 6 s`)
        process.stdout.write(`(stopped in ${((Date.now() - stopping) / 1000).toFixed(1)} s) `)
        phase = { what: `${node.service}: stopped, its new container starting`, since: Date.now() }
        await podman(['rm', '-v', node.name])
        await podman(['run', ...node.args])
        // What `--wait` waits for: the image's health check passing.
        const until = Date.now() + 90_000
        while (!(await healthy(node.name))) {
          if (Date.now() > until) kit.fail(`rolling update: ${node.service}'s health check did not pass within 90 s`)
          await new Promise((r) => setTimeout(r, 500))
        }
        // The new container takes its share through Caddy before the other node goes.
        phase = { what: `${node.service}: its new container healthy`, since: Date.now() }
        await sharing(node, 20, until)
      })
    }
    stopped = true
    await Promise.all(clients)
    const seconds = (Date.now() - started) / 1000
    process.stdout.write(`  (${tally.calls} calls through Caddy during the roll, ${seconds.toFixed(1)} s: ${tally.failures.length} failed)\n`)
    if (tally.failures.length > 0) kit.fail(`rolling update: ${tally.failures.length} calls failed:\n${[...new Set(tally.failures)].slice(0, 10).join('\n')}`)
  } finally {
    stopCaddy()
    await removeAll()
  }
}
