/**
 * The portal's keys, subscriptions and getting-started pages over HTTP (issue 13): a key is
 * shown once and works; rolls with a grace, revocations behind a confirmation; roles, other
 * accounts and forged forms refused with nothing changed; subscriptions with and without an
 * operator's approval; the region base URLs; the audit events each change leaves.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import { startApp, type Running } from '../../support/helper.ts'
import { PortalClient, portalUser, signedInClient } from '../../support/portal-helper.ts'
import { SYSTEM } from '../../../src/domain/accounts.ts'
import { isFailure } from '../../../src/services/outcome.ts'
import type { Role } from '../../../src/domain/portal.ts'

const keysOf = (id: string) => `/portal/accounts/${id}/keys`
const subsOf = (id: string) => `/portal/accounts/${id}/subscriptions`
const startOf = (id: string) => `/portal/accounts/${id}/start`

/** secretIn: the key a page shows once (asserted to be there). */
function secretIn(text: string): string {
  const m = /class="secret" id="new-key">([^<]+)</.exec(text)
  assert.ok(m, `the page shows a new key: ${text.slice(0, 400)}`)
  return m[1]!
}

const ping = async (app: Running, key: string) => (await fetch(`${app.url}/totp/ping`, { headers: { 'x-api-key': key } })).status

/** createKey posts the create form, from the keys page. */
function createKey(client: PortalClient, accountId: string, fields: Record<string, string>) {
  return client.post(keysOf(accountId), fields, { from: keysOf(accountId) })
}

/** freshAccount: a new account with no subscription and no key, and a signed-in member of it. */
async function freshAccount(app: Running, role: Role = 'owner') {
  const account = await app.accounts.createAccount({ actor: SYSTEM }, { name: 'Fresh & <new>' })
  assert.ok(!isFailure(account))
  const made = await portalUser(app, { accountId: account.id, role })
  const client = new PortalClient(app.url)
  await client.signIn(made.email, made.password)
  return { accountId: account.id, client, user: made.user }
}

async function events(app: Running, accountId: string, action: string) {
  return (await app.store.audit.list({ accountId, limit: 100 })).items.filter((e) => e.action === action)
}

test('create a key: shown once in the answer (no-store, no redirect, no cookie, not logged), never again on the list; it works; the audit names the portal user', async (t) => {
  const app = await startApp(t)
  const { client, user } = await signedInClient(app, { role: 'developer' })
  const list = await client.get(keysOf(app.accountId))
  assert.equal(list.status, 200)
  assert.match(list.text, /<caption>Keys in use \(1\)<\/caption>/)
  assert.match(list.text, /<th scope="row"><a href="[^"]+\/keys\/key_[0-9a-f]+">test key<span class="visually-hidden">, key ending in [^<]+<\/span><\/a><\/th>/)
  assert.match(list.text, /<button type="submit">Create key<\/button>/)

  const made = await createKey(client, app.accountId, { name: 'ci-deploy', expires: 'never' })
  assert.equal(made.status, 201)
  assert.equal(made.location, null)
  assert.equal(made.headers.get('cache-control'), 'no-store')
  assert.equal(made.headers.get('set-cookie'), null)
  const key = secretIn(made.text)
  assert.match(made.text, /it will not be shown again/)
  assert.match(made.text, /<button type="button" data-copy="new-key" hidden>Copy key<\/button>/)
  assert.match(made.text, /role="status" id="new-key-status"/)
  assert.match(made.text, new RegExp(`href="${keysOf(app.accountId)}">Back to the keys`))
  assert.equal(await ping(app, key), 200, 'the new key works at once')

  const again = await client.get(keysOf(app.accountId))
  assert.ok(!again.text.includes(key), 'the list never shows the key')
  assert.match(again.text, /<caption>Keys in use \(2\)<\/caption>/)
  assert.match(
    again.text,
    new RegExp(`ci-deploy<span class="visually-hidden">, key ending in ${key.slice(-4)}</span></a></th><td><code class="id">…${key.slice(-4)}</code>`),
  )
  assert.ok(!app.logs.some((line) => line.includes(key)), 'the key is in no log line')

  const created = await events(app, app.accountId, 'key.create')
  assert.equal(created.length, 2)
  assert.equal(created[0]!.actor, `portal-user:${user.id}`)
  assert.equal(created[0]!.outcome, 'success')
  assert.ok(!JSON.stringify(created[0]).includes(key), 'the audit event does not hold the key')
})

