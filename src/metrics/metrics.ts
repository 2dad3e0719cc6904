/**
 * The service's Prometheus metrics (prom-client), made once per process with their own
 * registry: names in Prometheus style with their units (`_seconds`, `_bytes`, `_total`), label
 * values from closed sets only (a route's pattern, never its path; a refusal's cause; an
 * outcome; a store operation's name), so that no key, secret, user or account name can reach
 * a label. Account IDs appear only where the operator asks for them (METRICS_PER_ACCOUNT).
 *
 * The hot path (every request, every store call, every key-cache lookup) costs a map lookup
 * and a few additions on plain numbers (see PlainHistogram); prom-client's own metrics are
 * used where a call is rare (refusals, conversions, sign-ins), and gauges are read when
 * Prometheus scrapes (queue depth, workers, pool connections, dependencies).
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client'
import type { JobGauges } from '../storage/ports.ts'
import { VERSION } from '../version.ts'
import type { StoreGauges } from '../storage/ports.ts'

/**
 * Buckets that resolve a 200 µs getOTP and a 30 s conversion alike: 100 µs to 60 s, about
 * three to a decade.
 */
export const DURATION_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]

/** Why the gateway refused a call (the client is told none of them: one 403 for all, 429 for the plan). */
export type RefusalCause = 'missing' | 'unknown' | 'revoked' | 'expired' | 'suspended' | 'not subscribed' | 'out of scope' | 'throttled' | 'over quota'
export const REFUSAL_CAUSES: readonly RefusalCause[] = [
  'missing',
  'unknown',
  'revoked',
  'expired',
  'suspended',
  'not subscribed',
  'out of scope',
  'throttled',
  'over quota',
]

/** What one webhook attempt came to: delivered (a 2xx), to be retried, or given up (the retry window over). */
export type WebhookOutcome = 'delivered' | 'retry' | 'failed'
export const WEBHOOK_OUTCOMES: readonly WebhookOutcome[] = ['delivered', 'retry', 'failed']

export type VerificationOutcome = 'accepted' | 'invalid' | 'reused' | 'locked'
export const VERIFICATION_OUTCOMES: readonly VerificationOutcome[] = ['accepted', 'invalid', 'reused', 'locked']

/** How a conversion ended: its answer (ok, the document refused) or why there was none. */
export type ConversionOutcome = 'ok' | 'refused' | 'queue full' | 'account busy' | 'timeout' | 'failed' | 'cancelled' | 'unavailable'
export const CONVERSION_OUTCOMES: readonly ConversionOutcome[] = [
  'ok',
  'refused',
  'queue full',
  'account busy',
  'timeout',
  'failed',
  'cancelled',
  'unavailable',
]
export const CONVERSION_ROUTES = [
  '/converter/generateImage',
  '/converter/generatePostscript',
  '/converter/extractText',
  '/converter/compress',
  '/converter/merge',
  '/converter/split',
  '/converter/rotate',
  '/converter/flatten',
] as const
export type ConversionRoute = (typeof CONVERSION_ROUTES)[number]

/**
 * Why a conversion worker was replaced: its job ran out of time, it reached its job count, its
 * memory grew (routine: WebAssembly memory never shrinks), its job ran out of memory, its
 * engine trapped or stopped, it died, its client cancelled or stalled.
 */
export type ReplacementReason = 'timeout' | 'job count' | 'grown' | 'memory' | 'trap' | 'death' | 'cancelled' | 'stalled'
export const REPLACEMENT_REASONS: readonly ReplacementReason[] = ['timeout', 'job count', 'grown', 'memory', 'trap', 'death', 'cancelled', 'stalled']

/**
 * How a portal sign-in attempt ended: signed in; a wrong email or password; refused by the
 * throttle; the password right and a second factor asked (its own outcome follows: `ok`, or
 * `wrong second factor`); the address not confirmed; awaiting an operator's approval; disabled;
 * a right password of a user who must use single sign-on (`sso only`); a single sign-on callback refused (`sso refused`;
 * one that succeeds counts as `ok` or `second factor`).
 */
