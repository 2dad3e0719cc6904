/**
 * Sign-up and its emails under attack, through the real portal over HTTP, on SQLite and on
 * PostgreSQL (+ Redis): an address signed up first by someone else is never confirmed for
 * their password, nor does a second factor they set up survive; sign-ups never confirmed
 * go; a flood of sign-ups neither blocks a real user's sign-ins nor leaves rows for what it
 * was refused; resets and notices email an address once per window, whatever is sent.
 */
import { test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { startApp, testClock, type Running } from '../../support/helper.ts'
import { linkIn, mails, PortalClient, portalUser, waitForMail } from '../../support/portal-helper.ts'
import { createDatabase, redisEnv, skipUnless } from '../../support/services.ts'
import { messageTo, smtp } from '../../support/smtp.ts'
import { startLoad } from '../../support/load.ts'
import { codeAt, parseSecret, totpParams } from '../../../src/totp/otp.ts'
import { csrfToken, newSessionToken } from '../../../src/portal/web/session.ts'
import { newTotpSecret, storeRecoveryCodes } from '../../../src/services/users/codes.ts'
import { Passwords } from '../../../src/services/users/passwords.ts'

type Env = Record<string, string>
const ATTACKER = 'the attacker chose this one'
const OWNER = 'the owner chose this other one'
const tokenOf = (link: string) => new URL(link).searchParams.get('token')!
const pathOf = (link: string) => {
  const u = new URL(link)
  return `${u.pathname}${u.search}`
}
const postgres = async (t: TestContext): Promise<Env> => ({ DATABASE_URL: await createDatabase(t), ...(await redisEnv(t)) })
const PG = skipUnless('TEST_DATABASE_URL', 'TEST_REDIS_URL')

/** confirm opens a confirmation link and posts its form with `password`. */
async function confirm(client: PortalClient, link: string, password: string) {
  await client.get(pathOf(link))
  return client.post('/portal/verify-email', { token: tokenOf(link), password })
}

async function signInStatus(app: Running, email: string, password: string): Promise<number> {
  return (await new PortalClient(app.url).post('/portal/sign-in', { email, password }, { from: '/portal/sign-in' })).status
}

// Finding 1: account takeover by pre-registration.

async function preRegistration(t: TestContext, env: Env): Promise<void> {
  const app = await startApp(t, env)
  const email = 'victim@example.com'
  const attacker = new PortalClient(app.url)
  const victim = new PortalClient(app.url)
  assert.equal((await attacker.post('/portal/sign-up', { email, password: ATTACKER, account: 'Trap' }, { from: '/portal/sign-up' })).status, 200)
  const first = linkIn(await waitForMail(app, email))
  // The victim signs up within the mail window: the page is the same, no second email goes, the pending password is theirs now.
  const again = await victim.post('/portal/sign-up', { email, password: OWNER, account: 'Mine' }, { from: '/portal/sign-up' })
  assert.equal(again.status, 200)
  assert.match(again.text, /We have sent a link to victim@example\.com/)
  assert.equal(await signInStatus(app, email, ATTACKER), 401, "the attacker's password no longer opens the pending sign-up")

  // The attacker's password cannot confirm, even with the link (which they do not have anyway).
  assert.equal((await confirm(new PortalClient(app.url), first, ATTACKER)).status, 422)
  // The victim confirms with the link they got (sent by the attacker's sign-up) and their own password.
  const confirmed = await confirm(victim, first, OWNER)
  assert.equal(confirmed.status, 200, 'the answer is the sign-in form')
  assert.match(confirmed.text, /Your email address is confirmed\. Sign in to continue\./)
  assert.match(confirmed.text, /<form method="post" action="\/portal\/sign-in">/)
  assert.equal(await signInStatus(app, email, ATTACKER), 401, "the attacker's password does not sign in")
  await victim.signIn(email, OWNER)
  assert.equal(await signInStatus(app, email, OWNER), 303)

  // The other order: the attacker signs up again after the owner, and the newest link (to the owner's inbox) is theirs.
  const other = 'second@example.com'
  const owner2 = new PortalClient(app.url)
  await owner2.post('/portal/sign-up', { email: other, password: OWNER }, { from: '/portal/sign-up' })
  await waitForMail(app, other)
  app.clock.advance(app.config.portalMailWindowSeconds * 1000)
  await attacker.post('/portal/sign-up', { email: other, password: ATTACKER }, { from: '/portal/sign-up' })
  const newest = linkIn(await waitForMail(app, other, 2))
  const refused = await confirm(owner2, newest, OWNER)
  assert.equal(refused.status, 422, "the owner's password is not the pending one: not confirmed")
  assert.match(refused.text, /not the password of the last sign-up/)
  assert.equal((await app.store.portal.findUserByEmail(other))?.emailVerifiedAt, null)
  // Signing up again makes it theirs; the live link then confirms it.
  await owner2.post('/portal/sign-up', { email: other, password: OWNER }, { from: '/portal/sign-up' })
  assert.equal((await confirm(owner2, newest, OWNER)).status, 200)
  assert.equal(await signInStatus(app, other, ATTACKER), 401)
  assert.equal(await signInStatus(app, other, OWNER), 303)
}

test("pre-registration: a sign-up for an unconfirmed address replaces its password, and confirming asks for it: the owner's password signs in, the attacker's does not", async (t) => {
  await preRegistration(t, {})
})

test('pre-registration, on PostgreSQL with Redis', { skip: PG }, async (t) => {
  await preRegistration(t, await postgres(t))
})

/** unconfirmedUser: a never-confirmed user with a live session, as a store from before this rule may hold. */
async function unconfirmedUser(app: Running, email: string, password: string) {
  const made = await portalUser(app, { email, password, accountId: null })
  await app.store.portal.updateUser(made.user.id, { emailVerifiedAt: null }, null)
  const session = newSessionToken()
  await app.store.portal.createSession({
    idHash: session.idHash,
    userId: made.user.id,
    expiresAt: new Date(app.clock.now() + 3_600_000).toISOString(),
    twoFactorPending: false,
    ip: null,
    userAgent: null,
  })
  const post = (path: string, fields: Record<string, string>) =>
    fetch(`${app.url}${path}`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: `tessera_session=${session.token}`, origin: app.url },
      body: new URLSearchParams({ _csrf: csrfToken(app.pepper, session.idHash), ...fields }).toString(),
    })
  return { ...made, session, post }
}

