/**
 * An OTLP/HTTP receiver for tests: what a collector's `/v1/traces` gets, kept as spans. It reads
 * the JSON encoding (OTEL_EXPORTER_OTLP_PROTOCOL=http/json); a protobuf body is kept as bytes
 * (its content type and raw bytes are what a test of the default encoding reads).
 */
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { gunzipSync } from 'node:zlib'

export interface ReceivedSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId: string
  readonly name: string
  readonly kind: number
  readonly startMs: number
  readonly endMs: number
  readonly attributes: Readonly<Record<string, string | number | boolean>>
  readonly status: { readonly code?: number; readonly message?: string }
  readonly events: readonly unknown[]
  /** The resource's attributes (service.name, service.instance.id, …). */
  readonly resource: Readonly<Record<string, string | number | boolean>>
  readonly scope: string
}

interface AnyValue {
  stringValue?: string
  intValue?: string | number
  boolValue?: boolean
  doubleValue?: number
}

function value(v: AnyValue): string | number | boolean {
  if (v.stringValue !== undefined) return v.stringValue
  if (v.intValue !== undefined) return Number(v.intValue)
  if (v.boolValue !== undefined) return v.boolValue
  if (v.doubleValue !== undefined) return v.doubleValue
  return JSON.stringify(v)
}

function attributes(list: { key: string; value: AnyValue }[] | undefined): Record<string, string | number | boolean> {
  return Object.fromEntries((list ?? []).map((a) => [a.key, value(a.value)]))
}

export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = []
  /** Every body as received, with its content type (after gunzip). */
  readonly bodies: { type: string; bytes: Buffer; headers: http.IncomingHttpHeaders }[] = []
  readonly #server: http.Server
  url = ''

  constructor() {
    this.#server = http.createServer((request, response) => {
      const chunks: Buffer[] = []
      request.on('data', (c: Buffer) => chunks.push(c))
      request.on('end', () => {
        let bytes = Buffer.concat(chunks)
        if (request.headers['content-encoding'] === 'gzip') bytes = gunzipSync(bytes)
        const type = String(request.headers['content-type'] ?? '')
        this.bodies.push({ type, bytes, headers: request.headers })
        if (request.url === '/v1/traces' && type.startsWith('application/json')) this.#take(JSON.parse(bytes.toString('utf8')))
        response.writeHead(200, { 'content-type': type.startsWith('application/json') ? 'application/json' : 'application/x-protobuf' })
        response.end(type.startsWith('application/json') ? '{}' : '')
      })
    })
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve))
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`
    return this
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections()
    await new Promise<void>((resolve) => this.#server.close(() => resolve()))
  }

  #take(body: {
    resourceSpans?: {
      resource?: { attributes?: { key: string; value: AnyValue }[] }
      scopeSpans?: { scope?: { name?: string }; spans?: Record<string, unknown>[] }[]
    }[]
  }): void {
    for (const rs of body.resourceSpans ?? []) {
      const resource = attributes(rs.resource?.attributes)
      for (const ss of rs.scopeSpans ?? []) {
        for (const s of ss.spans ?? []) {
          this.spans.push({
            traceId: String(s.traceId),
            spanId: String(s.spanId),
            parentSpanId: String(s.parentSpanId ?? ''),
            name: String(s.name),
            kind: Number(s.kind),
            startMs: Number(BigInt(String(s.startTimeUnixNano)) / 1_000_000n),
            endMs: Number(BigInt(String(s.endTimeUnixNano)) / 1_000_000n),
            attributes: attributes(s.attributes as { key: string; value: AnyValue }[]),
            status: (s.status ?? {}) as { code?: number; message?: string },
            events: (s.events ?? []) as unknown[],
            resource,
            scope: ss.scope?.name ?? '',
          })
        }
      }
    }
  }

  /** waitFor: the spans once `done` says they are all here (polls; fails after `ms`). */
  async waitFor(done: (spans: readonly ReceivedSpan[]) => boolean, ms = 15_000): Promise<readonly ReceivedSpan[]> {
    const until = Date.now() + ms
    while (!done(this.spans)) {
      if (Date.now() > until) throw new Error(`spans not received in ${ms} ms; got: ${this.spans.map((s) => s.name).join(', ')}`)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    return this.spans
  }

  /** The trace of `traceId`, as indented lines `name` from its root down (children in start order): what a test compares. */
  tree(traceId: string): string[] {
    const mine = this.spans.filter((s) => s.traceId === traceId)
    const ids = new Set(mine.map((s) => s.spanId))
    const lines: string[] = []
    const walk = (parent: string, depth: number) => {
      for (const s of mine.filter((x) => (parent === '' ? !ids.has(x.parentSpanId) : x.parentSpanId === parent)).sort((a, b) => a.startMs - b.startMs)) {
        lines.push(`${'  '.repeat(depth)}${s.name}`)
        walk(s.spanId, depth + 1)
      }
    }
    walk('', 0)
    return lines
  }
}
