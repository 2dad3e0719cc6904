/**
 * The storage contract: one suite that every adapter must pass. Each adapter's test file
 * calls storeContract with a factory for a fresh, empty store (and limiterContract for a
 * fresh limiter on a clock the test moves). `skip` carries the notice when the service an
 * adapter needs is not configured.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { AccessStore, Limiter, PortalStore, Store } from '../../../src/storage/ports.ts'
import type { Account, ApiKeyInfo, AuditDraft, NewKey, Plan } from '../../../src/domain/accounts.ts'
import type { LimitDecision, RefusalReason } from '../../../src/domain/usage.ts'
import type { LockPolicy } from '../../../src/domain/lockout.ts'
import type { NewEmailToken, NewUser } from '../../../src/domain/portal.ts'
import { CursorError, LastOwnerError } from '../../../src/domain/errors.ts'
import { newId } from '../../../src/domain/ids.ts'
import { UNSCOPED } from '../../../src/domain/accounts.ts'
import { factorContract } from './factor-contract.ts'
import { webhookContract } from './webhook-contract.ts'
import { jobContract } from './job-contract.ts'
import { ssoContract } from './sso-contract.ts'

/** draft: an audit event for the contract (what it says is not the store's business). */
export function draft(action: string, target = 'x'): AuditDraft {
  return { actor: 'cli', action, target: { type: 'account', id: target }, accountId: null, ip: '192.0.2.1', outcome: 'success', detail: { n: 1 } }
}

export async function makeAccount(access: AccessStore, name: string, createdMs = Date.now()): Promise<Account> {
  const account: Account = { id: newId('acc'), name, status: 'active', createdAt: new Date(createdMs).toISOString() }
  await access.createAccount(account, { ...draft('account.create', account.id), accountId: account.id })
  return account
}

export function newKey(accountId: string, hash: string, extra: Partial<NewKey> = {}): NewKey {
  return { id: newId('key'), accountId, name: 'k', hash, hint: hash.slice(-4), createdAt: new Date().toISOString(), expiresAt: null, scope: UNSCOPED, ...extra }
}

export async function makeKey(access: AccessStore, accountId: string, hash: string, extra: Partial<NewKey> = {}): Promise<NewKey & Pick<ApiKeyInfo, 'id'>> {
  const key = newKey(accountId, hash, extra)
  await access.createKey(key, { ...draft('key.create', key.id), accountId })
  return key
}

const policy: LockPolicy = { maxFailures: 3, baseSeconds: 10, maxSeconds: 25 }

