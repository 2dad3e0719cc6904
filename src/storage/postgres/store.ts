/**
 * The PostgreSQL store (`DATABASE_URL`), through the `pg` driver and one pool per process:
 * accounts, keys, subscriptions, plans, the audit trail, admin tokens (accounts.ts), the
 * portal's users, members, sessions, email tokens and recovery codes (portal.ts),
 * onboarding records, usage counts, and the verification state when no Redis is configured.
 * Every write is one statement (atomic on its own, a change with its audit event); callers
 * are answered after PostgreSQL has committed it.
 *
 * Connection-level failures (refused, dropped, timed out, server shutting down) become
 * UnavailableError, which callers answer with 503; the pool reconnects by itself on the
 * next query, so service resumes without a restart when PostgreSQL is back.
 */
import pg from 'pg'
import { windowStart, type FactorStore, type Health, type OnboardingStore, type Store, type UsageStore, type VerificationStore } from '../ports.ts'
import type { LockPolicy, Verdict } from '../../domain/lockout.ts'
import { REFUSAL_LINES, type RefusalLine, type RefusalReason, type UsageLine } from '../../domain/usage.ts'
import { ACCEPTED, failure } from '../../domain/lockout.ts'
import { UnavailableError } from '../../domain/errors.ts'
import type { Group, Region } from '../../domain/regions.ts'
import { migrations } from '../migrations.ts'
import { toOnboarding, usageSpans, type Row } from '../rows.ts'
import { accessParts } from './accounts.ts'
import { part, type Query, type Transaction } from './part.ts'
import { portalStore } from './portal.ts'
import { factorStore } from './factors.ts'
import { webhookStore } from './webhooks.ts'
import { jobStore } from './jobs.ts'
import { idempotencyStore } from './idempotency.ts'
import { Stamps, type Clock } from '../stamps.ts'
import { COPY_MARKER, UnfinishedCopyError, unfinishedCopy } from '../copy/marker.ts'

export interface PostgresOptions {
  readonly url: string
  /** Schema to keep the tables in (created if missing); default: the server's search_path. */
  readonly schema?: string
  readonly poolSize?: number
  /** Longest wait for a connection, and for a query (ms). */
  readonly timeoutMs?: number
  /** Verification state untouched for this long is deleted (ms). */
  readonly stateRetentionMs?: number
  /** Called with errors that belong to no request (an idle connection dropped). */
  readonly onBackgroundError?: (error: Error) => void
  /** The clock of every time the store stamps itself (default Date.now): the service's `now`, never PostgreSQL's now(). */
  readonly clock?: Clock
}

const DEPENDENCY = 'PostgreSQL'

/** A SQLSTATE that says the statement was wrong (a bug, a constraint), not that the server is away. */
function isStatementError(error: unknown): boolean {
  const code = (error as { code?: unknown }).code
  if (typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code)) return false
  return !code.startsWith('08') && !code.startsWith('57P') && !code.startsWith('53')
}

/**
 * migratePostgres applies the pending migrations on one connection, in one transaction, one node at a time: the others
 * wait on the lock, then find nothing to do. The store's own start calls it, and `store copy` on the store it writes.
 */
export async function migratePostgres(client: pg.ClientBase, schema: string | undefined, stamps: Stamps): Promise<void> {
  try {
    await client.query('BEGIN')
    await client.query('SELECT pg_advisory_xact_lock(7274926101)')
    if (schema !== undefined) await client.query(`CREATE SCHEMA IF NOT EXISTS ${pg.escapeIdentifier(schema)}`)
    await client.query('CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL)')
    const applied = new Set((await client.query('SELECT version FROM schema_migrations')).rows.map((r) => Number(r.version)))
    for (const m of migrations) {
      if (applied.has(m.version)) continue
      await client.query(m.postgres)
      await client.query('INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)', [m.version, m.name, stamps.iso()])
    }
    await client.query('COMMIT')
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined)
    throw error
  }
}

/** migrate applies the pending migrations, and refuses a store that a store copy has not finished writing. */
async function migrate(pool: pg.Pool, schema: string | undefined, stamps: Stamps): Promise<void> {
  const client = await pool.connect()
  try {
    await migratePostgres(client, schema, stamps)
    if ((await client.query('SELECT to_regclass($1) IS NOT NULL AS marked', [COPY_MARKER])).rows[0]?.marked === true) throw unfinishedCopy()
  } finally {
    client.release()
  }
}

