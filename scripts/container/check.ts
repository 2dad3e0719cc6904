/**
 * The container check of CI (.ci/run): builds the runtime image of the Dockerfile with Podman
 * and starts it as an operator would, once on SQLite (a /data volume) and once on the host's
 * PostgreSQL and Redis. Each time it waits for /readyz and the image's own health check,
 * makes an account, its subscriptions and an API key with the CLI inside the container,
 * calls GET /totp/ping and converts a PDF, stops the container with SIGTERM (it must exit 0
 * within 10 s, saying so in its log), starts it again and calls ping with the same key, then
 * replaces it by a new container on the same volume or database (an upgrade) and calls ping
 * again: the data was kept. It has podman-compose plan both compose files and holds their ports and
 * log rotation to the docs, then runs the rolling update of docs/deploy.md on the two nodes of
 * compose.cluster.yaml while clients call (roll.ts). It prints the image's size and how long each step took.
 *
 * No container registry is reachable here, so the base image is made from Debian packages
 * (mmdebstrap) and Node 24 from the npm registry (base.Containerfile; docs/development.md, "CI"),
 * once per machine: Podman keeps it, and later runs reuse it. It is passed to the Dockerfile
 * as its BASE build argument; users build on the public node:24-bookworm-slim.
 *
 *   node scripts/container/check.ts            (as root, with podman, runc and mmdebstrap)
 *
 * CONTAINER_DATABASE_URL (default TEST_DATABASE_URL, else the local server) is where the
 * PostgreSQL run makes its scratch database; CONTAINER_REDIS_URL (default TEST_REDIS_URL, else
 * the local server) the Redis it uses, under a key prefix of its own (REDIS_PREFIX), deleted after.
 */
import { spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { chmodSync, copyFileSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import { Redis } from 'ioredis'
import { rollingUpdate } from './roll.ts'

const ROOT = new URL('../../', import.meta.url).pathname
const BASE = 'localhost/node:24-bookworm-slim'
const DEBIAN = 'localhost/debian:bookworm'
const IMAGE = 'localhost/tessera:ci'
const CERTS = ['-v', '/etc/ssl/certs:/etc/ssl/certs:ro', '--env', 'NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt']
const STOP_SECONDS = 10

const work = mkdtempSync(join(tmpdir(), 'tessera-container-'))
// These machines mount cgroup v1 and refuse some rlimits: Podman needs the cgroupfs manager and no default ulimits (CONTAINERS.md).
writeFileSync(join(work, 'containers.conf'), '[containers]\ndefault_ulimits = []\n[engine]\ncgroup_manager = "cgroupfs"\n')
const env = { ...process.env, CONTAINERS_CONF: join(work, 'containers.conf') }
const started = Date.now()
const CONTAINERS = ['tessera-ci-sqlite', 'tessera-ci-postgres', 'tessera-ci-roll-tessera-1', 'tessera-ci-roll-tessera-2']
// Whatever ends the check (a failure exits at once) leaves no container or scratch files behind.
let scratchDatabase: { url: string; name: string } | null = null
process.on('exit', () => {
  spawnSync('podman', ['--runtime', 'runc', 'rm', '-f', '-v', '-t', '0', ...CONTAINERS], { env, stdio: 'ignore' })
  if (scratchDatabase !== null)
    spawnSync('psql', [scratchDatabase.url, '-qc', `DROP DATABASE IF EXISTS ${scratchDatabase.name} WITH (FORCE)`], { stdio: 'ignore' })
  rmSync(work, { recursive: true, force: true })
})

function fail(message: string): never {
  process.stderr.write(`container check FAILED: ${message}\n`)
  process.exit(1)
}

/** podman runs Podman with runc (crun refuses the hybrid cgroups here); it fails the check unless `allowFailure`. */
function podman(args: readonly string[], opts: { allowFailure?: boolean; inherit?: boolean } = {}): { status: number; out: string } {
  const r = spawnSync('podman', ['--runtime', 'runc', ...args], { env, encoding: 'utf8', stdio: opts.inherit ? 'inherit' : 'pipe', maxBuffer: 64 << 20 })
  if (r.error) fail(`podman ${args[0]}: ${r.error.message}`)
  const status = r.status ?? 1
  if (status !== 0 && !opts.allowFailure) fail(`podman ${args.join(' ')} exited ${status}\n${r.stderr ?? ''}`)
  return { status, out: (r.stdout ?? '').trim() }
}

async function step<T>(name: string, run: () => T | Promise<T>): Promise<T> {
  const t = Date.now()
  process.stdout.write(`- ${name} … `)
  const value = await run()
  const seconds = ((Date.now() - t) / 1000).toFixed(1)
  process.stdout.write(`${seconds} s\n`)
  return value
}

const exists = (image: string) => podman(['image', 'exists', image], { allowFailure: true }).status === 0
const sizeOf = (image: string) => Number(podman(['image', 'inspect', '--format', '{{.Size}}', image]).out)
const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(0)} MiB`

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number }
      s.close(() => resolve(port))
    })
  })
}

/** A one-page PDF that draws a filled square (no fonts): enough for the engines to render. */
function onePagePdf(): Buffer {
  const content = '0 0.4 0.8 rg 100 100 400 400 re f'
  const objects = [
    '<< /Type /Catalog /Pages 2 0 R >>',
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>',
    `<< /Length ${content.length} >>\nstream\n${content}\nendstream`,
  ]
  let out = '%PDF-1.7\n'
  const offsets: number[] = []
  objects.forEach((body, i) => {
    offsets.push(out.length)
    out += `${i + 1} 0 obj\n${body}\nendobj\n`
  })
  const xref = out.length
  out += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n${offsets.map((o) => `${String(o).padStart(10, '0')} 00000 n \n`).join('')}`
  out += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`
  return Buffer.from(out, 'latin1')
}

async function waitReady(url: string, name: string): Promise<void> {
  const until = Date.now() + 90_000
  for (;;) {
    try {
      const r = await fetch(`${url}/readyz`)
      if (r.status === 200) return
    } catch {}
    if (Date.now() > until) fail(`${name}: /readyz did not answer 200 within 90 s\n${podman(['logs', '--tail', '40', name], { allowFailure: true }).out}`)
    await new Promise((r) => setTimeout(r, 500))
  }
}

/** cli runs the admin CLI inside the container, with --json, and gives its answer. */
function cli(name: string, args: readonly string[]): Record<string, unknown> {
  const r = podman(['exec', name, 'node', 'src/admin/cli.ts', ...args, '--json'])
  try {
    return JSON.parse(r.out) as Record<string, unknown>
  } catch {
    return fail(`the CLI's answer to ${args.join(' ')} is not JSON: ${r.out}`)
  }
}

