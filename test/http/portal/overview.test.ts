/**
 * The account's overview over HTTP, and where a sign-in lands: a user with one account lands on
 * its overview, a user with several on the list, with a switcher on every account page. The
 * overview's figures are checked against what was seeded (calls today and in the quota's
 * window, keys in use, subscriptions), and each kind of attention it raises is made to happen:
 * a quota nearly used, a key about to expire, failed verifications and a lockout of managed
 * factors, and a webhook endpoint that answers 500.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { startApp } from '../../support/helper.ts'
import { PortalClient, portalUser, seedUsage, signedInClient } from '../../support/portal-helper.ts'
import { Receiver, waitFor } from '../../support/receiver.ts'
import { SYSTEM } from '../../../src/domain/accounts.ts'
import { isFailure } from '../../../src/services/outcome.ts'
import { utcDay } from '../../../src/usage/windows.ts'

const overviewOf = (id: string) => `/portal/accounts/${id}/overview`
const text = (html: string) => html.replace(/<[^>]+>/g, '').replace(/\s+/g, ' ')

test('a sign-in lands on the overview of the one account; with two accounts, on the list, and every account page has a switcher', async (t) => {
  const app = await startApp(t)
  const made = await portalUser(app, { role: 'developer' })
  const client = new PortalClient(app.url)
  const signedIn = await client.signIn(made.email, made.password)
  assert.equal(signedIn.location, '/portal/')
  const landing = await client.get('/portal/')
  assert.equal(landing.status, 303)
  assert.equal(landing.location, overviewOf(app.accountId), 'one account: its overview')
  const page = await client.get(landing.location!)
  assert.equal(page.status, 200)
  assert.match(
    page.text,
    /<span class="eyebrow">Account<\/span> <strong>test<\/strong> <span class="hint">your role: developer<\/span>/,
    'the account is named',
  )
  assert.ok(!page.text.includes('Switch account'), 'nothing to switch to')

  // A second account: the landing is the list, and every account page offers the other one.
  await client.post('/portal/accounts', { name: 'Second <ltd>' }, { from: '/portal/home' })
  assert.equal((await client.get('/portal/')).location, '/portal/home')
  const second = (await app.store.portal.membershipsOf(made.user.id)).find((m) => m.accountName === 'Second <ltd>')!
  for (const tab of ['overview', 'start', 'keys', 'subscriptions', 'usage', 'team', 'audit']) {
    const p = await client.get(`/portal/accounts/${app.accountId}/${tab}`)
    assert.equal(p.status, 200, tab)
    assert.match(p.text, /<details class="switcher"><summary>Switch account<\/summary>/, tab)
    assert.match(p.text, new RegExp(`<a href="/portal/accounts/${second.accountId}/overview">Second &lt;ltd&gt;</a>`), `${tab}: escaped`)
  }
  // The old address of an account leads to its overview.
  assert.equal((await client.get(`/portal/accounts/${app.accountId}`)).location, overviewOf(app.accountId))
})

test('the overview: calls today, the quota used, keys in use, subscriptions; nothing needs attention on a quiet account', async (t) => {
  const app = await startApp(t)
  const { rows } = await seedUsage(app)
  const plan = await app.accounts.setPlan({ actor: SYSTEM }, app.accountId, { quota: 1_000_000, period: 'month' })
  assert.ok(!isFailure(plan))
  const { client } = await signedInClient(app, { role: 'viewer' })
  const page = await client.get(overviewOf(app.accountId))
  assert.equal(page.status, 200)
  const today = utcDay(app.clock.now())
  const todays = rows.filter((r) => r.day === today).reduce((a, r) => a + r.count, 0)
  assert.match(page.text, new RegExp(`<p class="figure" id="calls-today">${todays.toLocaleString('en')}</p>`))
  const month = today.slice(0, 7)
  const used = rows.filter((r) => r.day.startsWith(month)).reduce((a, r) => a + r.units, 0)
  assert.match(page.text, new RegExp(`<p class="figure" id="quota-used">${used.toLocaleString('en')} <span class="hint">of 1,000,000 units</span></p>`))
  assert.match(page.text, /<p class="figure" id="keys-in-use">2 <span class="hint">of 100<\/span><\/p>/)
  assert.match(page.text, /<li>TOTP in eu <span class="badge ok">active<\/span><\/li>/)
  assert.match(
    text(page.text),
    /Needs attention Nothing: the account is active, subscribed and has keys in use; no failed verification or lockout in the last 24 hours\./,
  )

  const account = await app.accounts.createAccount({ actor: SYSTEM }, { name: 'other' })
  assert.ok(!isFailure(account))
  const other = await signedInClient(app, { accountId: account.id, role: 'owner' })
  assert.equal((await other.client.get(overviewOf(app.accountId))).status, 404, "another account's member")
  assert.equal((await other.client.get(overviewOf(account.id))).status, 200)
})

test('the overview raises what needs attention: quota nearly used, a key about to stop, failed verifications, a lockout, a failing webhook', async (t) => {
  const app = await startApp(t, { WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_POLL_MS: '50', WEBHOOK_BACKOFF_MS: '60000' })
  const receiver = await new Receiver().start()
  t.after(() => receiver.stop())
  receiver.status = 500
  const { rows } = await seedUsage(app)
  const month = utcDay(app.clock.now()).slice(0, 7)
  const used = rows.filter((r) => r.day.startsWith(month)).reduce((a, r) => a + r.units, 0)
  assert.ok(!isFailure(await app.accounts.setPlan({ actor: SYSTEM }, app.accountId, { quota: Math.ceil(used / 0.9), period: 'month' })))
  const soon = await app.accounts.issueKey({ actor: SYSTEM }, app.accountId, {
    name: 'short-lived',
    expiresAt: new Date(app.clock.now() + 3 * 86_400_000).toISOString(),
  })
  assert.ok(!isFailure(soon))
  const event = (action: string) =>
    app.store.audit.append({
      actor: 'system',
      action,
      target: { type: 'factor', id: 'fac_1' },
      accountId: app.accountId,
      ip: null,
      outcome: 'failure',
      detail: { userID: 'u1' },
    })
  const { client } = await signedInClient(app, { role: 'admin' })
  const hooks = `/portal/accounts/${app.accountId}/webhooks`
  assert.equal((await client.post(hooks, { url: `http://127.0.0.1:${receiver.port}/in` }, { from: hooks })).status, 201)
  const [endpoint] = await app.store.webhooks.listEndpoints(app.accountId)
  assert.ok(endpoint)
  // The events after the endpoint, so that they are delivered to it (and fail).
  for (let i = 0; i < 3; i++) await event('factor.verification_failed')
  await event('factor.lockout_started')
  await waitFor(async () => (await client.get(`${hooks}/${endpoint.id}/deliveries`)).text.includes('HTTP 500'), 10_000, 'a failed attempt')

  const page = await client.get(overviewOf(app.accountId))
  assert.equal(page.status, 200)
  const items = [...page.text.matchAll(/<li class="(bad|warn)">([\s\S]*?)<\/li>/g)].map((m) => [m[1], text(m[2]!)])
  const find = (re: RegExp) => items.find(([, t]) => re.test(t!))
  assert.equal(find(/^Over 80 % of the quota is used until the month ends/)?.[0], 'warn')
  assert.equal(find(/^Key short-lived stops working .* UTC\. See the key$/)?.[0], 'warn')
  assert.equal(find(/^3 failed verifications of managed factors in the last 24 hours/)?.[0], 'warn')
  assert.equal(find(/^1 factor locked out after too many failed codes in the last 24 hours/)?.[0], 'bad')
  assert.equal(
    find(
      new RegExp(`^Webhook endpoint http://127\\.0\\.0\\.1:${receiver.port}/in: of its \\d+ latest deliver(y|ies), 0 failed and \\d+ (is|are) being retried`),
    )?.[0],
    'warn',
  )
  assert.match(page.text, new RegExp(`<a href="/portal/accounts/${app.accountId}/keys/${soon.key.id}">See the key</a>`))
  assert.match(page.text, /<a href="[^"]+\/audit\?action=factor\.verification_failed">See them in the audit trail<\/a>/)

  // A viewer is not shown the webhooks (an admin's page), and a day later the failures are old news.
  const viewer = await signedInClient(app, { role: 'viewer' })
  assert.ok(!(await viewer.client.get(overviewOf(app.accountId))).text.includes('Webhook endpoint'))
  app.clock.advance(86_401_000)
  const later = text((await client.get(overviewOf(app.accountId))).text)
  assert.ok(!/failed verifications|locked out/.test(later), 'only the last 24 hours count')
})
