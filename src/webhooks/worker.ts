/**
 * WebhookWorker sends the outbox: every WEBHOOK_POLL_MS (or at once when nudged) it takes the
 * deliveries dropped past an account's cap (a read of an index of nothing, when none were),
 * asks the store whether a delivery is due, claims up to WEBHOOK_CONCURRENCY under a lease, sends
 * them at once, and records each attempt. Every node runs one; the store's claims keep them
 * from sending the same delivery, and a node that dies mid-send leaves its claims to come due
 * again when their lease runs out. A failed attempt is retried with exponential backoff and
 * jitter until WEBHOOK_RETRY_SECONDS after the event (or the re-send), then marked failed.
 */
import type { Config } from '../config/config.ts'
import type { Keyring } from '../crypto/keyring.ts'
import type { ClaimedDelivery, WebhookStore } from '../storage/ports.ts'
import { VERSION } from '../version.ts'
import { openSecret } from './secret.ts'
import { send, type SendOptions } from './send.ts'
import { signature } from './sign.ts'
import { Poller } from '../ops/poller.ts'
import { begin, type OpenSpan } from '../tracing/tracing.ts'

export type DeliveryOutcome = 'delivered' | 'retry' | 'failed'

export interface WorkerOptions {
  readonly store: WebhookStore
  /** Opens endpoints' signing secrets. */
  readonly keyring: Keyring
  readonly config: Pick<
    Config,
    | 'webhookTimeoutMs'
    | 'webhookRetrySeconds'
    | 'webhookBackoffMs'
    | 'webhookBackoffMaxMs'
    | 'webhookPollMs'
    | 'webhookConcurrency'
    | 'webhookAllowPrivate'
    | 'webhookLogDays'
  >
  /** Faults of no request (the store away): logged, and the worker tries again at the next poll. */
  readonly onError: (error: Error, what: string) => void
  readonly onOutcome?: (outcome: DeliveryOutcome) => void
  /**
   * onDropped: deliveries of an account's events not written past WEBHOOK_PENDING_PER_ACCOUNT, as this node took them
   * (each taken by one node); `note` is what was dropped since the account's last note, at most once an hour per
   * account on this node, else null.
   */
  readonly onDropped?: (accountId: string, deliveries: number, note: number | null) => void
  /** The clock (epoch ms): audit events are dated by the real one, so this is it but in tests of the schedule. */
  readonly now?: () => number
  readonly random?: () => number
  readonly send?: Pick<SendOptions, 'ca' | 'lookup'>
}

/** How often finished deliveries past WEBHOOK_LOG_DAYS are pruned. */
const PRUNE_MS = 3_600_000
/** How often an account's dropped deliveries are noted (logged) at most. */
const NOTE_MS = 3_600_000

/** backoffMs: the delay after the `tries`-th failure, between half and all of base·2^(tries−1), capped. */
export function backoffMs(tries: number, baseMs: number, maxMs: number, random: () => number = Math.random): number {
  const full = Math.min(maxMs, baseMs * 2 ** Math.min(tries - 1, 40))
  return Math.round(full / 2 + random() * (full / 2))
}

export class WebhookWorker {
  readonly #o: WorkerOptions
  readonly #now: () => number
  readonly #poller: Poller
  #lastPrune = 0
  /** Per account with drops: when they were last noted, and how many were dropped since. */
  readonly #notes = new Map<string, { at: number; since: number }>()

  constructor(options: WorkerOptions) {
    this.#o = options
    this.#now = options.now ?? Date.now
    this.#poller = new Poller(() => this.#run(), options.config.webhookPollMs)
  }

  start(): void {
    this.#poller.start()
  }

  /** nudge: work may be due (a re-send); look now rather than at the next poll. Never required. */
  nudge(): void {
    this.#poller.nudge()
  }

  /** close stops polling and waits for the deliveries under way (each bounded by WEBHOOK_TIMEOUT_MS). */
  close(): Promise<void> {
    return this.#poller.close()
  }

