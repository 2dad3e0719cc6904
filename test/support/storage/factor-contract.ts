/**
 * The factor store's part of the storage contract (storeContract calls it): the limit of
 * factors per user and a recovery code's single use hold under parallel calls; a change
 * writes its audit event, and a change that finds nothing writes none; reads never return
 * expired pending factors; users are per account; re-sealing is compare-and-set.
 */
import assert from 'node:assert/strict'
import type { AuditDraft } from '../../../src/domain/accounts.ts'
import type { PasskeyChallenge, PasskeyFactor, TotpFactor } from '../../../src/domain/factors.ts'
import type { Store } from '../../../src/storage/ports.ts'
import { CursorError } from '../../../src/domain/errors.ts'
import { newId } from '../../../src/domain/ids.ts'
import { userCursor } from '../../../src/storage/rows.ts'

type WithStore = (title: string, body: (s: Store) => Promise<void>) => void

const NOW = '2026-01-01T12:00:00.000Z'
const LATER = '2026-01-01T13:00:00.000Z'
const LATER_STILL = '2026-01-01T14:00:00.000Z'

function event(action: string, accountId: string): AuditDraft {
  return { actor: 'cli', action, target: { type: 'totp-user', id: 'u' }, accountId, ip: null, outcome: 'success', detail: { userID: 'u' } }
}

export function factor(accountId: string, userId: string, extra: Partial<TotpFactor> = {}): TotpFactor {
  return {
    id: newId('fct'),
    type: 'totp',
    accountId,
    userId,
    applicationId: 'Acme',
    label: null,
    profile: 'universal',
    status: 'pending',
    algorithm: 'SHA1',
    digits: 6,
    period: 30,
    drift: 0,
    sealed: `v1.${newId('x')}`,
    keyVersion: 1,
    createdAt: NOW,
    expiresAt: '2026-01-01T12:10:00.000Z',
    activatedAt: null,
    ...extra,
  }
}

async function eventsOf(store: Store, accountId: string, action: string): Promise<number> {
  return (await store.audit.list({ accountId, action, limit: 1000 })).items.length
}

