/**
 * The PostgreSQL webhook store: endpoints and the outbox. The outbox rows themselves are
 * written by the audit_events trigger (migration 8), in the statement that inserts the event.
 * Claims take due rows with FOR UPDATE SKIP LOCKED: nodes claiming at once each get other
 * rows, and a row another claim moved past its lease no longer qualifies when re-checked.
 *
 * WebhookStore is assembled from builders by concern (endpoints, deliveries as the account
 * sees them, the delivery worker's outbox) over one Part (part.ts says why not a class).
 */
import { randomBytes } from 'node:crypto'
import type { WebhookStore } from '../ports.ts'
import { newId } from '../../domain/ids.ts'
import { readEventCursor, type Row } from '../rows.ts'
import { ATTEMPTS_SHOWN, eventTypesColumn, toAttempt, toClaimed, toDelivery, toEndpoint } from '../webhook-rows.ts'
import { auditInsert, type Part, type Query } from './part.ts'

export function webhookStore(p: Part): WebhookStore {
  return { ...endpointOps(p), ...deliveryOps(p), ...outboxOps(p) }
}

/** endpointOps: an account's endpoints, created within its limit and deleted with a prune of those deleted before (each under the account's row lock), and sealed secrets rotated. */
function endpointOps({
  query,
  transaction,
  stamps,
  audited,
}: Part): Pick<WebhookStore, 'createEndpoint' | 'sealedSecrets' | 'resealSecret' | 'listEndpoints' | 'getEndpoint' | 'deleteEndpoint'> {
  return {
    createEndpoint(endpoint, max, audit) {
      return transaction(async (tx) => {
        // The account's row lock orders parallel creates: each counts after the one before committed.
        const account = await tx('webhook-lock-account', 'SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE', [endpoint.accountId])
        if (account.rows.length === 0) return false
        const live = await tx('webhook-count', 'SELECT count(*) AS n FROM webhook_endpoints WHERE account_id = $1 AND disabled_at IS NULL', [
          endpoint.accountId,
        ])
        if (Number(live.rows[0]?.n) >= max) return false
        await tx(
          'webhook-create',
          `
          WITH w AS (INSERT INTO webhook_endpoints (id, account_id, url, event_types, secret, created_at) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id)
          ${auditInsert(7, 'w')}`,
          [endpoint.id, endpoint.accountId, endpoint.url, eventTypesColumn(endpoint.eventTypes), endpoint.sealedSecret, endpoint.createdAt, ...audited(audit)],
        )
        return true
      })
    },
    async listEndpoints(accountId) {
      const { rows } = await query('webhook-list', 'SELECT * FROM webhook_endpoints WHERE account_id = $1 AND disabled_at IS NULL ORDER BY created_at, id', [
        accountId,
      ])
      return rows.map(toEndpoint)
    },
    async sealedSecrets(afterId, limit) {
      const { rows } = await query(
        'webhook-sealed',
        `SELECT id, account_id, secret FROM webhook_endpoints
        WHERE disabled_at IS NULL AND id COLLATE "C" > $1 ORDER BY id COLLATE "C" LIMIT $2`,
        [afterId, limit],
      )
      return rows.map((r) => ({ id: String(r.id), accountId: String(r.account_id), sealed: String(r.secret) }))
    },
    async resealSecret(id, from, to) {
      const r = await query('webhook-reseal', 'UPDATE webhook_endpoints SET secret = $1 WHERE id = $2 AND secret = $3', [to, id, from])
      return (r.rowCount ?? 0) > 0
    },
    async getEndpoint(accountId, id) {
      const { rows } = await query('webhook-get', 'SELECT * FROM webhook_endpoints WHERE account_id = $1 AND id = $2 AND disabled_at IS NULL', [accountId, id])
      return rows[0] ? toEndpoint(rows[0]) : null
    },
    deleteEndpoint(accountId, id, audit, deletedKept) {
      return transaction(async (tx) => {
        // The account's row lock orders parallel deletions: each prunes after the one before committed.
        if (deletedKept !== undefined) await tx('webhook-lock-account', 'SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE', [accountId])
        const at = stamps.ms()
        const { rows } = await tx(
          'webhook-delete',
          `
          WITH w AS (UPDATE webhook_endpoints SET disabled_at = $14::timestamptz WHERE account_id = $1 AND id = $2 AND disabled_at IS NULL RETURNING id),
          c AS (UPDATE webhook_deliveries d SET status = 'cancelled', lease = NULL, updated_ms = $3 FROM w WHERE d.endpoint_id = w.id AND d.status = 'pending'),
          e AS (${auditInsert(4, 'w')})
          SELECT count(*) AS n FROM w`,
          [accountId, id, at, ...audited(audit), new Date(at).toISOString()],
        )
        if (Number(rows[0]?.n) === 0) return false
        if (deletedKept !== undefined) await pruneDeleted(tx, accountId, deletedKept)
        return true
      })
    },
  }
}

