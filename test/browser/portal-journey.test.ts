/**
 * The portal's whole journey in a real browser, as a customer makes it: sign up → the email
 * arrives at a real SMTP server → confirm → the sign-in form with
 * the address filled in, sign in → the account's overview → subscribe to TOTP in eu → create
 * a key → it is shown once → call /totp/ping with it → the usage page and the overview show the
 * call → roll, after a confirmation, with a grace period → both keys work → revoke the old one →
 * 403. Controls are found by their labels and roles; axe checks every page at 1280 and 390 px.
 * `npm run screenshots` (UPDATE_SCREENSHOTS=1) writes the pages' screenshots to docs/img/
 * (docs/portal.md shows them).
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import type { Page } from 'playwright-core'
import { startApp } from '../support/helper.ts'
import { browserSkip, openBrowser, seriousViolations } from '../support/browser.ts'
import { messageTo, portalLinkOf, smtp } from '../support/smtp.ts'

const skip = browserSkip()
const SHOTS = process.env.UPDATE_SCREENSHOTS === '1' ? join(import.meta.dirname, '..', '..', 'docs', 'img') : null

/**
 * look checks the page with axe at a desktop width and at a 390 px phone's (where nothing may
 * scroll sideways but a table's own scroller), and, when asked, keeps the desktop screenshot.
 */
async function look(page: Page, name: string): Promise<void> {
  assert.deepEqual(await seriousViolations(page), [], `axe on ${name} at 1280 px`)
  if (SHOTS !== null) {
    mkdirSync(SHOTS, { recursive: true })
    await page.screenshot({ path: join(SHOTS, `portal-${name}.png`), fullPage: true })
  }
  await page.setViewportSize({ width: 390, height: 844 })
  try {
    assert.deepEqual(await seriousViolations(page), [], `axe on ${name} at 390 px`)
    assert.ok((await page.evaluate(() => document.documentElement.scrollWidth)) <= 390, `${name}: no sideways scrolling at 390 px`)
  } finally {
    await page.setViewportSize({ width: 1280, height: 900 })
  }
}

const ping = (url: string, key: string) => fetch(`${url}/totp/ping`, { headers: { 'x-api-key': key } }).then((r) => r.status)

