/**
 * The Redis part of a scaled-out deployment (`REDIS_URL`, through `ioredis`): what several
 * nodes must share at request speed.
 * - Verification state (last accepted step, failures, lock), each change one Lua script,
 *   so an OTP accepted on one node is reused on every other.
 * - The limiter: token bucket and quota window in one Lua script per call, timed by the
 *   Redis server's clock (TIME), not the nodes'.
 * - Passkey ceremonies' challenges (challenges.ts).
 * - The access-change signal: pub/sub, so that a key revoked through any node or the CLI is
 *   dropped from every node's cache at once.
 *
 * Commands are not queued while Redis is away: they fail at once with UnavailableError
 * (verifyOTP answers 503, fail closed), and the client reconnects in the background.
 *
 * One Redis, or a Redis Cluster (`cluster`: the URL names one of its nodes, the client learns
 * the rest). Every script touches one hash slot: its keys share a hash tag (an account's bucket
 * and quota, an account's challenges) or it has one key. The one step that spans keys of
 * several accounts or users, an attempt under attempt limits (the user's state and each limit's
 * counter), is one script on one Redis; on a cluster each counter is taken by a script of its
 * own (taken only below its max), a full one gives back those taken, then the state is settled:
 * no more attempts pass a limit than on one Redis, and an attempt refused by one limit may, for
 * the moment its give-back takes, make a parallel one see a counter one higher (a refusal, never
 * an extra attempt).
 */
import { Cluster, Redis, type RedisOptions } from 'ioredis'
import type { LimitDecision } from '../../domain/usage.ts'
import type { Verdict, LockPolicy } from '../../domain/lockout.ts'
import { windowStart, type FactorStore, type Limiter, type VerificationStore } from '../ports.ts'
import type { Plan } from '../../domain/accounts.ts'
import { ACCEPTED, failure } from '../../domain/lockout.ts'
import { UnavailableError } from '../../domain/errors.ts'
import { defineChallengeScripts, redisChallenges } from './challenges.ts'

export interface RedisStoreOptions {
  readonly url: string
  /** The URL names a node of a Redis Cluster (REDIS_CLUSTER). */
  readonly cluster?: boolean
  /** Prefix of every key and channel (default `tessera:`): several deployments can share one Redis. */
  readonly prefix?: string
  /** Longest wait for a command (ms). */
  readonly timeoutMs?: number
  /** Verification state untouched for this long expires (ms). */
  readonly stateRetentionMs?: number
  /** Tests only: the limiter's clock instead of the server's TIME. */
  readonly limiterClock?: () => number
  /** Called on connection errors, which belong to no request. */
  readonly onBackgroundError?: (error: Error) => void
}

export interface AccessSignal {
  /** publish tells every node that accounts, keys, subscriptions or plans changed. */
  publish(): Promise<void>
  /** subscribe calls `listener` on every signal, and after a reconnection (signals may have been missed). */
  subscribe(listener: () => void): () => void
}

export interface RedisParts {
  readonly verification: VerificationStore
  /** Passkey ceremonies' challenges (redis/challenges.ts), in place of the relational store's. */
  readonly challenges: Pick<FactorStore, 'addChallenge' | 'takeChallenge'>
  readonly limiter: Limiter
  readonly signal: AccessSignal
  ping(): Promise<void>
  /** connected: the command connection is ready (no round trip). */
  connected(): boolean
  close(): Promise<void>
}

const DEPENDENCY = 'Redis'

/**
 * SETTLE: one verification. Locked: {0, lock}; a step later than the last accepted one:
 * {1} (accepted, the run of failures ends); else a failure: {2} (no match) or {3} (replay).
 */
const SETTLE = `
local now, max, base, cap = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local state = redis.call('HMGET', KEYS[1], 'lock', 'last')
local lock = tonumber(state[1] or '0')
if lock > now then return {0, string.format('%.0f', lock)} end
if ARGV[6] ~= '' and tonumber(ARGV[6]) > tonumber(state[2] or '-1') then
  redis.call('HSET', KEYS[1], 'last', ARGV[6], 'fails', 0, 'lock', 0)
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
  return {1}
end
local f = redis.call('HINCRBY', KEYS[1], 'fails', 1)
lock = 0
if f >= max then
  local delay = cap
  if f - max < 31 then delay = math.min(base * 2 ^ (f - max), cap) end
  lock = now + delay * 1000
end
redis.call('HSET', KEYS[1], 'lock', string.format('%.0f', lock))
redis.call('PEXPIRE', KEYS[1], string.format('%.0f', math.max(tonumber(ARGV[5]), lock - now + 1000)))
if ARGV[6] == '' then return {2, f} end
return {3, f}`

