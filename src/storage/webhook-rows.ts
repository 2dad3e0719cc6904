/**
 * Row mappers of the webhook tables, shared by both relational adapters (rows as SQLite or
 * pg gives them: text or Date times, text or parsed JSON).
 */
import type { ClaimedDelivery } from './ports.ts'
import type { DeliveryStatus, WebhookAttempt, WebhookDelivery, WebhookEndpoint } from '../domain/webhooks.ts'
import { iso, type Row } from './rows.ts'

/** eventTypesColumn: a list of event types as the comma list kept (null: every type). */
export const eventTypesColumn = (types: readonly string[] | null): string | null => (types === null ? null : types.join(','))

export const toEndpoint = (r: Row): WebhookEndpoint => ({
  id: String(r.id),
  accountId: String(r.account_id),
  url: String(r.url),
  eventTypes:
    r.event_types === null || r.event_types === undefined
      ? null
      : String(r.event_types)
          .split(',')
          .filter((t) => t !== ''),
  createdAt: iso(r.created_at),
})

const json = (value: unknown): Readonly<Record<string, unknown>> => (typeof value === 'string' ? JSON.parse(value) : value) as Readonly<Record<string, unknown>>

export const toClaimed = (r: Row, lease: string): ClaimedDelivery => ({
  endpointId: String(r.endpoint_id),
  messageId: String(r.message_id),
  accountId: String(r.account_id),
  url: String(r.url),
  sealedSecret: String(r.secret),
  eventType: String(r.event_type),
  at: iso(r.at),
  data: json(r.data),
  tries: Number(r.tries),
  sinceMs: Number(r.since_ms),
  lease,
  traceParent: typeof r.trace_parent === 'string' ? r.trace_parent : null,
})

export const toAttempt = (r: Row): WebhookAttempt => ({
  at: new Date(Number(r.at_ms)).toISOString(),
  statusCode: r.status_code === null || r.status_code === undefined ? null : Number(r.status_code),
  durationMs: Number(r.duration_ms),
  error: r.error === null || r.error === undefined ? null : String(r.error),
})

/** toDelivery: a delivery row (joined with its message) and its attempts. */
export const toDelivery = (r: Row, attempts: readonly WebhookAttempt[]): WebhookDelivery => ({
  id: String(r.message_id),
  eventType: String(r.event_type),
  createdAt: iso(r.at),
  status: r.status as DeliveryStatus,
  nextAttemptAt: r.status === 'pending' ? new Date(Number(r.next_at_ms)).toISOString() : null,
  attempts,
})

/** The attempts a delivery listing shows per delivery, newest first (the log keeps them all until retention). */
export const ATTEMPTS_SHOWN = 20
