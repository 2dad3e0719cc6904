/**
 * Keys are bounded by construction, through the real app and its admin API on SQLite and on
 * PostgreSQL: a roll ends the grace of the key rolled to the one it rolls (and a revocation
 * does the same), so a chain of rolls has at most two working keys and an account at most
 * twice KEY_MAX_PER_ACCOUNT, whatever runs in parallel. What works is asked of the gateway
 * itself: every key the test was given is tried on /totp/ping. A creation or a roll deletes
 * the account's ended keys past KEY_ENDED_KEPT_PER_ACCOUNT in its own step.
 */
import { test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { get } from '../../support/helper.ts'
import { admin as cli, startAdmin, type Admin } from '../../support/admin-helper.ts'
import { createDatabase, skipUnless, type StoreEnv as Env } from '../../support/services.ts'

const stores: [string, Env, false | string][] = [
  ['sqlite', async () => ({}), false],
  ['postgres', async (t) => ({ DATABASE_URL: await createDatabase(t) }), skipUnless('TEST_DATABASE_URL')],
]

interface Key {
  id: string
  apiKey: string
  revokedAt: string | null
  expiresAt: string | null
  rolledTo: string | null
}

function call(a: Admin, method: string, path: string, body?: unknown): Promise<Response> {
  return fetch(a.url + path, {
    method,
    headers: { authorization: `Bearer ${a.write.secret}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
}

async function json<T>(res: Response, status: number): Promise<T> {
  const text = await res.text()
  assert.equal(res.status, status, text)
  return JSON.parse(text) as T
}

/** account: a new account subscribed to TOTP in eu, the region the node serves. */
async function account(a: Admin): Promise<string> {
  const { id } = await json<{ id: string }>(await call(a, 'POST', '/admin/v1/accounts', { name: 'Bounded' }), 201)
  await json(await call(a, 'PUT', `/admin/v1/accounts/${id}/subscriptions/eu/totp`, { status: 'active' }), 200)
  return id
}

const create = async (a: Admin, accountId: string, body: Record<string, unknown> = {}) =>
  json<Key>(await call(a, 'POST', `/admin/v1/accounts/${accountId}/keys`, body), 201)
const roll = async (a: Admin, id: string, graceSeconds = 3600) => json<Key>(await call(a, 'POST', `/admin/v1/keys/${id}/roll`, { graceSeconds }), 201)

/** pings: the status /totp/ping answers each key. */
async function pings(a: Admin, keys: readonly string[]): Promise<number[]> {
  return Promise.all(
    keys.map(async (key) => {
      const res = await get(a.pub.url, '/totp/ping', key)
      await res.arrayBuffer()
      return res.status
    }),
  )
}

/** working: the keys of the account that the store says still work (not revoked, not expired), by the admin API's list. */
async function working(a: Admin, accountId: string): Promise<Key[]> {
  const { items } = await json<{ items: Key[] }>(await call(a, 'GET', `/admin/v1/accounts/${accountId}/keys`), 200)
  return items.filter((k) => k.revokedAt === null && (k.expiresAt === null || Date.parse(k.expiresAt) > a.clock.now()))
}

const workingIds = async (a: Admin, accountId: string) => (await working(a, accountId)).map((k) => k.id).sort()

for (const [name, env, skip] of stores) {
  const start = async (t: TestContext, extra: Record<string, string> = {}) => startAdmin(t, { REGION: 'eu', ...(await env(t)), ...extra })

  test(`${name}: a chain of rolls keeps at most two working keys: rolling a key ends the grace of the one rolled to it, at once; so does revoking it`, {
    skip,
  }, async (t) => {
    const a = await start(t)
    const accountId = await account(a)
    const k0 = await create(a, accountId)
    const k1 = await roll(a, k0.id)
    assert.deepEqual(await pings(a, [k0.apiKey, k1.apiKey]), [200, 200], 'the old key works in its grace')
    const k2 = await roll(a, k1.id)
    const unknown = await get(a.pub.url, '/totp/ping', `tsr_${'0'.repeat(40)}`)
    const refusal = await unknown.text()
    const first = await get(a.pub.url, '/totp/ping', k0.apiKey)
    assert.equal(first.status, 403, 'the first key stops at once when the key it was rolled to is rolled in turn')
    assert.equal(await first.text(), refusal, "the unknown key's refusal, byte for byte")
    assert.deepEqual(await pings(a, [k1.apiKey, k2.apiKey]), [200, 200])
    const k3 = await roll(a, k2.id)
    assert.deepEqual(await pings(a, [k0.apiKey, k1.apiKey, k2.apiKey, k3.apiKey]), [403, 403, 200, 200])
    assert.deepEqual(await workingIds(a, accountId), [k2.id, k3.id].sort(), 'two working keys in the store')
    const k1Now = await json<Key>(await call(a, 'GET', `/admin/v1/keys/${k1.id}`), 200)
    assert.deepEqual([k1Now.expiresAt, k1Now.revokedAt, k1Now.rolledTo], [new Date(a.clock.now()).toISOString(), null, k2.id], 'its grace ended now')

    // Revoking the live key ends the grace of the key rolled to it: a revoked successor leaves no working predecessor behind.
    await json(await call(a, 'DELETE', `/admin/v1/keys/${k3.id}`), 200)
    assert.deepEqual(await pings(a, [k2.apiKey, k3.apiKey]), [403, 403])
    assert.deepEqual(await working(a, accountId), [])
  })

  test(`${name}: fifty rolls of one key at once: one wins, the key rolled to it stops, two keys work`, { skip }, async (t) => {
    const a = await start(t)
    const accountId = await account(a)
    const k0 = await create(a, accountId)
    const k1 = await roll(a, k0.id)
    const answers = await Promise.all(Array.from({ length: 50 }, () => call(a, 'POST', `/admin/v1/keys/${k1.id}/roll`, { graceSeconds: 3600 })))
    const bodies = await Promise.all(answers.map((r) => r.text()))
    assert.deepEqual(answers.map((r) => r.status).sort(), [201, ...Array(49).fill(409)])
    const won = JSON.parse(bodies[answers.findIndex((r) => r.status === 201)]!) as Key
    assert.deepEqual(await pings(a, [k0.apiKey, k1.apiKey, won.apiKey]), [403, 200, 200])
    assert.deepEqual(await workingIds(a, accountId), [k1.id, won.id].sort())
  })

  test(`${name}: creations, rolls and revocations in parallel at the cap never leave more than twice KEY_MAX_PER_ACCOUNT keys working, nor more rows than that and KEY_ENDED_KEPT_PER_ACCOUNT`, {
    skip,
    timeout: 120_000,
  }, async (t) => {
    const cap = 3
    const endedKept = 4
    const a = await start(t, { KEY_MAX_PER_ACCOUNT: String(cap), KEY_ENDED_KEPT_PER_ACCOUNT: String(endedKept) })
    const accountId = await account(a)
    const rows = async () => (await json<{ items: Key[] }>(await call(a, 'GET', `/admin/v1/accounts/${accountId}/keys`), 200)).items.length
    const seen: string[] = []
    const keep = (k: Key) => {
      seen.push(k.apiKey)
      return k
    }
    // A creation, a roll of it and a revocation of the new key, in turn: the way to pile up old keys in their grace.
    const cycle = async () => {
      const made = await call(a, 'POST', `/admin/v1/accounts/${accountId}/keys`, {})
      if (made.status !== 201) return void (await made.arrayBuffer())
      const key = keep(await json<Key>(made, 201))
      const rolled = await call(a, 'POST', `/admin/v1/keys/${key.id}/roll`, { graceSeconds: 604_800 })
      if (rolled.status !== 201) return void (await rolled.arrayBuffer())
      const next = keep(await json<Key>(rolled, 201))
      await (await call(a, 'DELETE', `/admin/v1/keys/${next.id}`)).arrayBuffer()
    }
    for (let round = 0; round < 4; round++) {
      const live = (await working(a, accountId)).filter((k) => k.rolledTo === null)
      await Promise.all([
        ...Array.from({ length: 10 }, async () => {
          const res = await call(a, 'POST', `/admin/v1/accounts/${accountId}/keys`, {})
          if (res.status === 201) keep(await json<Key>(res, 201))
          else assert.equal(res.status, 409, await res.text())
        }),
        ...live.flatMap((k) =>
          Array.from({ length: 5 }, async () => {
            const res = await call(a, 'POST', `/admin/v1/keys/${k.id}/roll`, { graceSeconds: 604_800 })
            if (res.status === 201) keep(await json<Key>(res, 201))
            else assert.equal(res.status, 409, await res.text())
          }),
        ),
        ...Array.from({ length: 3 }, cycle),
      ])
      const statuses = await pings(a, seen)
      const works = statuses.filter((s) => s === 200).length
      assert.ok(works <= 2 * cap, `round ${round}: ${works} of the ${seen.length} keys made work, more than ${2 * cap}`)
      const inStore = await working(a, accountId)
      assert.equal(inStore.length, works, `round ${round}: the store's working keys are the ones that work`)
      assert.ok(inStore.filter((k) => k.rolledTo === null).length <= cap, `round ${round}: at most ${cap} active keys`)
      const kept = await rows()
      assert.ok(kept <= 2 * cap + endedKept, `round ${round}: ${kept} keys kept, more than ${2 * cap + endedKept}`)
    }
    // Three cycles with no room left: a revocation frees a place, the cycle fills it, and what works stays within the bound.
    for (const k of (await working(a, accountId)).filter((x) => x.rolledTo === null)) await json(await call(a, 'DELETE', `/admin/v1/keys/${k.id}`), 200)
    for (let i = 0; i < 10; i++) await cycle()
    const works = (await pings(a, seen)).filter((s) => s === 200).length
    assert.ok(works <= 2 * cap, `${works} keys work after create, roll and revoke cycles, more than ${2 * cap}`)
    assert.ok((await rows()) <= 2 * cap + endedKept, 'nor are more keys kept')
  })

  test(`${name}: a creation or a roll deletes the account's ended keys past KEY_ENDED_KEPT_PER_ACCOUNT, those that ended longest ago first; their events stay`, {
    skip,
  }, async (t) => {
    const a = await start(t, { KEY_ENDED_KEPT_PER_ACCOUNT: '3' })
    const accountId = await account(a)
    const tick = () => a.clock.advance(1000)
    const ids = async () => (await json<{ items: Key[] }>(await call(a, 'GET', `/admin/v1/accounts/${accountId}/keys`), 200)).items.map((k) => k.id).sort()
    const revoked: Key[] = []
    for (let i = 0; i < 5; i++) revoked.push(await create(a, accountId))
    for (const key of revoked) {
      tick()
      await json(await call(a, 'DELETE', `/admin/v1/keys/${key.id}`), 200)
    }
    assert.equal((await ids()).length, 5, 'a revocation deletes nothing')

    const live = await create(a, accountId)
    assert.deepEqual(await ids(), [...revoked.slice(2).map((k) => k.id), live.id].sort(), 'the three revoked last are kept')
    assert.deepEqual(await json<unknown>(await call(a, 'GET', `/admin/v1/keys/${revoked[0]!.id}`), 404), [
      { type: 'Error', code: 'NOT_FOUND', message: `Not found: no key ${revoked[0]!.id}.` },
    ])
    // A roll without grace ends the old key in its own step: it is kept, and the oldest kept goes.
    tick()
    const next = await roll(a, live.id, 0)
    assert.deepEqual(await ids(), [revoked[3]!.id, revoked[4]!.id, live.id, next.id].sort())
    // An expired key has ended at its expiry.
    tick()
    const expiring = await create(a, accountId, { expiresAt: new Date(a.clock.now() + 10_000).toISOString() })
    a.clock.advance(20_000)
    const last = await create(a, accountId)
    assert.deepEqual(await ids(), [revoked[4]!.id, live.id, expiring.id, next.id, last.id].sort())
    assert.deepEqual(
      await pings(
        a,
        [...revoked, live, expiring].map((k) => k.apiKey),
      ),
      Array(7).fill(403),
      'deleted or kept, an ended key stays refused',
    )
    assert.deepEqual(await pings(a, [next.apiKey, last.apiKey]), [200, 200])
    const events = await json<{ items: { target: { id: string } }[] }>(
      await call(a, 'GET', `/admin/v1/audit-events?account=${accountId}&action=key.revoke`),
      200,
    )
    assert.deepEqual(events.items.map((e) => e.target.id).sort(), revoked.map((k) => k.id).sort(), 'the events of deleted keys stay')
  })
}

test('sqlite: a grace ended by the CLI, another process, stops its key as soon as a revocation by the CLI stops one: at the next change poll, not after the cache TTL', async (t) => {
  // The real clock: the CLI stamps the grace's end by it, and the node must read the same time.
  const a = await startAdmin(t, { REGION: 'eu', KEY_CACHE_POLL_MS: '100', KEY_CACHE_TTL_SECONDS: '3600' }, { now: Date.now, set() {}, advance() {} })
  const accountId = await account(a)
  const k0 = await create(a, accountId)
  const k1 = await roll(a, k0.id)
  const other = await create(a, accountId)
  assert.deepEqual(await pings(a, [k0.apiKey, k1.apiKey, other.apiKey]), [200, 200, 200], 'all three cached as working')
  const stopped = async (key: string) => {
    const from = Date.now()
    while ((await pings(a, [key]))[0] !== 403) {
      assert.ok(Date.now() - from < 3000, 'refused within 3 s')
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    return Date.now() - from
  }
  const rolled = await cli(a.pub.config.dataDir, ['key', 'roll', k1.id, '--grace', '3600'])
  assert.equal(rolled.code, 0, rolled.stderr)
  const graceEnded = await stopped(k0.apiKey)
  const revoked = await cli(a.pub.config.dataDir, ['key', 'revoke', other.id])
  assert.equal(revoked.code, 0, revoked.stderr)
  const revocation = await stopped(other.apiKey)
  t.diagnostic(`refused ${graceEnded} ms after the CLI's roll, ${revocation} ms after its revocation (KEY_CACHE_POLL_MS 100)`)
  assert.deepEqual(await pings(a, [k1.apiKey]), [200], 'the key rolled by the CLI works in its grace')
})