/**
 * pruneDeleted removes the account's deleted endpoints past the `kept` deleted last, with their
 * deliveries (before the endpoint: their tally trigger reads it; before the attempts: a finish
 * holding one writes its attempt first), attempts and the messages no other delivery holds,
 * each a statement of its own so that each sees the one before.
 */
async function pruneDeleted(tx: Query, accountId: string, kept: number): Promise<void> {
  const past = await tx(
    'webhook-past-kept',
    `SELECT id FROM webhook_endpoints WHERE account_id = $1 AND disabled_at IS NOT NULL
    ORDER BY disabled_at DESC, id COLLATE "C" DESC OFFSET $2`,
    [accountId, kept],
  )
  if (past.rows.length === 0) return
  const ids = past.rows.map((r) => String(r.id))
  const gone = await tx('webhook-drop-deliveries', 'DELETE FROM webhook_deliveries WHERE endpoint_id = ANY($1::text[]) RETURNING message_id', [ids])
  await tx('webhook-drop-attempts', 'DELETE FROM webhook_attempts WHERE endpoint_id = ANY($1::text[])', [ids])
  if (gone.rows.length > 0)
    await tx(
      'webhook-drop-messages',
      `DELETE FROM webhook_messages m WHERE m.id = ANY($1::text[])
      AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.message_id = m.id)`,
      [[...new Set(gone.rows.map((r) => String(r.message_id)))]],
    )
  await tx('webhook-drop-endpoints', 'DELETE FROM webhook_endpoints WHERE id = ANY($1::text[])', [ids])
}

/** deliveryOps: an endpoint's deliveries with their last attempts, and a resend of one. */
function deliveryOps({ query, audited }: Part): Pick<WebhookStore, 'listDeliveries' | 'resend'> {
  return {
    async listDeliveries(endpointId, { cursor, limit }) {
      const before = cursor === undefined ? null : readEventCursor(cursor)
      const { rows } = await query(
        null,
        `SELECT d.*, m.event_type, m.at FROM webhook_deliveries d JOIN webhook_messages m ON m.id = d.message_id
        WHERE d.endpoint_id = $1${before === null ? '' : ' AND d.message_id < $3'} ORDER BY d.message_id COLLATE "C" DESC LIMIT $2`,
        before === null ? [endpointId, limit + 1] : [endpointId, limit + 1, before],
      )
      const page = rows.slice(0, limit)
      const attempts = new Map<string, Row[]>()
      if (page.length > 0) {
        const found = await query(
          'webhook-attempts',
          `SELECT a.* FROM unnest($2::text[]) AS m(id),
          LATERAL (SELECT * FROM webhook_attempts WHERE endpoint_id = $1 AND message_id = m.id ORDER BY at_ms DESC, id DESC LIMIT ${ATTEMPTS_SHOWN}) a`,
          [endpointId, page.map((r) => String(r.message_id))],
        )
        for (const a of found.rows) {
          const list = attempts.get(String(a.message_id)) ?? []
          list.push(a)
          attempts.set(String(a.message_id), list)
        }
      }
      const items = page.map((r) => toDelivery(r, (attempts.get(String(r.message_id)) ?? []).map(toAttempt)))
      return { items, next: rows.length > limit && items.length > 0 ? items.at(-1)!.id : null }
    },
    async resend(endpointId, messageId, nowMs, audit) {
      const { rows } = await query(
        'webhook-resend',
        `
        WITH r AS (UPDATE webhook_deliveries SET status = 'pending', tries = 0, since_ms = $3, next_at_ms = $3, lease = NULL, updated_ms = $3
          WHERE endpoint_id = $1 AND message_id = $2
            AND EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.id = $1 AND e.disabled_at IS NULL) RETURNING 1),
        e AS (${auditInsert(4, 'r')})
        SELECT count(*) AS n FROM r`,
        [endpointId, messageId, nowMs, ...audited(audit)],
      )
      return Number(rows[0]?.n) > 0
    },
  }
}