async function secondFactorBeforeConfirmation(t: TestContext, env: Env): Promise<void> {
  const app = await startApp(t, env)
  const trap = await unconfirmedUser(app, 'unconfirmed@example.com', ATTACKER)
  const setup = await trap.post('/portal/security/two-factor/setup', {})
  assert.equal(setup.status, 303)
  assert.equal(setup.headers.get('location'), '/portal/security?notice=unconfirmed')
  assert.equal((await app.store.portal.getUser(trap.user.id))?.totpSecret, null, 'no secret made')
  // A secret already there (set up another way) cannot be turned on either, with the right password and code.
  const secret = newTotpSecret()
  await app.store.portal.updateUser(trap.user.id, { totpSecret: secret }, null)
  const code = codeAt(totpParams(parseSecret(secret, 0)!), app.clock.now())
  const enable = await trap.post('/portal/security/two-factor/enable', { 'totp-code': code, 'enable-password': ATTACKER })
  assert.equal(enable.status, 303)
  assert.equal(enable.headers.get('location'), '/portal/security?notice=unconfirmed')
  assert.equal((await app.store.portal.getUser(trap.user.id))?.totpEnabledAt, null, 'two-factor stays off')
}

test('two-factor sign-in cannot be set up or turned on before the address is confirmed', async (t) => {
  await secondFactorBeforeConfirmation(t, {})
})

test('two-factor before confirmation, on PostgreSQL with Redis', { skip: PG }, async (t) => {
  await secondFactorBeforeConfirmation(t, await postgres(t))
})

