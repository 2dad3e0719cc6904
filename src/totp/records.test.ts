import { test } from 'node:test'
import assert from 'node:assert/strict'
import { openSqliteStore } from '../storage/sqlite/store.ts'
import type { OnboardingStore } from '../storage/ports.ts'
import { keyedDigest } from '../crypto/keyed.ts'
import { ParamsMark, RecordCache, secretFingerprint } from './records.ts'
import { makeAccount } from '../../test/support/storage/contract.ts'
import { newSecret, toBase32 } from './otp.ts'

test('RecordCache answers a repeated lookup from memory, found or not, until its TTL; it is bounded', async (t) => {
  const store = openSqliteStore({ path: ':memory:', maintenance: false })
  t.after(() => store.close())
  const pepper = Buffer.alloc(32, 7)
  const account = await makeAccount(store.access, 'a')
  const secret = newSecret()
  await store.onboarding.upsert(
    {
      accountId: account.id,
      applicationId: 'app',
      userId: 'u',
      algorithm: 'SHA256',
      digits: 8,
      period: 60,
      secretFingerprint: secretFingerprint(pepper, secret),
    },
    new Date(),
  )
  let reads = 0
  const counting: OnboardingStore = {
    ...store.onboarding,
    findBySecret: (...args) => {
      reads++
      return store.onboarding.findBySecret(...args)
    },
  }
  const cache = new RecordCache(counting, pepper, 30, 10)

  const first = cache.find(account.id, secret, 0)
  assert.ok(first instanceof Promise, 'a miss reads the store')
  assert.equal((await first)?.digits, 8)
  const second = cache.find(account.id, secret, 1000)
  assert.ok(!(second instanceof Promise), 'a hit is answered at once')
  assert.equal(second?.period, 60)
  const unknown = newSecret()
  assert.equal(await cache.find(account.id, unknown, 1000), null)
  assert.equal(cache.find(account.id, unknown, 1000), null, 'a miss is cached too')
  assert.equal(reads, 2)
  assert.equal(await cache.find('acc_other', secret, 1000), null, 'per account')
  assert.equal(reads, 3)
  assert.ok(!(cache.find(account.id, secret, 29_999) instanceof Promise), 'still cached just before the TTL')
  assert.equal((await cache.find(account.id, secret, 30_000))?.digits, 8, 'expired: read again')
  assert.equal(reads, 4)
  assert.equal(cache.find(account.id, newSecret().subarray(0, 10), 0), null, 'a secret of another length than ours has no record: no read')
  assert.equal(reads, 4)

  const small = new RecordCache(counting, pepper, 30, 2)
  for (const s of [secret, unknown, newSecret()]) await small.find(account.id, s, 0)
  assert.ok(small.find(account.id, secret, 0) instanceof Promise, 'the oldest entry gave way to the bound of 2')

  const uncached = new RecordCache(counting, pepper, 0, 10)
  assert.equal((await uncached.find(account.id, secret, 0))?.digits, 8)
  assert.ok(uncached.find(account.id, secret, 0) instanceof Promise, 'TTL 0: every lookup reads the store')
})

test('a record written before fingerprints were canonical is still found for a secret ending in a zero byte', async (t) => {
  const store = openSqliteStore({ path: ':memory:', maintenance: false })
  t.after(() => store.close())
  const pepper = Buffer.alloc(32, 7)
  const account = await makeAccount(store.access, 'a')
  const secret = newSecret()
  secret[secret.length - 1] = 0
  await store.onboarding.upsert(
    {
      accountId: account.id,
      applicationId: 'app',
      userId: 'u',
      algorithm: 'SHA1',
      digits: 7,
      period: 30,
      secretFingerprint: keyedDigest(pepper, 'onboarding-secret', toBase32(secret)), // the old fingerprint
    },
    new Date(),
  )
  assert.notEqual(secretFingerprint(pepper, secret), keyedDigest(pepper, 'onboarding-secret', toBase32(secret)))
  assert.equal((await new RecordCache(store.onboarding, pepper, 30, 10).find(account.id, secret, 0))?.digits, 7)
})

test('ParamsMark: drawn secrets carry it, about 1 in 256 random secrets do, every spelling alike, and it is keyed', () => {
  const mark = new ParamsMark(Buffer.alloc(32, 7))
  for (let i = 0; i < 20; i++) {
    const drawn = mark.draw()
    assert.equal(drawn.length, 20)
    assert.ok(mark.has(drawn))
    assert.ok(mark.has(Buffer.concat([drawn, Buffer.alloc(3)])), 'trailing zero bytes spell the same HMAC key')
  }
  let marked = 0
  for (let i = 0; i < 25_600; i++) if (mark.has(newSecret())) marked++
  // 100 expected; below 50 or above 160 is a one-in-a-million event for a fair byte.
  assert.ok(marked > 50 && marked < 160, `${marked} of 25 600 random secrets carry the mark`)
  const other = new ParamsMark(Buffer.alloc(32, 8))
  const drawn = Array.from({ length: 20 }, () => mark.draw())
  assert.ok(drawn.filter((s) => other.has(s)).length < 5, "another pepper's mark is another tag")
})
