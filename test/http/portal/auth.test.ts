/**
 * Signing up, confirming the address, signing in, resetting the password, through the real
 * portal over HTTP, with the emails the log mailer writes (no SMTP_URL): SIGNUP_MODE open,
 * approval and closed; the same answers for known and unknown addresses; links that work
 * once; `next` that never leaves the portal.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { startApp } from '../../support/helper.ts'
import { linkIn, mails, PortalClient, portalUser, waitForMail } from '../../support/portal-helper.ts'
import { safeNext } from '../../../src/portal/pages/auth.ts'

const PASSWORD = 'correct horse battery staple'

/** pathOf: a link's path and query, to fetch from the test's own base URL. */
const pathOf = (link: string) => {
  const u = new URL(link)
  return `${u.pathname}${u.search}`
}

test('sign up, confirm the address by the emailed link, sign in: the new user owns a new account', async (t) => {
  const app = await startApp(t)
  const client = new PortalClient(app.url)
  const signUp = await client.post(
    '/portal/sign-up',
    { email: 'Ada@Example.com', password: PASSWORD, account: 'Analytical Engines' },
    { from: '/portal/sign-up' },
  )
  assert.equal(signUp.status, 200)
  assert.match(signUp.text, /We have sent a link to Ada@Example\.com/)

  const mail = await waitForMail(app, 'Ada@Example.com')
  assert.equal(mail.subject, 'Confirm your email address for Tessera')
  const link = linkIn(mail)
  assert.match(link, /^http:\/\/localhost:\d+\/portal\/verify-email\?token=[\w-]{27}$/)

  // Not confirmed yet: the right password is told to confirm first (and, after the mail window, a new link goes out).
  app.clock.advance(app.config.portalMailWindowSeconds * 1000)
  const early = await client.post('/portal/sign-in', { email: 'ada@example.com', password: PASSWORD }, { from: '/portal/sign-in' })
  assert.equal(early.status, 403)
  assert.match(early.text, /confirm your email address first/)
  const second = await waitForMail(app, 'Ada@Example.com', 2)
  assert.notEqual(linkIn(second), link, 'a new link')

  // Opening the link consumes nothing (mail scanners open links); the button does.
  const opened = await client.get(pathOf(linkIn(second)))
  assert.equal(opened.status, 200)
  assert.match(opened.text, /Confirm my email address/)
  const stale = await client.post('/portal/verify-email', { token: new URL(link).searchParams.get('token')!, password: PASSWORD })
  assert.equal(stale.status, 400, 'the first link was replaced by the second')
  await client.get(pathOf(linkIn(second)))
  const wrong = await client.post('/portal/verify-email', { token: new URL(linkIn(second)).searchParams.get('token')!, password: 'not the one chosen' })
  assert.equal(wrong.status, 422, 'confirming asks for the password chosen at sign-up')
  assert.match(wrong.text, /not the password of the last sign-up/)
  const confirmed = await client.post('/portal/verify-email', { token: new URL(linkIn(second)).searchParams.get('token')!, password: PASSWORD })
  assert.equal(confirmed.status, 200, 'the answer is the sign-in form')
  assert.match(confirmed.text, /Your email address is confirmed\. Sign in to continue\./)
  assert.match(confirmed.text, /<form method="post" action="\/portal\/sign-in">/)
  assert.match(
    confirmed.text,
    /<input id="email" name="email" type="email" autocomplete="username" required value="ada@example\.com">/i,
    'the address is filled in',
  )
  assert.match(confirmed.text, /<input id="password"[^>]* autofocus>/, 'the password is next')
  await client.get(pathOf(linkIn(second)))
  assert.equal(
    (await client.post('/portal/verify-email', { token: new URL(linkIn(second)).searchParams.get('token')!, password: PASSWORD })).status,
    400,
    'a link works once',
  )

  await client.signIn('ADA@example.com', PASSWORD)
  const home = await client.follow('/portal/home')
  assert.match(home.text, /Analytical Engines/)
  assert.match(home.text, /<td>owner<\/td>/)
  const user = await app.store.portal.findUserByEmail('ada@example.com')
  assert.ok(user?.emailVerifiedAt)
  const events = (await app.store.audit.list({ actor: `portal-user:${user.id}`, limit: 20 })).items.map((e) => `${e.action}:${e.outcome}`)
  for (const action of ['user.sign-up:success', 'account.create:success', 'member.add:success', 'user.verify-email:success', 'user.sign-in:success']) {
    assert.ok(events.includes(action), `${action} in ${events.join(', ')}`)
  }
})

