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
import { writeFileSync } from 'node:fs'
import { codes, post, startApp, tempDir, testClock, type Running } from '../../support/helper.ts'
import { everything, spellings } from '../../support/at-rest.ts'
import { createDatabase, redisEnv, skipUnless, type StoreEnv as Env } from '../../support/services.ts'
import { codeOf, enroll, path, type Created } from '../../support/factors.ts'
import { keyring, parseKeys } from '../../../src/crypto/keyring.ts'
import { Factors } from '../../../src/services/factors.ts'
import { Webhooks } from '../../../src/services/webhooks.ts'
import { openSecret } from '../../../src/webhooks/secret.ts'
import { sealedPortal } from '../../../src/services/users/sealed.ts'
import { isFailure } from '../../../src/services/outcome.ts'
import { SYSTEM } from '../../../src/domain/accounts.ts'
import { secretsContext } from '../../../src/domain/jobs.ts'

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
  // A single sign-on provider's client secret, sealed with the portal's secrets.
  writeFileSync(join(dataDir, 'sso-secret'), 'an sso client secret')
  await run(
    process.execPath,
    [CLI, 'sso', 'add', 'kc', '--name', 'K', '--issuer', 'https://id.example.com', '--client-id', 'c', '--client-secret-file', join(dataDir, 'sso-secret')],
    {
      env: { ...process.env, DATA_DIR: dataDir, NODE_ENV: 'test', ENCRYPTION_KEYS: v1 },
    },
  )
  const { item } = (await cli(v1, 'generate')) as { item: string }
  assert.match(item, /^2:[A-Za-z0-9+/]{43}=$/)
  const none = { idempotencyAnswers: 0, jobSecrets: 0 }
  assert.deepEqual(await cli(`${v1},${item}`, 'status'), {
    active: 2,
    versions: [
      { version: 1, configured: true, active: false, factors: 2, portalUsers: 1, webhookEndpoints: 1, ...none, total: 4 },
      { version: 2, configured: true, active: true, factors: 0, portalUsers: 0, webhookEndpoints: 0, ...none, total: 0 },
    ],
  })
  const rotated = await cli(`${v1},${item}`, 'rotate', '--batch', '1')
  assert.equal(rotated.resealed, 2)
  assert.equal(rotated.leftUnderOtherVersions, 0)
  assert.deepEqual(rotated.webhookEndpoints, { resealed: 1, unreadable: [] })
  assert.deepEqual(rotated.portalUsers, { resealed: 1, unreadable: [] })
  assert.equal((await sealedPortal(app.store.portal, keyring(parseKeys(item))).getSsoProvider('kc'))?.clientSecret, 'an sso client secret')
  // The endpoint's secret opens under version 2 alone.
  const [sealed] = await app.store.webhooks.sealedSecrets('', 10)
  assert.equal(await openSecret(keyring(parseKeys(item)), sealed!.sealed, { accountId: app.accountId, endpointId: hook.endpoint.id }), hook.secret)
  assert.deepEqual((await cli(item, 'status')).versions, [
    { version: 2, configured: true, active: true, factors: 2, portalUsers: 1, webhookEndpoints: 1, ...none, total: 4 },
  ])
})

/** The stores the rotation of every sealed kind is tested on through the CLI (a process of its own, on the same store). */
const sqlStores: [string, Env, false | string][] = [
  ['sqlite', async () => ({}), false],
  ['postgres', async (t) => ({ DATABASE_URL: await createDatabase(t) }), skipUnless('TEST_DATABASE_URL')],
]

/** adminCli runs `npm run admin -- <args> --json` on the test's store with `keys` as ENCRYPTION_KEYS. */
async function adminCli(env: Record<string, string>, dataDir: string, keys: string, ...args: string[]): Promise<Record<string, unknown>> {
  const { stdout } = await run(process.execPath, [CLI, ...args, '--json'], {
    env: { ...process.env, ...env, DATA_DIR: dataDir, NODE_ENV: 'test', ENCRYPTION_KEYS: keys },
  })
  return JSON.parse(stdout) as Record<string, unknown>
}

const createKeyed = (app: Running, user: string, idem: string) =>
  post(app.url, path(user, '/factors'), app.key, { applicationID: 'Acme' }, { 'idempotency-key': idem })

