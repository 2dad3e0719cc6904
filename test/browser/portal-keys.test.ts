/**
 * The keys, subscriptions and getting-started pages in a real browser (issue 13): a new
 * account's journey from nothing to a first call, finding every control by its label or
 * role, with axe on each page and nothing refused by the CSP.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { Page } from 'playwright-core'
import { startApp } from '../support/helper.ts'
import { browserSkip, openBrowser, seriousViolations } from '../support/browser.ts'
import { portalUser } from '../support/portal-helper.ts'
import { SYSTEM } from '../../src/domain/accounts.ts'
import { isFailure } from '../../src/services/outcome.ts'

const skip = browserSkip()

/** submit clicks a control that leads to another page and waits for it. */
async function submit(page: Page, role: 'button' | 'link', name: string): Promise<number | undefined> {
  const [res] = await Promise.all([page.waitForNavigation(), page.getByRole(role, { name, exact: true }).click()])
  return res?.status()
}

test('a new account from nothing to a first call: subscribe, create a key and copy it, roll it, revoke it after a confirmation; axe on every page', {
  skip,
}, async (t) => {
  const app = await startApp(t, { REGION_URLS: `eu=http://127.0.0.1:1,us=https://us.example.test` })
  const account = await app.accounts.createAccount({ actor: SYSTEM }, { name: 'Journey' })
  assert.ok(!isFailure(account))
  const owner = await portalUser(app, { accountId: account.id, role: 'developer' })
  const browser = await openBrowser(t)
  const context = await browser.newContext({ permissions: ['clipboard-read', 'clipboard-write'] })
  const page = await context.newPage()
  const refused: string[] = []
  page.on('console', (m) => {
    if (/Content Security Policy|Refused/i.test(m.text())) refused.push(m.text())
  })
  const ping = async (key: string) => (await fetch(`${app.url}/totp/ping`, { headers: { 'x-api-key': key } })).status
  const checked = async (what: string) => assert.deepEqual(await seriousViolations(page), [], what)

  await page.goto(`${app.url}/portal/accounts/${account.id}/start`)
  await page.getByLabel('Email').fill(owner.email)
  await page.getByLabel('Password').fill(owner.password)
  await submit(page, 'button', 'Sign in')
  assert.match(page.url(), /\/start$/, 'sign-in leads back to the page asked for')
  assert.equal(await page.getByRole('heading', { level: 1 }).innerText(), 'Getting started')
  assert.equal(await page.getByRole('link', { name: 'Getting started' }).getAttribute('aria-current'), 'page')
  assert.equal(await page.getByRole('heading', { name: 'First', exact: true }).count(), 1)
  await checked('getting started, empty')

  // Subscribe
  await submit(page, 'link', 'Subscribe')
  assert.equal(await page.getByRole('heading', { level: 1 }).innerText(), 'Subscriptions')
  const table = page.getByRole('table', { name: 'Subscriptions of Journey, by API group and region' })
  assert.equal(await table.getByRole('columnheader', { name: 'us https://us.example.test' }).count(), 1)
  assert.equal(await table.getByRole('columnheader', { name: 'apac not configured' }).count(), 1)
  assert.equal(await page.getByRole('button', { name: 'Subscribe to PDF conversion in us' }).count(), 0, 'not offered there')
  await checked('subscriptions')
  await submit(page, 'button', 'Subscribe to TOTP in eu')
  assert.equal(await page.getByRole('status').first().innerText(), 'TOTP in eu is now active.')
  assert.equal(await page.getByRole('button', { name: 'Cancel TOTP in eu' }).count(), 1)
  await checked('subscriptions after subscribing')

  // Create a key
  await submit(page, 'link', 'Keys')
  await checked('keys, none yet')
  assert.equal(await submit(page, 'button', 'Create key'), 422, 'a key needs a name')
  assert.equal(await page.getByRole('alert').innerText(), 'The key was not created: give the key a name.')
  assert.equal(await page.getByLabel('Key name').getAttribute('aria-invalid'), 'true')
  await checked('keys, a refused form')
  await page.getByLabel('Key name').fill('ci-deploy')
  await page.getByLabel('Expires').selectOption({ label: 'In 90 days' })
  await page.getByRole('group', { name: 'API groups it may call (none checked: all)' }).getByRole('checkbox', { name: 'TOTP' }).check()
  assert.equal(await submit(page, 'button', 'Create key'), 201)
  const key = (await page.locator('.secret').innerText()).trim()
  assert.match(key, /^\S{20,}$/)
  assert.equal(await page.getByText('it will not be shown again').count(), 1)
  const copy = page.getByRole('button', { name: 'Copy key' })
  assert.equal(await copy.isVisible(), true, 'the script shows the copy button')
  await copy.click()
  await page.getByText('Copied to the clipboard.').waitFor()
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), key)
  await checked('the new key')
  assert.equal(await ping(key), 200)

  // Roll it, with an hour of grace
  await submit(page, 'link', 'Back to the keys')
  const row = page.getByRole('row', { name: /ci-deploy/ })
  assert.equal(await row.getByRole('cell', { name: 'TOTP; all regions' }).count(), 1)
  await checked('keys')
  await submit(page, 'link', 'Roll key ci-deploy')
  await checked('the roll confirmation')
  await page.getByLabel('Grace for the old key').selectOption({ label: '1 hour' })
  assert.equal(await submit(page, 'button', 'Roll key ci-deploy'), 201)
  const rolled = (await page.locator('.secret').innerText()).trim()
  assert.match(await page.getByText('keeps working until').innerText(), /UTC, then stops/)
  await checked('the rolled key')
  assert.deepEqual([await ping(key), await ping(rolled)], [200, 200])

  // Revoke the new one, after the confirmation (two keys share the name now: told apart by their end); the old one, still in its grace,
  // stops with it (a chain of rolls keeps at most two working keys), and the confirmation says so.
  await submit(page, 'link', 'Back to the keys')
  await submit(page, 'link', `Revoke key ci-deploy (ending in ${rolled.slice(-4)})`)
  assert.equal(await page.getByText(`Revoke key ci-deploy (ending in ${rolled.slice(-4)})? Calls with it will get 403 at once.`).count(), 1)
  assert.equal(await page.getByText(`ci-deploy (ending in ${key.slice(-4)}), rolled to this one, is still in its grace: it stops now too.`).count(), 1)
  await checked('the revoke confirmation')
  await submit(page, 'button', `Revoke key ci-deploy (ending in ${rolled.slice(-4)})`)
  assert.equal(await page.getByRole('status').innerText(), `Key ci-deploy (ending in ${rolled.slice(-4)}) is revoked: calls with it get 403.`)
  await page.getByText('Expired and revoked keys (2)').click()
  await checked('keys after revoking')
  assert.deepEqual([await ping(key), await ping(rolled)], [403, 403])

  // Ready for a first call, but for a key: both are revoked, so the page asks for one first
  await submit(page, 'link', 'Getting started')
  assert.equal(await page.getByRole('heading', { name: 'First', exact: true }).count(), 1)
  assert.equal(await page.getByRole('link', { name: 'Create a key' }).count(), 1)
  assert.equal(await page.locator('pre#call-eu-totp').innerText(), "curl -H 'x-api-key: YOUR_KEY' http://127.0.0.1:1/totp/ping")
  assert.equal(await page.getByRole('button', { name: 'Copy command for TOTP in eu' }).isVisible(), true)
  assert.equal(await page.getByRole('link', { name: 'API reference' }).first().getAttribute('href'), '/docs')
  await checked('getting started, ready')

  // Keyboard: the create form is reached and used without a mouse.
  await page.goto(`${app.url}/portal/accounts/${account.id}/keys`)
  await page.getByLabel('Key name').focus()
  await page.keyboard.type('by keyboard')
  await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')])
  assert.equal(await page.locator('.secret').count(), 1, 'Enter in the name field creates the key')
  assert.deepEqual(refused, [])
})