function onboardingStore(query: Query): OnboardingStore {
  return {
    async upsert(record, now) {
      const { rows } = await query(
        'onboard',
        `
        INSERT INTO onboarding (account_id, application_id, user_id, algorithm, digits, period, secret_fingerprint, created_at, updated_at, params_marked)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, true)
        ON CONFLICT (account_id, application_id, user_id) DO UPDATE SET
          algorithm = excluded.algorithm, digits = excluded.digits, period = excluded.period,
          secret_fingerprint = excluded.secret_fingerprint, updated_at = excluded.updated_at, params_marked = true
        RETURNING *`,
        [record.accountId, record.applicationId, record.userId, record.algorithm, record.digits, record.period, record.secretFingerprint, now.toISOString()],
      )
      return toOnboarding(rows[0]!)
    },
    async get(accountId, applicationId, userId) {
      const { rows } = await query('onboarding-get', 'SELECT * FROM onboarding WHERE account_id = $1 AND application_id = $2 AND user_id = $3', [
        accountId,
        applicationId,
        userId,
      ])
      return rows[0] ? toOnboarding(rows[0]) : null
    },
    async findBySecret(accountId, fingerprints) {
      const { rows } = await query(
        'onboarding-by-secret',
        `SELECT * FROM onboarding WHERE account_id = $1 AND secret_fingerprint = ANY($2)
        ORDER BY updated_at DESC LIMIT 1`,
        [accountId, fingerprints],
      )
      return rows[0] ? toOnboarding(rows[0]) : null
    },
  }
}

function verificationStore(query: Query, transaction: Transaction): VerificationStore {
  // The lock delay of lockDelaySeconds after `f` failures, computed in the statement.
  const lock = (f: string) => `CASE WHEN ${f} >= $3 THEN $2 + LEAST($4 * power(2, LEAST(${f} - $3, 31)), $5)::bigint * 1000 ELSE 0 END`
  const later = '$6::bigint > s.last_step'
  const store: VerificationStore = {
    async settle(key, step, nowMs, policy: LockPolicy): Promise<Verdict> {
      // One statement: the row lock of ON CONFLICT DO UPDATE orders parallel verifications,
      // each sees the state the one before it left, and a locked row is left as it is (no row back).
      const { rows } = await query(
        'otp-settle',
        `
        INSERT INTO otp_state AS s (key, last_step, failures, locked_until, updated_at)
        VALUES ($1, COALESCE($6::bigint, -1), CASE WHEN $6::bigint IS NULL THEN 1 ELSE 0 END,
          CASE WHEN $6::bigint IS NULL THEN ${lock('1')} ELSE 0 END, $2)
        ON CONFLICT (key) DO UPDATE SET
          last_step = CASE WHEN ${later} THEN $6::bigint ELSE s.last_step END,
          failures = CASE WHEN ${later} THEN 0 ELSE s.failures + 1 END,
          locked_until = CASE WHEN ${later} THEN 0 ELSE ${lock('(s.failures + 1)')} END,
          updated_at = $2
        WHERE s.locked_until <= $2
        RETURNING failures`,
        [key, nowMs, policy.maxFailures, policy.baseSeconds, policy.maxSeconds, step],
      )
      if (rows.length > 0) {
        const failures = Number(rows[0]!.failures)
        return failures === 0 ? ACCEPTED : failure(step, failures, policy)
      }
      const locked = await query('otp-locked', 'SELECT locked_until FROM otp_state WHERE key = $1', [key])
      // Read after the refusal: a lock that ran out in between still answers "wait a second".
      const until = Number(locked.rows[0]?.locked_until ?? 0)
      return { kind: 'locked', lockedUntil: until > nowMs ? until : nowMs + 1000 }
    },
    async clear(key) {
      // The last accepted step stays: a cleared lock must not let an accepted code be replayed.
      const r = await query('otp-clear', 'UPDATE otp_state SET failures = 0, locked_until = 0 WHERE key = $1 AND (failures > 0 OR locked_until > 0)', [key])
      return (r.rowCount ?? 0) > 0
    },
    async lockedUntil(keys, nowMs) {
      const { rows } = await query('otp-locked-any', 'SELECT max(locked_until) AS until FROM otp_state WHERE key = ANY($1)', [keys])
      const until = Number(rows[0]?.until ?? 0)
      return until > nowMs ? until : 0
    },
    async forgive(key, policy: LockPolicy) {
      // SET reads the row as it was: `failures - 1` is the run after this forgiveness.
      const r = await query(
        'otp-forgive',
        `UPDATE otp_state SET failures = failures - 1,
        locked_until = CASE WHEN failures - 1 < $2 THEN 0 ELSE locked_until END WHERE key = $1 AND failures > 0`,
        [key, policy.maxFailures],
      )
      return (r.rowCount ?? 0) > 0
    },
    async settleWithin(key, step, nowMs, policy, limits, windowMs) {
      const start = windowStart(nowMs, windowMs)
      // Counted first, under each row's lock (ON CONFLICT DO UPDATE: parallel attempts on one window queue), in key order (no
      // deadlock between two attempts of two keys); when a window went past its max the transaction is rolled back, so a
      // refused attempt takes nothing, and the next in the queue sees the count as it was.
      const sorted = [...limits].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
      const over = await transaction(async (q) => {
        const { rows } = await q(
          'attempt-count',
          `INSERT INTO attempt_windows AS a (key, window_start, count, expires_ms)
          SELECT k, $2, 1, $3 FROM unnest($1::text[]) WITH ORDINALITY AS u(k, i) ORDER BY i
          ON CONFLICT (key) DO UPDATE SET count = CASE WHEN a.window_start = $2 THEN a.count + 1 ELSE 1 END,
            window_start = $2, expires_ms = $3
          RETURNING key, count`,
          [sorted.map((l) => l.key), start, start + windowMs],
        )
        const counts = new Map(rows.map((r) => [String(r.key), Number(r.count)]))
        const full = sorted.some((l) => (counts.get(l.key) ?? 0) > l.max)
        if (full) throw ROLLBACK
        return false
      }).catch((error: unknown) => {
        if (error === ROLLBACK) return true
        throw error
      })
      if (over) return { kind: 'limited', retryAtMs: start + windowMs }
      // Then settled, in its own atomic statement: an attempt counted whose settle fails (the store away) is one the caller may retry.
      return store.settle(key, step, nowMs, policy)
    },
  }
  return store
}