async function expectStatus(response: Promise<Response>, status: number, what: string): Promise<Response> {
  const r = await response
  if (r.status !== status) fail(`${what}: HTTP ${r.status}, expected ${status}: ${(await r.text()).slice(0, 500)}`)
  return r
}

async function ping(url: string, key: string, what: string): Promise<void> {
  const r = await expectStatus(fetch(`${url}/totp/ping`, { headers: { 'x-api-key': key } }), 200, what)
  const body = (await r.json()) as { type?: string }
  if (body.type !== 'Success') fail(`${what}: ${JSON.stringify(body)}`)
}

async function convert(url: string, key: string): Promise<number> {
  const form = new FormData()
  form.append('pdfDocument', new Blob([new Uint8Array(onePagePdf())], { type: 'application/pdf' }), 'square.pdf')
  const r = await expectStatus(fetch(`${url}/converter/generateImage`, { method: 'POST', headers: { 'x-api-key': key }, body: form }), 200, 'conversion')
  const png = Buffer.from(await r.arrayBuffer())
  if (!png.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))) fail(`conversion: not a PNG (${png.length} bytes)`)
  return png.length
}

/** stop sends SIGTERM and waits up to STOP_SECONDS: the container must have exited 0 by itself, saying so in its log. */
function stopCleanly(name: string): number {
  const t = Date.now()
  podman(['stop', '-t', String(STOP_SECONDS), name])
  const seconds = (Date.now() - t) / 1000
  const code = Number(podman(['inspect', '--format', '{{.State.ExitCode}}', name]).out)
  const logs = podman(['logs', name], { allowFailure: true })
  if (code !== 0) fail(`${name} exited ${code} after SIGTERM (137 would be the SIGKILL after ${STOP_SECONDS} s)\n${logs.out.split('\n').slice(-20).join('\n')}`)
  if (!/"msg":"shutting down"/.test(logs.out)) fail(`${name}: no "shutting down" line in the log after SIGTERM`)
  if (seconds >= STOP_SECONDS) fail(`${name} took ${seconds.toFixed(1)} s to stop`)
  return seconds
}