test('a viewer sees the keys and subscriptions with no control to change them; axe finds nothing serious', { skip }, async (t) => {
  const app = await startApp(t)
  const viewer = await portalUser(app, { role: 'viewer' })
  const browser = await openBrowser(t)
  const page = await (await browser.newContext()).newPage()
  await page.goto(`${app.url}/portal/accounts/${app.accountId}/keys`)
  await page.getByLabel('Email').fill(viewer.email)
  await page.getByLabel('Password').fill(viewer.password)
  await submit(page, 'button', 'Sign in')
  assert.equal(await page.getByRole('table', { name: 'Keys in use (1)' }).count(), 1)
  assert.equal(
    await page
      .getByRole('button')
      .filter({ hasText: /(Create|Roll|Revoke) key/ })
      .count(),
    0,
    'no control to change a key (finding keys is reading)',
  )
  assert.equal(
    await page
      .getByRole('link')
      .filter({ hasText: /^(Roll|Revoke)/ })
      .count(),
    0,
    'nor a link to one',
  )
  assert.deepEqual(await seriousViolations(page), [])
  await submit(page, 'link', 'Subscriptions')
  assert.equal(
    await page
      .getByRole('button')
      .filter({ hasText: / in (eu|us|apac)$/ })
      .count(),
    0,
  )
  assert.deepEqual(await seriousViolations(page), [])
})