/** line: the counts of a usage report's row. */
const line = (r: Row) => ({ group: r.api_group as Group, count: Number(r.count), units: Number(r.units) })

/**
 * usageByKey: the report by key, from the daily rows of the span's loose days (less those of
 * `minus`) and the monthly rows of its whole months (usageSpans), one statement of them all.
 */
async function usageByKey(query: Query, accountId: string, fromDay: string, toDay: string): Promise<UsageLine[]> {
  const spans = usageSpans(fromDay, toDay)
  const values: string[] = [accountId]
  const daily =
    (sign: string) =>
    ([a, b]: [string, string]) => {
      values.push(a, b)
      return `SELECT key_id, api_group, ${sign}count AS count, ${sign}units AS units FROM usage_keys WHERE account_id = $1 AND day >= $${values.length - 1} AND day <= $${values.length}`
    }
  const parts = [...spans.days.map(daily('')), ...spans.minus.map(daily('-'))]
  if (spans.months !== null) {
    values.push(...spans.months)
    parts.push(
      `SELECT key_id, api_group, count, units FROM usage_keys_monthly WHERE account_id = $1 AND month >= $${values.length - 1} AND month <= $${values.length}`,
    )
  }
  // A key used only on days a month's row brings in and `minus` takes out adds up to nothing: no line.
  const { rows } = await query(
    `usage-by-key-${spans.days.length}-${spans.minus.length}-${spans.months === null ? 0 : 1}`,
    `
        SELECT key_id, api_group, sum(count) AS count, sum(units) AS units FROM (${parts.join(' UNION ALL ')}) u
        GROUP BY key_id, api_group HAVING sum(count) <> 0 OR sum(units) <> 0 ORDER BY key_id COLLATE "C", api_group COLLATE "C"`,
    values,
  )
  return rows.map((r): UsageLine => ({ keyId: String(r.key_id), ...line(r) }))
}

