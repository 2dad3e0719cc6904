/**
 * The SQLite store's maintenance thread, with a connection of its own to the same file:
 *
 * - WAL checkpoints. A checkpoint copies the pages committed to the write-ahead log back
 *   into the database file and waits for them on disk (fsync). Run by the committing
 *   connection (SQLite's default, every 1000 pages), it stalled the event loop for 7-15 ms
 *   about every thousand verifications; here it runs beside the server (PASSIVE: it never
 *   takes the write lock, so commits go on meanwhile).
 * - Pruning of old verification state, a bounded chunk per statement, so that the server's
 *   own writes never wait long behind it.
 * - Incremental vacuum: pages that deletes freed (documents, results) go back to the disk, a
 *   chunk before each checkpoint, so that the file does not keep its largest size.
 *
 * Failures are reported to the store, which logs them; the thread itself carries on.
 */
import { parentPort, workerData } from 'node:worker_threads'
import { DatabaseSync } from 'node:sqlite'

export interface MaintenanceOptions {
  readonly path: string
  readonly checkpointMs: number
  readonly retentionMs: number
  readonly pruneChunk: number
}

export type FromMaintenance = { readonly type: 'error'; readonly what: string; readonly message: string }
/** `prune` carries the store's clock (a function cannot cross into the thread): what expired is judged by the service's time. */
export type ToMaintenance = { readonly type: 'stop' } | { readonly type: 'prune'; readonly nowMs: number }

const options = workerData as MaintenanceOptions
const port = parentPort!
const db = new DatabaseSync(options.path)
// The server's writes come first: this connection waits for them, never the other way round for long.
db.exec('PRAGMA busy_timeout = 5000')
const checkpoint = db.prepare('PRAGMA wal_checkpoint(PASSIVE)')
const prune = db.prepare(`DELETE FROM otp_state WHERE key IN (
  SELECT key FROM otp_state WHERE updated_at < ? AND locked_until < ? LIMIT ?)`)
// Pending factors never activated: their sealed secrets go once they expire (reads skip them already).
const pruneFactors = db.prepare(`DELETE FROM totp_factors WHERE id IN (
  SELECT id FROM totp_factors WHERE status = 'pending' AND expires_at <= ? LIMIT ?)`)
// Idempotency-Key records past their 24 hours, sealed answers with them.
const pruneIdempotency = db.prepare(`DELETE FROM idempotency_records WHERE rowid IN (
  SELECT rowid FROM idempotency_records WHERE expires_ms <= ? LIMIT ?)`)
// Attempt windows that have ended.
const pruneAttempts = db.prepare(`DELETE FROM attempt_windows WHERE key IN (
  SELECT key FROM attempt_windows WHERE expires_ms <= ? LIMIT ?)`)
// Passkey ceremonies never answered: their challenges go once they expire (takeChallenge refuses them already).
const pruneChallenges = db.prepare(`DELETE FROM passkey_challenges WHERE digest IN (
  SELECT digest FROM passkey_challenges WHERE expires_at <= ? LIMIT ?)`)

function report(what: string, error: unknown): void {
  port.postMessage({ type: 'error', what, message: (error as Error).message } satisfies FromMaintenance)
}

/** Free pages past this many go back to the disk, VACUUM_CHUNK at a time (each a short write: the server's writes wait at most that long). */
const FREE_PAGES_KEPT = 256
const VACUUM_CHUNK = 2048
const freePages = db.prepare('PRAGMA freelist_count')

function runCheckpoint(): void {
  try {
    if (Number(freePages.get()?.freelist_count) > FREE_PAGES_KEPT) db.exec(`PRAGMA incremental_vacuum(${VACUUM_CHUNK})`)
  } catch (error) {
    report('incremental vacuum', error)
  }
  try {
    checkpoint.get()
  } catch (error) {
    report('WAL checkpoint', error)
  }
}

let pruning = false
let stopped = false
/** pruneAll deletes what expired by `now` one chunk per turn, so a checkpoint can run between chunks. */
function pruneAll(now: number): void {
  if (pruning) return
  pruning = true
  const step = () => {
    if (stopped) return
    let deleted: number
    try {
      deleted = Number(prune.run(now - options.retentionMs, now, options.pruneChunk).changes)
      deleted = Math.max(deleted, Number(pruneFactors.run(new Date(now).toISOString(), options.pruneChunk).changes))
      deleted = Math.max(deleted, Number(pruneAttempts.run(now, options.pruneChunk).changes))
      deleted = Math.max(deleted, Number(pruneIdempotency.run(now, options.pruneChunk).changes))
      deleted = Math.max(deleted, Number(pruneChallenges.run(new Date(now).toISOString(), options.pruneChunk).changes))
    } catch (error) {
      report('pruning of verification state', error)
      pruning = false
      return
    }
    if (deleted < options.pruneChunk) {
      pruning = false
      return
    }
    setImmediate(step)
  }
  step()
}

const checkpoints = setInterval(runCheckpoint, options.checkpointMs)

port.on('message', (message: ToMaintenance) => {
  if (message.type === 'prune') pruneAll(message.nowMs)
  else {
    stopped = true
    clearInterval(checkpoints)
    runCheckpoint()
    db.close()
    port.close()
  }
})
