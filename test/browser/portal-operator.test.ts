/**
 * The portal's operator pages in a real browser: from the summary to a pending request,
 * approved by its label, with axe on every operator page; and from an account to a locked
 * TOTP user by links, the lock cleared and the factors deleted after the confirmation.
 * Their HTTP tests: test/http/portal/operator.test.ts and operator-totp-users.test.ts.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { get, post, startApp, testClock } from '../support/helper.ts'
import { codeOf, enroll, path, wrong } from '../support/factors.ts'
import { askedFor, portalUser } from '../support/portal-helper.ts'
import { browserSkip, openBrowser, seriousViolations, signInPage } from '../support/browser.ts'

/** The operator decides sign-ups and subscriptions (as in operator.test.ts). */
const ENV = { SIGNUP_MODE: 'approval', SUBSCRIPTION_APPROVAL: 'operator' }

/** Five wrong codes lock a TOTP user; no rate limit in the way (as in operator-totp-users.test.ts). */
const TOTP_ENV = { OTP_MAX_FAILURES: '5', PLAN_RATE: '0', FACTOR_USER_LIMIT: '0' }
const T0 = Date.UTC(2026, 0, 1, 12, 0, 15)

test('in a browser: an operator goes from the summary to a pending request and approves it by its label; every operator page passes axe', {
  skip: browserSkip(),
}, async (t) => {
  const app = await startApp(t, ENV)
  const { account, apiKey } = await askedFor(app, 'Browser Ltd')
  const pending = await portalUser(app, { email: 'waiting@example.com', accountId: account.id })
  await app.store.portal.updateUser(pending.user.id, { status: 'pending' }, null)
  const op = await portalUser(app, { operator: true, accountId: null })
  const page = await signInPage(await openBrowser(t), app.url, op)

  await page.getByRole('navigation', { name: 'Your portal' }).getByRole('link', { name: 'Operator' }).click()
  await page.waitForURL(/\/portal\/operator$/)
  assert.deepEqual(await seriousViolations(page), [])
  await page.getByRole('link', { name: '2 subscription requests waiting' }).click()
  await page.waitForURL(/\/portal\/operator\/subscriptions$/)
  assert.deepEqual(await seriousViolations(page), [])
  await page.getByRole('button', { name: 'Approve TOTP in eu for Browser Ltd' }).click()
  await page.waitForURL(/\/portal\/operator\/subscriptions\?done=approved$/)
  assert.equal(await page.getByRole('status').innerText(), 'The subscription is approved and active.')
  assert.equal(await page.getByRole('button', { name: 'Approve TOTP in eu for Browser Ltd' }).count(), 0)
  assert.equal(await page.getByRole('button', { name: 'Approve TOTP in us for Browser Ltd' }).count(), 1)
  assert.equal((await get(app.url, '/totp/ping', apiKey)).status, 200)

  for (const path of [
    '/portal/operator/accounts',
    `/portal/operator/accounts/${account.id}`,
    '/portal/operator/sign-ups',
    '/portal/operator/audit',
    '/portal/operator/sso',
  ]) {
    await page.goto(`${app.url}${path}`)
    assert.deepEqual(await seriousViolations(page), [], path)
  }
  await page.goto(`${app.url}/portal/operator/accounts`)
  await page.getByLabel('Account name contains').fill('browser')
  await page.getByRole('button', { name: 'Search accounts' }).click()
  await page.getByRole('link', { name: 'Manage Browser Ltd' }).click()
  await page.getByLabel('Quota: units per period (0: no quota)').fill('-1')
  await page.getByRole('button', { name: 'Save the plan of Browser Ltd' }).click()
  assert.match(await page.getByRole('alert').innerText(), /^The plan was not saved: quota must be a whole number/)
  assert.deepEqual(await seriousViolations(page), [])
  await page.getByRole('button', { name: 'Suspend Browser Ltd' }).click()
  assert.equal(await page.getByRole('status').innerText(), 'The account is suspended: its keys are refused until it is reactivated.')
  await page.goto(`${app.url}/portal/operator/sign-ups`)
  await page.getByRole('button', { name: 'Approve waiting@example.com' }).click()
  assert.equal(await page.getByRole('status').innerText(), 'The sign-up is approved; we are emailing them that they can sign in.')
  await page.goto(`${app.url}/portal/operator/audit`)
  await page.getByLabel('Action').fill('account.suspend')
  await page.getByRole('button', { name: 'Filter events' }).click()
  assert.equal(await page.getByRole('cell', { name: 'account.suspend' }).count(), 1)
  assert.deepEqual(await seriousViolations(page), [])
})

test('in a browser: an operator goes from the account to a locked user by links, clears the lock by its button, and deletes the factors after the confirmation', {
  skip: browserSkip(),
}, async (t) => {
  const app = await startApp(t, TOTP_ENV, testClock(T0))
  const f = await enroll(app, 'heidi')
  app.clock.advance(30_000)
  for (let i = 0; i < 6; i++) await (await post(app.url, path('heidi', '/verify'), app.key, { token: wrong(f, app.clock.now()) })).arrayBuffer()
  const op = await portalUser(app, { operator: true, accountId: null })
  const page = await signInPage(await openBrowser(t), app.url, op)
  await page.goto(`${app.url}/portal/operator/accounts/${app.accountId}`)
  await page.getByRole('link', { name: 'TOTP users of test' }).click()
  await page.getByRole('link', { name: 'heidi' }).click()
  assert.equal(await page.getByRole('heading', { level: 1 }).innerText(), 'TOTP user heidi')
  assert.deepEqual(await seriousViolations(page), [])
  await page.getByRole('button', { name: 'Clear the lockout of heidi' }).click()
  assert.equal(await page.getByRole('status').innerText(), "The user's lockout is cleared: their next right code is taken.")
  assert.equal((await post(app.url, path('heidi', '/verify'), app.key, { token: codeOf(f, app.clock.now()) })).status, 200)
  await page.getByRole('button', { name: 'Delete the factors of heidi' }).click()
  assert.deepEqual(await seriousViolations(page), [])
  await page.getByRole('button', { name: 'Delete the factors of heidi for good' }).click()
  assert.equal(await page.getByRole('status').innerText(), "The user's factors and recovery codes are deleted: their codes no longer work.")
  assert.deepEqual(await seriousViolations(page), [])
})