  async #run(): Promise<void> {
    const { store, config } = this.#o
    try {
      const now = this.#now()
      if (now - this.#lastPrune >= PRUNE_MS) {
        this.#lastPrune = now
        await store.prune(now - config.webhookLogDays * 86_400_000)
      }
      if (this.#o.onDropped !== undefined) await this.#takeDrops(now, this.#o.onDropped)
      if (!(await store.due(now))) return
      // Past the deadline of every attempt it holds, with room for the finish to be written.
      const claimed = await store.claim(config.webhookConcurrency, now, config.webhookTimeoutMs * 2 + 5000)
      await Promise.all(claimed.map((c) => this.#deliver(c)))
      // A full batch: there may be more due, take it now rather than after a poll.
      if (claimed.length === config.webhookConcurrency) this.#poller.nudge()
    } catch (error) {
      this.#o.onError(error as Error, 'webhooks')
    }
  }

  /** #takeDrops hands on the deliveries dropped since the last take, noting an account's at most once per NOTE_MS. */
  async #takeDrops(now: number, onDropped: NonNullable<WorkerOptions['onDropped']>): Promise<void> {
    const taken = new Map((await this.#o.store.takeDropped()).map((d) => [d.accountId, d.deliveries]))
    // Accounts noted within the hour, with what they dropped since: noted once their hour is over, even with no more drops.
    for (const accountId of new Set([...taken.keys(), ...this.#notes.keys()])) {
      const deliveries = taken.get(accountId) ?? 0
      const n = this.#notes.get(accountId) ?? { at: -Infinity, since: 0 }
      n.since += deliveries
      const due = now - n.at >= NOTE_MS
      if (deliveries > 0 || (due && n.since > 0)) onDropped(accountId, deliveries, due ? n.since : null)
      if (due && n.since === 0) this.#notes.delete(accountId)
      else this.#notes.set(accountId, due ? { at: now, since: 0 } : n)
    }
  }

  async #deliver(c: ClaimedDelivery): Promise<void> {
    // The attempt's span, in the trace of the event's cause (a request, a job's run); its traceparent goes to the receiver.
    const span = begin(
      'webhook.attempt',
      { 'tessera.account.id': c.accountId, 'tessera.webhook.endpoint.id': c.endpointId, 'tessera.webhook.event': c.eventType, 'tessera.attempt': c.tries + 1 },
      c.traceParent ?? undefined,
    )
    let failed: unknown
    try {
      // An attempt the receiver did not take (no answer, not 2xx) is an error span too: error.type says which.
      const error = await span.within(() => this.#attempt(c, span))
      if (error !== null) failed = { code: error }
    } catch (error) {
      failed = error
      throw error
    } finally {
      span.end(failed)
    }
  }

  /** #attempt sends the delivery once and writes its outcome; null when the receiver took it, else why not (for the span). */
  async #attempt(c: ClaimedDelivery, span: OpenSpan): Promise<string | null> {
    const { config } = this.#o
    const started = this.#now()
    let sent: { statusCode: number | null; error: string | null }
    try {
      const secret = await openSecret(this.#o.keyring, c.sealedSecret, { accountId: c.accountId, endpointId: c.endpointId })
      const body = JSON.stringify({ type: c.eventType, timestamp: c.at, data: c.data })
      // The attempt's own time (the receiver checks its freshness); the event's time is in the payload.
      const timestamp = Math.floor(Date.now() / 1000)
      sent = await send(
        c.url,
        {
          'content-type': 'application/json',
          'user-agent': `tessera-webhooks/${VERSION}`,
          'webhook-id': c.messageId,
          'webhook-timestamp': String(timestamp),
          'webhook-signature': signature(secret, c.messageId, timestamp, body),
          ...(span.traceparent === '' ? {} : { traceparent: span.traceparent }),
        },
        body,
        { timeoutMs: config.webhookTimeoutMs, allowPrivate: config.webhookAllowPrivate, ...this.#o.send },
      )
    } catch (error) {
      this.#o.onError(error as Error, 'webhook delivery')
      sent = { statusCode: null, error: (error as Error).name === 'SealedSecretError' ? "the endpoint's secret does not open" : 'internal error' }
    }
    const at = this.#now()
    const windowEnds = c.sinceMs + config.webhookRetrySeconds * 1000
    const outcome: DeliveryOutcome = sent.error === null ? 'delivered' : at >= windowEnds ? 'failed' : 'retry'
    const nextAtMs =
      outcome === 'retry' ? Math.min(at + backoffMs(c.tries + 1, config.webhookBackoffMs, config.webhookBackoffMaxMs, this.#o.random), windowEnds) : at
    await this.#o.store.finish({
      endpointId: c.endpointId,
      messageId: c.messageId,
      lease: c.lease,
      attempt: { atMs: at, statusCode: sent.statusCode, durationMs: at - started, error: sent.error },
      outcome,
      nextAtMs,
    })
    span.set({ 'http.response.status_code': sent.statusCode ?? undefined, 'tessera.outcome': outcome })
    this.#o.onOutcome?.(outcome)
    return sent.error === null ? null : sent.statusCode === null ? 'no answer' : 'not 2xx'
  }
}
