/**
 * The test command: `npm test` runs every tier, `npm run test:<tier>` one, `npm test -- <files or globs>` those.
 *
 * Before it starts it says which suites will run and which will skip, and why. PostgreSQL and
 * Redis are taken from TEST_DATABASE_URL and TEST_REDIS_URL; when those are unset it looks for
 * them at their default local addresses (PostgreSQL as PGUSER, default postgres, on PGHOST:PGPORT,
 * default 127.0.0.1:5432; Redis on REDIS_HOST:REDIS_PORT, default 127.0.0.1:6379) and uses those that answer: PostgreSQL
 * through a scratch database of its own, dropped after the run; Redis under the key prefixes
 * each test makes and deletes. The tests run as `node --test --test-reporter=spec` would
 * run them (a process per file, files in parallel: CPUs − 1 at once, 2 on 2 CPUs), and while a file takes
 * long without a result (the browser and cluster tiers) a line every 30 s says what is running.
 */
import { run } from 'node:test'
import { spec } from 'node:test/reporters'
import { spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync, globSync } from 'node:fs'
import { availableParallelism, tmpdir } from 'node:os'
import { join, relative, resolve } from 'node:path'
import pg from 'pg'
import { Redis } from 'ioredis'
import { CORPUS_TESTS } from '../test/support/corpus.ts'

const ROOT = new URL('..', import.meta.url).pathname
const TIERS: Readonly<Record<string, readonly string[]>> = {
  unit: ['src/**/*.test.ts'],
  storage: ['test/storage/**/*.test.ts'],
  http: ['test/http/**/*.test.ts'],
  browser: ['test/browser/**/*.test.ts'],
  corpus: ['test/corpus/**/*.test.ts'],
  cluster: ['test/cluster/**/*.test.ts'],
  checks: ['test/checks/**/*.test.ts'],
}
const SILENCE_MS = 30_000
/**
 * A test that has not ended after this long fails (one that sets its own timeout keeps it): a hang (a store's close once left a
 * unit test waiting for good, 9 minutes into a run) fails the run and names the test, rather than holding it until CI's cap.
 */
const TEST_TIMEOUT_MS = 15 * 60_000
const SLOWEST = 10
/** The files that take longest, started first (measured: `TEST_TIMES=all npm test` lists every file's time); the rest after them. */
const LONGEST: readonly string[] = [
  'test/checks/clean-copy.test.ts',
  'test/browser/portal-axe.test.ts',
  'test/browser/reference.test.ts',
  'test/http/portal/signup.test.ts',
  'test/http/admin/factor-import.test.ts',
  'test/http/converter/damaged-pages.test.ts',
  'test/http/webhooks/webhooks.test.ts',
  'test/http/converter/limits.test.ts',
  'test/http/admin/cli.test.ts',
  'test/http/converter/jobs-fair.test.ts',
]
const rank = (file: string) => {
  const at = LONGEST.indexOf(file)
  return at < 0 ? LONGEST.length : at
}

const say = (line: string) => process.stdout.write(`# ${line}\n`)
const args = process.argv.slice(2)
const patterns = args.length === 0 ? ['src/**/*.test.ts', 'test/**/*.test.ts'] : args.flatMap((a) => TIERS[a] ?? [a])
/**
 * Files at once: CPUs − 1, 2 at least where there are 2 CPUs, or TEST_CONCURRENCY. Measured on 2 CPUs (2026-11-29, sampling every
 * process's CPU from /proc): one at a time took 22 min 48 s with the CPUs 56% busy (a file waits on its browser, its receivers,
 * PostgreSQL, or a timer, much of its time); 2 at once 14 min 20 s at 90%, every test passing.
 */
const cpus = availableParallelism()
const concurrency = Number(process.env.TEST_CONCURRENCY || Math.max(Math.min(2, cpus), cpus - 1))
if (!Number.isInteger(concurrency) || concurrency < 1)
  throw new Error(`TEST_CONCURRENCY must be a whole number of files, at least 1, not ${process.env.TEST_CONCURRENCY}`)
