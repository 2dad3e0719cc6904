/**
 * instrumentStore times every store operation (duration and failures per adapter and
 * operation) by wrapping each part of the store once, at start-up: a call then costs two
 * clock reads and a few additions (see PlainHistogram), whatever adapter is behind it. It also
 * hands the metrics the store's scrape-time gauges (connections, dependencies' health).
 *
 * Wrapping the Store interface rather than each adapter's query function keeps one place for
 * every adapter, present and future, and names operations as the code does (`access.findGrant`),
 * a closed set: no query text, key or ID reaches a label.
 */
import type { Metrics } from './metrics.ts'
import type { Store } from '../storage/ports.ts'
import { storeHealth } from '../ops/checks.ts'
import { inChildSpan, tracingOn } from '../tracing/tracing.ts'

/** Errors that are answers, not failures: a bad cursor from a client, a rule of the domain. */
const ANSWERS = new Set(['CursorError', 'LastOwnerError'])

const INSTRUMENTED = Symbol('instrumented')

/** OpenTelemetry's `db.system.name` of each adapter. */
const DB_SYSTEMS: Readonly<Record<string, string>> = { sqlite: 'sqlite', postgres: 'postgresql', redis: 'redis', memory: 'memory' }

type Part = Record<string, unknown>

/** The functions of an object: its own, and those of its class (adapters may be either). */
function functionNames(part: object): string[] {
  const names = new Set<string>()
  for (let o: object | null = part; o !== null && o !== Object.prototype; o = Object.getPrototypeOf(o) as object | null) {
    for (const name of Object.getOwnPropertyNames(o)) {
      if (name !== 'constructor' && typeof (part as Part)[name] === 'function') names.add(name)
    }
  }
  return [...names]
}

/** timed wraps each function of `part` whose calls return promises; other calls (listeners) pass through untimed. */
function timed<T extends object>(part: T, adapter: string, partName: string, metrics: Metrics): T {
  const out: Part = { ...(part as Part) }
  const traced = tracingOn()
  for (const name of functionNames(part)) {
    const operation = `${partName}.${name}`
    const record = metrics.storeOperation(adapter, operation)
    const spanName = `store ${operation}`
    const attributes = { 'db.system.name': DB_SYSTEMS[adapter] ?? adapter, 'tessera.store.operation': operation }
    const timedCall = function instrumented(...args: unknown[]): unknown {
      const started = performance.now()
      // Looked up at each call, not kept: whatever replaces the part's function later (a test's spy) is what runs.
      const result = ((part as Part)[name] as (...a: unknown[]) => unknown).apply(part, args)
      if (!(result instanceof Promise)) return result
      return result.then(
        (value: unknown) => {
          record((performance.now() - started) / 1000, false)
          return value
        },
        (error: unknown) => {
          record((performance.now() - started) / 1000, !(error instanceof Error && ANSWERS.has(error.name)))
          throw error
        },
      )
    }
    // Traced (decided once, at start-up): each call is a span under the request's or the job's, named by the operation.
    out[name] = traced
      ? function tracedCall(...args: unknown[]): unknown {
          return inChildSpan(spanName, attributes, () => timedCall(...args))
        }
      : timedCall
  }
  return out as T
}

/** instrumentStore gives the store with its operations timed (once: an instrumented store is returned as it is). */
export function instrumentStore(store: Store, metrics: Metrics, options: { readonly healthTimeoutMs?: number } = {}): Store {
  if ((store as unknown as Record<symbol, unknown>)[INSTRUMENTED] === true) return store
  // 'postgres+redis': the relational parts on PostgreSQL, verification state and the limiter on Redis.
  const [relational = store.kind, shared = relational] = store.kind.split('+')
  metrics.watchStore(() => store.gauges())
  // As readiness sees them, within the same bound: a hung database shows as itself, not as a failed scrape.
  metrics.watchDependencies(async () => {
    const health = await storeHealth(store, options.healthTimeoutMs ?? 2000)
    return Object.fromEntries(Object.entries(health).map(([name, h]) => [name, h.ok]))
  })
  const instrumented: Store = {
    kind: store.kind,
    access: timed(store.access, relational, 'access', metrics),
    onboarding: timed(store.onboarding, relational, 'onboarding', metrics),
    factors: timed(store.factors, relational, 'factors', metrics),
    verification: timed(store.verification, shared, 'verification', metrics),
    usage: timed(store.usage, relational, 'usage', metrics),
    audit: timed(store.audit, relational, 'audit', metrics),
    adminTokens: timed(store.adminTokens, relational, 'adminTokens', metrics),
    portal: timed(store.portal, relational, 'portal', metrics),
    webhooks: timed(store.webhooks, relational, 'webhooks', metrics),
    jobs: timed(store.jobs, relational, 'jobs', metrics),
    idempotency: timed(store.idempotency, relational, 'idempotency', metrics),
    sharedLimiter: store.sharedLimiter === null ? null : timed(store.sharedLimiter, shared, 'limiter', metrics),
    health: () => store.health(),
    gauges: () => store.gauges(),
    close: () => store.close(),
  }
  Object.defineProperty(instrumented, INSTRUMENTED, { value: true })
  return instrumented
}