test('create a key: expiry and scope are kept; a key scoped to another region is refused here; bad input gets 422 with the form filled again', async (t) => {
  const app = await startApp(t)
  const { client } = await signedInClient(app, { role: 'developer' })
  await client.get(keysOf(app.accountId))
  // Checkboxes send a field once per box checked, which PortalClient.post (one value a field) cannot.
  const body = new URLSearchParams({ _csrf: client.csrf(), name: 'us only', expires: '30' })
  body.append('regions', 'us')
  body.append('groups', 'totp')
  const res = await fetch(`${app.url}${keysOf(app.accountId)}`, {
    method: 'POST',
    redirect: 'manual',
    headers: { cookie: client.cookieHeader, origin: app.url, 'content-type': 'application/x-www-form-urlencoded' },
    body,
  })
  assert.equal(res.status, 201)
  const key = secretIn(await res.text())
  assert.equal(await ping(app, key), 403, 'this node is in eu; the key may call us only')
  const info = (await app.accounts.listKeys(app.accountId)).find((k) => k.name === 'us only')!
  assert.deepEqual(info.scope, { groups: ['totp'], regions: ['us'] })
  assert.equal(info.expiresAt, new Date(app.clock.now() + 30 * 86_400_000).toISOString())
  const list = await client.get(keysOf(app.accountId))
  assert.match(list.text, /<td>TOTP; us<\/td>/)

  const dated = await createKey(client, app.accountId, { name: 'dated', expires: 'date', date: '2999-01-31' })
  assert.equal(dated.status, 201)
  assert.equal((await app.accounts.listKeys(app.accountId)).find((k) => k.name === 'dated')!.expiresAt, '2999-01-31T00:00:00.000Z')

  const before = (await app.accounts.listKeys(app.accountId)).length
  const cases: [Record<string, string>, RegExp][] = [
    [{ name: '', expires: 'never' }, /give the key a name/],
    [{ name: 'x'.repeat(201), expires: 'never' }, /at most 200 characters/],
    [{ name: 'past', expires: 'date', date: '2001-01-01' }, /after today/],
    [{ name: 'no date', expires: 'date', date: '' }, /choose the expiry date/],
    [{ name: 'odd', expires: '12' }, /one of the expiries offered/],
    [{ name: 'mars', expires: 'never', regions: 'mars' }, /scope\.regions: &quot;mars&quot; is not one of eu, us, apac/],
  ]
  for (const [fields, words] of cases) {
    const bad = await createKey(client, app.accountId, fields)
    assert.equal(bad.status, 422, JSON.stringify(fields))
    assert.match(bad.text, /<p class="error" role="alert">The key was not created: /)
    assert.match(bad.text, words)
    if (fields.name !== '' && fields.name!.length <= 200)
      assert.match(bad.text, new RegExp(`id="key-name" name="name"[^>]*value="${fields.name}"`), 'the name is kept')
  }
  assert.equal((await app.accounts.listKeys(app.accountId)).length, before, 'no key made by a refused form')
})

