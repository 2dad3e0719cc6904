/**
 * OpenTelemetry traces, received by an OTLP/HTTP receiver of the test's own from real server
 * processes: off by default (no export, nothing loaded), the request's span and its children on
 * SQLite and on PostgreSQL + Redis, an incoming `traceparent` followed, log lines carrying the
 * trace, and no key, secret, code or query string in any exported attribute.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { TOTP, Secret } from 'otpauth'
import { tempDir } from '../../support/helper.ts'
import { startServer, type ServerProcess } from '../../support/process.ts'
import { OtlpReceiver, type ReceivedSpan } from '../../support/otlp.ts'
import { createDatabase, redisEnv, skipUnless } from '../../support/services.ts'
import { SKIP_CORPUS, real, upload } from '../../support/convert.ts'

const SECRET = 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP'
const code = () => new TOTP({ secret: Secret.fromBase32(SECRET) }).generate()

async function node(t: Parameters<typeof startServer>[1], env: Record<string, string>): Promise<{ server: ServerProcess; url: string; key: string }> {
  const server = startServer({ DATA_DIR: tempDir(t!), ...env }, t)
  const { url } = await server.ready
  const key = /API key is shown this once: (tsr_[0-9a-f]{40})/.exec(server.output())?.[1]
  assert.ok(key, server.output())
  return { server, url, key }
}

/** tracedNode: a receiver of the test's own, and a node exporting to it as JSON every 100 ms. */
async function tracedNode(t: Parameters<typeof startServer>[1], env: Record<string, string> = {}) {
  const receiver = await new OtlpReceiver().start()
  t!.after(() => receiver.close())
  const running = await node(t, { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_BSP_SCHEDULE_DELAY: '100', ...env })
  return { receiver, ...running }
}

const json = (key: string, extra: Record<string, string> = {}) => ({ 'x-api-key': key, 'content-type': 'application/json', ...extra })

/** Every string an exported span carries: attributes, resource, name, status, events. */
function strings(spans: readonly ReceivedSpan[]): string[] {
  return spans.flatMap((s) => [
    s.name,
    ...Object.values(s.attributes).map(String),
    ...Object.values(s.resource).map(String),
    s.status.message ?? '',
    JSON.stringify(s.events),
  ])
}

function assertNothingSecret(spans: readonly ReceivedSpan[], secrets: readonly string[]): void {
  for (const text of strings(spans)) {
    for (const secret of secrets) assert.ok(!text.includes(secret), `a span carries a secret: ${text}`)
    assert.ok(!text.includes('?'), `a span carries a query string: ${text}`)
  }
}

