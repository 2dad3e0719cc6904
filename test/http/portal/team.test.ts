/**
 * The portal's team page and invitations (issue 13): members and roles under the admin/owner
 * rules, an account's last owner kept (also against two owners demoting each other at once),
 * invitations emailed, shown without being used, accepted once however many try at once,
 * by a new user (who gets a sign-in) or an existing one; and the audit trail of it all.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { startApp, type Running } from '../../support/helper.ts'
import { linkIn, mails, PortalClient, portalUser, signedInClient, teamOf, waitForMail } from '../../support/portal-helper.ts'
import { SYSTEM } from '../../../src/domain/accounts.ts'
import { isFailure } from '../../../src/services/outcome.ts'
import { INVITE_TTL_MS } from '../../../src/portal/pages/team.ts'

/** invitePath: the path (with its query) of the latest invitation emailed to `email`, the `n`th. */
async function invitePath(app: Running, email: string, n = 1): Promise<string> {
  const url = new URL(linkIn(await waitForMail(app, email, n)))
  assert.equal(url.pathname, '/portal/invitations/accept')
  return url.pathname + url.search
}

async function invite(app: Running, client: PortalClient, email: string, role: string) {
  return client.post(`${teamOf(app)}/invite`, { email, role }, { from: teamOf(app) })
}

const roleOf = async (app: Running, userId: string, accountId = app.accountId) =>
  (await app.store.portal.listMembers(accountId)).find((m) => m.userId === userId)?.role ?? null

const actions = async (app: Running, action: string) => (await app.store.audit.list({ accountId: app.accountId, action, limit: 100 })).items

test('an invitation to a new address: emailed, shown without being used, accepted with a new password (even with sign-ups closed), which signs in; then dead', async (t) => {
  const app = await startApp(t, { SIGNUP_MODE: 'closed' })
  const { client: owner, user: ownerUser } = await signedInClient(app)
  const sent = await invite(app, owner, 'New.Person@Example.com', 'developer')
  assert.equal(sent.status, 303)
  assert.equal(sent.location, `${teamOf(app)}?done=invited`)
  const team = await owner.get(sent.location)
  assert.match(team.text, /role="status">The invitation is sent\. It works once, for 7 days\./)
  assert.match(team.text, /<caption>Pending invitations<\/caption>/)
  assert.match(team.text, /<th scope="row">new\.person@example\.com<\/th><td>developer<\/td>/)

  const mail = await waitForMail(app, 'new.person@example.com')
  assert.match(mail.subject, /invited you to test on Tessera/)
  const path = await invitePath(app, 'new.person@example.com')
  const invitee = new PortalClient(app.url)
  for (let i = 0; i < 2; i++) {
    const shown = await invitee.get(path)
    assert.equal(shown.status, 200, 'opening the link (twice: a mail scanner, then the person) uses nothing up')
    assert.match(shown.text, /join the team <strong>test<\/strong> as <strong>developer<\/strong>/)
    assert.match(shown.text, /autocomplete="new-password"/)
    assert.match(shown.text, /Create my sign-in and join test<\/button>/)
  }
  const short = await invitee.post('/portal/invitations/accept', fieldsOf(path, { password: 'short' }))
  assert.equal(short.status, 422)
  assert.match(short.text, /Choose a password of at least 12 characters\./)
  const forged = await invitee.post('/portal/invitations/accept', fieldsOf(path, { password: 'a long enough passphrase' }), { csrf: false })
  assert.equal(forged.status, 403, 'no CSRF token: refused')

  const joined = await invitee.post('/portal/invitations/accept', fieldsOf(path, { password: 'a long enough passphrase' }), { from: path })
  assert.equal(joined.status, 303, joined.text)
  assert.equal(joined.location, `/portal/accounts/${app.accountId}/start`)
  const user = await app.store.portal.findUserByEmail('new.person@example.com')
  assert.ok(user !== null)
  assert.equal(user.status, 'active')
  assert.ok(user.emailVerifiedAt !== null, 'the link proved the address')
  assert.equal(await roleOf(app, user.id), 'developer')
  const home = await invitee.get('/portal/home')
  assert.equal(home.status, 200, 'signed in')
  assert.match(home.text, /Signed in as new\.person@example\.com/)

  assert.equal((await invitee.get(path)).status, 400, 'used: the link is dead')
  const again = await new PortalClient(app.url).get(path)
  assert.match(again.text, /already used, has expired, or was replaced/)
  assert.doesNotMatch((await owner.get(teamOf(app))).text, /Pending invitations/)

  const [inviteEvent] = await actions(app, 'member.invite')
  assert.equal(inviteEvent?.actor, `portal-user:${ownerUser.id}`)
  assert.deepEqual(inviteEvent?.detail, { email: 'new.person@example.com', role: 'developer' })
  const [join] = await actions(app, 'member.join')
  assert.equal(join?.actor, `portal-user:${user.id}`)
  assert.deepEqual(join?.target, { type: 'member', id: user.id })
  assert.equal((await app.store.audit.list({ actor: `portal-user:${user.id}`, action: 'user.sign-up', limit: 5 })).items.length, 1)
})

