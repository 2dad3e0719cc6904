/**
 * The portal's Security page and the second step of signing in (issue 13), through the real
 * app over HTTP: enrolment, sign-in with a code or a recovery code, replay, parallel posts of
 * one code, the lock after repeated guesses, the password changes and sign-outs. In a real
 * browser, enrolment and the second step by their labels: test/browser/portal-security.test.ts.
 */
import { test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { startApp, type Running } from '../../support/helper.ts'
import { codeOf, PortalClient, portalUser, signedInClient, STEP_MS, wrongCodeOf } from '../../support/portal-helper.ts'
import { createDatabase, redisEnv, skipUnless } from '../../support/services.ts'
import { sessionIdHash } from '../../../src/portal/web/session.ts'
import { newTotpSecret, storeRecoveryCodes } from '../../../src/services/users/codes.ts'
import { portalSecretContext, resealPortalSecrets } from '../../../src/services/users/sealed.ts'
import { resolveKeyring } from '../../../src/config/encryption.ts'
import { SealError } from '../../../src/crypto/keyring.ts'

const COOKIE = 'tessera_session'
const textareaOf = (page: string, id: string): string => {
  const m = new RegExp(`<textarea id="${id}"[^>]*>([^<]*)</textarea>`).exec(page)
  assert.ok(m, `the page has the textarea ${id}`)
  return m[1]!
}
const codesOf = (page: string) => textareaOf(page, 'recovery-codes').trim().split('\n')

/** enrol turns two-factor sign-in on through the pages; gives the secret and the recovery codes shown. */
async function enrol(app: Running, client: PortalClient, password: string): Promise<{ secret: string; codes: string[] }> {
  assert.equal((await client.post('/portal/security/two-factor/setup', {}, { from: '/portal/security' })).location, '/portal/security/two-factor/setup')
  const page = await client.get('/portal/security/two-factor/setup')
  assert.equal(page.status, 200)
  assert.match(page.text, /<img class="qr" src="data:image\/png;base64,[A-Za-z0-9+/=]+" alt="QR code that adds Tessera/)
  const secret = textareaOf(page.text, 'totp-secret').replace(/ /g, '')
  assert.match(textareaOf(page.text, 'totp-secret'), /^([A-Z2-7]{4} ){7}[A-Z2-7]{4}$/, 'the secret in groups of four')
  const done = await client.post('/portal/security/two-factor/enable', { 'totp-code': codeOf(app, secret), 'enable-password': password })
  assert.equal(done.status, 200, done.text.slice(0, 500))
  const codes = codesOf(done.text)
  return { secret, codes }
}

/** twoFactorUser: a user with two-factor sign-in on (made in the store), its secret and recovery codes. */
async function twoFactorUser(app: Running) {
  const made = await portalUser(app)
  const secret = newTotpSecret()
  await app.store.portal.updateUser(made.user.id, { totpSecret: secret, totpEnabledAt: new Date(app.clock.now()).toISOString() }, null)
  const codes = await storeRecoveryCodes({ pepper: app.pepper, store: app.store }, made.user.id)
  return { ...made, secret, codes }
}

/** pendingClient: a client past the password, at the second step. */
async function pendingClient(app: Running, email: string, password: string, next = ''): Promise<PortalClient> {
  const client = new PortalClient(app.url)
  const answer = await client.post(`/portal/sign-in`, { email, password, ...(next ? { next } : {}) }, { from: '/portal/sign-in' })
  assert.equal(answer.location, `/portal/two-factor${next ? `?next=${encodeURIComponent(next)}` : ''}`)
  assert.equal((await client.get(answer.location!)).status, 200)
  return client
}

const withCookie = (app: Running, token: string, path: string) => fetch(`${app.url}${path}`, { headers: { cookie: `${COOKIE}=${token}` }, redirect: 'manual' })
const signOut = (client: PortalClient) => client.post('/portal/sign-out', {}, { from: '/portal/home' })

async function auditActions(app: Running, userId: string): Promise<{ action: string; outcome: string; detail: Record<string, unknown> }[]> {
  const page = await app.store.audit.list({ actor: `portal-user:${userId}`, limit: 200 })
  return page.items.map((e) => ({ action: e.action, outcome: e.outcome, detail: { ...e.detail } }))
}

test('enrol, then signing in asks for a code: a wrong one is refused, the right one signs in with a new session id, once; a recovery code works once', async (t) => {
  const app = await startApp(t)
  const { client, email, password, user } = await signedInClient(app)
  const other = new PortalClient(app.url)
  await other.signIn(email, password)

  const security = await client.get('/portal/security')
  assert.match(security.text, /<span class="badge off">Off<\/span>/)
  const { secret, codes } = await enrol(app, client, password)
  assert.equal(codes.length, 10)
  assert.equal(new Set(codes).size, 10)
  for (const code of codes) assert.match(code, /^[a-z2-7]{4}-[a-z2-7]{4}$/)
  assert.equal((await other.get('/portal/home')).status, 303, 'turning it on signs out the sessions that had only the password')
  assert.match((await client.get('/portal/security')).text, /You have 10 of 10 recovery codes left/)
  assert.equal((await client.get('/portal/security/two-factor/setup')).location, '/portal/security', 'no second enrolment while it is on')
  assert.ok(!app.logs.some((line) => line.includes(secret) || codes.some((c) => line.includes(c))), 'neither the secret nor a recovery code is logged')

  await signOut(client)
  app.clock.advance(STEP_MS)
  const pending = await pendingClient(app, email, password)
  const pendingToken = pending.cookie(COOKIE)!
  for (const path of ['/portal/home', '/portal/security', '/portal/security/two-factor/setup']) {
    const answer = await pending.get(path)
    assert.equal(answer.status, 303, `${path} is out of reach of a pending session`)
    assert.match(answer.location!, /^\/portal\/sign-in/)
  }
  for (const path of ['/portal/accounts', '/portal/security/sign-out-others', '/portal/security/two-factor/off']) {
    assert.equal(
      (await pending.post(path, { name: 'x', 'off-password': password }, { from: '/portal/two-factor' })).location,
      '/portal/sign-in',
      `POST ${path}`,
    )
  }
  const step = await pending.get('/portal/two-factor')
  assert.match(step.text, /<label for="code">Authentication code<\/label>/)
  assert.match(step.text, /id="code" name="code" type="text" autocomplete="one-time-code"[^>]* inputmode="numeric"/)
  assert.match(step.text, /<label for="recovery">Recovery code<\/label>/)

  const wrong = await pending.post('/portal/two-factor', { code: wrongCodeOf(app, secret) })
  assert.equal(wrong.status, 401)
  assert.match(wrong.text, /role="alert">That code is not right/)
  const right = codeOf(app, secret)
  const done = await pending.post('/portal/two-factor', { code: right })
  assert.equal(done.status, 303)
  assert.equal(done.location, '/portal/')
  const fresh = pending.cookie(COOKIE)!
  assert.notEqual(fresh, pendingToken, 'a new session id')
  assert.match(done.headers.get('set-cookie')!, new RegExp(`Max-Age=${app.config.sessionTtlHours * 3600}`))
  const found = await app.store.portal.findSession(sessionIdHash(fresh), new Date(app.clock.now()).toISOString())
  assert.ok(found && !found.session.twoFactorPending)
  assert.ok(Date.parse(found.session.expiresAt) >= app.clock.now() + app.config.sessionTtlHours * 3_600_000 - 1000, 'the full session lifetime')
  assert.equal((await pending.get('/portal/home')).status, 200)
  assert.equal((await withCookie(app, pendingToken, '/portal/home')).status, 303, 'the pending cookie is worth nothing now')
  assert.equal((await withCookie(app, pendingToken, '/portal/two-factor')).headers.get('location'), '/portal/sign-in')

  await signOut(pending)
  const again = await pendingClient(app, email, password)
  const replay = await again.post('/portal/two-factor', { code: right })
  assert.equal(replay.status, 401, 'the same code a second time')
  assert.match(replay.text, /That code was used already/)

  const recovered = await again.post('/portal/two-factor', { recovery: codes[0]!.toUpperCase() })
  assert.equal(recovered.status, 303)
  assert.equal(recovered.location, '/portal/two-factor/recovered')
  assert.match((await again.get(recovered.location!)).text, /you have 9 of 10 left/)
  await signOut(again)
  const third = await pendingClient(app, email, password)
  const spent = await third.post('/portal/two-factor', { recovery: codes[0]! })
  assert.equal(spent.status, 401, 'a recovery code works once')
  assert.equal((await third.post('/portal/two-factor', { recovery: codes[1]!.replace('-', ' ') })).status, 303, 'with a space for the dash')

  const events = await auditActions(app, user.id)
  const signIns = events.filter((e) => e.action === 'user.sign-in' && e.outcome === 'success').map((e) => e.detail.factor)
  assert.deepEqual(signIns.filter((f) => f !== undefined).sort(), ['recovery-code', 'recovery-code', 'totp'])
  assert.equal(events.filter((e) => e.action === 'user.2fa-on').length, 1)
  assert.equal(events.filter((e) => e.action === 'user.sign-in' && e.outcome === 'failure').length, 3)
})

async function oneCodeManyPosts(t: TestContext, env: Record<string, string>): Promise<void> {
  const app = await startApp(t, env)
  const { email, password, secret, user } = await twoFactorUser(app)
  const client = await pendingClient(app, email, password)
  const token = client.cookie(COOKIE)!
  const csrf = client.csrf()
  const code = codeOf(app, secret)
  const answers = await Promise.all(
    Array.from({ length: 20 }, () =>
      fetch(`${app.url}/portal/two-factor`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', origin: app.url, cookie: `${COOKIE}=${token}` },
        body: new URLSearchParams({ _csrf: csrf, code }).toString(),
      }),
    ),
  )
  // The losers are refused (a code used already, then the lock), or find their session gone (sent to sign in).
  const outcomes = answers.map((a) => a.headers.get('location') ?? String(a.status))
  assert.equal(outcomes.filter((o) => o === '/portal/').length, 1, `exactly one sign-in: ${outcomes.join(' ')}`)
  assert.ok(
    outcomes.every((o) => ['/portal/', '/portal/sign-in', '401', '429'].includes(o)),
    outcomes.join(' '),
  )
  const winner = answers.find((a) => a.headers.get('location') === '/portal/')!
  const fresh = /tessera_session=([^;]+)/.exec(winner.headers.get('set-cookie')!)![1]!
  const nowIso = new Date(app.clock.now()).toISOString()
  assert.equal(await app.store.portal.findSession(sessionIdHash(token), nowIso), null)
  assert.equal((await app.store.portal.findSession(sessionIdHash(fresh), nowIso))?.session.twoFactorPending, false)
  const signIns = (await auditActions(app, user.id)).filter((e) => e.action === 'user.sign-in' && e.outcome === 'success')
  assert.equal(signIns.length, 1, 'one sign-in audited')
}

test('twenty parallel posts of one valid code give exactly one session', async (t) => {
  await oneCodeManyPosts(t, {})
})

test('twenty parallel posts of one valid code give exactly one session, on PostgreSQL with Redis', {
  skip: skipUnless('TEST_DATABASE_URL', 'TEST_REDIS_URL'),
}, async (t) => {
  await oneCodeManyPosts(t, { DATABASE_URL: await createDatabase(t), ...(await redisEnv(t)) })
})

test('after OTP_MAX_FAILURES wrong codes the user is locked (429, with when to retry), guesses at once included, recovery codes too; the lock runs out', async (t) => {
  const app = await startApp(t)
  const max = app.config.otpMaxFailures
  const { email, password, secret, codes, user } = await twoFactorUser(app)
  const client = await pendingClient(app, email, password)
  const token = client.cookie(COOKIE)!
  const csrf = client.csrf()
  const wrong = wrongCodeOf(app, secret)
  const answers = await Promise.all(
    Array.from({ length: 20 }, () =>
      fetch(`${app.url}/portal/two-factor`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', origin: app.url, cookie: `${COOKIE}=${token}` },
        body: new URLSearchParams({ _csrf: csrf, code: wrong }).toString(),
      }),
    ),
  )
  const statuses = answers.map((a) => a.status)
  assert.equal(statuses.filter((s) => s === 401).length, max, `${max} guesses answered, the rest locked: ${statuses.join(' ')}`)
  assert.equal(statuses.filter((s) => s === 429).length, 20 - max)

  const locked = await client.post('/portal/two-factor', { code: codeOf(app, secret) })
  assert.equal(locked.status, 429, 'even the right code, while locked')
  const retry = Number(locked.headers.get('retry-after'))
  assert.ok(retry >= 1 && retry <= app.config.otpLockBaseSeconds, `retry-after ${retry}`)
  assert.match(locked.text, /role="alert">Too many wrong codes. Try again in \d+ seconds? \(after \d\d:\d\d UTC\)/)
  assert.equal((await client.post('/portal/two-factor', { recovery: codes[0]! })).status, 429, 'a recovery code is locked out too')
  assert.equal(await app.store.portal.recoveryCodesLeft(user.id), 10, 'and not spent')

  app.clock.advance(retry * 1000)
  const after = await client.post('/portal/two-factor', { code: codeOf(app, secret) })
  assert.equal(after.status, 303, 'the lock runs out')
})

