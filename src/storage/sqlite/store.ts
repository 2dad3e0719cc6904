/**
 * The embedded store: SQLite through Node's built-in `node:sqlite` (no native addon).
 * Calls are synchronous underneath, so each method is atomic within the process; writes go
 * through one group commit (BEGIN IMMEDIATE per event-loop turn) so that several processes
 * on one file stay correct and a busy node pays one commit for many writes.
 */
import { DatabaseSync, type StatementSync } from 'node:sqlite'
import { Worker } from 'node:worker_threads'
import { chmodSync, closeSync, mkdirSync, openSync, statSync } from 'node:fs'
import { dirname } from 'node:path'
import type { LockPolicy, Verdict } from '../../domain/lockout.ts'
import { windowStart, type Limited, type OnboardingStore, type Store, type UsageStore, type VerificationStore } from '../ports.ts'
import { REFUSAL_LINES, type RefusalLine, type RefusalReason, type UsageLine } from '../../domain/usage.ts'
import { ACCEPTED, failure, lockDelaySeconds } from '../../domain/lockout.ts'
import type { Group, Region } from '../../domain/regions.ts'
import { migrations } from '../migrations.ts'
import { toOnboarding, usageSpans } from '../rows.ts'
import { GroupCommit } from './batch.ts'
import { accessStore, adminTokenStore, auditStore } from './accounts.ts'
import { portalStore } from './portal.ts'
import { factorStore } from './factors.ts'
import { webhookStore } from './webhooks.ts'
import { jobStore } from './jobs.ts'
import { idempotencyStore } from './idempotency.ts'
import type { FromMaintenance, MaintenanceOptions, ToMaintenance } from './maintenance.ts'
import { Stamps, type Clock } from '../stamps.ts'
import { COPY_MARKER, unfinishedCopy } from '../copy/marker.ts'

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
  /** The clock of every time the store stamps itself (default Date.now): the service's `now`. */
  readonly clock?: Clock
}

function migrate(db: DatabaseSync, stamps: Stamps): void {
  db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)')
  const applied = new Set(
    db
      .prepare('SELECT version FROM schema_migrations')
      .all()
      .map((r) => Number(r.version)),
  )
  for (const m of migrations) {
    if (applied.has(m.version)) continue
    db.exec('BEGIN IMMEDIATE')
    try {
      db.exec(m.sqlite)
      db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(m.version, m.name, stamps.iso())
      db.exec('COMMIT')
    } catch (error) {
      db.exec('ROLLBACK')
      throw error
    }
  }
}

