/**
 * Limits admits an authenticated call under its account's plan, after the gateway has let
 * it through (a refused key never counts against anyone's plan, though its refusal is told to
 * its account): the shared limiter (Redis) when
 * there is one, this node's otherwise and while Redis is unreachable. Admitted calls are
 * counted for usage and answer with the IETF draft RateLimit-Policy and RateLimit headers;
 * refused ones get 429 with Retry-After and consume nothing.
 */
import type { FastifyReply } from 'fastify'
import type { Log } from '../logging/late.ts'
import type { Config } from '../config/config.ts'
import type { KeyGrant, Plan } from '../domain/accounts.ts'
import type { LimitDecision, RefusalReason } from '../domain/usage.ts'
import type { Store } from '../storage/ports.ts'
import { UnavailableError } from '../domain/errors.ts'
import { apiError, type ApiError } from '../errors/errors.ts'
import { LocalLimiter } from './local.ts'
import { UsageRecorder } from './recorder.ts'
import { quotaWindow, utcDay } from './windows.ts'
import { defaultPlan } from '../services/accounts.ts'
import type { Group } from '../domain/regions.ts'

export interface LimitsOptions {
  readonly config: Config
  readonly store: Store
  readonly now: () => number
  readonly log: Log
  /** Told of each call refused by the plan (the metrics' refusal causes). */
  readonly onRefused?: (cause: 'throttled' | 'over quota') => void
  /** Told of each save of the usage counts that had counts to save: whether it succeeded (the metrics). */
  readonly onFlushed?: (ok: boolean) => void
}

const seconds = (ms: number) => Math.max(1, Math.ceil(ms / 1000))

export class Limits {
  readonly #defaultPlan: Plan
  readonly #store: Store
  readonly #onRefused: (cause: 'throttled' | 'over quota') => void
  readonly #now: () => number
  readonly #log: Log
  readonly #local: LocalLimiter
  readonly #recorder: UsageRecorder
  /** The RateLimit-Policy header of each plan, until its quota window ends (a month's length changes). */
  readonly #policies = new WeakMap<Plan, { readonly header: string; readonly until: number }>()
  readonly #timer: NodeJS.Timeout
  #fallback = false

