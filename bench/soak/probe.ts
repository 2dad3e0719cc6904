/**
 * What each account keeps in the store after the soak, held to the caps that bound it: the
 * bytes of its conversion jobs (the store's own keptBytes, which JOB_STORAGE_PER_ACCOUNT_MB
 * bounds), its Idempotency-Key records and passkey challenges (their tallies), its factors per
 * user, keys (active, working and kept), webhook endpoints (live and kept) and jobs queued or
 * running; with the rows it holds where no cap applies (onboarding records, factors, jobs kept)
 * and the size of the store itself. Each figure counts what its cap counts.
 */
import { statSync } from 'node:fs'
import { join } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import pg from 'pg'
import { Redis } from 'ioredis'
import { loadConfig, type Config } from '../../src/config/config.ts'
import { openStore } from '../../src/storage/factory.ts'
import type { Store } from './server.ts'

export interface AccountFigures {
  readonly id: string
  readonly name: string
  /** Figure name → [value, cap or null]. */
  readonly figures: ReadonlyMap<string, readonly [number, number | null]>
}

export interface Probe {
  readonly accounts: readonly AccountFigures[]
  /** Lines naming each figure over its cap. */
  readonly over: readonly string[]
  /** The store's size, in words. */
  readonly size: string
}

type Query = (sql: string, args: readonly string[]) => Promise<Record<string, unknown>[]>

/**
 * One figure a query gives per account: `$1` is the account's ID (an Idempotency-Key owner is `account:` and it), `$2`
 * the probe's time (ISO 8601), where what counts depends on it (a key's expiry).
 */
const COUNTS: readonly { name: string; sql: string; cap: (c: Config) => number | null }[] = [
  { name: 'factors', sql: 'SELECT count(*) AS n FROM totp_factors WHERE account_id = $1', cap: () => null },
  {
    name: 'most factors of one user',
    sql: 'SELECT coalesce(max(n), 0) AS n FROM (SELECT count(*) AS n FROM totp_factors WHERE account_id = $1 GROUP BY user_id) AS u',
    cap: (c) => c.factorMaxPerUser,
  },
  { name: 'onboarding records', sql: 'SELECT count(*) AS n FROM onboarding WHERE account_id = $1', cap: () => null },
  // What KEY_MAX_PER_ACCOUNT counts: not revoked, not rolled (a key in its grace is on its way out), not expired.
  {
    name: 'active keys',
    sql: 'SELECT count(*) AS n FROM api_keys WHERE account_id = $1 AND revoked_at IS NULL AND rolled_to IS NULL AND (expires_at IS NULL OR expires_at > $2)',
    cap: (c) => c.keyMaxPerAccount,
  },
  // Keys that authenticate: the active ones and those in their grace, at most one for each active key.
  {
    name: 'working keys',
    sql: 'SELECT count(*) AS n FROM api_keys WHERE account_id = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $2)',
    cap: (c) => 2 * c.keyMaxPerAccount,
  },
  // Every key row: the working ones and the ended ones a creation or roll keeps (KEY_ENDED_KEPT_PER_ACCOUNT).
  { name: 'keys kept', sql: 'SELECT count(*) AS n FROM api_keys WHERE account_id = $1', cap: (c) => 2 * c.keyMaxPerAccount + c.keyEndedKeptPerAccount },
  {
    name: 'webhook endpoints',
    sql: 'SELECT count(*) AS n FROM webhook_endpoints WHERE account_id = $1 AND disabled_at IS NULL',
    cap: (c) => c.webhookMaxEndpoints,
  },
  // Deleted endpoints stay as rows (disabled_at set), at most WEBHOOK_DELETED_KEPT_PER_ACCOUNT of them.
  {
    name: 'webhook endpoints kept',
    sql: 'SELECT count(*) AS n FROM webhook_endpoints WHERE account_id = $1',
    cap: (c) => c.webhookMaxEndpoints + c.webhookDeletedKeptPerAccount,
  },
  {
    name: 'jobs queued or running',
    sql: "SELECT count(*) AS n FROM conversion_jobs WHERE account_id = $1 AND status IN ('queued', 'running')",
    cap: (c) => c.jobMaxActivePerAccount,
  },
  { name: 'jobs kept', sql: 'SELECT count(*) AS n FROM conversion_jobs WHERE account_id = $1', cap: () => null },
  {
    name: 'Idempotency-Key records',
    sql: "SELECT coalesce(max(row_count), 0) AS n FROM record_tallies WHERE owner = 'account:' || $1 AND kind = 'idempotency_records'",
    cap: (c) => c.idempotencyKeysPerAccount,
  },
  {
    name: 'Idempotency-Key bytes',
    sql: "SELECT coalesce(max(byte_count), 0) AS n FROM record_tallies WHERE owner = 'account:' || $1 AND kind = 'idempotency_records'",
    cap: (c) => c.idempotencyBytesPerAccount,
  },
  {
    name: 'passkey challenges',
    sql: "SELECT coalesce(max(row_count), 0) AS n FROM record_tallies WHERE owner = $1 AND kind = 'passkey_challenges'",
    cap: (c) => c.passkeyChallengesPerAccount,
  },
]

