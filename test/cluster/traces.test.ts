/**
 * Traces across nodes (server processes on one PostgreSQL and one Redis, exporting to an OTLP/HTTP
 * receiver of the test's own): a job submitted on node A (which runs none) and run on node B is
 * one trace, from the submission through the run, its conversion's pages and its end; its event's
 * delivery is an attempt span of that trace, and the receiver gets the attempt's `traceparent`.
 * Nothing exported carries the key, the webhook's secret or its URL's token.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { loadConfig } from '../../src/config/config.ts'
import { resolvePepper } from '../../src/config/pepper.ts'
import { resolveKeyring } from '../../src/config/encryption.ts'
import { openStore } from '../../src/storage/factory.ts'
import { Accounts } from '../../src/services/accounts.ts'
import { Webhooks } from '../../src/services/webhooks.ts'
import { isFailure } from '../../src/services/outcome.ts'
import { SYSTEM } from '../../src/domain/accounts.ts'
import { createCaller, tempDir } from '../support/helper.ts'
import { startServer } from '../support/process.ts'
import { createDatabase, dropPrefix, redisUrl, skipUnless, uniqueName } from '../support/services.ts'
import { SKIP_CORPUS, real } from '../support/convert.ts'
import { Receiver, waitFor } from '../support/receiver.ts'
import { OtlpReceiver } from '../support/otlp.ts'

const skip = skipUnless('TEST_DATABASE_URL', 'TEST_REDIS_URL') || SKIP_CORPUS
const PEPPER = 'cluster-traces-pepper-'.padEnd(40, 'x')

test('a job submitted on one node and run on another is one trace, down to its webhook attempt, whose receiver gets its traceparent', {
  skip,
  timeout: 120_000,
}, async (t) => {
  const databaseUrl = await createDatabase(t)
  const prefix = `${uniqueName('t')}:`
  t.after(() => dropPrefix(prefix))
  const otlp = await new OtlpReceiver().start()
  t.after(() => otlp.close())
  const env = {
    NODE_ENV: 'test',
    PEPPER,
    ENCRYPTION_KEYS: `1:${randomBytes(32).toString('base64')}`,
    DATABASE_URL: databaseUrl,
    REDIS_URL: redisUrl(),
    REDIS_PREFIX: prefix,
    WEBHOOK_ALLOW_PRIVATE: 'true',
    WEBHOOK_POLL_MS: '100',
    JOB_POLL_MS: '100',
    CONVERTER_WORKERS: '2',
    PLAN_RATE: '0',
    OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_BSP_SCHEDULE_DELAY: '100',
  }
  const config = loadConfig({ ...env, DATA_DIR: tempDir(t) })
  const store = await openStore(config)
  t.after(() => store.close())
  const accounts = new Accounts({ store, pepper: resolvePepper(config), config })
  const { apiKey, accountId } = await createCaller(accounts)
  const hooks = await new Receiver().start()
  t.after(() => hooks.stop())
  const token = `tok${randomBytes(8).toString('hex')}`
  const made = await new Webhooks({ store, keyring: resolveKeyring(config), config }).create({ actor: SYSTEM }, accountId, {
    url: `http://127.0.0.1:${hooks.port}/hooks/${token}`,
  })
  assert.ok(!isFailure(made))
  hooks.secret = made.secret
  const a = startServer({ ...env, DATA_DIR: tempDir(t), JOB_WORKERS: '0', OTEL_SERVICE_NAME: 'node-a' }, t)
  const b = startServer({ ...env, DATA_DIR: tempDir(t), OTEL_SERVICE_NAME: 'node-b' }, t)
  const [{ url: urlA }] = await Promise.all([a.ready, b.ready])

  const form = new FormData()
  form.append('pdfDocument', new Blob([new Uint8Array(real('pdflatex-4-pages.pdf'))], { type: 'application/pdf' }), 'doc.pdf')
  form.append('operation', 'image')
  form.append('dpi', '72')
  const traceId = randomBytes(16).toString('hex')
  const res = await fetch(`${urlA}/converter/jobs`, {
    method: 'POST',
    headers: { 'x-api-key': apiKey, traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` },
    body: form,
  })
  assert.equal(res.status, 202, await res.clone().text())
  const { jobID } = (await res.json()) as { jobID: string }

  await waitFor(() => hooks.deliveries.some((d) => d.payload?.data.jobID === jobID), 60_000, 'the event')
  const delivery = hooks.deliveries.find((d) => d.payload?.data.jobID === jobID)!
  assert.equal(delivery.payload!.type, 'conversion.succeeded')
  const sent = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/.exec(String(delivery.headers.traceparent))
  assert.ok(sent, `the receiver gets a traceparent: ${delivery.headers.traceparent}`)
  assert.equal(sent[1], traceId, "the delivery is in the submission's trace")

  assert.equal(Object.hasOwn(delivery.payload!.data, '__traceparent'), false, 'the event as sent carries no trace of its own')
  const spans = await otlp.waitFor(
    (all) =>
      all.some((s) => s.spanId === sent[2]) &&
      all.some((s) => s.name === 'job.attempt') &&
      all.some((s) => s.traceId === traceId && s.name === 'POST /converter/jobs'),
  )
  const mine = spans.filter((s) => s.traceId === traceId)
  const tree = otlp.tree(traceId)
  t.diagnostic(`the trace:\n${tree.join('\n')}`)
  const submission = mine.find((s) => s.name === 'POST /converter/jobs')
  assert.equal(submission?.resource['service.name'], 'node-a')
  const attempt = mine.find((s) => s.name === 'job.attempt')
  assert.ok(attempt, tree.join('\n'))
  assert.equal(attempt.resource['service.name'], 'node-b', 'run on the other node')
  assert.equal(attempt.parentSpanId, submission!.spanId, 'the run is a child of the submission')
  assert.equal(attempt.attributes['tessera.job.id'], jobID)
  assert.equal(attempt.attributes['tessera.status'], 'succeeded')
  const pages = mine.filter((s) => s.name === 'conversion.page')
  assert.equal(pages.length, 4, tree.join('\n'))
  const underAttempt = (id: string): boolean => {
    for (let s = mine.find((x) => x.spanId === id); s !== undefined; s = mine.find((x) => x.spanId === s!.parentSpanId))
      if (s.spanId === attempt.spanId) return true
    return false
  }
  for (const page of pages) assert.ok(underAttempt(page.spanId), 'each page is under the run')
  const webhook = mine.find((s) => s.spanId === sent[2])
  assert.equal(webhook?.name, 'webhook.attempt')
  assert.ok(underAttempt(webhook.spanId), 'the delivery is caused by the run’s end')
  assert.equal(webhook.attributes['tessera.webhook.event'], 'conversion.succeeded')
  assert.equal(webhook.attributes['http.response.status_code'], 204)
  assert.ok(
    mine.some((s) => s.name === 'job.queue'),
    'the wait between submission and claim',
  )
  for (const s of mine) {
    const text = JSON.stringify([s.name, s.attributes, s.status, s.events])
    for (const secret of [apiKey, made.secret, token]) assert.ok(!text.includes(secret), `a span carries a secret: ${text}`)
  }
  await Promise.all([a.stop(), b.stop()])
})