/** outboxOps: the delivery worker's side; due deliveries claimed under a lease, attempts recorded, old ones pruned. */
function outboxOps({ query }: Part): Pick<WebhookStore, 'due' | 'claim' | 'finish' | 'pending' | 'prune' | 'setPendingCap' | 'takeDropped'> {
  return {
    async due(nowMs) {
      const { rows } = await query('webhook-due', "SELECT 1 FROM webhook_deliveries WHERE status = 'pending' AND next_at_ms <= $1 LIMIT 1", [nowMs])
      return rows.length > 0
    },
    async claim(limit, nowMs, leaseMs) {
      const lease = randomBytes(12).toString('base64url')
      const { rows } = await query(
        'webhook-claim',
        `
        WITH due AS (SELECT endpoint_id, message_id FROM webhook_deliveries WHERE status = 'pending' AND next_at_ms <= $1
          ORDER BY next_at_ms LIMIT $2 FOR UPDATE SKIP LOCKED),
        c AS (UPDATE webhook_deliveries d SET next_at_ms = $3, lease = $4 FROM due
          WHERE d.endpoint_id = due.endpoint_id AND d.message_id = due.message_id AND d.status = 'pending' AND d.next_at_ms <= $1
          RETURNING d.endpoint_id, d.message_id, d.tries, d.since_ms)
        SELECT c.*, e.account_id, e.url, e.secret, m.event_type, m.at, m.data, a.trace_parent
        FROM c JOIN webhook_endpoints e ON e.id = c.endpoint_id JOIN webhook_messages m ON m.id = c.message_id
        LEFT JOIN audit_events a ON a.id = m.id`,
        [nowMs, limit, nowMs + leaseMs, lease],
      )
      return rows.map((r) => toClaimed(r, lease))
    },
    async finish(r) {
      // The attempt is written only while its delivery is there, that row locked: a prune of a deleted endpoint (deliveries
      // first, then attempts) either waits for it and deletes it, or has gone first and leaves nothing to write.
      await query(
        'webhook-finish',
        `
        WITH k AS (SELECT endpoint_id FROM webhook_deliveries WHERE endpoint_id = $2 AND message_id = $3 FOR NO KEY UPDATE),
        u AS (UPDATE webhook_deliveries d SET status = $8, tries = d.tries + 1, next_at_ms = $9, lease = NULL, updated_ms = $4
          FROM k WHERE d.endpoint_id = k.endpoint_id AND d.message_id = $3 AND d.lease = $10)
        INSERT INTO webhook_attempts (id, endpoint_id, message_id, at_ms, status_code, duration_ms, error)
          SELECT $1::text, $2::text, $3::text, $4::bigint, $5::integer, $6::integer, $7::text FROM k`,
        [
          newId('wha'),
          r.endpointId,
          r.messageId,
          r.attempt.atMs,
          r.attempt.statusCode,
          Math.round(r.attempt.durationMs),
          r.attempt.error,
          r.outcome === 'retry' ? 'pending' : r.outcome,
          r.nextAtMs,
          r.lease,
        ],
      )
    },
    async setPendingCap(max) {
      await query('webhook-pending-cap', "UPDATE store_settings SET value = $1 WHERE name = 'webhook_pending_per_account'", [max])
    },
    async takeDropped() {
      // The counts are read under their rows' locks (in account order) and set back to 0 in the same statement: taken once.
      const { rows } = await query(
        'webhook-take-dropped',
        `UPDATE record_tallies t SET row_count = 0
        FROM (SELECT owner, row_count FROM record_tallies WHERE kind = 'webhook_dropped' AND row_count > 0 ORDER BY owner FOR UPDATE) o
        WHERE t.owner = o.owner AND t.kind = 'webhook_dropped' RETURNING o.owner, o.row_count`,
        [],
      )
      return rows.map((r) => ({ accountId: String(r.owner), deliveries: Number(r.row_count) }))
    },
    async pending() {
      const { rows } = await query('webhook-pending', "SELECT count(*) AS n FROM webhook_deliveries WHERE status = 'pending'")
      return Number(rows[0]?.n)
    },
    async prune(beforeMs) {
      let total = 0
      for (;;) {
        const { rows } = await query(
          'webhook-prune',
          `
          WITH d AS (DELETE FROM webhook_deliveries WHERE (endpoint_id, message_id) IN (SELECT endpoint_id, message_id FROM webhook_deliveries
            WHERE status <> 'pending' AND updated_ms < $1 ORDER BY updated_ms LIMIT 1000) RETURNING endpoint_id, message_id),
          a AS (DELETE FROM webhook_attempts x USING d WHERE x.endpoint_id = d.endpoint_id AND x.message_id = d.message_id),
          m AS (DELETE FROM webhook_messages x WHERE x.id IN (SELECT message_id FROM d)
            AND NOT EXISTS (SELECT 1 FROM webhook_deliveries y WHERE y.message_id = x.id AND (y.endpoint_id, y.message_id) NOT IN (SELECT endpoint_id, message_id FROM d)))
          SELECT count(*) AS n FROM d`,
          [beforeMs],
        )
        const n = Number(rows[0]?.n)
        total += n
        if (n < 1000) return total
      }
    },
  }
}