async function resetOfNeverConfirmed(t: TestContext, env: Env): Promise<void> {
  const app = await startApp(t, env)
  const email = 'never.confirmed@example.com'
  // What an attacker could leave before this rule: an unconfirmed account with their second factor, recovery codes and a session.
  const trap = await unconfirmedUser(app, email, ATTACKER)
  await app.store.portal.updateUser(trap.user.id, { totpSecret: newTotpSecret(), totpEnabledAt: new Date(app.clock.now()).toISOString() }, null)
  await storeRecoveryCodes({ store: app.store, pepper: app.pepper } as Parameters<typeof storeRecoveryCodes>[0], trap.user.id)
  assert.equal(await app.store.portal.recoveryCodesLeft(trap.user.id), 10)

  const owner = new PortalClient(app.url)
  await owner.post('/portal/reset', { email }, { from: '/portal/reset' })
  const link = linkIn(await waitForMail(app, email))
  await owner.get(pathOf(link))
  assert.equal((await owner.post('/portal/reset/confirm', { token: tokenOf(link), password: OWNER })).status, 303)

  const user = (await app.store.portal.getUser(trap.user.id))!
  assert.ok(user.emailVerifiedAt, 'the link proved the address')
  assert.deepEqual([user.totpSecret, user.totpEnabledAt], [null, null], 'the second factor set up before is gone')
  assert.equal(await app.store.portal.recoveryCodesLeft(trap.user.id), 0, 'and its recovery codes')
  assert.equal(await app.store.portal.findSession(trap.session.idHash, new Date(app.clock.now()).toISOString()), null, 'and its sessions')
  // The owner signs in with their password alone: no second factor of someone else's is asked for.
  const signedIn = await owner.signIn(email, OWNER)
  assert.equal(signedIn.location, '/portal/')
  assert.equal(await signInStatus(app, email, ATTACKER), 401)
}

test('a password reset of a never-confirmed account ends its second factor, recovery codes and sessions', async (t) => {
  await resetOfNeverConfirmed(t, {})
})

test('reset of a never-confirmed account, on PostgreSQL with Redis', { skip: PG }, async (t) => {
  await resetOfNeverConfirmed(t, await postgres(t))
})

async function purge(t: TestContext, env: Env): Promise<void> {
  const clock = testClock()
  const app = await startApp(t, { ...env, SIGNUP_CONFIRM_HOURS: '1' }, clock)
  const attacker = new PortalClient(app.url)
  await attacker.post('/portal/sign-up', { email: 'trap@example.com', password: ATTACKER, account: 'Trap' }, { from: '/portal/sign-up' })
  await waitForMail(app, 'trap@example.com')
  const trap = (await app.store.portal.findUserByEmail('trap@example.com'))!
  const [membership] = await app.store.portal.membershipsOf(trap.id)
  assert.ok(membership, 'the sign-up made an account')
  const confirmed = await portalUser(app, { email: 'kept@example.com', accountId: null })

  // Past the link's lifetime, the upkeep (run by every node at start, then hourly) deletes the user and its account.
  clock.advance(3_600_000 + 1000)
  await startApp(t, { ...env, SIGNUP_CONFIRM_HOURS: '1', ...(env.DATABASE_URL ? {} : { DATA_DIR: app.dataDir }) }, clock)
  for (let i = 0; i < 100 && (await app.store.portal.getUser(trap.id)) !== null; i++) await new Promise((resolve) => setTimeout(resolve, 20))
  assert.equal(await app.store.portal.getUser(trap.id), null, 'the unconfirmed user is gone')
  assert.equal(await app.store.access.getAccount(membership.accountId), null, 'with the account made for it')
  assert.notEqual(await app.store.portal.getUser(confirmed.user.id), null, 'a confirmed user stays')
  // The address is free: its owner signs up afresh and confirms with their own password.
  const owner = new PortalClient(app.url)
  await owner.post('/portal/sign-up', { email: 'trap@example.com', password: OWNER }, { from: '/portal/sign-up' })
  assert.equal((await confirm(owner, linkIn(await waitForMail(app, 'trap@example.com', 2)), OWNER)).status, 200)
  assert.equal(await signInStatus(app, 'trap@example.com', OWNER), 303)
}