test('tracing is off by default: the node says so and loads no OpenTelemetry module', async (t) => {
  const { server } = await node(t, {})
  assert.match(server.output(), /"tracing":"off"/)
  const loaded = await fetch(`${(await server.ready).url}/healthz`)
  assert.equal(loaded.status, 200)
  await server.stop()
  // The SDK is imported only when tracing is on: tracing.ts's dynamic import of sdk.ts is the only door to it, so no other
  // module of the service names an OpenTelemetry package, nor sdk.ts itself statically.
  const { readFileSync, readdirSync } = await import('node:fs')
  const src = new URL('../../../src/', import.meta.url)
  const files = readdirSync(src, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts') && f !== 'tracing/sdk.ts')
  assert.ok(files.length > 100, `the service's modules: ${files.length}`)
  for (const file of files) {
    const text = readFileSync(new URL(file, src), 'utf8')
    assert.doesNotMatch(text, /from '@opentelemetry|from '@fastify\/otel|import\('@opentelemetry/, file)
    assert.doesNotMatch(text, /from '[./]*(tracing\/)?sdk\.ts'/, file)
  }
})

for (const [name, env, skip] of [
  ['sqlite', async () => ({}), false],
  [
    'postgres+redis',
    async (t: Parameters<typeof createDatabase>[0]) => ({ DATABASE_URL: await createDatabase(t), ...(await redisEnv(t)) }),
    skipUnless('TEST_DATABASE_URL', 'TEST_REDIS_URL'),
  ],
] as const) {
  test(`${name}: a verifyOTP call is one trace under the caller's traceparent: the request and the store's calls; its log line carries the trace`, {
    skip,
  }, async (t) => {
    const { receiver, server, url, key } = await tracedNode(t, { ...(await env(t)), OTEL_SERVICE_NAME: 'tessera-test' })
    assert.match(server.output(), /"tracing":"parentbased_always_on"/)
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736'
    const token = code()
    const res = await fetch(`${url}/totp/verifyOTP?secret=${SECRET}&token=${token}`, {
      method: 'POST',
      headers: json(key, { traceparent: `00-${traceId}-00f067aa0ba902b7-01` }),
      body: JSON.stringify({ secret: SECRET, token }),
    })
    assert.equal(res.status, 200, await res.clone().text())
    const spans = await receiver.waitFor((all) => all.some((s) => s.traceId === traceId && s.name === 'POST /totp/verifyOTP'))
    const request = spans.find((s) => s.traceId === traceId && s.name === 'POST /totp/verifyOTP')!
    assert.equal(request.parentSpanId, '00f067aa0ba902b7', "the caller's span is the request's parent")
    assert.equal(request.kind, 2, 'SERVER')
    assert.equal(request.attributes['http.route'], '/totp/verifyOTP')
    assert.equal(request.attributes['http.request.method'], 'POST')
    assert.equal(request.attributes['http.response.status_code'], 200)
    assert.equal(request.attributes['url.path'], '/totp/verifyOTP', 'the route, never its query')
    assert.equal(request.attributes['tessera.region'], 'eu')
    assert.match(String(request.attributes['tessera.account.id']), /^acc_/)
    assert.equal(request.resource['service.name'], 'tessera-test')
    assert.equal(request.resource['tessera.region'], 'eu')
    const tree = receiver.tree(traceId)
    t.diagnostic(`the trace:\n${tree.join('\n')}`)
    assert.equal(tree[0], 'POST /totp/verifyOTP', tree.join('\n'))
    assert.ok(
      tree.some((line) => /^ {2,}store (verification|access)\./.test(line)),
      `the store's calls are spans of the request:\n${tree.join('\n')}`,
    )
    if (name === 'postgres+redis') {
      const children = spans.filter((s) => s.traceId === traceId)
      assert.ok(
        children.some((s) => s.attributes['db.system.name'] === 'redis' && s.kind === 3),
        `a Redis command is a client span:\n${tree.join('\n')}`,
      )
      for (const s of children.filter((x) => x.attributes['db.system.name'] === 'redis' && x.kind === 3)) {
        assert.deepEqual(
          Object.keys(s.attributes).filter((k) => k.startsWith('db.query')),
          [],
          'no command text (keys, arguments)',
        )
      }
    }
    const line = server
      .output()
      .split('\n')
      .find((l) => l.includes('"request completed"') && l.includes('/totp/verifyOTP'))
    assert.ok(line, server.output())
    const logged = JSON.parse(line) as { trace_id?: string; span_id?: string }
    assert.equal(logged.trace_id, traceId)
    assert.ok(spans.some((s) => s.spanId === logged.span_id))
    // A customer's user ID in a path (an e-mail address here), and a path that matches no route, carrying a secret.
    const userId = 'alice@example.com'
    await fetch(`${url}/totp/users/${encodeURIComponent(userId)}/verify`, { method: 'POST', headers: json(key), body: JSON.stringify({ code: token }) })
    await fetch(`${url}/totp/${SECRET}/nowhere`, { headers: { 'x-api-key': key } })
    // A body that does not parse: JSON.parse's message quotes it, secret and all; the span keeps only that it failed.
    const broken = await fetch(`${url}/totp/verifyOTP`, { method: 'POST', headers: json(key), body: `{"token":"${token}","secret":"${SECRET}` })
    assert.equal(broken.status, 400)
    const all = await receiver.waitFor((got) => got.some((s) => s.name === 'POST /totp/users/:userID/verify') && got.some((s) => s.name === 'GET'))
    assert.equal(all.find((s) => s.name === 'POST /totp/users/:userID/verify')?.attributes['url.path'], '/totp/users/:userID/verify')
    assert.equal(all.find((s) => s.name === 'GET')?.attributes['url.path'], '(no route)')
    const refused = await receiver.waitFor((got) => got.some((s) => s.name === 'POST /totp/verifyOTP' && s.attributes['http.response.status_code'] === 400))
    const failed = refused.find((s) => s.name === 'POST /totp/verifyOTP' && s.attributes['http.response.status_code'] === 400)!
    t.diagnostic(`the refused request's span: status ${JSON.stringify(failed.status)}, events ${failed.events.length}`)
    assert.equal(failed.status.message ?? '', '', "the parser's message (which quotes the body) is not exported")
    assert.equal(failed.events.length, 0, 'nor an exception event')
    assertNothingSecret(all, [key, SECRET, token, userId, encodeURIComponent(userId)])
    await server.stop()
  })
}

test('the default encoding is OTLP protobuf, with the configured headers; a collector that is down costs no request', async (t) => {
  const receiver = await new OtlpReceiver().start()
  t.after(() => receiver.close())
  const { server, url, key } = await node(t, {
    OTEL_TRACES_EXPORTER: 'otlp',
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.url}/v1/traces`,
    OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20collector-token,x-tenant=a',
    OTEL_BSP_SCHEDULE_DELAY: '100',
    // An export retries within this time: short, so that the failure below is reported while the test waits.
    OTEL_EXPORTER_OTLP_TIMEOUT: '500',
  })
  assert.equal((await fetch(`${url}/totp/ping`, { headers: { 'x-api-key': key } })).status, 200)
  const until = Date.now() + 15_000
  while (!receiver.bodies.some((b) => b.bytes.includes(Buffer.from('GET /totp/ping'))) && Date.now() < until) await new Promise((r) => setTimeout(r, 50))
  const body = receiver.bodies.find((b) => b.bytes.includes(Buffer.from('GET /totp/ping')))
  assert.ok(body, 'a protobuf export names the span')
  assert.equal(body.type, 'application/x-protobuf')
  assert.equal(body.headers.authorization, 'Bearer collector-token')
  assert.equal(body.headers['x-tenant'], 'a')
  await receiver.close()
  for (let i = 0; i < 20; i++) assert.equal((await fetch(`${url}/totp/ping`, { headers: { 'x-api-key': key } })).status, 200)
  await new Promise((resolve) => setTimeout(resolve, 1500))
  assert.equal(await server.stop(), 0)
  assert.match(server.errors(), /"msg":"tracing: /, 'the failed export is reported')
  assert.equal(
    server
      .errors()
      .split('\n')
      .filter((l) => l.includes('"msg":"tracing: ')).length <= 2,
    true,
    'once a minute, not at every batch',
  )
  assert.doesNotMatch(server.output() + server.errors(), /collector-token/, 'the collector credentials are never logged')
})

test('a synchronous conversion is one trace: the request, the upload, the conversion with its queue wait, each worker and each page, and the answer streamed', {
  skip: SKIP_CORPUS,
}, async (t) => {
  const { receiver, server, url, key } = await tracedNode(t, { CONVERTER_WORKERS: '2' })
  const res = await upload(url, '/converter/generateImage?secret=in-the-query', key, real('pdflatex-4-pages.pdf'), { dpi: '72' })
  assert.equal(res.status, 200, await res.clone().text())
  const zip = Buffer.from(await res.arrayBuffer())
  const spans = await receiver.waitFor(
    (all) =>
      all.some((s) => s.name === 'POST /converter/generateImage') &&
      all.filter((s) => s.name === 'conversion.page').length >= 4 &&
      all.some((s) => s.name === 'conversion.stream'),
  )
  const request = spans.find((s) => s.name === 'POST /converter/generateImage')!
  const tree = receiver.tree(request.traceId)
  t.diagnostic(`the trace:\n${tree.join('\n')}`)
  const mine = spans.filter((s) => s.traceId === request.traceId)
  const byName = (name: string) => mine.filter((s) => s.name === name)
  const [conversion] = byName('conversion')
  assert.ok(conversion, tree.join('\n'))
  assert.equal(conversion.attributes['tessera.pages'], 4)
  assert.equal(conversion.attributes['tessera.outcome'], 'ok')
  const [upload_] = byName('conversion.upload')
  assert.ok(upload_ && upload_.attributes['tessera.bytes'] === real('pdflatex-4-pages.pdf').byteLength, 'the upload, its size')
  const [queue] = byName('conversion.queue')
  assert.equal(queue?.parentSpanId, conversion.spanId, 'the queue wait is the conversion’s')
  const pages = byName('conversion.page')
  assert.deepEqual(pages.map((p) => p.attributes['tessera.page']).sort(), [1, 2, 3, 4])
  for (const page of pages) {
    assert.equal(page.parentSpanId, conversion.spanId)
    assert.ok(page.startMs >= conversion.startMs - 5 && page.endMs <= conversion.endMs + 5, 'a page is drawn within its conversion')
    assert.equal(typeof page.attributes['tessera.worker'], 'number')
  }
  assert.ok(byName('conversion.worker').length >= 1)
  const [stream] = byName('conversion.stream')
  assert.equal(stream?.attributes['tessera.complete'], true)
  assert.equal(stream.parentSpanId, request.spanId)
  assert.equal(request.attributes['url.path'], '/converter/generateImage')
  assertNothingSecret(mine, [key, 'in-the-query', zip.subarray(100, 140).toString('latin1')])
  await server.stop()
})

test('the default sampler follows the caller: a request its caller did not sample is not exported, one it did is', async (t) => {
  const { receiver, server, url, key } = await tracedNode(t)
  const left = '11111111111111111111111111111111'
  const kept = '22222222222222222222222222222222'
  assert.equal((await fetch(`${url}/totp/ping`, { headers: { 'x-api-key': key, traceparent: `00-${left}-00f067aa0ba902b7-00` } })).status, 200)
  assert.equal((await fetch(`${url}/totp/ping`, { headers: { 'x-api-key': key, traceparent: `00-${kept}-00f067aa0ba902b7-01` } })).status, 200)
  await receiver.waitFor((all) => all.some((s) => s.traceId === kept))
  await new Promise((resolve) => setTimeout(resolve, 300))
  assert.equal(receiver.spans.filter((s) => s.traceId === left).length, 0)
  const line = server
    .output()
    .split('\n')
    .find((l) => l.includes('"request completed"') && l.includes(left))
  assert.ok(line, 'the log line of a request not sampled still names its trace (a proxy may have sampled it)')
  await server.stop()
})
