/**
 * Conversion jobs at their edges (one node, SQLite): a document fetched from its sourceUrl,
 * and every way that fetch fails; a resultUrl that refuses the result (the job fails, the
 * result stays downloadable); the per-account storage cap and the output cap; a result past
 * its TTL answers 410; the metrics count what the jobs did.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { SKIP_CORPUS, real } from '../../support/convert.ts'
import { startApp, type Running } from '../../support/helper.ts'
import { waitFor } from '../../support/receiver.ts'

interface JobBody {
  jobID: string
  status: string
  source: string
  result: { size: number; type: string; name: string } | null
  resultGone: boolean
  error: { code: string; message: string } | null
}

const TOKEN = 'a-metrics-token-of-at-least-32-characters'
const ENV = { WEBHOOK_ALLOW_PRIVATE: 'true', JOB_POLL_MS: '50', PLAN_RATE: '0' }

async function submitJson(app: Running, body: Record<string, unknown>): Promise<string> {
  const res = await fetch(`${app.url}/converter/jobs`, {
    method: 'POST',
    headers: { 'x-api-key': app.key, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })
  assert.equal(res.status, 202, await res.clone().text())
  return ((await res.json()) as { jobID: string }).jobID
}

async function submitFile(app: Running, file: Buffer, fields: Record<string, string>): Promise<string> {
  const form = new FormData()
  form.append('pdfDocument', new Blob([new Uint8Array(file)], { type: 'application/pdf' }), 'doc.pdf')
  for (const [k, v] of Object.entries(fields)) form.append(k, v)
  const res = await fetch(`${app.url}/converter/jobs`, { method: 'POST', headers: { 'x-api-key': app.key }, body: form })
  assert.equal(res.status, 202)
  return ((await res.json()) as { jobID: string }).jobID
}

async function ended(app: Running, id: string, ms = 60_000): Promise<JobBody> {
  let body: JobBody | null = null
  await waitFor(
    async () => {
      body = (await (await fetch(`${app.url}/converter/jobs/${id}`, { headers: { 'x-api-key': app.key } })).json()) as JobBody
      return body.status !== 'queued' && body.status !== 'running'
    },
    ms,
    `job ${id}`,
  )
  return body!
}

/** A file server of the test: each path its own answer. */
async function files(t: { after(fn: () => unknown): void }, routes: Record<string, (res: http.ServerResponse) => void>) {
  const seen: { method: string; path: string; bytes: number }[] = []
  const server = http.createServer((req, res) => {
    let bytes = 0
    req.on('data', (c: Buffer) => {
      bytes += c.length
    })
    req.on('end', () => {
      seen.push({ method: req.method ?? '', path: req.url ?? '', bytes })
      const route = routes[(req.url ?? '').split('?')[0]!]
      if (route === undefined) {
        res.statusCode = 404
        res.end('no')
      } else route(res)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => new Promise((resolve) => server.close(resolve)))
  return { seen, base: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }
}

test('a document from its sourceUrl converts; a failing, non-PDF or oversized one fails the job with its reason', {
  skip: SKIP_CORPUS,
  timeout: 120_000,
}, async (t) => {
  const app = await startApp(t, { ...ENV, JOB_MAX_DOCUMENT_BYTES: '200000' })
  const pdf = real('pdflatex-4-pages.pdf')
  const big = real('GeoTopo-komprimiert.pdf')
  const server = await files(t, {
    '/docs/Quarterly%20Report.pdf': (res) => res.end(pdf),
    '/redirect': (res) => {
      res.statusCode = 302
      res.setHeader('location', '/docs/Quarterly%20Report.pdf')
      res.end()
    },
    '/text.pdf': (res) => res.end('hello, not a PDF'),
    '/big.pdf': (res) => res.end(big),
  })
  const ok = await ended(app, await submitJson(app, { operation: 'postscript', sourceUrl: `${server.base}/redirect?token=secret` }))
  assert.equal(ok.status, 'succeeded', JSON.stringify(ok.error))
  assert.equal(ok.source, 'url')
  assert.equal(ok.result?.type, 'application/postscript')
  const named = await ended(app, await submitJson(app, { operation: 'postscript', sourceUrl: `${server.base}/docs/Quarterly%20Report.pdf` }))
  assert.equal(named.result?.name, 'Quarterly_Report.ps', 'named after the URL')

  const missing = await ended(app, await submitJson(app, { operation: 'image', sourceUrl: `${server.base}/nothing.pdf?X-Amz-Signature=secret` }))
  assert.deepEqual([missing.status, missing.error?.code], ['failed', 'SOURCE_FETCH_FAILED'])
  assert.match(missing.error!.message, /HTTP 404/)
  assert.ok(!missing.error!.message.includes('secret'), 'never the query of the URL')
  const text = await ended(app, await submitJson(app, { operation: 'image', sourceUrl: `${server.base}/text.pdf` }))
  assert.deepEqual([text.status, text.error?.code], ['failed', 'SOURCE_FETCH_FAILED'])
  assert.match(text.error!.message, /not a PDF/)
  const oversized = await ended(app, await submitJson(app, { operation: 'image', sourceUrl: `${server.base}/big.pdf` }))
  assert.deepEqual([oversized.status, oversized.error?.code], ['failed', 'FILE_TOO_LARGE'])
  const closed = await ended(app, await submitJson(app, { operation: 'image', sourceUrl: 'http://127.0.0.1:1/doc.pdf' }))
  assert.deepEqual([closed.status, closed.error?.code], ['failed', 'SOURCE_FETCH_FAILED'])
  // An upload over the same limit is refused at once.
  const form = new FormData()
  form.append('operation', 'image')
  form.append('pdfDocument', new Blob([new Uint8Array(big)], { type: 'application/pdf' }), 'big.pdf')
  const refused = await fetch(`${app.url}/converter/jobs`, { method: 'POST', headers: { 'x-api-key': app.key }, body: form })
  assert.equal(refused.status, 413)
})

test('a resultUrl that refuses the result fails the job after three tries; the result stays downloadable', {
  skip: SKIP_CORPUS,
  timeout: 120_000,
}, async (t) => {
  const app = await startApp(t, ENV)
  const bucket = await files(t, {
    '/denied': (res) => {
      res.statusCode = 403
      res.end('<Error><Code>SignatureDoesNotMatch</Code></Error>')
    },
  })
  const id = await submitFile(app, real('minimal-document.pdf'), { operation: 'image', resultUrl: `${bucket.base}/denied?X-Amz-Signature=secret` })
  const job = await ended(app, id)
  assert.deepEqual([job.status, job.error?.code], ['failed', 'RESULT_UPLOAD_FAILED'])
  assert.match(job.error!.message, /HTTP 403/)
  assert.equal(bucket.seen.filter((s) => s.method === 'PUT').length, 3, 'three tries')
  assert.ok(job.result !== null && job.result.type === 'image/png')
  const download = await fetch(`${app.url}/converter/jobs/${id}/result`, { headers: { 'x-api-key': app.key } })
  assert.equal(download.status, 200)
  assert.equal((await download.arrayBuffer()).byteLength, job.result.size)
})

test("the account's storage cap and the output cap fail a job with their errors; a result past its TTL is 410", {
  skip: SKIP_CORPUS,
  timeout: 120_000,
}, async (t) => {
  const app = await startApp(t, { ...ENV, JOB_STORAGE_PER_ACCOUNT_MB: '2', JOB_MAX_OUTPUT_BYTES: '2000000', METRICS_TOKEN: TOKEN })
  const doc = real('pdflatex-4-pages.pdf')
  // The output cap (2 MB) first, with the account's whole room (2 MiB) free but for the document (which counts while it is held).
  const tooLarge = await ended(app, await submitFile(app, doc, { operation: 'image', dpi: '300' }))
  assert.deepEqual([tooLarge.status, tooLarge.error?.code], ['failed', 'OUTPUT_TOO_LARGE'])
  // Kept results: 346 kB, then 1.34 MB, fit; a second 1.34 MB does not.
  const small = await ended(app, await submitFile(app, doc, { operation: 'image', dpi: '72' }))
  assert.equal(small.status, 'succeeded')
  const first = await ended(app, await submitFile(app, doc, { operation: 'image', dpi: '150' }))
  assert.equal(first.status, 'succeeded')
  const second = await ended(app, await submitFile(app, doc, { operation: 'image', dpi: '150' }))
  assert.deepEqual([second.status, second.error?.code], ['failed', 'JOB_STORAGE_FULL'])
  assert.equal(second.result, null, 'nothing of it kept')
  // Deleting a kept result frees its room.
  for (const j of [small, first])
    assert.equal((await fetch(`${app.url}/converter/jobs/${j.jobID}`, { method: 'DELETE', headers: { 'x-api-key': app.key } })).status, 200)
  const again = await ended(app, await submitFile(app, doc, { operation: 'image', dpi: '150' }))
  assert.equal(again.status, 'succeeded')

  const pruned = await app.store.jobs.prune(new Date(Date.now() + 2 * 86_400_000).toISOString(), new Date(0).toISOString())
  assert.equal(pruned.results, 1)
  const gone = await fetch(`${app.url}/converter/jobs/${again.jobID}/result`, { headers: { 'x-api-key': app.key } })
  assert.equal(gone.status, 410)
  assert.equal(((await (await fetch(`${app.url}/converter/jobs/${again.jobID}`, { headers: { 'x-api-key': app.key } })).json()) as JobBody).resultGone, true)

  const metrics = await (await fetch(`${app.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).text()
  assert.match(metrics, /tessera_jobs_ended_total\{status="failed"[^}]*\} 2\n/)
  assert.match(metrics, /tessera_jobs_ended_total\{status="succeeded"[^}]*\} [2-3]\n/)
  assert.match(metrics, /tessera_jobs\{status="succeeded"[^}]*\} [2-3]\n/)
  assert.match(metrics, /tessera_job_duration_seconds_count\{[^}]*\} [4-5]\n/)
})
