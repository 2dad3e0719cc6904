/**
 * The embedded store: SQLite through Node's built-in `node:sqlite` (no native addon).
 * Calls are synchronous underneath, so each method is atomic within the process; writes go
 * through one group commit (BEGIN IMMEDIATE per event-loop turn) so that several processes
 * on one file stay correct and a busy node pays one commit for many writes.
 */
import { DatabaseSync } from 'node:sqlite'
import { Worker } from 'node:worker_threads'
import { chmodSync, closeSync, mkdirSync, openSync, statSync } from 'node:fs'
import { dirname } from 'node:path'
import { randomBytes } from 'node:crypto'
import type {
  Account, AccessStore, AccountStatus, ApiKeyInfo, KeyGrant, LockPolicy, OnboardingRecord,
  OnboardingStore, Plan, Store, Subscription, SubscriptionStatus, UsageRow, UsageStore, Verdict, VerificationStore,
} from '../ports.ts'
import { ACCEPTED, INVALID, lockDelaySeconds, REUSED } from '../ports.ts'
import type { Group, Region } from '../../domain/regions.ts'
import { migrations } from '../migrations.ts'
import type { FromMaintenance, MaintenanceOptions, ToMaintenance } from './maintenance.ts'

export interface SqliteOptions {
  /** File path, or ':memory:'. */
  readonly path: string
  /** How often to look for changes committed by other processes (ms). */
  readonly changePollMs?: number
  /** Verification state untouched for this long is deleted (ms). */
  readonly stateRetentionMs?: number
  /** How often expired verification state is looked for (ms; default the retention, at most an hour). */
  readonly pruneMs?: number
  /** False for short-lived processes (the admin CLI): no maintenance thread, SQLite's own checkpoints. */
  readonly maintenance?: boolean
  /** Failures of the maintenance thread (they belong to no request). */
  readonly onBackgroundError?: (error: Error) => void
}

type Row = Record<string, unknown>

const newId = (prefix: string) => `${prefix}_${randomBytes(8).toString('hex')}`

function migrate(db: DatabaseSync): void {
  db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)')
  const applied = new Set(db.prepare('SELECT version FROM schema_migrations').all().map((r) => Number(r.version)))
  for (const m of migrations) {
    if (applied.has(m.version)) continue
    db.exec('BEGIN IMMEDIATE')
    try {
      db.exec(m.sqlite)
      db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(m.version, m.name, new Date().toISOString())
      db.exec('COMMIT')
    } catch (error) {
      db.exec('ROLLBACK')
      throw error
    }
  }
}

/**
 * GroupCommit runs writes at once, inside one BEGIN IMMEDIATE transaction per turn of the
 * event loop, and resolves each caller once that transaction has committed: a commit costs
 * about ten times one upsert, so under load many verifications share it. Results are
 * computed synchronously inside the transaction, so each write stays atomic (across
 * processes too), and nobody is answered before their write is durable.
 */
class GroupCommit {
  readonly #db: DatabaseSync
  #open = false
  #waiting: { resolve: () => void; reject: (error: unknown) => void }[] = []

  constructor(db: DatabaseSync) {
    this.#db = db
  }

  run<T>(work: () => T): Promise<T> {
    if (!this.#open) {
      this.#db.exec('BEGIN IMMEDIATE')
      this.#open = true
      setImmediate(() => this.flush())
    }
    let result: T
    try {
      result = work()
    } catch (error) {
      // A failed statement is undone on its own; the others in the transaction stand.
      return Promise.reject(error)
    }
    return new Promise<T>((resolve, reject) => {
      this.#waiting.push({ resolve: () => resolve(result), reject })
    })
  }

