import { test } from 'node:test'
import assert from 'node:assert/strict'
import { openSqliteStore } from '../storage/sqlite/store.ts'
import { makeAccount, makeUser } from '../../test/support/storage/contract.ts'
import type { Store } from '../storage/ports.ts'
import type { Context } from './outcome.ts'
import { isFailure } from './outcome.ts'
import { INVITE_TTL_MS, Team, type TeamFailure } from './team.ts'
import type { Role } from '../domain/portal.ts'

const as = (id: string): Context => ({ actor: { type: 'portal-user', id }, ip: '192.0.2.1' })

/** refusal: the rule a call was refused by (it must have been). */
function refusal(value: unknown): TeamFailure['refusal'] {
  assert.ok(isFailure(value), `refused: ${JSON.stringify(value)}`)
  return (value as TeamFailure).refusal
}

async function setUp(t: { after: (fn: () => void) => void }) {
  const store: Store = openSqliteStore({ path: ':memory:' })
  t.after(() => store.close())
  let nowMs = Date.now()
  const team = new Team({ store, now: () => nowMs, sessionTtlMs: 3_600_000 })
  const account = await makeAccount(store.access, 'Acme')
  const member = async (email: string, role: Role) => {
    const user = await makeUser(store.portal, email)
    const target = { type: 'member', id: user.id } as const
    const added = { actor: 'cli', action: 'member.add', target, accountId: account.id, ip: null, outcome: 'success', detail: {} } as const
    assert.equal(await store.portal.addMember(account.id, user.id, role, added), true)
    return user
  }
  const events = async (action: string) => (await store.audit.list({ accountId: account.id, action, limit: 10 })).items
  return {
    store,
    team,
    account,
    member,
    events,
    advance: (ms: number) => {
      nowMs += ms
    },
  }
}

test('invite: the role rules, no second invitation of a member, the event as it was; the link is found, used once, by its address only', async (t) => {
  const { store, team, account, member, events, advance } = await setUp(t)
  const owner = await member('owner@example.com', 'owner')
  const admin = await member('admin@example.com', 'admin')
  assert.equal(refusal(await team.invite(as(admin.id), account.id, 'admin', { email: 'x@example.com', role: 'owner' })), 'owner-only')
  assert.equal(refusal(await team.invite(as(owner.id), account.id, 'owner', { email: 'x@example.com', role: 'boss' })), 'bad-role')
  assert.equal(refusal(await team.invite(as(owner.id), account.id, 'owner', { email: 'ADMIN@example.com', role: 'viewer' })), 'member-already')
  assert.equal((await events('member.invite')).length, 0, 'refusals write nothing')

  const first = await team.invite(as(admin.id), account.id, 'admin', { email: 'New@Example.com', role: 'viewer' })
  const invited = await team.invite(as(admin.id), account.id, 'admin', { email: 'new@example.com', role: 'developer' })
  assert.ok(!isFailure(first) && !isFailure(invited))
  assert.equal(await team.findInvitation(first.token, account.id), null, 'replaced by the second')
  const [event] = await events('member.invite')
  assert.deepEqual(
    [event?.actor, event?.target, event?.detail, event?.ip],
    [`portal-user:${admin.id}`, { type: 'member', id: 'new@example.com' }, { email: 'new@example.com', role: 'developer' }, '192.0.2.1'],
  )
  assert.deepEqual(
    (await team.pendingInvitations(account.id)).map((i) => [i.email, i.role]),
    [['new@example.com', 'developer']],
  )

  const found = await team.findInvitation(invited.token, account.id)
  assert.ok(found !== null)
  assert.equal(await team.findInvitation(invited.token, 'acc_other'), null, 'another account has no such invitation')
  assert.equal(await team.findInvitation('not a token', account.id), null)
  assert.equal(refusal(await team.join(as(owner.id), owner, found)), 'wrong-address')
  const newcomer = await makeUser(store.portal, 'NEW@example.com')
  assert.deepEqual(await team.join(as(newcomer.id), newcomer, found), { joined: true }, "someone else's click did not use it up")
  assert.equal(refusal(await team.join(as(newcomer.id), newcomer, found)), 'no-invitation', 'once only')
  assert.equal((await team.members(account.id)).find((m) => m.userId === newcomer.id)?.role, 'developer')
  const [join] = await events('member.join')
  assert.deepEqual(
    [join?.actor, join?.target, join?.detail],
    [`portal-user:${newcomer.id}`, { type: 'member', id: newcomer.id }, { email: 'NEW@example.com', role: 'developer' }],
  )

  const late = await team.invite(as(owner.id), account.id, 'owner', { email: 'late@example.com', role: 'viewer' })
  assert.ok(!isFailure(late))
  advance(INVITE_TTL_MS + 1)
  assert.equal(await team.findInvitation(late.token, account.id), null, "expired by the service's clock")
})

