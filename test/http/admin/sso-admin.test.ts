/**
 * The admin API's single sign-on providers over real HTTP: created and replaced by PUT (201, then
 * 200), listed, deleted; the client secret taken, kept sealed and never answered, audited or
 * logged; bad settings refused with the field named; read tokens refused on writes; hostile
 * bodies never a 5xx. The portal then offers what the API made.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { startAdmin } from '../../support/admin-helper.ts'

const SECRET = 'the-client-secret-given-by-the-provider-0123456789'

test('the admin API creates, replaces, lists and deletes providers; the secret goes in sealed and never comes out', async (t) => {
  const admin = await startAdmin(t)
  const { pub } = admin
  const call = (method: string, path: string, body?: unknown, token = admin.write.secret) =>
    fetch(`${admin.url}/admin/v1/sso-providers${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
    })
  const settings = {
    name: 'Keycloak',
    issuer: 'https://id.example.com/realms/acme/',
    clientId: 'tessera-portal',
    clientSecret: SECRET,
    domains: ['Acme.example'],
    joinAccountId: pub.accountId,
    joinRole: 'developer',
    mfa: 'amr',
    passwordAllowed: false,
  }
  const made = await call('PUT', '/keycloak', settings)
  assert.equal(made.status, 201)
  const body = (await made.json()) as Record<string, unknown>
  assert.deepEqual(
    { ...body, createdAt: undefined, updatedAt: undefined },
    {
      id: 'keycloak',
      name: 'Keycloak',
      issuer: 'https://id.example.com/realms/acme',
      clientId: 'tessera-portal',
      clientSecret: 'set',
      domains: ['acme.example'],
      joinAccountId: pub.accountId,
      joinRole: 'developer',
      mfa: 'amr',
      passwordAllowed: false,
      redirectUri: `${pub.config.publicBaseUrl}/portal/sso/keycloak/callback`,
      createdAt: undefined,
      updatedAt: undefined,
    },
  )
  // The portal's sign-in page offers it.
  assert.match(await (await fetch(`${pub.url}/portal/sign-in`)).text(), /Sign in with Keycloak/)
  // Replaced with every setting as given: defaults for what is left out.
  const replaced = await call('PUT', '/keycloak', { name: 'Keycloak', issuer: 'https://id.example.com/realms/acme', clientId: 'tessera-portal' })
  assert.equal(replaced.status, 200)
  assert.deepEqual(
    (({ clientSecret, domains, joinAccountId, mfa, passwordAllowed }) => ({ clientSecret, domains, joinAccountId, mfa, passwordAllowed }))(
      (await replaced.json()) as Record<string, unknown>,
    ),
    { clientSecret: 'none', domains: [], joinAccountId: null, mfa: 'portal', passwordAllowed: true },
  )
  assert.equal((await call('PUT', '/keycloak', settings)).status, 200)
  const listed = await call('GET', '')
  assert.equal(listed.status, 200)
  const items = ((await listed.json()) as { items: { id: string; clientSecret: string }[] }).items
  assert.deepEqual(
    items.map((p) => [p.id, p.clientSecret]),
    [['keycloak', 'set']],
  )
  // Refusals name the field; a read token writes nothing.
  for (const [bad, field] of [
    [{ ...settings, issuer: 'http://id.example.com' }, 'issuer'],
    [{ ...settings, domains: [] }, 'domains'],
    [{ ...settings, domains: ['not a domain'] }, 'domains'],
    [{ ...settings, name: 'x\u202e' }, 'name'],
    [{ ...settings, mfa: 'maybe' }, 'mfa'],
    [{ ...settings, extra: 1 }, 'extra'],
  ] as const) {
    const r = await call('PUT', '/other', bad)
    assert.equal(r.status, 400, JSON.stringify(bad).slice(0, 80))
    assert.match(await r.text(), new RegExp(field))
  }
  assert.equal((await call('PUT', '/other', { ...settings, joinAccountId: 'acc_0000000000000000' })).status, 404)
  for (const id of ['Bad', 'x'.repeat(40), '-x', 'a%2e%2e']) assert.equal((await call('PUT', `/${id}`, settings)).status, 400, id)
  for (const body of ['{"name":', '[]', 'null', `{"name":${'['.repeat(5000)}${']'.repeat(5000)}}`]) {
    const r = await call('PUT', '/other', body)
    assert.ok(r.status >= 400 && r.status < 500, `${body.slice(0, 20)}: ${r.status}`)
  }
  assert.equal((await call('PUT', '/other', settings, admin.read.secret)).status, 403)
  assert.equal((await call('DELETE', '/keycloak', undefined, admin.read.secret)).status, 403)
  // Deleted, then gone.
  const deleted = await call('DELETE', '/keycloak')
  assert.equal(deleted.status, 200)
  assert.deepEqual(await deleted.json(), { id: 'keycloak', deleted: true })
  assert.equal((await call('DELETE', '/keycloak')).status, 404)
  assert.deepEqual(((await (await call('GET', '')).json()) as { items: unknown[] }).items, [])
  // The secret in no answer, event or log line; every change audited with the token as actor.
  const events = (await pub.store.audit.list({ limit: 50 })).items.filter((e) => e.action.startsWith('sso.'))
  assert.deepEqual(events.map((e) => e.action).sort(), ['sso.provider-create', 'sso.provider-delete', 'sso.provider-update', 'sso.provider-update'])
  assert.ok(events.every((e) => e.actor === `admin-token:${admin.write.id}`))
  assert.ok(!JSON.stringify(events).includes(SECRET) && !admin.logs.join('\n').includes(SECRET) && !pub.logs.join('\n').includes(SECRET))
})
