import { test } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { openSqliteStore } from '../../storage/sqlite/store.ts'
import { makeAccount, makeUser } from '../../../test/support/storage/contract.ts'
import type { Store } from '../../storage/ports.ts'
import { keepPortalTidy } from './maintenance.ts'

const iso = (ms: number) => new Date(ms).toISOString()

/** seed: a user with an expired, a soon expiring and a live session; an account with an expired, a used and a live invitation. */
async function seed(store: Store, nowMs: number): Promise<string> {
  const user = await makeUser(store.portal, 'ann@example.com', { emailVerifiedAt: iso(nowMs - 86_400_000) })
  const account = await makeAccount(store.access, 'Acme')
  const session = (idHash: string, expiresMs: number) =>
    store.portal.createSession({ idHash, userId: user.id, expiresAt: iso(expiresMs), twoFactorPending: false, ip: null, userAgent: null })
  await session('s-dead', nowMs - 1000)
  await session('s-soon', nowMs + 60_000)
  await session('s-live', nowMs + 86_400_000)
  const invite = (tokenHash: string, email: string, expiresMs: number) =>
    store.portal.createToken({ tokenHash, purpose: 'invite', email, accountId: account.id, role: 'viewer', expiresAt: iso(expiresMs) })
  await invite('t-dead', 'a@example.com', nowMs - 1000)
  await invite('t-used', 'b@example.com', nowMs + 3_600_000)
  assert.notEqual(await store.portal.consumeToken('t-used', 'invite', iso(nowMs)), null)
  await invite('t-live', 'c@example.com', nowMs + 86_400_000)
  return account.id
}

/** What is left in the tables: looked up as of the epoch, when nothing had expired yet. */
async function left(store: Store, accountId: string): Promise<{ sessions: string[]; unusedTokens: string[] }> {
  const sessions = await Promise.all(['s-dead', 's-soon', 's-live'].map(async (id) => ((await store.portal.findSession(id, iso(0))) === null ? '' : id)))
  return { sessions: sessions.filter(Boolean), unusedTokens: (await store.portal.pendingInvites(accountId, iso(0))).map((t) => t.tokenHash) }
}

test('keepPortalTidy deletes expired sessions, expired or used tokens and stale unconfirmed sign-ups at once, then at every tick; stop ends it', async (t) => {
  const store = openSqliteStore({ path: ':memory:' })
  t.after(() => store.close())
  let nowMs = Date.parse('2030-01-01T00:00:00Z')
  const accountId = await seed(store, nowMs)
  assert.deepEqual(await left(store, accountId), { sessions: ['s-dead', 's-soon', 's-live'], unusedTokens: ['t-dead', 't-live'] })
  const stale = await makeUser(store.portal, 'stale@example.com', { createdAt: iso(nowMs - 2 * 86_400_000) })
  const recent = await makeUser(store.portal, 'recent@example.com', { createdAt: iso(nowMs - 3_600_000) })
  const errors: Error[] = []
  const stop = keepPortalTidy(
    store,
    () => nowMs,
    (e) => errors.push(e),
    86_400_000,
    30,
  )
  await sleep(10)
  assert.deepEqual(await left(store, accountId), { sessions: ['s-soon', 's-live'], unusedTokens: ['t-live'] }, 'the first pass ran at start')
  assert.equal(await store.portal.pruneTokens(iso(nowMs)), 0, 'the used token went too')
  assert.equal(await store.portal.getUser(stale.id), null, 'a sign-up unconfirmed for longer than its link lives went')
  assert.notEqual(await store.portal.getUser(recent.id), null, 'a recent one stays')
  assert.notEqual(await store.portal.getUser((await store.portal.findUserByEmail('ann@example.com'))!.id), null, 'a confirmed one stays')
  nowMs += 120_000
  await sleep(80)
  assert.deepEqual((await left(store, accountId)).sessions, ['s-live'], 'a later pass removed the session that expired since')
  await stop()
  nowMs += 2 * 86_400_000
  await sleep(80)
  assert.deepEqual(await left(store, accountId), { sessions: ['s-live'], unusedTokens: ['t-live'] }, 'stopped: no more passes')
  assert.deepEqual(errors, [])
})

test('keepPortalTidy reports a failure and still prunes the other part; stop waits for the pass under way', async () => {
  const calls: string[] = []
  let release = () => {}
  const portal = {
    pruneSessions: async () => {
      calls.push('sessions')
      throw new Error('sessions table away')
    },
    pruneTokens: () =>
      new Promise<number>((resolve) => {
        calls.push('tokens')
        release = () => {
          calls.push('tokens done')
          resolve(2)
        }
      }),
    pruneSsoRequests: async () => {
      calls.push('sso requests')
      return 0
    },
    purgeUnconfirmed: async () => {
      calls.push('unconfirmed')
      return 0
    },
  }
  const errors: string[] = []
  const stop = keepPortalTidy(
    { portal } as unknown as Store,
    () => 0,
    (e) => errors.push(e.message),
    86_400_000,
  )
  const stopped = stop().then(() => calls.push('stopped'))
  await sleep(10)
  assert.deepEqual(calls, ['sessions', 'tokens', 'sso requests', 'unconfirmed'], 'stop waits')
  release()
  await stopped
  assert.deepEqual(calls, ['sessions', 'tokens', 'sso requests', 'unconfirmed', 'tokens done', 'stopped'])
  assert.deepEqual(errors, ['sessions table away'])
})
