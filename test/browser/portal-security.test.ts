/**
 * Two-factor sign-in of the portal in a real browser: enrol by reading the setup key, see the
 * recovery codes, sign in with a code; no serious axe finding, nothing the CSP refuses.
 * Its HTTP tests: test/http/portal/security.test.ts.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { startApp } from '../support/helper.ts'
import { codeOf, portalUser, STEP_MS, wrongCodeOf } from '../support/portal-helper.ts'
import { browserSkip, openBrowser, seriousViolations } from '../support/browser.ts'

const skip = browserSkip()

test('in a browser: enrol by reading the setup key, see the recovery codes, sign in with a code; no serious axe finding, nothing the CSP refuses', {
  skip,
}, async (t) => {
  const app = await startApp(t)
  const { email, password } = await portalUser(app)
  const browser = await openBrowser(t)
  const page = await (await browser.newContext()).newPage()
  const refused: string[] = []
  page.on('console', (m) => {
    if (/Content Security Policy|Refused/i.test(m.text())) refused.push(m.text())
  })
  const click = async (name: string) => {
    await Promise.all([page.waitForNavigation(), page.getByRole('button', { name }).click()])
  }
  const signIn = async () => {
    await page.goto(`${app.url}/portal/sign-in?next=/portal/security`)
    await page.getByLabel('Email').fill(email)
    await page.getByLabel('Password', { exact: true }).fill(password)
    await click('Sign in')
  }

  await signIn()
  assert.match(page.url(), /\/portal\/security$/)
  assert.equal(await page.getByRole('heading', { level: 2, name: 'Two-factor sign-in' }).count(), 1)
  assert.deepEqual(await seriousViolations(page), [])
  await click('Set up two-factor sign-in')
  assert.match(page.url(), /\/portal\/security\/two-factor\/setup$/)
  const qr = page.getByRole('img', { name: /QR code that adds Tessera/ })
  assert.ok(await qr.evaluate((img: HTMLImageElement) => img.complete && img.naturalWidth > 100), 'the QR code is shown')
  const key = await page.getByLabel('Setup key').inputValue()
  assert.match(key, /^([A-Z2-7]{4} ){7}[A-Z2-7]{4}$/)
  assert.equal(await page.getByRole('button', { name: 'Copy the setup key' }).isVisible(), true, 'the copy button, with scripts on')
  assert.deepEqual(await seriousViolations(page), [])
  await page.getByLabel('Code from your app').fill(codeOf(app, key.replace(/ /g, '')))
  await page.getByLabel('Your password').fill(password)
  await click('Turn on two-factor sign-in')
  assert.equal(await page.getByRole('heading', { level: 1 }).innerText(), 'Two-factor sign-in is on')
  const codes = (await page.getByLabel('Recovery codes').inputValue()).trim().split('\n')
  assert.equal(codes.length, 10)
  assert.equal(await page.getByRole('button', { name: 'Copy the recovery codes' }).isVisible(), true)
  assert.equal(await page.getByRole('link', { name: 'Download the recovery codes as a text file' }).getAttribute('download'), 'tessera-recovery-codes.txt')
  assert.deepEqual(await seriousViolations(page), [])

  await page.goto(`${app.url}/portal/security`)
  assert.match(await page.locator('#two-factor-heading + p').innerText(), /^On since/)
  assert.deepEqual(await seriousViolations(page), [])
  await Promise.all([page.waitForNavigation(), page.getByRole('button', { name: 'Sign out', exact: true }).click()])
  app.clock.advance(STEP_MS)
  await signIn()
  assert.match(page.url(), /\/portal\/two-factor\?next=%2Fportal%2Fsecurity$/)
  assert.equal(await page.getByLabel('Authentication code').getAttribute('autocomplete'), 'one-time-code')
  assert.equal(await page.getByLabel('Authentication code').getAttribute('inputmode'), 'numeric')
  assert.deepEqual(await seriousViolations(page), [])
  await page.getByLabel('Authentication code').fill(wrongCodeOf(app, key.replace(/ /g, '')))
  await click('Verify')
  assert.equal(await page.getByRole('alert').innerText(), 'That code is not right. Enter the code your app shows now.')
  assert.deepEqual(await seriousViolations(page), [])
  await page.getByLabel('Authentication code').fill(codeOf(app, key.replace(/ /g, '')))
  await click('Verify')
  assert.match(page.url(), /\/portal\/security$/)
  assert.deepEqual(refused, [])
})
