/**
 * Single sign-on to the portal in a real browser against a real OpenID provider (oidc-provider,
 * OpenID Certified, started by the test: test/support/oidc.ts): a first sign-in joining the
 * domain's account with its role, the next one finding the same user, a second provider, an
 * address changed at the provider not taking over another user, an address that has a user
 * refused until its owner links the provider from their security page, wrong domains and
 * unverified addresses refused, password sign-in turned off; a wrong state, a callback in
 * another browser, an ID token with another nonce or issuer, or signed by another key, refused;
 * the provider's MFA standing for the second factor only as configured; SSO required for operators.
 */
import { test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import type { Page } from 'playwright-core'
import { freePort, startApp, type Running } from '../support/helper.ts'
import { portalUser } from '../support/portal-helper.ts'
import { browserSkip, openBrowser, seriousViolations, signInPage } from '../support/browser.ts'
import { configure, startProvider } from '../support/oidc.ts'
import { SYSTEM } from '../../src/domain/accounts.ts'
import { isFailure } from '../../src/services/outcome.ts'
import { codeOf } from '../support/portal-helper.ts'

/** app: a portal whose public URL is known before it starts (the redirect URIs registered with the providers). */
async function app(t: TestContext, env: Record<string, string> = {}): Promise<Running> {
  const port = await freePort()
  return startApp(t, { PUBLIC_BASE_URL: `http://127.0.0.1:${port}`, SIGNUP_MODE: 'closed', ...env }, undefined, { port })
}

/**
 * viaProvider: from the sign-in page (or the security page's link button) through the provider's login as `account`; a
 * provider that remembers the browser's sign-in there sends it straight back, as real ones do.
 */
async function viaProvider(page: Page, button: string, account: string, opts: { mfa?: boolean } = {}): Promise<void> {
  await page.getByRole('button', { name: button, exact: true }).click()
  await page.waitForURL((url) => url.pathname.startsWith('/interaction/') || (url.pathname.startsWith('/portal/') && !/\/(start|sso-link)$/.test(url.pathname)))
  if (new URL(page.url()).pathname.startsWith('/interaction/')) {
    await page.getByLabel('Account').fill(account)
    if (opts.mfa === true) await page.getByLabel('Used a second factor').check()
    await Promise.all([page.waitForURL(/\/portal\//), page.getByRole('button', { name: 'Continue' }).click()])
  }
  await page.waitForLoadState('domcontentloaded')
}

/** linkOnSecurityPage: the Security page's link form (the provider chosen, the password typed), then the provider. */
async function linkOnSecurityPage(a: Running, page: Page, provider: string, password: string, account: string): Promise<void> {
  await page.goto(`${a.url}/portal/security`)
  await page.getByLabel('Provider to link').selectOption({ label: provider })
  await page.getByLabel('Your password, to link').fill(password)
  await viaProvider(page, 'Link provider', account)
}

async function signIn(a: Running, page: Page, button: string, account: string, opts: { mfa?: boolean } = {}): Promise<void> {
  await page.goto(`${a.url}/portal/sign-in`)
  await viaProvider(page, button, account, opts)
}

const whoAmI = async (a: Running, page: Page): Promise<string | null> => {
  const cookie = (await page.context().cookies(a.url)).find((c) => c.name === 'tessera_session')
  if (cookie === undefined) return null
  const found = await a.store.portal.findSession(
    (await import('../../src/services/users/tokens.ts')).sessionIdHash(cookie.value),
    new Date(a.clock.now()).toISOString(),
  )
  return found === null || found.session.twoFactorPending ? null : found.user.email
}

const alertText = (page: Page) => page.getByRole('alert').innerText()

test('in a browser: sign-in through a real provider joins the domain account with its role, finds the same user again, and never takes over by address', {
  skip: browserSkip(),
}, async (t) => {
  const a = await app(t)
  const kc = await startProvider(t)
  // Okta here gives the address from UserInfo only.
  const other = await startProvider(t, { claimsInIdToken: false })
  const second = await a.accounts.createAccount({ actor: SYSTEM }, { name: 'Second Ltd' })
  assert.ok(!isFailure(second))
  await configure(a, kc, { id: 'kc', name: 'Keycloak', domains: ['example.com'], joinAccountId: a.accountId, joinRole: 'developer' })
  await configure(a, other, { id: 'okta', name: 'Okta', domains: ['partner.test', 'example.com'], joinAccountId: second.id, joinRole: 'viewer' })
  kc.accounts.set('alice', { email: 'alice@example.com', email_verified: true })
  kc.accounts.set('mallory', { email: 'mallory@example.com', email_verified: true })
  kc.accounts.set('bob', { email: 'bob@example.com', email_verified: true })
  kc.accounts.set('eve', { email: 'eve@elsewhere.test', email_verified: true })
  kc.accounts.set('una', { email: 'una@example.com', email_verified: false })
  other.accounts.set('carol', { email: 'carol@partner.test', email_verified: true })
  other.accounts.set('alice', { email: 'alice@example.com', email_verified: true })
  const browser = await openBrowser(t)
  const page = await (await browser.newContext()).newPage()

  // The sign-in page offers both, and passes axe.
  await page.goto(`${a.url}/portal/sign-in`)
  assert.deepEqual(await seriousViolations(page), [])
  // A first sign-in: a new user, in the domain's account as a developer.
  await signIn(a, page, 'Sign in with Keycloak', 'alice')
  assert.equal(await whoAmI(a, page), 'alice@example.com')
  const alice = (await a.store.portal.findUserByEmail('alice@example.com'))!
  assert.deepEqual(
    (await a.store.portal.membershipsOf(alice.id)).map((m) => [m.accountId, m.role]),
    [[a.accountId, 'developer']],
  )
  assert.equal(alice.passwordHash, null, 'no password made up')
  // Signed out, and in again: the same user.
  await page.getByRole('button', { name: 'Sign out' }).first().click()
  await signIn(a, page, 'Sign in with Keycloak', 'alice')
  assert.equal(await whoAmI(a, page), 'alice@example.com')
  assert.equal((await a.store.portal.listUsers({ limit: 50 })).items.filter((u) => u.email === 'alice@example.com').length, 1)
  const events = (await a.store.audit.list({ limit: 50 })).items
  assert.ok(events.some((e) => e.action === 'user.sign-up' && e.detail.method === 'sso' && e.detail.provider === 'kc'))
  assert.ok(events.some((e) => e.action === 'member.add' && e.accountId === a.accountId && e.detail.role === 'developer'))
  assert.equal(events.filter((e) => e.action === 'user.sign-in' && e.outcome === 'success' && e.detail.method === 'sso').length, 2)

  // Mallory signs in, then changes her address at the provider to Alice's: she is still Mallory here.
  const fresh = async () => (await browser.newContext()).newPage()
  const mallory = await fresh()
  await signIn(a, mallory, 'Sign in with Keycloak', 'mallory')
  assert.equal(await whoAmI(a, mallory), 'mallory@example.com')
  kc.accounts.set('mallory', { email: 'alice@example.com', email_verified: true })
  await mallory.context().clearCookies()
  await signIn(a, mallory, 'Sign in with Keycloak', 'mallory')
  assert.equal(await whoAmI(a, mallory), 'mallory@example.com', 'bound by subject: the address the provider gives now changes nothing')
  assert.equal((await a.store.portal.findSsoIdentity('kc', 'mallory'))?.identity.email, 'alice@example.com', 'the address is noted, not followed')

  // The second provider: its own account and role; the same subject name there is another identity, and Alice's address is not merged into it.
  const carol = await fresh()
  await signIn(a, carol, 'Sign in with Okta', 'carol')
  assert.equal(await whoAmI(a, carol), 'carol@partner.test')
  const carolUser = (await a.store.portal.findUserByEmail('carol@partner.test'))!
  assert.deepEqual(
    (await a.store.portal.membershipsOf(carolUser.id)).map((m) => [m.accountId, m.role]),
    [[second.id, 'viewer']],
  )
  const twin = await fresh()
  await signIn(a, twin, 'Sign in with Okta', 'alice')
  assert.match(await alertText(twin), /A portal user with your address exists already/)
  assert.equal(await whoAmI(a, twin), null)

  // An address that has a user (Bob's, with a password) is refused until Bob, signed in, links the provider.
  const bob = await portalUser(a, { email: 'bob@example.com' })
  const bobPage = await fresh()
  await signIn(a, bobPage, 'Sign in with Keycloak', 'bob')
  assert.match(await alertText(bobPage), /Sign in with your password, then link Keycloak on your Security page/)
  assert.equal(await whoAmI(a, bobPage), null)
  const bobSigned = await signInPage(browser, a.url, bob)
  await bobSigned.goto(`${a.url}/portal/security`)
  assert.deepEqual(await seriousViolations(bobSigned), [])
  // A session left open is not enough: a wrong password starts nothing.
  await bobSigned.getByLabel('Provider to link').selectOption({ label: 'Keycloak' })
  await bobSigned.getByLabel('Your password, to link').fill('not the password at all')
  await bobSigned.getByRole('button', { name: 'Link provider' }).click()
  assert.equal(await bobSigned.getByText('That password is wrong.').count(), 1)
  assert.ok(bobSigned.url().startsWith(a.url))
  await linkOnSecurityPage(a, bobSigned, 'Keycloak', bob.password, 'bob')
  assert.equal(await bobSigned.getByRole('status').innerText(), 'The provider is linked: you can sign in with it.')
  await bobPage.context().clearCookies()
  await signIn(a, bobPage, 'Sign in with Keycloak', 'bob')
  assert.equal(await whoAmI(a, bobPage), 'bob@example.com')

  // Not of the provider's domains; an address the provider has not verified.
  const eve = await fresh()
  await signIn(a, eve, 'Sign in with Keycloak', 'eve')
  assert.match(await alertText(eve), /does not sign in addresses of your domain/)
  const una = await fresh()
  await signIn(a, una, 'Sign in with Keycloak', 'una')
  assert.match(await alertText(una), /did not give us an email address it has verified/)
  assert.equal(await a.store.portal.findUserByEmail('una@example.com'), null)

  // Password sign-in turned off for the provider's domain: Bob's right password opens nothing.
  await configure(a, kc, { id: 'kc', name: 'Keycloak', domains: ['example.com'], joinAccountId: a.accountId, joinRole: 'developer', passwordAllowed: false })
  const pw = await fresh()
  await pw.goto(`${a.url}/portal/sign-in`)
  await pw.getByLabel('Email').fill(bob.email)
  await pw.getByLabel('Password').fill(bob.password)
  await pw.getByRole('button', { name: 'Sign in', exact: true }).click()
  assert.match(await alertText(pw), /Sign in with Keycloak: your operator has turned password sign-in off for you/)
  assert.equal(await whoAmI(a, pw), null)
  // A user of the domain who has not linked it yet: the right password opens no session, only the way to link it, through the
  // provider, in this browser; then the provider signs them in, and the password alone never again.
  const carl = await portalUser(a, { email: 'carl@example.com' })
  kc.accounts.set('carl', { email: 'carl@example.com', email_verified: true })
  const asked = await fresh()
  await asked.goto(`${a.url}/portal/sign-in`)
  await asked.getByLabel('Email').fill(carl.email)
  await asked.getByLabel('Password').fill(carl.password)
  await asked.getByRole('button', { name: 'Sign in', exact: true }).click()
  await asked.waitForURL(/\/interaction\//)
  await asked.getByLabel('Account').fill('carl')
  await Promise.all([asked.waitForURL(/\/portal\/(home|accounts)/), asked.getByRole('button', { name: 'Continue' }).click()])
  assert.equal(await whoAmI(a, asked), 'carl@example.com')
  assert.equal((await a.store.portal.findSsoIdentity('kc', 'carl'))?.user.id, carl.user.id, 'linked to the user whose password began it')
  const carlAgain = await fresh()
  await carlAgain.goto(`${a.url}/portal/sign-in`)
  await carlAgain.getByLabel('Email').fill(carl.email)
  await carlAgain.getByLabel('Password').fill(carl.password)
  await carlAgain.getByRole('button', { name: 'Sign in', exact: true }).click()
  assert.match(await alertText(carlAgain), /Sign in with Keycloak/)
})

test('in a browser: a wrong state, a callback in another browser, and an ID token with another nonce or issuer or signed by another key are refused', {
  skip: browserSkip(),
}, async (t) => {
  const a = await app(t)
  const kc = await startProvider(t)
  await configure(a, kc, { id: 'kc', name: 'Keycloak', domains: ['example.com'], joinAccountId: a.accountId, joinRole: 'viewer' })
  kc.accounts.set('alice', { email: 'alice@example.com', email_verified: true })
  const browser = await openBrowser(t)
  const page = await (await browser.newContext()).newPage()

  // A state that is not the request's.
  kc.onCallback = (location) => {
    const url = new URL(location)
    url.searchParams.set('state', `${url.searchParams.get('state')}x`)
    return url.href
  }
  await signIn(a, page, 'Sign in with Keycloak', 'alice')
  assert.match(await alertText(page), /has expired, was used already, or was started in another browser/)
  assert.equal(await whoAmI(a, page), null)

  // A callback carried to another browser (a login CSRF: the attacker's code in the victim's browser): refused, and the request is spent.
  let carried = ''
  kc.onCallback = (location) => {
    carried = location
    return null
  }
  await page.goto(`${a.url}/portal/sign-in`)
  await page.getByRole('button', { name: 'Sign in with Keycloak' }).click()
  await page.getByText('The callback was kept from the browser.').waitFor()
  assert.match(carried, /code=/)
  kc.onCallback = null
  const victim = await (await browser.newContext()).newPage()
  await victim.goto(`${a.url}/portal/sign-in`)
  await victim.goto(carried)
  assert.match(await alertText(victim), /started in another browser/)
  assert.equal(await whoAmI(a, victim), null)
  await page.goto(carried)
  assert.match(await alertText(page), /has expired, was used already/, 'spent by the attempt')

  // The ID token tampered with on its way from the token endpoint.
  for (const [tamper, words] of [
    ['wrong-nonce', /nonce/],
    ['wrong-issuer', /iss/],
    ['other-key', /signature/i],
  ] as const) {
    kc.tamper = tamper
    const tries = kc.tokenRequests
    await signIn(a, page, 'Sign in with Keycloak', 'alice')
    assert.equal(kc.tokenRequests, tries + 1, `${tamper}: the code was redeemed`)
    assert.match(await alertText(page), /answer did not pass our checks/, tamper)
    assert.equal(await whoAmI(a, page), null, tamper)
    const refusal = (await a.store.audit.list({ limit: 1, action: 'user.sign-in' })).items[0]!
    assert.equal(refusal.outcome, 'failure')
    assert.match(String(refusal.detail.reason), words, `${tamper}: ${String(refusal.detail.reason)}`)
  }
  // The same flow untampered signs in: the refusals were the tampering's.
  kc.tamper = 'none'
  await signIn(a, page, 'Sign in with Keycloak', 'alice')
  assert.equal(await whoAmI(a, page), 'alice@example.com')
})

test('in a browser: the provider MFA stands for the second factor only as configured, and operators must use SSO when required', {
  skip: browserSkip(),
}, async (t) => {
  const a = await app(t, { SSO_OPERATORS_REQUIRED: 'true' })
  const kc = await startProvider(t)
  const google = await startProvider(t)
  await configure(a, kc, { id: 'kc', name: 'Keycloak', mfa: 'amr' })
  await configure(a, google, { id: 'google', name: 'Google' })
  const op = await portalUser(a, { email: 'olga@example.com', operator: true, accountId: null })
  kc.accounts.set('olga', { email: 'olga@example.com', email_verified: true })
  google.accounts.set('olga', { email: 'olga@example.com', email_verified: true })
  const browser = await openBrowser(t)

  // A password session of an operator: a member's view, and the operator pages say why.
  const page = await signInPage(browser, a.url, op)
  assert.equal(await page.getByRole('navigation', { name: 'Your portal' }).getByRole('link', { name: 'Operator' }).count(), 0)
  const refused = await page.goto(`${a.url}/portal/operator`)
  assert.equal(refused?.status(), 403)
  assert.match(await alertText(page), /only in a session signed in through single sign-on/)
  // An operator who must use SSO links only the provider's account of her own address (her password alone must not make an SSO session).
  kc.accounts.set('mallory', { email: 'mallory@example.com', email_verified: true })
  await linkOnSecurityPage(a, page, 'Keycloak', op.password, 'mallory')
  assert.match(await alertText(page), /Operators link only the Keycloak account of their own address/)
  assert.equal(await a.store.portal.findSsoIdentity('kc', 'mallory'), null)
  // A browser of her own again (the provider remembers Mallory in that one).
  const again = await signInPage(browser, a.url, op)
  // She links both providers, and turns on the portal's own second factor.
  await linkOnSecurityPage(a, again, 'Keycloak', op.password, 'olga')
  assert.equal(await again.getByRole('status').innerText(), 'The provider is linked: you can sign in with it.')
  await linkOnSecurityPage(a, again, 'Google', op.password, 'olga')
  assert.equal(await again.getByRole('status').innerText(), 'The provider is linked: you can sign in with it.')
  const secret = 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP'
  await a.store.portal.updateUser(op.user.id, { totpSecret: secret, totpEnabledAt: new Date(a.clock.now()).toISOString() }, null)

  // Keycloak trusted for its MFA: with it, no second factor here; without it, the portal's.
  const fresh = async () => (await browser.newContext()).newPage()
  const withMfa = await fresh()
  await signIn(a, withMfa, 'Sign in with Keycloak', 'olga', { mfa: true })
  assert.equal(await whoAmI(a, withMfa), 'olga@example.com')
  assert.equal((await withMfa.goto(`${a.url}/portal/operator`))?.status(), 200, 'an SSO session opens the operator pages')
  await withMfa.getByRole('navigation', { name: 'Operator pages' }).getByRole('link', { name: 'Single sign-on' }).click()
  assert.match(await withMfa.getByRole('row', { name: /Keycloak kc/ }).innerText(), /portal\/sso\/kc\/callback/)
  assert.match(await withMfa.locator('main').innerText(), /Required/)
  assert.deepEqual(await seriousViolations(withMfa), [])
  const withoutMfa = await fresh()
  await signIn(a, withoutMfa, 'Sign in with Keycloak', 'olga')
  assert.match(withoutMfa.url(), /\/portal\/two-factor/)
  assert.equal(await whoAmI(a, withoutMfa), null)
  // Google is not trusted for MFA: its "mfa" counts for nothing; the code completes the SSO session, which opens the operator pages.
  const viaGoogle = await fresh()
  await signIn(a, viaGoogle, 'Sign in with Google', 'olga', { mfa: true })
  assert.match(viaGoogle.url(), /\/portal\/two-factor/)
  await viaGoogle.getByLabel('Code', { exact: false }).first().fill(codeOf(a, secret))
  await viaGoogle
    .getByRole('button', { name: /Verify|Continue|Sign in/ })
    .first()
    .click()
  await viaGoogle.waitForURL(/\/portal\/(home|accounts)/)
  assert.equal((await viaGoogle.goto(`${a.url}/portal/operator`))?.status(), 200)
})