test('the whole journey: sign up, confirm by email, sign in, subscribe, create a key, call the API, see the usage, roll, revoke', { skip }, async (t) => {
  const mail = await smtp(t)
  const app = await startApp(t, { SMTP_URL: mail.url, MAIL_FROM: 'Tessera <portal@tessera.test>', USAGE_FLUSH_MS: '100' })
  const browser = await openBrowser(t)
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: app.url })
  const page = await context.newPage()
  const refused: string[] = []
  page.on('console', (m) => {
    if (/Content Security Policy|Refused/i.test(m.text())) refused.push(m.text())
  })

  /** tab: a link of the account's navigation (the pages link to each other in their text too). */
  const tab = (name: string) => page.getByRole('navigation', { name: 'Hopper Labs' }).getByRole('link', { name, exact: true })

  // Sign up.
  await page.goto(`${app.url}/portal/sign-up`)
  await page.getByLabel('Email').fill('grace@example.com')
  await page.getByLabel('Password').fill('a long enough passphrase')
  await page.getByLabel('Account name').fill('Hopper Labs')
  await look(page, 'sign-up')
  await page.getByRole('button', { name: 'Create account' }).click()
  await page.getByRole('heading', { name: 'Check your inbox' }).waitFor()

  // The email, at a real SMTP server.
  const message = await messageTo(mail.received, 'grace@example.com')
  assert.equal(message.from, 'portal@tessera.test')
  assert.match(message.raw, /Subject: Confirm your email address for Tessera/)
  assert.match(message.raw, /Content-Type: text\/plain/)
  assert.match(message.raw, /Content-Type: text\/html/)
  const link = new URL(portalLinkOf(message))
  assert.equal(link.pathname, '/portal/verify-email')
  // The link names PUBLIC_BASE_URL; this test's server listens on a port of its own.
  await page.goto(`${app.url}${link.pathname}${link.search}`)
  // Confirming asks for the password chosen at sign-up (an address is never confirmed for someone else's).
  await page.getByLabel('Your password').fill('a long enough passphrase')
  await page.getByRole('button', { name: 'Confirm my email address' }).click()
  await page.getByRole('status').filter({ hasText: 'Your email address is confirmed' }).waitFor()
  assert.equal(await page.getByLabel('Email').inputValue(), 'grace@example.com', 'the address just confirmed is filled in')

  // Sign in: the password is all there is to type; one account, so it lands on its overview.
  await page.getByLabel('Password').fill('a long enough passphrase')
  await look(page, 'sign-in')
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor()
  assert.equal(new URL(page.url()).pathname.endsWith('/overview'), true)
  assert.match(await page.locator('.account-name').innerText(), /Hopper Labs/)
  assert.match(await page.locator('#attention').innerText(), /No active subscription/)
  await tab('Getting started').click()
  await page.getByRole('heading', { level: 1 }).waitFor()
  await look(page, 'start')

  // Subscribe to TOTP in eu.
  await tab('Subscriptions').click()
  await page.getByRole('button', { name: 'Subscribe to TOTP in eu' }).click()
  await page.getByRole('button', { name: 'Cancel TOTP in eu' }).waitFor()
  await look(page, 'subscriptions')

  // Create a key: shown once.
  await tab('Keys').click()
  await page.getByLabel('Key name').fill('backend')
  await page.getByRole('button', { name: 'Create key' }).click()
  const shown = page.locator('#new-key')
  const key = (await shown.innerText()).trim()
  assert.match(key, /^tsr_[0-9a-f]{40}$/)
  await page.getByRole('button', { name: 'Copy key' }).click()
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), key)
  await look(page, 'key-created')
  await page.goto(`${app.url}${new URL(page.url()).pathname}`)
  assert.equal(await page.content().then((html) => html.includes(key)), false, 'the key is not shown again')

  // Call the API with it; the usage page shows the call.
  assert.equal(await ping(app.url, key), 200)
  await new Promise((resolve) => setTimeout(resolve, 400))
  await tab('Usage').click()
  await page
    .getByRole('table', { name: /Calls per key/ })
    .getByRole('row', { name: /backend/ })
    .waitFor()
  assert.match(
    await page
      .getByRole('table', { name: /Calls per key/ })
      .getByRole('row', { name: /backend/ })
      .innerText(),
    /backend.*\b1\b/,
  )
  await look(page, 'usage')

  // The overview: the call today, the key in use, the subscription, nothing to attend to.
  await tab('Overview').click()
  assert.equal(await page.locator('#calls-today').innerText(), '1')
  assert.match(await page.locator('#keys-in-use').innerText(), /^1\b/)
  assert.match(await page.locator('#attention').innerText(), /^Nothing/)
  await look(page, 'overview')

  // Roll with a grace period, after a confirmation: both keys work; revoke the old one: 403.
  await tab('Keys').click()
  await page.getByRole('link', { name: 'Roll key backend' }).click()
  await page.getByText('Roll key backend? A new key is made and shown once').waitFor()
  await page.getByLabel('Grace for the old key').selectOption({ label: '1 hour' })
  await look(page, 'roll')
  await page.getByRole('button', { name: 'Roll key backend' }).click()
  const rolled = (await page.locator('#new-key').innerText()).trim()
  assert.notEqual(rolled, key)
  assert.equal(await ping(app.url, key), 200, 'the old key works during the grace')
  assert.equal(await ping(app.url, rolled), 200)
  await page.getByRole('link', { name: 'Back to the keys' }).click()
  await look(page, 'keys')
  // Two live keys called backend now: each control names its key by its last characters.
  const revokeOld = `Revoke key backend (ending in ${key.slice(-4)})`
  await page.getByRole('link', { name: revokeOld }).click()
  await page.getByRole('button', { name: revokeOld }).click()
  await page.getByRole('status').filter({ hasText: 'is revoked' }).waitFor()
  assert.equal(await ping(app.url, key), 403, 'revoked')
  assert.equal(await ping(app.url, rolled), 200, 'the new key still works')

  // The audit page tells the story.
  await tab('Audit').click()
  const audit = await page.getByRole('table').first().innerText()
  for (const action of ['key.revoke', 'key.roll', 'key.create', 'subscription.set', 'user.sign-in']) assert.match(audit, new RegExp(action.replace('.', '\\.')))
  await look(page, 'audit')
  assert.deepEqual(refused, [])
})
