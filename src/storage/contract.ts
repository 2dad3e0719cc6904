/**
 * The storage contract: one suite that every adapter must pass. Each adapter's test file
 * calls storeContract with a factory for a fresh, empty store (and limiterContract for a
 * fresh limiter on a clock the test moves). `skip` carries the notice when the service an
 * adapter needs is not configured.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { LimitDecision, Limiter, LockPolicy, Plan, Store } from './ports.ts'

const policy: LockPolicy = { maxFailures: 3, baseSeconds: 10, maxSeconds: 25 }

export function storeContract(name: string, open: () => Promise<Store>, skip: false | string = false): void {
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
    const account = await access.createAccount('Acme')
    assert.equal((await access.getAccount(account.id))?.name, 'Acme')
    const key = await access.createKey({ accountId: account.id, name: 'k', hash: 'hash-1', hint: 'abcd' })
    let grant = await access.findGrant('hash-1')
    assert.deepEqual({ ...grant, subscriptions: [...grant!.subscriptions] },
      { keyId: key.id, accountId: account.id, revoked: false, accountActive: true, subscriptions: [], plan: null })
    await access.setSubscription(account.id, 'eu', 'totp', 'active')
    await access.setSubscription(account.id, 'us', 'converter', 'active')
    await access.setSubscription(account.id, 'us', 'converter', 'inactive')
    grant = await access.findGrant('hash-1')
    assert.deepEqual([...grant!.subscriptions], ['eu:totp'])
    assert.equal((await access.listSubscriptions(account.id)).length, 2)
    assert.equal(await access.setAccountStatus(account.id, 'suspended'), true)
    assert.equal((await access.findGrant('hash-1'))?.accountActive, false)
    assert.equal(await access.setAccountStatus('acc_missing', 'active'), false)
    assert.equal(await access.revokeKey(key.id), true)
    assert.equal(await access.revokeKey(key.id), false, 'already revoked')
    assert.equal((await access.findGrant('hash-1'))?.revoked, true)
    assert.equal(await access.findGrant('hash-unknown'), null)
    assert.deepEqual((await access.listKeys(account.id)).map((k) => k.id), [key.id])
    assert.equal((await access.listAccounts()).length, 1)
  })

  withStore('plans: an account\'s own plan rides on its grant until reset', async ({ access }) => {
    const account = await access.createAccount('x')
    await access.createKey({ accountId: account.id, name: 'k', hash: 'hash-p', hint: 'abcd' })
    assert.equal(await access.getPlan(account.id), null)
    const plan: Plan = { rate: 2.5, burst: 10, quota: 1000, period: 'day' }
    assert.equal(await access.setPlan(account.id, plan), true)
    assert.deepEqual(await access.getPlan(account.id), plan)
    assert.deepEqual((await access.findGrant('hash-p'))?.plan, plan)
    const changed: Plan = { rate: 0, burst: 1, quota: 0, period: 'month' }
    assert.equal(await access.setPlan(account.id, changed), true)
    assert.deepEqual((await access.findGrant('hash-p'))?.plan, changed)
    assert.equal(await access.setPlan(account.id, null), true)
    assert.equal((await access.findGrant('hash-p'))?.plan, null)
    assert.equal(await access.setPlan('acc_missing', plan), false)
    assert.equal(await access.setPlan('acc_missing', null), false)
  })

  withStore('usage counts add up per account, day and group', async ({ usage }) => {
    await usage.add([
      { accountId: 'a', day: '2026-11-20', group: 'totp', count: 3 },
      { accountId: 'a', day: '2026-11-21', group: 'totp', count: 1 },
      { accountId: 'b', day: '2026-11-21', group: 'totp', count: 7 },
    ])
    await usage.add([
      { accountId: 'a', day: '2026-11-21', group: 'totp', count: 2 },
      { accountId: 'a', day: '2026-11-21', group: 'converter', count: 5 },
    ])
    await usage.add([])
    assert.deepEqual(await usage.list('a', '2026-11-21'), [
      { accountId: 'a', day: '2026-11-21', group: 'converter', count: 5 },
      { accountId: 'a', day: '2026-11-21', group: 'totp', count: 3 },
    ])
    assert.equal((await usage.list('a', '2026-01-01')).length, 3)
    assert.equal(await usage.total('a', '2026-11-01', '2026-11-30'), 11)
    assert.equal(await usage.total('a', '2026-11-21', '2026-11-21'), 8)
    assert.equal(await usage.total('c', '2026-11-01', '2026-11-30'), 0)
  })

  withStore('changes made through the store are announced', async ({ access }) => {
    let calls = 0
    const off = access.onChange(() => { calls++ })
    const account = await access.createAccount('x')
    await access.setSubscription(account.id, 'eu', 'totp', 'active')
    await access.setPlan(account.id, { rate: 1, burst: 1, quota: 0, period: 'day' })
    assert.ok(calls >= 3)
    off()
    const before = calls
    await access.createAccount('y')
    assert.equal(calls, before, 'no calls after unsubscribing')
  })

  withStore('onboarding records are replaced per account, application and user', async ({ access, onboarding }) => {
    const account = await access.createAccount('x')
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
    const [a, b] = [await access.createAccount('a'), await access.createAccount('b')]
    const base = { applicationId: 'app', algorithm: 'SHA1', digits: 8, period: 30 } as const
    await onboarding.upsert({ ...base, accountId: a.id, userId: 'u1', secretFingerprint: 'f1' }, new Date(1000))
    await onboarding.upsert({ ...base, accountId: a.id, userId: 'u2', digits: 7, secretFingerprint: 'f1' }, new Date(3000))
    await onboarding.upsert({ ...base, accountId: b.id, userId: 'u1', secretFingerprint: 'f2' }, new Date(2000))
    assert.equal((await onboarding.findBySecret(a.id, ['fx', 'f1']))?.userId, 'u2', 'the most recently updated record')
    assert.equal(await onboarding.findBySecret(a.id, ['f2']), null, 'another account\'s record')
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
    assert.deepEqual(await v.settle('k', null, 1000, policy), invalid, 'the third failure locks for the next')
    assert.deepEqual(await v.settle('k', 12, 5000, policy), { kind: 'locked', lockedUntil: 11_000 }, 'a right code waits too')
    assert.deepEqual(await v.settle('k', null, 10_999, policy), { kind: 'locked', lockedUntil: 11_000 }, 'a refused attempt moves nothing')
    assert.deepEqual(await v.settle('k', null, 11_000, policy), invalid)
    assert.deepEqual(await v.settle('k', null, 30_000, policy), { kind: 'locked', lockedUntil: 31_000 }, 'doubled: 20 s')
    assert.deepEqual(await v.settle('k', 11, 31_000, policy), { kind: 'reused' }, 'a replay is a failure')
    assert.deepEqual(await v.settle('k', null, 31_000, policy), { kind: 'locked', lockedUntil: 56_000 }, 'capped at 25 s')
    assert.deepEqual(await v.settle('k', 12, 60_000, policy), accepted)
    for (let i = 0; i < 3; i++) assert.deepEqual(await v.settle('k', null, 60_000, policy), invalid, 'an acceptance ends the run')
    assert.deepEqual(await v.settle('k', null, 60_000, policy), { kind: 'locked', lockedUntil: 70_000 })
    assert.deepEqual(await v.settle('other', null, 60_000, policy), invalid, 'keys are independent')
  })

  withStore('200 parallel wrong guesses: only maxFailures are answered before the lock', async ({ verification: v }) => {
    const strict: LockPolicy = { maxFailures: 5, baseSeconds: 60, maxSeconds: 3600 }
    for (let round = 0; round < 3; round++) {
      const results = await Promise.all(Array.from({ length: 200 }, () => v.settle(`guess-${round}`, null, 1000, strict)))
      assert.equal(results.filter((r) => r.kind === 'invalid').length, 5, `round ${round}`)
      assert.ok(results.every((r) => r.kind === 'invalid' || (r.kind === 'locked' && r.lockedUntil === 61_000)))
    }
  })

  withStore('a right code sent 100 times at once is accepted once; a right guess among 200 parallel wrong ones wins only inside the policy', async ({ verification: v }) => {
    const strict: LockPolicy = { maxFailures: 5, baseSeconds: 60, maxSeconds: 3600 }
    const results = await Promise.all(Array.from({ length: 100 }, () => v.settle('correct', 7, 1000, strict)))
    assert.equal(results.filter((r) => r.kind === 'accepted').length, 1)
    const mixed = await Promise.all(Array.from({ length: 200 }, (_, i) => v.settle('mixed', i === 150 ? 7 : null, 1000, strict)))
    // The store orders them as they come: the right code wins only if it comes before the fifth failure.
    const failed = mixed.filter((r) => r.kind === 'invalid').length
    if (mixed[150]!.kind === 'accepted') assert.ok(failed <= 9, `${failed} failures answered`)
    else assert.deepEqual([mixed[150]!.kind, failed], ['locked', 5])
  })

  withStore('concurrent acceptances of one step: exactly one wins', async ({ verification: v }) => {
    const results = await Promise.all(Array.from({ length: 20 }, () => v.settle('race', 5, 0, policy)))
    assert.equal(results.filter((r) => r.kind === 'accepted').length, 1)
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
  const noSeed = async () => { throw new Error('no quota, no seed') }
  const T0 = Date.UTC(2026, 10, 21, 12, 0, 0)

  withLimiter('the bucket holds the burst, refills at the rate, and a refused call consumes nothing', T0, async (l, clock) => {
    const plan: Plan = { rate: 10, burst: 3, quota: 0, period: 'day' }
    const taken: LimitDecision[] = []
    for (let i = 0; i < 3; i++) taken.push(await l.take('a', plan, noSeed))
    assert.deepEqual(taken.map((d) => d.admitted && d.tokens), [2, 1, 0])
    assert.deepEqual(taken[2], { admitted: true, tokens: 0, refillMs: 300, left: Infinity, windowEndsMs: 0 })
    assert.deepEqual(await l.take('a', plan, noSeed), { admitted: false, reason: 'throttle', retryAfterMs: 100 })
    assert.deepEqual(await l.take('a', plan, noSeed), { admitted: false, reason: 'throttle', retryAfterMs: 100 }, 'the refusal took nothing')
    clock.t += 100
    assert.equal((await l.take('a', plan, noSeed)).admitted, true, 'one token after 1/rate')
    assert.equal((await l.take('a', plan, noSeed)).admitted, false)
    assert.equal((await l.take('b', plan, noSeed)).admitted, true, 'accounts have buckets of their own')
    clock.t += 10_000
    assert.equal(((await l.take('a', plan, noSeed)) as { tokens: number }).tokens, 2, 'refilled to the burst, not past it')
  })

  withLimiter('concurrent calls: exactly the burst is admitted', T0, async (l) => {
    const plan: Plan = { rate: 1, burst: 5, quota: 0, period: 'day' }
    const results = await Promise.all(Array.from({ length: 20 }, () => l.take('race', plan, noSeed)))
    assert.equal(results.filter((d) => d.admitted).length, 5)
  })

  withLimiter('the daily quota is seeded once per window from the usage counts, and resets at UTC midnight', T0, async (l, clock) => {
    const plan: Plan = { rate: 0, burst: 1, quota: 3, period: 'day' }
    const seeds: [number, number][] = []
    const seed = async (start: number, end: number) => { seeds.push([start, end]); return 1 }
    const first = await l.take('a', plan, seed)
    assert.deepEqual(first, { admitted: true, tokens: Infinity, refillMs: 0, left: 1, windowEndsMs: 12 * 3600_000 })
    assert.equal((await l.take('a', plan, seed)).admitted, true)
    assert.deepEqual(await l.take('a', plan, seed), { admitted: false, reason: 'quota', retryAfterMs: 12 * 3600_000 })
    assert.deepEqual(seeds, [[Date.UTC(2026, 10, 21), Date.UTC(2026, 10, 22)]])
    clock.t = Date.UTC(2026, 10, 22, 0, 0, 0)
    assert.equal((await l.take('a', plan, seed)).admitted, true, 'a new day')
    assert.deepEqual(seeds.at(-1), [Date.UTC(2026, 10, 22), Date.UTC(2026, 10, 23)])
  })

  withLimiter('monthly windows follow the calendar (leap February, December to January)', Date.UTC(2028, 1, 10), async (l, clock) => {
    const plan: Plan = { rate: 0, burst: 1, quota: 1, period: 'month' }
    const seeds: [number, number][] = []
    const seed = async (start: number, end: number) => { seeds.push([start, end]); return 0 }
    assert.equal((await l.take('a', plan, seed)).admitted, true)
    assert.deepEqual(seeds[0], [Date.UTC(2028, 1, 1), Date.UTC(2028, 2, 1)])
    assert.deepEqual(await l.take('a', plan, seed), { admitted: false, reason: 'quota', retryAfterMs: Date.UTC(2028, 2, 1) - clock.t })
    clock.t = Date.UTC(2028, 11, 31, 23, 59, 59)
    assert.equal((await l.take('a', plan, seed)).admitted, true)
    assert.deepEqual(seeds[1], [Date.UTC(2028, 11, 1), Date.UTC(2029, 0, 1)])
    assert.deepEqual(await l.take('a', plan, seed), { admitted: false, reason: 'quota', retryAfterMs: 1000 })
  })

  withLimiter('throttle and quota together: a throttled call uses no quota', T0, async (l, clock) => {
    const plan: Plan = { rate: 1, burst: 1, quota: 2, period: 'day' }
    const seed = async () => 0
    assert.equal((await l.take('a', plan, seed)).admitted, true)
    assert.deepEqual(await l.take('a', plan, seed), { admitted: false, reason: 'throttle', retryAfterMs: 1000 })
    clock.t += 1000
    const second = await l.take('a', plan, seed)
    assert.equal(second.admitted && second.left, 0, 'the throttled call took no quota')
    clock.t += 1000
    assert.equal((await l.take('a', plan, seed) as { reason?: string }).reason, 'quota')
  })
}