/** storeContract: what every store does; `open` gives a fresh store, stamping by `clock` when one is given. */
export function storeContract(name: string, open: (clock?: () => number) => Promise<Store>, skip: false | string = false): void {
  const withStore = (title: string, body: (s: Store) => Promise<void>) =>
    test(`${name}: ${title}`, { skip }, async () => {
      const store = await open()
      try {
        await body(store)
      } finally {
        await store.close()
      }
    })

  withStore('accounts, keys and subscriptions resolve to one grant', async ({ access }) => {
    assert.equal(await access.countAccounts(), 0)
    const account = await makeAccount(access, 'Acme')
    assert.equal((await access.getAccount(account.id))?.name, 'Acme')
    const key = await makeKey(access, account.id, 'hash-1')
    let grant = await access.findGrant('hash-1')
    assert.deepEqual(
      { ...grant, subscriptions: [...grant!.subscriptions] },
      {
        keyId: key.id,
        accountId: account.id,
        revoked: false,
        accountActive: true,
        expiresAt: Infinity,
        subscriptions: [],
        scope: { groups: null, regions: null },
        plan: null,
      },
    )
    await access.setSubscription(account.id, 'eu', 'totp', 'active', draft('subscription.set'))
    await access.setSubscription(account.id, 'us', 'converter', 'active', draft('subscription.set'))
    await access.setSubscription(account.id, 'us', 'converter', 'inactive', draft('subscription.set'))
    await access.setSubscription(account.id, 'apac', 'totp', 'pending', draft('subscription.set'))
    grant = await access.findGrant('hash-1')
    assert.deepEqual([...grant!.subscriptions], ['eu:totp'], 'inactive and pending subscriptions allow nothing')
    assert.deepEqual(
      (await access.listSubscriptions(account.id)).map((s) => `${s.region}:${s.group}:${s.status}`),
      ['apac:totp:pending', 'eu:totp:active', 'us:converter:inactive'],
    )
    assert.deepEqual(await access.updateAccount(account.id, { status: 'suspended' }, draft('account.update')), { ...account, status: 'suspended' })
    assert.equal((await access.findGrant('hash-1'))?.accountActive, false)
    assert.equal((await access.updateAccount(account.id, { name: 'Acme Ltd' }, draft('account.update')))?.name, 'Acme Ltd')
    assert.equal(await access.updateAccount('acc_missing', { status: 'active' }, draft('account.update')), null)
    assert.equal(await access.revokeKey(key.id, draft('key.revoke')), true)
    assert.equal(await access.revokeKey(key.id, draft('key.revoke')), false, 'already revoked')
    assert.equal((await access.findGrant('hash-1'))?.revoked, true)
    assert.equal(await access.findGrant('hash-unknown'), null)
    assert.deepEqual(
      (await access.listKeys(account.id)).map((k) => k.id),
      [key.id],
    )
    assert.equal((await access.getKey(key.id))?.revokedAt !== null, true)
    assert.equal(await access.getKey('key_missing'), null)
    assert.equal((await access.listAccounts({ limit: 10 })).items.length, 1)
  })

  withStore('keys: expiry and scope ride on the grant; the listing shows them', async ({ access }) => {
    const account = await makeAccount(access, 'x')
    for (const r of ['eu', 'us'] as const)
      for (const g of ['totp', 'converter'] as const) {
        await access.setSubscription(account.id, r, g, 'active', draft('subscription.set'))
      }
    const expiresAt = '2030-01-02T03:04:05.000Z'
    const key = await makeKey(access, account.id, 'hash-s', { expiresAt, scope: { groups: ['totp'], regions: null } })
    const grant = await access.findGrant('hash-s')
    assert.equal(grant?.expiresAt, Date.parse(expiresAt))
    assert.deepEqual([...grant!.subscriptions].sort(), ['eu:totp', 'us:totp'], "only the scope's groups")
    await makeKey(access, account.id, 'hash-r', { scope: { groups: null, regions: ['us'] } })
    assert.deepEqual([...(await access.findGrant('hash-r'))!.subscriptions].sort(), ['us:converter', 'us:totp'])
    await makeKey(access, account.id, 'hash-n', { scope: { groups: [], regions: null } })
    assert.deepEqual([...(await access.findGrant('hash-n'))!.subscriptions], [], 'an empty scope allows nothing')
    const listed = (await access.listKeys(account.id)).find((k) => k.id === key.id)
    assert.deepEqual(
      { expiresAt: listed?.expiresAt, scope: listed?.scope, rolledTo: listed?.rolledTo, lastUsedAt: listed?.lastUsedAt },
      { expiresAt, scope: { groups: ['totp'], regions: null }, rolledTo: null, lastUsedAt: null },
    )
  })

  withStore('roll: the old key works until the grace ends (or stops at once), the new one from now on', async ({ access, audit }) => {
    const account = await makeAccount(access, 'x')
    const old = await makeKey(access, account.id, 'hash-old', { scope: { groups: ['totp'], regions: null } })
    const now = '2026-11-23T10:00:00.000Z'
    const next = newKey(account.id, 'hash-new', { scope: old.scope })
    assert.equal(await access.rollKey(old.id, next, now, '2026-11-24T10:00:00.000Z', draft('key.roll', old.id)), true)
    assert.equal((await access.findGrant('hash-old'))?.expiresAt, Date.parse('2026-11-24T10:00:00.000Z'))
    assert.equal((await access.findGrant('hash-new'))?.expiresAt, Infinity)
    const listed = await access.getKey(old.id)
    assert.deepEqual([listed?.rolledTo, listed?.revokedAt], [next.id, null])
    assert.equal(await access.rollKey(old.id, newKey(account.id, 'hash-x'), now, null, draft('key.roll', old.id)), false, 'a rolled key rolls once')
    assert.equal(await access.findGrant('hash-x'), null, 'nothing written')
    // Grace 0: the old key stops at once.
    const next2 = newKey(account.id, 'hash-new2')
    assert.equal(await access.rollKey(next.id, next2, now, null, draft('key.roll', next.id)), true)
    assert.equal((await access.findGrant('hash-new'))?.revoked, true)
    // An expired key cannot be rolled.
    const expired = await makeKey(access, account.id, 'hash-exp', { expiresAt: '2026-11-01T00:00:00.000Z' })
    assert.equal(await access.rollKey(expired.id, newKey(account.id, 'hash-y'), now, null, draft('key.roll', expired.id)), false)
    // A grace longer than the old key's own expiry keeps the earlier one.
    const soon = await makeKey(access, account.id, 'hash-soon', { expiresAt: '2026-11-23T12:00:00.000Z' })
    assert.equal(await access.rollKey(soon.id, newKey(account.id, 'hash-z'), now, '2026-11-30T00:00:00.000Z', draft('key.roll', soon.id)), true)
    assert.equal((await access.findGrant('hash-soon'))?.expiresAt, Date.parse('2026-11-23T12:00:00.000Z'))
    const rolls = (await audit.list({ action: 'key.roll', limit: 10 })).items
    assert.equal(rolls.length, 3, 'one event per roll that happened')
  })

  withStore('roll and revoke end the grace of the key rolled to the one they end: a chain keeps at most two working keys', async ({ access }) => {
    const account = await makeAccount(access, 'x')
    const far = '2099-01-01T00:00:00.000Z'
    const first = await makeKey(access, account.id, 'hash-chain-0')
    const second = newKey(account.id, 'hash-chain-1')
    const now = new Date().toISOString()
    assert.equal(await access.rollKey(first.id, second, now, far, draft('key.roll', first.id)), true)
    assert.equal((await access.findGrant('hash-chain-0'))?.expiresAt, Date.parse(far), 'in its grace')
    assert.equal(await access.rollKey(second.id, newKey(account.id, 'hash-chain-2'), now, far, draft('key.roll', second.id)), true)
    assert.equal((await access.findGrant('hash-chain-0'))?.expiresAt, Date.parse(now), "rolling its successor ends the first key's grace now")
    assert.equal((await access.findGrant('hash-chain-1'))?.expiresAt, Date.parse(far), 'the second is in its grace')
    const third = (await access.listKeys(account.id)).find((k) => k.rolledTo === null)!
    assert.equal(await access.revokeKey(third.id, draft('key.revoke', third.id)), true)
    const second2 = await access.findGrant('hash-chain-1')
    assert.ok(second2 !== null && second2.expiresAt <= Date.now() && !second2.revoked, "revoking its successor ends the second key's grace, unrevoked")
  })

  withStore('createKey and rollKey with endedKept delete the ended keys past it, those that ended longest ago first', async ({ access }) => {
    const account = await makeAccount(access, 'x')
    const base = Date.now() - 60_000
    const at = (s: number) => new Date(base + s * 1000).toISOString()
    // Ended at 1 s, 2 s (expired then, revoked now: it ended at the earlier), 3 s and 4 s, and one live key.
    await makeKey(access, account.id, 'ended-1', { expiresAt: at(1) })
    const second = await makeKey(access, account.id, 'ended-2', { expiresAt: at(2) })
    assert.equal(await access.revokeKey(second.id, draft('key.revoke', second.id)), true)
    await makeKey(access, account.id, 'ended-3', { expiresAt: at(3) })
    await makeKey(access, account.id, 'ended-4', { expiresAt: at(4) })
    const live = await makeKey(access, account.id, 'live')
    const hashes = async () => (await access.listKeys(account.id)).map((k) => k.hint).sort()
    const nowIso = new Date().toISOString()
    assert.equal(
      await access.createKey(newKey(account.id, 'made-5'), { ...draft('key.create'), accountId: account.id }, { max: 10, nowIso, endedKept: 2 }),
      true,
    )
    assert.deepEqual(await hashes(), ['ed-3', 'ed-4', 'de-5', 'live'].sort(), 'the two that ended last are kept')
    assert.equal(await access.rollKey(live.id, newKey(account.id, 'rolled-6'), nowIso, null, draft('key.roll', live.id), 2), true)
    assert.deepEqual(await hashes(), ['ed-4', 'de-5', 'live', 'ed-6'].sort(), 'the key the roll ended is kept, the oldest goes')
  })

  withStore('roll: of 10 parallel rolls of one key, exactly one succeeds', async ({ access, audit }) => {
    const account = await makeAccount(access, 'x')
    const old = await makeKey(access, account.id, 'hash-race')
    const nexts = Array.from({ length: 10 }, (_, i) => newKey(account.id, `hash-race-${i}`))
    const results = await Promise.all(nexts.map((next) => access.rollKey(old.id, next, new Date().toISOString(), null, draft('key.roll', old.id))))
    assert.equal(results.filter((r) => r).length, 1)
    const winner = nexts[results.indexOf(true)]!
    assert.equal((await access.getKey(old.id))?.rolledTo, winner.id)
    assert.deepEqual((await access.listKeys(account.id)).map((k) => k.id).sort(), [old.id, winner.id].sort(), 'the losers wrote no key')
    assert.equal((await audit.list({ action: 'key.roll', limit: 20 })).items.length, 1, 'nor an event')
  })

  withStore('createKey with a limit: of 30 parallel creations, the cap; revoked, rolled-away and expired keys do not count', async ({ access, audit }) => {
    const account = await makeAccount(access, 'Capped')
    const now = Date.now()
    const nowIso = new Date(now).toISOString()
    await makeKey(access, account.id, 'cap-expired', { expiresAt: new Date(now - 1000).toISOString() })
    const revoked = await makeKey(access, account.id, 'cap-revoked')
    await access.revokeKey(revoked.id, { ...draft('key.revoke', revoked.id), accountId: account.id })
    const made = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        access.createKey(newKey(account.id, `cap-${i}`), { ...draft('key.create'), accountId: account.id }, { max: 4, nowIso }),
      ),
    )
    assert.equal(made.filter(Boolean).length, 4)
    const live = (await access.listKeys(account.id)).filter((k) => k.revokedAt === null && k.expiresAt === null)
    assert.equal(live.length, 4)
    assert.equal((await audit.list({ accountId: account.id, action: 'key.create', limit: 100 })).items.length, 4 + 2, 'no event for a refused key')
    // Rolled with a grace, the old key is on its way out: its place is free.
    assert.equal(
      await access.rollKey(live[0]!.id, newKey(account.id, 'cap-rolled'), nowIso, new Date(now + 60_000).toISOString(), {
        ...draft('key.roll'),
        accountId: account.id,
      }),
      true,
    )
    assert.equal(
      await access.createKey(newKey(account.id, 'cap-after-roll'), { ...draft('key.create'), accountId: account.id }, { max: 4, nowIso }),
      false,
      "the new key took the old one's place",
    )
    assert.equal(
      await access.createKey(newKey(account.id, 'cap-no-limit'), { ...draft('key.create'), accountId: account.id }),
      true,
      'without a limit, no count',
    )
  })

  withStore('createAccount with an owner: of 20 parallel creations for one user, the cap; the account and its owner together', async ({ access, portal }) => {
    const user = await makeUser(portal, 'cap-owner@example.com')
    const owner = (accountId: string) => ({ userId: user.id, max: 3, audit: { ...draft('member.add'), accountId } })
    const made = await Promise.all(
      Array.from({ length: 20 }, (_, i) => {
        const account: Account = { id: newId('acc'), name: `owned-${i}`, status: 'active', createdAt: new Date().toISOString() }
        return access.createAccount(account, { ...draft('account.create', account.id), accountId: account.id }, owner(account.id))
      }),
    )
    assert.equal(made.filter(Boolean).length, 3)
    assert.equal(await access.countAccounts(), 3, 'no account without its owner')
    assert.deepEqual(
      (await portal.membershipsOf(user.id)).map((m) => m.role),
      ['owner', 'owner', 'owner'],
    )
  })

  withStore('a duplicate account id fails and leaves no audit event', async ({ access, audit }) => {
    const account = await makeAccount(access, 'x')
    await assert.rejects(access.createAccount({ ...account, name: 'y' }, draft('account.create', account.id)))
    assert.equal((await access.getAccount(account.id))?.name, 'x')
    assert.deepEqual(
      (await audit.list({ limit: 10 })).items.map((e) => e.action),
      ['account.create'],
    )
  })

  withStore('a pending subscription is approved once, however many approvals arrive at once', async ({ access, audit }) => {
    const account = await makeAccount(access, 'x')
    await access.setSubscription(account.id, 'eu', 'totp', 'pending', draft('subscription.set'))
    const results = await Promise.all(
      Array.from({ length: 20 }, () => access.setSubscription(account.id, 'eu', 'totp', 'active', draft('subscription.approve'), 'pending')),
    )
    assert.equal(results.filter(Boolean).length, 1)
    assert.equal((await audit.list({ action: 'subscription.approve', limit: 50 })).items.length, 1, 'one event, for the one change')
    assert.equal(await access.setSubscription(account.id, 'us', 'totp', 'active', draft('subscription.approve'), 'pending'), false, 'no row is not pending')
    assert.deepEqual(
      (await access.listSubscriptions(account.id)).map((s) => s.status),
      ['active'],
    )
  })

  withStore("pending subscriptions of every account page oldest request first, with their account's name", async ({ access }) => {
    const accounts = [await makeAccount(access, 'one'), await makeAccount(access, 'two'), await makeAccount(access, 'three')]
    const asked: string[] = []
    for (const region of ['eu', 'us', 'apac'] as const) {
      for (const account of accounts) {
        await access.setSubscription(account.id, region, 'totp', 'pending', draft('subscription.set'))
        asked.push(`${account.name}:${region}`)
      }
    }
    await access.setSubscription(accounts[0]!.id, 'eu', 'converter', 'active', draft('subscription.set'))
    await access.setSubscription(accounts[1]!.id, 'us', 'totp', 'active', draft('subscription.approve'), 'pending')
    const seen: string[] = []
    let cursor: string | undefined
    do {
      const page = await access.listPendingSubscriptions({ limit: 2, ...(cursor === undefined ? {} : { cursor }) })
      assert.ok(page.items.every((s) => s.status === 'pending' && s.group === 'totp'))
      seen.push(...page.items.map((s) => `${s.accountName}:${s.region}`))
      cursor = page.next ?? undefined
    } while (cursor !== undefined)
    // Requests made in one millisecond come in account order; the order of the requests is kept otherwise.
    assert.deepEqual([...seen].sort(), asked.filter((a) => a !== 'two:us').sort(), 'every pending request once, the approved one gone')
    assert.equal(new Set(seen).size, seen.length)
    const times = (await access.listPendingSubscriptions({ limit: 50 })).items.map((s) => s.updatedAt)
    assert.deepEqual(times, [...times].sort(), 'oldest first')
    await assert.rejects(access.listPendingSubscriptions({ limit: 10, cursor: 'not-a-cursor' }), CursorError)
  })

  withStore('last use: kept per key, never moved back', async ({ access }) => {
    const account = await makeAccount(access, 'x')
    const key = await makeKey(access, account.id, 'hash-u')
    await access.touchKeys([{ keyId: key.id, atMs: Date.parse('2026-11-23T10:00:00Z'), region: 'us' }])
    await access.touchKeys([
      { keyId: key.id, atMs: Date.parse('2026-11-23T09:00:00Z'), region: 'eu' },
      { keyId: 'key_missing', atMs: 0, region: 'eu' },
    ])
    const k = await access.getKey(key.id)
    assert.deepEqual([k?.lastUsedAt, k?.lastUsedRegion], ['2026-11-23T10:00:00.000Z', 'us'])
    await access.touchKeys([])
  })

  withStore('accounts page in creation order with a cursor, filtered by status and name', async ({ access }) => {
    const made: Account[] = []
    for (let i = 0; i < 23; i++) made.push(await makeAccount(access, i % 3 === 0 ? `Big_${i}%` : `small ${i}`, Date.UTC(2026, 0, 1, 0, 0, i % 5)))
    await access.updateAccount(made[4]!.id, { status: 'suspended' }, draft('account.update'))
    const seen: string[] = []
    let cursor: string | undefined
    let pages = 0
    do {
      const page = await access.listAccounts({ limit: 10, ...(cursor === undefined ? {} : { cursor }) })
      seen.push(...page.items.map((a) => a.id))
      cursor = page.next ?? undefined
      pages++
    } while (cursor !== undefined)
    assert.equal(pages, 3)
    const expected = [...made].sort((x, y) => x.createdAt.localeCompare(y.createdAt) || x.id.localeCompare(y.id)).map((a) => a.id)
    assert.deepEqual(seen, expected, 'every account once, oldest first')
    assert.deepEqual(
      (await access.listAccounts({ limit: 50, status: 'suspended' })).items.map((a) => a.id),
      [made[4]!.id],
    )
    const big = await access.listAccounts({ limit: 50, name: 'big_' })
    assert.equal(big.items.length, 8, 'case-insensitive substring')
    assert.equal(big.next, null)
    assert.equal((await access.listAccounts({ limit: 50, name: '_1' })).items.length, 3, '_ is a character, not a wildcard (Big_12%, Big_15%, Big_18%)')
    assert.equal((await access.listAccounts({ limit: 50, name: '%' })).items.length, 8, '% is a character, not a wildcard')
    await assert.rejects(access.listAccounts({ limit: 10, cursor: 'not-a-cursor' }), CursorError)
  })

  withStore('every change writes its audit event in its transaction; a failed change writes none', async ({ access, audit }) => {
    const account = await makeAccount(access, 'x')
    await makeKey(access, account.id, 'hash-a')
    await assert.rejects(access.createKey(newKey(account.id, 'hash-a'), draft('key.create')), 'a duplicate hash fails')
    await access.setPlan(account.id, { rate: 1, burst: 1, quota: 5, period: 'day', weights: { totp: 2, converter: 1 } }, draft('plan.set'))
    assert.equal(await access.setPlan('acc_missing', null, draft('plan.delete')), false)
    const events = (await audit.list({ limit: 50 })).items
    assert.deepEqual(
      events.map((e) => e.action),
      ['plan.set', 'key.create', 'account.create'],
      'newest first; none for the failures',
    )
    const [plan] = events
    assert.deepEqual(
      { actor: plan!.actor, target: plan!.target, accountId: plan!.accountId, ip: plan!.ip, outcome: plan!.outcome, detail: plan!.detail },
      { actor: 'cli', target: { type: 'account', id: 'x' }, accountId: null, ip: '192.0.2.1', outcome: 'success', detail: { n: 1 } },
    )
    assert.ok(Math.abs(Date.parse(plan!.at) - Date.now()) < 60_000)
    const failure = await audit.append({ ...draft('key.revoke'), outcome: 'failure', detail: { reason: 'no such key' } })
    assert.equal((await audit.list({ limit: 1 })).items[0]?.id, failure.id)
  })

  withStore('audit events page newest first with a cursor, filtered by account, actor and action; retention prunes the oldest', async ({ audit }) => {
    for (let i = 0; i < 25; i++) {
      await audit.append({
        ...draft(i % 2 === 0 ? 'key.create' : 'key.revoke'),
        actor: i % 5 === 0 ? 'admin-token:tok_1' : 'cli',
        accountId: i < 10 ? 'acc_a' : 'acc_b',
        detail: { i },
      })
    }
    const seen: number[] = []
    let cursor: string | undefined
    do {
      const page = await audit.list({ limit: 7, ...(cursor === undefined ? {} : { cursor }) })
      seen.push(...page.items.map((e) => Number(e.detail.i)))
      cursor = page.next ?? undefined
    } while (cursor !== undefined)
    assert.deepEqual(
      seen,
      Array.from({ length: 25 }, (_, i) => 24 - i),
    )
    assert.deepEqual(
      (await audit.list({ limit: 50, accountId: 'acc_a', action: 'key.revoke' })).items.map((e) => e.detail.i),
      [9, 7, 5, 3, 1],
    )
    assert.deepEqual(
      (await audit.list({ limit: 50, actor: 'admin-token:tok_1' })).items.map((e) => e.detail.i),
      [20, 15, 10, 5, 0],
    )
    await assert.rejects(audit.list({ limit: 5, cursor: 'evt_bad' }), CursorError)
    assert.equal(await audit.prune(new Date(Date.now() - 3_600_000).toISOString()), 0, 'nothing is that old')
    assert.equal(await audit.prune(new Date(Date.now() + 3_600_000).toISOString()), 25)
  })

  withStore('admin tokens are found by hash until revoked', async ({ adminTokens, audit }) => {
    const token = { id: 'adm_1', name: 'ops', scope: 'read' as const, createdAt: new Date().toISOString(), revokedAt: null }
    await adminTokens.create({ ...token, hash: 'th-1' }, draft('admin-token.create', 'adm_1'))
    assert.deepEqual(await adminTokens.find('th-1'), token)
    assert.equal(await adminTokens.find('th-2'), null)
    assert.deepEqual(
      (await adminTokens.list()).map((t) => t.id),
      ['adm_1'],
    )
    assert.equal(await adminTokens.revoke('adm_1', draft('admin-token.revoke', 'adm_1')), true)
    assert.equal(await adminTokens.revoke('adm_1', draft('admin-token.revoke', 'adm_1')), false)
    assert.equal(await adminTokens.find('th-1'), null)
    assert.notEqual((await adminTokens.list())[0]?.revokedAt, null)
    assert.deepEqual(
      (await audit.list({ limit: 5 })).items.map((e) => e.action),
      ['admin-token.revoke', 'admin-token.create'],
    )
  })

  withStore("plans: an account's own plan rides on its grant until reset", async ({ access }) => {
    const account = await makeAccount(access, 'x')
    await makeKey(access, account.id, 'hash-p')
    assert.equal(await access.getPlan(account.id), null)
    const plan: Plan = { rate: 2.5, burst: 10, quota: 1000, period: 'day', weights: { totp: 2, converter: 1 } }
    assert.equal(await access.setPlan(account.id, plan, draft('plan.set')), true)
    assert.deepEqual(await access.getPlan(account.id), plan)
    assert.deepEqual((await access.findGrant('hash-p'))?.plan, plan)
    const changed: Plan = { rate: 0, burst: 1, quota: 0, period: 'month', weights: { totp: 0, converter: 5 } }
    assert.equal(await access.setPlan(account.id, changed, draft('plan.set')), true)
    assert.deepEqual((await access.findGrant('hash-p'))?.plan, changed)
    assert.equal(await access.setPlan(account.id, null, draft('plan.delete')), true)
    assert.equal((await access.findGrant('hash-p'))?.plan, null)
    assert.equal(await access.setPlan('acc_missing', plan, draft('plan.set')), false)
    assert.equal(await access.setPlan('acc_missing', null, draft('plan.delete')), false)
  })

  withStore('usage adds up per account, key, region, day and group, in calls and units', async ({ usage }) => {
    const row = (accountId: string, keyId: string, region: 'eu' | 'us', day: string, group: 'totp' | 'converter', count: number) => ({
      accountId,
      keyId,
      region,
      day,
      group,
      count,
      units: group === 'totp' ? count * 2 : count,
    })
    await usage.add([
      row('a', 'k1', 'eu', '2026-11-20', 'totp', 3),
      row('a', 'k1', 'eu', '2026-11-21', 'totp', 1),
      row('b', 'k9', 'eu', '2026-11-21', 'totp', 7),
    ])
    await usage.add([
      row('a', 'k1', 'eu', '2026-11-21', 'totp', 2),
      row('a', 'k2', 'us', '2026-11-21', 'totp', 4),
      row('a', 'k2', 'eu', '2026-11-21', 'converter', 5),
    ])
    await usage.add([])
    assert.deepEqual(await usage.report('a', '2026-11-21', '2026-11-21', 'day'), [
      { day: '2026-11-21', group: 'converter', count: 5, units: 5 },
      { day: '2026-11-21', group: 'totp', count: 7, units: 14 },
    ])
    assert.deepEqual(await usage.report('a', '2026-11-01', '2026-11-30', 'key'), [
      { keyId: 'k1', group: 'totp', count: 6, units: 12 },
      { keyId: 'k2', group: 'converter', count: 5, units: 5 },
      { keyId: 'k2', group: 'totp', count: 4, units: 8 },
    ])
    assert.deepEqual(await usage.report('a', '2026-11-01', '2026-11-30', 'region'), [
      { region: 'eu', group: 'converter', count: 5, units: 5 },
      { region: 'eu', group: 'totp', count: 6, units: 12 },
      { region: 'us', group: 'totp', count: 4, units: 8 },
    ])
    assert.equal((await usage.report('a', '2026-11-01', '2026-11-30', 'day')).length, 3)
    assert.equal(await usage.total('a', '2026-11-01', '2026-11-30'), 25, 'in units')
    assert.equal(await usage.total('a', '2026-11-21', '2026-11-21'), 19)
    assert.equal(await usage.total('c', '2026-11-01', '2026-11-30'), 0)
  })

  withStore(
    'refused calls add up per account, key, region, group and reason, the most first, with the last day; a batch with one key twice sums it; nodes adding at once lose nothing',
    async ({ usage }) => {
      const row = (accountId: string, keyId: string, day: string, reason: RefusalReason, count: number, region: 'eu' | 'us' = 'eu') =>
        ({ accountId, keyId, region, day, group: 'totp', reason, count }) as const
      await usage.addRefusals([
        row('a', 'k1', '2026-11-20', 'not subscribed', 3),
        row('a', 'k1', '2026-11-21', 'not subscribed', 1),
        row('a', 'k1', '2026-11-21', 'not subscribed', 1),
        row('a', 'k2', '2026-11-21', 'over quota', 2, 'us'),
        row('b', 'k9', '2026-11-21', 'revoked', 9),
      ])
      await usage.addRefusals([])
      // Five writers at once, as five nodes flush: every count is kept.
      await Promise.all(Array.from({ length: 5 }, () => usage.addRefusals([row('a', 'k2', '2026-11-22', 'over quota', 2, 'us')])))
      assert.deepEqual(await usage.refusals('a', '2026-11-01', '2026-11-30'), [
        { keyId: 'k2', region: 'us', group: 'totp', reason: 'over quota', count: 12, lastDay: '2026-11-22' },
        { keyId: 'k1', region: 'eu', group: 'totp', reason: 'not subscribed', count: 5, lastDay: '2026-11-21' },
      ])
      assert.deepEqual(await usage.refusals('a', '2026-11-20', '2026-11-20'), [
        { keyId: 'k1', region: 'eu', group: 'totp', reason: 'not subscribed', count: 3, lastDay: '2026-11-20' },
      ])
      assert.deepEqual(await usage.refusals('c', '2026-11-01', '2026-11-30'), [])
    },
  )

  withStore("usage by key over ranges that cut months: whole months and edge days add up to the days' sum", async ({ usage }) => {
    const days = ['2026-07-31', '2026-08-01', '2026-08-15', '2026-08-31', '2026-09-01', '2026-09-30', '2026-10-01', '2026-10-02', '2026-12-31', '2027-01-01']
    await usage.add(
      days.map((day, i) => ({ accountId: 'a', keyId: `k${i % 3}`, region: 'eu' as const, day, group: 'totp' as const, count: 1 + i, units: 2 + 2 * i })),
    )
    const ranges = [
      ['2026-07-31', '2027-01-01'],
      ['2026-08-01', '2026-09-30'],
      ['2026-08-02', '2026-09-30'],
      ['2026-08-01', '2026-10-01'],
      ['2026-08-15', '2026-08-15'],
      ['2026-09-01', '2026-09-30'],
      ['2026-08-31', '2026-10-01'],
      ['2026-10-03', '2026-12-30'],
      ['2026-12-01', '2027-01-31'],
      // Cut months taken whole less their days outside the range; k1's only use in August (the 1st) is outside the first two: no line for it.
      ['2026-08-02', '2026-08-31'],
      ['2026-08-02', '2026-08-30'],
      ['2026-07-02', '2026-09-29'],
      ['2026-08-02', '2026-10-30'],
      ['2026-07-30', '2026-10-02'],
    ]
    for (const [from, to] of ranges) {
      const expected = new Map<string, number>()
      days.forEach((day, i) => {
        if (day >= from! && day <= to!) expected.set(`k${i % 3}`, (expected.get(`k${i % 3}`) ?? 0) + 1 + i)
      })
      const got = await usage.report('a', from!, to!, 'key')
      assert.deepEqual(
        got.map((l) => [l.keyId, l.count]),
        [...expected].sort(),
        `${from} to ${to}`,
      )
      assert.ok(got.every((l) => l.units === 2 * l.count))
    }
  })

  withStore('changes made through the store are announced', async ({ access }) => {
    let calls = 0
    let commits = 0
    const off = access.onChange(() => {
      calls++
    })
    const offCommit = access.onCommit(() => {
      commits++
    })
    const account = await makeAccount(access, 'x')
    await access.setSubscription(account.id, 'eu', 'totp', 'active', draft('subscription.set'))
    await access.setPlan(account.id, { rate: 1, burst: 1, quota: 0, period: 'day', weights: { totp: 1, converter: 1 } }, draft('plan.set'))
    const key = await makeKey(access, account.id, 'hash-c')
    await access.revokeKey(key.id, draft('key.revoke'))
    await access.updateAccount(account.id, { status: 'suspended' }, draft('account.update'))
    assert.ok(calls >= 6)
    assert.equal(commits, 6)
    off()
    offCommit()
    const before = calls
    await makeAccount(access, 'y')
    assert.equal(calls, before, 'no calls after unsubscribing')
    assert.equal(commits, 6)
  })

  withStore('onboarding records are replaced per account, application and user', async ({ access, onboarding }) => {
    const account = await makeAccount(access, 'x')
    const base = { accountId: account.id, applicationId: 'app', userId: 'u', algorithm: 'SHA1', digits: 6, period: 30 } as const
    const first = await onboarding.upsert({ ...base, secretFingerprint: 'f1' }, new Date(1000))
    const second = await onboarding.upsert({ ...base, algorithm: 'SHA256', secretFingerprint: 'f2' }, new Date(2000))
    assert.equal(second.createdAt, first.createdAt)
    assert.equal(second.updatedAt, new Date(2000).toISOString())
    assert.deepEqual(await onboarding.get(account.id, 'app', 'u'), second)
    assert.equal(second.algorithm, 'SHA256')
    assert.equal(await onboarding.get(account.id, 'app', 'other'), null)
  })

  withStore('onboarding records are found by secret fingerprint, within their account', async ({ access, onboarding }) => {
    const [a, b] = [await makeAccount(access, 'a'), await makeAccount(access, 'b')]
    const base = { applicationId: 'app', algorithm: 'SHA1', digits: 8, period: 30 } as const
    await onboarding.upsert({ ...base, accountId: a.id, userId: 'u1', secretFingerprint: 'f1' }, new Date(1000))
    await onboarding.upsert({ ...base, accountId: a.id, userId: 'u2', digits: 7, secretFingerprint: 'f1' }, new Date(3000))
    await onboarding.upsert({ ...base, accountId: b.id, userId: 'u1', secretFingerprint: 'f2' }, new Date(2000))
    assert.equal((await onboarding.findBySecret(a.id, ['fx', 'f1']))?.userId, 'u2', 'the most recently updated record')
    assert.equal(await onboarding.findBySecret(a.id, ['f2']), null, "another account's record")
    assert.equal((await onboarding.findBySecret(b.id, ['f2']))?.digits, 8)
    assert.equal(await onboarding.findBySecret(b.id, []), null)
  })

  withStore('verification state: steps are accepted once, failures lock with a doubling delay', async ({ verification: v }) => {
    const accepted = { kind: 'accepted' }
    const invalid = { kind: 'invalid' }
    assert.deepEqual(await v.settle('k', 10, 0, policy), accepted)
    assert.deepEqual(await v.settle('k', 10, 0, policy), { kind: 'reused' })
    assert.deepEqual(await v.settle('k', 9, 0, policy), { kind: 'reused' })
    assert.deepEqual(await v.settle('k', 11, 0, policy), accepted, 'a later step, within the run')
    assert.deepEqual(await v.settle('k', null, 1000, policy), invalid)
    assert.deepEqual(await v.settle('k', null, 1000, policy), invalid)
    assert.deepEqual(await v.settle('k', null, 1000, policy), { kind: 'invalid', locks: true }, 'the third failure locks for the next, and says so')
    assert.deepEqual(await v.settle('k', 12, 5000, policy), { kind: 'locked', lockedUntil: 11_000 }, 'a right code waits too')
    assert.deepEqual(await v.settle('k', null, 10_999, policy), { kind: 'locked', lockedUntil: 11_000 }, 'a refused attempt moves nothing')
    assert.deepEqual(await v.settle('k', null, 11_000, policy), { kind: 'invalid', locks: true }, 'past the threshold, each failure locks')
    assert.deepEqual(await v.settle('k', null, 30_000, policy), { kind: 'locked', lockedUntil: 31_000 }, 'doubled: 20 s')
    assert.deepEqual(await v.settle('k', 11, 31_000, policy), { kind: 'reused', locks: true }, 'a replay is a failure')
    assert.deepEqual(await v.settle('k', null, 31_000, policy), { kind: 'locked', lockedUntil: 56_000 }, 'capped at 25 s')
    assert.deepEqual(await v.settle('k', 12, 60_000, policy), accepted)
    for (let i = 0; i < 3; i++)
      assert.deepEqual(await v.settle('k', null, 60_000, policy), i < 2 ? invalid : { kind: 'invalid', locks: true }, 'an acceptance ends the run')
    assert.deepEqual(await v.settle('k', null, 60_000, policy), { kind: 'locked', lockedUntil: 70_000 })
    assert.deepEqual(await v.settle('other', null, 60_000, policy), invalid, 'keys are independent')
  })

  withStore('200 parallel wrong guesses: only maxFailures are answered before the lock', async ({ verification: v }) => {
    const strict: LockPolicy = { maxFailures: 5, baseSeconds: 60, maxSeconds: 3600 }
    for (let round = 0; round < 3; round++) {
      const results = await Promise.all(Array.from({ length: 200 }, () => v.settle(`guess-${round}`, null, 1000, strict)))
      assert.equal(results.filter((r) => r.kind === 'invalid').length, 5, `round ${round}`)
      assert.equal(results.filter((r) => r.kind === 'invalid' && r.locks === true).length, 1, 'one lockout started, by the fifth')
      assert.ok(results.every((r) => r.kind === 'invalid' || (r.kind === 'locked' && r.lockedUntil === 61_000)))
    }
  })

  withStore(
    'a right code sent 100 times at once is accepted once; a right guess among 200 parallel wrong ones wins only inside the policy',
    async ({ verification: v }) => {
      const strict: LockPolicy = { maxFailures: 5, baseSeconds: 60, maxSeconds: 3600 }
      const results = await Promise.all(Array.from({ length: 100 }, () => v.settle('correct', 7, 1000, strict)))
      assert.equal(results.filter((r) => r.kind === 'accepted').length, 1)
      const mixed = await Promise.all(Array.from({ length: 200 }, (_, i) => v.settle('mixed', i === 150 ? 7 : null, 1000, strict)))
      // The store orders them as they come: the right code wins only if it comes before the fifth failure.
      const failed = mixed.filter((r) => r.kind === 'invalid').length
      if (mixed[150]!.kind === 'accepted') assert.ok(failed <= 9, `${failed} failures answered`)
      else assert.deepEqual([mixed[150]!.kind, failed], ['locked', 5])
    },
  )

  withStore('clearing a lockout lets the secret be tried again at once; the last accepted step stays refused', async ({ verification: v }) => {
    assert.deepEqual(await v.settle('c', 10, 0, policy), { kind: 'accepted' })
    for (let i = 0; i < 3; i++) await v.settle('c', null, 1000, policy)
    assert.equal((await v.settle('c', 11, 1000, policy)).kind, 'locked')
    assert.equal(await v.clear('c'), true)
    assert.deepEqual(await v.settle('c', 10, 1000, policy), { kind: 'reused' }, 'no replay after a clear')
    assert.deepEqual(await v.settle('c', 11, 1000, policy), { kind: 'accepted' })
    assert.equal(await v.clear('never-seen'), false)
  })

  withStore('lockedUntil reads the last lock of its keys and moves nothing', async ({ verification: v }) => {
    assert.equal(await v.lockedUntil(['r'], 0), 0, 'a key never seen')
    assert.equal(await v.lockedUntil([], 0), 0, 'no keys')
    for (let i = 0; i < 3; i++) await v.settle('r', null, 1000, policy)
    for (let i = 0; i < 5; i++) assert.equal(await v.lockedUntil(['r'], 5000), 11_000)
    assert.equal(await v.lockedUntil(['r'], 11_000), 0, 'a lock that has run out')
    assert.deepEqual(await v.settle('r', null, 10_999, policy), { kind: 'locked', lockedUntil: 11_000 }, 'reads counted nothing')
    assert.deepEqual(await v.settle('r', null, 11_000, policy), { kind: 'invalid', locks: true })
    assert.equal(await v.lockedUntil(['r'], 11_000), 31_000, 'the fourth failure: 20 s')
    for (let i = 0; i < 3; i++) await v.settle('s', null, 1000, policy)
    assert.equal(await v.lockedUntil(['s', 'r', 'never-seen'], 11_000), 31_000, 'the last of several')
    assert.equal(await v.lockedUntil(['never-seen', 's'], 5000), 11_000)
    assert.equal(await v.lockedUntil(['s', 'never-seen'], 11_000), 0, 'none locked now')
  })

  withStore('forgive takes one failure back, and the lock with it below the threshold; the last accepted step stays', async ({ verification: v }) => {
    assert.equal(await v.forgive('f', policy), false, 'a key never seen')
    assert.deepEqual(await v.settle('f', 5, 0, policy), { kind: 'accepted' })
    assert.equal(await v.forgive('f', policy), false, 'no failure to take back')
    for (let i = 0; i < 3; i++) await v.settle('f', null, 1000, policy)
    assert.equal(await v.lockedUntil(['f'], 1000), 11_000)
    assert.equal(await v.forgive('f', policy), true)
    assert.equal(await v.lockedUntil(['f'], 1000), 0, 'two failures: no lock')
    assert.deepEqual(await v.settle('f', null, 1000, policy), { kind: 'invalid', locks: true }, 'the third failure again')
    assert.equal(await v.lockedUntil(['f'], 1000), 11_000, 'and its lock again')
    assert.deepEqual(await v.settle('f', null, 11_000, policy), { kind: 'invalid', locks: true })
    assert.equal(await v.forgive('f', policy), true)
    assert.equal(await v.lockedUntil(['f'], 11_000), 31_000, 'three failures left: the lock stays')
    assert.deepEqual(await v.settle('f', 5, 40_000, policy), { kind: 'reused', locks: true }, 'no replay after a forgiveness')
    assert.equal(await v.clear('f'), true)
    assert.equal(await v.forgive('f', policy), false, 'never below none')
    assert.deepEqual(await v.settle('f', 6, 40_000, policy), { kind: 'accepted' })
  })

  withStore('100 parallel sign-ins counted before their password check: at most maxFailures wrong ones are checked', async ({ verification: v }) => {
    const signIn: LockPolicy = { maxFailures: 5, baseSeconds: 1, maxSeconds: 900 }
    // As the portal's throttle does: refuse on a read, count before the check, forgive a right one.
    const attempt = async (key: string, right: boolean): Promise<'refused' | 'wrong' | 'right'> => {
      if ((await v.lockedUntil([key], 1000)) > 0) return 'refused'
      if ((await v.settle(key, null, 1000, signIn)).kind === 'locked') return 'refused'
      if (right) await v.forgive(key, signIn)
      return right ? 'right' : 'wrong'
    }
    const wrong = await Promise.all(Array.from({ length: 100 }, () => attempt('signin-a', false)))
    assert.equal(wrong.filter((r) => r === 'wrong').length, 5)
    assert.equal(await v.lockedUntil(['signin-a'], 1000), 2000)
    const mixed = await Promise.all(Array.from({ length: 100 }, (_, i) => attempt('signin-b', i % 3 === 0)))
    const checked = mixed.filter((r) => r === 'wrong').length
    assert.ok(checked <= 5, `${checked} wrong passwords checked`)
    assert.ok(mixed.filter((r) => r !== 'refused').length >= 5, "right ones do not take the wrong ones' places")
  })

  withStore('concurrent acceptances of one step: exactly one wins', async ({ verification: v }) => {
    const results = await Promise.all(Array.from({ length: 20 }, () => v.settle('race', 5, 0, policy)))
    assert.equal(results.filter((r) => r.kind === 'accepted').length, 1)
  })

  portalContract(withStore)
  factorContract(withStore, async (store) => (await makeAccount(store.access, 'factors')).id)
  webhookContract(withStore)
  jobContract(withStore)
  ssoContract(withStore)
  clockContract(name, open, skip)
}