/** journey runs one container through the operator's first hour and a restart. */
async function journey(name: string, store: string, storeKind: 'sqlite' | 'postgres+redis', runArgs: readonly string[]): Promise<void> {
  const port = await freePort()
  // The host's network (no bridge here): the admin listener gets a free port too, not 3001, which may be taken.
  const adminPort = await freePort()
  const url = `http://127.0.0.1:${port}`
  podman(['rm', '-f', '-v', name], { allowFailure: true })
  const secrets = ['-e', `PEPPER=${randomBytes(32).toString('base64url')}`, '-e', `ENCRYPTION_KEYS=1:${randomBytes(32).toString('base64')}`]
  const settings = ['-e', `PORT=${port}`, '-e', `ADMIN_LISTEN=127.0.0.1:${adminPort}`, '-e', 'SIGNUP_MODE=closed', ...secrets]
  const run = ['run', '-d', '--name', name, '--network=host', ...settings, ...runArgs, IMAGE]
  await step(`${store}: start until /readyz answers`, async () => {
    podman(run)
    await waitReady(url, name)
    const serving = podman(['logs', name]).out
    if (!serving.includes(`"store":"${storeKind}"`)) fail(`${name}: the "serving" log line does not name the ${storeKind} store\n${serving.slice(-2000)}`)
  })
  await step(`${store}: the image's health check`, () => {
    podman(['healthcheck', 'run', name])
  })
  const key = await step(`${store}: account, subscriptions and key made with the CLI in the container`, () => {
    const account = cli(name, ['account', 'create', '--name', 'container check'])
    const accountId = String(account.accountId ?? account.id)
    cli(name, ['subscription', 'grant', '--account', accountId, '--region', 'all', '--group', 'all'])
    const made = cli(name, ['key', 'create', '--account', accountId, '--name', 'ci'])
    if (typeof made.apiKey !== 'string') fail(`key create gave no apiKey: ${JSON.stringify(made)}`)
    return made.apiKey
  })
  await step(`${store}: the admin API from the host, with a token the CLI made in the container`, async () => {
    const made = cli(name, ['admin', 'token', 'create', '--name', 'ops', '--scope', 'read'])
    if (typeof made.token !== 'string') fail(`admin token create gave no token: ${JSON.stringify(made)}`)
    const headers = { authorization: `Bearer ${made.token}` }
    const r = await expectStatus(fetch(`http://127.0.0.1:${adminPort}/admin/v1/accounts`, { headers }), 200, `${store}: admin API`)
    const { items } = (await r.json()) as { items: { name: string }[] }
    if (!items.some((a) => a.name === 'container check')) fail(`${store}: the admin API lists ${JSON.stringify(items)}, not the account the CLI made`)
  })
  await step(`${store}: GET /totp/ping`, () => ping(url, key, `${store}: ping`))
  const bytes = await step(`${store}: a PDF converted to PNG`, () => convert(url, key))
  process.stdout.write(`  (${bytes} bytes of PNG)\n`)
  const first = await step(`${store}: SIGTERM`, () => stopCleanly(name))
  process.stdout.write(`  (stopped in ${first.toFixed(1)} s, exit 0)\n`)
  await step(`${store}: started again, the same key answers`, async () => {
    podman(['start', name])
    await waitReady(url, name)
    await ping(url, key, `${store}: ping after the restart`)
  })
  await step(`${store}: SIGTERM again`, () => stopCleanly(name))
  // A restart keeps the container's own files; a new container (an upgrade) has only the volume or the database.
  await step(`${store}: a new container on the same data, the same key answers`, async () => {
    // -v: the image's anonymous /data volume too (the SQLite run's data is a bind mount, which stays).
    podman(['rm', '-f', '-v', name])
    podman(run)
    await waitReady(url, name)
    await ping(url, key, `${store}: ping from a new container`)
  })
  await step(`${store}: SIGTERM, last`, () => stopCleanly(name))
  podman(['rm', '-f', '-v', name], { allowFailure: true })
}