/**
 * LIMIT: KEYS[1] the bucket, KEYS[2] the quota key's stem; ARGV rate, burst, quota, period,
 * seed ('' = none), clock ('' = TIME), cost (units of quota; the bucket gives one token a
 * call whatever it costs). The window is the UTC day or calendar month of the server's time
 * (days to civil date: H. Hinnant's algorithm).
 */
const LIMIT = `
local now
if ARGV[6] ~= '' then now = tonumber(ARGV[6]) else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function int(x) return string.format('%.0f', x) end
local rate, burst, quota, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[7])
local left, ends, qkey = -1, 0, nil
if quota > 0 then
  local day = math.floor(now / 86400000)
  local first, after = day, day + 1
  if ARGV[4] == 'month' then
    local z = day + 719468
    local era = math.floor(z / 146097)
    local doe = z - era * 146097
    local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
    local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
    local mp = math.floor((5 * doy + 2) / 153)
    local d = doy - math.floor((153 * mp + 2) / 5) + 1
    local m = mp < 10 and mp + 3 or mp - 9
    local y = yoe + era * 400
    if m <= 2 then y = y + 1 end
    local len = ({31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31})[m]
    if m == 2 and y % 4 == 0 and (y % 100 ~= 0 or y % 400 == 0) then len = 29 end
    first = day - d + 1
    after = first + len
  end
  local start = first * 86400000
  ends = after * 86400000
  qkey = KEYS[2] .. ':' .. int(start)
  local used = redis.call('GET', qkey)
  if not used then
    if ARGV[5] == '' then return {'seed', int(start), int(ends)} end
    used = ARGV[5]
    redis.call('SET', qkey, used, 'PX', int(ends - now + 3600000))
  end
  -- Seeded usage may pass the quota (a plan lowered mid-window): nothing is left then.
  left = math.max(quota - tonumber(used), 0)
  if cost > left then return {'quota', int(ends - now)} end
  left = left - cost
end
local tokens, refill = -1, 0
if rate > 0 then
  local b = redis.call('HMGET', KEYS[1], 't', 'ts')
  tokens = tonumber(b[1]) or burst
  local ts = tonumber(b[2]) or now
  if now > ts then tokens = math.min(burst, tokens + (now - ts) * rate / 1000) else now = ts end
  if tokens < 1 then return {'throttle', int(math.ceil((1 - tokens) * 1000 / rate))} end
  tokens = tokens - 1
  refill = math.ceil((burst - tokens) * 1000 / rate)
  redis.call('HSET', KEYS[1], 't', string.format('%.17g', tokens), 'ts', int(now))
  redis.call('PEXPIRE', KEYS[1], int(refill + 1000))
end
if qkey and cost > 0 then redis.call('INCRBY', qkey, ARGV[7]) end
return {'ok', int(math.floor(tokens)), int(refill), int(left), int(qkey and (ends - now) or 0)}`

/**
 * CLEAR: an operator's unlock. The run of failures and the lock go, the last accepted step
 * stays (a clear must not let an accepted code be replayed); 1 when there was something to clear.
 */
const CLEAR = `
local state = redis.call('HMGET', KEYS[1], 'fails', 'lock')
if tonumber(state[1] or '0') == 0 and tonumber(state[2] or '0') == 0 then return 0 end
redis.call('HSET', KEYS[1], 'fails', 0, 'lock', 0)
return 1`

/** LOCKED: the last lock end of KEYS (0: none), read only. */
const LOCKED = `
local latest = 0
for _, key in ipairs(KEYS) do
  local lock = tonumber(redis.call('HGET', key, 'lock') or '0')
  if lock > latest then latest = lock end
end
return string.format('%.0f', latest)`

/**
 * FORGIVE: one failure of the run taken back (ARGV[1]: the policy's maxFailures, below which
 * the lock goes too); 0 when there was none. A key that expired stays absent.
 */
const FORGIVE = `
local fails = tonumber(redis.call('HGET', KEYS[1], 'fails') or '0')
if fails <= 0 then return 0 end
redis.call('HSET', KEYS[1], 'fails', fails - 1)
if fails - 1 < tonumber(ARGV[1]) then redis.call('HSET', KEYS[1], 'lock', 0) end
return 1`

/**
 * SETTLE_WITHIN: SETTLE behind attempt limits, in one script. KEYS[1] the verification state,
 * KEYS[2..] one counter per limit and window (a new window starts from nothing); ARGV[1..6]
 * SETTLE's, ARGV[7] the window's length in ms, ARGV[8..] each counter's max. A full window:
 * {4} and nothing counted or settled; else every counter counted, then SETTLE's answer.
 */
