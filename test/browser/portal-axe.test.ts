/**
 * axe on every page of the portal, in chromium: signed out (the sign-in, sign-up, reset and
 * link pages, an error page) and signed in as an operator who owns an account with a key, a
 * member, an invitation, usage, audit events and conversion jobs (every account page, the
 * security pages and every operator page; the jobs page also with a queued job, on a node that
 * runs none, for its cancel). No serious or critical finding at 1280 px nor at 390 px, no request
 * refused by the CSP, and each page has one h1 and a title that names it; no page scrolls
 * sideways at 390 px: wide tables scroll in their own region.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { resolveKeyring } from '../../src/config/encryption.ts'
import { startApp, type Running } from '../support/helper.ts'
import { HAS_CORPUS, real } from '../support/convert.ts'
import { createFactor } from '../support/factors.ts'
import { browserSkip, openBrowser, seriousViolations } from '../support/browser.ts'
import { portalUser } from '../support/portal-helper.ts'
import { factorEvent, waitFor } from '../support/receiver.ts'
import { Webhooks } from '../../src/services/webhooks.ts'
import { SYSTEM } from '../../src/domain/accounts.ts'

const skip = browserSkip()

const SIGNED_OUT = [
  '/sign-in',
  '/sign-up',
  '/reset',
  '/reset/confirm?token=AAAAAAAAAAAAAAAAAAAAAAAAAAA',
  '/verify-email?token=AAAAAAAAAAAAAAAAAAAAAAAAAAA',
  '/invitations/accept?token=AAAAAAAAAAAAAAAAAAAAAAAAAAA&account=acc_none',
  '/no-such-page',
]

const SIGNED_IN = [
  '/home',
  '/security',
  '/security/two-factor/setup',
  '/accounts/:a/overview',
  '/accounts/:a/start',
  '/accounts/:a/keys',
  '/accounts/:a/keys?show=old',
  '/accounts/:a/keys/:k',
  '/accounts/:a/keys/:k/roll',
  '/accounts/:a/keys/:k/revoke',
  '/accounts/:a/subscriptions',
  '/accounts/:a/usage',
  '/accounts/:a/usage/keys',
  '/accounts/:a/team',
  '/accounts/:a/audit',
  '/accounts/:a/webhooks',
  '/accounts/:a/factor-settings',
  '/accounts/:a/webhooks/:w/deliveries',
  '/accounts/:a/webhooks/:w/delete',
  '/accounts/:a/jobs',
  '/accounts/:a/jobs?status=failed',
  '/operator',
  '/operator/accounts',
  '/operator/accounts/:a',
  '/operator/sign-ups',
  '/operator/subscriptions',
  '/operator/audit',
]
/** The confirmation of a result's deletion, of the job that succeeded (with the corpus: the job needs a real PDF). */
const RESULT_PAGES = HAS_CORPUS ? ['/accounts/:a/jobs/:j/delete-result'] : []
/** The pages of a queued job, on a second node that runs no job. */
const QUEUED_PAGES = ['/accounts/:a/jobs', '/accounts/:a/jobs/:j/cancel']

/** submitJob: a conversion job through the API, as a customer's code submits one; its id. */
async function submitJob(app: Running, file: Buffer, fields: Record<string, string>): Promise<string> {
  const form = new FormData()
  form.append('pdfDocument', new Blob([new Uint8Array(file)], { type: 'application/pdf' }), 'Quarterly report.pdf')
  for (const [k, v] of Object.entries(fields)) form.append(k, v)
  const res = await fetch(`${app.url}/converter/jobs`, { method: 'POST', headers: { 'x-api-key': app.key }, body: form })
  assert.equal(res.status, 202)
  return ((await res.json()) as { jobID: string }).jobID
}

/** jobsEnded waits for the jobs to end (succeeded or failed); their statuses. */
async function jobsEnded(app: Running, ids: readonly string[]): Promise<string[]> {
  const status = async (id: string) =>
    ((await (await fetch(`${app.url}/converter/jobs/${id}`, { headers: { 'x-api-key': app.key } })).json()) as { status: string }).status
  let statuses: string[] = []
  await waitFor(
    async () => {
      statuses = await Promise.all(ids.map(status))
      return statuses.every((s) => s === 'succeeded' || s === 'failed')
    },
    60_000,
    'the jobs to end',
  )
  return statuses
}

/** The operator's pages of the account's managed-factor users: the list, a user (made in the test) and the deletion's confirmation. */
const FACTOR_PAGES = ['/operator/accounts/:a/totp-users', '/operator/accounts/:a/totp-users/axe%20user']

