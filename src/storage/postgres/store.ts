/**
 * The PostgreSQL store (`DATABASE_URL`), through the `pg` driver and one pool per process:
 * accounts, keys, subscriptions, plans, onboarding records, usage counts, and the
 * verification state when no Redis is configured. Every write is one statement (atomic on
 * its own); callers are answered after PostgreSQL has committed it.
 *
 * Connection-level failures (refused, dropped, timed out, server shutting down) become
 * UnavailableError, which callers answer with 503; the pool reconnects by itself on the
 * next query, so service resumes without a restart when PostgreSQL is back.
 */
import pg from 'pg'
import { randomBytes } from 'node:crypto'
import type {
  Account, AccessStore, AccountStatus, ApiKeyInfo, Health, KeyGrant, LockPolicy, OnboardingRecord,
  OnboardingStore, Plan, Store, Subscription, SubscriptionStatus, UsageRow, UsageStore, Verdict, VerificationStore,
} from '../ports.ts'
import { ACCEPTED, INVALID, REUSED, UnavailableError } from '../ports.ts'
import type { Group, Region } from '../../domain/regions.ts'
import { migrations } from '../migrations.ts'

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
}

type Row = Record<string, unknown>
const DEPENDENCY = 'PostgreSQL'

const newId = (prefix: string) => `${prefix}_${randomBytes(8).toString('hex')}`
const iso = (value: unknown) => (value instanceof Date ? value.toISOString() : String(value))

/** A SQLSTATE that says the statement was wrong (a bug, a constraint), not that the server is away. */
function isStatementError(error: unknown): boolean {
  const code = (error as { code?: unknown }).code
  if (typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code)) return false
  return !code.startsWith('08') && !code.startsWith('57P') && !code.startsWith('53')
}

const toAccount = (r: Row): Account => ({ id: String(r.id), name: String(r.name), status: r.status as AccountStatus, createdAt: iso(r.created_at) })
const toKey = (r: Row): ApiKeyInfo => ({
  id: String(r.id), accountId: String(r.account_id), name: String(r.name), hint: String(r.hint),
  createdAt: iso(r.created_at), revokedAt: r.revoked_at === null ? null : iso(r.revoked_at),
})
const toPlan = (r: Row): Plan => ({ rate: Number(r.rate), burst: Number(r.burst), quota: Number(r.quota), period: r.period as Plan['period'] })
const toOnboarding = (r: Row): OnboardingRecord => ({
  accountId: String(r.account_id), applicationId: String(r.application_id), userId: String(r.user_id),
  algorithm: r.algorithm as OnboardingRecord['algorithm'], digits: Number(r.digits), period: Number(r.period),
  secretFingerprint: String(r.secret_fingerprint), createdAt: iso(r.created_at), updatedAt: iso(r.updated_at),
})

type Query = (name: string | null, text: string, values?: unknown[]) => Promise<pg.QueryResult<Row>>

async function migrate(pool: pg.Pool, schema: string | undefined): Promise<void> {
  const client = await pool.connect()
  try {
    // One node migrates at a time; the others wait on the lock, then find nothing to do.
    await client.query('BEGIN')
    await client.query('SELECT pg_advisory_xact_lock(7274926101)')
    if (schema !== undefined) await client.query(`CREATE SCHEMA IF NOT EXISTS ${pg.escapeIdentifier(schema)}`)
    await client.query('CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL)')
    const applied = new Set((await client.query('SELECT version FROM schema_migrations')).rows.map((r) => Number(r.version)))
    for (const m of migrations) {
      if (applied.has(m.version)) continue
      await client.query(m.postgres)
      await client.query('INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, now())', [m.version, m.name])
    }
    await client.query('COMMIT')
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined)
    throw error
  } finally {
    client.release()
  }
}