/**
 * clockContract: every time a store writes of its own accord (an event, a change of status,
 * a revocation, a member's, session's or link's start) is its clock's, never the wall clock's
 * or the database's. The clock starts years from now and moves between the steps.
 */
function clockContract(name: string, open: (clock: () => number) => Promise<Store>, skip: false | string): void {
  test(`${name}: every time the store stamps itself comes from its clock`, { skip }, async () => {
    let now = Date.parse('2031-02-03T04:05:06.007Z')
    const at = () => new Date(now).toISOString()
    const store = await open(() => now)
    try {
      const { access, audit, adminTokens, portal } = store
      const account = await makeAccount(access, 'clocked', now)
      assert.equal((await audit.append(draft('clock.read'))).at, at())
      now += 1001
      await access.setSubscription(account.id, 'eu', 'totp', 'pending', draft('subscription.set'))
      assert.equal((await access.listSubscriptions(account.id))[0]?.updatedAt, at(), 'set')
      now += 1001
      assert.equal(await access.setSubscription(account.id, 'eu', 'totp', 'active', draft('subscription.approve'), 'pending'), true)
      assert.equal((await access.listSubscriptions(account.id))[0]?.updatedAt, at(), 'moved on from pending')
      const key = await makeKey(access, account.id, 'h-clock')
      now += 1001
      assert.equal(await access.revokeKey(key.id, draft('key.revoke', key.id)), true)
      assert.equal((await access.getKey(key.id))?.revokedAt, at(), 'revoked')
      assert.equal((await audit.list({ action: 'key.revoke', limit: 1 })).items[0]?.at, at(), 'its event')
      await adminTokens.create({ id: 'adm_clock', name: 'c', scope: 'read', createdAt: at(), revokedAt: null, hash: 'th-clock' }, draft('admin-token.create'))
      now += 1001
      assert.equal(await adminTokens.revoke('adm_clock', draft('admin-token.revoke')), true)
      assert.equal((await adminTokens.list()).find((t) => t.id === 'adm_clock')?.revokedAt, at(), 'an admin token revoked')
      const user = await makeUser(portal, 'clock@example.com', { createdAt: at() })
      now += 1001
      assert.equal((await portal.updateUser(user.id, { status: 'disabled' }, draft('user.disable')))?.updatedAt, at(), 'a user changed')
      now += 1001
      assert.equal((await portal.updateUser(user.id, { status: 'active' }, null))?.updatedAt, at(), 'a user changed without an event')
      const pending = await makeUser(portal, 'pending-clock@example.com', { createdAt: at() })
      now += 1001
      assert.equal(await portal.setPendingPassword(pending.id, 'another hash', draft('user.signup')), true)
      assert.equal((await portal.getUser(pending.id))?.updatedAt, at(), "a sign-up's password replaced")
      assert.equal(await portal.addMember(account.id, user.id, 'admin', draft('member.add')), true)
      assert.equal((await portal.listMembers(account.id)).find((m) => m.userId === user.id)?.createdAt, at(), 'a member')
      now += 1001
      const expiresAt = new Date(now + 3_600_000).toISOString()
      const session = await portal.createSession({ idHash: 'sh-clock', userId: user.id, expiresAt, twoFactorPending: false, ip: null, userAgent: null })
      assert.deepEqual([session.createdAt, session.lastSeenAt], [at(), at()], 'a session')
      const token = await portal.createToken({ tokenHash: 'th-clock', purpose: 'verify-email', email: user.email, userId: user.id, expiresAt })
      assert.equal(token.createdAt, at(), 'an email link')
    } finally {
      await store.close()
    }
  })
}

