/**
 * Idempotency-Key on the calls that create (issue 29): the same key and request answer as the
 * first did, with the same secret, once however many arrive at once, on every store; another
 * request with the key is a 422; the kept answer is sealed (no secret in the store) and gone
 * after its 24 hours; a request under way makes the next one wait, or hear it is busy.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { codes, createCaller, post, startApp, testClock } from '../../support/helper.ts'
import { startAdmin } from '../../support/admin-helper.ts'
import { createDatabase, redisEnv, skipUnless, type StoreEnv as Env } from '../../support/services.ts'
import { path, type Created } from '../../support/factors.ts'
import { SQLITE_FILE } from '../../../src/storage/factory.ts'
import { fingerprint } from '../../../src/services/idempotency.ts'

const T0 = Date.UTC(2026, 0, 1, 12, 0, 15)
const DAY = 86_400_000

const stores: [string, Env, false | string][] = [
  ['sqlite', async () => ({}), false],
  ['postgres', async (t) => ({ DATABASE_URL: await createDatabase(t) }), skipUnless('TEST_DATABASE_URL')],
  ['postgres+redis', async (t) => ({ DATABASE_URL: await createDatabase(t), ...(await redisEnv(t)) }), skipUnless('TEST_DATABASE_URL', 'TEST_REDIS_URL')],
]

const create = (url: string, key: string, user: string, idem: string, fields: Record<string, string> = {}) =>
  post(url, path(user, '/factors'), key, { applicationID: 'Acme', ...fields }, { 'idempotency-key': idem })

for (const [name, env, skip] of stores) {
  test(`${name}: 20 parallel identical creations with one Idempotency-Key make one factor, and all answer its secret`, { skip }, async (t) => {
    const app = await startApp(t, { ...(await env(t)), PLAN_RATE: '0' }, testClock(T0))
    const answers = await Promise.all(Array.from({ length: 20 }, () => create(app.url, app.key, 'alice', 'a3f1c2e4-0000-4000-8000-000000000001')))
    const bodies = await Promise.all(
      answers.map(async (r) => ({ status: r.status, replayed: r.headers.get('idempotent-replayed'), body: (await r.json()) as Created })),
    )
    assert.deepEqual(new Set(bodies.map((b) => b.status)), new Set([201]))
    assert.equal(new Set(bodies.map((b) => b.body.factorID)).size, 1, 'one factor')
    assert.equal(new Set(bodies.map((b) => b.body.secretKey)).size, 1, 'one secret, the same in every answer')
    assert.equal(bodies.filter((b) => b.replayed === 'true').length, 19, 'the first made it, the others replayed it')
    const listed = (await (await fetch(app.url + path('alice', '/factors'), { headers: { 'x-api-key': app.key } })).json()) as { factors: unknown[] }
    assert.equal(listed.factors.length, 1)

    // Recovery codes: a retry answers the same codes (and does not replace them); a new key, new codes.
    const regen = (idem: string) => post(app.url, path('alice', '/recovery-codes'), app.key, {}, { 'idempotency-key': idem })
    const first = (await (await regen('codes-1')).json()) as { recoveryCodes: string[] }
    const again = (await (await regen('codes-1')).json()) as { recoveryCodes: string[] }
    assert.deepEqual(again.recoveryCodes, first.recoveryCodes)
    const other = (await (await regen('codes-2')).json()) as { recoveryCodes: string[] }
    assert.notDeepEqual(other.recoveryCodes, first.recoveryCodes)
  })
}

const everyStore: [string, Env, false | string][] = [...stores.slice(0, 2), ['sqlite+redis', redisEnv, skipUnless('TEST_REDIS_URL')], stores[2]!]

for (const [name, env, skip] of everyStore) {
  test(`${name}: 60 creations at once with 60 new keys keep IDEMPOTENCY_KEYS_PER_ACCOUNT (12) records, the rest 429 and not made; another account is not affected`, {
    skip,
  }, async (t) => {
    const clock = testClock(T0)
    const app = await startApp(t, { ...(await env(t)), PLAN_RATE: '0', IDEMPOTENCY_KEYS_PER_ACCOUNT: '12' }, clock)
    const answers = await Promise.all(Array.from({ length: 60 }, (_, i) => create(app.url, app.key, `flood-${i}`, `key-${i}`)))
    const got = await Promise.all(answers.map(async (r) => ({ status: r.status, retryAfter: r.headers.get('retry-after'), codes: r.ok ? [] : await codes(r) })))
    const made = got.flatMap((g, i) => (g.status === 201 ? [i] : []))
    assert.equal(made.length, 12)
    const refused = got.filter((g) => g.status === 429)
    assert.equal(refused.length, 48)
    assert.deepEqual(new Set(refused.map((g) => `${g.codes.join()} ${g.retryAfter}`)), new Set(['IDEMPOTENCY_KEYS_PER_ACCOUNT 86400']))
    // Refused means not made: no factor for those users, and no record of their keys.
    const owner = `account:${app.accountId}`
    const kept = await Promise.all(Array.from({ length: 60 }, (_, i) => app.store.idempotency.get(owner, `key-${i}`, clock.now())))
    assert.deepEqual(
      kept.flatMap((k, i) => (k === null ? [] : [i])),
      made,
    )
    const refusedUser = got.findIndex((g) => g.status === 429)
    const theirs = await fetch(app.url + path(`flood-${refusedUser}`, '/factors'), { headers: { 'x-api-key': app.key } })
    assert.equal(theirs.status, 404, 'the refused request made nothing')
    await theirs.arrayBuffer()

    // A key kept still answers; a request without the header is not affected; another account has its own room.
    const again = await create(app.url, app.key, `flood-${made[0]}`, `key-${made[0]}`)
    assert.equal(again.status, 201)
    assert.equal(again.headers.get('idempotent-replayed'), 'true')
    await again.arrayBuffer()
    const plain = await post(app.url, path('no-key', '/factors'), app.key, { applicationID: 'Acme' })
    assert.equal(plain.status, 201)
    await plain.arrayBuffer()
    const other = await createCaller(app.accounts)
    const elsewhere = await create(app.url, other.apiKey, 'someone', 'key-0')
    assert.equal(elsewhere.status, 201)
    await elsewhere.arrayBuffer()

    // After their 24 hours the records count no more (and go as new ones come).
    clock.advance(DAY + 1000)
    const later = await Promise.all(Array.from({ length: 20 }, (_, i) => create(app.url, app.key, `later-${i}`, `later-${i}`)))
    assert.deepEqual(later.map((r) => r.status).sort(), [...Array(12).fill(201), ...Array(8).fill(429)])
    await Promise.all(later.map((r) => r.arrayBuffer()))
    for (let i = 0; i < 60; i++) assert.equal(await app.store.idempotency.get(owner, `key-${i}`, T0), null, 'expired records were reclaimed')
  })

  test(`${name}: IDEMPOTENCY_BYTES_PER_ACCOUNT caps the bytes an account keeps of its answers`, { skip }, async (t) => {
    const app = await startApp(t, { ...(await env(t)), PLAN_RATE: '0', IDEMPOTENCY_BYTES_PER_ACCOUNT: '4096' }, testClock(T0))
    // A factor's answer (its QR code included) is kept sealed in about 1.7 KB. A new key is taken while the account keeps
    // at most 4 KB: the third is the last (its answer, under way when the cap is reached, is kept), then new keys are refused.
    const statuses: number[] = []
    for (let i = 0; i < 5; i++) {
      const r = await create(app.url, app.key, `bytes-${i}`, `bytes-${i}`)
      statuses.push(r.status)
      await r.arrayBuffer()
    }
    assert.deepEqual(statuses, [201, 201, 201, 429, 429])
  })
}

test('another request with the key is a 422; another account has keys of its own; the kept answer is sealed and goes after 24 hours', async (t) => {
  const clock = testClock(T0)
  const app = await startApp(t, { PLAN_RATE: '0' }, clock)
  const made = (await (await create(app.url, app.key, 'bob', 'key-1')).json()) as Created
  const other = await create(app.url, app.key, 'bob', 'key-1', { label: 'Work phone' })
  assert.equal(other.status, 422)
  assert.deepEqual(await codes(other), ['IDEMPOTENCY_KEY_REUSED'])
  const elsewhere = await create(app.url, app.key, 'carol', 'key-1')
  assert.equal(elsewhere.status, 422, 'another path is another request')
  await elsewhere.arrayBuffer()
  const bad = await create(app.url, app.key, 'bob', 'caf\u00e9')
  assert.deepEqual(await codes(bad), ['IDEMPOTENCY_KEY_INVALID'])

  // At rest: the answer is sealed (its secret nowhere in the file, in base32 or its bytes).
  const file = readFileSync(join(app.dataDir, SQLITE_FILE))
  for (const form of [made.secretKey, Buffer.from(made.QRCode.slice(22), 'base64').subarray(0, 64).toString('latin1')]) {
    assert.equal(file.includes(form), false)
  }
  const owner = `account:${app.accountId}`
  const kept = await app.store.idempotency.get(owner, 'key-1', clock.now())
  assert.ok(kept !== null && kept.sealed !== null && !kept.sealed.includes(made.secretKey))

  // After its 24 hours the key is free: the same request makes a new factor; pruned, the sealed answer is gone.
  clock.advance(DAY + 1000)
  assert.equal(await app.store.idempotency.get(owner, 'key-1', clock.now()), null)
  const later = await create(app.url, app.key, 'bob', 'key-1')
  assert.equal(later.status, 201)
  assert.notEqual(((await later.json()) as Created).factorID, made.factorID)
  clock.advance(DAY + 1000)
  assert.ok((await app.store.idempotency.prune(clock.now())) >= 1)
  assert.equal(await app.store.idempotency.get(owner, 'key-1', T0), null, 'no record left at all')
})

test('a request under way holds its key: the next waits for its answer, or hears it is busy; a fault frees the key', async (t) => {
  const app = await startApp(t, { IDEMPOTENCY_WAIT_MS: '0' }, testClock(T0))
  const owner = `account:${app.accountId}`
  const print = fingerprint('POST', '/x', { a: 1 })
  assert.deepEqual(await app.idempotency.begin(owner, 'k', print), { kind: 'started' })
  assert.deepEqual(await app.idempotency.begin(owner, 'k', print), { kind: 'busy' })
  assert.deepEqual(await app.idempotency.begin(owner, 'k', fingerprint('POST', '/x', { a: 2 })), { kind: 'mismatch' })
  assert.equal(fingerprint('POST', '/x', { a: 1, b: 2 }), fingerprint('POST', '/x', { b: 2, a: 1 }), 'field order does not matter')
  await app.idempotency.abandon(owner, 'k', print)
  assert.deepEqual(await app.idempotency.begin(owner, 'k', print), { kind: 'started' })
  await app.idempotency.finish(owner, 'k', print, { status: 201, contentType: 'application/json', body: '{"ok":true}' })
  const replay = await app.idempotency.begin(owner, 'k', print)
  assert.deepEqual(replay, { kind: 'replay', answer: { status: 201, contentType: 'application/json', body: '{"ok":true}' } })

  // Waiting: a second begin while the first is under way gets the first's answer once it comes.
  const waiting = await startApp(t, { IDEMPOTENCY_WAIT_MS: '5000' }, testClock(T0))
  const o2 = `account:${waiting.accountId}`
  assert.equal((await waiting.idempotency.begin(o2, 'w', print)).kind, 'started')
  const second = waiting.idempotency.begin(o2, 'w', print)
  await new Promise((r) => setTimeout(r, 100))
  await waiting.idempotency.finish(o2, 'w', print, { status: 200, contentType: 'application/json', body: '{}' })
  assert.deepEqual(await second, { kind: 'replay', answer: { status: 200, contentType: 'application/json', body: '{}' } })
})

test("the admin API's creations take the key: 20 parallel account creations make one account; a retried key creation answers the same key", async (t) => {
  const a = await startAdmin(t, {}, testClock(T0))
  const call = (method: string, url: string, body: unknown, idem: string) =>
    fetch(a.url + url, {
      method,
      headers: { authorization: `Bearer ${a.write.secret}`, 'content-type': 'application/json', 'idempotency-key': idem },
      body: JSON.stringify(body),
    })
  const answers = await Promise.all(Array.from({ length: 20 }, () => call('POST', '/admin/v1/accounts', { name: 'Once Ltd' }, 'acct-1')))
  const ids = await Promise.all(
    answers.map(async (r) => ({ status: r.status, location: r.headers.get('location'), id: ((await r.json()) as { id: string }).id })),
  )
  assert.deepEqual(new Set(ids.map((x) => x.status)), new Set([201]))
  assert.equal(new Set(ids.map((x) => x.id)).size, 1)
  assert.equal(new Set(ids.map((x) => x.location)).size, 1, 'the replay keeps the Location')
  const listed = await a.pub.accounts.listAccounts({ limit: 100, name: 'Once Ltd' })
  assert.equal(listed.items.length, 1)

  const accountId = ids[0]!.id
  const k1 = (await (await call('POST', `/admin/v1/accounts/${accountId}/keys`, { name: 'ci' }, 'key-1')).json()) as { id: string; apiKey: string }
  const k2 = (await (await call('POST', `/admin/v1/accounts/${accountId}/keys`, { name: 'ci' }, 'key-1')).json()) as { id: string; apiKey: string }
  assert.deepEqual(k2, k1)
  const mismatch = await call('POST', `/admin/v1/accounts/${accountId}/keys`, { name: 'other' }, 'key-1')
  assert.equal(mismatch.status, 422)
  assert.deepEqual(
    ((await mismatch.json()) as { code: string }[]).map((e) => e.code),
    ['IDEMPOTENCY_KEY_REUSED'],
  )
})

test('an admin token keeps at most IDEMPOTENCY_KEYS_PER_ACCOUNT records too: past it a new key is 409 LIMIT_REACHED (the admin API answers in lists), with Retry-After', async (t) => {
  const a = await startAdmin(t, { IDEMPOTENCY_KEYS_PER_ACCOUNT: '2' }, testClock(T0))
  const make = (idem: string) =>
    fetch(`${a.url}/admin/v1/accounts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${a.write.secret}`, 'content-type': 'application/json', 'idempotency-key': idem },
      body: JSON.stringify({ name: `Capped ${idem}` }),
    })
  const answers = await Promise.all(['a', 'b', 'c', 'd', 'e'].map(make))
  const got = await Promise.all(answers.map(async (r) => `${r.status} ${r.headers.get('retry-after') ?? ''} ${r.ok ? '' : (await codes(r)).join()}`.trim()))
  assert.deepEqual(got.sort(), ['201', '201', '409 86400 LIMIT_REACHED', '409 86400 LIMIT_REACHED', '409 86400 LIMIT_REACHED'])
  const listed = await a.pub.accounts.listAccounts({ limit: 100, name: 'Capped' })
  assert.equal(listed.items.filter((x) => x.name.startsWith('Capped')).length, 2, 'the refused ones made nothing')
})
