/**
 * Secrets at rest: no store holds a factor's secret in any spelling; a sealed secret moved
 * to another row does not open and is never checked against a code; a new key version
 * re-seals every factor while verifications go on, after which the old version can go.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { randomBytes } from 'node:crypto'
import { DatabaseSync } from 'node:sqlite'
import { codes, post, startApp, tempDir, testClock, type Running } from '../../support/helper.ts'
import { everything, spellings } from '../../support/at-rest.ts'
import { createDatabase, redisEnv, skipUnless, type StoreEnv as Env } from '../../support/services.ts'
import { codeOf, enroll, path, type Created } from '../../support/factors.ts'
import { keyring, parseKeys } from '../../../src/crypto/keyring.ts'
import { Factors } from '../../../src/services/factors.ts'
import { Webhooks } from '../../../src/services/webhooks.ts'
import { openSecret } from '../../../src/webhooks/secret.ts'
import { isFailure } from '../../../src/services/outcome.ts'
import { SYSTEM } from '../../../src/domain/accounts.ts'

const T0 = Date.UTC(2026, 0, 1, 12, 0, 15)
const run = promisify(execFile)
const CLI = new URL('../../../src/admin/cli.ts', import.meta.url).pathname
const keyItem = (version: number) => `${version}:${randomBytes(32).toString('base64')}`

const stores: [string, Env, false | string][] = [
  ['sqlite', async () => ({}), false],
  ['postgres+redis', async (t) => ({ DATABASE_URL: await createDatabase(t), ...(await redisEnv(t)) }), skipUnless('TEST_DATABASE_URL', 'TEST_REDIS_URL')],
]

/** stop closes a node before the next one opens the same store (its own after-hook then finds it closed). */
async function stop(node: Running): Promise<void> {
  await node.app.close()
  await node.store.close()
}

async function wave(app: Running, users: readonly [string, Created][]): Promise<number[]> {
  app.clock.advance(30_000)
  const answers = await Promise.all(users.map(([u, f]) => post(app.url, path(u, '/verify'), app.key, { token: codeOf(f, app.clock.now()) })))
  await Promise.all(answers.map((r) => r.arrayBuffer()))
  return answers.map((r) => r.status)
}

for (const [name, storeEnv, skip] of stores) {
  test(`${name}: after creating factors, no store holds a secret in base32, hex, base64 or raw bytes`, { skip }, async (t) => {
    const env = await storeEnv(t)
    const app = await startApp(t, env, testClock(T0))
    const made: Created[] = []
    for (let i = 0; i < 5; i++) {
      made.push(await enroll(app, `user-${i}`, i % 2 ? { profile: 'any', algorithm: 'SHA512', tokenLength: '8' } : {}))
      app.clock.advance(30_000)
      await post(app.url, path(`user-${i}`, '/verify'), app.key, { token: codeOf(made.at(-1)!, app.clock.now()) })
    }
    // SQLite: pushed from the write-ahead log into the file too, so both places are looked at.
    if (env.DATABASE_URL === undefined) new DatabaseSync(join(app.dataDir, 'tessera.sqlite')).exec('PRAGMA wal_checkpoint(PASSIVE)')
    const dump = await everything(app, env)
    assert.ok(dump.length > 10_000, `looked at ${dump.length} bytes`)
    for (const f of made) {
      for (const s of spellings(f)) assert.equal(dump.indexOf(s), -1, `a spelling of a secret (${s.length} bytes) is in the store`)
    }
    // The check can fail: the same look finds a sealed value the store does hold.
    const row =
      env.DATABASE_URL === undefined
        ? (new DatabaseSync(join(app.dataDir, 'tessera.sqlite')).prepare('SELECT sealed FROM totp_factors LIMIT 1').get()!.sealed as string)
        : null
    if (row !== null) assert.notEqual(dump.indexOf(Buffer.from(row)), -1)
  })

  test(`${name}: every factor re-sealed under a new key version while verifications go on; then the old version is removed`, { skip }, async (t) => {
    const env = await storeEnv(t)
    const dataDir = tempDir(t)
    const v1 = keyItem(1)
    const v2 = keyItem(2)
    const old = await startApp(t, { ...env, DATA_DIR: dataDir, ENCRYPTION_KEYS: v1, PLAN_RATE: '0' }, testClock(T0))
    const users: [string, Created][] = []
    for (let i = 0; i < 60; i += 15) {
      users.push(...(await Promise.all(Array.from({ length: 15 }, async (_, j) => [`u${i + j}`, await enroll(old, `u${i + j}`)] as [string, Created]))))
    }
    // Every node now has both versions (a rolling restart); version 2 seals from then on.
    // (One node at a time here: two SQLite connections in one process would wait on each other's
    // write turn inside one event loop, which separate processes never do.)
    await stop(old)
    const both = await startApp(t, { ...env, DATA_DIR: dataDir, ENCRYPTION_KEYS: `${v1},${v2}`, PLAN_RATE: '0' }, testClock(T0))
    Object.assign(both, { key: old.key })
    const ring = keyring(parseKeys(`${v1},${v2}`))
    let mixedWaves = 0
    const factors = new Factors({ store: both.store, config: both.config, pepper: both.pepper, keyring: ring })
    const rotation = await factors.rotateSeals({
      batch: 7,
      // Between batches, some factors are under version 1 and some under 2: every user verifies.
      onBatch: async () => {
        const versions = await factors.sealVersions()
        if ((versions.get(1) ?? 0) > 0) mixedWaves++
        const statuses = await wave(both, users)
        assert.deepEqual(
          statuses.filter((s) => s !== 200),
          [],
          'every verification succeeds during the rotation',
        )
      },
    })
    assert.equal(rotation.resealed, 60)
    assert.deepEqual(rotation.unreadable, [])
    assert.ok(mixedWaves >= 5, `${mixedWaves} waves ran with both versions in the store`)
    assert.deepEqual(await factors.sealVersions(), new Map([[2, 60]]))

    // Version 1 removed: a node with version 2 alone verifies every factor.
    await stop(both)
    const after = await startApp(t, { ...env, DATA_DIR: dataDir, ENCRYPTION_KEYS: v2, PLAN_RATE: '0' }, testClock(both.clock.now()))
    Object.assign(after, { key: old.key })
    assert.deepEqual(
      (await wave(after, users)).filter((s) => s !== 200),
      [],
    )
    // A node left with version 1 alone cannot open them, and says so rather than count a failure.
    await stop(after)
    const stale = await startApp(t, { ...env, DATA_DIR: dataDir, ENCRYPTION_KEYS: v1, PLAN_RATE: '0' }, testClock(after.clock.now() + 30_000))
    const [u, f] = users[0]!
    const res = await post(stale.url, path(u, '/verify'), old.key, { token: codeOf(f, stale.clock.now()) })
    assert.equal(res.status, 500)
    assert.deepEqual(await codes(res), ['FACTOR_UNREADABLE'])
    assert.ok(stale.logs.some((l) => l.includes('factor secret does not open') && l.includes(f.factorID) && l.includes('key version 2')))
  })
}

