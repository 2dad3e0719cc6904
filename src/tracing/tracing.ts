/**
 * Tracing as the rest of the code sees it: a few calls that cost a boolean test when tracing is
 * off, and that the OpenTelemetry SDK answers when it is on (sdk.ts, imported only then: a node
 * without `OTEL_*` settings loads no OpenTelemetry module at all).
 *
 * What crosses a process is the W3C `traceparent` string (a job's row, an audit event's row, which
 * its webhook deliveries read): the context is kept with the work, so a job submitted on one node
 * and run on another is one trace. Worker threads carry none: they time each page, and the pool
 * records the page's span under its conversion.
 *
 * Attributes are chosen by their callers from a closed set of names (ids, counts, sizes, route
 * templates): no key, secret, code, password, document byte or URL query is ever given to one.
 */
import type { Config } from '../config/config.ts'

/** What an attribute may hold. */
export type Attributes = Readonly<Record<string, string | number | boolean | undefined>>

/** A span begun by `begin`, ended by the caller: what a stretch of work that is not one call needs. */
export interface OpenSpan {
  /** Sets attributes known only later (a status, a count). */
  set(attributes: Attributes): void
  /** Ends it, as a failure when `error` is given. */
  end(error?: unknown): void
  /** The span as a `traceparent`, to carry into another thread, process or request. */
  readonly traceparent: string
  /** Runs `fn` with this span as the current one (what it starts, and what it queues, is under it). */
  within<T>(fn: () => T): T
}

/** What sdk.ts provides while tracing is on. */
export interface TracingImpl {
  inSpan<T>(name: string, attributes: Attributes, fn: () => T): T
  inChildSpan<T>(name: string, attributes: Attributes, fn: () => T): T
  outside<T>(fn: () => T): T
  begin(name: string, attributes: Attributes, parent?: string): OpenSpan
  record(name: string, startMs: number, endMs: number, attributes: Attributes, parent?: string, error?: string): void
  current(): string | undefined
  setOnRequest(request: object, attributes: Attributes): void
  /** The Fastify plugin that makes each request's span (registered first on each listener). */
  fastifyPlugin(): unknown
  logIds(): { trace_id: string; span_id: string } | undefined
  shutdown(): Promise<void>
}

let impl: TracingImpl | null = null

/** Whether this process traces (read at each call, so a test may start and stop it). */
export function tracingOn(): boolean {
  return impl !== null
}

/**
 * tracingWanted: whether the settings turn tracing on. Off by default: on only when an OTLP
 * endpoint is given or OTEL_TRACES_EXPORTER=otlp, and OTEL_SDK_DISABLED is not true.
 */
export function tracingWanted(config: Config): boolean {
  if (config.otelSdkDisabled || config.otelTracesExporter === 'none') return false
  return config.otelTracesExporter === 'otlp' || config.otelEndpoint !== '' || config.otelTracesEndpoint !== ''
}

/**
 * startTracing starts the SDK when the settings ask for it (once per process; worker threads
 * never do: their pages are recorded by the thread that sent them).
 */
export async function startTracing(config: Config): Promise<void> {
  if (impl !== null || !tracingWanted(config)) return
  const { startSdk } = await import('./sdk.ts')
  impl = startSdk(config)
}

/** How long a node's exit waits for its last spans to reach the collector: a collector that is down does not hold the exit. */
export const STOP_FLUSH_MS = 3000

/** stopTracing exports what is held (for at most STOP_FLUSH_MS, the rest dropped) and stops; tracing is off after. */
export async function stopTracing(): Promise<void> {
  const was = impl
  impl = null
  if (was === null) return
  let timer: NodeJS.Timeout | undefined
  await Promise.race([was.shutdown().catch(() => undefined), new Promise<void>((resolve) => (timer = setTimeout(resolve, STOP_FLUSH_MS)))])
  clearTimeout(timer)
}

/** inSpan runs `fn` in a span named `name` under the current one (ended when `fn` returns or its promise settles); off, it is `fn()`. */
export function inSpan<T>(name: string, attributes: Attributes, fn: () => T): T {
  return impl === null ? fn() : impl.inSpan(name, attributes, fn)
}

/** inChildSpan: inSpan, only under a span already begun (a store call of a poller, alone, makes no trace). */
export function inChildSpan<T>(name: string, attributes: Attributes, fn: () => T): T {
  return impl === null ? fn() : impl.inChildSpan(name, attributes, fn)
}

/** outsideTraces runs `fn` in no span, whatever span the caller is in (a background pass nudged by a request). */
export function outsideTraces<T>(fn: () => T): T {
  return impl === null ? fn() : impl.outside(fn)
}

const NOT_TRACED: OpenSpan = { set: () => {}, end: () => {}, traceparent: '', within: (fn) => fn() }

/** begin starts a span that its caller ends; under `parent` (a traceparent) when given, else under the current span. */
export function begin(name: string, attributes: Attributes, parent?: string): OpenSpan {
  return impl === null ? NOT_TRACED : impl.begin(name, attributes, parent)
}

/** record adds a span of work timed elsewhere (a worker thread's page: its start and end in epoch ms). */
export function record(name: string, startMs: number, endMs: number, attributes: Attributes, parent?: string, error?: string): void {
  impl?.record(name, startMs, endMs, attributes, parent, error)
}

/** traceparent: the current span as a W3C `traceparent` (to keep with a job or a delivery); undefined when not traced. */
export function traceparent(): string | undefined {
  return impl?.current()
}

/** onRequest sets attributes on a request's span (the account, once the key is known). */
export function onRequest(request: object, attributes: Attributes): void {
  impl?.setOnRequest(request, attributes)
}

/** requestPlugin: the Fastify plugin that gives each request its span; null when not traced. */
export function requestPlugin(): unknown {
  return impl?.fastifyPlugin() ?? null
}

/** logIds: the current trace and span for a log line; undefined when not traced. */
export function logIds(): { trace_id: string; span_id: string } | undefined {
  return impl?.logIds()
}