/** fieldsOf: the accept form's fields for an invitation path, plus `extra`. */
function fieldsOf(path: string, extra: Record<string, string> = {}): Record<string, string> {
  const query = new URL(path, 'http://x').searchParams
  return { token: query.get('token') ?? '', account: query.get('account') ?? '', ...extra }
}

test('an invitation to an existing user: signed out, a link to sign in; signed in as someone else, an explanation (and their click uses nothing); signed in as them, a button that joins', async (t) => {
  const app = await startApp(t)
  const { client: owner } = await signedInClient(app)
  const other = await app.accounts.createAccount({ actor: SYSTEM }, { name: 'elsewhere' })
  assert.ok(!isFailure(other))
  const bob = await portalUser(app, { email: 'bob@example.com', accountId: other.id })
  assert.equal((await invite(app, owner, 'Bob@Example.com', 'viewer')).status, 303)
  const path = await invitePath(app, 'bob@example.com')

  const signedOut = new PortalClient(app.url)
  const shown = await signedOut.get(path)
  assert.equal(shown.status, 200)
  const signIn = /<a href="([^"]+)">Sign in to accept<\/a>/.exec(shown.text)
  assert.ok(signIn, shown.text)
  assert.equal(signIn[1]!.replaceAll('&amp;', '&'), `/portal/sign-in?next=${encodeURIComponent(path)}`)
  assert.doesNotMatch(shown.text, /new-password/, 'no form to create a second sign-in')

  const { client: carol } = await signedInClient(app, { email: 'carol@example.com', accountId: other.id })
  const wrong = await carol.get(path)
  assert.match(wrong.text, /signed in as carol@example\.com, but this invitation was sent to another address/)
  assert.match(wrong.text, /<button type="submit" class="secondary">Sign out carol@example\.com<\/button>/)
  assert.equal((await carol.post('/portal/invitations/accept', fieldsOf(path))).status, 403)

  const client = new PortalClient(app.url)
  await client.signIn(bob.email, bob.password)
  const page = await client.get(path)
  assert.match(page.text, /<button type="submit">Join test as viewer<\/button>/)
  const joined = await client.post('/portal/invitations/accept', fieldsOf(path))
  assert.equal(joined.status, 303)
  assert.equal(joined.location, `/portal/accounts/${app.accountId}/start`)
  assert.equal(await roleOf(app, bob.user.id), 'viewer')
  assert.equal(await roleOf(app, bob.user.id, other.id), 'owner', 'their other account is untouched')
})

test('signing in from an invitation comes back to it', async (t) => {
  const app = await startApp(t)
  const { client: owner } = await signedInClient(app)
  const bob = await portalUser(app, { email: 'bob@example.com', accountId: null })
  await invite(app, owner, bob.email, 'viewer')
  const path = await invitePath(app, bob.email)
  const client = new PortalClient(app.url)
  const form = await client.get(`/portal/sign-in?next=${encodeURIComponent(path)}`)
  const next = /name="next" value="([^"]+)"/.exec(form.text)?.[1]?.replaceAll('&amp;', '&')
  const signedIn = await client.post('/portal/sign-in', { email: bob.email, password: bob.password, ...(next ? { next } : {}) })
  assert.equal(signedIn.location, path)
})