function usageStore(query: Query): UsageStore {
  return {
    async add(rows) {
      if (rows.length === 0) return
      // One statement for every table (all or nothing). Rows of one conflict key are summed
      // first (ON CONFLICT cannot touch a row twice in a statement), and taken in key order,
      // so that nodes adding overlapping batches lock rows in the same order.
      const upsert = (table: string, columns: string) => `INSERT INTO ${table} AS u (${columns}, count, units)
          SELECT ${columns}, sum(count), sum(units) FROM r GROUP BY ${columns} ORDER BY ${columns}
          ON CONFLICT (${columns}) DO UPDATE SET count = u.count + excluded.count, units = u.units + excluded.units`
      await query(
        'usage-add',
        `
        WITH r AS (SELECT *, left(day, 7) AS month FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::bigint[])
          AS t(account_id, key_id, region, day, api_group, count, units)),
        d AS (${upsert('usage_daily', 'account_id, day, api_group')}),
        k AS (${upsert('usage_keys', 'account_id, day, key_id, api_group')}),
        m AS (${upsert('usage_keys_monthly', 'account_id, month, key_id, api_group')})
        ${upsert('usage_regions', 'account_id, day, region, api_group')}`,
        [
          rows.map((r) => r.accountId),
          rows.map((r) => r.keyId),
          rows.map((r) => r.region),
          rows.map((r) => r.day),
          rows.map((r) => r.group),
          rows.map((r) => r.count),
          rows.map((r) => r.units),
        ],
      )
    },
    async report(accountId, fromDay, toDay, by) {
      // COLLATE "C": byte order, as SQLite sorts, whatever the database's collation.
      if (by === 'day') {
        const { rows } = await query(
          'usage-by-day',
          `SELECT day, api_group, count, units FROM usage_daily
          WHERE account_id = $1 AND day >= $2 AND day <= $3 ORDER BY day COLLATE "C", api_group COLLATE "C"`,
          [accountId, fromDay, toDay],
        )
        return rows.map((r): UsageLine => ({ day: String(r.day), ...line(r) }))
      }
      if (by === 'region') {
        const { rows } = await query(
          'usage-by-region',
          `SELECT region, api_group, sum(count) AS count, sum(units) AS units FROM usage_regions
          WHERE account_id = $1 AND day >= $2 AND day <= $3 GROUP BY region, api_group ORDER BY region COLLATE "C", api_group COLLATE "C"`,
          [accountId, fromDay, toDay],
        )
        return rows.map((r): UsageLine => ({ region: r.region as Region, ...line(r) }))
      }
      return usageByKey(query, accountId, fromDay, toDay)
    },
    async total(accountId, fromDay, toDay) {
      const { rows } = await query('usage-total', 'SELECT coalesce(sum(units), 0) AS n FROM usage_daily WHERE account_id = $1 AND day >= $2 AND day <= $3', [
        accountId,
        fromDay,
        toDay,
      ])
      return Number(rows[0]?.n ?? 0)
    },
    async addRefusals(rows) {
      if (rows.length === 0) return
      // Summed per conflict key first and taken in key order, as add does.
      await query(
        'refusals-add',
        `INSERT INTO refusals_daily AS u (account_id, day, key_id, region, api_group, reason, count)
        SELECT account_id, day, key_id, region, api_group, reason, sum(count)
        FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[])
          AS t(account_id, day, key_id, region, api_group, reason, count)
        GROUP BY account_id, day, key_id, region, api_group, reason ORDER BY account_id, day, key_id, region, api_group, reason
        ON CONFLICT (account_id, day, key_id, region, api_group, reason) DO UPDATE SET count = u.count + excluded.count`,
        [
          rows.map((r) => r.accountId),
          rows.map((r) => r.day),
          rows.map((r) => r.keyId),
          rows.map((r) => r.region),
          rows.map((r) => r.group),
          rows.map((r) => r.reason),
          rows.map((r) => r.count),
        ],
      )
    },
    async refusals(accountId, fromDay, toDay) {
      const { rows } = await query(
        'refusals-report',
        `SELECT key_id, region, api_group, reason, sum(count) AS count, max(day) AS last_day FROM refusals_daily
        WHERE account_id = $1 AND day >= $2 AND day <= $3 GROUP BY key_id, region, api_group, reason
        ORDER BY count DESC, last_day DESC, key_id COLLATE "C", region COLLATE "C", api_group COLLATE "C", reason COLLATE "C" LIMIT ${REFUSAL_LINES}`,
        [accountId, fromDay, toDay],
      )
      return rows.map(
        (r): RefusalLine => ({
          keyId: String(r.key_id),
          region: r.region as Region,
          group: r.api_group as Group,
          reason: r.reason as RefusalReason,
          count: Number(r.count),
          lastDay: String(r.last_day),
        }),
      )
    },
  }
}

/** pooledQuery: a query on the pool; a connection-level failure becomes UnavailableError. */
function pooledQuery(pool: pg.Pool): Query {
  return async (name, text, values) => {
    try {
      return await pool.query<Row>(name === null ? { text, values } : { name, text, values })
    } catch (error) {
      if (isStatementError(error)) throw error
      throw new UnavailableError(DEPENDENCY, error)
    }
  }
}

