/**
 * The SQLite Idempotency-Key records: begin is one synchronous step of the write transaction
 * (the look and the insert or take-over together), so of parallel requests with one key one begins.
 */
import type { DatabaseSync } from 'node:sqlite'
import type { IdempotencyRecord, IdempotencyStore } from '../ports.ts'
import type { Row } from '../rows.ts'
import type { GroupCommit } from './batch.ts'

const toRecord = (r: Row): IdempotencyRecord => ({
  fingerprint: String(r.fingerprint),
  status: r.status === null ? null : Number(r.status),
  sealed: r.sealed === null ? null : String(r.sealed),
  leaseUntilMs: Number(r.lease_until_ms),
  expiresMs: Number(r.expires_ms),
})

export function idempotencyStore(db: DatabaseSync, batch: GroupCommit): IdempotencyStore {
  const q = {
    get: db.prepare('SELECT * FROM idempotency_records WHERE owner = ? AND key = ?'),
    put: db.prepare(`INSERT INTO idempotency_records (owner, key, fingerprint, status, sealed, lease_until_ms, expires_ms) VALUES (?, ?, ?, NULL, NULL, ?, ?)
      ON CONFLICT (owner, key) DO UPDATE SET fingerprint = excluded.fingerprint, status = NULL, sealed = NULL,
        lease_until_ms = excluded.lease_until_ms, expires_ms = excluded.expires_ms`),
    finish: db.prepare('UPDATE idempotency_records SET status = ?, sealed = ? WHERE owner = ? AND key = ? AND fingerprint = ? AND status IS NULL'),
    abandon: db.prepare('DELETE FROM idempotency_records WHERE owner = ? AND key = ? AND fingerprint = ? AND status IS NULL'),
    prune: db.prepare('DELETE FROM idempotency_records WHERE expires_ms <= ?'),
  }
  return {
    begin(owner, key, fingerprint, nowMs, leaseMs, ttlMs) {
      return batch.run(() => {
        const row = q.get.get(owner, key)
        if (row !== undefined) {
          const record = toRecord(row)
          const live = record.expiresMs > nowMs && (record.status !== null || record.leaseUntilMs > nowMs)
          if (live) return { started: false as const, record }
        }
        q.put.run(owner, key, fingerprint, nowMs + leaseMs, nowMs + ttlMs)
        return { started: true as const }
      })
    },
    async finish(owner, key, fingerprint, status, sealed) {
      const r = await batch.run(() => q.finish.run(status, sealed, owner, key, fingerprint))
      return Number(r.changes) > 0
    },
    async abandon(owner, key, fingerprint) {
      await batch.run(() => q.abandon.run(owner, key, fingerprint))
    },
    async get(owner, key, nowMs) {
      const row = q.get.get(owner, key)
      if (row === undefined) return null
      const record = toRecord(row)
      return record.expiresMs > nowMs ? record : null
    },
    async prune(nowMs) {
      const r = await batch.run(() => q.prune.run(nowMs))
      return Number(r.changes)
    },
  }
}