const SETTLE_WITHIN = `
for i = 2, #KEYS do
  if tonumber(redis.call('GET', KEYS[i]) or '0') >= tonumber(ARGV[i + 6]) then return {4} end
end
for i = 2, #KEYS do
  if redis.call('INCR', KEYS[i]) == 1 then redis.call('PEXPIRE', KEYS[i], tonumber(ARGV[7]) + 1000) end
end
${SETTLE}`

/**
 * ATTEMPT: one limit's counter on a cluster (KEYS[1]; ARGV max, window ms): 1 when taken (below
 * its max, counted), 0 when full (nothing counted). A new window starts from nothing.
 */
const ATTEMPT = `
if tonumber(redis.call('GET', KEYS[1]) or '0') >= tonumber(ARGV[1]) then return 0 end
if redis.call('INCR', KEYS[1]) == 1 then redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) + 1000) end
return 1`

/** GIVE_BACK: a counter ATTEMPT took, given back (never below nothing). */
const GIVE_BACK = `
if tonumber(redis.call('GET', KEYS[1]) or '0') > 0 then redis.call('DECR', KEYS[1]) end
return 1`

interface Scripts {
  tesseraAttempt(counter: string, max: string, windowMs: string): Promise<number>
  tesseraGiveBack(counter: string): Promise<number>
  /** Defined without numberOfKeys: the first argument is how many keys follow (the state's, then the counters'), then SETTLE's arguments, the window and each counter's max. */
  tesseraSettleWithin(keyCount: number, ...keysThenArgs: string[]): Promise<[number, (string | number)?]>
  tesseraClear(key: string): Promise<number>
  tesseraForgive(key: string, max: string): Promise<number>
  /** Defined without numberOfKeys: the first argument is how many keys follow. */
  tesseraLocked(keyCount: number, ...keys: string[]): Promise<string>
  tesseraSettle(key: string, now: string, max: string, base: string, cap: string, retention: string, step: string): Promise<[number, (string | number)?]>
  tesseraLimit(
    bucket: string,
    quotaStem: string,
    rate: string,
    burst: string,
    quota: string,
    period: string,
    seed: string,
    clock: string,
    cost: string,
  ): Promise<string[]>
}

/** A reply error is Redis refusing a command (a bug); anything else means Redis is not there. */
function unavailable(error: unknown): Error {
  return error instanceof Error && error.name === 'ReplyError' ? error : new UnavailableError(DEPENDENCY, error)
}

const none = (value: number) => (value < 0 ? Infinity : value)

/** call runs a command; a failure other than Redis refusing it (a bug) becomes UnavailableError. */
const call = async <T>(run: () => Promise<T>): Promise<T> => {
  try {
    return await run()
  } catch (error) {
    throw unavailable(error)
  }
}

/** stateKey: where a verification state lives (under the prefix). */
const stateKey = (key: string) => `otp:${key}`

/** connectionOptions: the command connection's settings (the subscriber's derive from them). */
function connectionOptions(options: RedisStoreOptions, prefix: string): RedisOptions {
  return {
    keyPrefix: prefix,
    // Fail fast while disconnected: a queued verification would wait without bound.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: options.timeoutMs ?? 2000,
    connectTimeout: options.timeoutMs ?? 2000,
    retryStrategy: (times) => Math.min(times * 100, 1000),
    // Off: measured on getOTP with a throttle, auto-pipelining cost more node CPU than it saved
    // (one PostgreSQL+Redis node: 0.55x -> 0.71x of the same node without limits, medians of 3).
    enableAutoPipelining: false,
    lazyConnect: true,
  }
}

/** A connection to one Redis or to a cluster: what the store uses of either. */
type Client = Redis | Cluster

/**
 * client opens a connection (lazily: connect() starts it) to the URL's Redis, or to the cluster
 * it is a node of, with `redisOptions` (the command connection's, or the subscriber's). On a
 * cluster the per-node options go to each node's connection, and reconnection is the cluster's
 * own (clusterRetryStrategy, not the single connection's retryStrategy).
 */