  constructor(opts: LimitsOptions) {
    const { config } = opts
    this.#defaultPlan = defaultPlan(config)
    this.#store = opts.store
    this.#now = opts.now
    this.#log = opts.log
    this.#onRefused = opts.onRefused ?? (() => undefined)
    this.#local = new LocalLimiter(opts.now)
    this.#recorder = new UsageRecorder(opts.store.usage, opts.store.access, config.region, opts.now)
    const onFlushed = opts.onFlushed ?? (() => undefined)
    this.#timer = setInterval(() => {
      this.#recorder.flush().then(
        (rows) => {
          if (rows > 0) onFlushed(true)
        },
        (error: Error) => {
          onFlushed(false)
          this.#log.warn({ err: error }, 'usage counts not saved yet; will retry')
        },
      )
    }, config.usageFlushMs).unref()
  }

  /**
   * admit decides on one call: `done()` when admitted (headers set), `done(error)` with the
   * 429 when not. A decision in process is synchronous; the shared one takes a round trip.
   * A `free` call costs no quota units (it is counted, and throttled, all the same).
   */
  admit(grant: KeyGrant, group: Group, reply: FastifyReply, done: (error?: Error) => void, free = false): void {
    const plan = grant.plan ?? this.#defaultPlan
    const cost = free ? 0 : plan.weights[group]
    if (plan.rate === 0 && plan.quota === 0) {
      this.#recorder.count(grant.accountId, grant.keyId, group, cost)
      done()
      return
    }
    const finish = (decision: LimitDecision) => {
      const refused = this.#apply(decision, plan, reply)
      if (refused) {
        if (!decision.admitted) this.#recorder.refuse(grant.accountId, grant.keyId, group, decision.reason === 'quota' ? 'over quota' : 'throttled')
        done(refused)
        return
      }
      this.#recorder.count(grant.accountId, grant.keyId, group, cost)
      done()
    }
    const shared = this.#store.sharedLimiter
    if (shared === null) {
      const now = this.#local.takeNow(grant.accountId, plan, cost)
      if (now !== null) finish(now)
      else this.#local.take(grant.accountId, plan, cost, this.#seed(grant.accountId)).then(finish, done)
      return
    }
    shared.take(grant.accountId, plan, cost, this.#seed(grant.accountId)).then(
      (decision) => {
        if (this.#fallback) {
          this.#fallback = false
          this.#log.info('shared limits are back: throttle and quota hold across nodes again')
        }
        finish(decision)
      },
      (error: unknown) => {
        if (!(error instanceof UnavailableError)) return done(error as Error)
        if (!this.#fallback) {
          this.#fallback = true
          this.#log.warn({ err: error }, 'Redis unreachable: throttle and quota fall back to per-node limits until it is back')
        }
        this.#local.take(grant.accountId, plan, cost, this.#seed(grant.accountId)).then(finish, done)
      },
    )
  }

  /** refused counts a call of a known key that the gateway refused (for the account's overview). */
  refused(grant: KeyGrant, group: Group, reason: RefusalReason): void {
    this.#recorder.refuse(grant.accountId, grant.keyId, group, reason)
  }

  /** The quota already used in a window: the store's counts plus this node's unsaved ones. */
  #seed(accountId: string) {
    return async (start: number, end: number): Promise<number> => {
      const from = utcDay(start)
      const to = utcDay(end - 1)
      try {
        return (await this.#store.usage.total(accountId, from, to)) + this.#recorder.pending(accountId, from, to)
      } catch (error) {
        this.#log.warn({ err: error }, "usage counts unreadable: the quota window starts from this node's own counts")
        return this.#recorder.pending(accountId, from, to)
      }
    }
  }

  /** policy is the RateLimit-Policy header of a plan, made once per plan (and quota window). */
  #policy(plan: Plan): string {
    const now = this.#now()
    const cached = this.#policies.get(plan)
    if (cached !== undefined && now < cached.until) return cached.header
    const policies: string[] = []
    if (plan.rate > 0) policies.push(`"burst";q=${plan.burst};w=${seconds((plan.burst * 1000) / plan.rate)}`)
    let until = Infinity
    if (plan.quota > 0) {
      const w = quotaWindow(now, plan.period)
      policies.push(`"${plan.period}";q=${plan.quota};w=${Math.round((w.end - w.start) / 1000)}`)
      until = w.end
    }
    const header = policies.join(', ')
    this.#policies.set(plan, { header, until })
    return header
  }

  /** apply sets the headers of a decision; it returns the 429 to answer, if any. */
  #apply(decision: LimitDecision, plan: Plan, reply: FastifyReply): ApiError | null {
    reply.header('ratelimit-policy', this.#policy(plan))
    if (!decision.admitted) {
      const retry = String(seconds(decision.retryAfterMs))
      this.#onRefused(decision.reason === 'quota' ? 'over quota' : 'throttled')
      return decision.reason === 'quota' ? apiError('QUOTA_EXCEEDED', {}, { 'retry-after': retry }) : apiError('THROTTLED', {}, { 'retry-after': retry })
    }
    const left: string[] = []
    if (plan.rate > 0) left.push(`"burst";r=${decision.tokens};t=${Math.ceil(decision.refillMs / 1000)}`)
    if (plan.quota > 0) left.push(`"${plan.period}";r=${decision.left};t=${Math.ceil(decision.windowEndsMs / 1000)}`)
    reply.header('ratelimit', left.join(', '))
    return null
  }

  /** usageLagMs: how long the oldest count not yet saved has waited (0 when none waits). */
  usageLagMs(): number {
    return this.#recorder.lagMs()
  }

  /** close stops the timer and saves the last counts. */
  async close(): Promise<void> {
    clearInterval(this.#timer)
    try {
      await this.#recorder.flush()
    } catch (error) {
      this.#log.error({ err: error }, 'usage counts of this node could not be saved at shutdown')
    }
  }
}
