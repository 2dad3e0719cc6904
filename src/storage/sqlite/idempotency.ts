/**
 * The SQLite Idempotency-Key records: begin is one synchronous step of the write transaction
 * (the look, the insert or take-over, and the owner's cap together), so of parallel requests
 * with one key one begins, and an owner never keeps more than its caps. The owner's tally
 * (record_tallies) is kept by triggers, so the cap is one read, never a count.
 */
import type { DatabaseSync } from 'node:sqlite'
import type { IdempotencyRecord, IdempotencyStore } from '../ports.ts'
import type { Row } from '../rows.ts'
import type { GroupCommit } from './batch.ts'
import { SEALED_VERSION_SQLITE } from './seal-sql.ts'

const toRecord = (r: Row): IdempotencyRecord => ({
  fingerprint: String(r.fingerprint),
  status: r.status === null ? null : Number(r.status),
  sealed: r.sealed === null ? null : String(r.sealed),
  leaseUntilMs: Number(r.lease_until_ms),
  expiresMs: Number(r.expires_ms),
})

/** Full: thrown inside the atomic step to undo a record its owner has no room for. */
class Full extends Error {
  readonly freesAtMs: number
  constructor(freesAtMs: number) {
    super('the owner keeps as many Idempotency-Key records as it may')
    this.freesAtMs = freesAtMs
  }
}

export function idempotencyStore(db: DatabaseSync, batch: GroupCommit): IdempotencyStore {
  const q = {
    get: db.prepare('SELECT * FROM idempotency_records WHERE owner = ? AND key = ?'),
    put: db.prepare(`INSERT INTO idempotency_records (owner, key, fingerprint, status, sealed, lease_until_ms, expires_ms) VALUES (?, ?, ?, NULL, NULL, ?, ?)
      ON CONFLICT (owner, key) DO UPDATE SET fingerprint = excluded.fingerprint, status = NULL, sealed = NULL,
        lease_until_ms = excluded.lease_until_ms, expires_ms = excluded.expires_ms`),
    reclaim: db.prepare('DELETE FROM idempotency_records WHERE owner = ? AND expires_ms <= ?'),
    kept: db.prepare(`SELECT t.row_count, t.byte_count, (SELECT min(expires_ms) FROM idempotency_records WHERE owner = $owner) AS first
      FROM record_tallies t WHERE t.owner = $owner AND t.kind = 'idempotency_records'`),
    finish: db.prepare('UPDATE idempotency_records SET status = ?, sealed = ? WHERE owner = ? AND key = ? AND fingerprint = ? AND status IS NULL'),
    abandon: db.prepare('DELETE FROM idempotency_records WHERE owner = ? AND key = ? AND fingerprint = ? AND status IS NULL'),
    prune: db.prepare('DELETE FROM idempotency_records WHERE expires_ms <= ?'),
    sealed: db.prepare(`SELECT owner, key, fingerprint, sealed FROM idempotency_records
      WHERE sealed IS NOT NULL AND (owner > $owner OR (owner = $owner AND key > $key)) ORDER BY owner, key LIMIT $limit`),
    reseal: db.prepare('UPDATE idempotency_records SET sealed = ? WHERE owner = ? AND key = ? AND sealed = ?'),
    versions: db.prepare(`SELECT ${SEALED_VERSION_SQLITE('sealed')} AS v, count(*) AS n FROM idempotency_records WHERE sealed IS NOT NULL GROUP BY v`),
  }
  return {
    async begin(owner, key, fingerprint, nowMs, leaseMs, ttlMs, caps) {
      try {
        return await batch.atomic(() => {
          const row = q.get.get(owner, key)
          const record = row === undefined ? null : toRecord(row)
          if (record !== null && record.expiresMs > nowMs) {
            if (record.status !== null || record.leaseUntilMs > nowMs) return { started: false as const, record }
            // Under way on a node that stopped: taken over, no record more.
            q.put.run(owner, key, fingerprint, nowMs + leaseMs, nowMs + ttlMs)
            return { started: true as const }
          }
          // A new record: the owner's expired ones go (this key's too), and it must fit the owner's caps.
          q.reclaim.run(owner, nowMs)
          q.put.run(owner, key, fingerprint, nowMs + leaseMs, nowMs + ttlMs)
          const kept = q.kept.get({ owner })!
          if (Number(kept.row_count) > caps.rows || Number(kept.byte_count) > caps.bytes) throw new Full(Number(kept.first))
          return { started: true as const }
        })
      } catch (error) {
        if (error instanceof Full) return { started: false as const, full: { freesAtMs: error.freesAtMs } }
        throw error
      }
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
    async sealedAnswers(after, limit) {
      return q.sealed.all({ owner: after?.owner ?? '', key: after?.key ?? '', limit }).map((r) => ({
        row: { owner: String(r.owner), key: String(r.key), fingerprint: String(r.fingerprint) },
        sealed: String(r.sealed),
      }))
    },
    async resealAnswer(ref, from, to) {
      const r = await batch.run(() => q.reseal.run(to, ref.owner, ref.key, from))
      return Number(r.changes) > 0
    },
    async sealVersions() {
      return new Map(q.versions.all().map((r) => [Number(r.v), Number(r.n)]))
    },
  }
}