test('unconfirmed sign-ups and their accounts are deleted after SIGNUP_CONFIRM_HOURS by the upkeep', async (t) => {
  await purge(t, {})
})

test('unconfirmed sign-ups are deleted, on PostgreSQL with Redis', { skip: PG }, async (t) => {
  await purge(t, await postgres(t))
})

// Finding 2: sign-up floods.

/** rows: how many users and accounts the store holds. */
async function rows(app: Running): Promise<{ users: number; accounts: number }> {
  let users = 0
  let cursor: string | undefined
  do {
    const page = await app.store.portal.listUsers({ limit: 500, ...(cursor === undefined ? {} : { cursor }) })
    users += page.items.length
    cursor = page.next ?? undefined
  } while (cursor !== undefined)
  return { users, accounts: await app.store.access.countAccounts() }
}

const p99 = (values: readonly number[]) => [...values].sort((a, b) => a - b)[Math.ceil(values.length * 0.99) - 1]!
const median = (values: readonly number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!
/**
 * A sign-in's post on an idle two-core machine while one other password is hashed beside it, as the flood's sign-ups are (a hash is
 * 0.18 s of it): 0.18-0.25 s measured.
 */
const QUIET_SIGN_IN_MS = 250

async function flood(t: TestContext, env: Env): Promise<void> {
  // Sources spread as a botnet's would (TRUST_PROXY: the test names each request's address), so that the total limit is the one met.
  const app = await startApp(t, { ...env, TRUST_PROXY: 'true', SIGNUP_MAX: '40', LOG_LEVEL: 'warn' })
  // The real user's password is hashed as the portal's are (not the cheap test setting): sign-ins cost what they cost.
  const password = 'the real user signs in'
  const user = await portalUser(app, { email: 'real.user@example.com' })
  await app.store.portal.updateUser(user.user.id, { passwordHash: await new Passwords().hash(password) }, null)
  const before = await rows(app)

  const form = new PortalClient(app.url)
  await form.get('/portal/sign-up')
  /** One sign-in as a browser makes it (the form, then the post); the post's time and status. */
  const signIn = async () => {
    const client = new PortalClient(app.url)
    await client.get('/portal/sign-in')
    const started = performance.now()
    const answer = await client.post('/portal/sign-in', { email: user.email, password })
    return { status: answer.status, ms: performance.now() - started }
  }
  // A baseline: the same sign-in with no flood but one other hash beside it, as a sign-up's under the flood (the machine's own speed and
  // the CPU left to it, other tests and other work included: a machine with one core free takes twice as long), before and after the flood.
  const passwords = new Passwords()
  const besideAHash = async () => (await Promise.all([signIn(), passwords.hash('another password hashed beside it')]))[0].ms
  const baseline: number[] = []
  for (let i = 0; i < 5; i++) baseline.push(await besideAHash())
  const signIns: { status: number; ms: number }[] = []
  let flooding = true
  const signInLoop = async () => {
    while (flooding) signIns.push(await signIn())
  }
  // The real user signs in from before the flood starts to its end: through the sign-ups that are hashed, then the refused ones.
  const signingIn = signInLoop()
  // 60 sign-ups at a time, from a worker thread of the lowest priority (the flood's own work takes neither the app's event loop nor its CPU), each from its own /64.
  const load = await startLoad({
    url: app.url,
    path: '/portal/sign-up',
    connections: 60,
    numbered: true,
    lowPriority: true,
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: form.cookieHeader, origin: app.url, 'x-forwarded-for': '2001:db8:{n}::1' },
    body: new URLSearchParams({ _csrf: form.csrf(), email: 'flood-{n}@example.com', password: 'a flood of sign-ups', account: 'Flood {n}' })
      .toString()
      .replaceAll('%7Bn%7D', '{n}'),
  })
  await new Promise((resolve) => setTimeout(resolve, 4000))
  flooding = false
  await signingIn
  const counts = await load.stop()
  // And after it: the machine's speed may drift while the test runs (other tests, other work).
  for (let i = 0; i < 5; i++) baseline.push(await besideAHash())
  const statuses = Object.entries(counts).flatMap(([status, n]) => Array<number>(n).fill(Number(status)))

  const ms = signIns.map((s) => s.ms)
  const summary = `${signIns.length} sign-ins, p99 ${p99(ms).toFixed(0)} ms, max ${Math.max(...ms).toFixed(0)} ms; ${statuses.length} sign-ups: ${[...new Set(statuses)].map((s) => `${s}×${statuses.filter((x) => x === s).length}`).join(', ')}`
  t.diagnostic(`${summary}; without the flood, beside one other hash: ${baseline.map((x) => x.toFixed(0)).join(', ')} ms`)
  t.diagnostic(`sign-ins under the flood, in order (ms): ${ms.map((x) => x.toFixed(0)).join(' ')}`)
  assert.ok(signIns.length >= 5, summary)
  assert.deepEqual([...new Set(signIns.map((s) => s.status))], [303], `every sign-in succeeded: ${summary}`)
  // Under 1 s on a machine as fast as an idle two-core one (where this sign-in takes 0.18-0.25 s
  // beside another hash); a machine slowed by other work, or with fewer cores free (the baseline,
  // measured before and after the flood in this run), gets the same bound scaled by how much slower
  // it is. The code before this change gave 503s and 27 s.
  const budget = 1000 * Math.max(1, median(baseline) / QUIET_SIGN_IN_MS)
  assert.ok(p99(ms) < budget, `${summary}; the bound ${budget.toFixed(0)} ms`)
  const accepted = statuses.filter((s) => s === 200).length
  assert.ok(
    statuses.every((s) => s === 200 || s === 429 || s === 503),
    summary,
  )
  assert.ok(accepted <= 40 && statuses.includes(429), `the total limit held: ${summary}`)
  const after = await rows(app)
  assert.deepEqual(after, { users: before.users + accepted, accounts: before.accounts + accepted }, `refused sign-ups left no user and no account: ${summary}`)
}