/** probe reads every account's figures and the store's size. */
export async function probe(
  store: Store,
  settings: Record<string, string>,
  accounts: readonly { id: string; name: string }[],
  adminTokenId: string,
): Promise<Probe> {
  const config = loadConfig({ ...store.env, ...settings, NODE_ENV: 'test', LOG_LEVEL: 'silent' })
  const { query, size, challenges, close } = await connect(store)
  const jobs = await openStore(config, { maintenance: false })
  const over: string[] = []
  const out: AccountFigures[] = []
  try {
    for (const a of accounts) {
      const figures = new Map<string, readonly [number, number | null]>()
      figures.set('job bytes kept', [await jobs.jobs.keptBytes(a.id), config.jobStoragePerAccountMb * 1024 * 1024])
      const now = new Date().toISOString()
      for (const c of COUNTS) {
        const args = c.sql.includes('$2') ? [a.id, now] : [a.id]
        figures.set(c.name, [Number((await query(c.sql, args))[0]?.n ?? 0), c.cap(config)])
      }
      if (challenges !== undefined) figures.set('passkey challenges', [await challenges(a.id), config.passkeyChallengesPerAccount])
      for (const [name, [value, cap]] of figures) if (cap !== null && value > cap) over.push(`${a.name} (${a.id}): ${name} ${value}, over its cap ${cap}`)
      out.push({ id: a.id, name: a.name, figures })
    }
    // The admin token keeps Idempotency-Key records of its own, under the same caps.
    const token = new Map<string, readonly [number, number | null]>()
    for (const [name, column, cap] of [
      ['Idempotency-Key records', 'row_count', config.idempotencyKeysPerAccount],
      ['Idempotency-Key bytes', 'byte_count', config.idempotencyBytesPerAccount],
    ] as const) {
      const sql = `SELECT coalesce(max(${column}), 0) AS n FROM record_tallies WHERE owner = 'admin:' || $1 AND kind = 'idempotency_records'`
      const value = Number((await query(sql, [adminTokenId]))[0]?.n ?? 0)
      token.set(name, [value, cap])
      if (value > cap) over.push(`the admin token: ${name} ${value}, over its cap ${cap}`)
    }
    out.push({ id: adminTokenId, name: 'admin token', figures: token })
    return { accounts: out, over, size: await size() }
  } finally {
    await jobs.close()
    await close()
  }
}

interface Connection {
  readonly query: Query
  readonly size: () => Promise<string>
  /** With Redis, an account's passkey challenges are kept there (storage/redis/challenges.ts), not in the relational store. */
  readonly challenges?: (accountId: string) => Promise<number>
  readonly close: () => Promise<void>
}

async function connect(store: Store): Promise<Connection> {
  if (store.kind === 'sqlite') {
    const path = join(store.dataDir, 'tessera.sqlite')
    const db = new DatabaseSync(path, { readOnly: true })
    const bytes = (f: string) => {
      try {
        return statSync(f).size
      } catch {
        return 0
      }
    }
    return {
      // $1, $2 as SQLite's numbered parameters ?1, ?2.
      query: async (sql, args) => db.prepare(sql.replace(/\$(\d)/g, '?$1')).all(...args) as Record<string, unknown>[],
      size: async () => `SQLite ${mib(bytes(path))} MiB, its WAL ${mib(bytes(`${path}-wal`))} MiB`,
      close: async () => db.close(),
    }
  }
  const client = new pg.Client({ connectionString: store.databaseUrl })
  await client.connect()
  const redis = new Redis(store.redisUrl!, { lazyConnect: true })
  const connected = async () => {
    if (redis.status === 'wait') await redis.connect()
  }
  return {
    query: async (sql, args) => (await client.query(sql, [...args])).rows as Record<string, unknown>[],
    challenges: async (accountId) => {
      await connected()
      return redis.hlen(`${store.redisPrefix}pk:{${accountId}}:data`)
    },
    size: async () => {
      const db = Number((await client.query('SELECT pg_database_size(current_database()) AS n')).rows[0].n)
      await connected()
      let keys = 0
      for (let cursor = '0'; ; ) {
        const [next, found] = await redis.scan(cursor, 'MATCH', `${store.redisPrefix}*`, 'COUNT', 1000)
        keys += found.length
        cursor = next
        if (cursor === '0') break
      }
      const used = /used_memory:(\d+)/.exec(await redis.info('memory'))?.[1] ?? '0'
      return `PostgreSQL database ${mib(db)} MiB; Redis ${keys} keys under the soak's prefix (the Redis server's memory ${mib(Number(used))} MiB)`
    },
    close: async () => {
      redis.disconnect()
      await client.end()
    },
  }
}

const mib = (bytes: number) => (bytes / 1024 / 1024).toFixed(1)