function onboardingStore(db: DatabaseSync, batch: GroupCommit): OnboardingStore {
  const upsert = db.prepare(`
    INSERT INTO onboarding (account_id, application_id, user_id, algorithm, digits, period, secret_fingerprint, created_at, updated_at, params_marked)
    VALUES ($accountId, $applicationId, $userId, $algorithm, $digits, $period, $secretFingerprint, $now, $now, 1)
    ON CONFLICT (account_id, application_id, user_id) DO UPDATE SET
      algorithm = excluded.algorithm, digits = excluded.digits, period = excluded.period,
      secret_fingerprint = excluded.secret_fingerprint, updated_at = excluded.updated_at, params_marked = 1
    RETURNING *`)
  const get = db.prepare('SELECT * FROM onboarding WHERE account_id = ? AND application_id = ? AND user_id = ?')
  // One fingerprint is the rule (two only for a secret ending in a zero byte): its own statement skips json_each
  // (2 µs a call). The most recently updated record wins in both, as the contract says.
  const bySecret = db.prepare('SELECT * FROM onboarding WHERE account_id = ? AND secret_fingerprint = ? ORDER BY updated_at DESC LIMIT 1')
  const bySecrets = db.prepare(`SELECT * FROM onboarding WHERE account_id = ? AND secret_fingerprint IN (SELECT value FROM json_each(?))
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
      const row = fingerprints.length === 1 ? bySecret.get(accountId, fingerprints[0]!) : bySecrets.get(accountId, JSON.stringify(fingerprints))
      return row ? toOnboarding(row) : null
    },
  }
}

function verificationStore(db: DatabaseSync, batch: GroupCommit): VerificationStore {
  const q = {
    state: db.prepare('SELECT last_step, failures, locked_until FROM otp_state WHERE key = ?'),
    // Positional parameters: binding an object by name costs more, on every verification.
    write: db.prepare(`
      INSERT INTO otp_state (key, last_step, failures, locked_until, updated_at) VALUES (?, ?, ?, ?, ?)
      ON CONFLICT (key) DO UPDATE SET last_step = excluded.last_step, failures = excluded.failures,
        locked_until = excluded.locked_until, updated_at = excluded.updated_at`),
    clear: db.prepare('UPDATE otp_state SET failures = 0, locked_until = 0 WHERE key = ? AND (failures > 0 OR locked_until > 0)'),
    lock: db.prepare('SELECT max(locked_until) AS until FROM otp_state WHERE key IN (SELECT value FROM json_each(?))'),
    forgive: db.prepare(`UPDATE otp_state SET failures = failures - 1,
      locked_until = CASE WHEN failures - 1 < $max THEN 0 ELSE locked_until END WHERE key = $key AND failures > 0`),
    attempts: db.prepare('SELECT window_start, count FROM attempt_windows WHERE key = ?'),
    attempt: db.prepare(`INSERT INTO attempt_windows (key, window_start, count, expires_ms) VALUES (?, ?, 1, ?)
      ON CONFLICT (key) DO UPDATE SET count = CASE WHEN window_start = excluded.window_start THEN count + 1 ELSE 1 END,
        window_start = excluded.window_start, expires_ms = excluded.expires_ms`),
  }
  /** settleNow: one verification's read and write, synchronous (inside the caller's turn of the write transaction). */
  const settleNow = (key: string, step: number | null, nowMs: number, policy: LockPolicy): Verdict => {
    const row = q.state.get(key)
    const locked = Number(row?.locked_until ?? 0)
    if (locked > nowMs) return { kind: 'locked', lockedUntil: locked }
    const last = Number(row?.last_step ?? -1)
    if (step !== null && step > last) {
      q.write.run(key, step, 0, 0, nowMs)
      return ACCEPTED
    }
    const failures = Number(row?.failures ?? 0) + 1
    const delay = lockDelaySeconds(failures, policy)
    q.write.run(key, last, failures, delay > 0 ? nowMs + delay * 1000 : 0, nowMs)
    return failure(step, failures, policy)
  }
  return {
    // The read and the write run in one synchronous step inside the write transaction
    // (BEGIN IMMEDIATE), so no other verification, in this process or another, comes between them.
    settle(key, step, nowMs, policy: LockPolicy): Promise<Verdict> {
      return batch.run(() => settleNow(key, step, nowMs, policy))
    },
    // The windows read and counted, then the attempt settled, all in the same synchronous step (both, or neither).
    settleWithin(key, step, nowMs, policy, limits, windowMs) {
      const start = windowStart(nowMs, windowMs)
      return batch.atomic((): Verdict | Limited => {
        for (const { key: counter, max } of limits) {
          const row = q.attempts.get(counter)
          if (row !== undefined && Number(row.window_start) === start && Number(row.count) >= max) return { kind: 'limited', retryAtMs: start + windowMs }
        }
        for (const { key: counter } of limits) q.attempt.run(counter, start, start + windowMs)
        return settleNow(key, step, nowMs, policy)
      })
    },
    async clear(key) {
      const r = await batch.run(() => q.clear.run(key))
      return Number(r.changes) > 0
    },
    // A read outside the write turn: it sees what this process has written (committed or in
    // the turn's open transaction) and what other processes have committed.
    async lockedUntil(keys, nowMs) {
      const locked = Number(q.lock.get(JSON.stringify(keys))?.until ?? 0)
      return locked > nowMs ? locked : 0
    },
    async forgive(key, policy: LockPolicy) {
      const r = await batch.run(() => q.forgive.run({ key, max: policy.maxFailures }))
      return Number(r.changes) > 0
    },
  }
}

function usageStore(db: DatabaseSync, batch: GroupCommit): UsageStore {
  const upsert = (table: string, columns: string) =>
    db.prepare(`INSERT INTO ${table} (${columns}, count, units)
    VALUES (${columns
      .split(',')
      .map(() => '?')
      .join(', ')}, ?, ?)
    ON CONFLICT (${columns}) DO UPDATE SET count = count + excluded.count, units = units + excluded.units`)
  const daily = upsert('usage_daily', 'account_id, day, api_group')
  const perKey = upsert('usage_keys', 'account_id, day, key_id, api_group')
  const perKeyMonth = upsert('usage_keys_monthly', 'account_id, month, key_id, api_group')
  const perRegion = upsert('usage_regions', 'account_id, day, region, api_group')
  const total = db.prepare('SELECT coalesce(sum(units), 0) AS n FROM usage_daily WHERE account_id = ? AND day >= ? AND day <= ?')
  const byDay = db.prepare(`SELECT day, api_group, count, units FROM usage_daily
    WHERE account_id = ? AND day >= ? AND day <= ? ORDER BY day, api_group`)
  const byRegion = db.prepare(`SELECT region, api_group, sum(count) AS count, sum(units) AS units FROM usage_regions
    WHERE account_id = ? AND day >= ? AND day <= ? GROUP BY region, api_group ORDER BY region, api_group`)
  const byKey = new Map<string, StatementSync>()
  const refused = db.prepare(`INSERT INTO refusals_daily (account_id, day, key_id, region, api_group, reason, count) VALUES (?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (account_id, day, key_id, region, api_group, reason) DO UPDATE SET count = count + excluded.count`)
  const refusals = db.prepare(`SELECT key_id, region, api_group, reason, sum(count) AS count, max(day) AS last_day FROM refusals_daily
    WHERE account_id = ? AND day >= ? AND day <= ? GROUP BY key_id, region, api_group, reason
    ORDER BY count DESC, last_day DESC, key_id, region, api_group, reason LIMIT ${REFUSAL_LINES}`)
  return {
    add(rows) {
      // Every table, every row, or nothing (a SAVEPOINT inside the turn's transaction).
      return batch.atomic(() => {
        for (const r of rows) {
          daily.run(r.accountId, r.day, r.group, r.count, r.units)
          perKey.run(r.accountId, r.day, r.keyId, r.group, r.count, r.units)
          perKeyMonth.run(r.accountId, r.day.slice(0, 7), r.keyId, r.group, r.count, r.units)
          perRegion.run(r.accountId, r.day, r.region, r.group, r.count, r.units)
        }
      })
    },
    async report(accountId, fromDay, toDay, by) {
      const line = (r: Record<string, unknown>) => ({ group: r.api_group as Group, count: Number(r.count), units: Number(r.units) })
      if (by === 'day') return byDay.all(accountId, fromDay, toDay).map((r): UsageLine => ({ day: String(r.day), ...line(r) }))
      if (by === 'region') return byRegion.all(accountId, fromDay, toDay).map((r): UsageLine => ({ region: r.region as Region, ...line(r) }))
      const spans = usageSpans(fromDay, toDay)
      const daily = (sign: string) =>
        `SELECT key_id, api_group, ${sign}count AS count, ${sign}units AS units FROM usage_keys WHERE account_id = ? AND day >= ? AND day <= ?`
      const parts = [...spans.days.map(() => daily('')), ...spans.minus.map(() => daily('-'))]
      if (spans.months !== null) parts.push('SELECT key_id, api_group, count, units FROM usage_keys_monthly WHERE account_id = ? AND month >= ? AND month <= ?')
      // A key used only on days a month's row brings in and `minus` takes out adds up to nothing: no line.
      const text = `SELECT key_id, api_group, sum(count) AS count, sum(units) AS units FROM (${parts.join(' UNION ALL ')})
        GROUP BY key_id, api_group HAVING sum(count) <> 0 OR sum(units) <> 0 ORDER BY key_id, api_group`
      let statement = byKey.get(text)
      if (statement === undefined) {
        statement = db.prepare(text)
        byKey.set(text, statement)
      }
      const values = [...spans.days, ...spans.minus, ...(spans.months === null ? [] : [spans.months])].flatMap(([a, b]) => [accountId, a, b])
      return statement.all(...values).map((r): UsageLine => ({ keyId: String(r.key_id), ...line(r) }))
    },
    async total(accountId, fromDay, toDay) {
      return Number(total.get(accountId, fromDay, toDay)?.n ?? 0)
    },
    addRefusals(rows) {
      return batch.atomic(() => {
        for (const r of rows) refused.run(r.accountId, r.day, r.keyId, r.region, r.group, r.reason, r.count)
      })
    },
    async refusals(accountId, fromDay, toDay) {
      return refusals.all(accountId, fromDay, toDay).map(
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
 * minute, up to a minute. Every `pruneMs` it tells the thread the store's time to prune by.
 */
function startMaintenance(options: MaintenanceOptions, pruneMs: number, clock: Clock, report: (error: Error) => void): { stop(): Promise<void> } {
  let worker: Worker | null = null
  let stopping = false
  let restart: NodeJS.Timeout | undefined
  let delay = 1000
  const pruner = setInterval(() => worker?.postMessage({ type: 'prune', nowMs: clock() } satisfies ToMaintenance), pruneMs).unref()
  const spawn = () => {
    // The restart back-off is process timing, nothing stored: the wall clock.
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
      clearInterval(pruner)
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

/**
 * incrementalVacuum makes the file give back the pages that deletes free (a cancelled job's
 * document, an expired result: megabytes each), which the maintenance thread then returns to the
 * disk a chunk at a time; without it the file keeps its largest size for good. A new file takes
 * the mode at once; a file made before it is rewritten once (VACUUM), here, at start-up. Another
 * process busy with the file leaves that to the next start.
 */
function incrementalVacuum(db: DatabaseSync): void {
  if (Number(db.prepare('PRAGMA auto_vacuum').get()?.auto_vacuum) === 2) return
  db.exec('PRAGMA auto_vacuum = INCREMENTAL')
  try {
    db.exec('VACUUM')
  } catch (error) {
    if (!/busy|locked/i.test((error as Error).message)) throw error
  }
}

/**
 * openSqliteDatabase opens (creating it if need be, readable by its owner alone) and migrates the
 * store's database: the connection a store is made on, and the one `store copy` writes a copy with.
 */
export function openSqliteDatabase(path: string, stamps: Stamps): DatabaseSync {
  const file = path !== ':memory:'
  if (file) ownerOnly(path)
  const db = new DatabaseSync(path)
  db.exec('PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 5000; PRAGMA foreign_keys = ON')
  if (file) incrementalVacuum(db)
  migrate(db, stamps)
  return db
}

/** openSqliteStore opens (creating if need be) and migrates the database; it refuses one that a store copy has not finished writing. */
export function openSqliteStore(options: SqliteOptions): Store {
  const file = options.path !== ':memory:'
  const stamps = new Stamps(options.clock)
  const db = openSqliteDatabase(options.path, stamps)
  if (db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(COPY_MARKER) !== undefined) {
    db.close()
    throw unfinishedCopy()
  }
  const timers = new Set<NodeJS.Timeout>()
  const retention = options.stateRetentionMs ?? 24 * 3600 * 1000
  // A database in memory (tests) is the process's alone: no other connection, no maintenance.
  let maintenance: { stop(): Promise<void> } | null = null
  if (file && options.maintenance !== false) {
    db.exec(`PRAGMA wal_autocheckpoint = ${FALLBACK_CHECKPOINT_PAGES}; PRAGMA journal_size_limit = ${64 * 1048576}`)
    maintenance = startMaintenance(
      {
        path: options.path,
        checkpointMs: CHECKPOINT_MS,
        retentionMs: retention,
        // A chunk took a median 3 ms here (1 000 rows: 28 ms): the server's writes wait at most that long behind one.
        pruneChunk: 250,
      },
      options.pruneMs ?? Math.min(retention, 3600 * 1000),
      () => stamps.ms(),
      options.onBackgroundError ?? (() => undefined),
    )
  }
  const ping = db.prepare('SELECT 1')
  const batch = new GroupCommit(db)
  return {
    kind: 'sqlite',
    access: accessStore(db, batch, stamps, options.changePollMs ?? 1000, timers),
    onboarding: onboardingStore(db, batch),
    factors: factorStore(db, batch, stamps),
    verification: verificationStore(db, batch),
    usage: usageStore(db, batch),
    audit: auditStore(db, batch, stamps),
    adminTokens: adminTokenStore(db, batch, stamps),
    portal: portalStore(db, batch, stamps),
    webhooks: webhookStore(db, batch, stamps),
    jobs: jobStore(db, batch, stamps),
    idempotency: idempotencyStore(db, batch),
    sharedLimiter: null,
    gauges: () => ({}),
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
      if (!db.isOpen) return
      // Writes begun while the maintenance thread stopped (a job runner's claim, a usage flush) are committed, not dropped with the
      // connection while their callers wait for good: the job runner's close once hung on such a claim (src/converter/jobs/runner.test.ts).
      batch.flush()
      db.close()
    },
  }
}
