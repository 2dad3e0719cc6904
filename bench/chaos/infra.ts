/**
 * The chaos run's own PostgreSQL and Redis: a throwaway PostgreSQL cluster (initdb in a scratch
 * folder, on a free port, trust on loopback) and a Redis with its append-only file on, so that
 * the run can stop and start them without touching the machine's own servers. PostgreSQL is
 * stopped the hard way (`pg_ctl -m immediate`: no checkpoint, crash recovery at the next
 * start) and Redis with SIGKILL (started again, it loads its AOF). Both run as the user that
 * owns them: as root, PostgreSQL runs as `postgres` (initdb refuses root).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import pg from 'pg'

const PG_BIN = process.env.CHAOS_PG_BIN ?? '/usr/lib/postgresql/15/bin'

/** freePort asks the system for a port nobody listens on. */
export function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number }
      s.close(() => resolve(port))
    })
  })
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** A scratch folder for the run, removed by `remove`. */
export function scratch(): { dir: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-chaos-'))
  // PostgreSQL's user must reach its folder inside.
  chmodSync(dir, 0o711)
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) }
}

const asRoot = process.getuid?.() === 0

function postgresUser(): { uid: number; gid: number } {
  const r = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' })
  const g = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' })
  if (r.status !== 0) throw new Error('running as root, but there is no postgres user to run PostgreSQL as')
  return { uid: Number(r.stdout.trim()), gid: Number(g.stdout.trim()) }
}

/** run runs a PostgreSQL program (as `postgres` when we are root) and throws with its output when it fails. */
function run(program: string, args: string[]): void {
  const [cmd, argv] = asRoot ? ['runuser', ['-u', 'postgres', '--', join(PG_BIN, program), ...args]] : [join(PG_BIN, program), args]
  const r = spawnSync(cmd as string, argv as string[], { encoding: 'utf8', cwd: '/' })
  if (r.status !== 0) throw new Error(`${program} ${args.join(' ')} failed (${r.status}): ${r.stderr || r.stdout}`)
}

export interface Postgres {
  readonly url: string
  /** stop: `pg_ctl stop -m immediate` (every backend killed, no checkpoint). */
  stop(): void
  /** start: `pg_ctl start -w` (crash recovery first, after an immediate stop), then waits until it takes connections. */
  start(): Promise<void>
  /** remove: stopped for good (immediate), its folder goes with the run's. */
  remove(): void
}

export async function startPostgres(dir: string): Promise<Postgres> {
  if (!existsSync(join(PG_BIN, 'initdb'))) throw new Error(`no initdb in ${PG_BIN} (set CHAOS_PG_BIN)`)
  const home = join(dir, 'pg')
  mkdirSync(home)
  if (asRoot) {
    const { uid, gid } = postgresUser()
    chownSync(home, uid, gid)
  }
  const data = join(home, 'data')
  run('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync'])
  const port = await freePort()
  const options = `-p ${port} -c listen_addresses=127.0.0.1 -k ${home} -c max_connections=200`
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`
  let running = false
  const pgStart = async () => {
    run('pg_ctl', ['-D', data, '-l', join(home, 'log'), '-o', options, '-w', '-t', '120', 'start'])
    running = true
    for (let i = 0; ; i++) {
      const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 })
      try {
        await c.connect()
        await c.query('SELECT 1')
        await c.end()
        return
      } catch (error) {
        await c.end().catch(() => undefined)
        if (i > 100) throw error
        await sleep(100)
      }
    }
  }
  await pgStart()
  return {
    url,
    stop() {
      run('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop'])
      running = false
    },
    start: pgStart,
    remove() {
      if (running) {
        try {
          run('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop'])
        } catch {
          /* gone already */
        }
      }
      running = false
    },
  }
}

export interface RedisServer {
  readonly url: string
  /** kill: SIGKILL, no save (what it acknowledged is in its AOF, written before it answered). */
  kill(): Promise<void>
  /** start: the same server again on the same port and folder; it loads its AOF before it answers. */
  start(): Promise<void>
  remove(): Promise<void>
}

export async function startRedis(dir: string): Promise<RedisServer> {
  const home = join(dir, 'redis')
  mkdirSync(home)
  const port = await freePort()
  const fsync = process.env.CHAOS_REDIS_FSYNC ?? 'always'
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--appendonly', 'yes', '--appendfsync', fsync, '--save', '', '--dir', home]
  const url = `redis://127.0.0.1:${port}`
  let child: ChildProcess | null = null
  const start = async () => {
    const c = spawn('redis-server', args, { stdio: ['ignore', 'ignore', 'inherit'] })
    child = c
    for (let i = 0; ; i++) {
      const r = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, enableOfflineQueue: false })
      r.on('error', () => undefined)
      try {
        await r.connect()
        // PING answers LOADING while the AOF is read: wait for PONG.
        if ((await r.ping()) === 'PONG') return
      } catch (error) {
        if (c.exitCode !== null) throw new Error(`redis-server exited ${c.exitCode}`)
        if (i > 200) throw error
      } finally {
        r.disconnect()
      }
      await sleep(50)
    }
  }
  const kill = async () => {
    const c = child
    child = null
    if (c === null || c.exitCode !== null || c.signalCode !== null) return
    const exited = new Promise((resolve) => c.once('exit', resolve))
    c.kill('SIGKILL')
    await exited
  }
  await start()
  return { url, kill, start, remove: kill }
}