type WithStore = (title: string, body: (s: Store) => Promise<void>) => void

export async function makeUser(portal: PortalStore, email: string, extra: Partial<NewUser> = {}): Promise<NewUser> {
  const user: NewUser = {
    id: newId('usr'),
    email,
    passwordHash: '$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA',
    emailVerifiedAt: null,
    status: 'active',
    operator: false,
    totpSecret: null,
    totpEnabledAt: null,
    createdAt: new Date().toISOString(),
    ...extra,
  }
  assert.equal(await portal.createUser(user, { ...draft('user.create', user.id), target: { type: 'user', id: user.id } }), true)
  return user
}

/** The portal's users, members, sessions, email tokens and recovery codes (a block of storeContract). */
function portalContract(withStore: WithStore): void {
  const later = (ms: number) => new Date(Date.now() + ms).toISOString()
  const HOUR = 3_600_000

  withStore('portal users: one per email in any case; found, changed and listed', async ({ portal, audit }) => {
    const user = await makeUser(portal, 'Élodie.Martin@Example.com')
    assert.equal(
      await portal.createUser({ ...user, id: newId('usr'), email: 'élodie.martin@EXAMPLE.COM' }, draft('user.create')),
      false,
      'the same email in another case (non-ASCII letters too) is taken',
    )
    assert.deepEqual(
      (await audit.list({ limit: 10 })).items.map((e) => e.action),
      ['user.create'],
      'no event for the refused one',
    )
    const found = await portal.findUserByEmail('ÉLODIE.MARTIN@example.com')
    assert.deepEqual(found, { ...user, updatedAt: user.createdAt }, 'found in any case, the email as given')
    assert.deepEqual(await portal.getUser(user.id), found)
    assert.equal(await portal.getUser('usr_missing'), null)
    assert.equal(await portal.findUserByEmail('nobody@example.com'), null)

    const verified = '2026-11-23T10:00:00.000Z'
    const changed = await portal.updateUser(
      user.id,
      { emailVerifiedAt: verified, operator: true, totpSecret: 'JBSWY3DPEHPK3PXP' },
      { ...draft('user.update'), target: { type: 'user', id: user.id } },
    )
    assert.deepEqual(
      { ...changed, updatedAt: undefined },
      { ...user, emailVerifiedAt: verified, operator: true, totpSecret: 'JBSWY3DPEHPK3PXP', updatedAt: undefined },
      'only the patch changed',
    )
    assert.ok(changed!.updatedAt >= user.createdAt)
    assert.equal(await portal.resealTotpSecret(user.id, 'other', 'v2.x'), false, 'a reseal of a value that changed meanwhile does nothing')
    assert.equal(await portal.resealTotpSecret(user.id, 'JBSWY3DPEHPK3PXP', 'v2.sealed'), true)
    assert.equal((await portal.getUser(user.id))?.totpSecret, 'v2.sealed')
    const cleared = await portal.updateUser(user.id, { passwordHash: null, totpSecret: null, status: 'disabled' }, null)
    assert.deepEqual(
      [cleared?.passwordHash, cleared?.totpSecret, cleared?.status, cleared?.operator, cleared?.emailVerifiedAt],
      [null, null, 'disabled', true, verified],
      'null clears; a field left out stays',
    )
    assert.deepEqual(await portal.getUser(user.id), cleared)
    assert.deepEqual(
      (await audit.list({ limit: 10 })).items.map((e) => e.action),
      ['user.update', 'user.create'],
      'audit null: no event',
    )
    assert.equal(await portal.updateUser('usr_missing', { status: 'active' }, draft('user.update')), null)
    assert.equal((await audit.list({ limit: 10 })).items.length, 2, 'nothing changed, no event')
  })

  withStore('portal: a pending password is replaced only while the address is unconfirmed; a link is found without being used', async ({ portal, audit }) => {
    const user = await makeUser(portal, 'pending@example.com')
    const event = { ...draft('user.sign-up', user.id), target: { type: 'user' as const, id: user.id } }
    assert.equal(await portal.setPendingPassword(user.id, 'hash-2', event), true)
    assert.equal((await portal.getUser(user.id))?.passwordHash, 'hash-2')
    await portal.updateUser(user.id, { emailVerifiedAt: later(0) }, null)
    assert.equal(await portal.setPendingPassword(user.id, 'hash-3', event), false, 'confirmed: no longer')
    assert.equal(await portal.setPendingPassword('usr_nobody', 'hash-3', event), false)
    assert.equal((await portal.getUser(user.id))?.passwordHash, 'hash-2')
    assert.equal((await audit.list({ action: 'user.sign-up', limit: 10 })).items.length, 1, 'one event, of the change made')

    await portal.createToken({ tokenHash: 'find-me', purpose: 'verify-email', email: user.email, userId: user.id, expiresAt: later(HOUR) })
    const nowIso = later(0)
    assert.equal((await portal.findToken('find-me', 'verify-email', nowIso))?.userId, user.id)
    assert.equal((await portal.findToken('find-me', 'verify-email', nowIso))?.usedAt, null, 'found, not used')
    assert.equal(await portal.findToken('find-me', 'reset-password', nowIso), null, 'another purpose')
    assert.equal(await portal.findToken('find-me', 'verify-email', later(2 * HOUR)), null, 'expired')
    assert.notEqual(await portal.consumeToken('find-me', 'verify-email', nowIso), null)
    assert.equal(await portal.findToken('find-me', 'verify-email', nowIso), null, 'used')
  })

  withStore(
    'portal: unconfirmed users past their links go, with the accounts made for them; confirmed ones, live links and accounts given more stay',
    async ({ portal, access }) => {
      const old = new Date(Date.now() - 2 * 86_400_000).toISOString()
      const nowIso = later(0)
      const cutoff = new Date(Date.now() - 86_400_000).toISOString()
      const account = async (name: string, userId: string) => {
        const made = await makeAccount(access, name)
        assert.equal(await portal.addMember(made.id, userId, 'owner', { ...draft('member.add'), accountId: made.id }), true)
        return made
      }
      const trap = await makeUser(portal, 'trap@example.com', { createdAt: old })
      const trapAccount = await account('trap', trap.id)
      await portal.createSession({ idHash: 'trap-session', userId: trap.id, expiresAt: later(HOUR), twoFactorPending: false, ip: null, userAgent: null })
      await portal.setRecoveryCodes(trap.id, ['code-1'])
      await portal.createToken({ tokenHash: 'trap-dead', purpose: 'verify-email', email: trap.email, userId: trap.id, expiresAt: old })
      await portal.createToken({
        tokenHash: 'trap-invite',
        purpose: 'invite',
        email: 'x@example.com',
        accountId: trapAccount.id,
        role: 'viewer',
        expiresAt: later(HOUR),
      })
      const given = await makeUser(portal, 'given@example.com', { createdAt: old })
      const givenAccount = await account('given', given.id)
      await makeKey(access, givenAccount.id, 'given-key-hash')
      const shared = await makeUser(portal, 'shared@example.com', { createdAt: old })
      const confirmed = await makeUser(portal, 'confirmed@example.com', { createdAt: old, emailVerifiedAt: old })
      const sharedAccount = await account('shared', confirmed.id)
      assert.equal(await portal.addMember(sharedAccount.id, shared.id, 'viewer', { ...draft('member.add'), accountId: sharedAccount.id }), true)
      const waiting = await makeUser(portal, 'waiting@example.com', { createdAt: old })
      await portal.createToken({ tokenHash: 'waiting-live', purpose: 'verify-email', email: waiting.email, userId: waiting.id, expiresAt: later(HOUR) })
      const fresh = await makeUser(portal, 'fresh@example.com')

      assert.equal(await portal.purgeUnconfirmed(cutoff, nowIso), 3, 'trap, given and shared')
      for (const gone of [trap, given, shared]) assert.equal(await portal.getUser(gone.id), null, gone.email)
      for (const kept of [confirmed, waiting, fresh]) assert.notEqual(await portal.getUser(kept.id), null, kept.email)
      assert.equal(await access.getAccount(trapAccount.id), null, 'the account made for the trap went with it')
      assert.equal(await portal.findSession('trap-session', nowIso), null)
      assert.deepEqual(await portal.pendingInvites(trapAccount.id, nowIso), [])
      assert.notEqual(await access.getAccount(givenAccount.id), null, 'an account with a key stays')
      assert.deepEqual(
        (await portal.listMembers(sharedAccount.id)).map((m) => m.email),
        ['confirmed@example.com'],
        'a shared account stays, less the purged member',
      )
      assert.equal(await portal.purgeUnconfirmed(cutoff, nowIso), 0, 'nothing left to purge')
    },
  )

  withStore('portal users page in creation order with a cursor, filtered by status and email', async ({ portal }) => {
    const made: NewUser[] = []
    for (let i = 0; i < 13; i++) {
      made.push(
        await makeUser(portal, i % 3 === 0 ? `Big_${i}%@Example.com` : `small${i}@example.com`, {
          createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, i % 4)).toISOString(),
          status: i === 4 ? 'pending' : 'active',
        }),
      )
    }
    const seen: string[] = []
    let cursor: string | undefined
    do {
      const page = await portal.listUsers({ limit: 5, ...(cursor === undefined ? {} : { cursor }) })
      seen.push(...page.items.map((u) => u.id))
      cursor = page.next ?? undefined
    } while (cursor !== undefined)
    assert.deepEqual(
      seen,
      [...made].sort((x, y) => x.createdAt.localeCompare(y.createdAt) || x.id.localeCompare(y.id)).map((u) => u.id),
    )
    assert.deepEqual(
      (await portal.listUsers({ limit: 50, status: 'pending' })).items.map((u) => u.id),
      [made[4]!.id],
    )
    assert.equal((await portal.listUsers({ limit: 50, email: 'BIG_' })).items.length, 5, 'case-insensitive substring')
    assert.equal((await portal.listUsers({ limit: 50, email: '_1' })).items.length, 1, '_ is a character, not a wildcard (Big_12% only)')
    assert.equal((await portal.listUsers({ limit: 50, email: '%@' })).items.length, 5, '% is a character, not a wildcard')
    await assert.rejects(portal.listUsers({ limit: 5, cursor: 'nope' }), CursorError)
  })

  withStore('members: added once, listed both ways, roles changed, removed; each change with its event', async ({ access, portal, audit }) => {
    const [acme, beta] = [await makeAccount(access, 'Acme'), await makeAccount(access, 'Beta')]
    const [ann, bob] = [await makeUser(portal, 'ann@example.com'), await makeUser(portal, 'Bob@example.com')]
    const ev = (action: string) => ({ ...draft(action), target: { type: 'member' as const, id: 'm' } })
    assert.equal(await portal.addMember(acme.id, ann.id, 'owner', ev('member.add')), true)
    assert.equal(await portal.addMember(acme.id, bob.id, 'viewer', ev('member.add')), true)
    assert.equal(await portal.addMember(beta.id, bob.id, 'admin', ev('member.add')), true)
    assert.equal(await portal.addMember(acme.id, bob.id, 'admin', ev('member.add')), false, 'a member already')
    assert.equal(await portal.addMember('acc_missing', bob.id, 'admin', ev('member.add')), false)
    assert.equal(await portal.addMember(acme.id, 'usr_missing', 'admin', ev('member.add')), false)
    // Oldest first; SQLite dates to the millisecond, so members added within one tie (and go by id): compared as sets.
    const sorted = <T extends readonly string[]>(rows: T[]) => rows.sort((x, y) => x[0]!.localeCompare(y[0]!))
    assert.deepEqual(
      sorted((await portal.listMembers(acme.id)).map((m) => [m.userId, m.email, m.role])),
      sorted([
        [ann.id, 'ann@example.com', 'owner'],
        [bob.id, 'Bob@example.com', 'viewer'],
      ]),
    )
    assert.deepEqual(
      sorted((await portal.membershipsOf(bob.id)).map((m) => [m.accountId, m.accountName, m.accountStatus, m.role])),
      sorted([
        [acme.id, 'Acme', 'active', 'viewer'],
        [beta.id, 'Beta', 'active', 'admin'],
      ]),
    )
    assert.deepEqual(await portal.membershipsOf('usr_missing'), [])
    assert.equal(await portal.setRole(acme.id, bob.id, 'developer', ev('member.role')), true)
    assert.equal(await portal.setRole(acme.id, 'usr_missing', 'developer', ev('member.role')), false)
    assert.equal(await portal.setRole(beta.id, ann.id, 'developer', ev('member.role')), false, 'not a member of that account')
    assert.equal((await portal.listMembers(acme.id)).find((m) => m.userId === bob.id)?.role, 'developer')
    assert.equal(await portal.removeMember(acme.id, bob.id, ev('member.remove')), true)
    assert.equal(await portal.removeMember(acme.id, bob.id, ev('member.remove')), false)
    assert.deepEqual(
      (await portal.listMembers(acme.id)).map((m) => m.userId),
      [ann.id],
    )
    const actions = (await audit.list({ limit: 50 })).items.map((e) => e.action).filter((a) => a.startsWith('member.'))
    assert.deepEqual(actions, ['member.remove', 'member.role', 'member.add', 'member.add', 'member.add'], 'one event per change made')
  })

  withStore('members: an account keeps an owner', async ({ access, portal, audit }) => {
    const account = await makeAccount(access, 'x')
    const [ann, bob] = [await makeUser(portal, 'ann@example.com'), await makeUser(portal, 'bob@example.com')]
    await portal.addMember(account.id, ann.id, 'owner', draft('member.add'))
    await assert.rejects(portal.setRole(account.id, ann.id, 'admin', draft('member.role')), LastOwnerError)
    await assert.rejects(portal.removeMember(account.id, ann.id, draft('member.remove')), LastOwnerError)
    assert.equal(await portal.setRole(account.id, ann.id, 'owner', draft('member.role')), true, 'an owner stays owner')
    assert.deepEqual(
      (await portal.listMembers(account.id)).map((m) => m.role),
      ['owner'],
      'nothing written',
    )
    assert.equal((await audit.list({ action: 'member.remove', limit: 5 })).items.length, 0)
    await portal.addMember(account.id, bob.id, 'developer', draft('member.add'))
    assert.equal(await portal.setRole(account.id, bob.id, 'owner', draft('member.role')), true, 'a second owner')
    assert.equal(await portal.setRole(account.id, ann.id, 'viewer', draft('member.role')), true, 'then the first may step down')
    await assert.rejects(portal.removeMember(account.id, bob.id, draft('member.remove')), LastOwnerError)
    assert.equal(await portal.removeMember(account.id, ann.id, draft('member.remove')), true, 'a non-owner goes freely')
    assert.equal(await portal.removeMember(account.id, 'usr_missing', draft('member.remove')), false, 'no such member is not the last owner')
  })

  withStore('members: of two owners demoted or removed at once, exactly one change is made', async ({ access, portal, audit }) => {
    const users = [await makeUser(portal, 'a@example.com'), await makeUser(portal, 'b@example.com')]
    const changes = [
      (accountId: string, userId: string) => portal.setRole(accountId, userId, 'admin', draft('member.change')),
      (accountId: string, userId: string) => portal.removeMember(accountId, userId, draft('member.change')),
    ]
    for (let round = 0; round < 12; round++) {
      const account = await makeAccount(access, `x${round}`)
      for (const u of users) await portal.addMember(account.id, u.id, 'owner', draft('member.add'))
      // Demote both, remove both, one of each (each way round).
      const [first, second] = [changes[round % 2]!, changes[Math.floor(round / 2) % 2]!]
      const results = await Promise.allSettled([first(account.id, users[0]!.id), second(account.id, users[1]!.id)])
      assert.equal(results.filter((r) => r.status === 'fulfilled' && r.value === true).length, 1, `round ${round}: one change`)
      const refused = results.find((r) => r.status === 'rejected')
      assert.ok(refused?.status === 'rejected' && refused.reason instanceof LastOwnerError, `round ${round}: the other refused`)
      assert.equal((await portal.listMembers(account.id)).filter((m) => m.role === 'owner').length, 1, `round ${round}: one owner left`)
    }
    assert.equal((await audit.list({ action: 'member.change', limit: 50 })).items.length, 12, 'one event per change made')
  })

  withStore('sessions: found live with their user, slid, upgraded once, signed out one or all', async ({ portal }) => {
    const [ann, bob] = [await makeUser(portal, 'ann@example.com'), await makeUser(portal, 'bob@example.com')]
    const now = new Date().toISOString()
    const created = await portal.createSession({
      idHash: 'sh-1',
      userId: ann.id,
      expiresAt: later(HOUR),
      twoFactorPending: true,
      ip: '192.0.2.7',
      userAgent: 'UA',
    })
    assert.deepEqual(
      { ...created, createdAt: undefined, lastSeenAt: undefined },
      {
        idHash: 'sh-1',
        userId: ann.id,
        expiresAt: created.expiresAt,
        twoFactorPending: true,
        ssoProviderId: null,
        ip: '192.0.2.7',
        userAgent: 'UA',
        createdAt: undefined,
        lastSeenAt: undefined,
      },
    )
    assert.ok(Math.abs(Date.parse(created.createdAt) - Date.now()) < 60_000)
    const found = await portal.findSession('sh-1', now)
    assert.deepEqual(found?.session, created)
    assert.equal(found?.user.email, 'ann@example.com')
    assert.equal(await portal.findSession('sh-unknown', now), null)
    assert.equal(await portal.findSession('sh-1', later(2 * HOUR)), null, 'expired')

    // Sliding expiry: later, never earlier; an expired session is not revived.
    const [seen, slid] = [later(60_000), later(3 * HOUR)]
    assert.equal(await portal.touchSession('sh-1', seen, slid), true)
    let s = (await portal.findSession('sh-1', now))!.session
    assert.deepEqual([s.lastSeenAt, s.expiresAt], [seen, slid])
    assert.equal(await portal.touchSession('sh-1', seen, later(HOUR / 2)), true)
    assert.equal((await portal.findSession('sh-1', now))?.session.expiresAt, slid, 'never shortened')
    assert.equal(await portal.touchSession('sh-1', later(4 * HOUR), later(5 * HOUR)), false, 'expired by then: not revived')
    assert.equal(await portal.touchSession('sh-unknown', seen, later(HOUR)), false)

    // The second factor is completed once; with a new id, the pending one stops working.
    assert.equal(await portal.completeTwoFactor('sh-1', 'sh-1b'), true)
    assert.equal(await portal.findSession('sh-1', now), null, 'the pending id is gone')
    s = (await portal.findSession('sh-1b', now))!.session
    assert.equal(s.twoFactorPending, false)
    assert.equal(await portal.completeTwoFactor('sh-1b'), false, 'not pending any more')
    await portal.createSession({ idHash: 'sh-p', userId: ann.id, expiresAt: later(HOUR), twoFactorPending: true, ip: null, userAgent: null })
    const completions = await Promise.all(Array.from({ length: 10 }, () => portal.completeTwoFactor('sh-p')))
    assert.equal(completions.filter(Boolean).length, 1, 'of parallel completions, one')
    assert.equal((await portal.findSession('sh-p', now))?.session.twoFactorPending, false)

    // Sign out: one session, everywhere but this one, everywhere.
    for (const id of ['sh-2', 'sh-3'])
      await portal.createSession({ idHash: id, userId: ann.id, expiresAt: later(HOUR), twoFactorPending: false, ip: null, userAgent: null })
    await portal.createSession({ idHash: 'sh-b', userId: bob.id, expiresAt: later(HOUR), twoFactorPending: false, ip: null, userAgent: null })
    assert.equal(await portal.deleteSession('sh-2'), true)
    assert.equal(await portal.deleteSession('sh-2'), false)
    assert.equal(await portal.deleteSessionsOf(ann.id, 'sh-3'), 2, 'sh-1b and sh-p')
    assert.notEqual(await portal.findSession('sh-3', now), null, 'the one kept')
    assert.equal(await portal.deleteSessionsOf(ann.id), 1)
    assert.equal(await portal.findSession('sh-3', now), null)
    assert.notEqual(await portal.findSession('sh-b', now), null, "another user's session stays")

    await portal.createSession({ idHash: 'sh-old', userId: bob.id, expiresAt: later(-1000), twoFactorPending: false, ip: null, userAgent: null })
    assert.equal(await portal.pruneSessions(new Date().toISOString()), 1, 'only the expired one')
    assert.notEqual(await portal.findSession('sh-b', now), null)
  })

  withStore('email tokens: consumed once, for their purpose, before they expire', async ({ access, portal }) => {
    const account = await makeAccount(access, 'x')
    const ann = await makeUser(portal, 'ann@example.com')
    const token = await portal.createToken({ tokenHash: 'th-1', purpose: 'reset-password', email: 'ann@example.com', userId: ann.id, expiresAt: later(HOUR) })
    assert.deepEqual(
      { ...token, createdAt: undefined },
      {
        tokenHash: 'th-1',
        purpose: 'reset-password',
        email: 'ann@example.com',
        userId: ann.id,
        accountId: null,
        role: null,
        expiresAt: token.expiresAt,
        usedAt: null,
        createdAt: undefined,
      },
    )
    const now = new Date().toISOString()
    assert.equal(await portal.consumeToken('th-1', 'verify-email', now), null, 'another purpose')
    assert.equal(await portal.consumeToken('th-1', 'reset-password', later(2 * HOUR)), null, 'expired')
    assert.equal(await portal.consumeToken('th-unknown', 'reset-password', now), null)
    assert.deepEqual(await portal.consumeToken('th-1', 'reset-password', now), { ...token, usedAt: now })
    assert.equal(await portal.consumeToken('th-1', 'reset-password', now), null, 'used')

    await portal.createToken({ tokenHash: 'th-race', purpose: 'verify-email', email: 'ann@example.com', userId: ann.id, expiresAt: later(HOUR) })
    const results = await Promise.all(Array.from({ length: 100 }, () => portal.consumeToken('th-race', 'verify-email', new Date().toISOString())))
    assert.equal(results.filter((r) => r !== null).length, 1, 'of 100 at once, one')

    const invite = await portal.createToken({
      tokenHash: 'th-inv',
      purpose: 'invite',
      email: 'New@example.com',
      accountId: account.id,
      role: 'developer',
      expiresAt: later(HOUR),
    })
    await portal.createToken({
      tokenHash: 'th-inv-old',
      purpose: 'invite',
      email: 'old@example.com',
      accountId: account.id,
      role: 'viewer',
      expiresAt: later(-1000),
    })
    assert.deepEqual(await portal.pendingInvites(account.id, new Date().toISOString()), [invite], 'not the expired one')
    assert.equal(await portal.deleteTokens(['th-inv']), 1)
    assert.equal(await portal.deleteTokens(['th-inv']), 0)
    assert.deepEqual(await portal.pendingInvites(account.id, new Date().toISOString()), [])
    await portal.createToken({ tokenHash: 'th-live', purpose: 'verify-email', email: 'ann@example.com', expiresAt: later(HOUR) })
    assert.equal(await portal.pruneTokens(new Date().toISOString()), 3, 'the used ones and the expired one')
    assert.notEqual(await portal.consumeToken('th-live', 'verify-email', new Date().toISOString()), null, 'the live one stays')
  })

  withStore('email tokens: a new link replaces the unused ones of its purpose, user (or email) and account', async ({ access, portal }) => {
    const [a, b] = [await makeAccount(access, 'a'), await makeAccount(access, 'b')]
    const [ann, bob] = [await makeUser(portal, 'ann@example.com'), await makeUser(portal, 'bob@example.com')]
    const token = (tokenHash: string, extra: Partial<NewEmailToken> = {}) =>
      portal.createToken({ tokenHash, purpose: 'reset-password', email: 'ann@example.com', userId: ann.id, expiresAt: later(HOUR), ...extra })
    await token('r-1')
    await token('v-1', { purpose: 'verify-email' })
    await token('r-bob', { userId: bob.id, email: 'bob@example.com' })
    await token('r-2')
    const now = () => new Date().toISOString()
    assert.equal(await portal.consumeToken('r-1', 'reset-password', now()), null, 'replaced by r-2')
    assert.notEqual(await portal.consumeToken('r-2', 'reset-password', now()), null)
    assert.notEqual(await portal.consumeToken('v-1', 'verify-email', now()), null, 'another purpose stays')
    assert.notEqual(await portal.consumeToken('r-bob', 'reset-password', now()), null, "another user's stays")
    const invite = (tokenHash: string, accountId: string, email: string) =>
      token(tokenHash, { purpose: 'invite', userId: null, email, accountId, role: 'viewer' })
    await invite('i-1', a.id, 'new@example.com')
    await invite('i-2', b.id, 'new@example.com')
    await invite('i-3', a.id, 'other@example.com')
    await invite('i-4', a.id, 'new@example.com')
    assert.deepEqual((await portal.pendingInvites(a.id, now())).map((t) => t.tokenHash).sort(), ['i-3', 'i-4'], 'i-1 replaced; another invitee stays')
    assert.deepEqual(
      (await portal.pendingInvites(b.id, now())).map((t) => t.tokenHash),
      ['i-2'],
      "another account's stays",
    )
  })

  withStore('email tokens: an invitation and its event are written together, and withdrawn with the event once', async ({ access, portal, audit }) => {
    const account = await makeAccount(access, 'a')
    const event = (action: string) => ({
      ...draft(action, 'new@example.com'),
      target: { type: 'member' as const, id: 'new@example.com' },
      accountId: account.id,
    })
    const invite = (tokenHash: string, email = 'new@example.com') =>
      ({ tokenHash, purpose: 'invite', email, accountId: account.id, role: 'viewer', expiresAt: later(HOUR) }) satisfies NewEmailToken
    const actions = async () => (await audit.list({ accountId: account.id, limit: 10 })).items.map((e) => e.action)
    const made = await portal.createToken(invite('inv-1'), [event('member.invite')])
    assert.equal(made.tokenHash, 'inv-1')
    assert.deepEqual(await actions(), ['member.invite', 'account.create'], 'the token and its event')
    const [first] = (await audit.list({ action: 'member.invite', limit: 1 })).items
    assert.deepEqual([first?.target, first?.accountId, first?.detail], [{ type: 'member', id: 'new@example.com' }, account.id, { n: 1 }], 'the draft as given')
    await portal.createToken(invite('inv-2', 'other@example.com'), [event('member.invite'), { ...event('member.invite'), accountId: null }])
    assert.equal((await audit.list({ action: 'member.invite', limit: 10 })).items.length, 3, 'every draft given, one row each')
    await portal.createToken(invite('inv-3', 'third@example.com'))
    assert.equal((await audit.list({ action: 'member.invite', limit: 10 })).items.length, 3, 'no draft, no event')

    assert.equal(await portal.deleteTokens(['inv-1', 'inv-2', 'inv-unknown'], event('member.invite-cancel')), 2)
    assert.deepEqual(await actions(), ['member.invite-cancel', 'member.invite', 'member.invite', 'account.create'], 'one event for the withdrawal')
    assert.equal(await portal.deleteTokens(['inv-1', 'inv-2'], event('member.invite-cancel')), 0, 'withdrawn already')
    assert.equal((await audit.list({ action: 'member.invite-cancel', limit: 10 })).items.length, 1, 'nothing withdrawn, no event')
    assert.deepEqual(
      (await portal.pendingInvites(account.id, new Date().toISOString())).map((t) => t.tokenHash),
      ['inv-3'],
    )
  })

  withStore('portal sessions: a sign-in and the completion of its second factor are written with their events', async ({ portal, audit }) => {
    const ann = await makeUser(portal, 'ann@example.com')
    const signIn = (detail: Record<string, unknown>) => ({ ...draft('user.sign-in', ann.id), target: { type: 'user' as const, id: ann.id }, detail })
    const events = async () => (await audit.list({ action: 'user.sign-in', limit: 10 })).items.map((e) => e.detail)
    const made = await portal.createSession({ idHash: 'si-1', userId: ann.id, expiresAt: later(HOUR), twoFactorPending: false, ip: null, userAgent: null }, [
      signIn({ first: true }),
    ])
    assert.equal(made.idHash, 'si-1')
    assert.deepEqual(await events(), [{ first: true }], 'the session and its event')
    await portal.createSession({ idHash: 'si-p', userId: ann.id, expiresAt: later(HOUR), twoFactorPending: true, ip: null, userAgent: null })
    assert.equal((await events()).length, 1, 'no draft, no event')
    const completions = await Promise.all(Array.from({ length: 5 }, (_, i) => portal.completeTwoFactor('si-p', `si-full-${i}`, [signIn({ factor: 'totp' })])))
    assert.equal(completions.filter(Boolean).length, 1, 'of parallel completions, one')
    assert.deepEqual(await events(), [{ factor: 'totp' }, { first: true }], 'only the completion made writes its event')
    assert.equal(await portal.completeTwoFactor('si-unknown', undefined, [signIn({ factor: 'totp' })]), false)
    assert.equal((await events()).length, 2)
  })

  withStore('portal changeUser: fields, recovery codes, sessions and events in one step, or nothing', async ({ portal, audit }) => {
    const [ann, bob] = [await makeUser(portal, 'ann@example.com'), await makeUser(portal, 'bob@example.com')]
    const session = (idHash: string, userId: string) =>
      portal.createSession({ idHash, userId, expiresAt: later(HOUR), twoFactorPending: false, ip: null, userAgent: null })
    for (const id of ['sa-1', 'sa-2', 'sa-3']) await session(id, ann.id)
    await session('sb-1', bob.id)
    await portal.setRecoveryCodes(ann.id, ['old-1'])
    const event = (action: string, detail: Record<string, unknown>) => ({ ...draft(action, ann.id), target: { type: 'user' as const, id: ann.id }, detail })
    const events = async (action: string) => (await audit.list({ action, limit: 10 })).items.map((e) => [e.accountId, e.detail])
    const live = async (id: string) => (await portal.findSession(id, new Date().toISOString())) !== null

    const changed = await portal.changeUser(ann.id, {
      patch: { passwordHash: 'hash-2' },
      recoveryCodes: ['new-1', 'new-2'],
      sessions: { except: 'sa-1' },
      audits: (sessions) => [event('user.password', { sessions }), { ...event('user.password', { sessions }), accountId: 'acc_x' }],
    })
    assert.deepEqual([changed?.user.passwordHash, changed?.user.email, changed?.sessionsEnded], ['hash-2', 'ann@example.com', 2])
    assert.deepEqual(await portal.getUser(ann.id), changed?.user)
    assert.deepEqual([await live('sa-1'), await live('sa-2'), await live('sa-3'), await live('sb-1')], [true, false, false, true], 'all but the one kept')
    assert.equal(await portal.recoveryCodesLeft(ann.id), 2)
    assert.equal(await portal.useRecoveryCode(ann.id, 'old-1'), false, 'the old set is gone')
    const byAccount = (await events('user.password')).sort(([a], [b]) => String(a).localeCompare(String(b)))
    assert.deepEqual(
      byAccount,
      [
        ['acc_x', { sessions: 2 }],
        [null, { sessions: 2 }],
      ],
      'its events, the count in them',
    )

    // No patch: the user stays as they are; one session ends (not another user's), with the event.
    const signedOut = await portal.changeUser(ann.id, { sessions: { only: 'sb-1' }, audits: (n) => [event('user.sign-out', { n })] })
    assert.deepEqual([signedOut?.user, signedOut?.sessionsEnded, await live('sb-1')], [changed?.user, 0, true], "bob's session is not ann's to end")
    assert.equal((await portal.changeUser(ann.id, { sessions: { only: 'sa-1' }, audits: () => [] }))?.sessionsEnded, 1)
    assert.equal(await live('sa-1'), false)
    assert.deepEqual(await events('user.sign-out'), [[null, { n: 0 }]])

    // No such user: nothing written, no event.
    const nobody = { patch: { status: 'disabled' as const }, recoveryCodes: ['x'], sessions: 'all' as const, audits: () => [event('user.disable', {})] }
    assert.equal(await portal.changeUser('usr_missing', nobody), null)
    assert.equal(await portal.changeUser('usr_missing', { sessions: 'all', audits: () => [event('user.disable', {})] }), null)
    assert.deepEqual(await events('user.disable'), [])

    // A step that fails takes all its parts with it.
    await session('sa-4', ann.id)
    const failing = portal.changeUser(ann.id, {
      patch: { status: 'disabled' },
      recoveryCodes: [],
      sessions: 'all',
      audits: () => {
        throw new Error('no drafts')
      },
    })
    await assert.rejects(failing, /no drafts/)
    assert.deepEqual(
      [(await portal.getUser(ann.id))?.status, await live('sa-4'), await portal.recoveryCodesLeft(ann.id)],
      ['active', true, 2],
      'nothing changed',
    )
    assert.deepEqual(await events('user.disable'), [])
    const ended = await portal.changeUser(ann.id, {
      patch: { status: 'disabled' },
      recoveryCodes: [],
      sessions: 'all',
      audits: () => [event('user.disable', {})],
    })
    assert.deepEqual([ended?.user.status, ended?.sessionsEnded, await live('sa-4'), await portal.recoveryCodesLeft(ann.id)], ['disabled', 1, false, 0])
    assert.deepEqual(await events('user.disable'), [[null, {}]])
  })

  withStore('recovery codes: replaced as a set, each used once', async ({ portal }) => {
    const [ann, bob] = [await makeUser(portal, 'ann@example.com'), await makeUser(portal, 'bob@example.com')]
    await portal.setRecoveryCodes(ann.id, ['c1', 'c2', 'c3'])
    await portal.setRecoveryCodes(bob.id, ['c1'])
    assert.equal(await portal.recoveryCodesLeft(ann.id), 3)
    assert.equal(await portal.useRecoveryCode(ann.id, 'c2'), true)
    assert.equal(await portal.useRecoveryCode(ann.id, 'c2'), false, 'used')
    assert.equal(await portal.useRecoveryCode(ann.id, 'c9'), false, 'not one of hers')
    assert.equal(await portal.recoveryCodesLeft(ann.id), 2)
    assert.equal(await portal.recoveryCodesLeft(bob.id), 1, "another user's codes are their own")
    const results = await Promise.all(Array.from({ length: 20 }, () => portal.useRecoveryCode(ann.id, 'c3')))
    assert.equal(results.filter(Boolean).length, 1, 'of 20 at once, one')
    await portal.setRecoveryCodes(ann.id, ['c2', 'c4', 'c4'])
    assert.equal(await portal.recoveryCodesLeft(ann.id), 2, 'the new set, unused (a repeated hash once)')
    assert.equal(await portal.useRecoveryCode(ann.id, 'c1'), false, 'the old set is gone')
    assert.equal(await portal.useRecoveryCode(ann.id, 'c2'), true, 'a hash of the new set is unused, whatever it was before')
    await portal.setRecoveryCodes(ann.id, [])
    assert.equal(await portal.recoveryCodesLeft(ann.id), 0)
  })
}

