/**
 * The team page and an invitation in a real browser: labelled controls, no serious axe
 * finding, from sending the invitation to the invited person's first sign-in.
 * Its HTTP tests: test/http/portal/team.test.ts.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { startApp } from '../support/helper.ts'
import { linkIn, portalUser, teamOf, waitForMail } from '../support/portal-helper.ts'
import { browserSkip, openBrowser, seriousViolations } from '../support/browser.ts'

const skip = browserSkip()

test('the team page and an invitation in a browser: labelled controls, no serious axe finding', { skip }, async (t) => {
  const app = await startApp(t)
  const owner = await portalUser(app, { email: 'olga@example.com' })
  await portalUser(app, { email: 'dev@example.com', role: 'developer' })
  const browser = await openBrowser(t)
  const page = await (await browser.newContext()).newPage()
  await page.goto(`${app.url}/portal/sign-in?next=${encodeURIComponent(teamOf(app))}`)
  await page.getByLabel('Email').fill(owner.email)
  await page.getByLabel('Password').fill(owner.password)
  await Promise.all([page.waitForNavigation(), page.getByRole('button', { name: 'Sign in' }).click()])
  await page.goto(`${app.url}${teamOf(app)}`)
  assert.equal(await page.getByRole('table', { name: 'Members of test' }).count(), 1)
  assert.deepEqual(await seriousViolations(page), [])

  await page.getByLabel('Email', { exact: true }).fill('newbie@example.com')
  await page.getByLabel('Role', { exact: true }).selectOption('admin')
  await Promise.all([page.waitForNavigation(), page.getByRole('button', { name: 'Send the invitation' }).click()])
  assert.match(await page.getByRole('status').innerText(), /The invitation is sent/)
  assert.equal(await page.getByRole('button', { name: 'Cancel the invitation of newbie@example.com' }).count(), 1)
  await page.getByLabel('Role of dev@example.com').selectOption('viewer')
  await Promise.all([page.waitForNavigation(), page.getByRole('button', { name: 'Change role of dev@example.com' }).click()])
  assert.equal(await page.getByRole('row', { name: /dev@example\.com viewer/ }).count(), 1)
  assert.equal(await page.getByRole('button', { name: 'Remove dev@example.com' }).count(), 1)
  assert.deepEqual(await seriousViolations(page), [])

  const invited = await (await browser.newContext()).newPage()
  await invited.goto(linkIn(await waitForMail(app, 'newbie@example.com')).replace(app.config.publicBaseUrl, app.url))
  assert.equal(await invited.getByLabel('Password').getAttribute('autocomplete'), 'new-password')
  assert.deepEqual(await seriousViolations(invited), [])
  await invited.getByLabel('Password').fill('a long enough passphrase')
  await Promise.all([invited.waitForNavigation(), invited.getByRole('button', { name: 'Create my sign-in and join test' }).click()])
  assert.match(invited.url(), new RegExp(`/portal/accounts/${app.accountId}/start$`))
  await invited.goto(`${app.url}${teamOf(app)}`)
  assert.equal(await invited.getByText('Signed in as newbie@example.com').count(), 1)
  assert.equal(await invited.getByRole('row', { name: /newbie@example\.com \(you\) admin/ }).count(), 1)
  assert.deepEqual(await seriousViolations(invited), [])
})