test('invitations: a new one to the same address replaces the earlier; cancelled and expired ones are dead; a member is not invited again; admins invite no owners', async (t) => {
  const app = await startApp(t)
  const { client: owner } = await signedInClient(app)
  const { client: admin, email: adminEmail } = await signedInClient(app, { role: 'admin' })

  await invite(app, owner, 'dan@example.com', 'viewer')
  const first = await invitePath(app, 'dan@example.com', 1)
  await invite(app, admin, 'DAN@example.com', 'developer')
  const second = await invitePath(app, 'dan@example.com', 2)
  assert.equal((await new PortalClient(app.url).get(first)).status, 400, 'replaced')
  assert.equal((await new PortalClient(app.url).get(second)).status, 200)
  assert.equal((await owner.get(teamOf(app))).text.match(/<th scope="row">dan@example\.com<\/th>/g)?.length, 1, 'one invitation')

  const cancel = await admin.post(`${teamOf(app)}/cancel`, { email: 'dan@example.com' }, { from: teamOf(app) })
  assert.equal(cancel.status, 303)
  assert.equal((await new PortalClient(app.url).get(second)).status, 400, 'cancelled')
  assert.equal((await admin.post(`${teamOf(app)}/cancel`, { email: 'dan@example.com' }, { from: teamOf(app) })).status, 409)
  assert.equal((await actions(app, 'member.invite-cancel')).length, 1)

  const member = await invite(app, owner, adminEmail.toUpperCase(), 'viewer')
  assert.equal(member.status, 409)
  assert.match(member.text, /role="alert">.* is already a member of test\./)
  const owners = await invite(app, admin, 'fay@example.com', 'owner')
  assert.equal(owners.status, 403)
  assert.match(owners.text, /Only an owner can invite owners\./)
  assert.match(owners.text, /value="fay@example\.com"/, 'what was typed is kept')
  const bad = await invite(app, owner, 'not an address', 'viewer')
  assert.equal(bad.status, 422)
  assert.equal((await invite(app, owner, 'fay@example.com', 'superuser')).status, 422)
  assert.equal(mails(app, 'fay@example.com').length, 0)
  assert.equal((await invite(app, owner, 'fay@example.com', 'owner')).status, 303, 'an owner invites owners')

  // Last: a week later the sessions have expired too.
  await invite(app, owner, 'eve@example.com', 'viewer')
  const late = await invitePath(app, 'eve@example.com')
  app.clock.advance(INVITE_TTL_MS + 1000)
  assert.equal((await new PortalClient(app.url).get(late)).status, 400, 'expired')
})

test('an email that cannot be sent: the page does not wait, the log says so without the link', async (t) => {
  // Nothing listens on port 9 here: the SMTP connection is refused.
  const app = await startApp(t, { SMTP_URL: 'smtp://127.0.0.1:9' })
  const { client: owner } = await signedInClient(app)
  assert.equal((await invite(app, owner, 'gus@example.com', 'viewer')).status, 303)
  const [invite0] = await app.store.portal.pendingInvites(app.accountId, new Date(app.clock.now()).toISOString())
  assert.ok(invite0)
  for (let i = 0; i < 250 && !app.logs.some((l) => l.includes('invitation email not sent')); i++) await new Promise((r) => setTimeout(r, 20))
  const line = app.logs.find((l) => l.includes('invitation email not sent'))
  assert.ok(line, 'the failure is logged')
  assert.doesNotMatch(line, /token=|invitations\/accept/)
  assert.ok(!app.logs.some((l) => l.includes('token=')), 'no log line holds an invitation link')
})

