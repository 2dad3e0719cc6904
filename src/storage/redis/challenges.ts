/**
 * Passkey challenges in Redis, when a deployment has it: a ceremony's challenge lives five
 * minutes and is used once, so it is kept where every node reaches it in one round trip, not in
 * the relational store (on PostgreSQL each one was a transaction that queued on the account's
 * tally row: a sign-in took two, and 50 at once of one account waited on each other).
 *
 * Each account's challenges are three keys under one hash tag (`{account}`), so that every
 * script touches one slot (a Redis Cluster serves them as one Redis does):
 * - `pk:{A}:open`, a sorted set of digest → expiry (ms): what the account's cap counts, and when
 *   its first open one expires (Retry-After when it is full);
 * - `pk:{A}:data`, a hash of digest → the challenge (JSON);
 * - `pk:{A}:u:<user>`, a sorted set of digest → creation (ms) per user: the user's cap ends their
 *   oldest. A user is named by a digest of their ID (IDs are up to 256 characters).
 * Adding is one script (expired ones go, the user's oldest beyond their cap go, the account's
 * cap is checked, the challenge kept) and taking is one (read and deleted at once: of many
 * answers at once, one has it). Times are the caller's, as for the lockout; the keys expire with
 * their last challenge, so an account that stops asking leaves nothing behind. Challenges are
 * not kept across a Redis restart without persistence: a ceremony under way then starts again.
 */
import { createHash } from 'node:crypto'
import type { Cluster, Redis } from 'ioredis'
import type { PasskeyChallenge } from '../../domain/factors.ts'
import type { ChallengeAdded, FactorStore } from '../ports.ts'

/**
 * ADD: KEYS[1] open, KEYS[2] data, KEYS[3] the user's (absent for a challenge of no user);
 * ARGV now, digest, challenge, created, expires (ms), the user's cap, the account's cap.
 * {1} kept; {0, expiry of the first open one} refused (nothing changed).
 */
const ADD = `
local now, digest, created, expires = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[4]), tonumber(ARGV[5])
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
for i = 1, #gone, 500 do
  redis.call('HDEL', KEYS[2], unpack(gone, i, math.min(i + 499, #gone)))
end
if #gone > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) end
local evict = {}
if KEYS[3] then
  for _, d in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
    if not redis.call('ZSCORE', KEYS[1], d) then redis.call('ZREM', KEYS[3], d) end
  end
  local over = redis.call('ZCARD', KEYS[3]) - tonumber(ARGV[6]) + 1
  if over > 0 then evict = redis.call('ZRANGE', KEYS[3], 0, over - 1) end
end
if redis.call('ZCARD', KEYS[1]) - #evict + 1 > tonumber(ARGV[7]) then
  return {0, redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2]}
end
for _, d in ipairs(evict) do
  redis.call('ZREM', KEYS[3], d)
  redis.call('ZREM', KEYS[1], d)
  redis.call('HDEL', KEYS[2], d)
end
redis.call('ZADD', KEYS[1], expires, digest)
redis.call('HSET', KEYS[2], digest, ARGV[3])
if KEYS[3] then redis.call('ZADD', KEYS[3], created, digest) end
-- Each key lives as long as the latest challenge in it (the caller's clock: a TTL, not a time).
local ttl = math.max(expires - now, 1000)
for i = 1, #KEYS do
  if redis.call('PTTL', KEYS[i]) < ttl then redis.call('PEXPIRE', KEYS[i], string.format('%.0f', ttl)) end
end
return {1}`

/** TAKE: KEYS[1] open, KEYS[2] data; ARGV digest. The challenge (deleted), or nil. */
const TAKE = `
local c = redis.call('HGET', KEYS[2], ARGV[1])
if not c then return nil end
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[1], ARGV[1])
return c`

interface ChallengeScripts {
  /** Defined without numberOfKeys: the first argument is how many keys follow (2, or 3 with the user's). */
  tesseraChallengeAdd(keyCount: number, ...keysThenArgs: string[]): Promise<[number, string?]>
  tesseraChallengeTake(open: string, data: string, digest: string): Promise<string | null>
}

/** defineChallengeScripts defines the two scripts on the command connection. */
export function defineChallengeScripts(redis: Redis | Cluster): void {
  redis.defineCommand('tesseraChallengeAdd', { lua: ADD })
  redis.defineCommand('tesseraChallengeTake', { numberOfKeys: 2, lua: TAKE })
}

const keysOf = (accountId: string) => ({ open: `pk:{${accountId}}:open`, data: `pk:{${accountId}}:data` })
const userKey = (accountId: string, userId: string) => `pk:{${accountId}}:u:${createHash('sha256').update(userId).digest('base64url').slice(0, 22)}`

/**
 * redisChallenges: addChallenge and takeChallenge on Redis, as FactorStore's contract has them;
 * `call` maps a connection failure to UnavailableError.
 */
export function redisChallenges(redis: Redis | Cluster, call: <T>(run: () => Promise<T>) => Promise<T>): Pick<FactorStore, 'addChallenge' | 'takeChallenge'> {
  const scripts = redis as unknown as ChallengeScripts
  return {
    async addChallenge(c: PasskeyChallenge, maxPerUser: number, maxPerAccount: number, nowIso: string): Promise<ChallengeAdded> {
      const { open, data } = keysOf(c.accountId)
      const keys = c.userId === null ? [open, data] : [open, data, userKey(c.accountId, c.userId)]
      const args = [Date.parse(nowIso), c.digest, JSON.stringify(c), Date.parse(c.createdAt), Date.parse(c.expiresAt), maxPerUser, maxPerAccount].map(String)
      const [added, first] = await call(() => scripts.tesseraChallengeAdd(keys.length, ...keys, ...args))
      return added === 1 ? { added: true } : { added: false, freesAt: new Date(Number(first)).toISOString() }
    },
    async takeChallenge(accountId: string, digest: string, nowIso: string): Promise<PasskeyChallenge | null> {
      const { open, data } = keysOf(accountId)
      const kept = await call(() => scripts.tesseraChallengeTake(open, data, digest))
      if (kept === null) return null
      const challenge = JSON.parse(kept) as PasskeyChallenge
      // Taken either way (an expired one is gone as it is refused), as the relational stores do.
      return challenge.expiresAt > nowIso ? challenge : null
    },
  }
}
