/**
 * Conversion jobs end to end on one node (SQLite): a submission answers 202 at once; the
 * account's webhook receiver (verified with `standardwebhooks`) hears `conversion.succeeded`
 * once; the result downloads byte for byte as the synchronous route's answer and arrives at
 * the job's resultUrl; another account's key finds nothing; an Idempotency-Key makes one job
 * however many submit it at once; and a sourceUrl or resultUrl to a private address is refused.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import net, { type AddressInfo } from 'node:net'
import { once } from 'node:events'
import { SKIP_CORPUS, real, unzip, upload } from '../../support/convert.ts'
import { createCaller, startApp, type Running } from '../../support/helper.ts'
import { listening, waitFor } from '../../support/receiver.ts'
import { SYSTEM } from '../../../src/domain/accounts.ts'

const DOC = 'pdflatex-4-pages.pdf'

interface JobBody {
  jobID: string
  status: string
  statusUrl?: string
  result?: { url: string; size: number; type: string; name: string; pages: number } | null
  error?: { code: string } | null
  metadata?: unknown
  pagesDone?: number
  pagesTotal?: number | null
}

async function submit(app: Running, fields: Record<string, string>, file: Buffer | null = real(DOC), headers: Record<string, string> = {}, key = app.key) {
  const form = new FormData()
  if (file !== null) form.append('pdfDocument', new Blob([new Uint8Array(file)], { type: 'application/pdf' }), 'Report 2026.pdf')
  for (const [k, v] of Object.entries(fields)) form.append(k, v)
  return fetch(`${app.url}/converter/jobs`, { method: 'POST', headers: { 'x-api-key': key, ...headers }, body: form })
}

async function job(app: Running, id: string, key = app.key): Promise<{ status: number; body: JobBody }> {
  const res = await fetch(`${app.url}/converter/jobs/${id}`, { headers: { 'x-api-key': key } })
  return { status: res.status, body: (await res.json()) as JobBody }
}

async function until(app: Running, id: string, done: (b: JobBody) => boolean, ms = 60_000): Promise<JobBody> {
  let last: JobBody | null = null
  await waitFor(
    async () => {
      last = (await job(app, id)).body
      return done(last)
    },
    ms,
    `job ${id} to end`,
  )
  return last!
}

/** A real HTTP server that takes PUTs, as a presigned bucket URL does. */
async function bucket(t: { after(fn: () => unknown): void }) {
  const puts: { path: string; headers: http.IncomingHttpHeaders; body: Buffer }[] = []
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      puts.push({ path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks) })
      res.statusCode = req.method === 'PUT' ? 200 : 405
      res.end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => new Promise((resolve) => server.close(resolve)))
  return { puts, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }
}

