/**
 * The factor settings page in a real browser: an admin sets the account's relying party and
 * attempt limits through the form and sees them again (and the factors service returns them,
 * with one audit event per save); a limit that is not a whole number and an origin a browser
 * would refuse are told at their fields, nothing saved; a developer is refused. Controls are
 * found by their labels and roles, axe on each state of the page, nothing refused by the CSP.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { Page } from 'playwright-core'
import { startApp, type Running } from '../support/helper.ts'
import { browserSkip, openBrowser, seriousViolations } from '../support/browser.ts'
import { portalUser } from '../support/portal-helper.ts'
import { isFailure } from '../../src/services/outcome.ts'

const skip = browserSkip()

/** save clicks the form's button and waits for the page it leads to; its status. */
async function save(page: Page): Promise<number | undefined> {
  const [res] = await Promise.all([page.waitForNavigation(), page.getByRole('button', { name: 'Save the settings' }).click()])
  return res?.status()
}

/** settingsOf: the account's settings as the factors service has them, without their time. */
async function settingsOf(app: Running) {
  const settings = await app.factors.settings(app.accountId)
  assert.ok(!isFailure(settings))
  const { updatedAt: _, ...rest } = settings
  return rest
}

/** events: the account's `factor-settings.update` events of this outcome. */
async function events(app: Running, outcome: 'success' | 'failure'): Promise<number> {
  const page = await app.store.audit.list({ accountId: app.accountId, action: 'factor-settings.update', limit: 10 })
  return page.items.filter((e) => e.outcome === outcome).length
}

/** describedBy: the text of the elements that describe a control (its hint, its problem). */
const describedBy = (page: Page, label: string) =>
  page
    .getByLabel(label, { exact: true })
    .evaluate((el) => (el.getAttribute('aria-describedby') ?? '').split(' ').map((id) => document.getElementById(id)?.textContent ?? `#${id} missing`))