test('a pending session: the second step only, with next kept (never another site), and its own CSRF; none, or a full one, goes elsewhere', async (t) => {
  const app = await startApp(t)
  const { email, password, secret } = await twoFactorUser(app)
  const anonymous = new PortalClient(app.url)
  assert.equal((await anonymous.get('/portal/two-factor')).location, '/portal/sign-in')
  assert.equal((await anonymous.get('/portal/two-factor?next=/portal/security')).location, '/portal/sign-in?next=%2Fportal%2Fsecurity')
  assert.equal((await anonymous.post('/portal/two-factor', { code: '123456' }, { csrf: false })).location, '/portal/sign-in')

  const client = await pendingClient(app, email, password, '/portal/security')
  assert.match(client.last!.text, /<input type="hidden" name="next" value="\/portal\/security">/)
  assert.equal((await client.post('/portal/two-factor', { code: codeOf(app, secret), next: '/portal/security' }, { csrf: false })).status, 403, 'no CSRF token')
  assert.equal(
    (await client.post('/portal/two-factor', { code: codeOf(app, secret), next: '/portal/security' }, { origin: 'https://evil.example' })).status,
    403,
    'from another site',
  )
  await client.get('/portal/two-factor?next=/portal/security')
  const done = await client.post('/portal/two-factor', { code: codeOf(app, secret), next: '/portal/security' })
  assert.equal(done.location, '/portal/security')
  assert.equal((await client.get('/portal/two-factor')).location, '/portal/', 'signed in already')

  app.clock.advance(STEP_MS)
  const evil = await pendingClient(app, email, password)
  assert.equal((await evil.post('/portal/two-factor', { code: codeOf(app, secret), next: 'https://evil.example/' })).location, '/portal/')

  const expired = await pendingClient(app, email, password)
  app.clock.advance(11 * 60_000)
  assert.equal((await expired.post('/portal/two-factor', { code: codeOf(app, secret) })).location, '/portal/sign-in', 'a pending session lasts 10 minutes')

  const cancelled = await pendingClient(app, email, password)
  assert.equal((await cancelled.post('/portal/sign-out', {})).location, '/portal/sign-in?notice=signed-out', 'the way out of the second step')
})

