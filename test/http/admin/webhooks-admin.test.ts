/**
 * The admin API's webhook routes over real HTTP: created with the secret once, listed without
 * it, their delivery log paged, a delivery re-sent (the same webhook-id again), deleted; every
 * change in the audit trail; read tokens refused on writes; the SSRF rule at creation; and a
 * sweep of bad input on every route, which never answers 5xx.
 */
import { test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { startApp } from '../../support/helper.ts'
import { resolveKeyring } from '../../../src/config/encryption.ts'
import { checkAnswersFrom, type OpenApiDocument } from '../../support/conformance.ts'
import { Receiver, waitFor } from '../../support/receiver.ts'
import { buildAdminApp } from '../../../src/admin/api/app.ts'
import { Webhooks } from '../../../src/services/webhooks.ts'
import { CLI } from '../../../src/domain/accounts.ts'
import { isFailure } from '../../../src/services/outcome.ts'

async function start(t: TestContext, env: Record<string, string>) {
  const pub = await startApp(t, { WEBHOOK_POLL_MS: '50', WEBHOOK_BACKOFF_MS: '100', WEBHOOK_BACKOFF_MAX_MS: '200', ...env })
  const webhooks = new Webhooks({ store: pub.store, keyring: resolveKeyring(pub.config), config: pub.config })
  const app = await buildAdminApp({
    config: pub.config,
    accounts: pub.accounts,
    factors: pub.factors,
    totp: pub.totp,
    idempotency: pub.idempotency,
    webhooks,
    logStream: { write: () => undefined },
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  t.after(() => app.close())
  const url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`
  const stop = checkAnswersFrom(url, () => app.swagger() as unknown as OpenApiDocument)
  t.after(() => {
    const mismatches = stop()
    if (mismatches.length > 0) throw new Error(`answers not described by the admin document:\n${mismatches.join('\n')}`)
  })
  const token = async (scope: string) => {
    const made = await pub.accounts.createAdminToken({ actor: CLI }, { name: scope, scope })
    if (isFailure(made)) throw new Error(made.message)
    return made.secret
  }
  const W = await token('write')
  const R = await token('read')
  const call = async (method: string, path: string, body?: unknown, bearer = W) => {
    const res = await fetch(url + path, {
      method,
      headers: { authorization: `Bearer ${bearer}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
    })
    const text = await res.text()
    // biome-ignore lint/suspicious/noExplicitAny: each test reads the fields of the answer it expects
    return { status: res.status, body: text === '' ? null : (JSON.parse(text) as any), location: res.headers.get('location') }
  }
  return { pub, call, R, base: `/admin/v1/accounts/${pub.accountId}/webhooks` }
}

test('admin webhooks: create (secret once), list, deliveries, re-send, delete; audited; read tokens only read', async (t) => {
  const a = await start(t, { WEBHOOK_ALLOW_PRIVATE: 'true' })
  const receiver = await new Receiver().start()
  t.after(() => receiver.stop())
  const made = await a.call('POST', a.base, { url: `http://127.0.0.1:${receiver.port}/in`, eventTypes: ['factor.created', 'factor.deleted'] })
  assert.equal(made.status, 201, JSON.stringify(made.body))
  assert.match(made.body.secret, /^whsec_/)
  assert.equal(made.location, `${a.base}/${made.body.id}`)
  assert.deepEqual(made.body.eventTypes, ['factor.created', 'factor.deleted'])
  receiver.secret = made.body.secret
  const listed = await a.call('GET', a.base, undefined, a.R)
  assert.deepEqual(listed.body, {
    items: [{ id: made.body.id, url: made.body.url, eventTypes: made.body.eventTypes, createdAt: made.body.createdAt }],
    next: null,
  })
  assert.ok(!JSON.stringify(listed.body).includes('whsec_'), 'no secret in the listing')

  const event = await a.pub.store.audit.append({
    actor: 'system',
    action: 'factor.created',
    target: { type: 'factor', id: 'fac_1' },
    accountId: a.pub.accountId,
    ip: null,
    outcome: 'success',
    detail: { userID: 'u1', factorID: 'fac_1' },
  })
  await waitFor(() => receiver.deliveries.length === 1, 5000, 'the delivery')
  const path = `${a.base}/${made.body.id}/deliveries`
  await waitFor(async () => (await a.call('GET', path)).body.items[0]?.status === 'delivered', 5000, 'logged')
  const log = await a.call('GET', `${path}?limit=1`, undefined, a.R)
  assert.equal(log.body.items[0].id, event.id)
  assert.deepEqual(
    log.body.items[0].attempts.map((x: { statusCode: number }) => x.statusCode),
    [204],
  )

  assert.equal((await a.call('POST', `${path}/${event.id}/resend`, undefined, a.R)).status, 403, 'a read token')
  const resent = await a.call('POST', `${path}/${event.id}/resend`)
  assert.deepEqual([resent.status, resent.body], [200, { resent: true }])
  await waitFor(() => receiver.deliveries.length === 2, 5000, 'the re-send')
  assert.deepEqual(
    receiver.deliveries.map((d) => d.id),
    [event.id, event.id],
    'the same webhook-id, for the receiver to drop',
  )
  assert.ok(receiver.deliveries.every((d) => d.payload !== null))
  assert.equal((await a.call('POST', `${path}/evt_00000000000000000000ff/resend`)).status, 404)

  assert.equal((await a.call('DELETE', `${a.base}/${made.body.id}`, undefined, a.R)).status, 403)
  assert.deepEqual((await a.call('DELETE', `${a.base}/${made.body.id}`)).body, { deleted: true })
  assert.equal((await a.call('DELETE', `${a.base}/${made.body.id}`)).status, 404)
  assert.deepEqual((await a.call('GET', a.base)).body.items, [])
  const trail = await a.call('GET', `/admin/v1/audit-events?account=${a.pub.accountId}&limit=50`)
  const actions = trail.body.items.filter((e: { target: { type: string } }) => e.target.type === 'webhook').map((e: { action: string }) => e.action)
  assert.deepEqual(actions, ['webhook.delete', 'webhook.resend', 'webhook.create'])
})

