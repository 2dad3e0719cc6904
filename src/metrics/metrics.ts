/**
 * The service's Prometheus metrics (prom-client), made once per process with their own
 * registry: names in Prometheus style with their units (`_seconds`, `_bytes`, `_total`), label
 * values from closed sets only (a route's pattern, never its path; a refusal's cause; an
 * outcome), so that no key, secret, user or account name can reach a label. Issue 14, first
 * step: HTTP requests, gateway refusals, verification outcomes, and the process's defaults.
 *
 * The hot path: a request costs one map lookup and a few additions (see RequestSeries).
 */
import { collectDefaultMetrics, Counter, Registry } from 'prom-client'

/**
 * Buckets that resolve a 200 µs getOTP and a 30 s conversion alike: 100 µs to 60 s, about
 * three to a decade.
 */
export const DURATION_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]

/** Why the gateway refused a call (the client is told none of them: one 403 for all, 429 for the plan). */
export type RefusalCause = 'missing' | 'unknown' | 'revoked' | 'expired' | 'suspended' | 'not subscribed' | 'throttled' | 'over quota'
export const REFUSAL_CAUSES: readonly RefusalCause[] = ['missing', 'unknown', 'revoked', 'expired', 'suspended', 'not subscribed', 'throttled', 'over quota']

export type VerificationOutcome = 'accepted' | 'invalid' | 'reused' | 'locked'
export const VERIFICATION_OUTCOMES: readonly VerificationOutcome[] = ['accepted', 'invalid', 'reused', 'locked']

/**
 * RequestSeries: one (route, method, status)'s counts, kept as plain numbers. prom-client's
 * labelled children hash their label object at every increment and observation (sorting its
 * keys into a string): on GET /totp/ping that alone took 16% of the throughput (bench/ab.ts).
 * These are turned into samples only when Prometheus scrapes.
 */
interface RequestSeries {
  readonly labels: Readonly<Record<'route' | 'method' | 'status', string>>
  count: number
  sum: number
  /** Observations per bucket (not cumulative: summed at scrape). */
  readonly buckets: Float64Array
}

type Sample = { metricName: string; labels: Record<string, string | number>; value: number }

/** requestMetrics: the requests counter and duration histogram, read from `series` at scrape time. */
function requestMetrics(series: ReadonlyMap<string, RequestSeries>) {
  const counterName = 'tessera_http_requests_total'
  const histogramName = 'tessera_http_request_duration_seconds'
  const counter = {
    name: counterName, help: 'HTTP requests answered, by route pattern, method and status.', type: 'counter', aggregator: 'sum',
    get: async () => ({ ...counter, values: [...series.values()].map((s): Sample => ({ metricName: counterName, labels: s.labels, value: s.count })) }),
    reset: () => undefined,
  }
  const histogram = {
    name: histogramName, help: 'Time from a request\'s arrival to its answer, by route pattern, method and status.', type: 'histogram', aggregator: 'sum',
    get: async () => {
      const values: Sample[] = []
      for (const s of series.values()) {
        let cumulative = 0
        DURATION_BUCKETS.forEach((le, i) => {
          cumulative += s.buckets[i]!
          values.push({ metricName: `${histogramName}_bucket`, labels: { ...s.labels, le }, value: cumulative })
        })
        values.push({ metricName: `${histogramName}_bucket`, labels: { ...s.labels, le: '+Inf' }, value: s.count })
        values.push({ metricName: `${histogramName}_sum`, labels: s.labels, value: s.sum })
        values.push({ metricName: `${histogramName}_count`, labels: s.labels, value: s.count })
      }
      return { ...histogram, values }
    },
    reset: () => undefined,
  }
  return [counter, histogram]
}

export interface Metrics {
  readonly registry: Registry
  /** observeRequest counts one answered request; `route` is the route's pattern (or 'unmatched'). */
  observeRequest(route: string, method: string, status: number, seconds: number): void
  refused(cause: RefusalCause): void
  verified(outcome: VerificationOutcome): void
}

/** createMetrics makes the registry and every metric, with the process's defaults (event-loop lag, heap, RSS, handles). */
export function createMetrics(opts: { readonly region: string }): Metrics {
  const registry = new Registry()
  registry.setDefaultLabels({ region: opts.region })
  collectDefaultMetrics({ register: registry })
  // Gauges named like counters, which `promtool check metrics` refuses; their per-type gauges
  // (nodejs_active_handles{type} and the rest) hold the same numbers.
  for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']) registry.removeSingleMetric(name)

  // Bounded: routes × methods × statuses are finite (unmatched paths share one route label).
  const series = new Map<string, RequestSeries>()
  // prom-client takes any object with get() (its own metrics are such objects); its types list only its own classes.
  for (const metric of requestMetrics(series)) registry.registerMetric(metric as unknown as Counter)
  const refusals = new Counter({
    name: 'tessera_gateway_refusals_total', help: 'Calls the gateway refused, by cause (clients see one 403, or 429 for the plan).',
    labelNames: ['cause'] as const, registers: [registry],
  })
  const verifications = new Counter({
    name: 'tessera_otp_verifications_total', help: 'verifyOTP outcomes: accepted, invalid, reused, locked.',
    labelNames: ['outcome'] as const, registers: [registry],
  })
  // Every cause and outcome from the start, at 0: a rate over a series that appears late misses its first increase.
  const zero = <T extends { inc(n: number): void }>(child: T): T => { child.inc(0); return child }
  const refusalChildren = new Map(REFUSAL_CAUSES.map((cause) => [cause, zero(refusals.labels({ cause }))]))
  const verificationChildren = new Map(VERIFICATION_OUTCOMES.map((outcome) => [outcome, zero(verifications.labels({ outcome }))]))

  return {
    registry,
    observeRequest(route, method, status, seconds) {
      const key = `${status}${method}${route}`
      let one = series.get(key)
      if (one === undefined) {
        one = { labels: { route, method, status: String(status) }, count: 0, sum: 0, buckets: new Float64Array(DURATION_BUCKETS.length) }
        series.set(key, one)
      }
      one.count++
      one.sum += seconds
      // The first bucket that holds it (above the last: only +Inf, which is the count).
      for (let i = 0; i < DURATION_BUCKETS.length; i++) {
        if (seconds <= DURATION_BUCKETS[i]!) {
          one.buckets[i]!++
          break
        }
      }
    },
    refused(cause) {
      refusalChildren.get(cause)!.inc()
    },
    verified(outcome) {
      verificationChildren.get(outcome)!.inc()
    },
  }
}