test('changing the password: the current one is needed, the rule holds, other sessions are signed out, the change is audited', async (t) => {
  const app = await startApp(t)
  const { client, email, password, user } = await signedInClient(app)
  const other = new PortalClient(app.url)
  await other.signIn(email, password)

  const wrong = await client.post(
    '/portal/security/password',
    { 'current-password': 'not my password at all', 'new-password': 'a brand new passphrase' },
    { from: '/portal/security' },
  )
  assert.equal(wrong.status, 422)
  assert.match(wrong.text, /id="current-password-error" role="alert">That password is wrong/)
  const short = await client.post('/portal/security/password', { 'current-password': password, 'new-password': 'short' })
  assert.equal(short.status, 422)
  assert.match(short.text, /id="new-password-error" role="alert">Choose a password of at least 12 characters/)
  assert.equal(
    (await client.post('/portal/security/password', { 'current-password': password, 'new-password': 'a brand new passphrase' }, { csrf: false })).status,
    403,
  )

  const done = await client.post('/portal/security/password', { 'current-password': password, 'new-password': 'a brand new passphrase' })
  assert.equal(done.location, '/portal/security?notice=password')
  assert.match((await client.get(done.location!)).text, /role="status">Your password is changed/)
  assert.equal((await other.get('/portal/home')).status, 303, 'the other session is signed out')
  assert.equal((await client.get('/portal/home')).status, 200, 'this one stays')
  const events = await auditActions(app, user.id)
  assert.equal(events.filter((e) => e.action === 'user.password').length, 1)
  assert.ok(!JSON.stringify(events).includes('brand new'))
  await new PortalClient(app.url).signIn(email, 'a brand new passphrase')
})