test('sign-up says the same for an address already taken, and mails its owner instead of a new link; bad fields get their own messages', async (t) => {
  const app = await startApp(t)
  const known = await portalUser(app, { email: 'taken@example.com' })
  const client = new PortalClient(app.url)
  const fresh = await client.post('/portal/sign-up', { email: 'new@example.com', password: PASSWORD }, { from: '/portal/sign-up' })
  const taken = await client.post('/portal/sign-up', { email: 'TAKEN@example.com', password: PASSWORD }, { from: '/portal/sign-up' })
  assert.equal(taken.status, fresh.status)
  assert.equal(
    taken.text.replace(/TAKEN@example\.com|new@example\.com/g, 'X').replace(/value="[^"]+"/g, ''),
    fresh.text.replace(/TAKEN@example\.com|new@example\.com/g, 'X').replace(/value="[^"]+"/g, ''),
  )
  const notice = await waitForMail(app, known.email)
  assert.equal(notice.subject, 'You already have a Tessera account')
  assert.equal((await app.store.portal.findUserByEmail('taken@example.com'))?.id, known.user.id, 'nothing changed for the existing user')

  const bad = await client.post('/portal/sign-up', { email: 'not-an-address', password: 'short', account: 'a\u0001b' }, { from: '/portal/sign-up' })
  assert.equal(bad.status, 422)
  assert.match(bad.text, /id="email-error">Enter an email address like jane@example\.com\./)
  assert.match(bad.text, /id="password-error">Choose a password of at least 12 characters\./)
  assert.match(bad.text, /id="account-error">/)
  assert.match(bad.text, /aria-invalid="true"/)
  assert.equal(await app.store.portal.findUserByEmail('not-an-address'), null)

  const noCsrf = await client.post('/portal/sign-up', { email: 'x@example.com', password: PASSWORD }, { csrf: false })
  assert.equal(noCsrf.status, 403)
  assert.equal(await app.store.portal.findUserByEmail('x@example.com'), null)
})

test('SIGNUP_MODE=approval: a confirmed sign-up waits for an operator, who is emailed; SIGNUP_MODE=closed: no sign-up at all', async (t) => {
  const app = await startApp(t, { SIGNUP_MODE: 'approval' })
  const operator = await portalUser(app, { operator: true, accountId: null })
  const client = new PortalClient(app.url)
  await client.post('/portal/sign-up', { email: 'wait@example.com', password: PASSWORD }, { from: '/portal/sign-up' })
  const link = linkIn(await waitForMail(app, 'wait@example.com'))
  await client.get(pathOf(link))
  const confirmed = await client.post('/portal/verify-email', { token: new URL(link).searchParams.get('token')!, password: PASSWORD })
  assert.equal(confirmed.status, 200)
  assert.match(confirmed.text, /An operator approves each new account/)
  assert.equal((await waitForMail(app, operator.email)).subject, 'New Tessera sign-up to approve: wait@example.com')
  assert.equal((await waitForMail(app, 'wait@example.com', 2)).subject, 'Your Tessera sign-up is awaiting approval')
  const early = await client.post('/portal/sign-in', { email: 'wait@example.com', password: PASSWORD }, { from: '/portal/sign-in' })
  assert.equal(early.status, 403)
  assert.match(early.text, /waiting for an operator/)

  const closed = await startApp(t, { SIGNUP_MODE: 'closed' })
  const other = new PortalClient(closed.url)
  assert.equal((await other.get('/portal/sign-up')).status, 403)
  const posted = await fetch(`${closed.url}/portal/sign-up`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: 'email=a%40example.com&password=correct+horse+battery',
  })
  assert.equal(posted.status, 403)
  assert.match((await other.get('/portal/sign-in')).text, /Ask an account owner for an invitation/)
})

test('password reset: the same answer for any address; the link works once, sets the password and signs out every session', async (t) => {
  const app = await startApp(t)
  const user = await portalUser(app, { email: 'forgetful@example.com' })
  const signedIn = new PortalClient(app.url)
  await signedIn.signIn(user.email, user.password)

  const client = new PortalClient(app.url)
  const known = await client.post('/portal/reset', { email: 'Forgetful@example.com' }, { from: '/portal/reset' })
  const unknown = await client.post('/portal/reset', { email: 'nobody@example.com' }, { from: '/portal/reset' })
  assert.equal(known.status, 200)
  assert.equal(unknown.status, 200)
  assert.equal(known.text.replace('Forgetful@example.com', 'X'), unknown.text.replace('nobody@example.com', 'X'))
  const link = linkIn(await waitForMail(app, user.email))
  assert.equal(mails(app, 'nobody@example.com').length, 0)
  const token = new URL(link).searchParams.get('token')!

  await client.get(pathOf(link))
  const weak = await client.post('/portal/reset/confirm', { token, password: 'short' })
  assert.equal(weak.status, 422, 'a refused password does not use the link up')
  const done = await client.post('/portal/reset/confirm', { token, password: 'a new and longer passphrase' })
  assert.equal(done.status, 303)
  assert.equal(done.location, '/portal/sign-in?notice=reset')
  await client.get(pathOf(link))
  assert.equal((await client.post('/portal/reset/confirm', { token, password: 'yet another passphrase' })).status, 400, 'once only')

  assert.match((await signedIn.get('/portal/home')).location ?? '', /\/portal\/sign-in/, 'the other session was signed out')
  const old = await client.post('/portal/sign-in', { email: user.email, password: user.password }, { from: '/portal/sign-in' })
  assert.equal(old.status, 401)
  await client.signIn(user.email, 'a new and longer passphrase')

  // Twenty uses of one link at once: one sets the password. (A second reset email goes after the window.)
  app.clock.advance(app.config.portalMailWindowSeconds * 1000)
  await client.post('/portal/reset', { email: user.email }, { from: '/portal/reset' })
  const again = new URL(linkIn(await waitForMail(app, user.email, 2))).searchParams.get('token')!
  await client.get('/portal/reset')
  const csrf = client.csrf()
  const answers = await Promise.all(
    Array.from({ length: 20 }, (_, i) =>
      fetch(`${app.url}/portal/reset/confirm`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: client.cookieHeader, origin: app.url },
        body: new URLSearchParams({ _csrf: csrf, token: again, password: `parallel passphrase ${i}` }).toString(),
      }).then((r) => r.status),
    ),
  )
  assert.deepEqual(answers.filter((s) => s === 303).length, 1, answers.join(','))
})