test('roll with a grace: both keys work until the grace ends, then the old one is refused; a roll without grace stops the old key at once; a key rolls once', async (t) => {
  const app = await startApp(t)
  const { client, user } = await signedInClient(app, { role: 'developer' })
  const old = secretIn((await createKey(client, app.accountId, { name: 'ci-deploy', expires: 'never' })).text)
  const info = (await app.accounts.listKeys(app.accountId)).find((k) => k.name === 'ci-deploy')!
  const path = `${keysOf(app.accountId)}/${info.id}/roll`
  const page = await client.get(keysOf(app.accountId))
  assert.match(page.text, new RegExp(`<a href="${path}">Roll<span class="visually-hidden"> key ci-deploy</span></a>`), 'the list links to the confirmation')
  const ask = await client.get(path)
  assert.equal(ask.status, 200)
  assert.match(ask.text, /Roll key ci-deploy\? A new key is made and shown once/)
  assert.match(ask.text, /<option value="86400" selected>24 hours<\/option>/, 'the grace the CLI and the admin API default to')
  const unconfirmed = await client.post(path, { grace: '3600' })
  assert.equal(unconfirmed.status, 200, 'a post without confirm=1 only asks')
  assert.match(unconfirmed.text, /<option value="3600" selected>1 hour<\/option>/, 'with the grace chosen')
  assert.equal((await app.accounts.listKeys(app.accountId)).length, 2, 'nothing rolled')

  const rolled = await client.post(path, { grace: '3600', confirm: '1' })
  assert.equal(rolled.status, 201)
  const fresh = secretIn(rolled.text)
  assert.notEqual(fresh, old)
  assert.match(rolled.text, new RegExp(`keeps working until <time datetime="${new Date(app.clock.now() + 3_600_000).toISOString()}">`))
  assert.deepEqual([await ping(app, old), await ping(app, fresh)], [200, 200], 'both work in the grace')
  const during = await client.get(keysOf(app.accountId))
  assert.match(during.text, /<span class="badge warn">expiring \(rolled\)<\/span>/)
  assert.equal(during.text.match(/\/roll"/g)?.length, 2, 'the old key in its grace rolls no more (the new one and the test key do)')
  assert.match(during.text, /Revoke<span class="visually-hidden"> key ci-deploy \(ending in/, 'the names are told apart')

  app.clock.advance(3_601_000)
  assert.deepEqual([await ping(app, old), await ping(app, fresh)], [403, 200], 'the old key is refused once the grace is over')
  assert.match((await client.get(keysOf(app.accountId))).text, /<span class="badge off">expired<\/span>/)

  const again = await client.post(`${keysOf(app.accountId)}/${info.id}/roll`, { grace: '0', confirm: '1' }, { from: keysOf(app.accountId) })
  assert.equal(again.status, 409, 'an expired, rolled key rolls no more')
  assert.match(again.text, /role="alert">Nothing was changed: key .* is revoked, expired or rolled already/)

  const freshId = (await app.accounts.listKeys(app.accountId)).find((k) => k.name === 'ci-deploy' && k.rolledTo === null)!.id
  const now = await client.post(`${keysOf(app.accountId)}/${freshId}/roll`, { grace: '0', confirm: '1' }, { from: keysOf(app.accountId) })
  assert.equal(now.status, 201)
  assert.match(now.text, /stopped working at once/)
  assert.deepEqual([await ping(app, fresh), await ping(app, secretIn(now.text))], [403, 200])

  const badGrace = await client.post(`${keysOf(app.accountId)}/${app.keyId}/roll`, { grace: '999999', confirm: '1' }, { from: keysOf(app.accountId) })
  assert.equal(badGrace.status, 422)
  assert.equal(await ping(app, app.key), 200, 'a refused grace rolls nothing')
  const rolls = await events(app, app.accountId, 'key.roll')
  assert.deepEqual(
    rolls.map((e) => [e.actor, e.outcome]),
    [
      [`portal-user:${user.id}`, 'success'],
      [`portal-user:${user.id}`, 'failure'],
      [`portal-user:${user.id}`, 'success'],
    ].reverse(),
  )
})

test('twenty rolls of one key at once: one gets a new key, the others 409; twenty revocations at once: one', async (t) => {
  const app = await startApp(t)
  const { client } = await signedInClient(app, { role: 'developer' })
  await client.get(keysOf(app.accountId))
  const rolls = await Promise.all(Array.from({ length: 20 }, () => client.post(`${keysOf(app.accountId)}/${app.keyId}/roll`, { grace: '3600', confirm: '1' })))
  assert.deepEqual(rolls.map((r) => r.status).sort(), [201, ...Array(19).fill(409)])
  assert.equal((await app.accounts.listKeys(app.accountId)).length, 2)
  const revokes = await Promise.all(Array.from({ length: 20 }, () => client.post(`${keysOf(app.accountId)}/${app.keyId}/revoke`, { confirm: '1' }, {})))
  assert.deepEqual(revokes.map((r) => r.status).sort(), [303, ...Array(19).fill(409)])
  assert.equal((await events(app, app.accountId, 'key.revoke')).filter((e) => e.outcome === 'success').length, 1)
})

test('rolling or revoking a key ends the grace of the key rolled to it: the confirmation says so, and that key is refused at once', async (t) => {
  const app = await startApp(t)
  const { client } = await signedInClient(app, { role: 'developer' })
  const first = secretIn((await createKey(client, app.accountId, { name: 'ci-deploy', expires: 'never' })).text)
  const firstId = (await app.accounts.listKeys(app.accountId)).find((k) => k.name === 'ci-deploy')!.id
  const ask = await client.get(`${keysOf(app.accountId)}/${firstId}/roll`)
  assert.ok(!ask.text.includes('rolled to this one'), 'a key rolled from none warns of nothing')
  const second = secretIn((await client.post(`${keysOf(app.accountId)}/${firstId}/roll`, { grace: '86400', confirm: '1' })).text)
  const secondId = (await app.accounts.listKeys(app.accountId)).find((k) => k.name === 'ci-deploy' && k.rolledTo === null)!.id
  const label = `ci-deploy \\(ending in ${first.slice(-4)}\\)`
  assert.match(
    (await client.get(`${keysOf(app.accountId)}/${secondId}/roll`)).text,
    new RegExp(`<p>Key ${label}, rolled to this one, is still in its grace: it stops now too\\.</p>`),
  )
  assert.match(
    (await client.get(`${keysOf(app.accountId)}/${secondId}/revoke`)).text,
    new RegExp(`<p>Key ${label}, rolled to this one, is still in its grace: it stops now too\\.</p>`),
  )
  const third = secretIn((await client.post(`${keysOf(app.accountId)}/${secondId}/roll`, { grace: '86400', confirm: '1' })).text)
  assert.deepEqual([await ping(app, first), await ping(app, second), await ping(app, third)], [403, 200, 200])
  assert.match((await client.get(`${keysOf(app.accountId)}/${firstId}`)).text, /<span class="badge off">expired<\/span>/)
  const thirdId = (await app.accounts.listKeys(app.accountId)).find((k) => k.name === 'ci-deploy' && k.rolledTo === null)!.id
  assert.equal((await client.post(`${keysOf(app.accountId)}/${thirdId}/revoke`, { confirm: '1' })).status, 303)
  assert.deepEqual([await ping(app, second), await ping(app, third)], [403, 403], 'the key in its grace stops with the one it was rolled to')
})

test('a key whose successor is no longer kept names it as such on its page', async (t) => {
  const app = await startApp(t)
  const { client } = await signedInClient(app, { role: 'developer' })
  secretIn((await createKey(client, app.accountId, { name: 'ci-deploy', expires: 'never' })).text)
  const oldId = (await app.accounts.listKeys(app.accountId)).find((k) => k.name === 'ci-deploy')!.id
  secretIn((await client.post(`${keysOf(app.accountId)}/${oldId}/roll`, { grace: '0', confirm: '1' })).text)
  const nextId = (await app.accounts.listKeys(app.accountId)).find((k) => k.name === 'ci-deploy' && k.rolledTo === null)!.id
  // A key ends no later than the key it was rolled to, so the pruning of ended keys takes a key's predecessor first; rows from
  // before it (a key left in its grace when its successor was revoked) may still point to a key deleted since.
  const db = new DatabaseSync(join(app.config.dataDir, 'tessera.sqlite'))
  db.prepare('DELETE FROM api_keys WHERE id = ?').run(nextId)
  db.close()
  const page = await client.get(`${keysOf(app.accountId)}/${oldId}`)
  assert.equal(page.status, 200)
  assert.match(page.text, new RegExp(`<dt>Rolled to</dt><dd><code class="id">${nextId}</code> <span class="hint">\\(ended, and no longer kept: `))
})

test('revoke: a confirmation first, then 403 at once for calls with the key; a post without confirm=1 only asks', async (t) => {
  const app = await startApp(t)
  const { client, user } = await signedInClient(app, { role: 'developer' })
  const key = secretIn((await createKey(client, app.accountId, { name: 'ci-deploy', expires: 'never' })).text)
  const info = (await app.accounts.listKeys(app.accountId)).find((k) => k.name === 'ci-deploy')!
  const path = `${keysOf(app.accountId)}/${info.id}/revoke`
  assert.match(
    (await client.get(keysOf(app.accountId))).text,
    new RegExp(`<a href="${path}" class="danger">Revoke<span class="visually-hidden"> key ci-deploy</span></a>`),
  )

  const ask = await client.get(path)
  assert.equal(ask.status, 200)
  assert.match(ask.text, /Revoke key ci-deploy\? Calls with it will get 403 at once\./)
  assert.match(ask.text, /<input type="hidden" name="confirm" value="1">\n<button type="submit" class="danger">Revoke key ci-deploy<\/button>/)
  const unconfirmed = await client.post(path, {})
  assert.equal(unconfirmed.status, 200)
  assert.match(unconfirmed.text, /Calls with it will get 403 at once/)
  assert.equal(await ping(app, key), 200, 'not revoked without confirm=1')

  const done = await client.post(path, { confirm: '1' }, { from: path })
  assert.equal(done.status, 303)
  assert.equal(done.location, `${keysOf(app.accountId)}?revoked=${info.id}`)
  assert.equal(await ping(app, key), 403)
  const after = await client.get(done.location)
  assert.match(after.text, /<p class="notice" role="status">Key ci-deploy \(ending in \w{4}\) is revoked: calls with it get 403\.<\/p>/)
  assert.match(after.text, /<summary>Expired and revoked keys \(1\)<\/summary>/)
  assert.match(after.text, /<span class="badge bad">revoked<\/span>/)
  assert.equal((await client.get(path)).status, 409, 'revoked already')
  const [revoked] = await events(app, app.accountId, 'key.revoke')
  assert.deepEqual([revoked!.actor, revoked!.target, revoked!.outcome], [`portal-user:${user.id}`, { type: 'key', id: info.id }, 'success'])
})

test("roles and accounts: a viewer reads but cannot change (403, no forms); another account's member gets 404; a key of another account is 404 through this one", async (t) => {
  const app = await startApp(t)
  const viewer = await signedInClient(app, { role: 'viewer' })
  const list = await viewer.client.get(keysOf(app.accountId))
  assert.equal(list.status, 200)
  assert.match(list.text, /test key/)
  assert.ok(
    !/Create key|Roll key|Revoke key|\/roll"|\/revoke"|name="_csrf" value="[^"]+"><input type="hidden" name="region"/.test(list.text),
    'no change offered to a viewer',
  )
  const own = await viewer.client.get(`${keysOf(app.accountId)}/${app.keyId}`)
  assert.equal(own.status, 200, "a viewer reads a key's page")
  assert.match(own.text, /<dt>Scope<\/dt><dd>all<\/dd>/)
  assert.ok(!/\/roll"|\/revoke"/.test(own.text), 'with no action offered')
  assert.equal((await viewer.client.get(`${keysOf(app.accountId)}/${app.keyId}/roll`)).status, 403)
  const subs = await viewer.client.get(subsOf(app.accountId))
  assert.match(subs.text, /<span class="badge ok">active<\/span>/)
  assert.ok(!/Cancel TOTP|Subscribe to/.test(subs.text))
  assert.equal((await viewer.client.get(startOf(app.accountId))).status, 200)
  const before = (await app.accounts.listKeys(app.accountId)).length
  assert.equal((await viewer.client.post(keysOf(app.accountId), { name: 'nope', expires: 'never' }, { from: keysOf(app.accountId) })).status, 403)
  assert.equal((await viewer.client.post(`${keysOf(app.accountId)}/${app.keyId}/roll`, { grace: '0', confirm: '1' })).status, 403)
  assert.equal((await viewer.client.get(`${keysOf(app.accountId)}/${app.keyId}/revoke`)).status, 403)
  assert.equal((await viewer.client.post(`${keysOf(app.accountId)}/${app.keyId}/revoke`, { confirm: '1' })).status, 403)
  assert.equal((await viewer.client.post(subsOf(app.accountId), { region: 'eu', group: 'totp', action: 'cancel' })).status, 403)
  assert.equal((await app.accounts.listKeys(app.accountId)).length, before)
  assert.equal(await ping(app, app.key), 200)

  const other = await freshAccount(app, 'owner')
  for (const path of [
    keysOf(app.accountId),
    subsOf(app.accountId),
    startOf(app.accountId),
    `${keysOf(app.accountId)}/${app.keyId}`,
    `${keysOf(app.accountId)}/${app.keyId}/revoke`,
    `${keysOf(other.accountId)}/${app.keyId}`,
    `${keysOf(other.accountId)}/${app.keyId}/roll`,
  ]) {
    assert.equal((await other.client.get(path)).status, 404, path)
  }
  await other.client.get(keysOf(other.accountId))
  assert.equal((await other.client.post(keysOf(app.accountId), { name: 'in', expires: 'never' })).status, 404)
  assert.equal((await other.client.post(`${keysOf(app.accountId)}/${app.keyId}/revoke`, { confirm: '1' })).status, 404)
  // Through their own account's path, the key of another account does not exist either.
  assert.equal((await other.client.post(`${keysOf(other.accountId)}/${app.keyId}/revoke`, { confirm: '1' })).status, 404)
  assert.equal((await other.client.post(`${keysOf(other.accountId)}/${app.keyId}/roll`, { grace: '0', confirm: '1' })).status, 404)
  assert.equal((await other.client.get(`${keysOf(other.accountId)}/${app.keyId}/revoke`)).status, 404)
  assert.equal(await ping(app, app.key), 200, 'nothing changed')
  assert.equal((await app.accounts.listKeys(app.accountId)).length, before)

  const signedOut = await new PortalClient(app.url).get(keysOf(app.accountId))
  assert.equal(signedOut.status, 303)
  assert.equal(signedOut.location, `/portal/sign-in?next=${encodeURIComponent(keysOf(app.accountId))}`)
})

test('forms without their CSRF token or from another site: 403, nothing changed', async (t) => {
  const app = await startApp(t)
  const { client } = await signedInClient(app, { role: 'owner' })
  await client.get(keysOf(app.accountId))
  const keysBefore = await app.accounts.listKeys(app.accountId)
  const subsBefore = await app.accounts.listSubscriptions(app.accountId)
  const posts: [string, Record<string, string>][] = [
    [keysOf(app.accountId), { name: 'forged', expires: 'never' }],
    [`${keysOf(app.accountId)}/${app.keyId}/roll`, { grace: '0', confirm: '1' }],
    [`${keysOf(app.accountId)}/${app.keyId}/revoke`, { confirm: '1' }],
    [subsOf(app.accountId), { region: 'eu', group: 'totp', action: 'cancel' }],
  ]
  for (const [path, fields] of posts) {
    const missing = await client.post(path, fields, { csrf: false })
    assert.equal(missing.status, 403, path)
    assert.match(missing.text, /This form has expired or did not come from this site; nothing was changed/)
    await client.get(keysOf(app.accountId))
    assert.equal((await client.post(path, fields, { origin: 'https://evil.example' })).status, 403, `${path} from another site`)
    await client.get(keysOf(app.accountId))
  }
  assert.deepEqual(await app.accounts.listKeys(app.accountId), keysBefore)
  assert.deepEqual(await app.accounts.listSubscriptions(app.accountId), subsBefore)
  assert.equal(await ping(app, app.key), 200)
})

test('subscriptions with SUBSCRIPTION_APPROVAL=auto: subscribe starts at once, cancel stops at once; the converter is not offered in us and apac', async (t) => {
  const app = await startApp(t)
  const { accountId, client, user } = await freshAccount(app)
  const issued = await app.accounts.issueKey({ actor: SYSTEM }, accountId, { name: 'k' })
  assert.ok(!isFailure(issued))
  const page = await client.get(subsOf(accountId))
  assert.equal(page.status, 200)
  assert.match(page.text, /<caption>Subscriptions of Fresh &amp; &lt;new&gt;, by API group and region<\/caption>/)
  assert.match(page.text, /A subscription starts at once/)
  assert.equal(page.text.match(/<span class="badge off">not subscribed<\/span>/g)?.length, 4)
  assert.equal(page.text.match(/<span class="badge off">not offered in this region<\/span>/g)?.length, 2)
  assert.ok(!/Subscribe to PDF conversion in (us|apac)/.test(page.text), 'no button where the group is not offered')
  assert.match(page.text, /<button type="submit">Subscribe to PDF conversion in eu<\/button>/)
  assert.equal(await ping(app, issued.apiKey), 403)

  const on = await client.post(subsOf(accountId), { region: 'eu', group: 'totp', action: 'subscribe' })
  assert.equal(on.status, 303)
  assert.equal(on.location, `${subsOf(accountId)}?changed=eu.totp`)
  const shown = await client.get(on.location!)
  assert.match(shown.text, /<p class="notice" role="status">TOTP in eu is now active\.<\/p>/)
  assert.match(shown.text, /<button type="submit" class="danger">Cancel TOTP in eu<\/button>/)
  assert.equal(await ping(app, issued.apiKey), 200)

  const off = await client.post(subsOf(accountId), { region: 'eu', group: 'totp', action: 'cancel' })
  assert.equal(off.status, 303)
  assert.match((await client.get(off.location!)).text, /TOTP in eu is now not subscribed\./)
  assert.equal(await ping(app, issued.apiKey), 403)

  const notOffered = await client.post(subsOf(accountId), { region: 'us', group: 'converter', action: 'subscribe' }, { from: subsOf(accountId) })
  assert.equal(notOffered.status, 422)
  assert.match(notOffered.text, /role="alert">Nothing was changed: PDF conversion is not offered in us\./)
  for (const fields of [
    { region: 'mars', group: 'totp', action: 'subscribe' },
    { region: 'eu', group: 'totp', action: 'approve' },
    { region: 'eu', group: 'fax', action: 'subscribe' },
  ]) {
    assert.equal((await client.post(subsOf(accountId), fields, { from: subsOf(accountId) })).status, 422, JSON.stringify(fields))
  }
  const set = await events(app, accountId, 'subscription.set')
  assert.deepEqual(set.map((e) => [e.actor, (e.detail as { status: string }).status]).reverse(), [
    [`portal-user:${user.id}`, 'active'],
    [`portal-user:${user.id}`, 'inactive'],
  ])
})

test('subscriptions with SUBSCRIPTION_APPROVAL=operator: a request is pending until approved, can be withdrawn; a stale action changes nothing', async (t) => {
  const app = await startApp(t, { SUBSCRIPTION_APPROVAL: 'operator' })
  const { accountId, client } = await freshAccount(app, 'developer')
  const issued = await app.accounts.issueKey({ actor: SYSTEM }, accountId, { name: 'k' })
  assert.ok(!isFailure(issued))
  const page = await client.get(subsOf(accountId))
  assert.match(page.text, /an operator approves each subscription/)

  const asked = await client.post(subsOf(accountId), { region: 'eu', group: 'totp', action: 'subscribe' })
  assert.equal(asked.status, 303)
  const pending = await client.get(asked.location!)
  assert.match(pending.text, /TOTP in eu is now pending an operator’s approval\./)
  assert.match(pending.text, /<span class="badge warn">pending approval<\/span>/)
  assert.match(pending.text, /<button type="submit" class="secondary">Withdraw the request for TOTP in eu<\/button>/)
  assert.equal(await ping(app, issued.apiKey), 403, 'pending is not active')

  const withdrawn = await client.post(subsOf(accountId), { region: 'eu', group: 'totp', action: 'withdraw' })
  assert.match((await client.get(withdrawn.location!)).text, /TOTP in eu is now not subscribed\./)
  assert.equal((await app.accounts.listSubscriptions(accountId))[0]!.status, 'inactive')

  await client.post(subsOf(accountId), { region: 'eu', group: 'totp', action: 'subscribe' }, { from: subsOf(accountId) })
  await client.get(subsOf(accountId))
  assert.ok(!isFailure(await app.accounts.setSubscription({ actor: SYSTEM }, accountId, 'eu', 'totp', 'approved')))
  // The page still offers "Withdraw": posted after the approval, it leaves the active subscription alone.
  const stale = await client.post(subsOf(accountId), { region: 'eu', group: 'totp', action: 'withdraw' })
  assert.equal(stale.status, 303)
  const now = await client.get(stale.location!)
  assert.match(now.text, /TOTP in eu is now active\./)
  assert.match(now.text, /Cancel TOTP in eu/)
  assert.equal(await ping(app, issued.apiKey), 200)
  assert.deepEqual((await events(app, accountId, 'subscription.set')).map((e) => (e.detail as { status: string }).status).reverse(), [
    'pending',
    'inactive',
    'pending',
  ])
})

test('REGION_URLS: each region column shows its base URL (or "not configured"); getting started gives a curl per subscribed group at those URLs', async (t) => {
  const app = await startApp(t, { REGION_URLS: 'eu=https://eu.example.test,us=https://us.example.test' })
  const { client } = await signedInClient(app, { role: 'viewer' })
  const subs = await client.get(subsOf(app.accountId))
  assert.match(
    subs.text,
    /<th scope="col">eu<span class="base">https:\/\/eu\.example\.test<\/span><\/th><th scope="col">us<span class="base">https:\/\/us\.example\.test<\/span><\/th><th scope="col">apac<span class="base">not configured<\/span><\/th>/,
  )

  const start = await client.get(startOf(app.accountId))
  assert.equal(start.status, 200)
  assert.match(start.text, /<pre id="call-eu-totp">curl -H &#39;x-api-key: YOUR_KEY&#39; https:\/\/eu\.example\.test\/totp\/ping<\/pre>/)
  assert.match(
    start.text,
    /<pre id="call-eu-converter">curl -H &#39;x-api-key: YOUR_KEY&#39; -F pdfDocument=@document\.pdf https:\/\/eu\.example\.test\/converter\/generateImage -o page\.png<\/pre>/,
  )
  assert.match(start.text, /<pre id="call-us-totp">curl -H &#39;x-api-key: YOUR_KEY&#39; https:\/\/us\.example\.test\/totp\/ping<\/pre>/)
  assert.match(start.text, /The base URL of apac is not configured/)
  assert.match(start.text, /<pre id="call-apac-totp">curl -H &#39;x-api-key: YOUR_KEY&#39; BASE_URL\/totp\/ping<\/pre>/)
  assert.match(
    start.text,
    /data-copy="call-eu-totp" hidden>Copy command<span class="visually-hidden"> for TOTP in eu<\/span><\/button> <span role="status" id="call-eu-totp-status">/,
  )
  for (const href of [keysOf(app.accountId), subsOf(app.accountId), '/docs']) assert.ok(start.text.includes(`href="${href}"`), href)
  assert.ok(!/<h2>First<\/h2>/.test(start.text), 'nothing to do first')
})

test('getting started with nothing yet: subscribe and create a key first, with links; a pending subscription is said to wait', async (t) => {
  const app = await startApp(t, { SUBSCRIPTION_APPROVAL: 'operator' })
  const { accountId, client } = await freshAccount(app, 'developer')
  const empty = await client.get(startOf(accountId))
  assert.equal(empty.status, 200)
  assert.match(empty.text, /<h2>First<\/h2>/)
  assert.match(empty.text, new RegExp(`<a href="${subsOf(accountId)}">Subscribe</a> to an API group in a region\\.`))
  assert.match(empty.text, new RegExp(`<a href="${keysOf(accountId)}#create">Create a key</a>`))
  assert.ok(!empty.text.includes('<pre'), 'no command before a subscription')

  await client.post(subsOf(accountId), { region: 'eu', group: 'totp', action: 'subscribe' }, { from: subsOf(accountId) })
  assert.match((await client.get(startOf(accountId))).text, /wait for an operator’s approval \(1 pending\)/)
  assert.ok(!isFailure(await app.accounts.setSubscription({ actor: SYSTEM }, accountId, 'eu', 'totp', 'approved')))
  await createKey(client, accountId, { name: 'first', expires: 'never' })
  const ready = await client.get(startOf(accountId))
  assert.ok(!/<h2>First<\/h2>/.test(ready.text))
  assert.match(ready.text, /<pre id="call-eu-totp">curl -H &#39;x-api-key: YOUR_KEY&#39; http:\/\/localhost:3000\/totp\/ping<\/pre>/)
  assert.ok(!ready.text.includes('call-eu-converter'))
})

test('an account with 1 000 keys: one query for the list, live keys first, 50 a page, found by name, the page under 500 ms (its ratio to a one-key page reported)', async (t) => {
  const app = await startApp(t)
  const { client } = await signedInClient(app, { role: 'developer' })
  const timed = async (path: string, runs: number) => {
    const times: number[] = []
    for (let i = 0; i < runs; i++) {
      const t0 = performance.now()
      const res = await client.get(path)
      times.push(performance.now() - t0)
      assert.equal(res.status, 200)
    }
    return times.sort((a, b) => a - b)[Math.floor(runs / 2)]!
  }
  const baseline = await timed(keysOf(app.accountId), 15)

  const rows = Array.from({ length: 999 }, (_, i) => ({
    id: `key_bulk${String(i).padStart(4, '0')}`,
    accountId: app.accountId,
    name: `bulk ${i}`,
    hash: `h${i}`.padEnd(43, 'x'),
    hint: String(i).padStart(4, '0'),
    createdAt: new Date(app.clock.now() - i * 1000).toISOString(),
    expiresAt: null,
    scope: { groups: null, regions: null },
  }))
  for (const key of rows)
    await app.store.access.createKey(key, {
      actor: 'system',
      action: 'key.create',
      target: { type: 'key', id: key.id },
      accountId: app.accountId,
      ip: null,
      outcome: 'success',
      detail: {},
    })
  for (const key of rows.slice(0, 500))
    await app.store.access.revokeKey(key.id, {
      actor: 'system',
      action: 'key.revoke',
      target: { type: 'key', id: key.id },
      accountId: app.accountId,
      ip: null,
      outcome: 'success',
      detail: {},
    })

  const access = app.store.access
  const calls = { getKey: 0, listKeys: 0 }
  const { getKey, listKeys } = access
  access.getKey = (id) => {
    calls.getKey++
    return getKey.call(access, id)
  }
  access.listKeys = (id) => {
    calls.listKeys++
    return listKeys.call(access, id)
  }
  t.after(() => {
    access.getKey = getKey
    access.listKeys = listKeys
  })
  const page = await client.get(keysOf(app.accountId))
  assert.deepEqual(calls, { getKey: 0, listKeys: 1 }, 'one query, none per key')
  assert.match(page.text, /<caption>Keys in use \(500\), 1 to 50<\/caption>/)
  assert.match(page.text, /<summary>Expired and revoked keys \(500\)<\/summary>/)
  assert.ok(page.text.indexOf('bulk 500<') < page.text.indexOf('bulk 0<'), 'live keys before revoked ones')
  assert.ok(page.text.length < 150_000, `a page of keys is ${page.text.length} bytes`)
  assert.match(page.text, /<li>Page 1 of 10<\/li>/)
  const last = await client.get(`${keysOf(app.accountId)}?page=10`)
  assert.match(last.text, /<caption>Keys in use \(500\), 451 to 500<\/caption>/)
  assert.match(last.text, /rel="prev">Newer keys</)
  assert.match((await client.get(`${keysOf(app.accountId)}?page=99999`)).text, /Page 10 of 10/, 'past the last page: the last')
  const found = await client.get(`${keysOf(app.accountId)}?filter=BULK%20998`)
  assert.match(found.text, /<caption>Keys in use matching “BULK 998” \(1\)<\/caption>/)
  const old = await client.get(`${keysOf(app.accountId)}?show=old&page=2`)
  assert.match(old.text, /<caption>Expired and revoked keys \(500\), 51 to 100<\/caption>/)

  const many = await timed(keysOf(app.accountId), 15)
  t.diagnostic(
    `keys page: 1 key ${baseline.toFixed(1)} ms, 1 000 keys ${many.toFixed(1)} ms (median of 15): ratio ${(many / baseline).toFixed(1)}; ${Math.round(page.text.length / 1024)} KiB`,
  )
  assert.ok(many < 500, `the 1 000-key page takes ${many.toFixed(0)} ms`)
})