/** pooledTransaction: a transaction on one of the pool's connections; one that failed mid-transaction is not given back. */
function pooledTransaction(pool: pg.Pool): Transaction {
  return async (work) => {
    let client: pg.PoolClient
    try {
      client = await pool.connect()
    } catch (error) {
      throw new UnavailableError(DEPENDENCY, error)
    }
    let broken = false
    // A connection lost while the client is checked out is an 'error' event of the client, which nothing else listens to
    // then (the pool does while it is idle): unheard, it would end the process. The query under way fails with it.
    const lost = () => {
      broken = true
    }
    client.on('error', lost)
    const q: Query = async (name, text, values) => {
      try {
        return await client.query<Row>(name === null ? { text, values } : { name, text, values })
      } catch (error) {
        if (isStatementError(error)) throw error
        broken = true
        throw new UnavailableError(DEPENDENCY, error)
      }
    }
    try {
      await q(null, 'BEGIN')
      const result = await work(q)
      await q(null, 'COMMIT')
      return result
    } catch (error) {
      if (!broken)
        await client.query('ROLLBACK').catch(() => {
          broken = true
        })
      throw error
    } finally {
      client.off('error', lost)
      // A connection that failed mid-transaction is not given back to the pool.
      client.release(broken)
    }
  }
}

/** ROLLBACK: thrown to undo a transaction that found what it counted over a limit. */
const ROLLBACK = Symbol('rollback')

/** startPruner deletes expired verification state and expired pending factors, by the store's clock, until cleared. */
function startPruner(
  query: Query,
  factors: FactorStore,
  stamps: Stamps,
  retention: number,
  onBackgroundError: PostgresOptions['onBackgroundError'],
): NodeJS.Timeout {
  return setInterval(
    () => {
      const now = stamps.ms()
      query(null, 'DELETE FROM otp_state WHERE updated_at < $1 AND locked_until < $2', [now - retention, now]).catch((error: Error) =>
        onBackgroundError?.(error),
      )
      query(null, 'DELETE FROM attempt_windows WHERE expires_ms <= $1', [now]).catch((error: Error) => onBackgroundError?.(error))
      query(null, 'DELETE FROM idempotency_records WHERE expires_ms <= $1', [now]).catch((error: Error) => onBackgroundError?.(error))
      factors.prune(new Date(now).toISOString()).catch((error: Error) => onBackgroundError?.(error))
    },
    Math.min(retention, 3600 * 1000),
  ).unref()
}

/** openPostgresStore connects, applies pending migrations and returns the store; it throws when PostgreSQL cannot be reached. */
export async function openPostgresStore(options: PostgresOptions): Promise<Store> {
  if (options.schema !== undefined && !/^[a-z_][a-z0-9_]{0,62}$/.test(options.schema)) throw new TypeError(`bad schema name ${options.schema}`)
  const timeout = options.timeoutMs ?? 5000
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.poolSize ?? 10,
    connectionTimeoutMillis: timeout,
    query_timeout: timeout,
    idleTimeoutMillis: 30_000,
    application_name: 'tessera',
    ...(options.schema === undefined ? {} : { options: `-c search_path=${options.schema}` }),
  })
  // An idle connection that drops emits here; without a listener it would end the process.
  pool.on('error', (error) => options.onBackgroundError?.(error))
  const query = pooledQuery(pool)
  const transaction = pooledTransaction(pool)
  const stamps = new Stamps(options.clock)
  try {
    await migrate(pool, options.schema, stamps)
  } catch (error) {
    await pool.end().catch(() => undefined)
    throw isStatementError(error) || error instanceof UnfinishedCopyError ? error : new UnavailableError(DEPENDENCY, error)
  }
  const retention = options.stateRetentionMs ?? 24 * 3600 * 1000
  const p = part(query, transaction, stamps)
  const factors = factorStore(p)
  const pruner = startPruner(query, factors, stamps, retention, options.onBackgroundError)
  let closed = false
  return {
    kind: 'postgres',
    ...accessParts(p),
    onboarding: onboardingStore(query),
    factors,
    verification: verificationStore(query, transaction),
    usage: usageStore(query),
    portal: portalStore(p),
    webhooks: webhookStore(p),
    jobs: jobStore(p),
    idempotency: idempotencyStore(query, transaction),
    sharedLimiter: null,
    gauges: () => ({
      postgresPool: { inUse: pool.totalCount - pool.idleCount, idle: pool.idleCount, waiting: pool.waitingCount, max: options.poolSize ?? 10 },
    }),
    async health(): Promise<Health> {
      try {
        await query('ping', 'SELECT 1')
        return { postgres: { ok: true, detail: 'ok', essential: true } }
      } catch (error) {
        return { postgres: { ok: false, detail: (error as Error).message, essential: true } }
      }
    },
    async close() {
      if (closed) return
      closed = true
      clearInterval(pruner)
      await pool.end()
    },
  }
}
