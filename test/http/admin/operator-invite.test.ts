/**
 * The first portal operator (issue 41): under SIGNUP_MODE=closed, `operator invite` (and the
 * admin API's inviteOperator) emails a single-use link through real SMTP; the link's page makes
 * the sign-in and grants the flag, on acceptance by the invited address only. Attacked end to
 * end: a reissued invitation kills the earlier link, parallel accepts make one operator, a
 * sign-up made first by someone else takes nothing over, another user's click grants nothing,
 * an expired link is dead; the audit trail holds each step, and no log holds a link.
 */
import { test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { startApp, tempDir, testClock, type Running } from '../../support/helper.ts'
import { admin, startAdmin } from '../../support/admin-helper.ts'
import { createDatabase, skipUnless, type StoreEnv } from '../../support/services.ts'
import { messageTo, portalLinkOf, smtp, type Received } from '../../support/smtp.ts'
import { codeOf, PortalClient, portalUser } from '../../support/portal-helper.ts'
import { newTotpSecret } from '../../../src/services/users/codes.ts'

const stores: [string, StoreEnv, false | string][] = [
  ['sqlite', async () => ({}), false],
  ['postgres', async (t) => ({ DATABASE_URL: await createDatabase(t) }), skipUnless('TEST_DATABASE_URL')],
]

const PASSWORD = 'a long enough passphrase'

interface Node {
  readonly app: Running
  readonly mail: Awaited<ReturnType<typeof smtp>>
  /** The CLI on this node's store, with its settings. */
  cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }>
}

async function node(t: TestContext, storeEnv: StoreEnv, env: Record<string, string> = {}, clock = testClock()): Promise<Node> {
  const mail = await smtp(t)
  const dataDir = tempDir(t)
  const settings = { SIGNUP_MODE: 'closed', SMTP_URL: mail.url, ...(await storeEnv(t)), ...env }
  const app = await startApp(t, { ...settings, DATA_DIR: dataDir }, clock)
  return { app, mail, cli: (args) => admin(dataDir, args, settings) }
}

/** pathOf: the path and query of the `n`th portal link mailed to `email`. */
async function pathOf(received: readonly Received[], email: string, n = 1): Promise<string> {
  const url = new URL(portalLinkOf(await messageTo(received, email, n)))
  assert.equal(url.pathname, '/portal/invitations/accept')
  assert.equal(url.searchParams.get('account'), null, 'an operator invitation names no account')
  return url.pathname + url.search
}

const tokenOf = (path: string) => new URL(path, 'http://x').searchParams.get('token') ?? ''

const events = async (app: Running, action: string) => (await app.store.audit.list({ action, limit: 50 })).items

/**
 * accept posts the accept form of `path` as a signed-out visitor, with a password: the CSRF token of the page `from`
 * (the link's own, else another signed-out form's: the sign-in page), or of the page last opened (null).
 */
const accept = (client: PortalClient, path: string, from: string | null = path) =>
  client.post('/portal/invitations/accept', { token: tokenOf(path), password: PASSWORD }, from === null ? {} : { from })