for (const [name, storeEnv, skip] of sqlStores) {
  test(`${name}: encryption rotate re-seals kept Idempotency-Key answers and job secrets too; with version 1 removed a replay answers the same`, {
    skip,
  }, async (t) => {
    const env = await storeEnv(t)
    const dataDir = tempDir(t)
    const v1 = keyItem(1)
    const nodeEnv = { ...env, DATA_DIR: dataDir, PLAN_RATE: '0', JOB_WORKERS: '0', WEBHOOK_ALLOW_PRIVATE: 'true' }
    const old = await startApp(t, { ...nodeEnv, ENCRYPTION_KEYS: v1 }, testClock(T0))
    const first = await createKeyed(old, 'alice', 'rotate-1')
    assert.equal(first.status, 201)
    const answer = await first.text()
    // A webhook endpoint, and a queued job with secrets (its password and source URL; no node runs jobs here).
    const hook = await new Webhooks({ store: old.store, keyring: keyring(parseKeys(v1)), config: old.config }).create({ actor: SYSTEM }, old.accountId, {
      url: 'https://hooks.example.com/in',
    })
    assert.ok(!isFailure(hook))
    const submitted = await fetch(`${old.url}/converter/jobs`, {
      method: 'POST',
      headers: { 'x-api-key': old.key, 'content-type': 'application/json' },
      body: JSON.stringify({ operation: 'image', sourceUrl: 'http://127.0.0.1:9/doc.pdf', password: 'pdf-pass-secret' }),
    })
    assert.equal(submitted.status, 202, await submitted.clone().text())
    const jobId = ((await submitted.json()) as { jobID: string }).jobID
    await stop(old)

    const { item: v2 } = (await adminCli(env, dataDir, v1, 'encryption', 'generate')) as { item: string }
    const both = `${v1},${v2}`
    const kinds = { factors: 1, portalUsers: 0, webhookEndpoints: 1, idempotencyAnswers: 1, jobSecrets: 1, total: 4 }
    const none = { factors: 0, portalUsers: 0, webhookEndpoints: 0, idempotencyAnswers: 0, jobSecrets: 0, total: 0 }
    assert.deepEqual(await adminCli(env, dataDir, both, 'encryption', 'status'), {
      active: 2,
      versions: [
        { version: 1, configured: true, active: false, ...kinds },
        { version: 2, configured: true, active: true, ...none },
      ],
    })
    const rotated = await adminCli(env, dataDir, both, 'encryption', 'rotate', '--batch', '1')
    assert.equal(rotated.resealed, 1)
    assert.deepEqual(rotated.idempotencyAnswers, { resealed: 1, unreadable: [] })
    assert.deepEqual(rotated.jobSecrets, { resealed: 1, unreadable: [] })
    assert.deepEqual(rotated.webhookEndpoints, { resealed: 1, unreadable: [] })
    assert.equal(rotated.leftUnderOtherVersions, 0)
    // Version 1 removed (status said 0 under it): status counts every kind under version 2.
    assert.deepEqual(await adminCli(env, dataDir, v2, 'encryption', 'status'), {
      active: 2,
      versions: [{ version: 2, configured: true, active: true, ...kinds }],
    })

    const after = await startApp(t, { ...nodeEnv, ENCRYPTION_KEYS: v2 }, testClock(T0 + 60_000))
    Object.assign(after, { key: old.key })
    const replay = await createKeyed(after, 'alice', 'rotate-1')
    assert.equal(replay.status, 201)
    assert.equal(replay.headers.get('idempotent-replayed'), 'true')
    assert.equal(await replay.text(), answer, 'the same answer, its secret included')
    // The job's secrets open under version 2 alone, for their own job.
    const [sealed] = await after.store.jobs.sealedSecrets('', 10)
    assert.equal(sealed!.row.id, jobId)
    const secrets = JSON.parse(keyring(parseKeys(v2)).open(sealed!.sealed, secretsContext(old.accountId, jobId)).toString('utf8')) as { password: string }
    assert.equal(secrets.password, 'pdf-pass-secret')
  })

  test(`${name}: a kept answer whose key version was removed without a rotation is a 409 IDEMPOTENCY_ANSWER_UNREADABLE, never a 500, nor made again`, {
    skip,
  }, async (t) => {
    const env = await storeEnv(t)
    const dataDir = tempDir(t)
    const v1 = keyItem(1)
    const old = await startApp(t, { ...env, DATA_DIR: dataDir, PLAN_RATE: '0', ENCRYPTION_KEYS: v1 }, testClock(T0))
    const made = (await (await createKeyed(old, 'bob', 'lost-1')).json()) as Created
    await stop(old)
    const after = await startApp(t, { ...env, DATA_DIR: dataDir, PLAN_RATE: '0', ENCRYPTION_KEYS: keyItem(2) }, testClock(T0 + 60_000))
    Object.assign(after, { key: old.key })
    const replay = await createKeyed(after, 'bob', 'lost-1')
    assert.equal(replay.status, 409)
    assert.deepEqual(await codes(replay), ['IDEMPOTENCY_ANSWER_UNREADABLE'])
    const lines = after.logs.filter((l) => l.includes('kept Idempotency-Key answer does not open'))
    assert.equal(lines.length, 1, 'one line for the one replay')
    assert.match(lines[0]!, /key version 1, which is not configured/)
    assert.ok(!after.logs.some((l) => l.includes(made.secretKey)), 'the log never holds the secret')
    const listed = (await (await fetch(after.url + path('bob', '/factors'), { headers: { 'x-api-key': after.key } })).json()) as { factors: unknown[] }
    assert.equal(listed.factors.length, 1, 'the request was not made again')
  })
}