await step('base image (made once per machine, then reused)', () => {
  if (!exists(DEBIAN)) {
    const tar = join(work, 'rootfs.tar')
    const r = spawnSync('mmdebstrap', ['--variant=minbase', '--include=ca-certificates', 'bookworm', tar], { stdio: ['ignore', 'ignore', 'inherit'] })
    if (r.status !== 0) fail('mmdebstrap could not make the Debian root filesystem')
    podman(['import', tar, DEBIAN])
  }
  if (!exists(BASE))
    podman(['build', '--network=host', ...CERTS, '-f', join(ROOT, 'scripts/container/base.Containerfile'), '-t', BASE, ROOT], { inherit: true })
})
await step('runtime image built (Dockerfile, target runtime)', () => {
  podman(['build', '--format', 'docker', '--network=host', ...CERTS, '--build-arg', `BASE=${BASE}`, '--target', 'runtime', '-t', IMAGE, ROOT], {
    inherit: true,
  })
})

const data = join(work, 'data')
mkdirSync(data)
// The image runs as uid 1000 (node); the volume must be writable by it.
chmodSync(data, 0o777)
await journey(CONTAINERS[0]!, 'SQLite', 'sqlite', ['-v', `${data}:/data`])

/** LOGGING: the rotation every service of the compose files has (docs/deploy.md, "Logs"), as podman-compose passes it on. */
const LOGGING = ' --log-driver=json-file --log-opt=max-size=10m --log-opt=max-file=5 '

/**
 * checkRuns: the `podman run` lines podman-compose planned for a compose file. Every service rotates its
 * output (LOGGING) and publishes on the host's loopback only, but Caddy's 80 and 443. The nodes publish
 * exactly `want.ports` of the container (3000, the API; 3001, the admin API, which listens on every address
 * of the container for that), so neither is reachable from beyond the host, and trust `want.trust`
 * rather than `true` for X-Forwarded-For (issue 40, finding 6; issue 41).
 */
function checkRuns(out: string, project: string, file: string, nodes: readonly string[], want: { ports: readonly string[]; trust: string }): void {
  const runs = out.split('\n').filter((l) => l.includes(`--name=${project}_`))
  for (const line of runs) {
    const service = /--name=\S+?_(.+)_1 /.exec(line)?.[1] ?? line
    const published = [...line.matchAll(/ -p (\S+)/g)].map((m) => m[1]!)
    if (!line.includes(LOGGING)) fail(`${file}: ${service} does not rotate its logs as the others do (${LOGGING.trim()}):\n${line}`)
    if (service !== 'caddy' && !published.every((p) => p.startsWith('127.0.0.1:')))
      fail(`${file}: ${service} publishes ${published.join(', ')}; only on 127.0.0.1`)
    if (!nodes.includes(service)) continue
    const ports = published.map((p) => p.split(':').at(-1)).sort()
    if (ports.join() !== [...want.ports].sort().join())
      fail(`${file}: ${service} publishes ${published.join(', ') || 'no port'}; it must publish ${want.ports.join(' and ')} on 127.0.0.1`)
    if (!line.includes(' -e ADMIN_LISTEN=0.0.0.0:3001 ')) fail(`${file}: ${service} must set ADMIN_LISTEN=0.0.0.0:3001 (its published admin port):\n${line}`)
    if (!line.includes(` -e TRUST_PROXY=${want.trust} `)) fail(`${file}: ${service} must set TRUST_PROXY=${want.trust}:\n${line}`)
  }
  for (const node of nodes) if (!runs.some((l) => l.includes(`--name=${project}_${node}_1 `))) fail(`podman-compose planned no ${node} from ${file}`)
}

/**
 * The compose files, as far as this machine allows (no bridge network, no registry): podman-compose
 * reads each with the example settings and must plan every service, with the ports, log rotation and
 * proxy trust that checkRuns says; its dry run still makes the project's volumes and network,
 * which are removed after.
 */
