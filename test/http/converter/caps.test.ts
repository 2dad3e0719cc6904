/**
 * The caps on what one customer can make, through the real app on SQLite and on PostgreSQL:
 * active keys per account (KEY_MAX_PER_ACCOUNT), accounts a portal user owns
 * (PORTAL_ACCOUNT_MAX_PER_USER) and webhook endpoints per account (WEBHOOK_MAX_ENDPOINTS).
 * Many parallel creations through the admin API and the portal never pass a cap; the refusal
 * is the catalogue's LIMIT_REACHED (admin API), a 409 page (portal), or the CLI's error; the
 * portal's pages say the limit and the count.
 */
import { test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { startAdmin, admin as cli } from '../../support/admin-helper.ts'
import { signedInClient } from '../../support/portal-helper.ts'
import { createDatabase, skipUnless, type StoreEnv as Env } from '../../support/services.ts'
import { testClock } from '../../support/helper.ts'

const stores: [string, Env, false | string][] = [
  ['sqlite', async () => ({}), false],
  ['postgres', async (t) => ({ DATABASE_URL: await createDatabase(t) }), skipUnless('TEST_DATABASE_URL')],
]

const ENV = { KEY_MAX_PER_ACCOUNT: '5', PORTAL_ACCOUNT_MAX_PER_USER: '3', WEBHOOK_MAX_ENDPOINTS: '3', WEBHOOK_ALLOW_PRIVATE: 'true' }

for (const [name, env, skip] of stores) {
  test(`${name}: parallel creations never pass the caps on keys, accounts per user and webhook endpoints; the refusal is in the catalogue and the portal shows limit and count`, {
    skip,
    timeout: 60_000,
  }, async (t: TestContext) => {
    const a = await startAdmin(t, { ...ENV, ...(await env(t)) }, testClock())
    const app = a.pub
    const call = (method: string, path: string, body?: unknown) =>
      fetch(`${a.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${a.write.secret}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      })
    const tally = async (answers: Promise<Response>[]) => {
      const all = await Promise.all(answers)
      const bodies = await Promise.all(all.map((r) => r.text()))
      return {
        created: all.filter((r) => r.status === 201).length,
        refused: bodies.filter((b, i) => all[i]!.status === 409 && JSON.parse(b)[0].code === 'LIMIT_REACHED').length,
        statuses: all.map((r) => r.status),
      }
    }

    // Keys: the test account has one already; 40 at once through the admin API and 20 through the portal.
    const { client: dev } = await signedInClient(app, { role: 'developer' })
    const keysPage = `/portal/accounts/${app.accountId}/keys`
    await dev.get(keysPage)
    const csrf = dev.csrf()
    const [viaAdmin, viaPortal] = await Promise.all([
      tally(Array.from({ length: 40 }, (_, i) => call('POST', `/admin/v1/accounts/${app.accountId}/keys`, { name: `admin-${i}` }))),
      Promise.all(Array.from({ length: 20 }, (_, i) => dev.post(keysPage, { _csrf: csrf, name: `portal-${i}`, expires: 'never' }, { csrf: false }))),
    ])
    const portalMade = viaPortal.filter((r) => r.status === 201).length
    assert.equal(
      viaAdmin.created + portalMade,
      4,
      `one key existed: 4 more (admin ${viaAdmin.statuses.join()}; portal ${viaPortal.map((r) => r.status).join()})`,
    )
    assert.equal(viaAdmin.refused, 40 - viaAdmin.created, 'every other admin call is LIMIT_REACHED')
    for (const r of viaPortal.filter((x) => x.status !== 201)) {
      assert.equal(r.status, 409)
      assert.match(r.text, /role="alert">Nothing was changed: the account has 5 active keys, the most it may have: revoke one first\./)
    }
    const active = (await app.accounts.listKeys(app.accountId)).filter((k) => k.revokedAt === null)
    assert.equal(active.length, 5, 'five keys in the store')
    assert.match(
      (await dev.get(keysPage)).text,
      /<p id="key-count">5 of 5 active keys: the most this account may have, so no key can be created until one is revoked\.<\/p>/,
    )
    const refused = await cli(app.config.dataDir, ['key', 'create', '--account', app.accountId, '--name', 'cli'], {
      ...ENV,
      ...(app.config.databaseUrl === null ? {} : { DATABASE_URL: app.config.databaseUrl }),
    })
    assert.equal(refused.code, 1)
    assert.match(refused.stderr, /^error: the account has 5 active keys, the most it may have: revoke one first/)
    // A revoked key frees its place.
    assert.equal((await call('DELETE', `/admin/v1/keys/${active.at(-1)!.id}`)).status, 200)
    assert.equal((await call('POST', `/admin/v1/accounts/${app.accountId}/keys`, { name: 'again' })).status, 201)

    // Accounts a portal user owns: they own the test account; 20 creations at once make 2 more.
    const { client: owner, user } = await signedInClient(app)
    await owner.get('/portal/home')
    const ownerCsrf = owner.csrf()
    const made = await Promise.all(
      Array.from({ length: 20 }, (_, i) => owner.post('/portal/accounts', { _csrf: ownerCsrf, name: `mine-${i}` }, { csrf: false })),
    )
    assert.equal(made.filter((r) => r.status === 303).length, 2, made.map((r) => r.status).join())
    for (const r of made.filter((x) => x.status !== 303)) {
      assert.equal(r.status, 409)
      assert.match(r.text, /No account was created: you own 3 accounts, the most a user may own\./)
    }
    const owned = (await app.store.portal.membershipsOf(user.id)).filter((m) => m.role === 'owner')
    assert.equal(owned.length, 3)
    assert.match((await owner.get('/portal/home')).text, /<p id="account-count">You own 3 of the 3 accounts a user may own: you cannot create another\.<\/p>/)

    // Webhook endpoints: 20 at once through the admin API make 3.
    const hooks = await tally(
      Array.from({ length: 20 }, (_, i) => call('POST', `/admin/v1/accounts/${app.accountId}/webhooks`, { url: `http://127.0.0.1:9/${i}` })),
    )
    assert.deepEqual([hooks.created, hooks.refused], [3, 17], hooks.statuses.join())
    const { client: adminUser } = await signedInClient(app, { role: 'admin' })
    const hooksPage = `/portal/accounts/${app.accountId}/webhooks`
    assert.match(
      (await adminUser.get(hooksPage)).text,
      /<p id="endpoint-count">3 of 3 endpoints: the most this account may have, so none can be added until one is deleted\.<\/p>/,
    )
    const more = await adminUser.post(hooksPage, { url: 'http://127.0.0.1:9/more' }, { from: hooksPage })
    assert.equal(more.status, 409)
    assert.match(more.text, /Nothing was changed: the account has 3 webhook endpoints, the most it may have: delete one first\./)
  })
}