test('every portal page, signed out and signed in as an operator: no serious or critical axe finding, nothing refused by the CSP, one h1', {
  skip,
}, async (t) => {
  const app = await startApp(t, { USAGE_FLUSH_MS: '100', JOB_POLL_MS: '50' })
  await createFactor(app, 'axe user')
  const op = await portalUser(app, { operator: true })
  await portalUser(app, { email: 'dev@example.com', role: 'developer' })
  assert.equal((await fetch(`${app.url}/totp/ping`, { headers: { 'x-api-key': app.key } })).status, 200)
  // An endpoint with a delivery in its log (refused: its host is not this node's), for the webhook pages.
  const hook = await new Webhooks({ store: app.store, keyring: resolveKeyring(app.config), config: app.config }).create({ actor: SYSTEM }, app.accountId, {
    url: 'https://hooks.example.com/in',
  })
  assert.ok(!('failure' in hook))
  await factorEvent(app, 'factor.created')
  // Jobs for the jobs page: one that fails (no PDF inside), and with the corpus one that succeeds, with metadata.
  const failed = await submitJob(app, Buffer.from('%PDF-1.7\nnot a document\n'), { operation: 'image' })
  const done = HAS_CORPUS
    ? await submitJob(app, real('pdflatex-4-pages.pdf'), { operation: 'image', dpi: '72', metadata: JSON.stringify({ invoice: 'INV-7', note: '<b>x</b>' }) })
    : failed
  assert.deepEqual(await jobsEnded(app, [failed, done]), ['failed', HAS_CORPUS ? 'succeeded' : 'failed'])
  // A second node that runs no job: a queued job, for the cancel.
  const idle = await startApp(t, { JOB_WORKERS: '0' })
  // It never runs: any document that starts as a PDF does.
  const queued = await submitJob(idle, Buffer.from('%PDF-1.7\nnot a document\n'), { operation: 'image', pages: '1-2' })
  const idleOp = await portalUser(idle, { operator: true })
  await new Promise((resolve) => setTimeout(resolve, 300))
  const browser = await openBrowser(t)
  const page = await (await browser.newContext()).newPage()
  const refused: string[] = []
  const missing: string[] = []
  page.on('console', (m) => {
    if (/Content Security Policy|Refused/i.test(m.text())) refused.push(`${page.url()}: ${m.text()}`)
    // The browser's own requests (the icon) are seen only here; a page answered 4xx on purpose is not counted.
    const from = m.location().url
    if (/Failed to load resource/.test(m.text()) && from !== page.url()) missing.push(`${page.url()}: ${from} ${m.text()}`)
  })
  // Everything a page loads besides itself (stylesheet, scripts, its icon: without one the browser asks for /favicon.ico) is there.
  page.on('response', (r) => {
    if (r.request().resourceType() !== 'document' && r.status() >= 400) missing.push(`${page.url()}: ${r.status()} ${r.url()}`)
  })
  const findings: string[] = []
  const visit = async (path: string, on: Running = app, job = done) => {
    const url = `${on.url}/portal${path.replace(':a', on.accountId).replace(':k', on.keyId).replace(':w', hook.endpoint.id).replace(':j', job)}`
    const res = await page.goto(url)
    assert.ok(res !== null && res.status() < 500, `${path}: ${res?.status()}`)
    await page.waitForLoadState('networkidle')
    assert.equal(await page.locator('h1').count(), 1, `${path} has one h1`)
    assert.match(await page.title(), /^.+ · Tessera developer portal$/, `${path} has a title`)
    for (const width of [1280, 390]) {
      await page.setViewportSize({ width, height: 900 })
      for (const v of await seriousViolations(page)) findings.push(`${path} at ${width} px: ${v}`)
      const scroll = await page.evaluate(() => document.documentElement.scrollWidth)
      if (width === 390 && scroll > width) findings.push(`${path} at 390 px: the page is ${scroll} px wide`)
    }
  }

  for (const path of SIGNED_OUT) await visit(path)
  await page.goto(`${app.url}/portal/sign-in`)
  await page.getByLabel('Email').fill(op.email)
  await page.getByLabel('Password').fill(op.password)
  await Promise.all([page.waitForURL(/\/portal\/(home|accounts\/[^/]+\/overview)$/), page.getByRole('button', { name: 'Sign in' }).click()])
  // An invitation pending, so that the team page shows that table too.
  await page.goto(`${app.url}/portal/accounts/${app.accountId}/team`)
  await page.getByLabel('Email', { exact: true }).fill('invitee@example.com')
  await Promise.all([page.waitForURL(/\/team/), page.getByRole('button', { name: 'Send the invitation' }).click()])
  for (const path of [...SIGNED_IN, ...RESULT_PAGES, ...FACTOR_PAGES]) await visit(path)
  await page.getByRole('button', { name: 'Delete the factors of axe user' }).click()
  await page.waitForLoadState('networkidle')
  for (const v of await seriousViolations(page)) findings.push(`the deletion's confirmation: ${v}`)

  await page.goto(`${idle.url}/portal/sign-in`)
  await page.getByLabel('Email').fill(idleOp.email)
  await page.getByLabel('Password').fill(idleOp.password)
  await Promise.all([page.waitForURL(/\/portal\/(home|accounts\/[^/]+\/overview)$/), page.getByRole('button', { name: 'Sign in' }).click()])
  for (const path of QUEUED_PAGES) await visit(path, idle, queued)

  assert.deepEqual(findings, [])
  assert.deepEqual(refused, [])
  assert.deepEqual(missing, [], 'no page asks for what is not there')
})