function client(options: RedisStoreOptions, redisOptions: RedisOptions): Client {
  if (options.cluster !== true) return new Redis(options.url, redisOptions)
  const url = new URL(options.url)
  const { keyPrefix, enableOfflineQueue, retryStrategy, lazyConnect, ...perNode } = redisOptions
  return new Cluster([{ host: url.hostname, port: Number(url.port || 6379) }], {
    ...(keyPrefix === undefined ? {} : { keyPrefix }),
    ...(enableOfflineQueue === undefined ? {} : { enableOfflineQueue }),
    ...(lazyConnect === undefined ? {} : { lazyConnect }),
    clusterRetryStrategy: (times) => Math.min(times * 100, 1000),
    // A moved slot (a resharding, a failover) is followed; a cluster without a primary for a slot answers at once.
    retryDelayOnClusterDown: 100,
    redisOptions: {
      ...perNode,
      ...(url.username === '' ? {} : { username: decodeURIComponent(url.username) }),
      ...(url.password === '' ? {} : { password: decodeURIComponent(url.password) }),
      ...(url.protocol === 'rediss:' ? { tls: {} } : {}),
    },
  })
}

/** commandClient: the command connection, with the Lua scripts defined on it. */
function commandClient(options: RedisStoreOptions, redisOptions: RedisOptions): Client {
  const redis = client(options, redisOptions)
  redis.on('error', (error: Error) => options.onBackgroundError?.(error))
  redis.defineCommand('tesseraSettle', { numberOfKeys: 1, lua: SETTLE })
  redis.defineCommand('tesseraClear', { numberOfKeys: 1, lua: CLEAR })
  redis.defineCommand('tesseraForgive', { numberOfKeys: 1, lua: FORGIVE })
  redis.defineCommand('tesseraLocked', { lua: LOCKED })
  redis.defineCommand('tesseraLimit', { numberOfKeys: 2, lua: LIMIT })
  redis.defineCommand('tesseraSettleWithin', { lua: SETTLE_WITHIN })
  redis.defineCommand('tesseraAttempt', { numberOfKeys: 1, lua: ATTEMPT })
  redis.defineCommand('tesseraGiveBack', { numberOfKeys: 1, lua: GIVE_BACK })
  defineChallengeScripts(redis)
  return redis
}

/** verdictOf reads SETTLE's answer. */
function verdictOf(verdict: number, value: string | number | undefined, step: number | null, policy: LockPolicy): Verdict {
  if (verdict === 1) return ACCEPTED
  if (verdict === 2 || verdict === 3) return failure(verdict === 2 ? null : step, Number(value), policy)
  return { kind: 'locked', lockedUntil: Number(value) }
}

/** redisVerification: verification state, each change one Lua script. */
function redisVerification(scripts: Scripts, retention: string, cluster: boolean): VerificationStore {
  /** SETTLE's arguments after its key (SETTLE_WITHIN's first six). */
  const settleArgs = (nowMs: number, policy: LockPolicy, step: number | null): [string, string, string, string, string, string] => [
    String(nowMs),
    String(policy.maxFailures),
    String(policy.baseSeconds),
    String(policy.maxSeconds),
    retention,
    step === null ? '' : String(step),
  ]
  const settle = async (key: string, step: number | null, nowMs: number, policy: LockPolicy): Promise<Verdict> => {
    // {1} accepted; {2, failures} no match; {3, failures} a replay; {0, until} locked.
    const [verdict, value] = await call(() => scripts.tesseraSettle(stateKey(key), ...settleArgs(nowMs, policy, step)))
    return verdictOf(verdict, value, step, policy)
  }
  return {
    settle,
    async clear(key) {
      return (await call(() => scripts.tesseraClear(stateKey(key)))) === 1
    },
    async lockedUntil(keys, nowMs) {
      if (keys.length === 0) return 0
      // On a cluster the keys are in slots of their own: one read each (a read only, nothing to keep atomic).
      const untils = cluster
        ? await Promise.all(keys.map((key) => call(() => scripts.tesseraLocked(1, stateKey(key)))))
        : [await call(() => scripts.tesseraLocked(keys.length, ...keys.map(stateKey)))]
      const until = Math.max(...untils.map(Number))
      return until > nowMs ? until : 0
    },
    async forgive(key, policy: LockPolicy) {
      return (await call(() => scripts.tesseraForgive(stateKey(key), String(policy.maxFailures)))) === 1
    },
    async settleWithin(key, step, nowMs, policy: LockPolicy, limits, windowMs) {
      // The windows are the caller's clock's (Redis keeps no time of its own here, as for the lockout).
      const start = windowStart(nowMs, windowMs)
      const counters = limits.map((l) => `attempts:${l.key}:${start}`)
      if (cluster) {
        const taken = await Promise.all(counters.map((c, i) => call(() => scripts.tesseraAttempt(c, String(limits[i]!.max), String(windowMs)))))
        if (taken.every((t) => t === 1)) return settle(key, step, nowMs, policy)
        // (Should Redis fail between a take and its give-back, the window keeps one attempt too many until it ends: a refusal, never an extra try.)
        await Promise.all(counters.filter((_, i) => taken[i] === 1).map((c) => call(() => scripts.tesseraGiveBack(c))))
        return { kind: 'limited', retryAtMs: start + windowMs }
      }
      const [verdict, value] = await call(() =>
        scripts.tesseraSettleWithin(
          1 + counters.length,
          stateKey(key),
          ...counters,
          ...settleArgs(nowMs, policy, step),
          String(windowMs),
          ...limits.map((l) => String(l.max)),
        ),
      )
      if (verdict === 4) return { kind: 'limited', retryAtMs: start + windowMs }
      return verdictOf(verdict, value, step, policy)
    },
  }
}