test('a job runs to its event, its result is the synchronous answer, and reaches its resultUrl', { skip: SKIP_CORPUS, timeout: 120_000 }, async (t) => {
  const app = await startApp(t, { WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_POLL_MS: '50', JOB_POLL_MS: '50', PLAN_RATE: '0' })
  const receiver = await listening(app, t)
  const { puts, url } = await bucket(t)

  const res = await submit(app, {
    operation: 'image',
    dpi: '72',
    metadata: JSON.stringify({ invoice: 'INV-7' }),
    resultUrl: `${url}/bucket/out.zip?X-Amz-Signature=secret`,
  })
  assert.equal(res.status, 202)
  const accepted = (await res.json()) as JobBody
  assert.match(accepted.jobID, /^job_[0-9a-f]{21}$/)
  assert.equal(res.headers.get('location'), `/converter/jobs/${accepted.jobID}`)
  assert.equal(accepted.statusUrl, `${app.config.publicBaseUrl}/converter/jobs/${accepted.jobID}`)

  const done = await until(app, accepted.jobID, (b) => b.status === 'succeeded' || b.status === 'failed')
  assert.equal(done.status, 'succeeded', JSON.stringify(done.error))
  assert.deepEqual(done.metadata, { invoice: 'INV-7' })
  assert.equal(done.pagesDone, 4)
  assert.equal(done.result?.type, 'application/zip')
  assert.equal(done.result?.name, 'Report_2026.zip')

  const download = await fetch(`${app.url}/converter/jobs/${accepted.jobID}/result`, { headers: { 'x-api-key': app.key } })
  assert.equal(download.status, 200)
  assert.equal(download.headers.get('content-type'), 'application/zip')
  assert.equal(download.headers.get('x-page-count'), '4')
  assert.equal(download.headers.get('content-disposition'), 'attachment; filename="Report_2026.zip"')
  const bytes = Buffer.from(await download.arrayBuffer())
  assert.equal(bytes.length, done.result?.size)
  const sync = Buffer.from(await (await upload(app.url, '/converter/generateImage', app.key, real(DOC), { dpi: '72' }, 'Report 2026.pdf')).arrayBuffer())
  assert.ok(bytes.equals(sync), 'the same bytes as the synchronous route')
  assert.deepEqual(
    unzip(bytes).map((e) => e.name),
    ['Report_2026-1.png', 'Report_2026-2.png', 'Report_2026-3.png', 'Report_2026-4.png'],
  )

  assert.equal(puts.length, 1, 'one PUT')
  assert.equal(puts[0]!.path, '/bucket/out.zip?X-Amz-Signature=secret')
  assert.equal(puts[0]!.headers['content-type'], 'application/zip')
  assert.equal(puts[0]!.headers['content-length'], String(bytes.length))
  assert.ok(puts[0]!.body.equals(bytes), 'the resultUrl received the same bytes')

  await waitFor(() => receiver.ids().size >= 1, 15_000, 'the event')
  await new Promise((r) => setTimeout(r, 300))
  assert.equal(receiver.deliveries.length, 1, 'once')
  const event = receiver.deliveries[0]!.payload!
  assert.equal(event.type, 'conversion.succeeded')
  assert.equal(event.data.jobID, accepted.jobID)
  assert.deepEqual(event.data.metadata, { invoice: 'INV-7' })
  const result = event.data.result as { url: string; size: number; type: string }
  assert.deepEqual([result.url, result.size, result.type], [done.result!.url, bytes.length, 'application/zip'])
  assert.ok(!receiver.deliveries[0]!.body.includes('X-Amz-Signature'), 'the resultUrl is never told back')
  const trail = await app.store.audit.list({ accountId: app.accountId, action: 'conversion.succeeded', limit: 5 })
  assert.equal(trail.items.length, 1, 'in the audit trail')

  // Another account's key finds nothing, and cannot cancel it.
  const other = await createCaller(app.accounts)
  assert.equal((await job(app, accepted.jobID, other.apiKey)).status, 404)
  const foreign = await fetch(`${app.url}/converter/jobs/${accepted.jobID}/result`, { headers: { 'x-api-key': other.apiKey } })
  assert.equal(foreign.status, 404)
  const gone = await fetch(`${app.url}/converter/jobs/${accepted.jobID}`, { method: 'DELETE', headers: { 'x-api-key': other.apiKey } })
  assert.equal(gone.status, 404)

  // Its owner deletes the result: 410 after.
  const deleted = await fetch(`${app.url}/converter/jobs/${accepted.jobID}`, { method: 'DELETE', headers: { 'x-api-key': app.key } })
  assert.equal(deleted.status, 200)
  assert.equal(((await deleted.json()) as { resultGone: boolean }).resultGone, true)
  assert.equal((await fetch(`${app.url}/converter/jobs/${accepted.jobID}/result`, { headers: { 'x-api-key': app.key } })).status, 410)
})