test('a sealed secret moved to another row does not open, is never checked against a code, and says so', async (t) => {
  const app = await startApp(t, {}, testClock(T0))
  const a = await enroll(app, 'alice')
  const b = await enroll(app, 'bob')
  const db = new DatabaseSync(join(app.dataDir, 'tessera.sqlite'))
  t.after(() => db.close())
  db.exec('PRAGMA busy_timeout = 5000')
  // Alice's sealed secret copied onto Bob's factor: with it, Alice's codes would pass for Bob's.
  db.prepare('UPDATE totp_factors SET sealed = (SELECT sealed FROM totp_factors WHERE id = ?) WHERE id = ?').run(a.factorID, b.factorID)
  app.clock.advance(30_000)
  const res = await post(app.url, path('bob', '/verify'), app.key, { token: codeOf(a, app.clock.now()) })
  assert.equal(res.status, 500)
  assert.deepEqual(await codes(res), ['FACTOR_UNREADABLE'])
  assert.ok(app.logs.some((l) => l.includes(b.factorID) && l.includes('belongs to another row, or was altered')))
  assert.ok(!app.logs.some((l) => l.includes(a.secretKey)), 'the log never holds a secret')
  // A code no factor of Bob's could match (8 digits, his are 6) is a failed attempt, not an unreadable factor.
  const longer = await post(app.url, path('bob', '/verify'), app.key, { token: '12345678' })
  assert.deepEqual(await codes(longer), ['OTP_INVALID'])
  // Nothing counted against Bob: his lockout record is untouched.
  const right = await post(app.url, path('alice', '/verify'), app.key, { token: codeOf(a, app.clock.now()) })
  assert.equal(right.status, 200)
})

test('npm run admin -- encryption status, generate and rotate', async (t) => {
  const dataDir = tempDir(t)
  const v1 = keyItem(1)
  const app = await startApp(t, { DATA_DIR: dataDir, ENCRYPTION_KEYS: v1 }, testClock(T0))
  await enroll(app, 'x')
  await enroll(app, 'y')
  const hook = await new Webhooks({ store: app.store, keyring: keyring(parseKeys(v1)), config: app.config }).create({ actor: SYSTEM }, app.accountId, {
    url: 'https://hooks.example.com/in',
  })
  assert.ok(!isFailure(hook))
  const cli = async (keys: string, ...args: string[]) => {
    const { stdout } = await run(process.execPath, [CLI, 'encryption', ...args, '--json'], {
      env: { ...process.env, DATA_DIR: dataDir, NODE_ENV: 'test', ENCRYPTION_KEYS: keys },
    })
    return JSON.parse(stdout) as Record<string, unknown>
  }
  const { item } = (await cli(v1, 'generate')) as { item: string }
  assert.match(item, /^2:[A-Za-z0-9+/]{43}=$/)
  assert.deepEqual(await cli(`${v1},${item}`, 'status'), {
    active: 2,
    versions: [
      { version: 1, configured: true, active: false, factors: 2 },
      { version: 2, configured: true, active: true, factors: 0 },
    ],
  })
  const rotated = await cli(`${v1},${item}`, 'rotate', '--batch', '1')
  assert.equal(rotated.resealed, 2)
  assert.equal(rotated.leftUnderOtherVersions, 0)
  assert.deepEqual(rotated.webhookEndpoints, { resealed: 1, unreadable: [] })
  // The endpoint's secret opens under version 2 alone.
  const [sealed] = await app.store.webhooks.sealedSecrets('', 10)
  assert.equal(await openSecret(keyring(parseKeys(item)), sealed!.sealed, { accountId: app.accountId, endpointId: hook.endpoint.id }), hook.secret)
  assert.deepEqual((await cli(item, 'status')).versions, [{ version: 2, configured: true, active: true, factors: 2 }])
})
