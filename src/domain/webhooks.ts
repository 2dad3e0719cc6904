/**
 * Webhook endpoints and their deliveries, as the portal, the admin API and the delivery worker see them. Nothing here imports anything of ours.
 */

/** A webhook endpoint of an account (its secret stays in the store, sealed). */
export interface WebhookEndpoint {
  readonly id: string
  readonly accountId: string
  readonly url: string
  /** The event types it receives; null: every type. */
  readonly eventTypes: readonly string[] | null
  readonly createdAt: string
}

export interface NewWebhookEndpoint extends WebhookEndpoint {
  /** The signing secret as webhooks/secret.ts sealed it. */
  readonly sealedSecret: string
}

export type DeliveryStatus = 'pending' | 'delivered' | 'failed' | 'cancelled'

/** One try at delivering a message to an endpoint. */
export interface WebhookAttempt {
  readonly at: string
  /** The HTTP status answered; null: no answer (refused, unreachable, timed out). */
  readonly statusCode: number | null
  readonly durationMs: number
  readonly error: string | null
}

/** A message's delivery to one endpoint, with its latest attempts (newest first). */
export interface WebhookDelivery {
  /** The message's id: the audit event's, sent as webhook-id. */
  readonly id: string
  readonly eventType: string
  /** When the event happened. */
  readonly createdAt: string
  readonly status: DeliveryStatus
  /** When a pending delivery is tried next; null otherwise. */
  readonly nextAttemptAt: string | null
  readonly attempts: readonly WebhookAttempt[]
}