function accessStore(query: Query): AccessStore {
  const listeners = new Set<() => void>()
  const changed = () => { for (const l of listeners) l() }
  return {
    async createAccount(name) {
      const now = new Date().toISOString()
      const account: Account = { id: newId('acc'), name, status: 'active', createdAt: now }
      await query(null, 'INSERT INTO accounts (id, name, status, created_at, updated_at) VALUES ($1, $2, $3, $4, $4)', [account.id, name, account.status, now])
      changed()
      return account
    },
    async getAccount(id) {
      const { rows } = await query('get-account', 'SELECT * FROM accounts WHERE id = $1', [id])
      return rows[0] ? toAccount(rows[0]) : null
    },
    async listAccounts() {
      return (await query(null, 'SELECT * FROM accounts ORDER BY created_at, id')).rows.map(toAccount)
    },
    async countAccounts() {
      return Number((await query(null, 'SELECT count(*) AS n FROM accounts')).rows[0]?.n)
    },
    async setAccountStatus(id, status) {
      const r = await query(null, 'UPDATE accounts SET status = $1, updated_at = now() WHERE id = $2', [status, id])
      changed()
      return (r.rowCount ?? 0) > 0
    },
    async createKey({ accountId, name, hash, hint }) {
      const key: ApiKeyInfo = { id: newId('key'), accountId, name, hint, createdAt: new Date().toISOString(), revokedAt: null }
      await query(null, 'INSERT INTO api_keys (id, account_id, name, key_hash, hint, created_at) VALUES ($1, $2, $3, $4, $5, $6)',
        [key.id, accountId, name, hash, hint, key.createdAt])
      changed()
      return key
    },
    async revokeKey(keyId) {
      const r = await query(null, 'UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL', [keyId])
      changed()
      return (r.rowCount ?? 0) > 0
    },
    async listKeys(accountId) {
      const r = accountId === undefined
        ? await query(null, 'SELECT * FROM api_keys ORDER BY created_at, id')
        : await query(null, 'SELECT * FROM api_keys WHERE account_id = $1 ORDER BY created_at, id', [accountId])
      return r.rows.map(toKey)
    },
    async setSubscription(accountId, region, group, status) {
      await query(null, `INSERT INTO subscriptions (account_id, region, api_group, status, updated_at) VALUES ($1, $2, $3, $4, now())
        ON CONFLICT (account_id, region, api_group) DO UPDATE SET status = excluded.status, updated_at = excluded.updated_at`,
      [accountId, region, group, status])
      changed()
    },
    async listSubscriptions(accountId) {
      const { rows } = await query(null, 'SELECT * FROM subscriptions WHERE account_id = $1 ORDER BY region, api_group', [accountId])
      return rows.map((r): Subscription => ({
        accountId: String(r.account_id), region: r.region as Region, group: r.api_group as Group,
        status: r.status as SubscriptionStatus, updatedAt: iso(r.updated_at),
      }))
    },
    async findGrant(keyHash) {
      const { rows } = await query('find-grant', `
        SELECT k.id, k.account_id, k.revoked_at IS NOT NULL AS revoked, a.status,
          (SELECT string_agg(s.region || ':' || s.api_group, ',') FROM subscriptions s
            WHERE s.account_id = k.account_id AND s.status = 'active') AS subs,
          p.rate, p.burst, p.quota, p.period
        FROM api_keys k JOIN accounts a ON a.id = k.account_id LEFT JOIN plans p ON p.account_id = k.account_id
        WHERE k.key_hash = $1`, [keyHash])
      const r = rows[0]
      if (r === undefined) return null
      const grant: KeyGrant = {
        keyId: String(r.id),
        accountId: String(r.account_id),
        revoked: r.revoked === true,
        accountActive: r.status === 'active',
        subscriptions: new Set(r.subs ? String(r.subs).split(',') : []),
        plan: r.rate === null ? null : toPlan(r),
      }
      return grant
    },
    async setPlan(accountId, plan) {
      let r
      if (plan === null) {
        await query(null, 'DELETE FROM plans WHERE account_id = $1', [accountId])
        r = await query(null, 'SELECT 1 FROM accounts WHERE id = $1', [accountId])
      } else {
        r = await query(null, `INSERT INTO plans (account_id, rate, burst, quota, period, updated_at)
          SELECT id, $2, $3, $4, $5, now() FROM accounts WHERE id = $1
          ON CONFLICT (account_id) DO UPDATE SET rate = excluded.rate, burst = excluded.burst, quota = excluded.quota,
            period = excluded.period, updated_at = excluded.updated_at`,
        [accountId, plan.rate, plan.burst, plan.quota, plan.period])
      }
      changed()
      return (r.rowCount ?? 0) > 0
    },
    async getPlan(accountId) {
      const { rows } = await query(null, 'SELECT * FROM plans WHERE account_id = $1', [accountId])
      return rows[0] ? toPlan(rows[0]) : null
    },
    onChange(listener) {
      listeners.add(listener)
      return () => listeners.delete(listener)
    },
  }
}

function onboardingStore(query: Query): OnboardingStore {
  return {
    async upsert(record, now) {
      const { rows } = await query('onboard', `
        INSERT INTO onboarding (account_id, application_id, user_id, algorithm, digits, period, secret_fingerprint, created_at, updated_at)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)
        ON CONFLICT (account_id, application_id, user_id) DO UPDATE SET
          algorithm = excluded.algorithm, digits = excluded.digits, period = excluded.period,
          secret_fingerprint = excluded.secret_fingerprint, updated_at = excluded.updated_at
        RETURNING *`,
      [record.accountId, record.applicationId, record.userId, record.algorithm, record.digits, record.period,
        record.secretFingerprint, now.toISOString()])
      return toOnboarding(rows[0]!)
    },
    async get(accountId, applicationId, userId) {
      const { rows } = await query('onboarding-get', 'SELECT * FROM onboarding WHERE account_id = $1 AND application_id = $2 AND user_id = $3',
        [accountId, applicationId, userId])
      return rows[0] ? toOnboarding(rows[0]) : null
    },
    async findBySecret(accountId, fingerprints) {
      const { rows } = await query('onboarding-by-secret', `SELECT * FROM onboarding WHERE account_id = $1 AND secret_fingerprint = ANY($2)
        ORDER BY updated_at DESC LIMIT 1`, [accountId, fingerprints])
      return rows[0] ? toOnboarding(rows[0]) : null
    },
  }
}