test('roles: admins manage the team but not its owners; owners everything; the last owner stays', async (t) => {
  const app = await startApp(t)
  const { client: owner, user: ownerUser } = await signedInClient(app)
  const { client: admin, user: adminUser } = await signedInClient(app, { role: 'admin' })
  const dev = await portalUser(app, { role: 'developer' })
  const team = teamOf(app)

  const adminPage = await admin.get(team)
  assert.match(adminPage.text, /Change role<span class="visually-hidden"> of [^<]+<\/span>/)
  assert.doesNotMatch(adminPage.text, new RegExp(`Remove<span class="visually-hidden"> ${ownerUser.email}`), 'no remove button for an owner')
  assert.doesNotMatch(adminPage.text, /<option value="owner"/, 'an admin is offered no owner role')

  assert.equal((await admin.post(`${team}/role`, { user: dev.user.id, role: 'viewer' })).status, 303)
  assert.equal(await roleOf(app, dev.user.id), 'viewer')
  const makeOwner = await admin.post(`${team}/role`, { user: dev.user.id, role: 'owner' }, { from: team })
  assert.equal(makeOwner.status, 403)
  assert.match(makeOwner.text, /Only an owner can make owners\./)
  const demoteOwner = await admin.post(`${team}/role`, { user: ownerUser.id, role: 'viewer' }, { from: team })
  assert.equal(demoteOwner.status, 403)
  assert.equal((await admin.post(`${team}/remove`, { user: ownerUser.id }, { from: team })).status, 403)
  assert.equal(await roleOf(app, ownerUser.id), 'owner')

  // The last owner: neither demoted, removed, nor leaving.
  for (const [path, fields] of [
    [`${team}/role`, { user: ownerUser.id, role: 'admin' }],
    [`${team}/remove`, { user: ownerUser.id }],
    [`${team}/leave`, {}],
  ] as const) {
    const refused = await owner.post(path, fields, { from: team })
    assert.equal(refused.status, 409, path)
    assert.match(refused.text, /role="alert">(You are|.+ is) the last owner of test, and an account keeps at least one owner/)
  }
  assert.match((await owner.get(team)).text, /You are the only owner of test: make another member owner before you leave\./)
  assert.equal(await roleOf(app, ownerUser.id), 'owner')

  assert.equal((await owner.post(`${team}/role`, { user: adminUser.id, role: 'owner' }, { from: team })).status, 303)
  assert.equal((await owner.post(`${team}/role`, { user: ownerUser.id, role: 'developer' }, { from: team })).status, 303, 'one of two owners steps down')
  assert.equal((await admin.post(`${team}/remove`, { user: dev.user.id }, { from: team })).status, 303, 'the new owner removes')
  assert.equal(await roleOf(app, dev.user.id), null)
  const leave = await owner.post(`${team}/leave`, {}, { from: team })
  assert.equal(leave.status, 303)
  assert.equal(leave.location, '/portal/home')
  assert.equal((await owner.get(team)).status, 404, 'gone from the account')

  const roles = (await actions(app, 'member.role')).map((e) => [e.actor, e.detail.from, e.detail.to])
  assert.deepEqual(roles, [
    [`portal-user:${ownerUser.id}`, 'owner', 'developer'],
    [`portal-user:${ownerUser.id}`, 'admin', 'owner'],
    [`portal-user:${adminUser.id}`, 'developer', 'viewer'],
  ])
  assert.equal((await actions(app, 'member.remove')).length, 2)
})

test('two owners demoting each other at once: one stays owner', async (t) => {
  const app = await startApp(t)
  const a = await signedInClient(app)
  const b = await signedInClient(app)
  const team = teamOf(app)
  for (let round = 0; round < 5; round++) {
    await Promise.all([a.client.get(team), b.client.get(team)])
    const answers = await Promise.all([
      a.client.post(`${team}/role`, { user: b.user.id, role: 'admin' }),
      b.client.post(`${team}/role`, { user: a.user.id, role: 'admin' }),
    ])
    const statuses = answers.map((r) => r.status).sort()
    assert.equal(statuses[0], 303, `one demotion is made: ${statuses.join(',')}`)
    assert.ok([403, 409].includes(statuses[1]!), `the other refused: ${statuses.join(',')}`)
    const owners = (await app.store.portal.listMembers(app.accountId)).filter((m) => m.role === 'owner')
    assert.equal(owners.length, 1)
    // Both owners again for the next round.
    const demoted = owners[0]!.userId === a.user.id ? b : a
    const keeper = demoted === a ? b : a
    assert.equal((await keeper.client.post(`${team}/role`, { user: demoted.user.id, role: 'owner' }, { from: team })).status, 303)
  }
})

