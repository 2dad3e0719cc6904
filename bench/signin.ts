/**
 * `node bench/signin.ts`: does a storm of portal sign-ins hold up the API? The issue's
 * target: with 100 sign-in attempts in flight, GET /totp/ping keeps its p99 under 50 ms.
 *
 * For each store, the embedded SQLite always and PostgreSQL + Redis when BENCH_DATABASE_URL
 * (or TEST_DATABASE_URL) and BENCH_REDIS_URL (or TEST_REDIS_URL) are set (a scratch database
 * and a Redis prefix of its own, dropped after): it makes an API key (no plan limits) and a
 * portal user (a real scrypt hash, default parameters), starts the real server
 * (src/server.ts, TRUST_PROXY on so that X-Forwarded-For gives each attempt its address),
 * then times GET /totp/ping, one request at a time on a keep-alive connection, from the
 * request to the last byte of its answer:
 * - alone (the baseline), and
 * - while 100 sign-in attempts are kept in flight by a worker thread, each as a browser
 *   posts the form (pre-session cookie, CSRF token, Origin), in three kinds: the user's email
 *   with wrong passwords from one address (throttled after SIGNIN_MAX_FAILURES), unknown
 *   emails from one address (throttled after SIGNIN_IP_MAX_FAILURES), and unknown emails
 *   each from a new address (never throttled: every one costs a hash, or is refused by the
 *   bounded hash queue with 503).
 * Rounds alternate the two (this machine's speed drifts); figures are medians of the rounds,
 * ratios the median of each round's ratio. It prints a table per store and a PASS/FAIL line
 * for the target, and exits 0 either way (a bench, not a test). Answers are checked: every
 * ping 200, every sign-in 401, 429 (with Retry-After) or 503; never a session for a wrong
 * password.
 *
 * BENCH_SECONDS (default 4) and BENCH_ROUNDS (default 3) set the length of a run.
 */
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads'
import { loadConfig } from '../src/config/config.ts'
import { resolvePepper } from '../src/config/pepper.ts'
import { openStore } from '../src/storage/factory.ts'
import { Accounts } from '../src/services/accounts.ts'
import { isFailure } from '../src/services/outcome.ts'
import { SYSTEM } from '../src/domain/accounts.ts'
import { Passwords } from '../src/services/users/passwords.ts'
import { freePort, median, pinned, serve } from './load.ts'
import { waitFor } from './wait.ts'
import { onPostgresWithRedis } from './stores.ts'

const SECONDS = Number(process.env.BENCH_SECONDS ?? 4)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
const IN_FLIGHT = 100
const TARGET_P99_MS = 50
const PEPPER = randomBytes(24).toString('hex')
const EMAIL = 'jane@example.com'
const PASSWORD = 'correct horse battery staple'

const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.ceil(s.length * q) - 1)]!
}

// The storm: a worker thread, so that its requests are not timed on the ping's event loop.

interface StormData {
  readonly base: string
}
type Tally = Record<string, number>

/** A signed-out form as a browser holds it: the pre-session cookie and the CSRF token of its page. */
async function formOf(base: string): Promise<{ cookie: string; csrf: string }> {
  const res = await fetch(`${base}/portal/sign-in`)
  const page = await res.text()
  const cookie = res.headers
    .getSetCookie()
    .map((c) => c.split(';')[0]!)
    .find((c) => c.startsWith('tessera_form='))
  const csrf = /name="_csrf" value="([^"]+)"/.exec(page)?.[1]
  if (cookie === undefined || csrf === undefined) throw new Error(`no sign-in form (${res.status})`)
  return { cookie, csrf }
}

