/**
 * The OpenTelemetry SDK, started only when the settings turn tracing on (tracing.ts imports this
 * module then, and only then). No loader hook and no `--import` flag: what is instrumented is
 * instrumented explicitly, here, on the modules the process already loaded:
 *
 * - requests: `@fastify/otel` (Fastify's own instrumentation), a plugin each listener registers
 *   first (http/base.ts); its span is the request's, named `METHOD /route/{param}`;
 * - PostgreSQL: `@opentelemetry/instrumentation-pg`, its patch applied to the `pg` and `pg-pool`
 *   modules (the same objects `import pg from 'pg'` gave the store): a span per query and per
 *   connection taken, only under a span of ours (the pollers' reads alone make no trace);
 * - Redis: ioredis's own diagnostics channel (`ioredis:command`, published by ioredis 6 for
 *   every command), a span per command under a span of ours; the command's name only, never its
 *   keys or arguments;
 * - the store's operations (on every adapter, SQLite included) and the conversions, jobs and
 *   webhook attempts: spans of our own, through tracing.ts.
 *
 * Every span passes `Scrub` before it is queued: a path loses its query string, a status its
 * message and a span its events (an exception's message can quote its input: JSON.parse's does),
 * so that no key, secret, code, password or document byte leaves in a span. The queue is bounded
 * (OTEL_BSP_MAX_QUEUE_SIZE): a collector that is down costs a bounded memory, and spans past it
 * are dropped (counted).
 */
import { tracingChannel } from 'node:diagnostics_channel'
import { randomUUID } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { createRequire, findPackageJSON } from 'node:module'
import { pathToFileURL } from 'node:url'
import { hostname } from 'node:os'
import {
  context,
  diag,
  DiagLogLevel,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Context,
  type DiagLogger,
  type Span,
  type Tracer,
} from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { W3CTraceContextPropagator } from '@opentelemetry/core'
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { OTLPTraceExporter as ProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto'
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg'
import { resourceFromAttributes } from '@opentelemetry/resources'
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type ReadableSpan,
  type Sampler,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace'
import { FastifyOtelInstrumentation } from '@fastify/otel'
import type { Config } from '../config/config.ts'
import { VERSION } from '../version.ts'
import type { Attributes, OpenSpan, TracingImpl } from './tracing.ts'

const SCOPE = 'tessera'

/** The sampler OTEL_TRACES_SAMPLER names. */
function sampler(config: Config): Sampler {
  const ratio = new TraceIdRatioBasedSampler(config.otelSamplerArg)
  switch (config.otelSampler) {
    case 'always_on':
      return new AlwaysOnSampler()
    case 'always_off':
      return new AlwaysOffSampler()
    case 'traceidratio':
      return ratio
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() })
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: ratio })
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() })
  }
}

/** The traces' URL: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as given, else OTEL_EXPORTER_OTLP_ENDPOINT's `/v1/traces`. */
export function tracesUrl(config: Config): string {
  if (config.otelTracesEndpoint !== '') return config.otelTracesEndpoint
  return `${config.otelEndpoint === '' ? 'http://localhost:4318' : config.otelEndpoint}/v1/traces`
}

/**
 * Scrub: the last look at every span before it is queued for export. Attributes are chosen by
 * their callers, but some come from libraries: a path that carries a query string is cut at
 * `?`; a status keeps its code and loses its message; events (exceptions, with their messages
 * and stacks) are dropped.
 */
class Scrub implements SpanProcessor {
  readonly #next: SpanProcessor
  constructor(next: SpanProcessor) {
    this.#next = next
  }
  onStart(span: Span, parent: Context): void {
    this.#next.onStart(span as never, parent)
  }
  onEnd(span: ReadableSpan): void {
    const attributes = span.attributes as Record<string, unknown>
    for (const name of ['url.path', 'url.full', 'http.target', 'http.url']) {
      const value = attributes[name]
      if (typeof value === 'string' && value.includes('?')) attributes[name] = value.slice(0, value.indexOf('?'))
    }
    delete attributes['url.query']
    if (span.status.message !== undefined) (span as { status: { code: number; message?: string } }).status = { code: span.status.code }
    ;(span.events as unknown[]).length = 0
    this.#next.onEnd(span)
  }
  forceFlush(): Promise<void> {
    return this.#next.forceFlush()
  }
  shutdown(): Promise<void> {
    return this.#next.shutdown()
  }
}

