import { test } from 'node:test'
import assert from 'node:assert/strict'
import { limiterContract, storeContract } from '../support/storage/contract.ts'
import { UnavailableError } from '../../src/domain/errors.ts'
import type { Plan } from '../../src/domain/accounts.ts'
import { openRedisParts } from '../../src/storage/redis/store.ts'
import { TcpProxy } from '../support/proxy.ts'
import { openPostgresWithRedis, openSqliteWithRedis, openTestRedis, skipUnless, uniqueName, dropPrefix, redisUrl } from '../support/services.ts'

const skip = skipUnless('TEST_REDIS_URL')
const skipBoth = skipUnless('TEST_DATABASE_URL', 'TEST_REDIS_URL')

storeContract('sqlite+redis', openSqliteWithRedis, skip)
storeContract('postgres+redis', openPostgresWithRedis, skipBoth)
limiterContract('redis', async (clock) => openTestRedis({ limiterClock: clock }).then((parts) => ({ limiter: parts.limiter, close: parts.close })), skip)

test("redis: two nodes share verification state and hear each other's access changes", { skip }, async (t) => {
  const prefix = `${uniqueName('t')}:`
  t.after(() => dropPrefix(prefix))
  const a = await openRedisParts({ url: redisUrl(), prefix })
  const b = await openRedisParts({ url: redisUrl(), prefix })
  t.after(async () => {
    await a.close()
    await b.close()
  })
  const policy = { maxFailures: 1, baseSeconds: 60, maxSeconds: 60 }
  assert.deepEqual(await a.verification.settle('k', 100, 0, policy), { kind: 'accepted' })
  assert.deepEqual(await b.verification.settle('k', 100, 0, policy), { kind: 'reused', locks: true }, 'accepted on A is reused on B, and that failure locks')
  assert.deepEqual(await a.verification.settle('k', 101, 0, policy), { kind: 'locked', lockedUntil: 60_000 }, 'a lock set on B holds on A')

  let heard = 0
  b.signal.subscribe(() => {
    heard++
  })
  await a.signal.publish()
  const start = Date.now()
  while (heard === 0 && Date.now() - start < 2000) await new Promise((r) => setTimeout(r, 5))
  assert.equal(heard, 1, "B heard A's signal")
})

test("redis: the limiter runs on the server's clock", { skip }, async (t) => {
  const parts = await openTestRedis()
  t.after(() => parts.close())
  const plan: Plan = { rate: 1, burst: 2, quota: 0, period: 'day', weights: { totp: 1, converter: 1 } }
  const seed = async () => 0
  assert.equal((await parts.limiter.take('a', plan, 1, seed)).admitted, true)
  assert.equal((await parts.limiter.take('a', plan, 1, seed)).admitted, true)
  const refused = await parts.limiter.take('a', plan, 1, seed)
  assert.equal(refused.admitted, false)
  assert.ok(!refused.admitted && refused.retryAfterMs > 900 && refused.retryAfterMs <= 1000, JSON.stringify(refused))
})

test('redis: unreachable means UnavailableError at once, not a queued wait', { skip }, async (t) => {
  const url = new URL(redisUrl())
  url.port = '1'
  const parts = await openRedisParts({ url: url.href, prefix: 'x:', timeoutMs: 300 })
  t.after(() => parts.close())
  const start = Date.now()
  await assert.rejects(
    parts.verification.settle('k', 1, 0, { maxFailures: 5, baseSeconds: 60, maxSeconds: 60 }),
    (error: Error) => error instanceof UnavailableError && error.dependency === 'Redis',
  )
  await assert.rejects(
    parts.limiter.take('a', { rate: 1, burst: 1, quota: 0, period: 'day', weights: { totp: 1, converter: 1 } }, 1, async () => 0),
    UnavailableError,
  )
  assert.ok(Date.now() - start < 1000)
})

test('redis: a node that started while Redis was away hears access changes once it is back', { skip, timeout: 30_000 }, async (t) => {
  const prefix = `${uniqueName('t')}:`
  const proxy = await TcpProxy.start(redisUrl())
  t.after(async () => {
    await proxy.close()
    await dropPrefix(prefix)
  })
  await proxy.cut()
  const late = await openRedisParts({ url: proxy.via(redisUrl()), prefix, timeoutMs: 300 })
  const publisher = await openRedisParts({ url: redisUrl(), prefix })
  t.after(async () => {
    await late.close()
    await publisher.close()
  })
  let heard = 0
  late.signal.subscribe(() => {
    heard++
  })
  await proxy.restore()
  // Publish until heard: the late node subscribes when its connection comes back.
  const start = Date.now()
  while (heard === 0) {
    assert.ok(Date.now() - start < 10_000, 'heard within 10 s of Redis coming back')
    await publisher.signal.publish()
    await new Promise((r) => setTimeout(r, 50))
  }
  // The reconnection itself counts as a signal, and may come before the subscription is
  // back: keep publishing until a message is heard.
  const before = heard
  const again = Date.now()
  while (heard === before && Date.now() - again < 10_000) {
    await publisher.signal.publish()
    await new Promise((r) => setTimeout(r, 50))
  }
  assert.ok(heard > before, 'and hears published changes')
})