test('signUpAndJoin: the user, their membership and session, with both events; the invitation once; cancelInvitation kills a link', async (t) => {
  const { store, team, account, member, events } = await setUp(t)
  const owner = await member('owner@example.com', 'owner')
  const invited = await team.invite(as(owner.id), account.id, 'owner', { email: 'ann@example.com', role: 'admin' })
  assert.ok(!isFailure(invited))
  const found = await team.findInvitation(invited.token, account.id)
  assert.ok(found !== null)
  const input = { passwordHash: 'hash', sessionIdHash: 'a'.repeat(64), ip: '192.0.2.9', userAgent: 'test' }
  const user = await team.signUpAndJoin(found, input)
  assert.ok(!isFailure(user))
  assert.equal(user.status, 'active')
  assert.ok(user.emailVerifiedAt !== null)
  assert.equal(refusal(await team.signUpAndJoin(found, { ...input, sessionIdHash: 'b'.repeat(64) })), 'no-invitation')
  assert.equal((await store.portal.findSession(input.sessionIdHash, new Date().toISOString()))?.user.id, user.id)
  assert.equal((await team.memberships(user.id))[0]?.role, 'admin')
  const signUp = (await store.audit.list({ action: 'user.sign-up', limit: 5 })).items[0]
  assert.deepEqual(
    [signUp?.actor, signUp?.target, signUp?.accountId, signUp?.detail],
    [`portal-user:${user.id}`, { type: 'user', id: user.id }, null, { via: 'invitation' }],
  )
  assert.equal((await events('member.join')).length, 1)

  const bob = await team.invite(as(owner.id), account.id, 'owner', { email: 'bob@example.com', role: 'viewer' })
  assert.ok(!isFailure(bob))
  assert.deepEqual(await team.cancelInvitation(as(owner.id), account.id, 'BOB@example.com'), { email: 'bob@example.com', role: 'viewer' })
  assert.equal(await team.findInvitation(bob.token, account.id), null)
  assert.equal(refusal(await team.cancelInvitation(as(owner.id), account.id, 'bob@example.com')), 'no-invitation')
  const [cancel] = await events('member.invite-cancel')
  assert.deepEqual(
    [cancel?.target, cancel?.detail],
    [
      { type: 'member', id: 'bob@example.com' },
      { email: 'bob@example.com', role: 'viewer' },
    ],
  )
})

test('roles: admins manage all but owners; the last owner is neither demoted, removed nor leaves; the events as they were', async (t) => {
  const { team, account, member, events } = await setUp(t)
  const owner = await member('owner@example.com', 'owner')
  const admin = await member('admin@example.com', 'admin')
  const dev = await member('dev@example.com', 'developer')
  assert.equal(refusal(await team.changeRole(as(admin.id), account.id, 'admin', owner.id, 'viewer')), 'owner-only')
  assert.equal(refusal(await team.changeRole(as(admin.id), account.id, 'admin', dev.id, 'owner')), 'owner-only')
  assert.equal(refusal(await team.remove(as(admin.id), account.id, 'admin', owner.id)), 'owner-only')
  assert.equal(refusal(await team.changeRole(as(admin.id), account.id, 'admin', 'usr_nobody', 'viewer')), 'not-member')
  assert.equal(refusal(await team.changeRole(as(owner.id), account.id, 'owner', owner.id, 'admin')), 'last-owner')
  assert.equal(refusal(await team.remove(as(owner.id), account.id, 'owner', owner.id)), 'last-owner')
  assert.equal(refusal(await team.leave(as(owner.id), account.id, owner, 'owner')), 'last-owner')

  assert.equal(((await team.changeRole(as(admin.id), account.id, 'admin', dev.id, 'developer')) as { role: Role }).role, 'developer')
  assert.equal((await events('member.role')).length, 0, 'the same role: nothing written')
  assert.ok(!isFailure(await team.changeRole(as(admin.id), account.id, 'admin', dev.id, 'viewer')))
  const [role] = await events('member.role')
  assert.deepEqual(
    [role?.actor, role?.target, role?.detail],
    [`portal-user:${admin.id}`, { type: 'member', id: dev.id }, { email: 'dev@example.com', from: 'developer', to: 'viewer' }],
  )
  assert.ok(!isFailure(await team.remove(as(admin.id), account.id, 'admin', dev.id)))
  assert.deepEqual((await events('member.remove'))[0]?.detail, { email: 'dev@example.com', role: 'viewer' })
  assert.deepEqual(await team.leave(as(admin.id), account.id, admin, 'admin'), { left: true })
  assert.deepEqual((await events('member.remove'))[0]?.detail, { email: 'admin@example.com', role: 'admin', left: true })
  assert.equal(refusal(await team.leave(as(admin.id), account.id, admin, 'admin')), 'not-member')
  const emails = await team.emailsOf(account.id, [owner.id, admin.id, 'usr_nobody'])
  assert.deepEqual(
    Object.fromEntries(emails),
    { [owner.id]: 'owner@example.com', [admin.id]: 'admin@example.com' },
    'a former member too; no one for an unknown id',
  )
})
