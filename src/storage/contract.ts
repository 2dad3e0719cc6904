/**
 * The storage contract: one suite that every adapter must pass. Each adapter's test file
 * calls storeContract with a factory for a fresh, empty store.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { LockPolicy, Store } from './ports.ts'

const policy: LockPolicy = { maxFailures: 3, baseSeconds: 10, maxSeconds: 25 }

export function storeContract(name: string, open: () => Promise<Store>): void {
  const withStore = (title: string, body: (s: Store) => Promise<void>) =>
    test(`${name}: ${title}`, async () => {
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
      { keyId: key.id, accountId: account.id, revoked: false, accountActive: true, subscriptions: [] })
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

  withStore('changes made through the store are announced', async ({ access }) => {
    let calls = 0
    const off = access.onChange(() => { calls++ })
    const account = await access.createAccount('x')
    await access.setSubscription(account.id, 'eu', 'totp', 'active')
    assert.ok(calls >= 2)
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

  withStore('verification state: steps are accepted once, failures lock with a doubling delay', async ({ verification: v }) => {
    assert.equal(await v.lockedUntil('k', 0), 0)
    assert.equal(await v.accept('k', 10, 0), 'accepted')
    assert.equal(await v.accept('k', 10, 0), 'reused')
    assert.equal(await v.accept('k', 9, 0), 'reused')
    assert.equal(await v.accept('k', 11, 0), 'accepted')
    assert.deepEqual(await v.fail('k', 1000, policy), { failures: 1, lockedUntil: 0 })
    assert.deepEqual(await v.fail('k', 1000, policy), { failures: 2, lockedUntil: 0 })
    assert.deepEqual(await v.fail('k', 1000, policy), { failures: 3, lockedUntil: 11_000 })
    assert.equal(await v.lockedUntil('k', 5000), 11_000)
    assert.equal(await v.lockedUntil('k', 11_000), 0)
    assert.deepEqual(await v.fail('k', 11_000, policy), { failures: 4, lockedUntil: 31_000 })
    assert.deepEqual(await v.fail('k', 31_000, policy), { failures: 5, lockedUntil: 56_000 }, 'capped at 25 s')
    assert.equal(await v.accept('k', 12, 60_000), 'accepted')
    assert.deepEqual(await v.fail('k', 60_000, policy), { failures: 1, lockedUntil: 0 }, 'a success resets the run')
    assert.equal(await v.accept('other', 1, 0), 'accepted', 'keys are independent')
  })

  withStore('concurrent acceptances of one step: exactly one wins', async ({ verification: v }) => {
    const results = await Promise.all(Array.from({ length: 20 }, () => v.accept('race', 5, 0)))
    assert.equal(results.filter((r) => r === 'accepted').length, 1)
  })
}