async function storm({ base }: StormData): Promise<void> {
  const port = parentPort!
  const forms = await Promise.all(Array.from({ length: IN_FLIGHT }, () => formOf(base)))
  let running = false
  let tally: Tally = {}
  const count = (what: string) => {
    tally[what] = (tally[what] ?? 0) + 1
  }
  let fresh = 0
  /** One kind of attempt per third of the workers: its email, password and address. */
  const kinds = [
    () => ({ kind: 'user, wrong password, one address', email: EMAIL, ip: '203.0.113.1' }),
    () => ({ kind: 'unknown emails, one address', email: `nobody${fresh++}@example.com`, ip: '203.0.113.2' }),
    () => ({
      kind: 'unknown emails, a new address each',
      email: `nobody${fresh++}@example.com`,
      ip: `10.${(fresh >> 16) & 255}.${(fresh >> 8) & 255}.${fresh & 255}`,
    }),
  ]
  const worker = async (i: number) => {
    const { cookie, csrf } = forms[i]!
    const make = kinds[i % kinds.length]!
    while (running) {
      const { kind, email, ip } = make()
      const body = new URLSearchParams({ _csrf: csrf, email, password: `wrong password ${randomBytes(4).toString('hex')}` })
      try {
        const res = await fetch(`${base}/portal/sign-in`, {
          method: 'POST',
          redirect: 'manual',
          body: body.toString(),
          headers: { 'content-type': 'application/x-www-form-urlencoded', cookie, origin: base, 'x-forwarded-for': ip },
        })
        await res.arrayBuffer()
        const ok = res.status === 401 || res.status === 503 || (res.status === 429 && res.headers.get('retry-after') !== null)
        count(ok ? `${kind}: ${res.status}` : `!!! ${kind}: unexpected ${res.status}`)
      } catch (error) {
        count(`!!! ${kind}: ${(error as Error).message}`)
      }
    }
  }
  port.on('message', (message: 'go' | 'stop') => {
    if (message === 'go') {
      running = true
      tally = {}
      const started = performance.now()
      const all = Promise.all(Array.from({ length: IN_FLIGHT }, (_, i) => worker(i)))
      port.once('message', async () => {
        running = false
        await all
        port.postMessage({ tally, seconds: (performance.now() - started) / 1000 })
      })
    }
  })
  port.postMessage('ready')
}

// The measure: pings one at a time.

async function pings(base: string, apiKey: string, seconds: number): Promise<{ times: number[]; problems: number }> {
  const times: number[] = []
  let problems = 0
  const end = performance.now() + seconds * 1000
  while (performance.now() < end) {
    const t0 = performance.now()
    const res = await fetch(`${base}/totp/ping`, { headers: { 'x-api-key': apiKey } })
    await res.arrayBuffer()
    times.push(performance.now() - t0)
    if (res.status !== 200) problems++
  }
  return { times, problems }
}

class Storm {
  readonly #worker: Worker
  /** Settles when the worker has its forms, or failed. */
  readonly ready: Promise<void>
  constructor(base: string) {
    this.#worker = new Worker(new URL(import.meta.url), { workerData: { base } satisfies StormData })
    this.ready = new Promise((resolve, reject) => {
      this.#worker.once('message', () => resolve())
      this.#worker.once('error', reject)
    })
  }
  start(): void {
    this.#worker.postMessage('go')
  }
  stop(): Promise<{ tally: Tally; seconds: number }> {
    const done = new Promise<{ tally: Tally; seconds: number }>((resolve) => this.#worker.once('message', resolve))
    this.#worker.postMessage('stop')
    return done
  }
  close(): Promise<number> {
    return this.#worker.terminate()
  }
}

/** seed makes the API key (no plan limits: the bench measures the service) and the portal user. */
async function seed(env: Record<string, string>): Promise<string> {
  const config = loadConfig({ NODE_ENV: 'test', PEPPER, ...env })
  const store = await openStore(config, { maintenance: false })
  try {
    const accounts = new Accounts({ store, pepper: resolvePepper(config), config })
    const ctx = { actor: SYSTEM }
    const account = await accounts.createAccount(ctx, { name: 'bench' })
    if (isFailure(account)) throw new Error(account.message)
    await accounts.setPlan(ctx, account.id, { rate: 0, burst: 1, quota: 0, period: 'month' })
    await accounts.setSubscription(ctx, account.id, config.region, 'totp', 'active')
    const issued = await accounts.issueKey(ctx, account.id, { name: 'bench' })
    if (isFailure(issued)) throw new Error(issued.message)
    const now = new Date().toISOString()
    const id = `usr_${randomBytes(8).toString('hex')}`
    await store.portal.createUser(
      {
        id,
        email: EMAIL,
        passwordHash: await new Passwords().hash(PASSWORD),
        emailVerifiedAt: now,
        status: 'active',
        operator: false,
        totpSecret: null,
        totpEnabledAt: null,
        createdAt: now,
      },
      { actor: 'system', action: 'user.create', target: { type: 'user', id }, accountId: null, ip: null, outcome: 'success', detail: {} },
    )
    return issued.apiKey
  } finally {
    await store.close()
  }
}

interface Round {
  alone: number[]
  storm: number[]
  tally: Tally
  attemptsPerSecond: number
  problems: number
}

async function benchStore(label: string, env: Record<string, string>): Promise<string> {
  const apiKey = await seed(env)
  const port = await freePort()
  const child = serve('src/server.ts', { ...env, NODE_ENV: 'test', LOG_LEVEL: 'warn', PEPPER, PORT: String(port), ADMIN_LISTEN: 'off', TRUST_PROXY: 'true' })
  const base = `http://127.0.0.1:${port}`
  // However this process ends, the server goes with it.
  const killServer = () => child.kill('SIGTERM')
  process.once('exit', killServer)
  let storm: Storm | null = null
  try {
    await waitFor(`${base}/healthz`)
    storm = new Storm(base)
    await storm.ready
    await pings(base, apiKey, 1) // warm-up
    const rounds: Round[] = []
    for (let r = 0; r < ROUNDS; r++) {
      const round: Round = { alone: [], storm: [], tally: {}, attemptsPerSecond: 0, problems: 0 }
      const alone = async () => {
        const a = await pings(base, apiKey, SECONDS)
        round.alone = a.times
        round.problems += a.problems
      }
      const stormy = async () => {
        storm!.start()
        await new Promise((resolve) => setTimeout(resolve, 300)) // every worker has its first attempt in flight
        const s = await pings(base, apiKey, SECONDS)
        const { tally, seconds } = await storm!.stop()
        round.storm = s.times
        round.problems += s.problems
        round.tally = tally
        round.attemptsPerSecond = Object.values(tally).reduce((a, b) => a + b, 0) / seconds
      }
      if (r % 2 === 0) {
        await alone()
        await stormy()
      } else {
        await stormy()
        await alone()
      }
      rounds.push(round)
    }
    return report(label, rounds)
  } finally {
    await storm?.close()
    process.off('exit', killServer)
    child.kill('SIGTERM')
    await new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r(undefined) : child.once('exit', r)))
  }
}

