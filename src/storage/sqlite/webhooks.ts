/**
 * The SQLite webhook store: endpoints and the outbox. The outbox rows themselves are written
 * by the audit_events trigger (migration 8), inside the write that inserts the event. Claims
 * run in the group commit's BEGIN IMMEDIATE transaction, so a delivery goes to one claim
 * across every process on the file.
 *
 * WebhookStore is assembled from builders by concern (endpoints, deliveries as the account
 * sees them, the delivery worker's outbox) over one Part (part.ts says why not a class); each
 * check, change and event stays in the one synchronous function handed to the group commit.
 */
import { randomBytes } from 'node:crypto'
import type { DatabaseSync } from 'node:sqlite'
import type { WebhookStore } from '../ports.ts'
import { newId } from '../../domain/ids.ts'
import { readEventCursor, type Row } from '../rows.ts'
import { ATTEMPTS_SHOWN, eventTypesColumn, toAttempt, toClaimed, toDelivery, toEndpoint } from '../webhook-rows.ts'
import type { GroupCommit } from './batch.ts'
import { part, type Part } from './part.ts'
import type { Stamps } from '../stamps.ts'

/** webhookStatements: the WebhookStore's statements, prepared once. */
function webhookStatements(db: DatabaseSync) {
  return {
    live: db.prepare('SELECT count(*) AS n FROM webhook_endpoints WHERE account_id = ? AND disabled_at IS NULL'),
    insert: db.prepare('INSERT INTO webhook_endpoints (id, account_id, url, event_types, secret, created_at) VALUES (?, ?, ?, ?, ?, ?)'),
    sealed: db.prepare('SELECT id, account_id, secret FROM webhook_endpoints WHERE disabled_at IS NULL AND id > ? ORDER BY id LIMIT ?'),
    reseal: db.prepare('UPDATE webhook_endpoints SET secret = ? WHERE id = ? AND secret = ?'),
    list: db.prepare('SELECT * FROM webhook_endpoints WHERE account_id = ? AND disabled_at IS NULL ORDER BY created_at, id'),
    get: db.prepare('SELECT * FROM webhook_endpoints WHERE account_id = ? AND id = ? AND disabled_at IS NULL'),
    disable: db.prepare('UPDATE webhook_endpoints SET disabled_at = ? WHERE account_id = ? AND id = ? AND disabled_at IS NULL'),
    cancel: db.prepare("UPDATE webhook_deliveries SET status = 'cancelled', lease = NULL, updated_ms = ? WHERE endpoint_id = ? AND status = 'pending'"),
    // The account's deleted endpoints past the ? deleted last, and what hangs off each (deliveries first: their tally trigger reads the endpoint).
    pastKept: db.prepare(`SELECT id FROM webhook_endpoints WHERE account_id = ? AND disabled_at IS NOT NULL
      ORDER BY disabled_at DESC, id DESC LIMIT -1 OFFSET ?`),
    dropAttempts: db.prepare('DELETE FROM webhook_attempts WHERE endpoint_id = ?'),
    dropDeliveries: db.prepare('DELETE FROM webhook_deliveries WHERE endpoint_id = ? RETURNING message_id'),
    dropEndpoint: db.prepare('DELETE FROM webhook_endpoints WHERE id = ?'),
    attempts: db.prepare(`SELECT * FROM webhook_attempts WHERE endpoint_id = ? AND message_id = ? ORDER BY at_ms DESC, id DESC LIMIT ${ATTEMPTS_SHOWN}`),
    resend: db.prepare(`UPDATE webhook_deliveries SET status = 'pending', tries = 0, since_ms = $now, next_at_ms = $now, lease = NULL, updated_ms = $now
      WHERE endpoint_id = $endpoint AND message_id = $message
        AND EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.id = $endpoint AND e.disabled_at IS NULL)`),
    due: db.prepare("SELECT 1 FROM webhook_deliveries WHERE status = 'pending' AND next_at_ms <= ? LIMIT 1"),
    claim: db.prepare(`UPDATE webhook_deliveries SET next_at_ms = $until, lease = $lease
      WHERE (endpoint_id, message_id) IN (SELECT endpoint_id, message_id FROM webhook_deliveries
        WHERE status = 'pending' AND next_at_ms <= $now ORDER BY next_at_ms LIMIT $limit)
      RETURNING endpoint_id, message_id`),
    // The event's trace (a message's id is its audit event's), while the event is kept: its attempts are spans of that trace.
    claimed: db.prepare(`SELECT d.endpoint_id, d.message_id, d.tries, d.since_ms, e.account_id, e.url, e.secret, m.event_type, m.at, m.data, a.trace_parent
      FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id JOIN webhook_messages m ON m.id = d.message_id
      LEFT JOIN audit_events a ON a.id = m.id
      WHERE d.endpoint_id = ? AND d.message_id = ?`),
    // Only while the delivery is there: a claim's endpoint may have been deleted and pruned while it was sent.
    attempt: db.prepare(`INSERT INTO webhook_attempts (id, endpoint_id, message_id, at_ms, status_code, duration_ms, error)
      SELECT $id, $endpoint, $message, $at, $status, $duration, $error
      WHERE EXISTS (SELECT 1 FROM webhook_deliveries WHERE endpoint_id = $endpoint AND message_id = $message)`),
    finish: db.prepare(`UPDATE webhook_deliveries SET status = $status, tries = tries + 1, next_at_ms = $next, lease = NULL, updated_ms = $now
      WHERE endpoint_id = $endpoint AND message_id = $message AND lease = $lease`),
    pending: db.prepare("SELECT count(*) AS n FROM webhook_deliveries WHERE status = 'pending'"),
    prune: db.prepare(`DELETE FROM webhook_deliveries WHERE (endpoint_id, message_id) IN (SELECT endpoint_id, message_id FROM webhook_deliveries
      WHERE status <> 'pending' AND updated_ms < ? ORDER BY updated_ms LIMIT 1000) RETURNING endpoint_id, message_id`),
    pruneAttempts: db.prepare('DELETE FROM webhook_attempts WHERE endpoint_id = ? AND message_id = ?'),
    pruneMessage: db.prepare('DELETE FROM webhook_messages WHERE id = ? AND NOT EXISTS (SELECT 1 FROM webhook_deliveries WHERE message_id = ?)'),
    setCap: db.prepare("UPDATE store_settings SET value = ? WHERE name = 'webhook_pending_per_account'"),
    dropped: db.prepare("SELECT owner, row_count FROM record_tallies WHERE kind = 'webhook_dropped' AND row_count > 0 ORDER BY owner"),
    takeDropped: db.prepare("UPDATE record_tallies SET row_count = 0 WHERE kind = 'webhook_dropped' AND row_count > 0 RETURNING owner"),
  }
}