/** redisLimiter: the token bucket and quota window, one Lua script per call, seeded from the store's usage when the window is new. */
function redisLimiter(scripts: Scripts, clock: (() => number) | undefined): Limiter {
  const limit = (accountId: string, plan: Plan, cost: number, seed: string) =>
    call(() =>
      scripts.tesseraLimit(
        // One hash tag: the script reads both, and builds the window's quota key from the second (one slot on a cluster).
        `bucket:{${accountId}}`,
        `quota:{${accountId}}`,
        String(plan.rate),
        String(plan.burst),
        String(plan.quota),
        plan.period,
        seed,
        clock ? String(clock()) : '',
        String(cost),
      ),
    )
  return {
    async take(accountId, plan, cost, seed): Promise<LimitDecision> {
      // INCRBY counts whole units; anything else is a bug upstream, not Redis being away.
      if (!Number.isSafeInteger(cost) || cost < 0) throw new RangeError(`a call's cost is a whole number of units >= 0, not ${cost}`)
      let reply = await limit(accountId, plan, cost, '')
      if (reply[0] === 'seed') {
        const used = await seed(Number(reply[1]), Number(reply[2]))
        reply = await limit(accountId, plan, cost, String(used))
      }
      switch (reply[0]) {
        case 'ok':
          return { admitted: true, tokens: none(Number(reply[1])), refillMs: Number(reply[2]), left: none(Number(reply[3])), windowEndsMs: Number(reply[4]) }
        case 'quota':
          return { admitted: false, reason: 'quota', retryAfterMs: Number(reply[1]) }
        case 'throttle':
          return { admitted: false, reason: 'throttle', retryAfterMs: Number(reply[1]) }
        default:
          throw new Error(`unexpected limiter reply ${String(reply[0])}`)
      }
    },
  }
}

/** openRedisParts opens both connections, without waiting long: it starts even when Redis is away. */
export async function openRedisParts(options: RedisStoreOptions): Promise<RedisParts> {
  const prefix = options.prefix ?? 'tessera:'
  const retention = String(options.stateRetentionMs ?? 24 * 3600 * 1000)
  const redisOptions = connectionOptions(options, prefix)
  const redis = commandClient(options, redisOptions)
  const scripts = redis as unknown as Scripts

  // Subscriptions need a connection of their own; it resubscribes after reconnecting.
  const subscriber = client(options, { ...redisOptions, keyPrefix: undefined, enableOfflineQueue: true, maxRetriesPerRequest: null })
  subscriber.on('error', (error: Error) => options.onBackgroundError?.(error))
  const channel = `${prefix}access-changed`
  const listeners = new Set<() => void>()
  const notify = () => {
    for (const l of listeners) l()
  }
  subscriber.on('message', notify)
  // A (re)connection may come after missed signals: tell the listeners as if one came.
  subscriber.on('ready', notify)

  // Start even when Redis is away (verifyOTP answers 503 until it is back); never wait long.
  await Promise.all([redis.connect().catch(() => undefined), subscriber.connect().catch(() => undefined)])
  // Queued until the subscriber is connected, however late; resubscribed after every reconnection.
  subscriber.subscribe(channel).catch((error: Error) => options.onBackgroundError?.(error))

  const signal: AccessSignal = {
    async publish() {
      // publish takes the channel as given (keyPrefix applies to keys only).
      await call(() => redis.publish(channel, '1'))
    },
    subscribe(listener) {
      listeners.add(listener)
      return () => listeners.delete(listener)
    },
  }

  return {
    verification: redisVerification(scripts, retention, options.cluster === true),
    challenges: redisChallenges(redis, call),
    limiter: redisLimiter(scripts, options.limiterClock),
    signal,
    async ping() {
      await call(() => redis.ping())
    },
    connected: () => redis.status === 'ready',
    async close() {
      listeners.clear()
      redis.disconnect()
      subscriber.disconnect()
    },
  }
}
