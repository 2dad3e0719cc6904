import { test } from 'node:test'
import assert from 'node:assert/strict'
import { GrantCache } from './cache.ts'
import type { KeyGrant } from '../domain/accounts.ts'

const grant: KeyGrant = {
  keyId: 'k',
  accountId: 'a',
  revoked: false,
  accountActive: true,
  expiresAt: Infinity,
  subscriptions: new Set(['eu:totp']),
  scope: { groups: null, regions: null },
  plan: null,
}

test('entries expire, misses are cached too, and the oldest goes first when full', () => {
  const cache = new GrantCache(10, 2)
  cache.set('a', grant, 0, cache.generation)
  cache.set('b', null, 0, cache.generation)
  assert.equal(cache.get('a', 9_999), grant)
  assert.equal(cache.get('b', 9_999), null)
  assert.equal(cache.get('a', 10_000), undefined, 'expired')
  cache.set('c', grant, 0, cache.generation)
  cache.set('d', grant, 0, cache.generation)
  assert.equal(cache.size, 2)
  assert.equal(cache.get('b', 0), undefined, 'evicted')
})

test('a lookup that began before a clear is not cached after it', () => {
  const cache = new GrantCache(10, 10)
  const before = cache.generation
  cache.clear() // a revocation lands while the store lookup is in flight
  cache.set('a', grant, 0, before)
  assert.equal(cache.get('a', 0), undefined)
})