/** Webhooks: what the WebhookStore's builders share. */
type Webhooks = Part<ReturnType<typeof webhookStatements>>

export function webhookStore(db: DatabaseSync, batch: GroupCommit, stamps: Stamps): WebhookStore {
  const w = part(db, batch, stamps, webhookStatements(db))
  return { ...endpointOps(w), ...deliveryOps(w), ...outboxOps(w) }
}

/** endpointOps: an account's endpoints, created within its limit (one step with the count), deleted (one step with the prune of those deleted before) and sealed secrets rotated. */
function endpointOps({
  q,
  batch,
  stamps,
  audit,
}: Webhooks): Pick<WebhookStore, 'createEndpoint' | 'sealedSecrets' | 'resealSecret' | 'listEndpoints' | 'getEndpoint' | 'deleteEndpoint'> {
  return {
    createEndpoint(endpoint, max, event) {
      // The count and the insert are one synchronous step of the write transaction: no parallel create comes between.
      return batch.atomic(() => {
        if (Number(q.live.get(endpoint.accountId)?.n) >= max) return false
        q.insert.run(endpoint.id, endpoint.accountId, endpoint.url, eventTypesColumn(endpoint.eventTypes), endpoint.sealedSecret, endpoint.createdAt)
        audit(event)
        return true
      })
    },
    async sealedSecrets(afterId, limit) {
      return q.sealed.all(afterId, limit).map((r) => ({ id: String(r.id), accountId: String(r.account_id), sealed: String(r.secret) }))
    },
    async resealSecret(id, from, to) {
      const r = await batch.run(() => q.reseal.run(to, id, from))
      return Number(r.changes) > 0
    },
    async listEndpoints(accountId) {
      return q.list.all(accountId).map(toEndpoint)
    },
    async getEndpoint(accountId, id) {
      const row = q.get.get(accountId, id)
      return row ? toEndpoint(row) : null
    },
    deleteEndpoint(accountId, id, event, deletedKept) {
      return batch.atomic(() => {
        const at = stamps.ms()
        if (Number(q.disable.run(new Date(at).toISOString(), accountId, id).changes) === 0) return false
        q.cancel.run(at, id)
        audit(event)
        if (deletedKept !== undefined) {
          for (const gone of q.pastKept.all(accountId, deletedKept)) {
            const endpoint = String(gone.id)
            q.dropAttempts.run(endpoint)
            for (const d of q.dropDeliveries.all(endpoint)) q.pruneMessage.run(String(d.message_id), String(d.message_id))
            q.dropEndpoint.run(endpoint)
          }
        }
        return true
      })
    },
  }
}

