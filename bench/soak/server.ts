/**
 * The soak's server: a fresh store (SQLite in a scratch folder; or PostgreSQL, a scratch
 * database on TEST_DATABASE_URL's server, with Redis under a key prefix of its own on
 * TEST_REDIS_URL, both dropped after), an admin token made with the CLI as an operator would,
 * and the real `src/server.ts` as a child process on free ports, its warnings and errors kept.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import { Redis } from 'ioredis'
import { createServer } from 'node:net'
import { LAUNCH_ENV } from '../../src/launch.ts'

const ROOT = new URL('../..', import.meta.url).pathname

export type StoreKind = 'sqlite' | 'postgres'

export interface Store {
  readonly kind: StoreKind
  /** What the server and the CLI need to reach it. */
  readonly env: Record<string, string>
  readonly dataDir: string
  /** The scratch database's URL (postgres only). */
  readonly databaseUrl?: string
  readonly redisUrl?: string
  readonly redisPrefix?: string
  drop(): Promise<void>
}

const PG_DEFAULT = 'postgres://postgres@127.0.0.1:5432/postgres'
const REDIS_DEFAULT = 'redis://127.0.0.1:6379'

/** freePort asks the system for a port nobody listens on (bench/load.ts has one too, but pins this process to a CPU as it loads). */
function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number }
      s.close(() => resolve(port))
    })
  })
}

/** freshStore makes the store the soak runs on, empty. */
export async function freshStore(kind: StoreKind): Promise<Store> {
  const dataDir = mkdtempSync(join(tmpdir(), 'tessera-soak-'))
  const dropDir = () => rmSync(dataDir, { recursive: true, force: true })
  if (kind === 'sqlite') return { kind, env: { DATA_DIR: dataDir }, dataDir, drop: async () => dropDir() }
  const serverUrl = process.env.TEST_DATABASE_URL || PG_DEFAULT
  const redisUrl = process.env.TEST_REDIS_URL || REDIS_DEFAULT
  const admin = new pg.Client({ connectionString: serverUrl, connectionTimeoutMillis: 5000 })
  await admin.connect()
  const name = `tessera_soak_${randomBytes(4).toString('hex')}`
  await admin.query(`CREATE DATABASE ${name}`)
  const url = new URL(serverUrl)
  url.pathname = `/${name}`
  const redisPrefix = `tessera-soak-${randomBytes(4).toString('hex')}:`
  return {
    kind,
    env: { DATA_DIR: dataDir, DATABASE_URL: url.href, REDIS_URL: redisUrl, REDIS_PREFIX: redisPrefix },
    dataDir,
    databaseUrl: url.href,
    redisUrl,
    redisPrefix,
    async drop() {
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined)
      await admin.end()
      const redis = new Redis(redisUrl)
      for (let cursor = '0'; ; ) {
        const [next, keys] = await redis.scan(cursor, 'MATCH', `${redisPrefix}*`, 'COUNT', 1000)
        if (keys.length > 0) await redis.del(...keys)
        cursor = next
        if (cursor === '0') break
      }
      redis.disconnect()
      dropDir()
    },
  }
}

/** baseEnv: the caller's environment without what would point the server elsewhere than the soak's store. */
function baseEnv(store: Store): NodeJS.ProcessEnv {
  const env = { ...process.env }
  for (const name of ['DATABASE_URL', 'REDIS_URL', 'REDIS_PREFIX', 'DATA_DIR', 'PORT', 'ADMIN_LISTEN', 'NODE_ENV']) delete env[name]
  return { ...env, NODE_ENV: 'test', ...store.env }
}

/** adminToken makes a write token with the CLI (`npm run admin -- admin token create`), as an operator would: its ID and secret. */
export function adminToken(store: Store): { id: string; token: string } {
  const r = spawnSync(process.execPath, [join(ROOT, 'src/admin/cli.ts'), 'admin', 'token', 'create', '--name', 'soak', '--scope', 'write', '--json'], {
    env: baseEnv(store),
    encoding: 'utf8',
  })
  if (r.status !== 0) throw new Error(`admin token create failed: ${r.stderr}`)
  const made = JSON.parse(r.stdout) as { tokenId: string; token: string }
  return { id: made.tokenId, token: made.token }
}

export interface Server {
  readonly child: ChildProcess
  readonly pid: number
  readonly url: string
  readonly adminUrl: string
  /** Log lines at warn and above, by level name (a documented 503's apart), and the first lines at error and above (but those). */
  readonly logs: { readonly counts: Map<string, number>; readonly errors: string[] }
  /** stop sends SIGTERM and gives the exit code (null: killed by a signal) and how long it took. */
  stop(): Promise<{ code: number | null; ms: number }>
}

const LEVELS: Record<number, string> = { 40: 'warn', 50: 'error', 60: 'fatal' }

/** startServer runs `src/server.ts` on free ports with `settings` over the store's and waits for /readyz. */
export async function startServer(store: Store, settings: Record<string, string>): Promise<Server> {
  const [port, adminPort] = [await freePort(), await freePort()]
  const child = spawn(process.execPath, [join(ROOT, 'src/server.ts')], {
    env: { ...baseEnv(store), ...LAUNCH_ENV, PORT: String(port), ADMIN_LISTEN: `127.0.0.1:${adminPort}`, LOG_FORMAT: 'json', LOG_LEVEL: 'warn', ...settings },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const killOnExit = () => child.kill('SIGKILL')
  process.once('exit', killOnExit)
  const logs = { counts: new Map<string, number>(), errors: [] as string[] }
  let partial = ''
  const take = (chunk: Buffer) => {
    const lines = (partial + chunk.toString('utf8')).split('\n')
    partial = lines.pop()!
    for (const line of lines) {
      // JSON lines only: the demo account's notice on an empty store is text.
      const level = /^\{.*"level":(\d+)/.exec(line)?.[1]
      let name = level === undefined ? null : (LEVELS[Number(level)] ?? null)
      if (name === null) continue
      // A 503 with Retry-After is back-pressure the API documents (QUEUE_FULL and its kind), though Fastify logs every 5xx as an error.
      if (name === 'error' && /"statusCode":503,"headers":\{[^}]*"retry-after"/.test(line)) name = 'error (a documented 503)'
      logs.counts.set(name, (logs.counts.get(name) ?? 0) + 1)
      if ((name === 'error' || name === 'fatal') && logs.errors.length < 50) logs.errors.push(line.slice(0, 2000))
    }
  }
  child.stdout!.on('data', take)
  child.stderr!.on('data', take)
  const url = `http://127.0.0.1:${port}`
  const deadline = Date.now() + 60_000
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the server exited ${child.exitCode} at start: ${logs.errors.join('\n')}`)
    const ready = await fetch(`${url}/readyz`).then(
      (r) => r.status === 200,
      () => false,
    )
    if (ready) break
    if (Date.now() > deadline) throw new Error('the server did not become ready in 60 s')
    await new Promise((r) => setTimeout(r, 100))
  }
  return {
    child,
    pid: child.pid!,
    url,
    adminUrl: `http://127.0.0.1:${adminPort}`,
    logs,
    async stop() {
      const started = performance.now()
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve))
        child.kill('SIGTERM')
        await exited
      }
      process.off('exit', killOnExit)
      return { code: child.exitCode, ms: performance.now() - started }
    },
  }
}