test('a flood of sign-ups (60 at a time for 4 s): every sign-in of a real user meanwhile succeeds, p99 under 1 s (scaled by how much slower than an idle machine the same sign-in is without the flood, in this run); the refused ones leave no row', async (t) => {
  await flood(t, {})
})

test('a flood of sign-ups, on PostgreSQL with Redis', { skip: PG }, async (t) => {
  await flood(t, await postgres(t))
})

async function perSource(t: TestContext, env: Env): Promise<void> {
  const app = await startApp(t, { ...env, TRUST_PROXY: 'true', SIGNUP_IP_MAX: '3' })
  const before = await rows(app)
  const form = new PortalClient(app.url)
  await form.get('/portal/sign-up')
  const csrf = form.csrf()
  const signUp = (ip: string, n: number) =>
    fetch(`${app.url}/portal/sign-up`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: form.cookieHeader, origin: app.url, 'x-forwarded-for': ip },
      body: new URLSearchParams({ _csrf: csrf, email: `source-${n}@example.com`, password: 'one source, many sign-ups' }).toString(),
    })
  // Twelve at once from one /64 (different addresses in it): three go through.
  const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => signUp(`2001:db8:1:2::${(i + 1).toString(16)}`, i)))
  const statuses = answers.map((r) => r.status)
  assert.equal(statuses.filter((s) => s === 200).length, 3, statuses.join(','))
  assert.equal(statuses.filter((s) => s === 429).length, 9, statuses.join(','))
  const refused = answers.find((r) => r.status === 429)!
  assert.ok(Number(refused.headers.get('retry-after')) > 0 && Number(refused.headers.get('retry-after')) <= 3600)
  assert.match(await refused.text(), /Too many sign-ups from your network/)
  // Another /64 and an IPv4 address have their own allowance.
  assert.equal((await signUp('2001:db8:1:3::1', 100)).status, 200)
  assert.equal((await signUp('192.0.2.7', 101)).status, 200)
  assert.deepEqual(await rows(app), { users: before.users + 5, accounts: before.accounts + 5 }, 'the refused ones left no row')
  for (let i = 0; i < 12; i++) {
    if (statuses[i] === 429) assert.equal(await app.store.portal.findUserByEmail(`source-${i}@example.com`), null)
  }
}