test('one job for 20 parallel submissions of one Idempotency-Key; another body under it is a 422', { skip: SKIP_CORPUS, timeout: 60_000 }, async (t) => {
  const app = await startApp(t, { JOB_WORKERS: '0', PLAN_RATE: '0' })
  const key = { 'idempotency-key': '"8e03978e-40d5-43e8-bc93-6894a57f9324"' }
  const answers = await Promise.all(Array.from({ length: 20 }, () => submit(app, { operation: 'postscript' }, real(DOC), key)))
  assert.deepEqual(new Set(answers.map((a) => a.status)), new Set([202]))
  const ids = new Set(await Promise.all(answers.map(async (a) => ((await a.json()) as JobBody).jobID)))
  assert.equal(ids.size, 1, 'one job')
  assert.equal(answers.filter((a) => a.headers.get('idempotent-replayed') === 'true').length, 19)
  const other = await submit(app, { operation: 'image' }, real(DOC), key)
  assert.equal(other.status, 422)
  assert.equal(((await other.json()) as { code: string }[])[0]!.code, 'IDEMPOTENCY_KEY_REUSED')
  const bad = await submit(app, { operation: 'image' }, real(DOC), { 'idempotency-key': 'é'.repeat(3) })
  assert.equal(bad.status, 400)
  const list = (await (await fetch(`${app.url}/converter/jobs`, { headers: { 'x-api-key': app.key } })).json()) as { jobs: JobBody[] }
  assert.equal(list.jobs.length, 1)
})

test('bad submissions get their catalogue errors, all at once; a private sourceUrl or resultUrl is refused', { skip: SKIP_CORPUS }, async (t) => {
  const app = await startApp(t, { JOB_WORKERS: '0', PLAN_RATE: '0' })
  const codes = async (res: Response) => ((await res.json()) as { code: string }[]).map((p) => p.code).sort()
  const none = await submit(app, { operation: 'image' }, null)
  assert.equal(none.status, 400)
  assert.deepEqual(await codes(none), ['JOB_SOURCE_REQUIRED'])
  const many = await submit(app, { operation: 'fax', dpi: '9000', pages: 'x', metadata: '[1]' })
  assert.deepEqual(await codes(many), ['DPI_INVALID', 'METADATA_INVALID', 'OPERATION_INVALID', 'PAGES_INVALID'])
  const json = (body: unknown) =>
    fetch(`${app.url}/converter/jobs`, { method: 'POST', headers: { 'x-api-key': app.key, 'content-type': 'application/json' }, body: JSON.stringify(body) })
  for (const url of [
    'https://127.0.0.1/doc.pdf',
    'https://localhost/doc.pdf',
    'http://example.com/doc.pdf',
    'https://[::1]/x',
    'https://169.254.169.254/latest',
  ]) {
    const res = await json({ operation: 'image', sourceUrl: url })
    assert.equal(res.status, 400, url)
    assert.deepEqual(await codes(res), ['SOURCE_URL_INVALID'], url)
    const out = await json({ operation: 'image', sourceUrl: 'https://example.com/doc.pdf', resultUrl: url })
    assert.deepEqual(await codes(out), ['RESULT_URL_INVALID'], url)
  }
  const surrogate = await fetch(`${app.url}/converter/jobs`, {
    method: 'POST',
    headers: { 'x-api-key': app.key, 'content-type': 'application/json' },
    body: '{"operation":"image","sourceUrl":"https://example.com/a.pdf","metadata":{"k":"\\ud800"},"password":"\\udc00"}',
  })
  assert.deepEqual(await codes(surrogate), ['METADATA_INVALID', 'PASSWORD_INVALID'])
  const plain = await fetch(`${app.url}/converter/jobs`, { method: 'POST', headers: { 'x-api-key': app.key, 'content-type': 'text/plain' }, body: 'a.pdf' })
  assert.equal(plain.status, 415)
  assert.deepEqual(await codes(plain), ['UNSUPPORTED_MEDIA_TYPE'])
  const broken = await fetch(`${app.url}/converter/jobs`, {
    method: 'POST',
    headers: { 'x-api-key': app.key, 'content-type': 'application/json' },
    body: '{"operation":',
  })
  assert.equal(broken.status, 400)
  const listed = await fetch(`${app.url}/converter/jobs?status=done&limit=500`, { headers: { 'x-api-key': app.key } })
  assert.equal(listed.status, 400)
  const cursor = await fetch(`${app.url}/converter/jobs?after=job_..%2Fx`, { headers: { 'x-api-key': app.key } })
  assert.equal(cursor.status, 400)
  for (const id of ['job_..', 'job_%2e%2e', '..', 'job_\u202e00000000000000000000']) {
    assert.equal((await job(app, encodeURIComponent(id))).status, 404, id)
  }
})