// The whole suite runs the corpus tests once, in the copy of the repository that test/checks/clean-copy.test.ts makes for them
// (where it can: in a Git checkout; a container's build stage has none, and runs them in place).
const gitCheckout = spawnSync('git', ['rev-parse', '--is-inside-work-tree'], { cwd: ROOT, stdio: 'ignore' }).status === 0
const inCopy = args.length === 0 && gitCheckout ? new Set(globSync([...CORPUS_TESTS], { cwd: ROOT })) : new Set<string>()
/** The files, the longest first, so that they do not start last and run on alone. */
const files = globSync(patterns, { cwd: ROOT })
  .filter((file) => !inCopy.has(file))
  .sort((a, b) => rank(a) - rank(b) || a.localeCompare(b))

/** findPostgres: TEST_DATABASE_URL, or a scratch database on the local server when it answers (null and why when neither). */
async function findPostgres(): Promise<{ url: string; drop?: () => Promise<void> } | { why: string }> {
  if (process.env.TEST_DATABASE_URL) return { url: process.env.TEST_DATABASE_URL }
  const host = process.env.PGHOST ?? '127.0.0.1'
  const port = process.env.PGPORT ?? '5432'
  const user = process.env.PGUSER ?? 'postgres'
  const server = `postgres://${encodeURIComponent(user)}@${host}:${port}`
  const admin = new pg.Client({ connectionString: `${server}/postgres`, connectionTimeoutMillis: 2000 })
  try {
    await admin.connect()
  } catch (error) {
    return { why: `no PostgreSQL answered at ${host}:${port} as ${user} (${(error as Error).message}); set TEST_DATABASE_URL` }
  }
  const name = `tessera_test_${randomBytes(4).toString('hex')}`
  try {
    await admin.query(`CREATE DATABASE ${name}`)
  } catch (error) {
    await admin.end()
    return { why: `PostgreSQL at ${host}:${port} answered, but ${user} may not create a database (${(error as Error).message}); set TEST_DATABASE_URL` }
  }
  await admin.end()
  const drop = async () => {
    const c = new pg.Client({ connectionString: `${server}/postgres`, connectionTimeoutMillis: 2000 })
    await c.connect()
    await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
    await c.end()
  }
  return { url: `${server}/${name}`, drop }
}

/** findRedis: TEST_REDIS_URL, or the local server when it answers PING. */
async function findRedis(): Promise<{ url: string } | { why: string }> {
  if (process.env.TEST_REDIS_URL) return { url: process.env.TEST_REDIS_URL }
  const where = `${process.env.REDIS_HOST ?? '127.0.0.1'}:${process.env.REDIS_PORT ?? '6379'}`
  const url = `redis://${where}`
  const redis = new Redis(url, { lazyConnect: true, connectTimeout: 2000, maxRetriesPerRequest: 0, retryStrategy: () => null })
  redis.on('error', () => undefined)
  try {
    await redis.connect()
    await redis.ping()
    return { url }
  } catch (error) {
    return { why: `no Redis answered at ${where} (${(error as Error).message}); set TEST_REDIS_URL` }
  } finally {
    redis.disconnect()
  }
}

const hasTool = (tool: string, versionArgs = ['--version']) => spawnSync(tool, versionArgs, { stdio: 'ignore' }).status === 0