test('sign-ups per source address (IPv6 by its /64): past SIGNUP_IP_MAX, 429 with Retry-After and nothing written', async (t) => {
  await perSource(t, {})
})

test('sign-ups per source address, on PostgreSQL with Redis', { skip: PG }, async (t) => {
  await perSource(t, await postgres(t))
})

// Finding 3: reset and notice emails.

async function mailOncePerWindow(t: TestContext, env: Env): Promise<void> {
  const mail = await smtp(t)
  const app = await startApp(t, { ...env, SMTP_URL: mail.url, SIGNUP_IP_MAX: '0', PORTAL_MAIL_IP_MAX: '1000' })
  const user = await portalUser(app, { email: 'inbox@example.com' })
  const client = new PortalClient(app.url)
  await client.get('/portal/reset')
  const csrf = client.csrf()
  const reset = (email: string) =>
    fetch(`${app.url}/portal/reset`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: client.cookieHeader, origin: app.url },
      body: new URLSearchParams({ _csrf: csrf, email }).toString(),
    }).then(async (r) => ({ status: r.status, text: await r.text() }))

  const answers = await Promise.all(Array.from({ length: 200 }, () => reset(user.email)))
  assert.deepEqual([...new Set(answers.map((a) => a.status))], [200])
  assert.equal(new Set(answers.map((a) => a.text)).size, 1, 'the same page for every one')
  const unknown = await reset('nobody@example.com')
  assert.equal(unknown.text.replace('nobody@example.com', user.email), answers[0]!.text, 'and for an unknown address')
  await messageTo(mail.received, user.email)
  await new Promise((resolve) => setTimeout(resolve, 1000))
  const resets = () => mail.received.filter((m) => m.to.includes(user.email) && /Subject: Reset your Tessera password/.test(m.raw)).length
  assert.equal(resets(), 1, 'exactly one email for 200 requests')
  // After the window, one more.
  app.clock.advance(app.config.portalMailWindowSeconds * 1000)
  await Promise.all(Array.from({ length: 20 }, () => reset(user.email)))
  await messageTo(mail.received, user.email, 2)
  await new Promise((resolve) => setTimeout(resolve, 500))
  assert.equal(resets(), 2)

  // Sign-ups for the taken address: one "you already have an account", the same page as a new address's.
  const signUps = await Promise.all(
    Array.from({ length: 12 }, () => client.post('/portal/sign-up', { email: user.email, password: 'whoever tries this' }, { from: '/portal/sign-up' })),
  )
  assert.deepEqual([...new Set(signUps.map((a) => a.status))], [200])
  await new Promise((resolve) => setTimeout(resolve, 1000))
  assert.equal(mail.received.filter((m) => m.to.includes(user.email) && /Subject: You already have a Tessera account/.test(m.raw)).length, 1)
}

test('200 parallel resets for one address send one email (a real SMTP server), with the same page for all; 12 sign-ups for a taken address, one notice', async (t) => {
  await mailOncePerWindow(t, {})
})

test('one reset email per window, on PostgreSQL with Redis', { skip: PG }, async (t) => {
  await mailOncePerWindow(t, await postgres(t))
})

test('resets from one source: past PORTAL_MAIL_IP_MAX an hour no email goes, whatever the addresses, and the page is the same', async (t) => {
  const app = await startApp(t, { PORTAL_MAIL_IP_MAX: '5' })
  const users = await Promise.all(Array.from({ length: 12 }, (_, i) => portalUser(app, { email: `spray-${i}@example.com` })))
  const client = new PortalClient(app.url)
  const pages = new Set<string>()
  for (const u of users) {
    const answer = await client.post('/portal/reset', { email: u.email }, { from: '/portal/reset' })
    assert.equal(answer.status, 200)
    pages.add(answer.text.replace(u.email, 'X'))
  }
  assert.equal(pages.size, 1)
  await waitForMail(app, users[4]!.email)
  await new Promise((resolve) => setTimeout(resolve, 300))
  assert.equal(users.filter((u) => mails(app, u.email).length > 0).length, 5)
})