  /** flush commits the open transaction, if any, and answers its callers. */
  flush(): void {
    if (!this.#open) return
    this.#open = false
    const waiting = this.#waiting
    this.#waiting = []
    try {
      this.#db.exec('COMMIT')
    } catch (error) {
      if (this.#db.isTransaction) this.#db.exec('ROLLBACK')
      for (const w of waiting) w.reject(error)
      return
    }
    for (const w of waiting) w.resolve()
  }
}

const toAccount = (r: Row): Account => ({
  id: String(r.id), name: String(r.name), status: r.status as AccountStatus, createdAt: String(r.created_at),
})
const toKey = (r: Row): ApiKeyInfo => ({
  id: String(r.id), accountId: String(r.account_id), name: String(r.name), hint: String(r.hint),
  createdAt: String(r.created_at), revokedAt: r.revoked_at === null ? null : String(r.revoked_at),
})
const toPlan = (r: Row): Plan => ({
  rate: Number(r.rate), burst: Number(r.burst), quota: Number(r.quota), period: r.period as Plan['period'],
})
const toOnboarding = (r: Row): OnboardingRecord => ({
  accountId: String(r.account_id), applicationId: String(r.application_id), userId: String(r.user_id),
  algorithm: r.algorithm as OnboardingRecord['algorithm'], digits: Number(r.digits), period: Number(r.period),
  secretFingerprint: String(r.secret_fingerprint), createdAt: String(r.created_at), updatedAt: String(r.updated_at),
})

function accessStore(db: DatabaseSync, batch: GroupCommit, changePollMs: number, timers: Set<NodeJS.Timeout>): AccessStore {
  const listeners = new Set<() => void>()
  const changed = () => { for (const l of listeners) l() }
  const q = {
    grant: db.prepare(`
      SELECT k.id, k.account_id, k.revoked_at, a.status,
        (SELECT group_concat(s.region || ':' || s.api_group) FROM subscriptions s
          WHERE s.account_id = k.account_id AND s.status = 'active') AS subs,
        p.rate, p.burst, p.quota, p.period
      FROM api_keys k JOIN accounts a ON a.id = k.account_id LEFT JOIN plans p ON p.account_id = k.account_id
      WHERE k.key_hash = ?`),
    dataVersion: db.prepare('PRAGMA data_version'),
  }
  let poller: NodeJS.Timeout | undefined
  let lastVersion = Number(q.dataVersion.get()?.data_version)

  return {
    async createAccount(name) {
      const now = new Date().toISOString()
      const account: Account = { id: newId('acc'), name, status: 'active', createdAt: now }
      await batch.run(() => db.prepare('INSERT INTO accounts (id, name, status, created_at, updated_at) VALUES (?, ?, ?, ?, ?)')
        .run(account.id, name, account.status, now, now))
      changed()
      return account
    },
    async getAccount(id) {
      const row = db.prepare('SELECT * FROM accounts WHERE id = ?').get(id)
      return row ? toAccount(row) : null
    },
    async listAccounts() {
      return db.prepare('SELECT * FROM accounts ORDER BY created_at, id').all().map(toAccount)
    },
    async countAccounts() {
      return Number(db.prepare('SELECT count(*) AS n FROM accounts').get()?.n)
    },
    async setAccountStatus(id, status) {
      const r = await batch.run(() => db.prepare('UPDATE accounts SET status = ?, updated_at = ? WHERE id = ?').run(status, new Date().toISOString(), id))
      changed()
      return Number(r.changes) > 0
    },
    async createKey({ accountId, name, hash, hint }) {
      const key: ApiKeyInfo = { id: newId('key'), accountId, name, hint, createdAt: new Date().toISOString(), revokedAt: null }
      await batch.run(() => db.prepare('INSERT INTO api_keys (id, account_id, name, key_hash, hint, created_at) VALUES (?, ?, ?, ?, ?, ?)')
        .run(key.id, accountId, name, hash, hint, key.createdAt))
      changed()
      return key
    },
    async revokeKey(keyId) {
      const r = await batch.run(() => db.prepare('UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL').run(new Date().toISOString(), keyId))
      changed()
      return Number(r.changes) > 0
    },
    async listKeys(accountId) {
      const rows = accountId === undefined
        ? db.prepare('SELECT * FROM api_keys ORDER BY created_at, id').all()
        : db.prepare('SELECT * FROM api_keys WHERE account_id = ? ORDER BY created_at, id').all(accountId)
      return rows.map(toKey)
    },
    async setSubscription(accountId, region, group, status) {
      await batch.run(() => db.prepare(`INSERT INTO subscriptions (account_id, region, api_group, status, updated_at) VALUES (?, ?, ?, ?, ?)
        ON CONFLICT (account_id, region, api_group) DO UPDATE SET status = excluded.status, updated_at = excluded.updated_at`)
        .run(accountId, region, group, status, new Date().toISOString()))
      changed()
    },
    async listSubscriptions(accountId) {
      return db.prepare('SELECT * FROM subscriptions WHERE account_id = ? ORDER BY region, api_group').all(accountId)
        .map((r): Subscription => ({
          accountId: String(r.account_id), region: r.region as Region, group: r.api_group as Group,
          status: r.status as SubscriptionStatus, updatedAt: String(r.updated_at),
        }))
    },
    async findGrant(keyHash) {
      const r = q.grant.get(keyHash)
      if (!r) return null
      const grant: KeyGrant = {
        keyId: String(r.id),
        accountId: String(r.account_id),
        revoked: r.revoked_at !== null,
        accountActive: r.status === 'active',
        subscriptions: new Set(r.subs ? String(r.subs).split(',') : []),
        plan: r.rate === null ? null : toPlan(r),
      }
      return grant
    },
    async setPlan(accountId, plan) {
      const r = await batch.run(() => {
        if (db.prepare('SELECT 1 FROM accounts WHERE id = ?').get(accountId) === undefined) return false
        if (plan === null) db.prepare('DELETE FROM plans WHERE account_id = ?').run(accountId)
        else {
          db.prepare(`INSERT INTO plans (account_id, rate, burst, quota, period, updated_at) VALUES (?, ?, ?, ?, ?, ?)
            ON CONFLICT (account_id) DO UPDATE SET rate = excluded.rate, burst = excluded.burst, quota = excluded.quota,
              period = excluded.period, updated_at = excluded.updated_at`)
            .run(accountId, plan.rate, plan.burst, plan.quota, plan.period, new Date().toISOString())
        }
        return true
      })
      changed()
      return r
    },
    async getPlan(accountId) {
      const row = db.prepare('SELECT * FROM plans WHERE account_id = ?').get(accountId)
      return row ? toPlan(row) : null
    },
    onChange(listener) {
      listeners.add(listener)
      if (poller === undefined) {
        // data_version moves when another connection (the admin CLI) commits.
        poller = setInterval(() => {
          const version = Number(q.dataVersion.get()?.data_version)
          if (version !== lastVersion) {
            lastVersion = version
            changed()
          }
        }, changePollMs).unref()
        timers.add(poller)
      }
      return () => listeners.delete(listener)
    },
  }
}

function onboardingStore(db: DatabaseSync, batch: GroupCommit): OnboardingStore {
  const upsert = db.prepare(`
    INSERT INTO onboarding (account_id, application_id, user_id, algorithm, digits, period, secret_fingerprint, created_at, updated_at)
    VALUES ($accountId, $applicationId, $userId, $algorithm, $digits, $period, $secretFingerprint, $now, $now)
    ON CONFLICT (account_id, application_id, user_id) DO UPDATE SET
      algorithm = excluded.algorithm, digits = excluded.digits, period = excluded.period,
      secret_fingerprint = excluded.secret_fingerprint, updated_at = excluded.updated_at
    RETURNING *`)
  const get = db.prepare('SELECT * FROM onboarding WHERE account_id = ? AND application_id = ? AND user_id = ?')
  const bySecret = db.prepare(`SELECT * FROM onboarding WHERE account_id = ? AND secret_fingerprint IN (SELECT value FROM json_each(?))
    ORDER BY updated_at DESC LIMIT 1`)
  return {
    async upsert(record, now) {
      return toOnboarding(await batch.run(() => upsert.get({ ...record, now: now.toISOString() })!))
    },
    async get(accountId, applicationId, userId) {
      const row = get.get(accountId, applicationId, userId)
      return row ? toOnboarding(row) : null
    },
    async findBySecret(accountId, fingerprints) {
      const row = bySecret.get(accountId, JSON.stringify(fingerprints))
      return row ? toOnboarding(row) : null
    },
  }
}

function verificationStore(db: DatabaseSync, batch: GroupCommit): VerificationStore {
  const q = {
    state: db.prepare('SELECT last_step, failures, locked_until FROM otp_state WHERE key = ?'),
    write: db.prepare(`
      INSERT INTO otp_state (key, last_step, failures, locked_until, updated_at) VALUES ($key, $last, $failures, $lockedUntil, $now)
      ON CONFLICT (key) DO UPDATE SET last_step = excluded.last_step, failures = excluded.failures,
        locked_until = excluded.locked_until, updated_at = excluded.updated_at`),
  }
  return {
    // The read and the write run in one synchronous step inside the write transaction
    // (BEGIN IMMEDIATE), so no other verification, in this process or another, comes between them.
    settle(key, step, nowMs, policy: LockPolicy): Promise<Verdict> {
      return batch.run((): Verdict => {
        const row = q.state.get(key)
        const locked = Number(row?.locked_until ?? 0)
        if (locked > nowMs) return { kind: 'locked', lockedUntil: locked }
        const last = Number(row?.last_step ?? -1)
        if (step !== null && step > last) {
          q.write.run({ key, last: step, failures: 0, lockedUntil: 0, now: nowMs })
          return ACCEPTED
        }
        const failures = Number(row?.failures ?? 0) + 1
        const delay = lockDelaySeconds(failures, policy)
        q.write.run({ key, last, failures, lockedUntil: delay > 0 ? nowMs + delay * 1000 : 0, now: nowMs })
        return step === null ? INVALID : REUSED
      })
    },
  }
}

function usageStore(db: DatabaseSync, batch: GroupCommit): UsageStore {
  const add = db.prepare(`INSERT INTO usage_daily (account_id, day, api_group, count) VALUES (?, ?, ?, ?)
    ON CONFLICT (account_id, day, api_group) DO UPDATE SET count = count + excluded.count`)
  const list = db.prepare('SELECT * FROM usage_daily WHERE account_id = ? AND day >= ? ORDER BY day, api_group')
  const total = db.prepare('SELECT coalesce(sum(count), 0) AS n FROM usage_daily WHERE account_id = ? AND day >= ? AND day <= ?')
  return {
    add(rows) {
      // One statement at a time inside the turn's transaction: SAVEPOINT makes the set all or nothing.
      return batch.run(() => {
        db.exec('SAVEPOINT usage_add')
        try {
          for (const r of rows) add.run(r.accountId, r.day, r.group, r.count)
          db.exec('RELEASE usage_add')
        } catch (error) {
          db.exec('ROLLBACK TO usage_add')
          db.exec('RELEASE usage_add')
          throw error
        }
      })
    },
    async list(accountId, fromDay) {
      return list.all(accountId, fromDay).map((r): UsageRow => ({
        accountId: String(r.account_id), day: String(r.day), group: String(r.api_group), count: Number(r.count),
      }))
    },
    async total(accountId, fromDay, toDay) {
      return Number(total.get(accountId, fromDay, toDay)?.n ?? 0)
    },
  }
}

/** The maintenance thread checkpoints this often (ms). */
const CHECKPOINT_MS = 100
/**
 * Should the maintenance thread fall behind or be gone, the server's own connection
 * checkpoints once the log holds this many pages (about 40 MB), as SQLite does by default
 * at 1000.
 */
const FALLBACK_CHECKPOINT_PAGES = 10_000

/**
 * startMaintenance runs maintenance.ts in a thread of its own (checkpoints, pruning) and
 * starts it again should it die: a second later, doubling while it keeps dying within a
 * minute, up to a minute.
 */
function startMaintenance(options: MaintenanceOptions, report: (error: Error) => void): { stop(): Promise<void> } {
  let worker: Worker | null = null
  let stopping = false
  let restart: NodeJS.Timeout | undefined
  let delay = 1000
  const spawn = () => {
    const started = Date.now()
    const w = new Worker(new URL('./maintenance.ts', import.meta.url), { workerData: options })
    worker = w
    w.unref()
    w.on('message', (m: FromMaintenance) => report(new Error(`SQLite ${m.what} failed: ${m.message}`)))
    w.on('error', (error) => report(new Error(`SQLite maintenance thread failed: ${error.message}`)))
    w.on('exit', () => {
      worker = null
      if (stopping) return
      delay = Date.now() - started > 60_000 ? 1000 : Math.min(delay * 2, 60_000)
      restart = setTimeout(spawn, delay).unref()
    })
  }
  spawn()
  return {
    async stop() {
      stopping = true
      clearTimeout(restart)
      const w = worker
      if (w === null) return
      const exited = new Promise((resolve) => w.once('exit', resolve))
      w.postMessage({ type: 'stop' } satisfies ToMaintenance)
      const timer = setTimeout(() => void w.terminate(), 5000)
      await exited
      clearTimeout(timer)
    },
  }
}

/**
 * ownerOnly makes the database readable by its owner alone: its folder is created 0700, the
 * file 0600 before SQLite opens it (SQLite gives the -wal and -shm files it creates the main
 * file's mode), and files left by an older version, made 0644, are narrowed to 0600.
 */
function ownerOnly(path: string): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 })
  try {
    closeSync(openSync(path, 'wx', 0o600))
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
  }
  for (const name of [path, `${path}-wal`, `${path}-shm`]) {
    try {
      if ((statSync(name).mode & 0o077) !== 0) chmodSync(name, 0o600)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
    }
  }
}