/**
 * The SDK's own warnings and errors (an export that failed, spans dropped from a full queue) on
 * standard error as one JSON line each, at most one a minute for each kind: a collector that is
 * down is reported, not repeated at every batch. Messages are the SDK's (an endpoint's answer, a
 * count), never a span's content.
 */
class DiagToLog implements DiagLogger {
  readonly #last = new Map<string, number>()
  #write(level: string, message: string): void {
    // A message's kind: without its numbers and ids (a trace id in "ended span" messages), and at most 100 kinds kept.
    const kind = message
      .replace(/[0-9a-f]{16,}/gi, 'ID')
      .replace(/\d+/g, 'N')
      .slice(0, 80)
    const now = Date.now()
    if (now - (this.#last.get(kind) ?? 0) < 60_000) return
    if (this.#last.size >= 100) this.#last.clear()
    this.#last.set(kind, now)
    process.stderr.write(`${JSON.stringify({ level, time: now, msg: `tracing: ${message}` })}\n`)
  }
  error = (message: string) => this.#write('error', message)
  warn = (message: string) => this.#write('warn', message)
  info = () => {}
  debug = () => {}
  verbose = () => {}
}

/** The context a traceparent names (a malformed one names none: a new trace); without one, the current context. */
function parentContext(traceparent: string | undefined): Context {
  if (traceparent === undefined || traceparent === '') return context.active()
  return propagation.extract(ROOT_CONTEXT, { traceparent })
}

/** The traceparent of a span (or the active one). */
function traceparentOf(span: Span | undefined): string | undefined {
  if (span === undefined) return undefined
  const carrier: Record<string, string> = {}
  propagation.inject(trace.setSpan(ROOT_CONTEXT, span), carrier)
  return carrier.traceparent
}

/** Attributes without the undefined ones. */
function defined(attributes: Attributes): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {}
  for (const [name, value] of Object.entries(attributes)) if (value !== undefined) out[name] = value
  return out
}

function fail(span: Span, error: unknown): void {
  // The error's name only: its message may quote its input (and Scrub would drop it anyway).
  const code = (error as { code?: unknown } | null)?.code
  span.setAttribute('error.type', typeof code === 'string' ? code : error instanceof Error ? error.name : typeof error)
  span.setStatus({ code: SpanStatusCode.ERROR })
}

/** Redis: a span per command from ioredis's diagnostics channel, under a span of ours only. */
function traceRedis(tracer: Tracer): () => void {
  const spans = new WeakMap<object, Span>()
  const channel = tracingChannel<object, { command?: string; database?: number; serverAddress?: string; serverPort?: number; error?: unknown }>(
    'ioredis:command',
  )
  const handlers = {
    start(message: { command?: string; database?: number; serverAddress?: string; serverPort?: number }) {
      if (trace.getSpan(context.active())?.isRecording() !== true) return
      const command = String(message.command ?? 'unknown').toLowerCase()
      spans.set(
        message,
        tracer.startSpan(command, {
          kind: SpanKind.CLIENT,
          attributes: defined({
            'db.system.name': 'redis',
            'db.operation.name': command,
            'db.namespace': message.database === undefined ? undefined : String(message.database),
            'server.address': message.serverAddress,
            'server.port': message.serverPort,
          }),
        }),
      )
    },
    end() {},
    asyncStart() {},
    asyncEnd(message: object) {
      spans.get(message)?.end()
      spans.delete(message)
    },
    error(message: { error?: unknown }) {
      const span = spans.get(message)
      if (span !== undefined) fail(span, message.error)
    },
  }
  channel.subscribe(handlers as never)
  return () => channel.unsubscribe(handlers as never)
}

/** PostgreSQL: instrumentation-pg's patch, applied to the loaded `pg` and `pg-pool` (no loader hook). */
function tracePostgres(provider: TracerProvider): void {
  const pg = new PgInstrumentation({ enabled: false, requireParentSpan: true, enhancedDatabaseReporting: false })
  pg.setTracerProvider(provider)
  // pg-pool is pg's dependency: resolved from pg's own place, as pg resolves it.
  const fromHere = createRequire(import.meta.url)
  const fromPg = createRequire(fromHere.resolve('pg'))
  for (const definition of pg.getModuleDefinitions()) {
    const from = definition.name === 'pg' ? fromHere : fromPg
    const manifest = findPackageJSON(definition.name, pathToFileURL(from.resolve(definition.name)))
    if (manifest === undefined) throw new Error(`tracing: no package.json for ${definition.name}`)
    const { version } = JSON.parse(readFileSync(manifest, 'utf8')) as { version: string }
    definition.patch?.(from(definition.name), version)
  }
}

/** How many exports may wait for the collector at once; a batch beyond them is dropped (and reported by the SDK's log line). */
export const EXPORTS_IN_FLIGHT = 2

/** newProvider: the exporter (OTLP/HTTP, protobuf or JSON), the bounded batch queue behind Scrub, the resource and the sampler. */
function newProvider(config: Config): TracerProvider {
  const protocol = config.otelTracesProtocol || config.otelProtocol || 'http/protobuf'
  const exporterOptions = {
    url: tracesUrl(config),
    headers: { ...config.otelHeaders, ...config.otelTracesHeaders },
    timeoutMillis: config.otelTimeoutMs,
    // At most two exports in flight (the SDK's default is 30, each holding its batch until the collector answers or the
    // timeout ends it): against a collector that stalls, the spans held are the queue's bound and two batches, no more.
    concurrencyLimit: EXPORTS_IN_FLIGHT,
    compression: config.otelCompression === 'gzip' ? ('gzip' as never) : ('none' as never),
  }
  const exporter = protocol === 'http/json' ? new JsonExporter(exporterOptions) : new ProtobufExporter(exporterOptions)
  const batches = new BatchSpanProcessor({
    exporter,
    maxQueueSize: config.otelBspMaxQueueSize,
    maxExportBatchSize: Math.min(config.otelBspMaxExportBatchSize, config.otelBspMaxQueueSize),
    scheduledDelayMillis: config.otelBspScheduleDelayMs,
    exportTimeoutMillis: config.otelBspExportTimeoutMs,
  })
  const resource = resourceFromAttributes({
    ...config.otelResourceAttributes,
    // As the specification has it: OTEL_SERVICE_NAME, else OTEL_RESOURCE_ATTRIBUTES' service.name, else ours.
    'service.name': config.otelServiceName || config.otelResourceAttributes['service.name'] || 'tessera',
    'service.version': VERSION,
    'service.instance.id': `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`,
    'tessera.region': config.region,
  })
  return new TracerProvider({ resource, sampler: sampler(config), spanProcessors: [new Scrub(batches)] })
}

/** traceRequests: Fastify's instrumentation, its request span named by the route, its path without the query, the region on it. */
function traceRequests(config: Config, provider: TracerProvider): FastifyOtelInstrumentation {
  const fastify = new FastifyOtelInstrumentation({
    recordExceptions: false,
    // The request's span alone: none for its handler (named after the function's source when it has no name) nor for each
    // hook (a dozen per request, most of them instant); what they do is in the store's, the conversion's and the pool's spans.
    instrumentHooks: false,
    instrumentHandler: false,
    requestHook: (span: Span, request: { method: string; url: string; routeOptions?: { url?: string } }) => {
      if (!span.isRecording()) return
      const route = request.routeOptions?.url
      span.updateName(route === undefined ? request.method : `${request.method} ${route}`)
      // The route's template, not the path: a path's IDs are the customers' own (a user ID may be an e-mail address), and
      // a path that matches no route is whatever the client sent.
      span.setAttribute('url.path', route ?? '(no route)')
      span.setAttribute('tessera.region', config.region)
    },
  })
  fastify.setTracerProvider(provider)
  return fastify
}

/** startSdk: the provider, exporter, propagator and instrumentations; what tracing.ts calls while tracing is on. */
export function startSdk(config: Config): TracingImpl {
  diag.setLogger(new DiagToLog(), { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true })
  const provider = newProvider(config)
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
  propagation.setGlobalPropagator(new W3CTraceContextPropagator())
  trace.setGlobalTracerProvider(provider)
  const tracer = provider.getTracer(SCOPE, VERSION)
  tracePostgres(provider)
  const stopRedis = traceRedis(tracer)
  const fastify = traceRequests(config, provider)

  const start = (name: string, attributes: Attributes, parent?: string, at?: number): { span: Span; ctx: Context } => {
    const under = parentContext(parent)
    const span = tracer.startSpan(name, at === undefined ? undefined : { startTime: at }, under)
    // Attributes only on a span the sampler kept (no sampler here reads them): one left out costs no more.
    if (span.isRecording()) span.setAttributes(defined(attributes))
    return { span, ctx: trace.setSpan(under, span) }
  }

  return {
    fastifyPlugin: () => fastify.plugin(),
    inSpan<T>(name: string, attributes: Attributes, fn: () => T): T {
      const { span, ctx } = start(name, attributes)
      let result: T
      try {
        result = context.with(ctx, fn)
      } catch (error) {
        fail(span, error)
        span.end()
        throw error
      }
      if (result instanceof Promise) {
        return result.then(
          (value) => {
            span.end()
            return value
          },
          (error: unknown) => {
            fail(span, error)
            span.end()
            throw error
          },
        ) as T
      }
      span.end()
      return result
    },
    outside: (fn) => context.with(ROOT_CONTEXT, fn),
    inChildSpan<T>(name: string, attributes: Attributes, fn: () => T): T {
      // Under no span, or one the sampler left out (its children would be left out too): the call alone, at no cost.
      return trace.getSpan(context.active())?.isRecording() === true ? this.inSpan(name, attributes, fn) : fn()
    },
    begin(name: string, attributes: Attributes, parent?: string): OpenSpan {
      const { span, ctx } = start(name, attributes, parent)
      return {
        within: (fn) => context.with(ctx, fn),
        set: (more) => {
          if (span.isRecording()) span.setAttributes(defined(more))
        },
        end: (error) => {
          if (error !== undefined) fail(span, error)
          span.end()
        },
        // Made when asked for (a webhook's header), not at every begin.
        get traceparent() {
          return traceparentOf(span) ?? ''
        },
      }
    },
    record(name, startMs, endMs, attributes, parent, error) {
      const { span } = start(name, attributes, parent, startMs)
      if (error !== undefined) {
        span.setAttribute('error.type', error)
        span.setStatus({ code: SpanStatusCode.ERROR })
      }
      span.end(endMs)
    },
    current: () => traceparentOf(trace.getSpan(context.active())),
    setOnRequest(request, attributes) {
      const traced = (request as { opentelemetry?: () => { span?: Span } }).opentelemetry
      const span = traced?.call(request).span
      if (span?.isRecording() === true) span.setAttributes(defined(attributes))
    },
    logIds() {
      const span = trace.getSpan(context.active())
      if (span === undefined) return undefined
      const { traceId, spanId } = span.spanContext()
      return { trace_id: traceId, span_id: spanId }
    },
    async shutdown() {
      stopRedis()
      await provider.shutdown()
      trace.disable()
      propagation.disable()
      context.disable()
    },
  }
}
