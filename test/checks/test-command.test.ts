/**
 * The test command itself (scripts/test.ts), as a newcomer runs it with TEST_DATABASE_URL and
 * TEST_REDIS_URL unset: with PostgreSQL and Redis away (their addresses pointed at closed
 * ports), it says before the first test that their suites skip and why, and the suites do skip;
 * with them on their local addresses, it makes a scratch database, skips nothing, and drops
 * the database after.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { createServer } from 'node:net'
import { resolve } from 'node:path'
import pg from 'pg'
import { databaseUrl, skipUnless } from '../support/services.ts'

const ROOT = resolve(import.meta.dirname, '../..')
/** A quick file that needs PostgreSQL (it compares the two stores' schemas). */
const NEEDS_POSTGRES = 'test/storage/schema.test.ts'

/** closedPort: a port nothing listens on (taken, then let go). */
async function closedPort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done))
  const { port } = server.address() as { port: number }
  await new Promise((done) => server.close(done))
  return port
}

/** runTests runs the test command on `files` as a newcomer would: no TEST_* address, not in CI. */
function runTests(files: string[], env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  const clean = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !['TEST_DATABASE_URL', 'TEST_REDIS_URL', 'TESSERA_REQUIRE_SERVICES', 'NODE_TEST_CONTEXT'].includes(k)),
  )
  const child = spawn(process.execPath, ['scripts/test.ts', ...files], { cwd: ROOT, env: { ...clean, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  child.stdout.on('data', (c: Buffer) => (out += c.toString()))
  child.stderr.on('data', (c: Buffer) => (out += c.toString()))
  return new Promise((done) => child.on('close', (code) => done({ code, out })))
}

const summary = (out: string, what: string) => Number(new RegExp(`^ℹ ${what} (\\d+)$`, 'm').exec(out)?.[1] ?? Number.NaN)

test('with PostgreSQL and Redis away, the test command says first what skips and why, and skips it', async () => {
  const [pgPort, redisPort] = [await closedPort(), await closedPort()]
  const { code, out } = await runTests([NEEDS_POSTGRES], {
    PGHOST: '127.0.0.1',
    PGPORT: String(pgPort),
    REDIS_HOST: '127.0.0.1',
    REDIS_PORT: String(redisPort),
  })
  assert.equal(code, 0, out)
  const header = out.slice(0, out.indexOf('# running'))
  assert.match(
    header,
    new RegExp(`^# PostgreSQL: the PostgreSQL suites skip: no PostgreSQL answered at 127\\.0\\.0\\.1:${pgPort} as \\S+ .*; set TEST_DATABASE_URL$`, 'm'),
  )
  assert.match(header, new RegExp(`^# Redis: the Redis suites skip: no Redis answered at 127\\.0\\.0\\.1:${redisPort} .*; set TEST_REDIS_URL$`, 'm'))
  assert.ok(out.indexOf('# running') < out.indexOf('ℹ tests'), 'said before the tests ran')
  assert.equal(summary(out, 'skipped'), summary(out, 'tests'), 'every test of the file skipped')
  assert.ok(summary(out, 'skipped') > 0)
})

test('with PostgreSQL and Redis on their local addresses, it skips nothing and drops its scratch database', {
  skip: skipUnless('TEST_DATABASE_URL', 'TEST_REDIS_URL'),
}, async () => {
  const server = new URL(databaseUrl())
  const redis = new URL(process.env.TEST_REDIS_URL!)
  const { code, out } = await runTests([NEEDS_POSTGRES], {
    PGHOST: server.hostname,
    PGPORT: server.port || '5432',
    PGUSER: decodeURIComponent(server.username) || 'postgres',
    ...(server.password === '' ? {} : { PGPASSWORD: decodeURIComponent(server.password) }),
    REDIS_HOST: redis.hostname,
    REDIS_PORT: redis.port || '6379',
  })
  assert.equal(code, 0, out)
  const scratch = /^# PostgreSQL: postgres:\/\/…@[^/]+\/(tessera_test_[0-9a-f]{8}) \(a scratch database for this run, dropped after\)$/m.exec(out)?.[1]
  assert.ok(scratch, out.slice(0, 2000))
  assert.ok(out.includes(`# Redis: redis://${redis.hostname}:${redis.port || '6379'} `), out.slice(0, 2000))
  assert.equal(summary(out, 'skipped'), 0)
  assert.ok(summary(out, 'pass') > 0)
  const admin = new pg.Client({ connectionString: databaseUrl() })
  await admin.connect()
  try {
    const { rows } = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [scratch])
    assert.equal(rows.length, 0, `${scratch} was dropped`)
  } finally {
    await admin.end()
  }
})