test("a viewer sees no forms and may not post; another account's member sees nothing; forms without their token or from another site are refused", async (t) => {
  const app = await startApp(t)
  const { client: owner, user: ownerUser } = await signedInClient(app)
  const { client: viewer } = await signedInClient(app, { role: 'viewer' })
  const team = teamOf(app)
  const page = await viewer.get(team)
  assert.equal(page.status, 200)
  assert.match(page.text, new RegExp(`<th scope="row">${ownerUser.email.replaceAll('.', '\\.')}</th><td>owner</td>`))
  for (const action of ['invite', 'role', 'remove', 'cancel']) assert.doesNotMatch(page.text, new RegExp(`action="${team}/${action}"`), action)
  assert.match(page.text, /<button type="submit" class="danger">Leave test<\/button>/)
  const asViewer = await viewer.post(`${team}/invite`, { email: 'x@example.com', role: 'viewer' })
  assert.equal(asViewer.status, 403)
  assert.equal((await viewer.post(`${team}/role`, { user: ownerUser.id, role: 'viewer' }, { from: team })).status, 403)

  const other = await app.accounts.createAccount({ actor: SYSTEM }, { name: 'elsewhere' })
  assert.ok(!isFailure(other))
  const { client: stranger } = await signedInClient(app, { accountId: other.id })
  assert.equal((await stranger.get(team)).status, 404)
  assert.equal((await stranger.post(`${team}/invite`, { email: 'x@example.com', role: 'viewer' }, { from: '/portal/home' })).status, 404)

  assert.equal((await owner.post(`${team}/invite`, { email: 'x@example.com', role: 'viewer' }, { from: team, csrf: false })).status, 403)
  assert.equal((await owner.post(`${team}/invite`, { email: 'x@example.com', role: 'viewer' }, { from: team, origin: 'https://evil.example' })).status, 403)
  assert.equal(mails(app, 'x@example.com').length, 0)
  assert.equal((await new PortalClient(app.url).get(team)).status, 303, 'signed out: to sign-in')
})

test('accepts of one invitation at once: one joins (20 by an existing user, then 6 creating a sign-in)', async (t) => {
  const app = await startApp(t)
  const { client: owner } = await signedInClient(app)
  const hal = await portalUser(app, { email: 'hal@example.com', accountId: null })
  await invite(app, owner, hal.email, 'developer')
  const client = new PortalClient(app.url)
  await client.signIn(hal.email, hal.password)
  const path = await invitePath(app, hal.email)
  await client.get(path)
  const answers = await Promise.all(Array.from({ length: 20 }, () => client.post('/portal/invitations/accept', fieldsOf(path))))
  assert.deepEqual(answers.map((a) => a.status).sort(), [303, ...Array<number>(19).fill(400)])
  assert.equal(await roleOf(app, hal.user.id), 'developer')
  assert.equal((await actions(app, 'member.join')).length, 1)

  await invite(app, owner, 'ida@example.com', 'viewer')
  const fresh = await invitePath(app, 'ida@example.com')
  const signedOut = new PortalClient(app.url)
  await signedOut.get(fresh)
  // Fewer here: each of these hashes a password (at the production cost) before it tries the invitation.
  const creates = await Promise.all(
    Array.from({ length: 6 }, () => signedOut.post('/portal/invitations/accept', fieldsOf(fresh, { password: 'a long enough passphrase' }))),
  )
  assert.deepEqual(creates.map((a) => a.status).sort(), [303, ...Array<number>(5).fill(400)])
  const ida = (await app.store.portal.listMembers(app.accountId)).filter((m) => m.email === 'ida@example.com')
  assert.equal(ida.length, 1)
  assert.equal(ida[0]!.role, 'viewer')
  assert.equal((await actions(app, 'member.join')).length, 2)
})

test('the team page of 50 members and 20 invitations takes as many store calls as that of one', async (t) => {
  const app = await startApp(t)
  const { client } = await signedInClient(app)
  const portal = app.store.portal as unknown as Record<string, (...args: unknown[]) => unknown>
  const calls: string[] = []
  for (const name of Object.keys(portal)) {
    const original = portal[name]!
    if (typeof original === 'function')
      portal[name] = (...args: unknown[]) => {
        calls.push(name)
        return original.apply(app.store.portal, args)
      }
  }
  const count = async () => {
    calls.length = 0
    assert.equal((await client.get(teamOf(app))).status, 200)
    return [...calls]
  }
  const alone = await count()
  assert.ok(alone.includes('listMembers') && alone.includes('pendingInvites'), alone.join(','))
  for (let i = 0; i < 49; i++) await portalUser(app, { role: 'developer' })
  for (let i = 0; i < 20; i++) await invite(app, client, `invitee-${i}@example.com`, 'viewer')
  const page = await client.get(teamOf(app))
  assert.equal(page.text.match(/<th scope="row">/g)?.length, 70)
  assert.deepEqual(await count(), alone)
})
