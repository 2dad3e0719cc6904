/**
 * The developer portal as a person meets it, in a real browser (issue 13; work in progress:
 * the pages that exist so far). Controls are found by their labels and roles, every page is
 * checked by axe, and nothing may need what the CSP refuses.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { startApp } from '../support/helper.ts'
import { browserSkip, openBrowser, seriousViolations } from '../support/browser.ts'
import { PORTAL_CSP } from '../../src/portal/web/plugin.ts'
import { Passwords } from '../../src/services/users/passwords.ts'
import { sessionIdHash } from '../../src/portal/web/session.ts'

const skip = browserSkip()

test('the sign-in and sign-up pages: labelled controls, keyboard first, no serious axe finding, a strict CSP that htmx runs under', { skip }, async (t) => {
  const app = await startApp(t)
  const browser = await openBrowser(t)
  const page = await (await browser.newContext()).newPage()
  const refused: string[] = []
  page.on('console', (m) => {
    if (/Content Security Policy|Refused/i.test(m.text())) refused.push(m.text())
  })
  const res = await page.goto(`${app.url}/portal`)
  assert.match(page.url(), /\/portal\/sign-in$/, '/portal leads to sign-in')
  assert.equal(res?.headers()['content-security-policy'], PORTAL_CSP)
  assert.equal(res?.headers()['x-frame-options'], 'DENY')
  assert.equal(await page.title(), 'Sign in · Tessera developer portal')
  await page.getByLabel('Email').fill('jane@example.com')
  await page.getByLabel('Password').fill('correct horse battery staple')
  assert.equal(await page.getByRole('button', { name: 'Sign in' }).count(), 1)
  assert.deepEqual(await seriousViolations(page), [])
  assert.equal(await page.evaluate(() => typeof (window as unknown as { htmx?: unknown }).htmx), 'object', 'htmx is served by the node and runs under the CSP')

  await page.getByRole('link', { name: 'Sign up' }).click()
  assert.match(page.url(), /\/portal\/sign-up$/)
  await page.keyboard.press('Tab')
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'Skip to the content')
  assert.equal(await page.getByLabel('Password').getAttribute('autocomplete'), 'new-password')
  assert.equal(await page.getByRole('button', { name: 'Create account' }).count(), 1)
  assert.deepEqual(await seriousViolations(page), [])

  const missing = await page.goto(`${app.url}/portal/nowhere`)
  assert.equal(missing?.status(), 404)
  assert.equal(await page.getByRole('heading', { level: 1 }).innerText(), 'Page not found')
  assert.deepEqual(await seriousViolations(page), [])
  assert.deepEqual(refused, [])
})

test('sign in and out: a wrong password and an unknown email get the same answer; a session cookie that is HttpOnly and SameSite=Lax; forms without their CSRF token or from another site are refused', {
  skip,
}, async (t) => {
  const app = await startApp(t)
  const passwords = new Passwords({ params: { ln: 12, r: 8, p: 1 } })
  const created = await app.store.portal.createUser(
    {
      id: 'usr_test',
      email: 'Jane@Example.com',
      passwordHash: await passwords.hash('correct horse battery staple'),
      emailVerifiedAt: new Date().toISOString(),
      status: 'active',
      operator: false,
      totpSecret: null,
      totpEnabledAt: null,
      createdAt: new Date().toISOString(),
    },
    { actor: 'system', action: 'user.create', target: { type: 'user', id: 'usr_test' }, accountId: null, ip: null, outcome: 'success', detail: {} },
  )
  assert.equal(created, true)
  const browser = await openBrowser(t)
  const context = await browser.newContext()
  const page = await context.newPage()

  const signIn = async (email: string, password: string) => {
    await page.goto(`${app.url}/portal/sign-in`)
    await page.getByLabel('Email').fill(email)
    await page.getByLabel('Password').fill(password)
    const [res] = await Promise.all([page.waitForNavigation(), page.getByRole('button', { name: 'Sign in' }).click()])
    return res
  }
  const wrong = await signIn('jane@example.com', 'not the password at all')
  assert.equal(wrong?.status(), 401)
  const wrongWords = await page.getByRole('alert').innerText()
  const unknown = await signIn('nobody@example.com', 'not the password at all')
  assert.equal(unknown?.status(), 401)
  assert.equal(await page.getByRole('alert').innerText(), wrongWords, 'an unknown email gets the same words')
  assert.equal(wrongWords, 'The email or the password is wrong.')
  assert.equal(await page.getByLabel('Email').inputValue(), 'nobody@example.com', 'the email is kept, the password is not')
  assert.equal(await page.getByLabel('Password').inputValue(), '')

  await signIn('JANE@example.com', 'correct horse battery staple')
  assert.match(page.url(), /\/portal\/(home|accounts\/[^/]+\/overview)$/, "a sign-in lands on the list of accounts, or on the one account's overview")
  assert.equal(await page.getByText('Signed in as Jane@Example.com').count(), 1)
  assert.deepEqual(await seriousViolations(page), [])
  const session = (await context.cookies()).find((c) => c.name === 'tessera_session')
  assert.ok(session !== undefined)
  assert.deepEqual([session.httpOnly, session.sameSite, session.path], [true, 'Lax', '/'])
  assert.equal((await app.store.audit.list({ action: 'user.sign-in', limit: 10 })).items.map((e) => e.outcome).join(','), 'success,failure,failure')

  // The same form posted without its token, or from another site: refused, nothing signed in.
  const cookie = `tessera_form=${(await context.cookies()).find((c) => c.name === 'tessera_form')?.value ?? 'x'.repeat(27)}`
  const forged = await fetch(`${app.url}/portal/sign-in`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
    body: 'email=jane%40example.com&password=correct+horse+battery+staple',
  })
  assert.equal(forged.status, 403)
  assert.ok(!(forged.headers.get('set-cookie') ?? '').includes('tessera_session='), 'no session for a forged form')
  const crossSite = await fetch(`${app.url}/portal/sign-out`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'https://evil.example', cookie: `tessera_session=${session.value}` },
    body: '_csrf=whatever',
  })
  assert.equal(crossSite.status, 403)

  await page.getByRole('button', { name: 'Sign out', exact: true }).click()
  await page.waitForURL(/\/portal\/sign-in\?notice=signed-out$/)
  assert.equal(await page.getByRole('status').innerText(), 'You are signed out.')
  await page.goto(`${app.url}/portal/home`)
  assert.match(page.url(), /\/portal\/sign-in\?next=%2Fportal%2Fhome$/, 'signed out: home leads to sign-in, and back')
  assert.equal(await app.store.portal.findSession(sessionIdHash(session.value), new Date().toISOString()), null, 'the session is gone from the store')
})