/** deliveryOps: an endpoint's deliveries with their last attempts, and a resend of one. */
function deliveryOps({ db, q, batch, audit }: Webhooks): Pick<WebhookStore, 'listDeliveries' | 'resend'> {
  return {
    async listDeliveries(endpointId, { cursor, limit }) {
      const before = cursor === undefined ? null : readEventCursor(cursor)
      const rows = db
        .prepare(`SELECT d.*, m.event_type, m.at FROM webhook_deliveries d JOIN webhook_messages m ON m.id = d.message_id
        WHERE d.endpoint_id = ?${before === null ? '' : ' AND d.message_id < ?'} ORDER BY d.message_id DESC LIMIT ?`)
        .all(...(before === null ? [endpointId] : [endpointId, before]), limit + 1)
      const items = rows.slice(0, limit).map((r: Row) => toDelivery(r, q.attempts.all(endpointId, String(r.message_id)).map(toAttempt)))
      return { items, next: rows.length > limit && items.length > 0 ? items.at(-1)!.id : null }
    },
    resend(endpointId, messageId, nowMs, event) {
      return batch.atomic(() => {
        if (Number(q.resend.run({ now: nowMs, endpoint: endpointId, message: messageId }).changes) === 0) return false
        audit(event)
        return true
      })
    },
  }
}

/** outboxOps: the delivery worker's side; due deliveries claimed under a lease, attempts recorded, old ones pruned. */
function outboxOps({ q, batch }: Webhooks): Pick<WebhookStore, 'due' | 'claim' | 'finish' | 'pending' | 'prune' | 'setPendingCap' | 'takeDropped'> {
  return {
    async due(nowMs) {
      return q.due.get(nowMs) !== undefined
    },
    claim(limit, nowMs, leaseMs) {
      const lease = randomBytes(12).toString('base64url')
      return batch.run(() => {
        return q.claim
          .all({ until: nowMs + leaseMs, lease, now: nowMs, limit })
          .map((k) => toClaimed(q.claimed.get(String(k.endpoint_id), String(k.message_id))!, lease))
      })
    },
    async finish(r) {
      await batch.run(() => {
        q.attempt.run({
          id: newId('wha'),
          endpoint: r.endpointId,
          message: r.messageId,
          at: r.attempt.atMs,
          status: r.attempt.statusCode,
          duration: Math.round(r.attempt.durationMs),
          error: r.attempt.error,
        })
        q.finish.run({
          status: r.outcome === 'retry' ? 'pending' : r.outcome,
          next: r.nextAtMs,
          now: r.attempt.atMs,
          endpoint: r.endpointId,
          message: r.messageId,
          lease: r.lease,
        })
      })
    },
    async pending() {
      return Number(q.pending.get()?.n)
    },
    async prune(beforeMs) {
      // In chunks, each its own commit: a large backlog never holds the write lock long.
      let total = 0
      for (;;) {
        const n = await batch.run(() => {
          const gone = q.prune.all(beforeMs)
          for (const d of gone) {
            q.pruneAttempts.run(String(d.endpoint_id), String(d.message_id))
            q.pruneMessage.run(String(d.message_id), String(d.message_id))
          }
          return gone.length
        })
        total += n
        if (n < 1000) return total
      }
    },
    async setPendingCap(max) {
      await batch.run(() => q.setCap.run(max))
    },
    async takeDropped() {
      // A read first, so that a worker with nothing to take writes nothing; the counts and their reset are one step.
      if (q.dropped.get() === undefined) return []
      return batch.run(() => {
        const rows = q.dropped.all().map((r) => ({ accountId: String(r.owner), deliveries: Number(r.row_count) }))
        q.takeDropped.run()
        return rows
      })
    },
  }
}
