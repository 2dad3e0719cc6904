/**
 * Webhook events: of managed TOTP factors, and of conversion jobs' ends. Each is an audit
 * event of the account (action = the event type), written in the same transaction as the
 * change it reports, and delivered to the account's webhook endpoints (Standard Webhooks)
 * from an outbox fed by that same write. The audit detail is the webhook's `data`: the API's
 * own field names, never a secret, a code or a URL the customer gave.
 */
export const EVENT_TYPES = [
  'factor.created',
  'factor.activated',
  'factor.deleted',
  'factor.verification_failed',
  'factor.lockout_started',
  'recovery_code.used',
  'recovery_codes.regenerated',
  'conversion.succeeded',
  'conversion.failed',
] as const

export type EventType = (typeof EVENT_TYPES)[number]

const TYPES: ReadonlySet<string> = new Set(EVENT_TYPES)

/** isEventType tells whether an audit action is also a webhook event. */
export function isEventType(action: string): action is EventType {
  return TYPES.has(action)
}