for (const [name, storeEnv, skip] of stores) {
  test(`${name}: operator invite under closed sign-up: emailed, reissue kills the first link, nothing granted before acceptance, the link makes an operator once`, {
    skip,
  }, async (t) => {
    const { app, mail, cli } = await node(t, storeEnv)
    const before = await cli(['operator', 'grant', '--email', 'olga@example.com'])
    assert.equal(before.code, 1)
    assert.match(before.stderr, /no portal user olga@example\.com/, 'the dead end this command answers')

    const first = await cli(['operator', 'invite', '--email', 'Olga@Example.com'])
    assert.equal(first.code, 0, first.stderr)
    assert.match(first.stdout, /^Operator invitation emailed to olga@example\.com \(works once, until \d{4}-/)
    const firstPath = await pathOf(mail.received, 'olga@example.com')
    assert.doesNotMatch(first.stdout + first.stderr, new RegExp(tokenOf(firstPath)), 'the CLI does not print an emailed link')
    const message = await messageTo(mail.received, 'olga@example.com')
    assert.match(message.raw, /Subject: You are invited to operate Tessera/)

    const second = await cli(['operator', 'invite', '--email', 'olga@example.com', '--json'])
    assert.equal(second.code, 0, second.stderr)
    assert.deepEqual(Object.keys(JSON.parse(second.stdout)).sort(), ['email', 'expiresAt', 'sent'])
    const path = await pathOf(mail.received, 'olga@example.com', 2)
    assert.notEqual(path, firstPath)

    const visitor = new PortalClient(app.url)
    const dead = await visitor.get(firstPath)
    assert.equal(dead.status, 400, 'the reissued invitation voided the first link')
    assert.match(dead.text, /already used, has expired, or was replaced/)
    assert.equal((await accept(new PortalClient(app.url), firstPath, '/portal/sign-in')).status, 400, 'and accepting it makes nothing')

    assert.equal(await app.store.portal.findUserByEmail('olga@example.com'), null, 'no user before acceptance')
    const shown = await visitor.get(path)
    assert.equal(shown.status, 200)
    assert.match(shown.text, /invited to be an <strong>operator<\/strong> of this Tessera node/)
    assert.match(shown.text, /<button type="submit">Create my sign-in and become an operator<\/button>/)
    assert.equal((await visitor.post('/portal/invitations/accept', { token: tokenOf(path), password: 'short' })).status, 422, 'the password rule holds')
    assert.equal(await app.store.portal.findUserByEmail('olga@example.com'), null, 'a refused password uses nothing up')

    const accepted = await accept(visitor, path)
    assert.equal(accepted.status, 303, accepted.text)
    assert.equal(accepted.location, '/portal/operator')
    const olga = await app.store.portal.findUserByEmail('olga@example.com')
    assert.ok(olga !== null)
    assert.equal(olga.operator, true)
    assert.equal(olga.status, 'active')
    assert.ok(olga.emailVerifiedAt !== null, 'the link proved the address')
    assert.equal((await visitor.get('/portal/operator')).status, 200, 'signed in, as an operator')
    assert.equal((await new PortalClient(app.url).get(path)).status, 400, 'used: the link is dead')
    const signIn = await new PortalClient(app.url).post('/portal/sign-in', { email: 'olga@example.com', password: PASSWORD }, { from: '/portal/sign-in' })
    assert.equal(signIn.status, 303, 'she signs in with the password she chose')

    const listed = await cli(['operator', 'list', '--json'])
    assert.deepEqual(
      (JSON.parse(listed.stdout) as { email: string }[]).map((u) => u.email),
      ['olga@example.com'],
    )
    const invites = await events(app, 'operator.invite')
    assert.deepEqual(
      invites.map((e) => [e.actor, e.detail]),
      [
        ['cli', { email: 'olga@example.com' }],
        ['cli', { email: 'olga@example.com' }],
      ],
    )
    const [grant, ...more] = await events(app, 'user.operator-grant')
    assert.equal(more.length, 0)
    assert.equal(grant?.actor, `portal-user:${olga.id}`)
    assert.deepEqual(grant?.detail, { email: 'olga@example.com', via: 'invitation', signUp: true })
    const again = await cli(['operator', 'invite', '--email', 'olga@example.com'])
    assert.equal(again.code, 1)
    assert.match(again.stderr, /olga@example\.com is an operator already/)
    for (const p of [path, firstPath]) assert.ok(!app.logs.some((line) => line.includes(tokenOf(p))), 'no log holds a link')
  })

  test(`${name}: operator invitation under attack: a sign-up made first takes nothing over, parallel accepts make one operator, another user's click grants nothing, an expired link is dead`, {
    skip,
  }, async (t) => {
    const clock = testClock()
    const { app, mail, cli } = await node(t, storeEnv, { SIGNUP_MODE: 'open' }, clock)
    // The attacker signs the address up first, with their password; the confirmation goes to the victim's mailbox.
    const attacker = new PortalClient(app.url)
    await attacker.post('/portal/sign-up', { email: 'vic@example.com', password: 'the attacker password', account: 'Trap' }, { from: '/portal/sign-up' })
    await messageTo(mail.received, 'vic@example.com')
    assert.equal((await cli(['operator', 'invite', '--email', 'vic@example.com'])).code, 0)
    const path = await pathOf(mail.received, 'vic@example.com', 2)
    const signInAs = (password: string) =>
      new PortalClient(app.url).post('/portal/sign-in', { email: 'vic@example.com', password }, { from: '/portal/sign-in' })
    assert.notEqual((await signInAs('the attacker password')).status, 303, 'the unconfirmed sign-up does not sign in')
    assert.equal((await app.store.portal.findUserByEmail('vic@example.com'))?.operator, false, 'nothing granted before acceptance')

    // The victim opens the link: a password to choose (the sign-up made first is no sign-in), and six accepts at once make one operator.
    const victim = new PortalClient(app.url)
    assert.match((await victim.get(path)).text, /Create my sign-in and become an operator/)
    const answers = await Promise.all(Array.from({ length: 6 }, () => accept(victim, path, null)))
    assert.deepEqual(answers.map((a) => a.status).sort(), [303, 400, 400, 400, 400, 400])
    const vic = await app.store.portal.findUserByEmail('vic@example.com')
    assert.equal(vic?.operator, true)
    assert.ok(vic.emailVerifiedAt !== null)
    assert.equal((await signInAs('the attacker password')).status, 401, "the attacker's password is gone")
    assert.equal((await signInAs(PASSWORD)).status, 303)
    assert.equal((await events(app, 'user.operator-grant')).length, 1)
    assert.deepEqual((await events(app, 'user.operator-grant'))[0]?.detail, { email: 'vic@example.com', via: 'invitation', confirmed: true })

    // An existing user: the link asks them to sign in; someone else's click (signed in) grants nothing; theirs does.
    const bob = await portalUser(app, { email: 'bob@example.com' })
    const { email: carolEmail, password: carolPassword } = await portalUser(app, { email: 'carol@example.com' })
    assert.equal((await cli(['operator', 'invite', '--email', bob.email])).code, 0)
    const bobPath = await pathOf(mail.received, bob.email)
    const signedOut = await new PortalClient(app.url).get(bobPath)
    assert.match(signedOut.text, /Sign in to accept<\/a> as bob@example\.com/)
    assert.doesNotMatch(signedOut.text, /new-password/, 'no form that would replace his password')
    assert.equal((await accept(new PortalClient(app.url), bobPath, '/portal/sign-in')).status, 409, 'signed out, a password does not take his sign-in')
    const carol = new PortalClient(app.url)
    await carol.signIn(carolEmail, carolPassword)
    await carol.get(bobPath)
    assert.equal((await carol.post('/portal/invitations/accept', { token: tokenOf(bobPath) })).status, 403)
    assert.equal((await app.store.portal.findUserByEmail(carolEmail))?.operator, false)
    const bobClient = new PortalClient(app.url)
    await bobClient.signIn(bob.email, bob.password)
    assert.match((await bobClient.get(bobPath)).text, /<button type="submit">Accept and become an operator<\/button>/)
    const joined = await bobClient.post('/portal/invitations/accept', { token: tokenOf(bobPath) })
    assert.equal(joined.status, 303)
    assert.equal(joined.location, '/portal/operator')
    assert.equal((await app.store.portal.findUserByEmail(bob.email))?.operator, true)

    // Expired: a week and a minute later the link is dead, and accepting it makes nothing.
    assert.equal((await cli(['operator', 'invite', '--email', 'late@example.com'])).code, 0)
    const late = await pathOf(mail.received, 'late@example.com')
    const opened = new PortalClient(app.url)
    assert.equal((await opened.get(late)).status, 200)
    clock.advance(7 * 24 * 3_600_000 + 60_000)
    assert.equal((await new PortalClient(app.url).get(late)).status, 400)
    assert.equal((await accept(opened, late, null)).status, 400, 'the form opened in time is dead too')
    assert.equal(await app.store.portal.findUserByEmail('late@example.com'), null)

    // Refused at once: not an address, a disabled user.
    const bad = await cli(['operator', 'invite', '--email', 'not an address'])
    assert.equal(bad.code, 1)
    assert.match(bad.stderr, /email must be an email address/)
    assert.equal((await cli(['user', 'disable', '--email', carolEmail])).code, 0)
    assert.match((await cli(['operator', 'invite', '--email', carolEmail])).stderr, /carol@example\.com is disabled/)
  })
}

test('an invited user with two-factor sign-in accepts only once past the second factor: the password alone grants nothing', async (t) => {
  const { app, mail, cli } = await node(t, async () => ({}))
  const dee = await portalUser(app, { email: 'dee@example.com' })
  const secret = newTotpSecret()
  await app.store.portal.updateUser(dee.user.id, { totpSecret: secret, totpEnabledAt: new Date(app.clock.now()).toISOString() }, null)
  assert.equal((await cli(['operator', 'invite', '--email', dee.email])).code, 0)
  const path = await pathOf(mail.received, dee.email)
  const client = new PortalClient(app.url)
  const signIn = await client.post('/portal/sign-in', { email: dee.email, password: dee.password, next: path }, { from: '/portal/sign-in' })
  assert.match(signIn.location ?? '', /^\/portal\/two-factor/, 'the password alone leads to the second step')
  const shown = await client.get(path)
  assert.match(shown.text, /Sign in to accept/, 'half signed in is not signed in')
  assert.equal((await client.post('/portal/invitations/accept', { token: tokenOf(path), password: PASSWORD }, { from: '/portal/sign-in' })).status, 409)
  assert.equal((await app.store.portal.findUserByEmail(dee.email))?.operator, false)
  const done = await client.post('/portal/two-factor', { code: codeOf(app, secret) }, { from: '/portal/two-factor' })
  assert.equal(done.status, 303, done.text.slice(0, 300))
  assert.match((await client.get(path)).text, /Accept and become an operator/)
  assert.equal((await client.post('/portal/invitations/accept', { token: tokenOf(path) })).status, 303)
  assert.equal((await app.store.portal.findUserByEmail(dee.email))?.operator, true)
})

test('operator invite --print-link: the link on standard output and no email; it works as the emailed one', async (t) => {
  const { app, mail, cli } = await node(t, async () => ({}))
  const printed = await cli(['operator', 'invite', '--email', 'pat@example.com', '--print-link'])
  assert.equal(printed.code, 0, printed.stderr)
  const link = /Link \(a secret: give it to pat@example\.com yourself, over a channel you trust\): (\S+)/.exec(printed.stdout)?.[1]
  assert.ok(link, printed.stdout)
  await new Promise((resolve) => setTimeout(resolve, 200))
  assert.equal(mail.received.length, 0, 'no email')
  const url = new URL(link)
  const accepted = await accept(new PortalClient(app.url), url.pathname + url.search)
  assert.equal(accepted.status, 303)
  assert.equal((await app.store.portal.findUserByEmail('pat@example.com'))?.operator, true)
})

test('the admin API invites an operator (write token), emailed by SMTP; refuses a read token, a bad address, an operator; 503 when SMTP fails', async (t) => {
  const mail = await smtp(t)
  const a = await startAdmin(t, { SIGNUP_MODE: 'closed', SMTP_URL: mail.url })
  const call = (token: string, body: unknown) =>
    fetch(`${a.url}/admin/v1/operator-invitations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    })
  const made = await call(a.write.secret, { email: 'Ann@Example.com' })
  assert.equal(made.status, 201)
  const body = (await made.json()) as { email: string; expiresAt: string }
  assert.equal(body.email, 'ann@example.com')
  assert.ok(Date.parse(body.expiresAt) > Date.now() + 6 * 24 * 3_600_000)
  assert.doesNotMatch(JSON.stringify(body), /token|link/, 'the link is not in the answer')
  const path = await pathOf(mail.received, 'ann@example.com')
  const [event] = (await a.pub.store.audit.list({ action: 'operator.invite', limit: 5 })).items
  assert.equal(event?.actor, `admin-token:${a.write.id}`)

  assert.equal((await call(a.read.secret, { email: 'x@example.com' })).status, 403)
  const bad = await call(a.write.secret, { email: 'not an address' })
  assert.equal(bad.status, 400)
  assert.match(JSON.stringify(await bad.json()), /FIELD_INVALID.*email/)
  assert.equal((await call(a.write.secret, { email: 'x@example.com', operator: true })).status, 400, 'unknown fields are refused')
  for (const email of ['a\u0000@example.com', 'a@exa\u0007mple.com', 'a\u007f@example.com']) {
    assert.equal((await call(a.write.secret, { email })).status, 400, `control characters are refused: ${JSON.stringify(email)}`)
  }

  const accepted = await accept(new PortalClient(a.pub.url), path)
  assert.equal(accepted.status, 303)
  const conflict = await call(a.write.secret, { email: 'ann@example.com' })
  assert.equal(conflict.status, 409)
  assert.match(JSON.stringify(await conflict.json()), /ann@example\.com is an operator already/)

  await mail.close()
  const down = await call(a.write.secret, { email: 'bea@example.com' })
  assert.equal(down.status, 503)
  assert.ok(!a.logs.some((line) => line.includes('invitations/accept')), 'no log holds a link')
})