const [postgres, redis] = await Promise.all([findPostgres(), findRedis()])
let dropDatabase: (() => Promise<void>) | undefined
if ('url' in postgres) {
  process.env.TEST_DATABASE_URL = postgres.url
  dropDatabase = postgres.drop
  // Ctrl-C (or a SIGTERM) still drops the scratch database: the test processes stop with this one.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      void (postgres.drop?.() ?? Promise.resolve()).finally(() => process.exit(130))
    })
  }
  say(`PostgreSQL: ${postgres.url.replace(/\/\/[^@/]*@/, '//…@')}${postgres.drop ? ' (a scratch database for this run, dropped after)' : ''}`)
} else say(`PostgreSQL: the PostgreSQL suites skip: ${postgres.why}`)
if ('url' in redis) {
  process.env.TEST_REDIS_URL = redis.url
  say(`Redis: ${redis.url.replace(/\/\/[^@/]*@/, '//…@')} (each test under a key prefix of its own, deleted after)`)
} else say(`Redis: the Redis suites skip: ${redis.why}`)
const chromium = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
const tools: [string, boolean, string][] = [
  ['Chromium (browser tier)', existsSync(chromium), `no browser at ${chromium}: apt-get install chromium, or set CHROMIUM_PATH`],
  ['oathtool', hasTool('oathtool'), 'apt-get install oathtool'],
  ['promtool, prometheus', hasTool('promtool'), 'apt-get install prometheus'],
  ['amtool, Alertmanager', hasTool('amtool'), 'apt-get install prometheus-alertmanager'],
  ['openssl', hasTool('openssl', ['version']), 'apt-get install openssl'],
]
for (const [what, present, fix] of tools) say(present ? `${what}: found` : `${what}: the tests that need it skip (${fix})`)
if (process.env.TESSERA_REQUIRE_SERVICES === '1') say('TESSERA_REQUIRE_SERVICES=1: a suite that would skip fails instead')
say(
  `running ${patterns.join(' ')}: ${files.length} files, ${concurrency} at once${inCopy.size > 0 ? ` (${[...inCopy].join(', ')} in test/checks/clean-copy.test.ts's copy)` : ''}`,
)

// Which files run, and since when: a line every 30 s of silence names the ones still running.
const running = new Map<string, number>()
/** How long each file took, from its start to its end (its wait for a place not counted). */
const took = new Map<string, number>()
let done = 0
let lastOutput = Date.now()
const started = Date.now()
const minutes = (ms: number) => `${Math.floor(ms / 60_000)}m${String(Math.floor((ms % 60_000) / 1000)).padStart(2, '0')}s`
const ticker = setInterval(() => {
  if (Date.now() - lastOutput < SILENCE_MS || running.size === 0) return
  const now = Date.now()
  const names = [...running].map(([file, since]) => `${relative(ROOT, file)} (${minutes(now - since)})`).join(', ')
  say(`${minutes(now - started)} in, ${done} files done; still running: ${names}`)
  lastOutput = now
}, 5000)
ticker.unref()

interface Event {
  type: string
  data: { name?: string; file?: string; nesting?: number; success?: boolean; counts?: { tests: number } }
}
// Every test process, and the servers and CLIs they start, keep V8's compiled code of our modules on disk: a CLI's start took
// 0.8 s of CPU, 0.4 s with it, and the suite starts hundreds (Node checks each entry against the file's content).
process.env.NODE_COMPILE_CACHE ??= join(tmpdir(), 'tessera-test-compile-cache')
const stream = run({ files: files.map((file) => resolve(ROOT, file)), concurrency, cwd: ROOT, timeout: TEST_TIMEOUT_MS })
stream.on('data', (event: Event) => {
  const { data } = event
  // A file is a test of its own, named by its path, in the parent process.
  if (data.file !== undefined && data.nesting === 0 && data.name !== undefined && resolve(ROOT, data.name) === data.file) {
    if (event.type === 'test:dequeue') running.set(data.file, Date.now())
    else if (event.type === 'test:complete') {
      const [file, ms] = [relative(ROOT, data.file), Date.now() - (running.get(data.file) ?? started)]
      took.set(file, ms)
      if (process.env.TEST_TIMES === 'all') say(`${file} took ${(ms / 1000).toFixed(1)} s`)
      running.delete(data.file)
      done++
    }
  }
  if (event.type === 'test:summary' && data.file === undefined) process.exitCode = data.success === false ? 1 : 0
})
const reporter = stream.compose(spec)
reporter.on('data', () => {
  lastOutput = Date.now()
})
reporter.pipe(process.stdout)
await new Promise<void>((resolve) => reporter.on('end', resolve))
clearInterval(ticker)
if (dropDatabase !== undefined) await dropDatabase()
// Where the minutes went: the slowest files (with TEST_TIMES=all every file, and each as it ends).
const slowest = [...took].sort((a, b) => b[1] - a[1]).slice(0, process.env.TEST_TIMES === 'all' ? undefined : SLOWEST)
if (slowest.length > 1)
  say(`${process.env.TEST_TIMES === 'all' ? 'files' : 'slowest files'}: ${slowest.map(([file, ms]) => `${file} ${(ms / 1000).toFixed(1)} s`).join(', ')}`)
say(`took ${minutes(Date.now() - started)}`)