function verificationStore(query: Query): VerificationStore {
  // The lock delay of lockDelaySeconds after `f` failures, computed in the statement.
  const lock = (f: string) => `CASE WHEN ${f} >= $3 THEN $2 + LEAST($4 * power(2, LEAST(${f} - $3, 31)), $5)::bigint * 1000 ELSE 0 END`
  const later = '$6::bigint > s.last_step'
  return {
    async settle(key, step, nowMs, policy: LockPolicy): Promise<Verdict> {
      // One statement: the row lock of ON CONFLICT DO UPDATE orders parallel verifications,
      // each sees the state the one before it left, and a locked row is left as it is (no row back).
      const { rows } = await query('otp-settle', `
        INSERT INTO otp_state AS s (key, last_step, failures, locked_until, updated_at)
        VALUES ($1, COALESCE($6::bigint, -1), CASE WHEN $6::bigint IS NULL THEN 1 ELSE 0 END,
          CASE WHEN $6::bigint IS NULL THEN ${lock('1')} ELSE 0 END, $2)
        ON CONFLICT (key) DO UPDATE SET
          last_step = CASE WHEN ${later} THEN $6::bigint ELSE s.last_step END,
          failures = CASE WHEN ${later} THEN 0 ELSE s.failures + 1 END,
          locked_until = CASE WHEN ${later} THEN 0 ELSE ${lock('(s.failures + 1)')} END,
          updated_at = $2
        WHERE s.locked_until <= $2
        RETURNING failures`, [key, nowMs, policy.maxFailures, policy.baseSeconds, policy.maxSeconds, step])
      if (rows.length > 0) return Number(rows[0]!.failures) === 0 ? ACCEPTED : step === null ? INVALID : REUSED
      const locked = await query('otp-locked', 'SELECT locked_until FROM otp_state WHERE key = $1', [key])
      // Read after the refusal: a lock that ran out in between still answers "wait a second".
      const until = Number(locked.rows[0]?.locked_until ?? 0)
      return { kind: 'locked', lockedUntil: until > nowMs ? until : nowMs + 1000 }
    },
  }
}

function usageStore(query: Query): UsageStore {
  return {
    async add(rows) {
      if (rows.length === 0) return
      await query('usage-add', `
        INSERT INTO usage_daily AS u (account_id, day, api_group, count)
        SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[])
        ON CONFLICT (account_id, day, api_group) DO UPDATE SET count = u.count + excluded.count`,
      [rows.map((r) => r.accountId), rows.map((r) => r.day), rows.map((r) => r.group), rows.map((r) => r.count)])
    },
    async list(accountId, fromDay) {
      const { rows } = await query(null, 'SELECT * FROM usage_daily WHERE account_id = $1 AND day >= $2 ORDER BY day, api_group', [accountId, fromDay])
      return rows.map((r): UsageRow => ({ accountId: String(r.account_id), day: String(r.day), group: String(r.api_group), count: Number(r.count) }))
    },
    async total(accountId, fromDay, toDay) {
      const { rows } = await query('usage-total', 'SELECT coalesce(sum(count), 0) AS n FROM usage_daily WHERE account_id = $1 AND day >= $2 AND day <= $3',
        [accountId, fromDay, toDay])
      return Number(rows[0]?.n ?? 0)
    },
  }
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
  const query: Query = async (name, text, values) => {
    try {
      return await pool.query<Row>(name === null ? { text, values } : { name, text, values })
    } catch (error) {
      if (isStatementError(error)) throw error
      throw new UnavailableError(DEPENDENCY, error)
    }
  }
  try {
    await migrate(pool, options.schema)
  } catch (error) {
    await pool.end().catch(() => undefined)
    throw isStatementError(error) ? error : new UnavailableError(DEPENDENCY, error)
  }
  const retention = options.stateRetentionMs ?? 24 * 3600 * 1000
  const pruner = setInterval(() => {
    const now = Date.now()
    query(null, 'DELETE FROM otp_state WHERE updated_at < $1 AND locked_until < $2', [now - retention, now])
      .catch((error: Error) => options.onBackgroundError?.(error))
  }, Math.min(retention, 3600 * 1000)).unref()
  let closed = false
  return {
    kind: 'postgres',
    access: accessStore(query),
    onboarding: onboardingStore(query),
    verification: verificationStore(query),
    usage: usageStore(query),
    sharedLimiter: null,
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
