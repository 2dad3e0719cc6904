/**
 * The account's overview over HTTP, and where a sign-in lands: a user with one account lands on
 * its overview, a user with several on the list, with a switcher on every account page. The
 * overview's figures are checked against what was seeded (calls today and in the quota's
 * window, keys in use, subscriptions), and each kind of attention it raises is made to happen:
 * a quota nearly used, a key about to expire, failed verifications and a lockout of managed
 * factors, a webhook endpoint that answers 500, and calls refused by the real gateway (in
 * parallel, on SQLite and on PostgreSQL + Redis: each one counted once, under its reason).
 */
import { test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { get, startApp } from '../../support/helper.ts'
import { createDatabase, redisEnv, skipUnless } from '../../support/services.ts'
import { PortalClient, portalUser, seedUsage, signedInClient } from '../../support/portal-helper.ts'
import { factorEvent, Receiver, waitFor } from '../../support/receiver.ts'
import { SYSTEM } from '../../../src/domain/accounts.ts'
import { isFailure } from '../../../src/services/outcome.ts'
import { utcDay } from '../../../src/usage/windows.ts'

const overviewOf = (id: string) => `/portal/accounts/${id}/overview`
const text = (html: string) =>
  html
    .replace(/<[^>]+>/g, '')
    .replace(/&#39;/g, "'")
    .replace(/&quot;/g, '"')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&')
    .replace(/\s+/g, ' ')

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
    /Needs attention Nothing: the account is active, subscribed and has keys in use; no call refused today, no failed verification or lockout in the last 24 hours\./,
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
  const event = (action: string) => factorEvent(app, action, { outcome: 'failure' })
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
  const items = [...page.text.matchAll(/<li class="(bad|warn)">([\s\S]*?)<\/li>/g)].map((m) => [m[1], text(m[2]!).trim()])
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
  const trail = await client.get(`/portal/accounts/${app.accountId}/audit?action=factor.verification_failed`)
  assert.equal(trail.status, 200, 'the link leads to the failures (an action with an underscore is one)')
  assert.equal((trail.text.match(/factor\.verification_failed/g) ?? []).length >= 3, true)

  // A viewer is not shown the webhooks (an admin's page), and a day later the failures are old news.
  const viewer = await signedInClient(app, { role: 'viewer' })
  assert.ok(!(await viewer.client.get(overviewOf(app.accountId))).text.includes('Webhook endpoint'))
  app.clock.advance(86_401_000)
  const later = text((await client.get(overviewOf(app.accountId))).text)
  assert.ok(!/failed verifications|locked out/.test(later), 'only the last 24 hours count')
})

const PG = skipUnless('TEST_DATABASE_URL', 'TEST_REDIS_URL')

/**
 * refusedCalls: calls the gateway refuses, made for real, 40 of them at once: a group the
 * account is not subscribed to, a revoked key, a key past the plan's rate; and unknown keys,
 * which belong to no account. The overview and the usage page tell each kind, counted once.
 */
async function refusedCalls(t: TestContext, env: Record<string, string>): Promise<void> {
  const app = await startApp(t, { USAGE_FLUSH_MS: '100', ...env })
  // Only TOTP in eu: PDF conversion is refused as not subscribed.
  await app.accounts.setSubscription({ actor: SYSTEM }, app.accountId, 'eu', 'converter', 'inactive')
  const gone = await app.accounts.issueKey({ actor: SYSTEM }, app.accountId, { name: 'old-ci' })
  assert.ok(!isFailure(gone))
  assert.ok(!isFailure(await app.accounts.revokeKey({ actor: SYSTEM }, gone.key.id)))
  const convert = () => fetch(`${app.url}/converter/generateImage`, { method: 'POST', headers: { 'x-api-key': app.key } }).then((r) => r.status)
  const statuses = await Promise.all([
    ...Array.from({ length: 40 }, convert),
    ...Array.from({ length: 7 }, () => get(app.url, '/totp/ping', gone.apiKey).then((r) => r.status)),
    ...Array.from({ length: 5 }, () => get(app.url, '/totp/ping', 'tsr_0000000000000000000000000000000000000000').then((r) => r.status)),
  ])
  assert.deepEqual([...new Set(statuses)], [403])
  // The plan's rate: a burst of 2, then 429s.
  assert.ok(!isFailure(await app.accounts.setPlan({ actor: SYSTEM }, app.accountId, { rate: 0.01, burst: 2, quota: 0 })))
  const pings = await Promise.all(Array.from({ length: 12 }, () => get(app.url, '/totp/ping', app.key).then((r) => r.status)))
  assert.deepEqual([pings.filter((s) => s === 200).length, pings.filter((s) => s === 429).length], [2, 10])

  const { client } = await signedInClient(app, { role: 'viewer' })
  const overview = overviewOf(app.accountId)
  await waitFor(async () => text((await client.get(overview)).text).includes('57 calls refused today'), 5000, 'the refusals on the overview')
  const item = /<li class="warn">\d+ calls refused today([\s\S]*?)<\/ul>/.exec(client.last!.text)?.[1] ?? ''
  const kinds = [...item.matchAll(/<li>([\s\S]*?)<\/li>/g)].map((m) => text(m[1]!))
  assert.deepEqual(kinds, [
    '40 with key test key, PDF conversion in eu: 403: the account is not subscribed to this group in this region',
    "10 with key test key, TOTP in eu: 429: over the plan's rate",
    '7 with key old-ci, TOTP in eu: 403: the key is revoked',
  ])
  assert.match(client.last!.text, /<a href="[^"]+\/usage#refused">See the refused calls<\/a>/)

  const usage = await client.get(`/portal/accounts/${app.accountId}/usage`)
  assert.match(usage.text, /<caption>Refused calls, last 30 days: 57<\/caption>/, 'unknown keys are counted for no account')
  assert.match(
    usage.text,
    /<tr><th scope="row">test key<\/th><td>Converter<\/td><td>eu<\/td><td>403: the account is not subscribed to this group in this region<\/td><td class="num">40<\/td><td>\d{4}-\d\d-\d\d<\/td><\/tr>/,
  )
}

test('calls refused by the gateway and the plan are told on the overview and the usage page, each counted once', async (t) => {
  await refusedCalls(t, {})
})

test('refused calls, on PostgreSQL with Redis', { skip: PG }, async (t) => {
  await refusedCalls(t, { DATABASE_URL: await createDatabase(t), ...(await redisEnv(t)) })
})