test('admin webhooks: the SSRF rule at creation, the limit, and a sweep of bad input never answering 5xx', async (t) => {
  const a = await start(t, { WEBHOOK_MAX_ENDPOINTS: '2' })
  for (const url of [
    'https://127.0.0.1/',
    'https://10.0.0.1/hook',
    'https://169.254.169.254/latest/meta-data',
    'https://[::1]/',
    'https://[::ffff:127.0.0.1]/',
    'https://localhost/',
    'https://intranet/',
    'http://hooks.example.com/',
    'https://0x7f000001/',
    'https://user:pw@hooks.example.com/',
    'ftp://hooks.example.com/',
  ]) {
    const res = await a.call('POST', a.base, { url })
    assert.equal(res.status, 400, url)
    assert.equal(res.body[0].code, 'FIELD_INVALID', url)
    assert.match(res.body[0].message, /^Invalid url: /, url)
  }
  assert.equal((await a.call('POST', a.base, { url: 'https://hooks.example.com/a', eventTypes: ['factor.created'] })).status, 201)
  assert.equal((await a.call('POST', a.base, { url: 'https://hooks.example.com/b', eventTypes: ['factor.created'] })).status, 201)
  const full = await a.call('POST', a.base, { url: 'https://hooks.example.com/c' })
  assert.deepEqual([full.status, full.body[0].code], [409, 'LIMIT_REACHED'])
  const [one] = (await a.call('GET', a.base)).body.items
  const bad: [string, string, unknown?][] = [
    ['POST', a.base, {}],
    ['POST', a.base, { url: 1 }],
    ['POST', a.base, { url: '' }],
    ['POST', a.base, { url: 'x'.repeat(5000) }],
    ['POST', a.base, { url: 'https://hooks.example.com/', eventTypes: [] }],
    ['POST', a.base, { url: 'https://hooks.example.com/', eventTypes: ['nope'] }],
    ['POST', a.base, { url: 'https://hooks.example.com/', eventTypes: ['factor.created', 'factor.created'] }],
    ['POST', a.base, { url: 'https://hooks.example.com/', eventTypes: 'factor.created' }],
    ['POST', a.base, { url: 'https://hooks.example.com/', extra: 1 }],
    ['POST', a.base, '{"url":'],
    ['POST', a.base, '[]'],
    ['POST', a.base, 'null'],
    ['POST', a.base, { url: 'https://\u0000/' }],
    ['POST', '/admin/v1/accounts/acc_none/webhooks', { url: 'https://hooks.example.com/' }],
    ['GET', '/admin/v1/accounts/acc_none/webhooks'],
    ['GET', `/admin/v1/accounts/${'x'.repeat(300)}/webhooks`],
    ['DELETE', `${a.base}/whe_none`],
    ['DELETE', `${a.base}/${'%FF'.repeat(3)}`],
    ['GET', `${a.base}/whe_none/deliveries`],
    ['GET', `${a.base}/${one.id}/deliveries?after=nope`],
    ['GET', `${a.base}/${one.id}/deliveries?limit=0`],
    ['GET', `${a.base}/${one.id}/deliveries?limit=abc`],
    ['GET', `${a.base}/${one.id}/deliveries?what=1`],
    ['POST', `${a.base}/${one.id}/deliveries/evt_nope/resend`],
    ['POST', `${a.base}/whe_none/deliveries/evt_nope/resend`],
    ['POST', `/admin/v1/accounts/acc_none/webhooks/${one.id}/deliveries/evt_x/resend`],
    ['PUT', a.base, {}],
    ['PATCH', `${a.base}/${one.id}`, {}],
  ]
  for (const [method, path, body] of bad) {
    const res = await a.call(method, path, body)
    const what = `${method} ${path.slice(0, 90)} ${JSON.stringify(body)?.slice(0, 60)}`
    assert.ok(res.status >= 400 && res.status < 500, `${what}: ${res.status}`)
    assert.ok(Array.isArray(res.body) && res.body.every((p: { type: string }) => p.type === 'Error'), what)
  }
  assert.equal((await a.call('GET', a.base)).body.items.length, 2, 'no bad request made an endpoint')
})
