/**
 * The admin API as operators meet it: the real public app and the real admin listener over
 * one store, on real ports, with real admin tokens. What an operator does here is checked
 * where it matters, on the public API (a key created works, a revoked one is refused at
 * once); every answer of the admin listener is checked against the admin document.
 */
import { test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { Secret, TOTP } from 'otpauth'
import { get, post, tempDir, testClock, type Clock } from '../../support/helper.ts'
import { startAdmin, type Admin } from '../../support/admin-helper.ts'
import { createDatabase, redisEnv, skipUnless, type StoreEnv as Env } from '../../support/services.ts'
import { CLI } from '../../../src/domain/accounts.ts'
import { isFailure } from '../../../src/services/outcome.ts'
import { catalogue } from '../../../src/errors/catalogue.ts'
import { ADMIN_BODY_LIMIT, ADMIN_DOCUMENT_PATH } from '../../../src/admin/api/app.ts'

const ROOT = new URL('../../..', import.meta.url).pathname

/** call sends a request to the admin API: a body that is not a string goes as JSON. */
function call(a: Admin, method: string, path: string, token: string | null, body?: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(a.url + path, {
    method,
    headers: {
      ...(token === null ? {} : { authorization: `Bearer ${token}` }),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...headers,
    },
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  })
}

async function json<T = Record<string, unknown>>(res: Response, status: number): Promise<T> {
  const text = await res.text()
  assert.equal(res.status, status, text)
  assert.match(res.headers.get('content-type') ?? '', /^application\/json/)
  return JSON.parse(text) as T
}

async function errorCodes(res: Response, status: number): Promise<string[]> {
  const body = await json<{ type: string; code: string; message: string }[]>(res, status)
  assert.ok(Array.isArray(body) && body.length > 0, 'a catalogue list')
  for (const e of body) {
    assert.equal(e.type, 'Error')
    assert.equal(catalogue[e.code as keyof typeof catalogue]?.status, status, `${e.code} is a catalogue code of status ${status}`)
  }
  return body.map((e) => e.code)
}

interface Account {
  id: string
  name: string
  status: string
}
interface Key {
  id: string
  accountId: string
  name: string
  hint: string
  expiresAt: string | null
  revokedAt: string | null
  rolledTo: string | null
  scope: unknown
}
/** A created or rolled key: its fields and the key itself. */
type Created = Key & { apiKey: string }

async function createAccount(a: Admin, name = 'Acme'): Promise<Account> {
  return json<Account>(await call(a, 'POST', '/admin/v1/accounts', a.write.secret, { name }), 201)
}

async function subscribe(a: Admin, accountId: string, region: string, group: string, status = 'active'): Promise<Record<string, unknown>> {
  return json(await call(a, 'PUT', `/admin/v1/accounts/${accountId}/subscriptions/${region}/${group}`, a.write.secret, { status }), 200)
}

async function createKey(a: Admin, accountId: string, body: Record<string, unknown> = {}): Promise<Created> {
  return json<Created>(await call(a, 'POST', `/admin/v1/accounts/${accountId}/keys`, a.write.secret, body), 201)
}

/** The gateway's refusal of an unknown key: every refusal must be this, byte for byte. */
async function unknownKeyRefusal(a: Admin): Promise<{ body: string; type: string | null }> {
  const res = await get(a.pub.url, '/totp/ping', `tsr_${'0'.repeat(40)}`)
  assert.equal(res.status, 403)
  return { body: await res.text(), type: res.headers.get('content-type') }
}

async function assertWorks(a: Admin, key: string, what: string): Promise<void> {
  const res = await get(a.pub.url, '/totp/ping', key)
  assert.equal(res.status, 200, `${what}: ${await res.clone().text()}`)
  await res.arrayBuffer()
}

async function assertRefused(a: Admin, key: string, what: string, path = '/totp/ping'): Promise<void> {
  const expected = await unknownKeyRefusal(a)
  const res = await get(a.pub.url, path, key)
  assert.equal(res.status, 403, what)
  assert.equal(await res.text(), expected.body, `${what}: the unknown key's body, byte for byte`)
  assert.equal(res.headers.get('content-type'), expected.type, `${what}: the unknown key's content type`)
}

const code = (secret: string, at: number) =>
  new TOTP({ secret: Secret.fromBase32(secret), algorithm: 'SHA1', digits: 6, period: 30 }).generate({ timestamp: at })

/** The stores the admin API is run on: the embedded one, and the cluster's (PostgreSQL and Redis) when the test services are there. */
const stores: [string, Env, false | string][] = [
  ['sqlite', async () => ({}), false],
  ['postgres+redis', async (t) => ({ DATABASE_URL: await createDatabase(t), ...(await redisEnv(t)) }), skipUnless('TEST_DATABASE_URL', 'TEST_REDIS_URL')],
]

for (const [name, env, skip] of stores) {
  const start = async (t: TestContext, extra: Record<string, string> = {}, clock?: Clock) => startAdmin(t, { ...(await env(t)), ...extra }, clock)

  test(`${name}: admin tokens: 401 with WWW-Authenticate without, with a bad or a revoked token; a read token reads and gets 403 when it writes`, {
    skip,
  }, async (t) => {
    const a = await start(t)
    const none = await call(a, 'GET', '/admin/v1/accounts', null)
    assert.deepEqual(await errorCodes(none, 401), ['ADMIN_TOKEN_REQUIRED'])
    assert.equal(none.headers.get('www-authenticate'), 'Bearer realm="tessera-admin"')
    const basic = await call(a, 'GET', '/admin/v1/accounts', null, undefined, { authorization: 'Basic dXNlcjpwYXNz' })
    assert.deepEqual(await errorCodes(basic, 401), ['ADMIN_TOKEN_REQUIRED'])
    assert.equal(basic.headers.get('www-authenticate'), 'Bearer realm="tessera-admin"')

    for (const bad of ['tsa_nope', 'nope', `${a.write.secret}x`, a.pub.key]) {
      const res = await call(a, 'GET', '/admin/v1/accounts', bad)
      assert.deepEqual(await errorCodes(res, 401), ['ADMIN_TOKEN_INVALID'])
      assert.equal(res.headers.get('www-authenticate'), 'Bearer realm="tessera-admin", error="invalid_token"')
    }

    // A read token reads everything…
    const account = await createAccount(a)
    for (const path of [
      '/admin/v1/accounts',
      `/admin/v1/accounts/${account.id}`,
      `/admin/v1/accounts/${account.id}/keys`,
      `/admin/v1/accounts/${account.id}/subscriptions`,
      `/admin/v1/accounts/${account.id}/plan`,
      `/admin/v1/accounts/${account.id}/usage`,
      '/admin/v1/audit-events',
    ]) {
      const res = await call(a, 'GET', path, a.read.secret)
      assert.equal(res.status, 200, `${path}: ${await res.clone().text()}`)
      await res.arrayBuffer()
    }
    // …and changes nothing.
    const key = await createKey(a, account.id)
    const writes: [string, string, unknown][] = [
      ['POST', '/admin/v1/accounts', { name: 'x' }],
      ['PATCH', `/admin/v1/accounts/${account.id}`, { status: 'suspended' }],
      ['POST', `/admin/v1/accounts/${account.id}/keys`, {}],
      ['POST', `/admin/v1/keys/${key.id}/roll`, { graceSeconds: 0 }],
      ['DELETE', `/admin/v1/keys/${key.id}`, undefined],
      ['PUT', `/admin/v1/accounts/${account.id}/subscriptions/eu/totp`, { status: 'active' }],
      ['PUT', `/admin/v1/accounts/${account.id}/plan`, { quota: 1 }],
      ['DELETE', `/admin/v1/accounts/${account.id}/plan`, undefined],
      ['POST', `/admin/v1/accounts/${account.id}/totp-lockouts/clear`, { secret: new Secret().base32 }],
    ]
    for (const [method, path, body] of writes) {
      const res = await call(a, method, path, a.read.secret, body)
      assert.deepEqual(await errorCodes(res, 403), ['ADMIN_READ_ONLY'], `${method} ${path}`)
      assert.equal(res.headers.get('www-authenticate'), 'Bearer realm="tessera-admin", error="insufficient_scope"')
    }
    assert.equal((await json<Account>(await call(a, 'GET', `/admin/v1/accounts/${account.id}`, a.read.secret), 200)).status, 'active')
    assert.equal((await json<Key>(await call(a, 'GET', `/admin/v1/keys/${key.id}`, a.read.secret), 200)).revokedAt, null)

    // Revoked: refused at once.
    const revoked = await a.pub.accounts.revokeAdminToken({ actor: CLI }, a.read.id)
    assert.ok(!isFailure(revoked))
    const after = await call(a, 'GET', '/admin/v1/accounts', a.read.secret)
    assert.deepEqual(await errorCodes(after, 401), ['ADMIN_TOKEN_INVALID'])
    assert.match(after.headers.get('www-authenticate') ?? '', /error="invalid_token"/)

    // The document needs no token; every operation it lists asks for the bearer token.
    const docRes = await fetch(a.url + ADMIN_DOCUMENT_PATH)
    assert.equal(docRes.status, 200)
    const doc = (await docRes.json()) as {
      openapi: string
      security: unknown
      components: { securitySchemes: Record<string, { type: string; scheme: string }> }
    }
    assert.equal(doc.openapi, '3.1.0')
    assert.deepEqual(doc.security, [{ adminToken: [] }])
    assert.deepEqual(doc.components.securitySchemes.adminToken, { ...doc.components.securitySchemes.adminToken, type: 'http', scheme: 'bearer' })
    assert.ok(!a.logs.join('').includes(a.write.secret) && !a.logs.join('').includes(a.read.secret), 'no token in the log')
  })

  test(`${name}: keys: created once, working at once; rolled with and without grace; revoked, expired, out of scope and suspended keys get the unknown key's 403 byte for byte`, {
    skip,
  }, async (t) => {
    const a = await start(t, { REGION: 'eu' })
    const account = await createAccount(a)
    assert.equal(account.status, 'active')
    await subscribe(a, account.id, 'eu', 'totp')

    const created = await createKey(a, account.id, { name: 'production' })
    assert.match(created.apiKey, /^tsr_[0-9a-f]{40}$/)
    assert.equal(created.hint, created.apiKey.slice(-4))
    assert.equal(created.accountId, account.id)
    await assertWorks(a, created.apiKey, 'a new key')
    const listing = await call(a, 'GET', `/admin/v1/accounts/${account.id}/keys`, a.write.secret)
    const listed = await listing.clone().text()
    assert.ok(!listed.includes(created.apiKey), 'the key is never shown again')
    assert.deepEqual(
      (JSON.parse(listed) as { items: Key[] }).items.map((k) => k.id),
      [created.id],
    )
    assert.ok(!(await (await call(a, 'GET', `/admin/v1/keys/${created.id}`, a.write.secret)).text()).includes(created.apiKey))

    // Roll with a grace: both keys work, then only the new one.
    const rolled = await json<Created & { old: Key }>(await call(a, 'POST', `/admin/v1/keys/${created.id}/roll`, a.write.secret, { graceSeconds: 60 }), 201)
    assert.notEqual(rolled.apiKey, created.apiKey)
    assert.equal(rolled.name, 'production')
    assert.equal(rolled.old.rolledTo, rolled.id)
    await assertWorks(a, created.apiKey, 'the old key within its grace')
    await assertWorks(a, rolled.apiKey, 'the new key')
    a.clock.advance(61_000)
    await assertRefused(a, created.apiKey, 'the old key after its grace')
    await assertWorks(a, rolled.apiKey, 'the new key after the grace')
    // Rolled already: 409.
    assert.deepEqual(await errorCodes(await call(a, 'POST', `/admin/v1/keys/${created.id}/roll`, a.write.secret, { graceSeconds: 0 }), 409), ['CONFLICT'])

    // No body at all: the default grace, 24 hours (as in the portal and the CLI).
    const kept = await json<Created & { old: Key }>(await call(a, 'POST', `/admin/v1/keys/${rolled.id}/roll`, a.write.secret), 201)
    assert.equal(Date.parse(kept.old.expiresAt!) - a.clock.now(), 86_400_000, 'the default grace is 24 hours')
    await assertWorks(a, rolled.apiKey, 'the old key of a roll with the default grace')
    // Roll with no grace: the old key stops at once.
    const again = await json<Created>(await call(a, 'POST', `/admin/v1/keys/${kept.id}/roll`, a.write.secret, { graceSeconds: 0 }), 201)
    await assertRefused(a, kept.apiKey, 'the old key of a roll without grace')
    await assertWorks(a, again.apiKey, 'its successor')

    // Revoke: refused at once; revoking again is a conflict.
    const revoked = await json<Key>(await call(a, 'DELETE', `/admin/v1/keys/${again.id}`, a.write.secret), 200)
    assert.ok(revoked.revokedAt !== null)
    await assertRefused(a, again.apiKey, 'a revoked key')
    assert.deepEqual(await errorCodes(await call(a, 'DELETE', `/admin/v1/keys/${again.id}`, a.write.secret), 409), ['CONFLICT'])
    assert.deepEqual(await errorCodes(await call(a, 'DELETE', '/admin/v1/keys/key_none', a.write.secret), 404), ['NOT_FOUND'])

    // Expiry: works until expiresAt on the service's clock, refused after.
    const expiresAt = new Date(a.clock.now() + 3_600_000).toISOString()
    const expiring = await createKey(a, account.id, { expiresAt })
    assert.equal(expiring.expiresAt, expiresAt)
    await assertWorks(a, expiring.apiKey, 'a key before its expiry')
    a.clock.advance(3_601_000)
    await assertRefused(a, expiring.apiKey, 'an expired key')
    assert.deepEqual(
      await errorCodes(await call(a, 'POST', `/admin/v1/accounts/${account.id}/keys`, a.write.secret, { expiresAt: '2001-01-01T00:00:00Z' }), 400),
      ['FIELD_INVALID'],
    )

    // Scope: a converter-only key is refused on the TOTP group, with the same 403.
    await subscribe(a, account.id, 'eu', 'converter')
    const scoped = await createKey(a, account.id, { scope: { groups: ['converter'] } })
    assert.deepEqual(scoped.scope, { groups: ['converter'], regions: null })
    await assertRefused(a, scoped.apiKey, 'a key scoped to the converter, on TOTP')
    const regionScoped = await createKey(a, account.id, { scope: { regions: ['us'] } })
    await assertRefused(a, regionScoped.apiKey, 'a key scoped to us, in eu')
    const whole = await createKey(a, account.id)
    await assertWorks(a, whole.apiKey, 'an unscoped key')

    // A suspended account: refused at once, and back when reactivated.
    assert.equal(
      (await json<Account>(await call(a, 'PATCH', `/admin/v1/accounts/${account.id}`, a.write.secret, { status: 'suspended' }), 200)).status,
      'suspended',
    )
    await assertRefused(a, whole.apiKey, 'a key of a suspended account')
    assert.equal(
      (await json<Account>(await call(a, 'PATCH', `/admin/v1/accounts/${account.id}`, a.write.secret, { status: 'active', name: 'Acme 2' }), 200)).name,
      'Acme 2',
    )
    await assertWorks(a, whole.apiKey, 'a key of a reactivated account')

    // An inactive subscription: refused.
    await subscribe(a, account.id, 'eu', 'totp', 'inactive')
    await assertRefused(a, whole.apiKey, 'a key of an account whose subscription is inactive')
    const listedAll = await json<{ items: Key[]; next: null }>(await call(a, 'GET', `/admin/v1/accounts/${account.id}/keys`, a.read.secret), 200)
    assert.equal(listedAll.items.length, 8)
    assert.equal(listedAll.next, null)
    const logs = [...a.logs, ...a.pub.logs].join('')
    for (const k of [created, rolled, kept, again, expiring, scoped, regionScoped, whole]) assert.ok(!logs.includes(k.apiKey), 'no key in any log')
  })

  test(`${name}: subscriptions: set, list, approve a pending request; approving one that is not pending is a conflict, of an approval and a refusal at once one applies`, {
    skip,
  }, async (t) => {
    const a = await start(t)
    const account = await createAccount(a)
    const set = await subscribe(a, account.id, 'us', 'totp', 'active')
    assert.deepEqual({ region: set.region, group: set.group, status: set.status }, { region: 'us', group: 'totp', status: 'active' })
    assert.deepEqual(
      await errorCodes(await call(a, 'PUT', `/admin/v1/accounts/${account.id}/subscriptions/us/totp`, a.write.secret, { status: 'approved' }), 409),
      ['CONFLICT'],
    )
    await subscribe(a, account.id, 'eu', 'totp', 'pending')
    const approved = await subscribe(a, account.id, 'eu', 'totp', 'approved')
    assert.equal(approved.status, 'active')
    const list = await json<{ items: { region: string; group: string; status: string }[] }>(
      await call(a, 'GET', `/admin/v1/accounts/${account.id}/subscriptions`, a.read.secret),
      200,
    )
    assert.deepEqual(list.items.map((s) => `${s.region}/${s.group}:${s.status}`).sort(), ['eu/totp:active', 'us/totp:active'])
    // An approval and a refusal of one request at once: one applies, the other is a conflict.
    await subscribe(a, account.id, 'apac', 'totp', 'pending')
    const decisions = await Promise.all(
      ['approved', 'refused', 'approved', 'refused'].map((status) =>
        call(a, 'PUT', `/admin/v1/accounts/${account.id}/subscriptions/apac/totp`, a.write.secret, { status }).then((r) => r.status),
      ),
    )
    assert.deepEqual(decisions.filter((s) => s === 200).length, 1, decisions.join(','))
    assert.deepEqual(decisions.filter((s) => s === 409).length, 3, decisions.join(','))

    assert.deepEqual(
      await errorCodes(await call(a, 'PUT', `/admin/v1/accounts/${account.id}/subscriptions/mars/totp`, a.write.secret, { status: 'active' }), 400),
      ['FIELD_INVALID'],
    )
    assert.deepEqual(
      await errorCodes(await call(a, 'PUT', `/admin/v1/accounts/${account.id}/subscriptions/us/converter`, a.write.secret, { status: 'active' }), 400),
      ['FIELD_INVALID'],
      'the converter is served in eu only',
    )
    assert.deepEqual(await errorCodes(await call(a, 'PUT', `/admin/v1/accounts/${account.id}/subscriptions/eu/totp`, a.write.secret, { status: 'on' }), 400), [
      'FIELD_INVALID',
    ])
    assert.deepEqual(await errorCodes(await call(a, 'PUT', '/admin/v1/accounts/acc_none/subscriptions/eu/totp', a.write.secret, { status: 'active' }), 404), [
      'NOT_FOUND',
    ])
    assert.deepEqual(await errorCodes(await call(a, 'GET', '/admin/v1/accounts/acc_none/subscriptions', a.write.secret), 404), ['NOT_FOUND'])
  })

  test(`${name}: plans: the default, an own plan (fields left out keep their value), back to the default`, { skip }, async (t) => {
    const a = await start(t, { PLAN_RATE: '50', PLAN_BURST: '60', PLAN_QUOTA: '0' })
    const account = await createAccount(a)
    const path = `/admin/v1/accounts/${account.id}/plan`
    const defaults = { rate: 50, burst: 60, quota: 0, period: 'month', weights: { totp: 2, converter: 1 } }
    assert.deepEqual(await json(await call(a, 'GET', path, a.read.secret), 200), { plan: defaults, own: false })
    const own = { ...defaults, quota: 1000, period: 'day', weights: { totp: 3, converter: 1 } }
    assert.deepEqual(await json(await call(a, 'PUT', path, a.write.secret, { quota: 1000, period: 'day', weights: { totp: 3 } }), 200), {
      plan: own,
      own: true,
    })
    assert.deepEqual(await json(await call(a, 'GET', path, a.read.secret), 200), { plan: own, own: true })
    assert.deepEqual(await json(await call(a, 'PUT', path, a.write.secret, { rate: 5 }), 200), { plan: { ...own, rate: 5 }, own: true })
    const bad = await call(a, 'PUT', path, a.write.secret, { burst: 0, period: 'week' })
    const problems = await json<{ message: string }[]>(bad, 400)
    assert.ok(problems.some((p) => p.message.includes('burst')) && problems.some((p) => p.message.includes('period')), JSON.stringify(problems))
    assert.deepEqual(await json(await call(a, 'DELETE', path, a.write.secret), 200), { plan: defaults, own: false })
    assert.deepEqual(await json(await call(a, 'GET', path, a.read.secret), 200), { plan: defaults, own: false })
    assert.deepEqual(await errorCodes(await call(a, 'GET', '/admin/v1/accounts/acc_none/plan', a.read.secret), 404), ['NOT_FOUND'])
    assert.deepEqual(await errorCodes(await call(a, 'PUT', '/admin/v1/accounts/acc_none/plan', a.write.secret, { quota: 1 }), 404), ['NOT_FOUND'])
    assert.deepEqual(await errorCodes(await call(a, 'DELETE', '/admin/v1/accounts/acc_none/plan', a.write.secret), 404), ['NOT_FOUND'])
  })

  test(`${name}: usage: JSON per day, key and region, and CSV with a header row and RFC 4180 lines`, { skip }, async (t) => {
    const a = await start(t, { REGION: 'eu' })
    const account = await createAccount(a)
    await subscribe(a, account.id, 'eu', 'totp')
    const one = await createKey(a, account.id)
    const two = await createKey(a, account.id)
    for (let i = 0; i < 3; i++) await assertWorks(a, one.apiKey, 'key one')
    await assertWorks(a, two.apiKey, 'key two')
    const path = `/admin/v1/accounts/${account.id}/usage`
    const today = new Date(a.clock.now()).toISOString().slice(0, 10)

    type Report = { accountId: string; from: string; to: string; by: string; items: Record<string, unknown>[] }
    let report: Report | undefined
    const deadline = Date.now() + 10_000
    while (Date.now() < deadline) {
      report = await json<Report>(await call(a, 'GET', path, a.read.secret), 200)
      if (report.items.reduce((n, l) => n + Number(l.count), 0) >= 4) break
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    assert.ok(report)
    assert.equal(report.to, today, 'default range ends today')
    assert.equal((Date.parse(report.to) - Date.parse(report.from)) / 86_400_000, 29, 'and covers 30 days')
    assert.deepEqual(report.items, [{ day: today, group: 'totp', count: 4, units: 8 }])

    const byKey = await json<Report>(await call(a, 'GET', `${path}?by=key`, a.read.secret), 200)
    assert.deepEqual(
      byKey.items.map((l) => [l.keyId, l.count]).sort(),
      [
        [one.id, 3],
        [two.id, 1],
      ].sort(),
    )
    const byRegion = await json<Report>(await call(a, 'GET', `${path}?by=region&from=${today}&to=${today}`, a.read.secret), 200)
    assert.deepEqual(byRegion.items, [{ region: 'eu', group: 'totp', count: 4, units: 8 }])

    const csv = await call(a, 'GET', `${path}?by=key`, a.read.secret, undefined, { accept: 'text/csv' })
    assert.equal(csv.status, 200)
    assert.equal(csv.headers.get('content-type'), 'text/csv; charset=utf-8')
    const text = await csv.text()
    const lines = text.split('\r\n')
    assert.equal(lines.pop(), '', 'every line ends with CRLF')
    assert.equal(lines[0], '"keyId","group","count","units"', 'the JSON field names, quoted as every text field')
    assert.deepEqual(lines.slice(1).sort(), [`"${one.id}","totp",3,6`, `"${two.id}","totp",1,2`].sort())
    // JSON when JSON is preferred, or anything is accepted.
    for (const accept of ['application/json, text/csv;q=0.5', '*/*']) {
      await json(await call(a, 'GET', path, a.read.secret, undefined, { accept }), 200)
    }
    const empty = await call(a, 'GET', `${path}?from=2020-01-01&to=2020-01-31`, a.read.secret, undefined, { accept: 'text/csv' })
    assert.equal(await empty.text(), '"day","group","count","units"\r\n', 'a header row even with no line')

    assert.deepEqual(await errorCodes(await call(a, 'GET', `${path}?from=2026-02-30x`, a.read.secret), 400), ['FIELD_INVALID'])
    assert.deepEqual(await errorCodes(await call(a, 'GET', `${path}?from=2026-02-01&to=2026-01-01`, a.read.secret), 400), ['FIELD_INVALID'])
    assert.deepEqual(await errorCodes(await call(a, 'GET', `${path}?from=2020-01-01&to=2026-01-01`, a.read.secret), 400), ['FIELD_INVALID'])
    assert.deepEqual(await errorCodes(await call(a, 'GET', `${path}?by=week`, a.read.secret), 400), ['FIELD_INVALID'])
    assert.deepEqual(await errorCodes(await call(a, 'GET', '/admin/v1/accounts/acc_none/usage', a.read.secret), 404), ['NOT_FOUND'])
  })

  test(`${name}: audit events: newest first, paged by cursor, filtered; recorded with the token and the address; no route changes or deletes them`, {
    skip,
  }, async (t) => {
    const a = await start(t)
    const first = await createAccount(a, 'first')
    const second = await createAccount(a, 'second')
    const key = await createKey(a, first.id)
    await json(await call(a, 'POST', `/admin/v1/keys/${key.id}/roll`, a.write.secret, { graceSeconds: 10 }), 201)
    await call(a, 'PATCH', `/admin/v1/accounts/${second.id}`, a.write.secret, { status: 'suspended' })
    // A refused change leaves an event too.
    await errorCodes(await call(a, 'POST', `/admin/v1/keys/${key.id}/roll`, a.write.secret, {}), 409)

    interface Event {
      id: string
      at: string
      actor: string
      action: string
      accountId: string | null
      ip: string | null
      outcome: string
      target: { type: string; id: string }
    }
    type EventPage = { items: Event[]; next: string | null }
    const all = await json<EventPage>(await call(a, 'GET', '/admin/v1/audit-events?limit=200', a.read.secret), 200)
    const mine = all.items.filter((e) => e.actor === `admin-token:${a.write.id}`)
    assert.deepEqual(
      mine.map((e) => `${e.action}:${e.outcome}`),
      ['key.roll:failure', 'account.suspend:success', 'key.roll:success', 'key.create:success', 'account.create:success', 'account.create:success'],
      'newest first',
    )
    assert.ok(
      mine.every((e) => e.ip === '127.0.0.1'),
      'the source address',
    )
    const ids = all.items.map((e) => e.id)
    assert.deepEqual(ids, [...ids].sort().reverse(), 'ids descend')

    // Pages of 2, cursor to cursor, give the same events in the same order.
    const paged: string[] = []
    let after: string | null = null
    let pages = 0
    do {
      const res = await call(a, 'GET', `/admin/v1/audit-events?limit=2${after === null ? '' : `&after=${encodeURIComponent(after)}`}`, a.read.secret)
      const body: EventPage = await json<EventPage>(res, 200)
      assert.ok(body.items.length <= 2)
      paged.push(...body.items.map((e) => e.id))
      after = body.next
      pages++
    } while (after !== null && pages < 100)
    assert.deepEqual(paged, ids)

    const byAccount = await json<EventPage>(await call(a, 'GET', `/admin/v1/audit-events?account=${first.id}`, a.read.secret), 200)
    assert.ok(byAccount.items.length >= 3 && byAccount.items.every((e) => e.accountId === first.id))
    const byAction = await json<EventPage>(await call(a, 'GET', '/admin/v1/audit-events?action=key.roll', a.read.secret), 200)
    assert.deepEqual(
      byAction.items.map((e) => e.outcome),
      ['failure', 'success'],
    )
    const byActor = await json<EventPage>(await call(a, 'GET', `/admin/v1/audit-events?actor=admin-token:${a.write.id}&limit=1`, a.read.secret), 200)
    assert.deepEqual(
      byActor.items.map((e) => e.action),
      ['key.roll'],
    )
    assert.ok(byActor.next !== null)
    assert.deepEqual((await json<EventPage>(await call(a, 'GET', '/admin/v1/audit-events?actor=cli&action=account.create', a.read.secret), 200)).items, [])

    // No door changes or deletes them: no such route, for a write token either.
    const one = all.items[0]!
    for (const method of ['PUT', 'PATCH', 'DELETE', 'POST']) {
      for (const path of ['/admin/v1/audit-events', `/admin/v1/audit-events/${one.id}`]) {
        const res = await call(a, method, path, a.write.secret, method === 'DELETE' ? undefined : { outcome: 'success' })
        assert.ok(res.status === 404 || res.status === 405, `${method} ${path}: ${res.status}`)
        await res.arrayBuffer()
      }
    }
    const later = await json<EventPage>(await call(a, 'GET', '/admin/v1/audit-events?limit=200', a.read.secret), 200)
    assert.deepEqual(later.items, all.items, 'the trail is unchanged')

    assert.deepEqual(await errorCodes(await call(a, 'GET', '/admin/v1/audit-events?after=not-a-cursor', a.read.secret), 400), ['BAD_CURSOR'])
  })

  test(`${name}: a TOTP lockout is cleared by secret (or by fingerprint) for its account, and verifyOTP takes codes again at once`, { skip }, async (t) => {
    const T0 = Date.UTC(2026, 0, 1, 12, 0, 15)
    const a = await start(t, { OTP_MAX_FAILURES: '5' }, testClock(T0))
    const secret = new Secret().base32
    const right = code(secret, T0)
    const wrong = right === '000000' ? '111111' : '000000'
    const statuses: number[] = []
    for (let i = 0; i < 6; i++) {
      const res = await post(a.pub.url, '/totp/verifyOTP', a.pub.key, { secret, token: wrong })
      statuses.push(res.status)
      await res.arrayBuffer()
    }
    assert.deepEqual(statuses, [400, 400, 400, 400, 400, 429])
    const locked = await post(a.pub.url, '/totp/verifyOTP', a.pub.key, { secret, token: right })
    assert.equal(locked.status, 429, 'locked: even the right code waits')
    await locked.arrayBuffer()

    const path = `/admin/v1/accounts/${a.pub.accountId}/totp-lockouts/clear`
    // Another account's lockout of the same secret is another lockout: nothing to clear there.
    const other = await createAccount(a)
    assert.deepEqual(await json(await call(a, 'POST', `/admin/v1/accounts/${other.id}/totp-lockouts/clear`, a.write.secret, { secret }), 200), {
      cleared: false,
    })
    assert.deepEqual(await json(await call(a, 'POST', path, a.write.secret, { secret: secret.toLowerCase() }), 200), { cleared: true })
    const res = await post(a.pub.url, '/totp/verifyOTP', a.pub.key, { secret, token: right })
    assert.equal(res.status, 200, await res.text())
    assert.deepEqual(await json(await call(a, 'POST', path, a.write.secret, { secret }), 200), { cleared: false }, 'nothing left to clear')

    // By the fingerprint a lockout's log line names.
    const second = new Secret().base32
    for (let i = 0; i < 6; i++) await (await post(a.pub.url, '/totp/verifyOTP', a.pub.key, { secret: second, token: wrong })).arrayBuffer()
    const line = a.pub.logs.map((l) => JSON.parse(l) as Record<string, unknown>).findLast((l) => l.msg === 'TOTP secret locked')
    assert.ok(typeof line?.lockout === 'string', "the lockout's log line names its fingerprint")
    assert.deepEqual(await json(await call(a, 'POST', path, a.write.secret, { fingerprint: line.lockout }), 200), { cleared: true })
    a.clock.advance(30_000)
    const ok = await post(a.pub.url, '/totp/verifyOTP', a.pub.key, { secret: second, token: code(second, a.clock.now()) })
    assert.equal(ok.status, 200, await ok.text())

    assert.deepEqual(await errorCodes(await call(a, 'POST', path, a.write.secret, {}), 400), ['FIELD_INVALID'])
    assert.deepEqual(await errorCodes(await call(a, 'POST', path, a.write.secret, { secret: 'not base32!' }), 400), ['FIELD_INVALID'])
    assert.deepEqual(await errorCodes(await call(a, 'POST', path, a.write.secret, { fingerprint: 'short' }), 400), ['FIELD_INVALID'])
    assert.deepEqual(await errorCodes(await call(a, 'POST', '/admin/v1/accounts/acc_none/totp-lockouts/clear', a.write.secret, { secret }), 404), ['NOT_FOUND'])
  })

  test(`${name}: accounts: create, get, list with filters and cursor paging, rename`, { skip }, async (t) => {
    const a = await start(t)
    const made: Account[] = []
    for (const name of ['Alpha Ltd', 'Beta GmbH', 'alphabet', 'Gamma']) {
      made.push(await createAccount(a, name))
      // Creation order is the creation time's (then the id's, within a millisecond): one apart.
      a.clock.advance(1000)
    }
    assert.deepEqual(await json(await call(a, 'GET', `/admin/v1/accounts/${made[0]!.id}`, a.read.secret), 200), made[0])
    await call(a, 'PATCH', `/admin/v1/accounts/${made[3]!.id}`, a.write.secret, { status: 'suspended' })

    type AccountPage = { items: Account[]; next: string | null }
    const names = async (query: string) => {
      const out: string[] = []
      let after: string | null = null
      do {
        const page: AccountPage = await json<AccountPage>(
          await call(a, 'GET', `/admin/v1/accounts?${query}${after === null ? '' : `&after=${encodeURIComponent(after)}`}`, a.read.secret),
          200,
        )
        out.push(...page.items.map((x) => x.name))
        after = page.next
      } while (after !== null)
      return out
    }
    const mine = (list: string[]) => list.filter((n) => made.some((m) => m.name === n))
    assert.deepEqual(mine(await names('limit=1')), ['Alpha Ltd', 'Beta GmbH', 'alphabet', 'Gamma'], 'oldest first, page by page')
    assert.deepEqual(await names('name=ALPHA&limit=1'), ['Alpha Ltd', 'alphabet'])
    assert.deepEqual(mine(await names('status=suspended')), ['Gamma'])
    assert.deepEqual(mine(await names('status=active&name=a&limit=2')), ['Alpha Ltd', 'Beta GmbH', 'alphabet'])

    const renamed = await json<Account>(await call(a, 'PATCH', `/admin/v1/accounts/${made[1]!.id}`, a.write.secret, { name: 'Beta AG' }), 200)
    assert.equal(renamed.name, 'Beta AG')
    const created = await call(a, 'POST', '/admin/v1/accounts', a.write.secret, { name: 'Delta' })
    assert.match(created.headers.get('location') ?? '', /^\/admin\/v1\/accounts\/.+/)
    assert.equal(created.headers.get('cache-control'), 'no-store')
    assert.deepEqual(await errorCodes(await call(a, 'GET', '/admin/v1/accounts/acc_none', a.read.secret), 404), ['NOT_FOUND'])
    assert.deepEqual(await errorCodes(await call(a, 'PATCH', '/admin/v1/accounts/acc_none', a.write.secret, { name: 'x' }), 404), ['NOT_FOUND'])
  })

  test(`${name}: bad input gets a 4xx catalogue answer, never a 5xx, and changes nothing`, { skip }, async (t) => {
    const a = await start(t)
    const account = await createAccount(a)
    const key = await createKey(a, account.id)
    const W = a.write.secret
    const cases: [string, string, unknown, Record<string, string>, number, string][] = [
      ['POST', '/admin/v1/accounts', '{"name": "x"', {}, 400, 'MALFORMED_BODY'],
      ['POST', '/admin/v1/accounts', '', {}, 400, 'MALFORMED_BODY'],
      ['POST', '/admin/v1/accounts', '{"name":"\\ud800"}', {}, 400, 'FIELD_INVALID'],
      ['POST', '/admin/v1/accounts', '{"name":"a\\u0000b"}', {}, 400, 'FIELD_INVALID'],
      ['POST', '/admin/v1/accounts', { name: 'x'.repeat(201) }, {}, 400, 'FIELD_INVALID'],
      ['POST', '/admin/v1/accounts', { name: '   ' }, {}, 400, 'FIELD_INVALID'],
      ['POST', '/admin/v1/accounts', {}, {}, 400, 'FIELD_INVALID'],
      ['POST', '/admin/v1/accounts', [], {}, 400, 'FIELD_INVALID'],
      ['POST', '/admin/v1/accounts', '"text"', {}, 400, 'FIELD_INVALID'],
      ['POST', '/admin/v1/accounts', { name: 'x', stauts: 'active' }, {}, 400, 'FIELD_INVALID'],
      ['POST', '/admin/v1/accounts', { name: { $gt: '' } }, {}, 400, 'FIELD_INVALID'],
      ['POST', '/admin/v1/accounts', '{"__proto__": {"x": 1}, "name": "p"}', {}, 400, 'MALFORMED_BODY'],
      ['POST', '/admin/v1/accounts', 'name=x', { 'content-type': 'application/x-www-form-urlencoded' }, 415, 'JSON_REQUIRED'],
      ['POST', '/admin/v1/accounts', JSON.stringify({ name: 'x'.repeat(ADMIN_BODY_LIMIT) }), {}, 413, 'BODY_TOO_LARGE'],
      ['PATCH', `/admin/v1/accounts/${account.id}`, {}, {}, 400, 'FIELD_INVALID'],
      ['PATCH', `/admin/v1/accounts/${account.id}`, { status: 'deleted' }, {}, 400, 'FIELD_INVALID'],
      ['GET', '/admin/v1/accounts?limit=1000000000000', undefined, {}, 400, 'FIELD_INVALID'],
      ['GET', '/admin/v1/accounts?limit=0', undefined, {}, 400, 'FIELD_INVALID'],
      ['GET', '/admin/v1/accounts?limit=ten', undefined, {}, 400, 'FIELD_INVALID'],
      ['GET', '/admin/v1/accounts?after=bad', undefined, {}, 400, 'BAD_CURSOR'],
      ['GET', `/admin/v1/accounts?after=${'A'.repeat(600)}`, undefined, {}, 400, 'FIELD_INVALID'],
      ['GET', '/admin/v1/accounts?name=%ED%A0%80', undefined, {}, 200, ''],
      ['GET', '/admin/v1/accounts?sort=name', undefined, {}, 400, 'FIELD_INVALID'],
      ['GET', `/admin/v1/accounts/${'x'.repeat(300)}`, undefined, {}, 400, 'FIELD_INVALID'],
      ['GET', '/admin/v1/accounts/%E0%A4%A', undefined, {}, 400, 'FIELD_INVALID'],
      // PostgreSQL refuses a NUL with an error of its own: a 400 before any query.
      ['GET', '/admin/v1/accounts/%00', undefined, {}, 400, 'FIELD_INVALID'],
      ['PATCH', '/admin/v1/accounts/a%00b', { name: 'x' }, {}, 400, 'FIELD_INVALID'],
      ['GET', '/admin/v1/keys/%00', undefined, {}, 400, 'FIELD_INVALID'],
      ['GET', '/admin/v1/audit-events?account=%00', undefined, {}, 400, 'FIELD_INVALID'],
      ['GET', '/admin/v1/audit-events?action=a%0Ab', undefined, {}, 400, 'FIELD_INVALID'],
      ['PUT', `/admin/v1/accounts/${account.id}/subscriptions/moon/totp`, { status: 'active' }, {}, 400, 'FIELD_INVALID'],
      ['PUT', `/admin/v1/accounts/${account.id}/subscriptions/eu/sms`, { status: 'active' }, {}, 400, 'FIELD_INVALID'],
      ['POST', `/admin/v1/keys/${key.id}/roll`, { graceSeconds: -1 }, {}, 400, 'FIELD_INVALID'],
      ['POST', `/admin/v1/keys/${key.id}/roll`, { graceSeconds: 1e12 }, {}, 400, 'FIELD_INVALID'],
      ['POST', `/admin/v1/keys/${key.id}/roll`, { graceSeconds: 1.5 }, {}, 400, 'FIELD_INVALID'],
      ['POST', `/admin/v1/accounts/${account.id}/keys`, { expiresAt: 'tomorrow' }, {}, 400, 'FIELD_INVALID'],
      ['POST', `/admin/v1/accounts/${account.id}/keys`, { scope: { groups: ['sms'] } }, {}, 400, 'FIELD_INVALID'],
      ['POST', `/admin/v1/accounts/${account.id}/keys`, { scope: { planets: ['mars'] } }, {}, 400, 'FIELD_INVALID'],
      ['POST', '/admin/v1/accounts/acc_none/keys', {}, {}, 404, 'NOT_FOUND'],
      ['PUT', `/admin/v1/accounts/${account.id}/plan`, { rate: -1 }, {}, 400, 'FIELD_INVALID'],
      ['PUT', `/admin/v1/accounts/${account.id}/plan`, { weights: { sms: 1 } }, {}, 400, 'FIELD_INVALID'],
      ['GET', `/admin/v1/accounts/${account.id}/usage?from=9999-99-99`, undefined, {}, 400, 'FIELD_INVALID'],
      // A day the calendar does not have (Date.parse reads it as 2 March): found by npm run soak.
      ['GET', `/admin/v1/accounts/${account.id}/usage?from=2026-02-30`, undefined, {}, 400, 'FIELD_INVALID'],
      ['GET', '/admin/v1/nothing-here', undefined, {}, 404, 'ADMIN_ROUTE_NOT_FOUND'],
      ['DELETE', '/admin/v1/accounts', undefined, {}, 404, 'ADMIN_ROUTE_NOT_FOUND'],
    ]
    const before = await json<{ items: unknown[] }>(await call(a, 'GET', '/admin/v1/audit-events?limit=200', W), 200)
    for (const [method, path, body, headers, status, expected] of cases) {
      const res = await call(a, method, path, W, body, headers)
      const what = `${method} ${path.slice(0, 80)} ${typeof body === 'string' ? body.slice(0, 40) : JSON.stringify(body)?.slice(0, 40)}`
      assert.ok(res.status < 500, `${what}: ${res.status}`)
      if (expected === '') {
        assert.equal(res.status, status, what)
        await res.arrayBuffer()
      } else {
        assert.deepEqual([...new Set(await errorCodes(res, status))], [expected], what)
      }
    }
    const problems = await json<{ message: string }[]>(await call(a, 'GET', '/admin/v1/accounts?limit=0&status=gone', W), 400)
    assert.equal(problems.length, 2, 'every bad field at once')
    assert.ok(problems.some((p) => p.message.includes('limit')) && problems.some((p) => p.message.includes('status')))
    const named = await json<{ message: string }[]>(await call(a, 'POST', '/admin/v1/accounts', W, '{"name":"\\ud800"}'), 400)
    assert.match(named[0]!.message, /^Invalid name: /, 'the field is named')

    const accounts = await json<{ items: Account[] }>(await call(a, 'GET', '/admin/v1/accounts?limit=200', W), 200)
    assert.deepEqual(
      accounts.items.filter((x) => x.id !== a.pub.accountId).map((x) => x.name),
      ['Acme'],
      'no bad request made an account',
    )
    const after = await json<{ items: { id: string; outcome: string; action: string }[] }>(await call(a, 'GET', '/admin/v1/audit-events?limit=200', W), 200)
    const seen = new Set((before.items as { id: string }[]).map((e) => e.id))
    assert.deepEqual(
      after.items.filter((e) => !seen.has(e.id) && e.outcome === 'success').map((e) => e.action),
      [],
      'no change was made',
    )
  })
}

test('the admin document: an operationId, a response schema and the bearer 401 on every operation; it lints clean; the public document has no admin route', async (t) => {
  const a = await startAdmin(t)
  const doc = a.doc() as {
    paths: Record<string, Record<string, { operationId?: string; responses: Record<string, { content?: unknown; headers?: Record<string, unknown> }> }>>
  }
  const ids = new Set<string>()
  for (const [path, methods] of Object.entries(doc.paths)) {
    assert.match(path, /^\/admin\/v1\//)
    for (const [method, op] of Object.entries(methods)) {
      assert.ok(op.operationId && !ids.has(op.operationId), `${method} ${path}: a unique operationId`)
      ids.add(op.operationId)
      const success = Object.keys(op.responses).find((s) => s.startsWith('2'))
      assert.ok(success && op.responses[success]!.content, `${method} ${path}: a documented success body`)
      assert.ok(op.responses['401']?.headers?.['WWW-Authenticate'], `${method} ${path}: 401 with WWW-Authenticate`)
      if (method !== 'get') assert.ok(op.responses['403'], `${method} ${path}: 403 for a read token`)
    }
  }
  assert.deepEqual(
    [...ids].sort(),
    [
      'clearTotpLockout',
      'createAccount',
      'createKey',
      'getAccount',
      'getKey',
      'getPlan',
      'getUsage',
      'listAccounts',
      'listAuditEvents',
      'listKeys',
      'listSubscriptions',
      'resetPlan',
      'revokeKey',
      'rollKey',
      'setPlan',
      'setSubscription',
      'updateAccount',
      'createWebhook',
      'deleteWebhook',
      'listWebhookDeliveries',
      'listWebhooks',
      'resendWebhookDelivery',
      'clearTotpUserLockout',
      'deleteTotpUser',
      'getTotpUser',
      'listTotpUsers',
      'getFactorSettings',
      'importFactors',
      'updateFactorSettings',
      'cancelJob',
      'listJobs',
      'inviteOperator',
      'listSsoProviders',
      'putSsoProvider',
      'deleteSsoProvider',
    ].sort(),
    'the operations, by the names clients generated from the document use',
  )
  const publicDoc = a.pub.app.swagger() as { paths: Record<string, unknown> }
  assert.ok(
    Object.keys(publicDoc.paths).every((p) => !p.startsWith('/admin')),
    'no admin route in the public document',
  )

  const file = join(tempDir(t), 'admin.json')
  writeFileSync(file, JSON.stringify(doc))
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [join(ROOT, 'node_modules/@redocly/cli/bin/cli.js'), 'lint', '--config', join(ROOT, 'redocly.yaml'), '--format', 'json', file],
    {
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
      maxBuffer: 16 << 20,
    },
  ).catch((error: { stdout?: string }) => ({ stdout: error.stdout ?? '' }))
  const { problems } = JSON.parse(stdout) as { problems: { severity: string; ruleId: string; message: string }[] }
  assert.deepEqual(
    problems.map((p) => `${p.severity} ${p.ruleId}: ${p.message}`),
    [],
  )
})