/** openSqliteStore opens (creating if need be) and migrates the database. */
export function openSqliteStore(options: SqliteOptions): Store {
  const file = options.path !== ':memory:'
  if (file) ownerOnly(options.path)
  const db = new DatabaseSync(options.path)
  db.exec('PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 5000; PRAGMA foreign_keys = ON')
  migrate(db)
  const timers = new Set<NodeJS.Timeout>()
  const retention = options.stateRetentionMs ?? 24 * 3600 * 1000
  // A database in memory (tests) is the process's alone: no other connection, no maintenance.
  let maintenance: { stop(): Promise<void> } | null = null
  if (file && options.maintenance !== false) {
    db.exec(`PRAGMA wal_autocheckpoint = ${FALLBACK_CHECKPOINT_PAGES}; PRAGMA journal_size_limit = ${64 * 1048576}`)
    maintenance = startMaintenance({
      path: options.path,
      checkpointMs: CHECKPOINT_MS,
      pruneMs: options.pruneMs ?? Math.min(retention, 3600 * 1000),
      retentionMs: retention,
      // A chunk took a median 3 ms here (1 000 rows: 28 ms): the server's writes wait at most that long behind one.
      pruneChunk: 250,
    }, options.onBackgroundError ?? (() => undefined))
  }
  const ping = db.prepare('SELECT 1')
  const batch = new GroupCommit(db)
  return {
    kind: 'sqlite',
    access: accessStore(db, batch, options.changePollMs ?? 1000, timers),
    onboarding: onboardingStore(db, batch),
    verification: verificationStore(db, batch),
    usage: usageStore(db, batch),
    sharedLimiter: null,
    async health() {
      try {
        ping.get()
        return { sqlite: { ok: true, detail: 'ok', essential: true } }
      } catch (error) {
        return { sqlite: { ok: false, detail: (error as Error).message, essential: true } }
      }
    },
    async close() {
      for (const t of timers) clearInterval(t)
      if (db.isOpen) batch.flush()
      await maintenance?.stop()
      if (db.isOpen) db.close()
    },
  }
}
