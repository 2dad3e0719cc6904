/**
 * The PostgreSQL Idempotency-Key records: begin is one transaction. Its first statement is an
 * insert that takes over only an expired record, or one under way whose lease ran out, so of
 * parallel requests with one key one begins and the others read the record it left (the row
 * stays locked until they have). A new record moves the owner's tally (record_tallies, kept by
 * triggers) and holds its row, so the owner's new records queue there; its expired records go
 * (those another transaction holds are skipped, never waited for), and over a cap the
 * transaction is rolled back. Locks are taken record first, tally second, as every other
 * statement on these rows does (finish, abandon, the pruner): no deadlock.
 */
import type { IdempotencyBegun, IdempotencyRecord, IdempotencyStore } from '../ports.ts'
import type { Row } from '../rows.ts'
import type { Query, Transaction } from './part.ts'
import { SEALED_VERSION_POSTGRES } from './seal-sql.ts'

const toRecord = (r: Row): IdempotencyRecord => ({
  fingerprint: String(r.fingerprint),
  status: r.status === null ? null : Number(r.status),
  sealed: r.sealed === null ? null : String(r.sealed),
  leaseUntilMs: Number(r.lease_until_ms),
  expiresMs: Number(r.expires_ms),
})

/** Full: thrown inside the transaction to roll back a record its owner has no room for. */
class Full extends Error {
  readonly freesAtMs: number
  constructor(freesAtMs: number) {
    super('the owner keeps as many Idempotency-Key records as it may')
    this.freesAtMs = freesAtMs
  }
}

export function idempotencyStore(query: Query, transaction: Transaction): IdempotencyStore {
  const get = async (q: Query, owner: string, key: string) => {
    const { rows } = await q('idempotency-get', 'SELECT * FROM idempotency_records WHERE owner = $1 AND key = $2', [owner, key])
    return rows[0] === undefined ? null : toRecord(rows[0])
  }
  return {
    async begin(owner, key, fingerprint, nowMs, leaseMs, ttlMs, caps) {
      for (;;) {
        const begun = await transaction(async (q): Promise<IdempotencyBegun | null> => {
          const { rows } = await q(
            'idempotency-begin',
            `INSERT INTO idempotency_records AS r (owner, key, fingerprint, status, sealed, lease_until_ms, expires_ms)
            VALUES ($1, $2, $3, NULL, NULL, $4, $5)
            ON CONFLICT (owner, key) DO UPDATE SET fingerprint = excluded.fingerprint, status = NULL, sealed = NULL,
              lease_until_ms = excluded.lease_until_ms, expires_ms = excluded.expires_ms
            WHERE r.expires_ms <= $6 OR (r.status IS NULL AND r.lease_until_ms <= $6)
            RETURNING r.xmax = 0 AS inserted`,
            [owner, key, fingerprint, nowMs + leaseMs, nowMs + ttlMs, nowMs],
          )
          if (rows.length === 0) {
            const record = await get(q, owner, key)
            // Gone meanwhile (pruned, or abandoned by a request that failed): try again.
            return record === null ? null : { started: false, record }
          }
          // Taken over (expired, or its node stopped): no record more.
          if (rows[0]!.inserted !== true) return { started: true }
          await q(
            'idempotency-reclaim',
            `DELETE FROM idempotency_records WHERE (owner, key) IN (SELECT owner, key FROM idempotency_records
              WHERE owner = $1 AND expires_ms <= $2 FOR UPDATE SKIP LOCKED)`,
            [owner, nowMs],
          )
          const { rows: tally } = await q(
            'idempotency-tally',
            `SELECT t.row_count, t.byte_count, (SELECT min(expires_ms) FROM idempotency_records WHERE owner = $1) AS first
            FROM record_tallies t WHERE t.owner = $1 AND t.kind = 'idempotency_records'`,
            [owner],
          )
          const t = tally[0]!
          if (Number(t.row_count) > caps.rows || Number(t.byte_count) > caps.bytes) throw new Full(Number(t.first))
          return { started: true }
        }).catch((error: unknown) => {
          if (error instanceof Full) return { started: false as const, full: { freesAtMs: error.freesAtMs } }
          throw error
        })
        if (begun !== null) return begun
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
      const record = await get(query, owner, key)
      return record !== null && record.expiresMs > nowMs ? record : null
    },
    async prune(nowMs) {
      const r = await query('idempotency-prune', 'DELETE FROM idempotency_records WHERE expires_ms <= $1', [nowMs])
      return r.rowCount ?? 0
    },
    async sealedAnswers(after, limit) {
      const { rows } = await query(
        'idempotency-sealed',
        `SELECT owner, key, fingerprint, sealed FROM idempotency_records
        WHERE sealed IS NOT NULL AND (owner COLLATE "C" > $1 OR (owner = $1 AND key COLLATE "C" > $2))
        ORDER BY owner COLLATE "C", key COLLATE "C" LIMIT $3`,
        [after?.owner ?? '', after?.key ?? '', limit],
      )
      return rows.map((r) => ({ row: { owner: String(r.owner), key: String(r.key), fingerprint: String(r.fingerprint) }, sealed: String(r.sealed) }))
    },
    async resealAnswer(ref, from, to) {
      const r = await query('idempotency-reseal', 'UPDATE idempotency_records SET sealed = $4 WHERE owner = $1 AND key = $2 AND sealed = $3', [
        ref.owner,
        ref.key,
        from,
        to,
      ])
      return (r.rowCount ?? 0) > 0
    },
    async sealVersions() {
      const { rows } = await query(
        'idempotency-seal-versions',
        `SELECT ${SEALED_VERSION_POSTGRES('sealed')} AS v, count(*) AS n FROM idempotency_records WHERE sealed IS NOT NULL GROUP BY v`,
      )
      return new Map(rows.map((r) => [Number(r.v), Number(r.n)]))
    },
  }
}
