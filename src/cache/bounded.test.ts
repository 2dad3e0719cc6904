import { test } from 'node:test'
import assert from 'node:assert/strict'
import { BoundedCache } from './bounded.ts'

test('the cache never holds more than its bound, whatever the mix of sets, hits and misses', () => {
  for (const max of [1, 2, 3, 10, 101]) {
    const cache = new BoundedCache<number>(60, max)
    let seed = max
    const next = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31
      return seed
    }
    for (let i = 0; i < 5_000; i++) {
      const key = String(next() % (3 * max))
      if (next() % 3 === 0) cache.get(key, 0)
      else cache.set(key, i, 0)
      assert.ok(cache.size <= max, `bound ${max}: ${cache.size} entries after step ${i}`)
    }
  }
})

test('an entry in use survives a flood of one-off entries; the others go oldest first', () => {
  const cache = new BoundedCache<string>(60, 100)
  cache.set('hot', 'kept', 0)
  cache.set('cold', 'dropped', 0)
  for (let i = 0; i < 10_000; i++) {
    cache.set(`flood-${i}`, 'x', 0)
    if (i % 10 === 0) assert.equal(cache.get('hot', 0), 'kept', `after ${i} one-off entries`)
  }
  assert.equal(cache.get('cold', 0), undefined)
  assert.equal(cache.get('flood-0', 0), undefined)
  assert.equal(cache.get('flood-9999', 0), 'x')
})

test('entries expire, null is a value, a TTL of 0 keeps nothing, and clear empties it', () => {
  const cache = new BoundedCache<string | null>(10, 4)
  cache.set('a', null, 0)
  cache.set('b', 'b', 0)
  assert.equal(cache.get('a', 9_999), null, 'a cached miss')
  assert.equal(cache.get('b', 10_000), undefined, 'expired')
  cache.set('b', 'again', 10_000)
  assert.equal(cache.get('b', 19_999), 'again', 'a new value restarts the clock')
  cache.clear()
  assert.equal(cache.size, 0)
  assert.equal(cache.get('a', 0), undefined)
  const none = new BoundedCache<string>(0, 4)
  none.set('a', 'a', 0)
  assert.equal(none.get('a', 0), undefined)
  assert.equal(none.size, 0)
})

test('a bound of 1 keeps the last entry only', () => {
  const cache = new BoundedCache<string>(60, 1)
  cache.set('a', 'a', 0)
  cache.set('b', 'b', 0)
  assert.equal(cache.get('a', 0), undefined)
  assert.equal(cache.get('b', 0), 'b')
  assert.equal(cache.size, 1)
})
