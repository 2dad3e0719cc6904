import { test } from 'node:test'
import assert from 'node:assert/strict'
import { openSqliteStore } from '../storage/sqlite/store.ts'
import type { OnboardingStore } from '../storage/ports.ts'
import { RecordCache, secretFingerprint } from './records.ts'
import { newSecret } from './otp.ts'

test('RecordCache answers a repeated lookup from memory, found or not, until its TTL; it is bounded', async (t) => {
  const store = openSqliteStore({ path: ':memory:', maintenance: false })
  t.after(() => store.close())
  const pepper = Buffer.alloc(32, 7)
  const account = await store.access.createAccount('a')
  const secret = newSecret()
  await store.onboarding.upsert({
    accountId: account.id, applicationId: 'app', userId: 'u', algorithm: 'SHA256', digits: 8, period: 60,
    secretFingerprint: secretFingerprint(pepper, secret, 'SHA256'),
  }, new Date())
  let reads = 0
  const counting: OnboardingStore = { ...store.onboarding, findBySecret: (...args) => { reads++; return store.onboarding.findBySecret(...args) } }
  const cache = new RecordCache(counting, pepper, 30, 2)

  const first = cache.find(account.id, secret, undefined, 0)
  assert.ok(first instanceof Promise, 'a miss reads the store')
  assert.equal((await first)?.digits, 8)
  const second = cache.find(account.id, secret, undefined, 1000)
  assert.ok(!(second instanceof Promise), 'a hit is answered at once')
  assert.equal(second?.period, 60)
  const unknown = newSecret()
  assert.equal(await cache.find(account.id, unknown, undefined, 1000), null)
  assert.equal(cache.find(account.id, unknown, undefined, 1000), null, 'a miss is cached too')
  assert.equal(reads, 2)
  assert.equal(await cache.find('acc_other', secret, undefined, 1000), null, 'per account')
  assert.equal(reads, 3)
  assert.equal((await cache.find(account.id, secret, undefined, 31_000))?.digits, 8, 'expired: read again')
  assert.equal(reads, 4, 'and the oldest entries gave way to the bound of 2')
  const uncached = new RecordCache(counting, pepper, 0, 10)
  assert.equal((await uncached.find(account.id, secret, 'SHA256', 0))?.digits, 8)
  assert.ok(uncached.find(account.id, secret, 'SHA256', 0) instanceof Promise, 'TTL 0: every lookup reads the store')
})
