/**
 * The PostgreSQL Idempotency-Key records: begin is one statement (an insert that takes over
 * only an expired record, or one under way whose lease ran out), so of parallel requests with
 * one key one begins; the others read the record it left.
 */
import type { IdempotencyRecord, IdempotencyStore } from '../ports.ts'
import type { Row } from '../rows.ts'
import type { Query } from './part.ts'

const toRecord = (r: Row): IdempotencyRecord => ({
  fingerprint: String(r.fingerprint),
  status: r.status === null ? null : Number(r.status),
  sealed: r.sealed === null ? null : String(r.sealed),
  leaseUntilMs: Number(r.lease_until_ms),
  expiresMs: Number(r.expires_ms),
})

export function idempotencyStore(query: Query): IdempotencyStore {
  const get = async (owner: string, key: string) => {
    const { rows } = await query('idempotency-get', 'SELECT * FROM idempotency_records WHERE owner = $1 AND key = $2', [owner, key])
    return rows[0] === undefined ? null : toRecord(rows[0])
  }
  return {
    async begin(owner, key, fingerprint, nowMs, leaseMs, ttlMs) {
      for (;;) {
        const { rows } = await query(
          'idempotency-begin',
          `INSERT INTO idempotency_records AS r (owner, key, fingerprint, status, sealed, lease_until_ms, expires_ms)
          VALUES ($1, $2, $3, NULL, NULL, $4, $5)
          ON CONFLICT (owner, key) DO UPDATE SET fingerprint = excluded.fingerprint, status = NULL, sealed = NULL,
            lease_until_ms = excluded.lease_until_ms, expires_ms = excluded.expires_ms
          WHERE r.expires_ms <= $6 OR (r.status IS NULL AND r.lease_until_ms <= $6)
          RETURNING 1`,
          [owner, key, fingerprint, nowMs + leaseMs, nowMs + ttlMs, nowMs],
        )
        if (rows.length > 0) return { started: true as const }
        const record = await get(owner, key)
        // Gone between the two statements (pruned, or abandoned by a request that failed): try again.
        if (record !== null) return { started: false as const, record }
      }
    },
    async finish(owner, key, fingerprint, status, sealed) {
      const r = await query(
        'idempotency-finish',
        'UPDATE idempotency_records SET status = $4, sealed = $5 WHERE owner = $1 AND key = $2 AND fingerprint = $3 AND status IS NULL',
        [owner, key, fingerprint, status, sealed],
      )
      return (r.rowCount ?? 0) > 0
    },
    async abandon(owner, key, fingerprint) {
      await query('idempotency-abandon', 'DELETE FROM idempotency_records WHERE owner = $1 AND key = $2 AND fingerprint = $3 AND status IS NULL', [
        owner,
        key,
        fingerprint,
      ])
    },
    async get(owner, key, nowMs) {
      const record = await get(owner, key)
      return record !== null && record.expiresMs > nowMs ? record : null
    },
    async prune(nowMs) {
      const r = await query('idempotency-prune', 'DELETE FROM idempotency_records WHERE expires_ms <= $1', [nowMs])
      return r.rowCount ?? 0
    },
  }
}
