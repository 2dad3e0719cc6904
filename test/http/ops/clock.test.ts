/**
 * One clock: the app, its services and its store read one clock, so a test that moves it sees
 * the move in every time the service keeps: an audit event's time, a subscription's change,
 * a revocation, a key's expiry and a roll's grace, a portal session's end, and what audit
 * retention prunes. The clock starts years from the wall clock's time, so a time stamped by
 * anything else (Date.now() in an adapter, PostgreSQL's now()) would show. On SQLite and on
 * PostgreSQL, over HTTP to the real public app and admin API.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { get, testClock } from '../../support/helper.ts'
import { startAdmin, type Admin } from '../../support/admin-helper.ts'
import { PortalClient, portalUser } from '../../support/portal-helper.ts'
import { createDatabase, skipUnless, type StoreEnv } from '../../support/services.ts'

const START = Date.parse('2031-05-06T07:08:09.000Z')
const DAY = 86_400_000
const iso = (ms: number) => new Date(ms).toISOString()

const stores: [string, StoreEnv, false | string][] = [
  ['sqlite', async () => ({}), false],
  ['postgres', async (t) => ({ DATABASE_URL: await createDatabase(t) }), skipUnless('TEST_DATABASE_URL')],
]

/** call sends a request to the admin API with the write token; the answer's JSON, asserted to have `status`. */
async function call<T = Record<string, unknown>>(a: Admin, method: string, path: string, status: number, body?: unknown): Promise<T> {
  const res = await fetch(`${a.url}/admin/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${a.write.secret}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
  const text = await res.text()
  assert.equal(res.status, status, `${method} ${path}: ${text}`)
  return JSON.parse(text) as T
}

/** pings: the status of a TOTP call with `key` (200: admitted; 403: refused). */
async function pings(a: Admin, key: string): Promise<number> {
  const res = await get(a.pub.url, '/totp/ping', key)
  await res.arrayBuffer()
  return res.status
}

interface Key {
  id: string
  apiKey: string
  revokedAt: string | null
}
interface AuditEvent {
  at: string
  action: string
}

async function events(a: Admin, accountId: string): Promise<AuditEvent[]> {
  return (await call<{ items: AuditEvent[] }>(a, 'GET', `/audit-events?account=${accountId}&limit=100`, 200)).items
}

for (const [name, env, skip] of stores) {
  test(`${name}: the moved clock dates the audit trail, a subscription and a revocation, ends keys, and decides what retention prunes`, { skip }, async (t) => {
    const a = await startAdmin(t, { REGION: 'eu', ...(await env(t)) }, testClock(START))
    const account = await call<{ id: string }>(a, 'POST', '/accounts', 201, { name: 'Clockwork' })
    await call(a, 'PUT', `/accounts/${account.id}/subscriptions/eu/totp`, 200, { status: 'active' })
    const [subscription] = (await call<{ items: { updatedAt: string }[] }>(a, 'GET', `/accounts/${account.id}/subscriptions`, 200)).items
    assert.equal(subscription?.updatedAt, iso(START), "the subscription was changed at the clock's time")
    assert.deepEqual(
      (await events(a, account.id)).map((e) => e.at),
      [iso(START), iso(START)],
      "both events at the clock's time",
    )

    // Expiry: a key works until its expiresAt by the clock, and not after.
    const expiring = await call<Key>(a, 'POST', `/accounts/${account.id}/keys`, 201, { expiresAt: iso(START + 3_600_000) })
    assert.equal(await pings(a, expiring.apiKey), 200)
    a.clock.advance(3_600_001)
    assert.equal(await pings(a, expiring.apiKey), 403, 'expired once the clock passed its expiresAt')

    // A roll's grace ends by the clock.
    const old = await call<Key>(a, 'POST', `/accounts/${account.id}/keys`, 201, {})
    const rolled = await call<Key>(a, 'POST', `/keys/${old.id}/roll`, 201, { graceSeconds: 60 })
    assert.equal(await pings(a, old.apiKey), 200, 'the old key within its grace')
    a.clock.advance(61_000)
    assert.equal(await pings(a, old.apiKey), 403, 'the old key after its grace')

    // A revocation and its event carry the clock's time.
    a.clock.advance(7 * DAY)
    const revokedAt = a.clock.now()
    const revoked = await call<Key>(a, 'DELETE', `/keys/${rolled.id}`, 200)
    assert.equal(revoked.revokedAt, iso(revokedAt))
    assert.equal((await call<Key>(a, 'GET', `/keys/${rolled.id}`, 200)).revokedAt, iso(revokedAt), 'as stored')
    assert.equal(await pings(a, rolled.apiKey), 403)
    const revocation = (await events(a, account.id)).find((e) => e.action === 'key.revoke')
    assert.equal(revocation?.at, iso(revokedAt))

    // Retention: past AUDIT_RETENTION_DAYS by the clock, the old events go and the new one stays.
    a.clock.advance((a.pub.config.auditRetentionDays + 1) * DAY)
    await call(a, 'PATCH', `/accounts/${account.id}`, 200, { name: 'Clockwork 2' })
    const before = await events(a, account.id)
    assert.ok((await a.pub.accounts.pruneAudit()) >= before.length - 1, 'the other events of the service went too')
    assert.deepEqual(
      (await events(a, account.id)).map((e) => [e.action, e.at]),
      [['account.update', iso(a.clock.now())]],
    )
  })

  test(`${name}: a portal session ends when the clock passes SESSION_TTL_HOURS`, { skip }, async (t) => {
    const a = await startAdmin(t, { SESSION_TTL_HOURS: '2', ...(await env(t)) }, testClock(START))
    const user = await portalUser(a.pub)
    const client = new PortalClient(a.pub.url)
    await client.signIn(user.email, user.password)
    assert.equal((await client.get('/portal/home')).status, 200, 'signed in')
    a.clock.advance(2 * 3_600_000 + 1000)
    assert.match((await client.get('/portal/home')).location ?? '', /\/portal\/sign-in/, 'signed out once the session ran out by the clock')
  })
}