test('two-factor on: new recovery codes need a code or the password; turning it off needs the password; sign out everywhere else keeps this session', async (t) => {
  const app = await startApp(t)
  const { client, email, password, user } = await signedInClient(app)
  const { secret, codes } = await enrol(app, client, password)
  app.clock.advance(STEP_MS)

  const badRegen = await client.post('/portal/security/recovery-codes', { 'regen-proof': 'not my password at all' }, { from: '/portal/security' })
  assert.equal(badRegen.status, 422)
  const byCode = await client.post('/portal/security/recovery-codes', { 'regen-proof': codeOf(app, secret) }, { from: '/portal/security' })
  assert.equal(byCode.status, 200)
  const second = codesOf(byCode.text)
  assert.equal(second.length, 10)
  assert.ok(second.every((c) => !codes.includes(c)))
  const byPassword = await client.post('/portal/security/recovery-codes', { 'regen-proof': password }, { from: '/portal/security' })
  assert.equal(byPassword.status, 200)
  const third = codesOf(byPassword.text)
  assert.match(byPassword.text, /download="tessera-recovery-codes.txt" href="data:text\/plain;charset=utf-8,/)

  // The old codes are dead: a sign-in with one of the second set fails, one of the third works.
  const other = await pendingClient(app, email, password)
  assert.equal((await other.post('/portal/two-factor', { recovery: second[0]! })).status, 401)
  assert.equal((await other.post('/portal/two-factor', { recovery: third[0]! })).status, 303)

  const away = await client.post('/portal/security/sign-out-others', {}, { from: '/portal/security' })
  assert.equal(away.location, '/portal/security?notice=signed-out-others')
  assert.equal((await other.get('/portal/home')).status, 303, 'the other session is signed out')
  assert.equal((await client.get('/portal/home')).status, 200, 'this one stays')

  const noPassword = await client.post('/portal/security/two-factor/off', { 'off-password': '' }, { from: '/portal/security' })
  assert.equal(noPassword.status, 422)
  assert.notEqual((await app.store.portal.getUser(user.id))!.totpEnabledAt, null, 'still on')
  assert.equal((await client.post('/portal/security/two-factor/off', { 'off-password': password }, { csrf: false, from: '/portal/security' })).status, 403)
  const off = await client.post('/portal/security/two-factor/off', { 'off-password': password }, { from: '/portal/security' })
  assert.equal(off.location, '/portal/security?notice=2fa-off')
  const now = (await app.store.portal.getUser(user.id))!
  assert.equal(now.totpEnabledAt, null)
  assert.equal(now.totpSecret, null)
  assert.equal(await app.store.portal.recoveryCodesLeft(user.id), 0)
  const events = await auditActions(app, user.id)
  assert.equal(events.filter((e) => e.action === 'user.2fa-off').length, 1)
  assert.equal(events.filter((e) => e.action === 'user.recovery-codes').length, 2)
  assert.equal((await new PortalClient(app.url).signIn(email, password)).location, '/portal/', 'the password alone again')
})

test('enrolment: the password and a right code are needed; signed out, the pages lead to sign-in', async (t) => {
  const app = await startApp(t)
  const anonymous = new PortalClient(app.url)
  assert.equal((await anonymous.get('/portal/security')).location, '/portal/sign-in?next=%2Fportal%2Fsecurity')
  assert.equal((await anonymous.get('/portal/security/two-factor/setup')).location, '/portal/sign-in?next=%2Fportal%2Fsecurity%2Ftwo-factor%2Fsetup')
  assert.equal((await anonymous.post('/portal/security/two-factor/setup', {}, { csrf: false })).location, '/portal/sign-in')

  const { client, password, user } = await signedInClient(app)
  assert.equal((await client.get('/portal/security/two-factor/setup')).location, '/portal/security', 'nothing to show before set-up starts')
  assert.equal((await client.post('/portal/security/two-factor/setup', {}, { csrf: false, from: '/portal/security' })).status, 403)
  await client.post('/portal/security/two-factor/setup', {}, { from: '/portal/security' })
  const first = textareaOf((await client.get('/portal/security/two-factor/setup')).text, 'totp-secret')
  await client.post('/portal/security/two-factor/setup', {}, { from: '/portal/security' })
  const page = await client.get('/portal/security/two-factor/setup')
  assert.equal(textareaOf(page.text, 'totp-secret'), first, 'the same secret until it is turned on')
  const secret = first.replace(/ /g, '')

  const noPassword = await client.post('/portal/security/two-factor/enable', { 'totp-code': codeOf(app, secret), 'enable-password': 'wrong password here' })
  assert.equal(noPassword.status, 422)
  assert.match(noPassword.text, /id="enable-password-error" role="alert">That password is wrong/)
  const badCode = await client.post('/portal/security/two-factor/enable', { 'totp-code': wrongCodeOf(app, secret), 'enable-password': password })
  assert.equal(badCode.status, 422)
  assert.match(badCode.text, /id="totp-code-error" role="alert">That code is not right/)
  assert.equal((await app.store.portal.getUser(user.id))!.totpEnabledAt, null)
  const late = await client.post('/portal/security/two-factor/enable', { 'totp-code': codeOf(app, secret, -1), 'enable-password': password })
  assert.equal(late.status, 200, 'the code of the step before is still taken (drift)')
  assert.notEqual((await app.store.portal.getUser(user.id))!.totpEnabledAt, null)
})

test('a pending session is not extended by its visits: it ends 10 minutes after the password', async (t) => {
  const app = await startApp(t)
  const { email, password } = await twoFactorUser(app)
  const client = await pendingClient(app, email, password)
  app.clock.advance(9 * 60_000)
  assert.equal((await client.get('/portal/two-factor')).status, 200)
  app.clock.advance(2 * 60_000)
  assert.equal((await client.get('/portal/two-factor')).location, '/portal/sign-in')
})

test('the two-factor secret is kept sealed; one kept before sealing still works, and the rotation seals it', async (t) => {
  const app = await startApp(t)
  const { client, password, user } = await signedInClient(app)
  const { secret } = await enrol(app, client, password)
  const kept = (await app.store.portal.getUser(user.id))!.totpSecret!
  assert.match(kept, /^v1\.[A-Za-z0-9_-]+$/, 'the store holds a sealed value')
  assert.ok(!kept.includes(secret))
  // Bound to the user: another user's row would not open it.
  const keyring = resolveKeyring(app.config)
  assert.equal(keyring.open(kept, portalSecretContext(user.id)).toString('utf8'), secret)
  assert.throws(() => keyring.open(kept, portalSecretContext('usr_other')), SealError)

  // A user whose secret was written plain (before this version) signs in with it, and `encryption rotate` seals it.
  const legacy = await twoFactorUser(app)
  assert.equal((await app.store.portal.getUser(legacy.user.id))!.totpSecret, legacy.secret)
  app.clock.advance(STEP_MS)
  const before = await pendingClient(app, legacy.email, legacy.password)
  assert.equal((await before.post('/portal/two-factor', { code: codeOf(app, legacy.secret) }, { from: '/portal/two-factor' })).location, '/portal/')
  const done = await resealPortalSecrets(app.store.portal, keyring)
  assert.equal(done.resealed, 1, 'the plain one; the sealed one is under the active version already')
  assert.match((await app.store.portal.getUser(legacy.user.id))!.totpSecret!, /^v1\./)
  app.clock.advance(STEP_MS)
  const after = await pendingClient(app, legacy.email, legacy.password)
  assert.equal((await after.post('/portal/two-factor', { code: codeOf(app, legacy.secret) }, { from: '/portal/two-factor' })).location, '/portal/')
})
