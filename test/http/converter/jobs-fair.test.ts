/**
 * Fair shares of conversion jobs (one node, SQLite): an account's backlog of 50 jobs never
 * stands before another account's first job, which starts within one job's time; a
 * synchronous conversion beside a queue of long jobs answers within about a page of theirs
 * plus its own time (it takes back the worker that helps a job, at its next page); and a
 * cancelled running job stops and frees its worker.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { availableParallelism } from 'node:os'
import { SKIP_CORPUS, real, unzip, upload } from '../../support/convert.ts'
import { textPages } from '../../support/hostile.ts'
import { createCaller, startApp, type Running } from '../../support/helper.ts'
import { waitFor } from '../../support/receiver.ts'

const SMALL = 'minimal-document.pdf'
const BIG = 'GeoTopo-komprimiert.pdf' // 117 pages

interface JobBody {
  jobID: string
  status: string
  pagesDone: number
  createdAt: string
  startedAt: string | null
  finishedAt: string | null
}

async function submit(app: Running, key: string, file: Buffer, fields: Record<string, string>): Promise<string> {
  const form = new FormData()
  form.append('pdfDocument', new Blob([new Uint8Array(file)], { type: 'application/pdf' }), 'doc.pdf')
  for (const [k, v] of Object.entries(fields)) form.append(k, v)
  const res = await fetch(`${app.url}/converter/jobs`, { method: 'POST', headers: { 'x-api-key': key }, body: form })
  assert.equal(res.status, 202)
  return ((await res.json()) as { jobID: string }).jobID
}

async function job(app: Running, key: string, id: string): Promise<JobBody> {
  return (await (await fetch(`${app.url}/converter/jobs/${id}`, { headers: { 'x-api-key': key } })).json()) as JobBody
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

test("with 50 of X's jobs queued, Y's first job starts within one job's time", { skip: SKIP_CORPUS, timeout: 180_000 }, async (t) => {
  const app = await startApp(t, { CONVERTER_WORKERS: '2', JOB_WORKERS: '1', JOB_MAX_RUNNING_PER_ACCOUNT: '1', JOB_POLL_MS: '50', PLAN_RATE: '0' })
  const y = await createCaller(app.accounts)
  const doc = real(SMALL)
  const xs: string[] = []
  for (let i = 0; i < 50; i++) xs.push(await submit(app, app.key, doc, { operation: 'image', dpi: '150' }))
  await waitFor(async () => (await job(app, app.key, xs[0]!)).status !== 'queued', 30_000, "X's first job to start")
  const submittedAt = Date.now()
  const yJob = await submit(app, y.apiKey, doc, { operation: 'image', dpi: '150' })
  let mine: JobBody | null = null
  await waitFor(
    async () => {
      mine = await job(app, y.apiKey, yJob)
      return mine.status === 'succeeded'
    },
    60_000,
    "Y's job",
  )
  const started = Date.parse(mine!.startedAt!)
  const xJobs = await Promise.all(xs.map((id) => job(app, app.key, id)))
  const before = xJobs.filter((j) => j.startedAt !== null && Date.parse(j.startedAt) > submittedAt && Date.parse(j.startedAt) < started)
  const times = xJobs.filter((j) => j.finishedAt !== null && j.startedAt !== null).map((j) => Date.parse(j.finishedAt!) - Date.parse(j.startedAt!))
  t.diagnostic(
    `Y started ${started - submittedAt} ms after its submission; ${before.length} of X's jobs started in between; an X job takes ${median(times)} ms`,
  )
  assert.ok(before.length <= 1, `${before.length} of X's jobs started before Y's first`)
  assert.ok(
    xJobs.some((j) => j.status === 'queued'),
    "X's backlog was still there",
  )
  for (const id of xs) await fetch(`${app.url}/converter/jobs/${id}`, { method: 'DELETE', headers: { 'x-api-key': app.key } })
})

test('a synchronous conversion beside a queue of 117-page jobs answers within a page of theirs plus its own', {
  skip: SKIP_CORPUS,
  timeout: 180_000,
}, async (t) => {
  const app = await startApp(t, { CONVERTER_WORKERS: '2', JOB_WORKERS: '1', JOB_POLL_MS: '50', PLAN_RATE: '0' })
  const other = await createCaller(app.accounts)
  const small = real(SMALL)
  const sync = async () => {
    const started = performance.now()
    const res = await upload(app.url, '/converter/generateImage', other.apiKey, small, { dpi: '150' })
    assert.equal(res.status, 200)
    await res.arrayBuffer()
    return performance.now() - started
  }
  await sync()
  const alone: number[] = []
  for (let i = 0; i < 5; i++) alone.push(await sync())
  // A page of the big document, on its own.
  const pageStarted = performance.now()
  const page = await upload(app.url, '/converter/generateImage', other.apiKey, real(BIG), { dpi: '150', pages: '1-4' })
  assert.equal(page.status, 200)
  await page.arrayBuffer()
  const pageMs = (performance.now() - pageStarted) / 4

  const jobs: string[] = []
  for (let i = 0; i < 4; i++) jobs.push(await submit(app, app.key, real(BIG), { operation: 'image', dpi: '150' }))
  await waitFor(async () => (await job(app, app.key, jobs[0]!)).pagesDone >= 3, 60_000, 'the first job under way')
  const during: number[] = []
  for (let i = 0; i < 5; i++) during.push(await sync())
  const first = await job(app, app.key, jobs[0]!)
  t.diagnostic(`sync alone ${median(alone).toFixed(0)} ms, beside the jobs ${median(during).toFixed(0)} ms; a page of ${BIG} ${pageMs.toFixed(0)} ms`)
  assert.equal(first.status, 'running', 'the job was still running')
  assert.ok(median(during) <= median(alone) + 2 * pageMs + 250, `beside the jobs ${median(during).toFixed(0)} ms`)

  // Cancelled while running: it stops, and its worker is free for the next job or request.
  const cancelled = await fetch(`${app.url}/converter/jobs/${jobs[0]!}`, { method: 'DELETE', headers: { 'x-api-key': app.key } })
  assert.equal(cancelled.status, 200)
  assert.equal(((await cancelled.json()) as JobBody).status, 'cancelled')
  await waitFor(async () => (await job(app, app.key, jobs[1]!)).status === 'running', 15_000, 'the next job to take its place')
  const stopped = await job(app, app.key, jobs[0]!)
  assert.equal(stopped.status, 'cancelled')
  for (const id of jobs.slice(1)) await fetch(`${app.url}/converter/jobs/${id}`, { method: 'DELETE', headers: { 'x-api-key': app.key } })
})

test("on a 2-CPU node's defaults, one account's two long jobs do not hold another account's one-page job: it runs at the next page, and the long ones end whole", {
  timeout: 240_000,
}, async (t) => {
  // The defaults on this machine's 2 CPUs: 2 conversion workers, 1 job place (a synchronous conversion keeps a worker).
  const app = await startApp(t, { JOB_POLL_MS: '50', PLAN_RATE: '0' })
  t.diagnostic(`CPUs ${availableParallelism()}`)
  const b = await createCaller(app.accounts)
  // Long enough that A's first job is far from done when B's ends (it was at page 38 of 300 when it had 300), short enough that the
  // three end whole in a few seconds of CPU each.
  const LONG = 120
  const long = textPages(LONG)
  const a1 = await submit(app, app.key, long, { operation: 'image', dpi: '150' })
  const a2 = await submit(app, app.key, long, { operation: 'image', dpi: '150' })
  await waitFor(async () => (await job(app, app.key, a1)).pagesDone >= 20, 60_000, "A's first job under way")
  const submittedAt = Date.now()
  const one = await submit(app, b.apiKey, textPages(1), { operation: 'image', dpi: '150' })
  let mine: JobBody | null = null
  await waitFor(
    async () => {
      mine = await job(app, b.apiKey, one)
      return mine.status === 'succeeded'
    },
    60_000,
    "B's job",
  )
  const waited = Date.parse(mine!.finishedAt!) - submittedAt
  const aThen = await job(app, app.key, a1)
  // B's own long job then runs beside A's (a place past the node's one, for an account with none running): both workers are
  // jobs' now, and a synchronous conversion of a third account takes one at a job's next page, once its slice is over.
  const b1 = await submit(app, b.apiKey, long, { operation: 'image', dpi: '150' })
  await waitFor(async () => (await job(app, b.apiKey, b1)).pagesDone >= 5, 60_000, "B's long job under way")
  const c = await createCaller(app.accounts)
  const syncStarted = performance.now()
  const sync = await upload(app.url, '/converter/generateImage', c.apiKey, textPages(1), { dpi: '150' })
  assert.equal(sync.status, 200)
  await sync.arrayBuffer()
  const syncMs = performance.now() - syncStarted
  t.diagnostic(
    `B's one-page job ended ${waited} ms after its submission, A's first job then at page ${aThen.pagesDone} of ${LONG}; a synchronous conversion beside two long jobs ${syncMs.toFixed(0)} ms`,
  )
  assert.equal(aThen.status, 'running', "A's first job was still running: B's did not wait for it")
  assert.ok(waited < 5000, `B's job took ${waited} ms`)
  assert.ok(syncMs < 5000, `the synchronous conversion took ${syncMs.toFixed(0)} ms`)

  // A's jobs gave way page by page, and still end whole: every page, in order.
  for (const [id, key] of [
    [a1, app.key],
    [a2, app.key],
    [b1, b.apiKey],
  ] as const) {
    let done: JobBody | null = null
    await waitFor(
      async () => {
        done = await job(app, key, id)
        return done.status !== 'queued' && done.status !== 'running'
      },
      180_000,
      `A's job ${id}`,
    )
    assert.equal(done!.status, 'succeeded')
    const result = await fetch(`${app.url}/converter/jobs/${id}/result`, { headers: { 'x-api-key': key } })
    const entries = unzip(Buffer.from(await result.arrayBuffer()))
    assert.deepEqual(
      entries.map((e) => e.name),
      Array.from({ length: LONG }, (_, i) => `doc-${String(i + 1).padStart(3, '0')}.png`),
    )
  }
})