export type SignInOutcome =
  | 'ok'
  | 'wrong'
  | 'throttled'
  | 'second factor'
  | 'wrong second factor'
  | 'unconfirmed'
  | 'pending'
  | 'disabled'
  | 'sso only'
  | 'sso refused'
export const SIGN_IN_OUTCOMES: readonly SignInOutcome[] = [
  'ok',
  'wrong',
  'throttled',
  'second factor',
  'wrong second factor',
  'unconfirmed',
  'pending',
  'disabled',
  'sso only',
  'sso refused',
]

/** The conversion pool as a scrape sees it. */
export interface PoolGauges {
  readonly queued: number
  readonly capacity: number
  readonly alive: number
  readonly busy: number
  readonly size: number
  /** Bytes of pages and PostScript the main thread holds: arrived from the workers and not yet copied out or released. */
  readonly heldBytes: number
}

type Sample = { metricName: string; labels: Record<string, string | number>; value: number }

/**
 * PlainHistogram: a histogram (and its counter, when named) whose series are plain numbers,
 * turned into samples only when Prometheus scrapes. prom-client's labelled children hash their
 * label object at every observation (sorting its keys into a string): on GET /totp/ping that
 * alone took 16% of the throughput (bench/ab.ts). Label sets are closed (routes, operations),
 * so the map is bounded.
 */
interface Series<L extends string> {
  readonly labels: Readonly<Record<L, string>>
  count: number
  sum: number
  readonly buckets: Float64Array
}

class PlainHistogram<L extends string> {
  readonly #series = new Map<string, Series<L>>()
  readonly #buckets: readonly number[]

  constructor(buckets: readonly number[]) {
    this.#buckets = buckets
  }