export function factorContract(withStore: WithStore, makeAccount: (store: Store) => Promise<string>): void {
  withStore('factors: 40 parallel creations for one user stop at the limit', async (store) => {
    const acc = await makeAccount(store)
    const results = await Promise.all(Array.from({ length: 40 }, () => store.factors.create(factor(acc, 'u'), 5, 1000, NOW, event('factor.created', acc))))
    assert.equal(results.filter((r) => r === 'created').length, 5)
    assert.equal((await store.factors.factors(acc, 'u', NOW))!.length, 5)
    assert.equal(await eventsOf(store, acc, 'factor.created'), 5, 'an event per factor made, none for the refused')
    // Expired pending factors do not count: the next creation drops them.
    assert.equal(
      await store.factors.create(factor(acc, 'u', { expiresAt: '2026-01-01T13:10:00.000Z' }), 5, 1000, LATER, event('factor.created', acc)),
      'created',
    )
    assert.equal((await store.factors.factors(acc, 'u', LATER))!.length, 1)
  })

  withStore("factors: many attempts' reads at once each get their own user's factors and account's settings, as one read alone does", async (store) => {
    const acc = await makeAccount(store)
    const other = await makeAccount(store)
    await store.factors.setSettings(
      other,
      { rpId: 'other.example', rpName: 'Other', origins: ['https://other.example'], userLimit: 7, keyLimit: null, limitWindowSeconds: 90 },
      NOW,
      event('factor-settings.set', other),
    )
    const create = (accountId: string, userId: string, extra: Partial<TotpFactor> = {}) =>
      store.factors.create(factor(accountId, userId, extra), 5, 1000, NOW, event('factor.created', accountId))
    for (let i = 0; i < 30; i++) {
      await create(i % 3 === 0 ? other : acc, `u${i}`)
      // Every fifth user has a second, active factor; every seventh one pending that has expired by LATER.
      if (i % 5 === 0) await create(i % 3 === 0 ? other : acc, `u${i}`, { status: 'active', activatedAt: NOW, expiresAt: null })
      if (i % 7 === 0) await create(i % 3 === 0 ? other : acc, `u${i}`, { createdAt: NOW, expiresAt: '2026-01-01T12:30:00.000Z' })
    }
    // The reads: every user, at two times, an unknown user, and the same user twice, in one turn.
    const asks = [
      ...Array.from({ length: 30 }, (_, i) => ({ accountId: i % 3 === 0 ? other : acc, userId: `u${i}`, nowIso: i % 2 === 0 ? NOW : LATER })),
      { accountId: acc, userId: 'nobody', nowIso: NOW },
      { accountId: other, userId: 'u1', nowIso: NOW }, // u1 is acc's, not other's
      { accountId: acc, userId: 'u1', nowIso: NOW },
    ]
    const together = await Promise.all(asks.map((a) => store.factors.attempting(a.accountId, a.userId, a.nowIso)))
    const alone = []
    for (const a of asks) alone.push(await store.factors.attempting(a.accountId, a.userId, a.nowIso))
    assert.deepEqual(together, alone)
    assert.equal(together[30], null)
    assert.equal(together[31], null)
    assert.equal(together[0]!.settings.userLimit, 7, "the other account's settings")
    assert.equal(together[1]!.settings.userLimit, null, "the account's own (none set)")
    assert.equal(together[0]!.factors.length, 3, 'u0 at NOW: two made, one pending not yet expired')
    assert.deepEqual(together[7]!.factors, [], 'u7 at LATER: a user still, both pending factors expired')
    assert.equal(together[5]!.factors.length, 1, 'u5 at LATER: its active factor only')
  })

  withStore('factors: 80 parallel creations for 80 users of one account stop at its cap; deletions and expiry give room back', async (store) => {
    const acc = await makeAccount(store)
    const other = await makeAccount(store)
    const create = (accountId: string, userId: string, nowIso = NOW, extra: Partial<TotpFactor> = {}) =>
      store.factors.create(factor(accountId, userId, extra), 5, 25, nowIso, event('factor.created', accountId))
    const results = await Promise.all(Array.from({ length: 80 }, (_, i) => create(acc, `u${i}`)))
    assert.equal(results.filter((r) => r === 'created').length, 25)
    assert.equal(results.filter((r) => r === 'account_limit').length, 55)
    assert.equal(await eventsOf(store, acc, 'factor.created'), 25, 'an event per factor made, none for the refused')
    const users = await store.factors.listUsers(acc, { limit: 100, nowIso: NOW })
    assert.equal(users.items.length, 25, 'a refused user was not kept either')
    assert.equal(await create(other, 'u'), 'created', 'another account is not affected')
    // A user at the account's cap is refused even below their own; deleting a factor, or a user with theirs, gives room back.
    const kept = users.items[0]!.userId
    assert.equal(await create(acc, kept), 'account_limit')
    const [f] = (await store.factors.factors(acc, kept, NOW))!
    assert.equal(await store.factors.remove(acc, kept, f!.id, event('factor.deleted', acc)), true)
    assert.equal(await create(acc, kept), 'created')
    assert.equal(await create(acc, 'new'), 'account_limit')
    assert.equal(await store.factors.removeUser(acc, users.items[1]!.userId, event('factor.deleted', acc)), true)
    assert.equal(await create(acc, 'new'), 'created')
    // Expired pending factors count until they go: reaching the cap drops the account's (not another's), as a prune would.
    const late = { expiresAt: '2026-01-01T13:10:00.000Z' }
    assert.equal(await create(acc, 'late', LATER, late), 'created', "the account's expired pending ones were dropped for it")
    for (let i = 0; i < 24; i++) assert.equal(await create(acc, `late${i}`, LATER, late), 'created')
    assert.equal(await create(acc, 'late-full', LATER, late), 'account_limit')
    assert.equal(await store.factors.prune(LATER), 1, "only the other account's expired one was left to prune")
  })

  withStore('factors: creations and removals at once, in an account with a webhook endpoint, never deadlock; each event has its delivery', async (store) => {
    const acc = await makeAccount(store)
    const hook = { id: newId('whe'), accountId: acc, url: 'https://hooks.example.com/in', eventTypes: null, createdAt: NOW, sealedSecret: 'sealed' }
    assert.equal(await store.webhooks.createEndpoint(hook, 10, event('webhook.create', acc)), true)
    const create = (userId: string) => store.factors.create(factor(acc, userId), 5, 1000, NOW, event('factor.created', acc))
    const old = await Promise.all(Array.from({ length: 40 }, async (_, i) => ({ userId: `old${i}`, made: await create(`old${i}`) })))
    const oldFactors = await Promise.all(old.map(async (o) => (await store.factors.factors(acc, o.userId, NOW))![0]!))
    // Each takes the account's factors tally and its pending deliveries' tally: in one order everywhere, or two would wait on each other.
    const results = await Promise.all([
      ...Array.from({ length: 40 }, (_, i) => create(`new${i}`)),
      ...old.slice(0, 20).map((o) => store.factors.removeUser(acc, o.userId, event('factor.deleted', acc))),
      ...oldFactors.slice(20).map((f) => store.factors.remove(acc, f.userId, f.id, event('factor.deleted', acc))),
    ])
    assert.deepEqual(
      results.slice(0, 40),
      Array.from({ length: 40 }, () => 'created'),
    )
    assert.deepEqual(
      results.slice(40),
      Array.from({ length: 40 }, () => true),
    )
    assert.equal(await store.webhooks.pending(), 40 + 40 + 40, 'a delivery for every event')
  })

  withStore('factors: users are per account; reads skip expired pending factors; activation once', async (store) => {
    const a = await makeAccount(store)
    const b = await makeAccount(store)
    const f = factor(a, 'same')
    await store.factors.create(f, 5, 1000, NOW, event('factor.created', a))
    assert.equal(await store.factors.factors(b, 'same', NOW), null)
    assert.equal(await store.factors.factors(a, 'nobody', NOW), null)
    assert.deepEqual(await store.factors.factors(a, 'same', NOW), [f])
    assert.equal(await store.factors.activate(b, 'same', f.id, NOW, event('factor.activated', b)), false, 'not through another account')
    const wins = await Promise.all(Array.from({ length: 10 }, () => store.factors.activate(a, 'same', f.id, NOW, event('factor.activated', a))))
    assert.equal(wins.filter(Boolean).length, 1)
    assert.equal(await eventsOf(store, a, 'factor.activated'), 1)
    const [active] = (await store.factors.factors(a, 'same', LATER))!
    assert.equal(active!.status, 'active')
    assert.equal(active!.expiresAt, null)
    assert.equal(active!.activatedAt, NOW)
    const late = factor(a, 'same')
    await store.factors.create(late, 5, 1000, NOW, event('factor.created', a))
    assert.equal(await store.factors.activate(a, 'same', late.id, LATER, event('factor.activated', a)), false, 'expired')
    assert.deepEqual(
      (await store.factors.factors(a, 'same', LATER))!.map((x) => x.id),
      [f.id],
    )
    assert.equal(await store.factors.prune(LATER), 1)
    assert.equal(await store.factors.setDrift(a, 'same', f.id, -3, NOW, event('factor.resynced', a)), true)
    assert.equal(((await store.factors.factors(a, 'same', NOW))![0] as TotpFactor).drift, -3)
    assert.equal(await store.factors.remove(b, 'same', f.id, event('factor.deleted', b)), false)
    assert.equal(await store.factors.remove(a, 'same', f.id, event('factor.deleted', a)), true)
    assert.equal(await store.factors.remove(a, 'same', f.id, event('factor.deleted', a)), false)
    assert.equal(await eventsOf(store, a, 'factor.deleted'), 1)
    assert.deepEqual(await store.factors.factors(a, 'same', NOW), [], 'the user stays without factors')
    assert.equal(await store.factors.removeUser(a, 'same', event('factor.deleted', a)), true)
    assert.equal(await store.factors.factors(a, 'same', NOW), null)
  })

  withStore('recovery codes: 50 parallel uses of one code, one wins; a new set replaces the old', async (store) => {
    const acc = await makeAccount(store)
    assert.equal(await store.factors.setRecoveryCodes(acc, 'u', ['h1'], NOW, event('recovery_codes.regenerated', acc)), false, 'no such user')
    await store.factors.create(factor(acc, 'u'), 5, 1000, NOW, event('factor.created', acc))
    const hashes = Array.from({ length: 10 }, (_, i) => `hash-${i}`)
    assert.equal(await store.factors.setRecoveryCodes(acc, 'u', hashes, NOW, event('recovery_codes.regenerated', acc)), true)
    assert.equal(await store.factors.recoveryCodesLeft(acc, 'u'), 10)
    const uses = await Promise.all(Array.from({ length: 50 }, () => store.factors.useRecoveryCode(acc, 'u', 'hash-3', NOW, event('recovery_code.used', acc))))
    assert.deepEqual(
      uses.filter((u) => u !== null),
      [9],
    )
    assert.equal(await eventsOf(store, acc, 'recovery_code.used'), 1)
    assert.equal(await store.factors.useRecoveryCode(acc, 'u', 'nope', NOW, event('recovery_code.used', acc)), null)
    const other = await makeAccount(store)
    assert.equal(await store.factors.useRecoveryCode(other, 'u', 'hash-4', NOW, event('recovery_code.used', other)), null, "not another account's")
    await Promise.all([1, 2, 3].map(() => store.factors.setRecoveryCodes(acc, 'u', ['n1', 'n2'], NOW, event('recovery_codes.regenerated', acc))))
    assert.equal(await store.factors.recoveryCodesLeft(acc, 'u'), 2, 'parallel replacements leave one set')
    assert.equal(await store.factors.useRecoveryCode(acc, 'u', 'hash-4', NOW, event('recovery_code.used', acc)), null)
    // Codes go with the user.
    await store.factors.removeUser(acc, 'u', event('factor.deleted', acc))
    assert.equal(await store.factors.recoveryCodesLeft(acc, 'u'), 0)
  })

  withStore('factors: users listed in pages by id, with their counts; a bad cursor throws CursorError', async (store) => {
    const acc = await makeAccount(store)
    for (const u of ['c', 'a', 'b']) await store.factors.create(factor(acc, u), 5, 1000, NOW, event('factor.created', acc))
    await store.factors.setRecoveryCodes(acc, 'b', ['x', 'y'], NOW, event('recovery_codes.regenerated', acc))
    const first = await store.factors.listUsers(acc, { limit: 2, nowIso: NOW })
    assert.deepEqual(
      first.items.map((u) => [u.userId, u.pending, u.active, u.recoveryCodesLeft]),
      [
        ['a', 1, 0, 0],
        ['b', 1, 0, 2],
      ],
    )
    const second = await store.factors.listUsers(acc, { limit: 2, nowIso: NOW, cursor: first.next! })
    assert.deepEqual(
      second.items.map((u) => u.userId),
      ['c'],
    )
    assert.equal(second.next, null)
    await assert.rejects(store.factors.listUsers(acc, { limit: 2, nowIso: NOW, cursor: '!!' }), CursorError)
    // Only what userCursor makes: text that decodes to a NUL (PostgreSQL refuses it: a 500) or to bytes that are not UTF-8 is refused.
    for (const cursor of ['AA', 'YQBi', 'not-a-cursor', 'x'.repeat(2000)]) {
      await assert.rejects(store.factors.listUsers(acc, { limit: 2, nowIso: NOW, cursor }), CursorError, cursor.slice(0, 20))
    }
    // The longest user ID, in characters of 4 bytes, has a cursor that is taken.
    await store.factors.listUsers(acc, { limit: 2, nowIso: NOW, cursor: userCursor('🔑'.repeat(256)) })
  })

  withStore('factors: re-sealing is compare-and-set, and finds what another version sealed', async (store) => {
    const acc = await makeAccount(store)
    const old = factor(acc, 'u', { sealed: 'v1.old', keyVersion: 1 })
    const current = factor(acc, 'u', { sealed: 'v2.cur', keyVersion: 2 })
    await store.factors.create(old, 5, 1000, NOW, event('factor.created', acc))
    await store.factors.create(current, 5, 1000, NOW, event('factor.created', acc))
    assert.deepEqual(await store.factors.staleSeals(2, '', 10), [{ id: old.id, accountId: acc, userId: 'u', sealed: 'v1.old' }])
    assert.deepEqual(
      await store.factors.sealVersions(),
      new Map([
        [1, 1],
        [2, 1],
      ]),
    )
    assert.equal(await store.factors.reseal(old.id, 'v1.changed-meanwhile', 'v2.new', 2), false)
    assert.equal(await store.factors.reseal(old.id, 'v1.old', 'v2.new', 2), true)
    assert.deepEqual(await store.factors.staleSeals(2, '', 10), [])
    assert.deepEqual(await store.factors.sealVersions(), new Map([[2, 2]]))
  })

  withStore('passkeys: a passkey round-trips; its counter moves compare-and-set, once however many move it at once', async (store) => {
    const acc = await makeAccount(store)
    const p = passkey(acc, 'u')
    assert.equal(await store.factors.create(p, 5, 1000, NOW, event('factor.created', acc)), 'created')
    assert.deepEqual(await store.factors.factors(acc, 'u', NOW), [p])
    const moves = await Promise.all(Array.from({ length: 20 }, (_, i) => store.factors.useCredential(acc, 'u', p.id, 3, 4 + i)))
    assert.equal(moves.filter(Boolean).length, 1)
    const [after] = (await store.factors.factors(acc, 'u', NOW)) as PasskeyFactor[]
    assert.equal(after!.signCount, 4 + moves.indexOf(true))
    assert.equal(await store.factors.useCredential(acc, 'u', p.id, 3, 99), false, 'a count read before the move')
    const other = await makeAccount(store)
    assert.equal(await store.factors.useCredential(other, 'u', p.id, after!.signCount, 99), false, 'not through another account')
    const totp = factor(acc, 'u')
    await store.factors.create(totp, 5, 1000, NOW, event('factor.created', acc))
    assert.equal(await store.factors.useCredential(acc, 'u', totp.id, 0, 1), false, 'a TOTP factor has no counter')
  })

  withStore('passkeys: one credential is one factor of an account, however many register it at once, for one user or several', async (store) => {
    const acc = await makeAccount(store)
    const credentialDigest = 'digest-shared'
    const same = await Promise.all(
      Array.from({ length: 10 }, () => store.factors.create({ ...passkey(acc, 'u'), credentialDigest }, 20, 1000, NOW, event('factor.created', acc))),
    )
    assert.deepEqual(same.filter((r) => r === 'created').length, 1)
    assert.deepEqual(same.filter((r) => r === 'exists').length, 9)
    const across = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        store.factors.create({ ...passkey(acc, `v${i}`), credentialDigest: 'digest-across' }, 20, 1000, NOW, event('factor.created', acc)),
      ),
    )
    assert.equal(across.filter((r) => r === 'created').length, 1)
    assert.equal(await eventsOf(store, acc, 'factor.created'), 2, 'an event for each made, none for the refused')
    const other = await makeAccount(store)
    assert.equal(
      await store.factors.create({ ...passkey(other, 'u'), credentialDigest }, 20, 1000, NOW, event('factor.created', other)),
      'created',
      'per account',
    )
  })

  withStore('passkeys: a challenge is taken once however many answer it at once; expired ones and a flood beyond the cap go', async (store) => {
    const acc = await makeAccount(store)
    const c = challenge(acc, 'u', 'd-once', NOW)
    await store.factors.addChallenge(c, 10, 1000, NOW)
    const taken = await Promise.all(Array.from({ length: 20 }, () => store.factors.takeChallenge(acc, 'd-once', NOW)))
    assert.deepEqual(
      taken.filter((x) => x !== null),
      [c],
    )
    await store.factors.addChallenge(challenge(acc, 'u', 'd-late', NOW), 10, 1000, NOW)
    assert.equal(await store.factors.takeChallenge(acc, 'd-late', LATER), null, 'expired: refused (and gone)')
    assert.equal(await store.factors.takeChallenge(acc, 'd-late', NOW), null)
    // A flood of ceremonies keeps the user's newest `max`.
    for (let i = 0; i < 12; i++)
      await store.factors.addChallenge(
        challenge(acc, 'u', `d-${String(i).padStart(2, '0')}`, `2026-01-01T12:00:${String(i).padStart(2, '0')}.000Z`),
        5,
        1000,
        NOW,
      )
    const left = await Promise.all(Array.from({ length: 12 }, (_, i) => store.factors.takeChallenge(acc, `d-${String(i).padStart(2, '0')}`, NOW)))
    assert.deepEqual(
      left.map((x) => x !== null),
      [...Array(7).fill(false), ...Array(5).fill(true)],
    )
    await store.factors.addChallenge(challenge(acc, 'u', 'd-old', NOW), 10, 1000, NOW)
    await store.factors.prune(LATER)
    assert.equal(await store.factors.takeChallenge(acc, 'd-old', LATER), null, 'refused once expired')
    // The relational stores' prune deletes it (taken at a time it was still open, it is not there); Redis's keys expire on their own.
    if (!store.kind.endsWith('+redis')) assert.equal(await store.factors.takeChallenge(acc, 'd-old', NOW), null, 'pruned once expired')
    // Another account's key cannot use a challenge up (nor take it): it stays its own account's.
    const other = await makeAccount(store)
    await store.factors.addChallenge(challenge(acc, 'u', 'd-mine', NOW), 10, 1000, NOW)
    assert.equal(await store.factors.takeChallenge(other, 'd-mine', NOW), null)
    assert.equal((await store.factors.takeChallenge(acc, 'd-mine', NOW))?.digest, 'd-mine')
  })

  withStore('passkeys: an account keeps at most its cap of open challenges, however many are added at once; expired ones do not count', async (store) => {
    const acc = await makeAccount(store)
    const other = await makeAccount(store)
    // 60 users at once, a cap of 25: 25 kept, the rest refused with when the first open one expires.
    const added = await Promise.all(Array.from({ length: 60 }, (_, i) => store.factors.addChallenge(challenge(acc, `u${i}`, `cap-${i}`, NOW), 10, 25, NOW)))
    assert.equal(added.filter((a) => a.added).length, 25)
    const refused = added.filter((a) => !a.added)
    assert.equal(refused.length, 35)
    for (const r of refused) assert.equal(r.freesAt, challenge(acc, 'x', 'x', NOW).expiresAt)
    const kept = await Promise.all(Array.from({ length: 60 }, (_, i) => store.factors.takeChallenge(acc, `cap-${i}`, NOW)))
    assert.equal(kept.filter((c) => c !== null).length, 25, 'the refused ones were not kept')
    // Taken, they are open no more: 25 fit again; a user at their own cap replaces their oldest even when the account is full.
    for (let i = 0; i < 25; i++) assert.ok((await store.factors.addChallenge(challenge(acc, `w${i}`, `again-${i}`, NOW), 1, 25, NOW)).added)
    assert.equal((await store.factors.addChallenge(challenge(acc, 'w-new', 'again-x', NOW), 1, 25, NOW)).added, false)
    assert.ok((await store.factors.addChallenge(challenge(acc, 'w0', 'again-w0', NOW), 1, 25, NOW)).added, "the user's oldest made room")
    assert.ok((await store.factors.addChallenge(challenge(other, 'u', 'other-1', NOW), 10, 25, NOW)).added, 'another account is not affected')
    // Once they expire they count no more (and go as a new one comes).
    assert.ok((await store.factors.addChallenge(challenge(acc, 'late', 'late-1', LATER, '2026-01-01T13:05:00.000Z'), 10, 1, LATER)).added)
    assert.equal(await store.factors.takeChallenge(acc, 'again-1', NOW), null, 'the expired ones went with it')
    assert.equal((await store.factors.addChallenge(challenge(acc, 'late2', 'late-2', LATER, '2026-01-01T13:05:00.000Z'), 10, 1, LATER)).added, false)
    await store.factors.prune(LATER_STILL)
    assert.ok(
      (await store.factors.addChallenge(challenge(acc, 'late3', 'late-3', LATER_STILL, '2026-01-01T14:05:00.000Z'), 10, 1, LATER_STILL)).added,
      'pruned ones count no more',
    )
  })

  withStore(
    "passkeys: a challenge of no user (a discoverable sign-in's) is taken once, ends no other, and is held to the account's cap alone",
    async (store) => {
      const acc = await makeAccount(store)
      const once = challenge(acc, null, 'none-once', NOW)
      assert.ok((await store.factors.addChallenge(once, 1, 1000, NOW)).added)
      const taken = await Promise.all(Array.from({ length: 20 }, () => store.factors.takeChallenge(acc, 'none-once', NOW)))
      assert.deepEqual(
        taken.filter((x) => x !== null),
        [once],
        'taken once, as issued to no user',
      )
      // A per-user cap of 1 ends none of them, nor a user's challenge: 60 at once against an account cap of 25 (one a user's).
      assert.ok((await store.factors.addChallenge(challenge(acc, 'u', 'users-own', NOW), 1, 25, NOW)).added)
      const added = await Promise.all(Array.from({ length: 60 }, (_, i) => store.factors.addChallenge(challenge(acc, null, `none-${i}`, NOW), 1, 25, NOW)))
      assert.equal(added.filter((a) => a.added).length, 24)
      const kept = await Promise.all(Array.from({ length: 60 }, (_, i) => store.factors.takeChallenge(acc, `none-${i}`, NOW)))
      assert.equal(kept.filter((c) => c !== null).length, 24)
      assert.ok(kept.every((c) => c === null || c.userId === null))
      assert.equal((await store.factors.takeChallenge(acc, 'users-own', NOW))?.userId, 'u')
    },
  )

  withStore("passkeys: a passkey's user is found by its credential digest, in its own account only, active passkeys only", async (store) => {
    const acc = await makeAccount(store)
    const other = await makeAccount(store)
    const p = passkey(acc, 'alice')
    assert.equal(await store.factors.create(p, 5, 1000, NOW, event('factor.created', acc)), 'created')
    const totp = factor(acc, 'alice', { status: 'active', expiresAt: null })
    assert.equal(await store.factors.create(totp, 5, 1000, NOW, event('factor.created', acc)), 'created')
    await store.factors.setSettings(
      acc,
      { rpId: 'example.com', rpName: null, origins: [], userLimit: 3, keyLimit: null, limitWindowSeconds: null },
      NOW,
      event('factor-settings.update', acc),
    )
    const found = await store.factors.attemptingCredential(acc, p.credentialDigest, NOW)
    assert.ok(found !== null)
    assert.equal(found.userId, 'alice')
    // Both made at NOW: in the order of their IDs.
    assert.deepEqual(
      found.factors.map((f) => f.id),
      [p.id, totp.id].sort(),
      "all the user's live factors, as attempting gives them",
    )
    assert.equal(found.settings.userLimit, 3)
    assert.deepEqual(found, { userId: 'alice', ...(await store.factors.attempting(acc, 'alice', NOW)) })
    assert.equal(await store.factors.attemptingCredential(other, p.credentialDigest, NOW), null, "never another account's")
    assert.equal(await store.factors.attemptingCredential(acc, 'digest-none', NOW), null)
    // Gone with the factor.
    assert.ok(await store.factors.remove(acc, 'alice', p.id, event('factor.deleted', acc)))
    assert.equal(await store.factors.attemptingCredential(acc, p.credentialDigest, NOW), null)
  })

  withStore('passkeys: factor settings, absent then set and replaced, with an event each', async (store) => {
    const acc = await makeAccount(store)
    assert.equal((await store.factors.settings(acc)).rpId, null)
    const s = { rpId: 'example.com', rpName: 'Ex', origins: ['https://example.com'], userLimit: 5, keyLimit: null, limitWindowSeconds: 60 }
    await store.factors.setSettings(acc, s, NOW, event('factor-settings.update', acc))
    assert.deepEqual(await store.factors.settings(acc), { ...s, updatedAt: NOW })
    await store.factors.setSettings(acc, { ...s, origins: [], rpId: null }, LATER, event('factor-settings.update', acc))
    assert.deepEqual(await store.factors.settings(acc), { ...s, origins: [], rpId: null, updatedAt: LATER })
    assert.equal(await eventsOf(store, acc, 'factor-settings.update'), 2)
  })
}

function passkey(accountId: string, userId: string): PasskeyFactor {
  return {
    id: newId('fct'),
    type: 'passkey',
    accountId,
    userId,
    applicationId: 'example.com',
    label: 'Laptop',
    status: 'active',
    sealed: `v1.${newId('x')}`,
    keyVersion: 1,
    createdAt: NOW,
    expiresAt: null,
    activatedAt: NOW,
    signCount: 3,
    meta: { deviceType: 'multiDevice', backedUp: true, transports: ['internal', 'hybrid'], algorithm: 'ES256' },
    credentialDigest: `digest-${newId('c')}`,
  }
}

function challenge(accountId: string, userId: string | null, digest: string, createdAt: string, expiresAt = '2026-01-01T12:05:00.000Z'): PasskeyChallenge {
  return { digest, accountId, userId, purpose: 'authentication', userVerification: 'preferred', createdAt, expiresAt }
}
