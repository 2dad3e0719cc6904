/**
 * The usage and audit pages in a real browser: labelled controls, the chart drawn under the
 * CSP, the per-key table brought in by htmx, no serious axe finding.
 * Their HTTP tests: test/http/portal/usage.test.ts.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { startApp } from '../support/helper.ts'
import { portalUser, seedUsage } from '../support/portal-helper.ts'
import { browserSkip, openBrowser, seriousViolations } from '../support/browser.ts'
import { PAGE_SIZE } from '../../src/portal/pages/audit.ts'

const skip = browserSkip()

test('usage and audit pages in a browser: labelled controls, the chart drawn under the CSP, no serious axe finding', { skip }, async (t) => {
  const app = await startApp(t)
  await seedUsage(app)
  const owner = await portalUser(app, { role: 'developer' })
  for (let i = 0; i < PAGE_SIZE + 5; i++)
    await app.accounts.issueKey({ actor: { type: 'portal-user', id: owner.user.id }, ip: '203.0.113.9' }, app.accountId, { name: `key ${i}` })
  const browser = await openBrowser(t)
  const page = await (await browser.newContext()).newPage()
  const refused: string[] = []
  page.on('console', (m) => {
    if (/Content Security Policy|Refused/i.test(m.text())) refused.push(m.text())
  })
  page.on('pageerror', (e) => refused.push(`script error: ${e.message}`))
  await page.goto(`${app.url}/portal/accounts/${app.accountId}/usage`)
  await page.getByLabel('Email').fill(owner.email)
  await page.getByLabel('Password').fill(owner.password)
  await Promise.all([page.waitForURL(/\/usage$/), page.getByRole('button', { name: 'Sign in' }).click()])

  const chart = page.getByRole('img', { name: /^Calls per day, last 30 days: [\d,]+ in total$/ })
  await chart.locator('canvas').first().waitFor()
  assert.ok((await chart.locator('canvas').count()) >= 1, 'uPlot drew the chart')
  assert.equal(
    await page
      .getByRole('table', { name: /^Days with calls, .*; days without calls are left out$/ })
      .getByRole('row')
      .count(),
    // seedUsage's days within the last 30 (0, 1, 2, 6 and 29 days ago), the heading and the total.
    5 + 2,
  )
  assert.equal(await page.getByRole('link', { name: 'Download usage as CSV' }).count(), 1)
  const perKey = page.getByRole('table', { name: /^Calls per key, last 30 days/ })
  await perKey.waitFor()
  assert.equal(await perKey.locator('tbody tr').count(), 2, 'htmx brought the per-key table into the page')
  assert.deepEqual(await seriousViolations(page), [])

  await page.getByLabel('Period').selectOption('90')
  await Promise.all([page.waitForURL(/\/usage\?days=90$/), page.getByRole('button', { name: 'Show usage' }).click()])
  await page
    .getByRole('img', { name: /last 90 days/ })
    .locator('canvas')
    .first()
    .waitFor()
  assert.equal(
    await page
      .getByRole('table', { name: /^Days with calls/ })
      .getByRole('row')
      .count(),
    // 0, 1, 2, 6, 29, 30, 45 and 89 days ago.
    8 + 2,
  )

  // Without htmx the per-key table is a page of its own: the same table, reachable by its link.
  await page.goto(`${app.url}/portal/accounts/${app.accountId}/usage/keys?days=90`)
  assert.equal(
    await page
      .getByRole('table', { name: /^Calls per key, last 90 days/ })
      .locator('tbody tr')
      .count(),
    2,
  )
  assert.deepEqual(await seriousViolations(page), [])

  await page.getByRole('link', { name: 'Audit' }).click()
  await page.waitForURL(/\/audit$/)
  assert.equal(await page.getByRole('table', { name: 'Events, newest first' }).locator('tbody tr').count(), PAGE_SIZE)
  assert.deepEqual(await seriousViolations(page), [])
  await page.getByLabel('Action').fill('key.create')
  await Promise.all([page.waitForURL(/\?action=key\.create$/), page.getByRole('button', { name: 'Filter events' }).click()])
  const creates = page.getByRole('table', { name: 'key.create events, newest first' })
  assert.equal(await creates.locator('tbody tr').count(), PAGE_SIZE)
  await Promise.all([page.waitForURL(/cursor=/), page.getByRole('link', { name: 'Older events' }).click()])
  assert.equal(
    await page.getByRole('table', { name: 'key.create events, older' }).locator('tbody tr').count(),
    5 + 2,
    'the rest: 5 more, the seeded key and the test key',
  )
  assert.deepEqual(await seriousViolations(page), [])
  assert.deepEqual(refused, [])
})