test('an admin sets the relying party and the limits; bad values are told at their field and nothing is saved; axe finds nothing serious', {
  skip,
}, async (t) => {
  const app = await startApp(t)
  const admin = await portalUser(app, { role: 'admin' })
  const browser = await openBrowser(t)
  const page = await (await browser.newContext()).newPage()
  const refused: string[] = []
  page.on('console', (m) => {
    if (/Content Security Policy|Refused/i.test(m.text())) refused.push(m.text())
  })
  const checked = async (what: string) => assert.deepEqual(await seriousViolations(page), [], what)
  const before = await settingsOf(app)

  await page.goto(`${app.url}/portal/accounts/${app.accountId}/overview`)
  await page.getByLabel('Email').fill(admin.email)
  await page.getByLabel('Password').fill(admin.password)
  await Promise.all([page.waitForNavigation(), page.getByRole('button', { name: 'Sign in' }).click()])
  await Promise.all([page.waitForNavigation(), page.getByRole('link', { name: 'Factor settings' }).click()])
  assert.equal(await page.getByRole('heading', { level: 1 }).innerText(), 'Factor settings')
  assert.equal(await page.getByRole('link', { name: 'Factor settings' }).getAttribute('aria-current'), 'page')
  assert.match(await page.locator('#passkeys-state').innerText(), /^Passkeys: off until a relying party ID and an origin are set/)
  assert.equal(await page.getByRole('link', { name: 'API reference' }).first().getAttribute('href'), '/docs#passkeyRegistrationOptions')
  for (const label of ['Relying party ID', 'Relying party name', 'Allowed origins', 'Attempts per user', 'Attempts per rate key', 'Window in seconds']) {
    assert.equal(await page.getByLabel(label, { exact: true }).inputValue(), '', `${label}: empty, nothing set`)
    assert.equal((await describedBy(page, label)).length, 1, `${label}: its hint describes it`)
  }
  assert.match((await describedBy(page, 'Attempts per user'))[0]!, /empty: the server's 20 \(FACTOR_USER_LIMIT\)\.$/)
  await checked('nothing set')

  // A limit that is not a whole number: told at its field, the form as typed, nothing saved.
  await page.getByLabel('Relying party ID').fill('example.com')
  await page.getByLabel('Attempts per user').fill('1.5')
  assert.equal(await save(page), 422)
  const limitProblem = "Attempts per user must be a whole number from 1 to 10,000, or empty for the server's default."
  assert.equal(await page.getByRole('alert').innerText(), `The settings were not saved: ${limitProblem}`)
  assert.equal(await page.getByLabel('Attempts per user').getAttribute('aria-invalid'), 'true')
  assert.equal((await describedBy(page, 'Attempts per user'))[1], limitProblem)
  assert.equal(await page.getByLabel('Relying party ID').inputValue(), 'example.com', 'kept as typed')
  assert.equal(await page.getByLabel('Relying party ID').getAttribute('aria-invalid'), null)
  await checked('a limit refused')
  assert.deepEqual(await settingsOf(app), before)

  // Save: the values show again, and the service has them.
  await page.getByLabel('Allowed origins').fill('https://example.com\nhttps://app.example.com\n')
  await page.getByLabel('Attempts per user').fill('10')
  await page.getByLabel('Window in seconds').fill('60')
  assert.equal(await save(page), 200)
  assert.match(page.url(), /\/factor-settings\?saved=1$/)
  assert.equal(await page.getByRole('status').innerText(), 'The settings are saved.')
  assert.equal(await page.getByLabel('Relying party ID').inputValue(), 'example.com')
  assert.equal(await page.getByLabel('Allowed origins').inputValue(), 'https://example.com\nhttps://app.example.com')
  assert.equal(await page.getByLabel('Attempts per user').inputValue(), '10')
  assert.equal(await page.getByLabel('Attempts per rate key').inputValue(), '')
  assert.equal(await page.getByLabel('Window in seconds').inputValue(), '60')
  assert.match(
    await page.locator('#passkeys-state').innerText(),
    /^Passkeys: on for example.com, answered from 2 origins\. Last changed: \d{4}-\d\d-\d\d \d\d:\d\d UTC\./,
  )
  const saved = {
    rpId: 'example.com',
    rpName: null,
    origins: ['https://example.com', 'https://app.example.com'],
    userLimit: 10,
    keyLimit: null,
    limitWindowSeconds: 60,
  }
  assert.deepEqual(await settingsOf(app), saved)
  assert.equal(await events(app, 'success'), 1, 'one event for the save')
  await checked('saved')
  await page.screenshot({ path: '/tmp/factor-settings.png', fullPage: true })
  await page.setViewportSize({ width: 390, height: 844 })
  assert.ok((await page.evaluate(() => document.documentElement.scrollWidth)) <= 390, 'no sideways scrolling at 390 px')
  await checked('saved, at 390 px')
  await page.setViewportSize({ width: 1280, height: 900 })

  // An origin a browser would refuse (not https): told at the origins field, nothing saved.
  await page.getByLabel('Allowed origins').fill('http://example.com')
  assert.equal(await save(page), 422)
  const originProblem = 'http://example.com must be https (http only for localhost).'
  assert.equal(await page.getByRole('alert').innerText(), `The settings were not saved: ${originProblem}`)
  assert.equal(await page.getByLabel('Allowed origins').getAttribute('aria-invalid'), 'true')
  assert.equal((await describedBy(page, 'Allowed origins'))[1], originProblem)
  assert.equal(await page.getByLabel('Allowed origins').inputValue(), 'http://example.com', 'kept as typed')
  await checked('an origin refused')
  assert.deepEqual(await settingsOf(app), saved)
  assert.deepEqual([await events(app, 'success'), await events(app, 'failure')], [1, 1], 'the refusal is recorded as one')

  // A second save (the origins as they were, a name, a key limit; the window cleared): a second event.
  await page.getByLabel('Allowed origins').fill('https://example.com')
  await page.getByLabel('Relying party name').fill('Example')
  await page.getByLabel('Attempts per rate key').fill('1000')
  await page.getByLabel('Window in seconds').fill('')
  assert.equal(await save(page), 200)
  assert.deepEqual(await settingsOf(app), {
    ...saved,
    rpName: 'Example',
    origins: ['https://example.com'],
    keyLimit: 1000,
    limitWindowSeconds: null,
  })
  assert.equal(await events(app, 'success'), 2, 'one event per save')
  assert.deepEqual(refused, [])
})

test('a developer is refused the factor settings, to read and to change; nothing is saved', { skip }, async (t) => {
  const app = await startApp(t)
  const developer = await portalUser(app, { role: 'developer' })
  const browser = await openBrowser(t)
  const page = await (await browser.newContext()).newPage()
  const url = `${app.url}/portal/accounts/${app.accountId}/factor-settings`
  await page.goto(url)
  await page.getByLabel('Email').fill(developer.email)
  await page.getByLabel('Password').fill(developer.password)
  const [res] = await Promise.all([page.waitForNavigation(), page.getByRole('button', { name: 'Sign in' }).click()])
  assert.equal(res?.status(), 403)
  assert.equal(await page.getByRole('heading', { level: 1 }).innerText(), 'Not allowed')
  assert.equal(await page.getByRole('alert').innerText(), 'Your role in test (developer) does not allow this. An owner or admin of the account can change it.')
  assert.equal(await page.getByRole('button', { name: 'Save the settings' }).count(), 0)
  assert.deepEqual(await seriousViolations(page), [])
  // A post (with the session's cookie, from this site) is refused before its form is read.
  const posted = await page.request.post(url, { form: { rpId: 'example.com', origins: 'https://example.com' }, headers: { origin: app.url } })
  assert.equal(posted.status(), 403)
  const settings = await app.factors.settings(app.accountId)
  assert.ok(!isFailure(settings))
  assert.equal(settings.updatedAt, null, 'never set')
  assert.equal((await app.store.audit.list({ accountId: app.accountId, action: 'factor-settings.update', limit: 10 })).items.length, 0)
})