test('a password reset ends the lock that guesses put on the address', async (t) => {
  const app = await startApp(t)
  const user = await portalUser(app, { email: 'locked@example.com' })
  const client = new PortalClient(app.url)
  for (let i = 0; i < 6; i++) await client.post('/portal/sign-in', { email: user.email, password: `wrong guess ${i}` }, { from: '/portal/sign-in' })
  const locked = await client.post('/portal/sign-in', { email: user.email, password: user.password }, { from: '/portal/sign-in' })
  assert.equal(locked.status, 429, 'locked: even the right password waits')
  await client.post('/portal/reset', { email: user.email }, { from: '/portal/reset' })
  const token = new URL(linkIn(await waitForMail(app, user.email))).searchParams.get('token')!
  await client.get(`/portal/reset/confirm?token=${token}`)
  assert.equal((await client.post('/portal/reset/confirm', { token, password: 'the owner is back in' })).status, 303)
  await client.signIn(user.email, 'the owner is back in')
})

test('next after sign-in stays inside the portal', () => {
  assert.equal(safeNext('/portal/accounts/acc_1/keys'), '/portal/accounts/acc_1/keys')
  assert.equal(safeNext('/portal/invitations/accept?token=abc_-1&account=acc_1'), '/portal/invitations/accept?token=abc_-1&account=acc_1')
  for (const bad of [
    'https://evil.example/',
    '//evil.example/portal/',
    '/portal//evil.example',
    '/portal/../admin',
    '/totp/ping',
    'javascript:alert(1)',
    '/portal/\\evil',
    '/portal/x?next=//evil.example',
    '/portal/x?a=<b>',
    undefined,
    42,
  ]) {
    assert.equal(safeNext(bad), '/portal/', String(bad))
  }
})

test('a hostile next after sign-in comes back as the portal home: dot segments encoded or not, backslashes, //host, encoded slashes, control characters', async (t) => {
  const app = await startApp(t)
  const user = await portalUser(app)
  const hostile = [
    '/portal/.%2e/.%2e/docs',
    '/portal/%2e%2e/%2e%2e/docs',
    '/portal/%2E%2E/admin',
    '/portal/.%2E/docs',
    '/portal/x/%2e%2e/%2e%2e/docs',
    '/portal/..%2fdocs',
    '/portal/%2f%2fevil.example',
    '/portal/\\evil.example',
    '/portal/%5c%5cevil.example',
    '//evil.example/portal/',
    '/portal/\t/../../docs',
    '/portal/%09/docs',
    '/portal/x%0d%0aLocation:%20https://evil.example',
    'https://evil.example/portal/',
    '/portal/../docs',
  ]
  for (const next of hostile) {
    // By the form's hidden field, as the sign-in page carries it.
    const client = new PortalClient(app.url)
    const signedIn = await client.post('/portal/sign-in', { email: user.email, password: user.password, next }, { from: '/portal/sign-in' })
    assert.equal(signedIn.status, 303, next)
    assert.equal(signedIn.location, '/portal/', next)
    // By the query of the sign-in page, visited signed in.
    const again = await client.get(`/portal/sign-in?next=${encodeURIComponent(next)}`)
    assert.equal(again.status, 303, next)
    assert.equal(again.location, '/portal/', next)
    assert.equal(new URL(again.location!, 'https://portal.example').pathname, '/portal/', 'as a browser resolves it')
  }
  // A portal page still comes back, as a browser would resolve it.
  const client = new PortalClient(app.url)
  const kept = await client.post(
    '/portal/sign-in',
    { email: user.email, password: user.password, next: '/portal/accounts/x/../keys?tab=1' },
    { from: '/portal/sign-in' },
  )
  assert.equal(kept.location, '/portal/accounts/keys?tab=1')
})
