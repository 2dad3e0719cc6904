/**
 * The Redis parts on a Redis Cluster of three primaries this file starts (support/redis-cluster.ts):
 * the whole store contract (verification, lockouts, attempt limits, passkey challenges, with many
 * parallel calls) and the limiter's, on SQLite and PostgreSQL beside the cluster; then what only a
 * cluster shows: state spread over the primaries, every script on one slot (the cluster refuses
 * one that is not: CROSSSLOT), attempt limits held across slots under parallel attempts, and the
 * access-change signal between two nodes.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { limiterContract, storeContract } from '../support/storage/contract.ts'
import { openRedisParts, type RedisParts, type RedisStoreOptions } from '../../src/storage/redis/store.ts'
import { openSqliteStore } from '../../src/storage/sqlite/store.ts'
import { withRedis } from '../../src/storage/factory.ts'
import { openTestPostgres, skipUnless, uniqueName } from '../support/services.ts'
import { clusterSkip, keysPerNode, redisCluster } from '../support/redis-cluster.ts'
import type { Plan } from '../../src/domain/accounts.ts'

const skip = clusterSkip()
const skipPostgres = skip || skipUnless('TEST_DATABASE_URL')

/** openClusterParts: the Redis parts on the file's cluster, under a prefix of their own (the cluster goes with the file). */
async function openClusterParts(options: Partial<RedisStoreOptions> = {}): Promise<RedisParts> {
  const cluster = await redisCluster()
  return openRedisParts({ url: cluster.url, cluster: true, prefix: `${uniqueName('t')}:`, ...options })
}

storeContract(
  'sqlite+redis-cluster',
  async (clock) => withRedis(openSqliteStore({ path: ':memory:', ...(clock === undefined ? {} : { clock }) }), await openClusterParts(), () => undefined),
  skip,
)
storeContract(
  'postgres+redis-cluster',
  async (clock) => withRedis(await openTestPostgres(undefined, clock), await openClusterParts(), () => undefined),
  skipPostgres,
)
limiterContract(
  'redis-cluster',
  async (clock) => openClusterParts({ limiterClock: clock }).then((parts) => ({ limiter: parts.limiter, close: parts.close })),
  skip,
)

const policy = { maxFailures: 5, baseSeconds: 60, maxSeconds: 3600 }
const plan: Plan = { rate: 1000, burst: 1000, quota: 1_000_000, period: 'month', weights: { totp: 1, converter: 1 } }

test('redis cluster: state of many users and accounts is spread over the three primaries, and every script runs on one slot', { skip }, async (t) => {
  const cluster = await redisCluster()
  const prefix = `${uniqueName('t')}:`
  const parts = await openRedisParts({ url: cluster.url, cluster: true, prefix })
  t.after(() => parts.close())
  const now = Date.now()
  // Every kind of script, for 60 users of 20 accounts: none is refused as spanning slots (CROSSSLOT would throw).
  for (let i = 0; i < 60; i++) {
    const account = `acct-${i % 20}`
    const limits = [
      { key: `user-${i}`, max: 5 },
      { key: `source-${account}`, max: 1000 },
    ]
    assert.equal((await parts.verification.settleWithin(`state-${i}`, 100, now, policy, limits, 60_000)).kind, 'accepted')
    assert.equal((await parts.verification.settle(`plain-${i}`, 100, now, policy)).kind, 'accepted')
    assert.equal((await parts.limiter.take(account, plan, 1, async () => 0)).admitted, true)
    const challenge = { digest: `d-${i}`, accountId: account, userId: `u-${i}`, purpose: 'authentication' as const, userVerification: 'preferred' }
    const added = await parts.challenges.addChallenge(
      { ...challenge, createdAt: new Date(now).toISOString(), expiresAt: new Date(now + 300_000).toISOString() },
      10,
      100,
      new Date(now).toISOString(),
    )
    assert.ok(added.added)
  }
  assert.equal(await parts.verification.lockedUntil(['state-1', 'state-2', 'plain-3', 'nobody'], now), 0, 'a lock read across slots')
  assert.equal((await parts.challenges.takeChallenge('acct-1', 'd-1', new Date(now).toISOString()))?.digest, 'd-1')
  const spread = keysPerNode(cluster, prefix)
  assert.equal(spread.length, 3)
  for (const n of spread) assert.ok(n > 20, `every primary holds a share of the keys: ${spread.join(', ')}`)
})

test('redis cluster: 150 parallel attempts of one user behind a limit of 5 a window, and of 30 users behind a shared limit of 20: no more pass', {
  skip,
}, async (t) => {
  const parts = await openClusterParts()
  t.after(() => parts.close())
  const now = Date.now()
  const wide = { ...policy, maxFailures: 1000 }
  // One user: the state and the user's counter in slots of their own.
  const one = await Promise.all(
    Array.from({ length: 150 }, (_, i) => parts.verification.settleWithin('one-user', null, now + i, wide, [{ key: 'one-user-limit', max: 5 }], 60_000)),
  )
  assert.equal(one.filter((v) => v.kind !== 'limited').length, 5, 'five tried, as many as the limit')
  // Thirty users, each with a limit of 3, all behind one source's limit of 20: the shared one holds, each user's too.
  const many = await Promise.all(
    Array.from({ length: 150 }, (_, i) =>
      parts.verification.settleWithin(
        `user-${i % 30}`,
        null,
        now + i,
        wide,
        [
          { key: `limit-user-${i % 30}`, max: 3 },
          { key: 'limit-source', max: 20 },
        ],
        60_000,
      ),
    ),
  )
  const tried = many.filter((v) => v.kind !== 'limited').length
  assert.ok(tried <= 20, `at most the shared limit tried: ${tried}`)
  assert.ok(tried >= 15, `and not far below it (a give-back may refuse a few at once): ${tried}`)
  // A window later each counter starts again from nothing: the limits were taken back by refusals, never left over.
  const later = await parts.verification.settleWithin('user-0', null, now + 120_000, wide, [{ key: 'limit-source', max: 20 }], 60_000)
  assert.notEqual(later.kind, 'limited')
})

test('redis cluster: one accepted code is a replay on another node; a signal published by one node is heard by the other', { skip }, async (t) => {
  const cluster = await redisCluster()
  const prefix = `${uniqueName('t')}:`
  const a = await openRedisParts({ url: cluster.url, cluster: true, prefix })
  // The second node starts from another primary of the cluster.
  const b = await openRedisParts({ url: `redis://127.0.0.1:${cluster.ports[2]}`, cluster: true, prefix })
  t.after(async () => {
    await a.close()
    await b.close()
  })
  assert.deepEqual(await a.verification.settle('k', 100, 0, policy), { kind: 'accepted' })
  assert.equal((await b.verification.settle('k', 100, 0, policy)).kind, 'reused')
  let heard = 0
  b.signal.subscribe(() => {
    heard++
  })
  const start = Date.now()
  while (heard === 0 && Date.now() - start < 5000) {
    await a.signal.publish()
    await new Promise((r) => setTimeout(r, 50))
  }
  assert.ok(heard > 0, "B heard A's signal")
})