  /** series gives the series of `key`, made with `labels` if there is none: a caller may keep it and `add` to it. */
  series(key: string, labels: Record<L, string>): Series<L> {
    let one = this.#series.get(key)
    if (one === undefined) {
      one = { labels, count: 0, sum: 0, buckets: new Float64Array(this.#buckets.length) }
      this.#series.set(key, one)
    }
    return one
  }

  /** add adds one observation to a series this histogram gave. */
  add(one: Series<L>, seconds: number): void {
    one.count++
    one.sum += seconds
    // The first bucket that holds it (above the last: only +Inf, which is the count). Not cumulative: summed at scrape.
    for (let i = 0; i < this.#buckets.length; i++) {
      if (seconds <= this.#buckets[i]!) {
        one.buckets[i]!++
        break
      }
    }
  }

  /** collectors: the histogram named `name`, and a counter of the same observations when `counterName` is given. */
  collectors(name: string, help: string, counter?: { name: string; help: string }): object[] {
    const series = this.#series
    const buckets = this.#buckets
    const histogram = {
      name,
      help,
      type: 'histogram',
      aggregator: 'sum',
      reset: () => undefined,
      get: async () => {
        const values: Sample[] = []
        for (const s of series.values()) {
          let cumulative = 0
          buckets.forEach((le, i) => {
            cumulative += s.buckets[i]!
            values.push({ metricName: `${name}_bucket`, labels: { ...s.labels, le }, value: cumulative })
          })
          values.push({ metricName: `${name}_bucket`, labels: { ...s.labels, le: '+Inf' }, value: s.count })
          values.push({ metricName: `${name}_sum`, labels: s.labels, value: s.sum })
          values.push({ metricName: `${name}_count`, labels: s.labels, value: s.count })
        }
        return { ...histogram, values }
      },
    }
    if (counter === undefined) return [histogram]
    const total = {
      name: counter.name,
      help: counter.help,
      type: 'counter',
      aggregator: 'sum',
      reset: () => undefined,
      get: async () => ({ ...total, values: [...series.values()].map((s): Sample => ({ metricName: counter.name, labels: s.labels, value: s.count })) }),
    }
    return [total, histogram]
  }
}

/** A counter kept as a plain number (for the hot path), read at scrape. */
function plainCounter(name: string, help: string, read: () => number): object {
  const metric = {
    name,
    help,
    type: 'counter',
    aggregator: 'sum',
    reset: () => undefined,
    get: async () => ({ ...metric, values: [{ metricName: name, labels: {}, value: read() }] }),
  }
  return metric
}

export interface Metrics {
  readonly registry: Registry
  /** Whether account IDs label the per-account series (METRICS_PER_ACCOUNT). */
  readonly perAccount: boolean
  /** observeRequest counts one answered request; `route` is the route's pattern (or 'unmatched'). */
  observeRequest(route: string, method: string, status: number, seconds: number): void
  /** accountRequest counts a call an account made (only with METRICS_PER_ACCOUNT; a no-op otherwise). */
  accountRequest(accountId: string, group: string, status: number): void
  refused(cause: RefusalCause): void
  keyCache(hit: boolean): void
  verified(outcome: VerificationOutcome): void
  /** A secret became locked (its failure count reached the threshold). */
  lockoutStarted(): void
  /** An attempt of a managed factor's user was refused by the attempt limits (per user or rate limit key), untried. */
  attemptsLimited(): void
  conversion(route: ConversionRoute, outcome: ConversionOutcome, done?: { pages: number; outputBytes: number; engineSeconds: number }): void
  queueWaited(seconds: number): void
  workerReplaced(reason: ReplacementReason): void
  /** storeOperation gives the recorder of one store operation's calls (made once per operation, called per call). */
  storeOperation(adapter: string, operation: string): (seconds: number, failed: boolean) => void
  usageFlushed(ok: boolean): void
  signIn(outcome: SignInOutcome): void
  signUp(): void
  email(sent: boolean): void
  /** The conversion pool's gauges, read at each scrape (the last one given wins). */
  watchPool(read: () => PoolGauges): void
  /** The store's connection gauges, read at each scrape. */
  watchStore(read: () => StoreGauges): void
  /** Each dependency's health (1 up, 0 down), asked at each scrape. */
  watchDependencies(read: () => Promise<Record<string, boolean>>): void
  /** Seconds since the oldest usage count still waiting to be saved (0 when none waits). */
  watchUsageLag(read: () => number): void
  /** One webhook attempt's outcome. */
  webhookAttempt(outcome: WebhookOutcome): void
  /** Webhook deliveries not yet delivered nor given up (every node's), counted at each scrape. */
  watchWebhooks(read: () => Promise<number>): void
  /** Webhook deliveries not written because their account had WEBHOOK_PENDING_PER_ACCOUNT pending (counted by the node that took them). */
  webhookDropped(deliveries: number): void
  /** A conversion job ended on this node: how, and how long it ran (from its start to its end). */
  jobEnded(status: JobEndStatus, seconds: number): void
  /** This node claimed a job whose node's lease had run out (the node died or stalled). */
  jobLeaseExpired(): void
  /** Jobs failed after JOB_MAX_ATTEMPTS claims (their conversions kill what runs them). */
  jobsPoisoned(count: number): void
  /** Every node's jobs as the store counts them, read at each scrape. */
  watchJobs(read: () => Promise<JobGauges>): void
}

export type JobEndStatus = 'succeeded' | 'failed' | 'cancelled' | 'released'
const JOB_END_STATUSES: readonly JobEndStatus[] = ['succeeded', 'failed', 'cancelled', 'released']

export interface MetricsOptions {
  readonly region: string
  /** Label per-account series with account IDs (they multiply series: off by default). */
  readonly perAccount?: boolean
}

/** What each section of the metrics registers with: the registry, and a counter's child made at 0. */
interface Section {
  readonly registers: Registry[]
  readonly register: (metric: object) => void
  readonly zero: <T extends { inc(n: number): void }>(child: T) => T
}

/** Requests: plain numbers (the hot path), and per account where the operator asked. */
function requestMetrics({ registers, register }: Section, perAccount: boolean): Pick<Metrics, 'observeRequest' | 'accountRequest'> {
  const requests = new PlainHistogram<'route' | 'method' | 'status'>(DURATION_BUCKETS)
  for (const metric of requests.collectors(
    'tessera_http_request_duration_seconds',
    "Time from a request's arrival to its answer, by route pattern, method and status.",
    { name: 'tessera_http_requests_total', help: 'HTTP requests answered, by route pattern, method and status.' },
  ))
    register(metric)
  const accountRequests = perAccount
    ? new Counter({
        name: 'tessera_account_requests_total',
        help: 'Calls by account ID, group and status class (METRICS_PER_ACCOUNT).',
        labelNames: ['account_id', 'group', 'status_class'] as const,
        registers,
      })
    : null

  // Each series found by route, method and status in turn: every request, without joining its labels into a new string.
  const byRoute = new Map<string, Map<string, Map<number, Series<'route' | 'method' | 'status'>>>>()
  return {
    observeRequest(route, method, status, seconds) {
      let byMethod = byRoute.get(route)
      if (byMethod === undefined) {
        byMethod = new Map()
        byRoute.set(route, byMethod)
      }
      let byStatus = byMethod.get(method)
      if (byStatus === undefined) {
        byStatus = new Map()
        byMethod.set(method, byStatus)
      }
      let series = byStatus.get(status)
      if (series === undefined) {
        series = requests.series(`${status}${method}${route}`, { route, method, status: String(status) })
        byStatus.set(status, series)
      }
      requests.add(series, seconds)
    },
    accountRequest(accountId, group, status) {
      accountRequests?.inc({ account_id: accountId, group, status_class: `${Math.floor(status / 100)}xx` })
    },
  }
}

/** The gateway: refusals by cause, the key cache. */
function gatewayMetrics({ registers, register, zero }: Section): Pick<Metrics, 'refused' | 'keyCache'> {
  const refusals = new Counter({
    name: 'tessera_gateway_refusals_total',
    help: 'Calls the gateway refused, by cause (clients see one 403, or 429 for the plan).',
    labelNames: ['cause'] as const,
    registers,
  })
  const refusalChildren = new Map(REFUSAL_CAUSES.map((cause) => [cause, zero(refusals.labels({ cause }))]))
  let cacheHits = 0
  let cacheMisses = 0
  register(plainCounter('tessera_key_cache_hits_total', 'Key lookups the gateway answered from its cache.', () => cacheHits))
  register(plainCounter('tessera_key_cache_misses_total', 'Key lookups that went to the store.', () => cacheMisses))

  return {
    refused(cause) {
      refusalChildren.get(cause)!.inc()
    },
    keyCache(hit) {
      if (hit) cacheHits++
      else cacheMisses++
    },
  }
}

/** TOTP verifications and lockouts. */
function totpMetrics({ registers, zero }: Section): Pick<Metrics, 'verified' | 'lockoutStarted' | 'attemptsLimited'> {
  const verifications = new Counter({
    name: 'tessera_otp_verifications_total',
    help: 'verifyOTP outcomes: accepted, invalid, reused, locked.',
    labelNames: ['outcome'] as const,
    registers,
  })
  const verificationChildren = new Map(VERIFICATION_OUTCOMES.map((outcome) => [outcome, zero(verifications.labels({ outcome }))]))
  const lockouts = new Counter({ name: 'tessera_otp_lockouts_total', help: 'Secrets locked after too many failed verifications.', registers })
  const limited = new Counter({
    name: 'tessera_factor_attempts_limited_total',
    help: "Managed factors' attempts refused untried by the attempt limits (per user or rate limit key).",
    registers,
  })

  return {
    verified(outcome) {
      verificationChildren.get(outcome)!.inc()
    },
    lockoutStarted() {
      lockouts.inc()
    },
    attemptsLimited() {
      limited.inc()
    },
  }
}

/** poolGauges registers the conversion pool's gauges, read at each scrape from the pool given to the watch it answers. */
function poolGauges(registers: Section['registers']): Metrics['watchPool'] {
  let pool: (() => PoolGauges) | null = null
  const poolGauge = (name: string, help: string, pick: (g: PoolGauges) => number) =>
    new Gauge({
      name,
      help,
      registers,
      collect() {
        if (pool !== null) this.set(pick(pool()))
      },
    })
  poolGauge('tessera_conversion_queue_depth', 'Conversions waiting for a worker (uploads being read included).', (g) => g.queued)
  poolGauge(
    'tessera_conversion_queue_capacity',
    'Conversions that may wait before the queue refuses more (CONVERTER_WORKERS × CONVERTER_QUEUE_PER_WORKER).',
    (g) => g.capacity,
  )
  poolGauge('tessera_conversion_workers_alive', 'Conversion workers running (started and not retiring).', (g) => g.alive)
  poolGauge('tessera_conversion_workers_busy', 'Conversion workers running a job.', (g) => g.busy)
  poolGauge('tessera_conversion_workers_configured', 'Conversion workers the pool keeps (CONVERTER_WORKERS).', (g) => g.size)
  poolGauge(
    'tessera_conversion_held_bytes',
    'Bytes of rendered pages and PostScript the main thread holds, arrived from the workers and not yet copied out to an answer or a job’s store (KiB-rounded). Back to 0 when no conversion is under way.',
    (g) => g.heldBytes,
  )
  return (read) => {
    pool = read
  }
}

/** Conversions, their pages, output and engine time, the queue and the workers. */
function conversionMetrics({ registers, zero }: Section): Pick<Metrics, 'conversion' | 'queueWaited' | 'workerReplaced' | 'watchPool'> {
  const conversions = new Counter({
    name: 'tessera_conversions_total',
    help: 'Conversions by route and outcome (ok, refused, queue full, account busy, timeout, failed, cancelled, unavailable).',
    labelNames: ['route', 'outcome'] as const,
    registers,
  })
  for (const route of CONVERSION_ROUTES) for (const outcome of CONVERSION_OUTCOMES) zero(conversions.labels({ route, outcome }))
  const pages = new Counter({
    name: 'tessera_conversion_pages_total',
    help: 'Pages rendered by conversions that completed, by route.',
    labelNames: ['route'] as const,
    registers,
  })
  const outputBytes = new Counter({
    name: 'tessera_conversion_output_bytes_total',
    help: 'Bytes of PNG or PostScript produced by conversions that completed, by route.',
    labelNames: ['route'] as const,
    registers,
  })
  for (const route of CONVERSION_ROUTES) {
    zero(pages.labels({ route }))
    zero(outputBytes.labels({ route }))
  }
  const engine = new Histogram({
    name: 'tessera_conversion_engine_seconds',
    help: 'Engine time of each completed conversion (time paused for a slow client left out), by route.',
    labelNames: ['route'] as const,
    buckets: DURATION_BUCKETS,
    registers,
  })
  const wait = new Histogram({
    name: 'tessera_conversion_queue_wait_seconds',
    help: 'Time a conversion waited in the queue for a worker.',
    buckets: DURATION_BUCKETS,
    registers,
  })
  const replacements = new Counter({
    name: 'tessera_conversion_worker_replacements_total',
    help: 'Conversion workers replaced, by reason (timeout, job count, grown, memory, trap, death, cancelled, stalled).',
    labelNames: ['reason'] as const,
    registers,
  })
  const replacementChildren = new Map(REPLACEMENT_REASONS.map((reason) => [reason, zero(replacements.labels({ reason }))]))
  const watchPool = poolGauges(registers)

  return {
    conversion(route, outcome, done) {
      conversions.inc({ route, outcome })
      if (done === undefined) return
      pages.inc({ route }, done.pages)
      outputBytes.inc({ route }, done.outputBytes)
      engine.observe({ route }, done.engineSeconds)
    },
    queueWaited(seconds) {
      wait.observe(seconds)
    },
    workerReplaced(reason) {
      replacementChildren.get(reason)!.inc()
    },
    watchPool,
  }
}

/** connectionGauges registers the PostgreSQL pool's and the Redis connection's gauges, read at each scrape from the store given to the watch it answers. */
function connectionGauges(registers: Section['registers']): Metrics['watchStore'] {
  let storeGauges: (() => StoreGauges) | null = null
  new Gauge({
    name: 'tessera_postgres_pool_connections',
    help: 'PostgreSQL pool connections, by state (in use, idle).',
    labelNames: ['state'] as const,
    registers,
    collect() {
      const p = storeGauges?.().postgresPool
      if (p !== undefined) {
        this.set({ state: 'in use' }, p.inUse)
        this.set({ state: 'idle' }, p.idle)
      }
    },
  })
  new Gauge({
    name: 'tessera_postgres_pool_waiting',
    help: 'Queries waiting for a PostgreSQL pool connection.',
    registers,
    collect() {
      const p = storeGauges?.().postgresPool
      if (p !== undefined) this.set(p.waiting)
    },
  })
  new Gauge({
    name: 'tessera_postgres_pool_max',
    help: "The PostgreSQL pool's size (DATABASE_POOL_SIZE).",
    registers,
    collect() {
      const p = storeGauges?.().postgresPool
      if (p !== undefined) this.set(p.max)
    },
  })
  new Gauge({
    name: 'tessera_redis_connected',
    help: '1 while the Redis connection is ready, 0 otherwise.',
    registers,
    collect() {
      const r = storeGauges?.().redisConnected
      if (r !== undefined) this.set(r ? 1 : 0)
    },
  })
  return (read) => {
    storeGauges = read
  }
}

/** dependencyGauge registers the readiness check's view of each dependency, asked at each scrape through the watch it answers. */
function dependencyGauge(registers: Section['registers']): Metrics['watchDependencies'] {
  let dependencies: (() => Promise<Record<string, boolean>>) | null = null
  new Gauge({
    name: 'tessera_dependency_up',
    help: 'Each dependency (sqlite, postgres, redis) as the readiness check sees it: 1 up, 0 down.',
    labelNames: ['dependency'] as const,
    registers,
    async collect() {
      if (dependencies === null) return
      for (const [dependency, up] of Object.entries(await dependencies())) this.set({ dependency }, up ? 1 : 0)
    },
  })
  return (read) => {
    dependencies = read
  }
}

/** The store: each operation timed, its errors, the pools and the dependencies. */
function storeMetrics({ registers, register }: Section): Pick<Metrics, 'storeOperation' | 'watchStore' | 'watchDependencies'> {
  const operations = new PlainHistogram<'adapter' | 'operation'>(DURATION_BUCKETS)
  for (const metric of operations.collectors(
    'tessera_store_operation_duration_seconds',
    'Time each store operation took, by adapter (sqlite, postgres, redis) and operation.',
  ))
    register(metric)
  const operationErrors = new Counter({
    name: 'tessera_store_operation_errors_total',
    help: 'Store operations that failed (the dependency unreachable, timed out, or the statement refused), by adapter and operation.',
    labelNames: ['adapter', 'operation'] as const,
    registers,
  })
  const watchStore = connectionGauges(registers)
  const watchDependencies = dependencyGauge(registers)
  return {
    storeOperation(adapter, operation) {
      const key = `${adapter}.${operation}`
      const errors = operationErrors.labels({ adapter, operation })
      // Made at the first call: an operation never called has no series.
      let series: Series<'adapter' | 'operation'> | undefined
      return (seconds, failed) => {
        series ??= operations.series(key, { adapter, operation })
        operations.add(series, seconds)
        if (failed) errors.inc()
      }
    },
    watchStore,
    watchDependencies,
  }
}

/** The usage counts' saves and their lag. */
function usageMetrics({ registers, zero }: Section): Pick<Metrics, 'usageFlushed' | 'watchUsageLag'> {
  const flushes = new Counter({
    name: 'tessera_usage_flushes_total',
    help: 'Saves of the pending usage counts to the store, by outcome (ok, failed).',
    labelNames: ['outcome'] as const,
    registers,
  })
  const flushOk = zero(flushes.labels({ outcome: 'ok' }))
  const flushFailed = zero(flushes.labels({ outcome: 'failed' }))
  let usageLag: (() => number) | null = null
  new Gauge({
    name: 'tessera_usage_flush_lag_seconds',
    help: 'Age of the oldest usage count not yet saved to the store (0 when none waits).',
    registers,
    collect() {
      this.set(usageLag?.() ?? 0)
    },
  })

  return {
    usageFlushed(ok) {
      ;(ok ? flushOk : flushFailed).inc()
    },
    watchUsageLag(read) {
      usageLag = read
    },
  }
}

/** The portal: sign-ins, sign-ups, emails. */
function portalMetrics({ registers, zero }: Section): Pick<Metrics, 'signIn' | 'signUp' | 'email'> {
  const signIns = new Counter({
    name: 'tessera_portal_sign_ins_total',
    help: 'Portal sign-in attempts by outcome (ok, wrong, throttled, second factor, wrong second factor, unconfirmed, pending, disabled).',
    labelNames: ['outcome'] as const,
    registers,
  })
  const signInChildren = new Map(SIGN_IN_OUTCOMES.map((outcome) => [outcome, zero(signIns.labels({ outcome }))]))
  const signUps = new Counter({
    name: 'tessera_portal_sign_ups_total',
    help: 'Portal sign-ups accepted (a new user waiting to confirm the address).',
    registers,
  })
  const emails = new Counter({
    name: 'tessera_emails_total',
    help: 'Emails handed to SMTP, by outcome (sent, failed).',
    labelNames: ['outcome'] as const,
    registers,
  })
  const emailSent = zero(emails.labels({ outcome: 'sent' }))
  const emailFailed = zero(emails.labels({ outcome: 'failed' }))

  return {
    signIn(outcome) {
      signInChildren.get(outcome)!.inc()
    },
    signUp() {
      signUps.inc()
    },
    email(sent) {
      ;(sent ? emailSent : emailFailed).inc()
    },
  }
}

/** Webhook attempts, the deliveries pending and those dropped past an account's cap. */
function webhookMetrics({ registers, zero }: Section): Pick<Metrics, 'webhookAttempt' | 'watchWebhooks' | 'webhookDropped'> {
  const webhookAttempts = new Counter({
    name: 'tessera_webhook_attempts_total',
    help: 'Webhook delivery attempts by outcome (delivered, retry, failed: given up after WEBHOOK_RETRY_SECONDS).',
    labelNames: ['outcome'] as const,
    registers,
  })
  const webhookChildren = new Map(WEBHOOK_OUTCOMES.map((outcome) => [outcome, zero(webhookAttempts.labels({ outcome }))]))
  let webhooksPending: (() => Promise<number>) | null = null
  new Gauge({
    name: 'tessera_webhook_deliveries_pending',
    help: 'Webhook deliveries waiting to be sent or retried, across all nodes (read from the store at each scrape).',
    registers,
    async collect() {
      if (webhooksPending === null) return
      // A store that does not answer leaves the last value; its own series (tessera_dependency_up) tells why.
      try {
        this.set(await webhooksPending())
      } catch {
        /* above */
      }
    },
  })

  const webhookDropped = new Counter({
    name: 'tessera_webhook_deliveries_dropped_total',
    help: 'Webhook deliveries not written because their account had WEBHOOK_PENDING_PER_ACCOUNT pending (the events are kept); each counted by one node.',
    registers,
  })

  return {
    webhookAttempt(outcome) {
      webhookChildren.get(outcome)!.inc()
    },
    webhookDropped(deliveries) {
      webhookDropped.inc(deliveries)
    },
    watchWebhooks(read) {
      webhooksPending = read
    },
  }
}

/** createMetrics makes the registry and every metric, with the process's defaults (event-loop lag, heap, RSS, handles). */
export function createMetrics(opts: MetricsOptions): Metrics {
  const registry = new Registry()
  registry.setDefaultLabels({ region: opts.region })
  collectDefaultMetrics({ register: registry })
  // Gauges named like counters, which `promtool check metrics` refuses; their per-type gauges
  // (nodejs_active_handles{type} and the rest) hold the same numbers.
  for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']) registry.removeSingleMetric(name)
  const registers = [registry]
  // prom-client takes any object with get() (its own metrics are such objects); its types list only its own classes.
  const register = (metric: object) => registry.registerMetric(metric as unknown as Counter)
  // Every label value from the start, at 0: a rate over a series that appears late misses its first increase.
  const zero = <T extends { inc(n: number): void }>(child: T): T => {
    child.inc(0)
    return child
  }

  new Gauge({ name: 'tessera_build_info', help: 'Always 1; the running version in its label.', labelNames: ['version'] as const, registers }).set(
    { version: VERSION },
    1,
  )

  const section: Section = { registers, register, zero }
  const perAccount = opts.perAccount === true
  return {
    registry,
    perAccount,
    ...requestMetrics(section, perAccount),
    ...gatewayMetrics(section),
    ...totpMetrics(section),
    ...conversionMetrics(section),
    ...storeMetrics(section),
    ...usageMetrics(section),
    ...portalMetrics(section),
    ...webhookMetrics(section),
    ...jobMetrics(section),
  }
}

/** Conversion jobs: their ends on this node, and every node's queue as the store counts it at each scrape. */
function jobMetrics({ registers, zero }: Section): Pick<Metrics, 'jobEnded' | 'jobLeaseExpired' | 'jobsPoisoned' | 'watchJobs'> {
  const ends = new Counter({
    name: 'tessera_jobs_ended_total',
    help: 'Conversion jobs this node ended, by how (released: given back to the queue, its node closing or a worker dead on it).',
    labelNames: ['status'] as const,
    registers,
  })
  const endChildren = new Map(JOB_END_STATUSES.map((status) => [status, zero(ends.labels({ status }))]))
  const duration = new Histogram({
    name: 'tessera_job_duration_seconds',
    help: 'Time from a conversion job start on this node to its end (succeeded or failed).',
    buckets: [0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600],
    registers,
  })
  const leases = zero(
    new Counter({ name: 'tessera_job_leases_expired_total', help: 'Jobs this node claimed after their lease ran out on another node.', registers }),
  )
  const poison = zero(new Counter({ name: 'tessera_jobs_poisoned_total', help: 'Jobs failed after JOB_MAX_ATTEMPTS claims (poison documents).', registers }))
  let read: (() => Promise<JobGauges>) | null = null
  let last: Promise<JobGauges | null> | null = null
  // One read of the store per scrape, whichever of the gauges asks first.
  const gauges = () => {
    if (read === null) return Promise.resolve(null)
    last ??= read()
      .catch(() => null)
      .finally(() => setTimeout(() => (last = null), 100).unref())
    return last
  }
  new Gauge({
    name: 'tessera_jobs',
    help: 'Conversion jobs by status, across all nodes (read from the store at each scrape).',
    labelNames: ['status'] as const,
    registers,
    async collect() {
      const g = await gauges()
      if (g !== null) for (const [status, n] of Object.entries(g.byStatus)) this.set({ status }, n)
    },
  })
  new Gauge({
    name: 'tessera_job_queue_age_seconds',
    help: 'Age of the oldest queued conversion job (0 when none waits).',
    registers,
    async collect() {
      const g = await gauges()
      if (g !== null) this.set(g.oldestQueuedMs === null ? 0 : Math.max(0, (Date.now() - g.oldestQueuedMs) / 1000))
    },
  })
  new Gauge({
    name: 'tessera_job_result_bytes',
    help: 'Bytes of conversion job results kept for download, across all nodes.',
    registers,
    async collect() {
      const g = await gauges()
      if (g !== null) this.set(g.resultBytes)
    },
  })
  return {
    jobEnded(status, seconds) {
      endChildren.get(status)!.inc()
      if (status === 'succeeded' || status === 'failed') duration.observe(seconds)
    },
    jobLeaseExpired() {
      leases.inc()
    },
    jobsPoisoned(count) {
      poison.inc(count)
    },
    watchJobs(r) {
      read = r
    },
  }
}