const COMPOSE_PROJECT = 'tessera-compose-check'
const clusterPlan = await step('compose.yaml and compose.cluster.yaml planned by podman-compose', () => {
  const dir = join(work, 'compose')
  mkdirSync(dir)
  for (const f of ['compose.yaml', 'compose.cluster.yaml', 'Dockerfile']) copyFileSync(join(ROOT, f), join(dir, f))
  cpSync(join(ROOT, 'deploy'), join(dir, 'deploy'), { recursive: true })
  // The .env of the walk-through's step 1, which the rolling update's nodes start with.
  const secrets: Record<string, string> = {
    PEPPER: randomBytes(48).toString('base64'),
    ENCRYPTION_KEYS: `1:${randomBytes(32).toString('base64')}`,
    POSTGRES_PASSWORD: randomBytes(24).toString('hex'),
  }
  const example = readFileSync(join(ROOT, 'deploy/env.example'), 'utf8')
  writeFileSync(
    join(dir, '.env'),
    example.replace(/^(PEPPER|ENCRYPTION_KEYS|POSTGRES_PASSWORD)=$/gm, (_, name: string) => `${name}=${secrets[name]}`),
  )
  // The compose files' image, tessera:latest, is the one just built (removed at the end).
  podman(['tag', IMAGE, 'localhost/tessera:latest'])
  const project = COMPOSE_PROJECT
  let cluster = ''
  const expected: Record<string, readonly string[]> = {
    'compose.yaml': ['tessera'],
    'compose.cluster.yaml': ['tessera-1', 'tessera-2', 'postgres', 'redis', 'caddy', 'prometheus', 'alertmanager'],
  }
  try {
    for (const [file, services] of Object.entries(expected)) {
      const r = spawnSync('podman-compose', ['--dry-run', '-p', project, '-f', file, 'up', '-d'], { cwd: dir, env, encoding: 'utf8' })
      const out = `${r.stdout}${r.stderr}`
      if (r.status !== 0) fail(`podman-compose could not read ${file}:\n${out.slice(-3000)}`)
      for (const service of services) {
        if (!out.includes(`--name=${project}_${service}_1`)) fail(`podman-compose planned no ${service} from ${file}:\n${out.slice(-3000)}`)
      }
      if (file === 'compose.yaml') checkRuns(out, project, file, ['tessera'], { ports: ['3000', '3001'], trust: 'loopback,uniquelocal' })
      else {
        checkRuns(out, project, file, ['tessera-1', 'tessera-2'], { ports: ['3001'], trust: 'uniquelocal' })
        cluster = out
      }
    }
  } finally {
    const volumes = podman(['volume', 'ls', '-q', '--filter', `label=io.podman.compose.project=${project}`], { allowFailure: true }).out
    if (volumes !== '') podman(['volume', 'rm', ...volumes.split('\n')], { allowFailure: true })
    podman(['network', 'rm', `${project}_default`], { allowFailure: true })
  }
  return cluster
})

const databaseUrl = process.env.CONTAINER_DATABASE_URL ?? process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'
const redisUrl = process.env.CONTAINER_REDIS_URL ?? process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'
const scratch = `tessera_container_${process.pid}`
const admin = new pg.Client({ connectionString: databaseUrl })
await admin.connect()
await admin.query(`DROP DATABASE IF EXISTS ${scratch}`)
await admin.query(`CREATE DATABASE ${scratch}`)
scratchDatabase = { url: databaseUrl, name: scratch }
const redisPrefix = `tessera-container-${process.pid}:`
const redis = new Redis(redisUrl, { lazyConnect: true })
await redis.connect()
try {
  const scratchUrl = new URL(databaseUrl)
  scratchUrl.pathname = `/${scratch}`
  await journey(CONTAINERS[1]!, 'PostgreSQL + Redis', 'postgres+redis', [
    '-e',
    `DATABASE_URL=${scratchUrl}`,
    '-e',
    `REDIS_URL=${redisUrl}`,
    '-e',
    `REDIS_PREFIX=${redisPrefix}`,
  ])
  const kit = { env, root: ROOT, work, fail, step, freePort, waitReady, cli }
  await rollingUpdate(kit, clusterPlan, COMPOSE_PROJECT, { DATABASE_URL: String(scratchUrl), REDIS_URL: redisUrl, REDIS_PREFIX: redisPrefix })
} finally {
  const keys = await redis.keys(`${redisPrefix}*`)
  if (keys.length > 0) await redis.del(...keys)
  redis.disconnect()
  await admin.query(`DROP DATABASE IF EXISTS ${scratch} WITH (FORCE)`)
  scratchDatabase = null
  await admin.end()
}
podman(['rmi', 'localhost/tessera:latest'], { allowFailure: true })

const image = sizeOf(IMAGE)
const base = sizeOf(BASE)
process.stdout.write(
  `\ncontainer check passed in ${((Date.now() - started) / 1000).toFixed(0)} s\n` +
    `image ${IMAGE}: ${mib(image)} (${mib(image - base)} over the stand-in base of ${mib(base)}, which users replace by node:24-bookworm-slim)\n`,
)