function report(label: string, rounds: Round[]): string {
  const m = (f: (r: Round) => number) => median(rounds.map(f))
  const p50 = (xs: number[]) => quantile(xs, 0.5)
  const p99 = (xs: number[]) => quantile(xs, 0.99)
  const stormP99 = m((r) => p99(r.storm))
  const tally: Tally = {}
  for (const r of rounds) for (const [k, n] of Object.entries(r.tally)) tally[k] = (tally[k] ?? 0) + n
  const problems = rounds.reduce((n, r) => n + r.problems, 0)
  const out = [
    `## Sign-in storm on ${label}: GET /totp/ping alone and with ${IN_FLIGHT} sign-in attempts in flight (${ROUNDS} rounds of ${SECONDS} s, medians; ` +
      `Node ${process.version}, ${cpus().length} CPUs, ${pinned ? 'server pinned to CPU 0, this client (pings and storm) to CPU 1' : 'not pinned'})`,
    '',
    '| GET /totp/ping | pings | p50 ms | p99 ms | max ms |',
    '| --- | --- | --- | --- | --- |',
    `| alone | ${m((r) => r.alone.length)} | ${m((r) => p50(r.alone)).toFixed(2)} | ${m((r) => p99(r.alone)).toFixed(2)} | ${m((r) => Math.max(...r.alone)).toFixed(1)} |`,
    `| with the storm | ${m((r) => r.storm.length)} | ${m((r) => p50(r.storm)).toFixed(2)} | ${stormP99.toFixed(2)} | ${m((r) => Math.max(...r.storm)).toFixed(1)} |`,
    `| ratio (storm ÷ alone) | | **${m((r) => p50(r.storm) / p50(r.alone)).toFixed(2)}×** | **${m((r) => p99(r.storm) / p99(r.alone)).toFixed(2)}×** | |`,
    '',
    `Sign-in attempts answered: ${m((r) => r.attemptsPerSecond).toFixed(0)}/s (median of rounds); by kind and status over all rounds:`,
    '',
    ...Object.entries(tally)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([k, n]) => `- ${k}: ${n}`),
    '',
    `${stormP99 < TARGET_P99_MS ? 'PASS' : '!!! FAIL'} ${label}: GET /totp/ping p99 with ${IN_FLIGHT} sign-ins in flight ${stormP99.toFixed(1)} ms (target < ${TARGET_P99_MS} ms)`,
  ]
  if (problems > 0) out.push(`!!! ${problems} pings did not answer 200`)
  return `${out.join('\n')}\n`
}

/** signinBench runs the bench on every store it can reach, printing each store's table as it is done. */
export async function signinBench(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'tessera-bench-signin-'))
  try {
    process.stdout.write(`${await benchStore('SQLite', { DATA_DIR: dataDir })}\n`)
  } finally {
    rmSync(dataDir, { recursive: true, force: true })
  }
  await onPostgresWithRedis('signin', (env) => benchStore('PostgreSQL + Redis', env))
}

if (!isMainThread) await storm(workerData as StormData)
else if (import.meta.main) await signinBench()