export interface TestLimiter {
  readonly limiter: Limiter
  close(): Promise<void>
}

/** limiterContract: the rules every limiter keeps, on a clock the test moves. */
export function limiterContract(name: string, open: (clock: () => number) => Promise<TestLimiter>, skip: false | string = false): void {
  const withLimiter = (title: string, start: number, body: (l: Limiter, clock: { t: number }) => Promise<void>) =>
    test(`${name} limiter: ${title}`, { skip }, async () => {
      const clock = { t: start }
      const opened = await open(() => clock.t)
      try {
        await body(opened.limiter, clock)
      } finally {
        await opened.close()
      }
    })
  const noSeed = async () => {
    throw new Error('no quota, no seed')
  }
  const T0 = Date.UTC(2026, 10, 21, 12, 0, 0)
  // The limiter is given each call's cost; the weights are the caller's business.
  const weights = { totp: 1, converter: 1 }

  withLimiter('the bucket holds the burst, refills at the rate, and a refused call consumes nothing', T0, async (l, clock) => {
    const plan: Plan = { rate: 10, burst: 3, quota: 0, period: 'day', weights }
    const taken: LimitDecision[] = []
    for (let i = 0; i < 3; i++) taken.push(await l.take('a', plan, 1, noSeed))
    assert.deepEqual(
      taken.map((d) => d.admitted && d.tokens),
      [2, 1, 0],
    )
    assert.deepEqual(taken[2], { admitted: true, tokens: 0, refillMs: 300, left: Infinity, windowEndsMs: 0 })
    assert.deepEqual(await l.take('a', plan, 1, noSeed), { admitted: false, reason: 'throttle', retryAfterMs: 100 })
    assert.deepEqual(await l.take('a', plan, 1, noSeed), { admitted: false, reason: 'throttle', retryAfterMs: 100 }, 'the refusal took nothing')
    clock.t += 100
    assert.equal((await l.take('a', plan, 1, noSeed)).admitted, true, 'one token after 1/rate')
    assert.equal((await l.take('a', plan, 1, noSeed)).admitted, false)
    assert.equal((await l.take('b', plan, 1, noSeed)).admitted, true, 'accounts have buckets of their own')
    clock.t += 10_000
    assert.equal(((await l.take('a', plan, 1, noSeed)) as { tokens: number }).tokens, 2, 'refilled to the burst, not past it')
  })

  withLimiter('concurrent calls: exactly the burst is admitted', T0, async (l) => {
    const plan: Plan = { rate: 1, burst: 5, quota: 0, period: 'day', weights }
    const results = await Promise.all(Array.from({ length: 20 }, () => l.take('race', plan, 1, noSeed)))
    assert.equal(results.filter((d) => d.admitted).length, 5)
  })

  withLimiter('the daily quota is seeded once per window from the usage counts, and resets at UTC midnight', T0, async (l, clock) => {
    const plan: Plan = { rate: 0, burst: 1, quota: 3, period: 'day', weights }
    const seeds: [number, number][] = []
    const seed = async (start: number, end: number) => {
      seeds.push([start, end])
      return 1
    }
    const first = await l.take('a', plan, 1, seed)
    assert.deepEqual(first, { admitted: true, tokens: Infinity, refillMs: 0, left: 1, windowEndsMs: 12 * 3600_000 })
    assert.equal((await l.take('a', plan, 1, seed)).admitted, true)
    assert.deepEqual(await l.take('a', plan, 1, seed), { admitted: false, reason: 'quota', retryAfterMs: 12 * 3600_000 })
    assert.deepEqual(seeds, [[Date.UTC(2026, 10, 21), Date.UTC(2026, 10, 22)]])
    clock.t = Date.UTC(2026, 10, 22, 0, 0, 0)
    assert.equal((await l.take('a', plan, 1, seed)).admitted, true, 'a new day')
    assert.deepEqual(seeds.at(-1), [Date.UTC(2026, 10, 22), Date.UTC(2026, 10, 23)])
  })

  withLimiter('monthly windows follow the calendar (leap February, December to January)', Date.UTC(2028, 1, 10), async (l, clock) => {
    const plan: Plan = { rate: 0, burst: 1, quota: 1, period: 'month', weights }
    const seeds: [number, number][] = []
    const seed = async (start: number, end: number) => {
      seeds.push([start, end])
      return 0
    }
    assert.equal((await l.take('a', plan, 1, seed)).admitted, true)
    assert.deepEqual(seeds[0], [Date.UTC(2028, 1, 1), Date.UTC(2028, 2, 1)])
    assert.deepEqual(await l.take('a', plan, 1, seed), { admitted: false, reason: 'quota', retryAfterMs: Date.UTC(2028, 2, 1) - clock.t })
    clock.t = Date.UTC(2028, 11, 31, 23, 59, 59)
    assert.equal((await l.take('a', plan, 1, seed)).admitted, true)
    assert.deepEqual(seeds[1], [Date.UTC(2028, 11, 1), Date.UTC(2029, 0, 1)])
    assert.deepEqual(await l.take('a', plan, 1, seed), { admitted: false, reason: 'quota', retryAfterMs: 1000 })
  })

  withLimiter('throttle and quota together: a throttled call uses no quota', T0, async (l, clock) => {
    const plan: Plan = { rate: 1, burst: 1, quota: 2, period: 'day', weights }
    const seed = async () => 0
    assert.equal((await l.take('a', plan, 1, seed)).admitted, true)
    assert.deepEqual(await l.take('a', plan, 1, seed), { admitted: false, reason: 'throttle', retryAfterMs: 1000 })
    clock.t += 1000
    const second = await l.take('a', plan, 1, seed)
    assert.equal(second.admitted && second.left, 0, 'the throttled call took no quota')
    clock.t += 1000
    assert.equal(((await l.take('a', plan, 1, seed)) as { reason?: string }).reason, 'quota')
  })

  withLimiter('a call costs its units of quota: refused when fewer are left, and the refusal takes none', T0, async (l) => {
    const plan: Plan = { rate: 0, burst: 1, quota: 5, period: 'day', weights: { totp: 2, converter: 1 } }
    const seed = async () => 0
    const lefts: (number | false)[] = []
    for (let i = 0; i < 2; i++) lefts.push(((d) => d.admitted && d.left)(await l.take('a', plan, 2, seed)))
    assert.deepEqual(lefts, [3, 1])
    assert.deepEqual(await l.take('a', plan, 2, seed), { admitted: false, reason: 'quota', retryAfterMs: 12 * 3600_000 }, '1 unit left, 2 asked')
    const cheap = await l.take('a', plan, 1, seed)
    assert.deepEqual(cheap, { admitted: true, tokens: Infinity, refillMs: 0, left: 0, windowEndsMs: 12 * 3600_000 }, 'the refused call took nothing')
    assert.equal(((await l.take('a', plan, 1, seed)) as { reason?: string }).reason, 'quota')
  })

  withLimiter('a free call (cost 0) passes an exhausted quota, but still takes a token', T0, async (l, clock) => {
    const plan: Plan = { rate: 1, burst: 2, quota: 2, period: 'day', weights: { totp: 2, converter: 0 } }
    const seed = async () => 0
    assert.deepEqual(await l.take('a', plan, 2, seed), { admitted: true, tokens: 1, refillMs: 1000, left: 0, windowEndsMs: 12 * 3600_000 })
    assert.deepEqual(await l.take('a', plan, 0, seed), { admitted: true, tokens: 0, refillMs: 2000, left: 0, windowEndsMs: 12 * 3600_000 })
    assert.deepEqual(await l.take('a', plan, 0, seed), { admitted: false, reason: 'throttle', retryAfterMs: 1000 })
    clock.t += 1000
    assert.equal(((await l.take('a', plan, 1, seed)) as { reason?: string }).reason, 'quota')
    assert.equal((await l.take('a', plan, 0, seed)).admitted, true, 'the quota refusal took no token')
  })

  withLimiter('the seed counts units: what is left is the quota less the units used', T0, async (l) => {
    const plan: Plan = { rate: 0, burst: 1, quota: 10, period: 'day', weights }
    const first = await l.take('a', plan, 2, async () => 7)
    assert.equal(first.admitted && first.left, 1, '10 - 7 - 2')
    assert.equal(((await l.take('a', plan, 2, noSeed)) as { reason?: string }).reason, 'quota')
    const last = await l.take('a', plan, 1, noSeed)
    assert.equal(last.admitted && last.left, 0)
    // Used past the quota (a plan lowered in the window): nothing left, free calls still pass.
    assert.equal(((await l.take('b', plan, 1, async () => 12)) as { reason?: string }).reason, 'quota')
    const free = await l.take('b', plan, 0, noSeed)
    assert.equal(free.admitted && free.left, 0)
  })

  withLimiter('concurrent calls of cost 3 on a quota of 30: exactly 10 admitted, one token each', T0, async (l) => {
    const plan: Plan = { rate: 1, burst: 100, quota: 30, period: 'day', weights: { totp: 3, converter: 1 } }
    const results = await Promise.all(Array.from({ length: 50 }, () => l.take('race', plan, 3, async () => 0)))
    const admitted = results.filter((d) => d.admitted)
    assert.equal(admitted.length, 10)
    assert.deepEqual(
      admitted.map((d) => d.left).sort((a, b) => b - a),
      [27, 24, 21, 18, 15, 12, 9, 6, 3, 0],
    )
    assert.deepEqual(
      admitted.map((d) => d.tokens).sort((a, b) => b - a),
      [99, 98, 97, 96, 95, 94, 93, 92, 91, 90],
    )
    assert.ok(results.every((d) => d.admitted || d.reason === 'quota'))
  })
}