test('a node reads a bounded number of job documents at once, per account too; an aborted upload gives its place back', {
  skip: SKIP_CORPUS,
  timeout: 60_000,
}, async (t) => {
  const app = await startApp(t, { JOB_WORKERS: '0', PLAN_RATE: '0', JOB_UPLOADS_PER_ACCOUNT: '2', JOB_UPLOADS_AT_ONCE: '3' })
  const port = new URL(app.url).port
  /** An upload that sends its headers and the start of its body, then waits. */
  const slow = async (key: string) => {
    const socket = net.connect(Number(port), '127.0.0.1')
    await once(socket, 'connect')
    const boundary = 'x-boundary'
    socket.write(
      `POST /converter/jobs HTTP/1.1\r\nhost: 127.0.0.1\r\nx-api-key: ${key}\r\ncontent-type: multipart/form-data; boundary=${boundary}\r\ncontent-length: 1000000\r\n\r\n` +
        `--${boundary}\r\ncontent-disposition: form-data; name="pdfDocument"; filename="a.pdf"\r\ncontent-type: application/pdf\r\n\r\n%PDF-1.7\n`,
    )
    t.after(() => socket.destroy())
    return socket
  }
  const codes = async (res: Response) => ({ status: res.status, code: (await res.json()) as { code?: string } | { code: string }[] })
  const held = [await slow(app.key), await slow(app.key)]
  await new Promise((r) => setTimeout(r, 200))
  const mine = await submit(app, { operation: 'image' })
  const refused = await codes(mine)
  assert.equal(refused.status, 429)
  assert.equal((refused.code as { code: string }).code, 'JOB_UPLOADS_PER_ACCOUNT')
  assert.equal(mine.headers.get('retry-after'), '5')
  // A sourceUrl submission takes no place.
  const byUrl = await fetch(`${app.url}/converter/jobs`, {
    method: 'POST',
    headers: { 'x-api-key': app.key, 'content-type': 'application/json' },
    body: JSON.stringify({ operation: 'image', sourceUrl: 'https://example.com/a.pdf' }),
  })
  assert.equal(byUrl.status, 202)
  const other = await createCaller(app.accounts)
  const third = await slow(other.apiKey)
  await new Promise((r) => setTimeout(r, 200))
  const full = await submit(app, { operation: 'image' }, real(DOC), {}, (await createCaller(app.accounts)).apiKey)
  assert.equal(full.status, 503)
  assert.equal(((await full.json()) as { code: string }[])[0]!.code, 'JOB_UPLOADS_BUSY')
  for (const s of [...held, third]) s.destroy()
  await waitFor(async () => (await submit(app, { operation: 'image' })).status === 202, 5000, 'the places given back')
})

test('a submission costs the group’s units; reading, listing, downloading and cancelling jobs cost none', { skip: SKIP_CORPUS, timeout: 60_000 }, async (t) => {
  const app = await startApp(t, { JOB_WORKERS: '0' })
  await app.accounts.setPlan({ actor: SYSTEM }, app.accountId, { rate: 0, burst: 1, quota: 2, period: 'day', weights: { totp: 1, converter: 1 } })
  const first = await submit(app, { operation: 'image' })
  assert.equal(first.status, 202)
  const { jobID } = (await first.json()) as JobBody
  for (let i = 0; i < 5; i++) {
    assert.equal((await job(app, jobID)).status, 200)
    assert.equal((await fetch(`${app.url}/converter/jobs`, { headers: { 'x-api-key': app.key } })).status, 200)
    assert.equal((await fetch(`${app.url}/converter/jobs/${jobID}/result`, { headers: { 'x-api-key': app.key } })).status, 409)
  }
  assert.equal((await fetch(`${app.url}/converter/jobs/${jobID}`, { method: 'DELETE', headers: { 'x-api-key': app.key } })).status, 200)
  assert.equal((await submit(app, { operation: 'image' })).status, 202, 'the second unit')
  const over = await submit(app, { operation: 'image' })
  assert.equal(over.status, 429, 'the quota of 2 units is used by the two submissions alone')
  assert.equal((await job(app, jobID)).status, 200, 'a read still goes through')
})
