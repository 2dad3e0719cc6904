/**
 * The webhooks service: an account's endpoints and their delivery logs, for every door (the
 * admin API, the portal). Each change takes an actor and writes its audit event (target
 * `webhook`) with the change, as the accounts service does; expected refusals are `Failure`s.
 * The secret is made here, sealed before it reaches the store, and returned once.
 */
import type { Config } from '../config/config.ts'
import type { Keyring } from '../crypto/keyring.ts'
import { draft, fail, isFailure, type Context, type Failure } from './outcome.ts'
import type { AuditDraft } from '../domain/accounts.ts'
import { EVENT_TYPES, isEventType } from '../domain/events.ts'
import type { Page } from '../domain/lists.ts'
import type { Store } from '../storage/ports.ts'
import type { WebhookDelivery, WebhookEndpoint } from '../domain/webhooks.ts'
import { newId } from '../domain/ids.ts'
import { checkEndpointUrl, refusalText } from '../webhooks/address.ts'
import { newWebhookSecret, sealSecret } from '../webhooks/secret.ts'

export interface WebhookInput {
  readonly url?: unknown
  /** Absent or null: every event type. */
  readonly eventTypes?: unknown
}

export interface WebhooksOptions {
  readonly store: Store
  /** Seals endpoints' signing secrets. */
  readonly keyring: Keyring
  readonly config: Pick<Config, 'webhookAllowPrivate' | 'webhookMaxEndpoints' | 'webhookDeletedKeptPerAccount' | 'nodeEnv'>
  /** Called after a change that makes a delivery due (a re-send), so that this node's worker looks at once. */
  readonly onDue?: () => void
  /** The clock (epoch ms); tests move it. */
  readonly now?: () => number
}

export { isFailure }

export class Webhooks {
  readonly #o: WebhooksOptions
  readonly #now: () => number

  constructor(options: WebhooksOptions) {
    this.#o = options
    this.#now = options.now ?? Date.now
  }

  #draft(ctx: Context, action: string, id: string, accountId: string, detail: Record<string, unknown> = {}): AuditDraft {
    return draft(ctx, action, { type: 'webhook', id }, accountId, detail)
  }

  async #account(accountId: string): Promise<Failure | null> {
    return (await this.#o.store.access.getAccount(accountId)) === null ? fail('not_found', `no account ${accountId}`) : null
  }

  /** create adds an endpoint and returns it with its secret, which is never shown again. */
  async create(ctx: Context, accountId: string, input: WebhookInput): Promise<{ endpoint: WebhookEndpoint; secret: string } | Failure> {
    const missing = await this.#account(accountId)
    if (missing) return missing
    if (typeof input.url !== 'string' || input.url.trim() === '') return fail('invalid', 'url is required', 'url')
    const checked = checkEndpointUrl(input.url.trim(), this.#o.config.webhookAllowPrivate)
    if ('reason' in checked) return fail('invalid', `url ${refusalText(checked, this.#o.config.nodeEnv)}`, 'url')
    const types = readEventTypes(input.eventTypes)
    if (isFailure(types)) return types
    const endpoint: WebhookEndpoint = {
      id: newId('whe'),
      accountId,
      url: checked.url,
      eventTypes: types,
      createdAt: new Date(this.#now()).toISOString(),
    }
    const secret = newWebhookSecret()
    const sealedSecret = await sealSecret(this.#o.keyring, secret, { accountId, endpointId: endpoint.id })
    const max = this.#o.config.webhookMaxEndpoints
    const made = await this.#o.store.webhooks.createEndpoint(
      { ...endpoint, sealedSecret },
      max,
      this.#draft(ctx, 'webhook.create', endpoint.id, accountId, { url: endpoint.url, eventTypes: endpoint.eventTypes }),
    )
    if (!made) return fail('limit', `the account has ${max} webhook endpoints, the most it may have: delete one first`)
    return { endpoint, secret }
  }

  /** limit: the most webhook endpoints an account may have. */
  get limit(): number {
    return this.#o.config.webhookMaxEndpoints
  }

  async list(accountId: string): Promise<WebhookEndpoint[] | Failure> {
    return (await this.#account(accountId)) ?? this.#o.store.webhooks.listEndpoints(accountId)
  }

  /**
   * remove deletes an endpoint; in the same step the account's deleted endpoints past
   * WEBHOOK_DELETED_KEPT_PER_ACCOUNT go for good with their deliveries (their events stay).
   */
  async remove(ctx: Context, accountId: string, id: string): Promise<{ deleted: true } | Failure> {
    const missing = await this.#account(accountId)
    if (missing) return missing
    const kept = this.#o.config.webhookDeletedKeptPerAccount
    const deleted = await this.#o.store.webhooks.deleteEndpoint(accountId, id, this.#draft(ctx, 'webhook.delete', id, accountId), kept)
    return deleted ? { deleted: true } : fail('not_found', `no webhook ${id} in account ${accountId}`)
  }

  async deliveries(accountId: string, id: string, query: { readonly cursor?: string; readonly limit: number }): Promise<Page<WebhookDelivery> | Failure> {
    const missing = await this.#account(accountId)
    if (missing) return missing
    if ((await this.#o.store.webhooks.getEndpoint(accountId, id)) === null) return fail('not_found', `no webhook ${id} in account ${accountId}`)
    return this.#o.store.webhooks.listDeliveries(id, query)
  }

  /** resend makes a delivery due now, with a fresh retry window. */
  async resend(ctx: Context, accountId: string, id: string, deliveryId: string): Promise<{ resent: true } | Failure> {
    const missing = await this.#account(accountId)
    if (missing) return missing
    if ((await this.#o.store.webhooks.getEndpoint(accountId, id)) === null) return fail('not_found', `no webhook ${id} in account ${accountId}`)
    // The real clock, as the audit events that start deliveries are dated by it (a test's moved clock is not the workers').
    const resent = await this.#o.store.webhooks.resend(id, deliveryId, this.#now(), this.#draft(ctx, 'webhook.resend', id, accountId, { deliveryId }))
    if (!resent) return fail('not_found', `no delivery ${deliveryId} of webhook ${id}`)
    this.#o.onDue?.()
    return { resent: true }
  }

  /** endpoint: one endpoint of the account (never its secret), or null when the account has none of that id. */
  endpoint(accountId: string, id: string): Promise<WebhookEndpoint | null> {
    return this.#o.store.webhooks.getEndpoint(accountId, id)
  }
}

/** readEventTypes: a list of distinct event types (null: all), or why not. */
function readEventTypes(value: unknown): readonly string[] | null | Failure {
  if (value === undefined || value === null) return null
  const bad = fail('invalid', `eventTypes must be a list of distinct event types: ${EVENT_TYPES.join(', ')}`, 'eventTypes')
  if (!Array.isArray(value) || value.length === 0) return bad
  if (!value.every((t) => typeof t === 'string' && isEventType(t)) || new Set(value).size !== value.length) return bad
  return [...(value as string[])].sort()
}
