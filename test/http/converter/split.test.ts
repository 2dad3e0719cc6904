/**
 * One document's pages rendered by every free worker: the pages come in order and are those
 * one worker makes; a job that arrives meanwhile takes a helper at its next page; and the
 * time limit, the stall limit, cancellation, the output limit and the memory limit end the
 * whole job, whatever the number of its parts.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { ConversionPool, PoolError, type PoolOptions, type Running } from '../../../src/converter/pool.ts'
import type { ReplacementReason } from '../../../src/metrics/metrics.ts'
import type { JobResult } from '../../../src/converter/protocol.ts'
import { SKIP_CORPUS, pngSize, real, unzip, upload } from '../../support/convert.ts'
import { startApp } from '../../support/helper.ts'
import { imageSpec } from '../../../src/converter/image-options.ts'
import { jpxBomb } from '../../support/hostile.ts'

const limits = { maxPages: 500, maxPixels: 50e6, maxOutputBytes: 2 ** 30, maxMemoryBytes: 2 ** 30 }
const BIG = 'GeoTopo-komprimiert.pdf' // 117 pages
const png = (name: string, dpi: number, pages: { from: number; to: number }[] | null = null) => ({
  op: 'image' as const,
  pdf: new Uint8Array(real(name)),
  color: 'rgb' as const,
  pages,
  limits,
  image: imageSpec({ format: 'png' }, dpi),
})

interface Made {
  readonly running: Running
  readonly pages: { page: number; png: Uint8Array; at: number }[]
  readonly result: Promise<JobResult>
}

function pool(t: { after(fn: () => unknown): void }, options: Partial<PoolOptions> = {}): { pool: ConversionPool; recycled: ReplacementReason[] } {
  const recycled: ReplacementReason[] = []
  const made = new ConversionPool({
    size: 2,
    maxQueue: 4,
    maxJobsPerWorker: 1000,
    maxMemoryBytes: 768 * 1048576,
    timeoutMs: 60_000,
    stallTimeoutMs: 10_000,
    onRecycle: (reason) => recycled.push(reason),
    ...options,
  })
  t.after(() => made.close())
  return { pool: made, recycled }
}

/** take runs a job whose consumer takes each page at once. */
function take(on: ConversionPool, job: ReturnType<typeof png>): Made {
  const pages: Made['pages'] = []
  const running: Running = on.run(job, {
    onPage: (page, bytes) => {
      pages.push({ page, png: bytes, at: performance.now() })
      running.ack()
    },
  })
  return { running, pages, result: running.result }
}

async function until(what: () => boolean, ms = 20_000): Promise<void> {
  const end = Date.now() + ms
  while (!what()) {
    if (Date.now() > end) throw new Error('timed out waiting')
    await new Promise((r) => setTimeout(r, 5))
  }
}

test("a PNG job of several pages is rendered by both workers, its pages handed over in order and identical to one worker's", {
  skip: SKIP_CORPUS,
  timeout: 120_000,
}, async (t) => {
  const job = () => png(BIG, 50, [{ from: 3, to: 40 }])
  const one = pool(t, { size: 1 }).pool
  const alone = take(one, job())
  assert.equal((await alone.result).ok, true)
  assert.equal(alone.running.stats().workers, 1)

  const two = pool(t).pool
  const split = take(two, job())
  const result = await split.result
  assert.ok(result.ok && result.op === 'image' && result.pages === 38)
  assert.equal(split.running.stats().workers, 2, 'the free worker helped')
  assert.deepEqual(
    split.pages.map((p) => p.page),
    Array.from({ length: 38 }, (_, i) => i + 3),
  )
  for (const [i, p] of split.pages.entries()) assert.ok(Buffer.from(p.png).equals(Buffer.from(alone.pages[i]!.png)), `page ${p.page} differs from one worker's`)
})

test('a document of one page, or of pages chosen down to one, runs on one worker', { skip: SKIP_CORPUS }, async (t) => {
  const { pool: two } = pool(t)
  for (const job of [png('minimal-document.pdf', 72), png(BIG, 72, [{ from: 9, to: 9 }])]) {
    const made = take(two, job)
    assert.equal((await made.result).ok, true)
    assert.equal(made.running.stats().workers, 1)
    assert.equal(made.pages.length, 1)
  }
})

test('a one-page job that arrives while both workers render a long document waits about one page, not the document', {
  skip: SKIP_CORPUS,
  timeout: 120_000,
}, async (t) => {
  const { pool: two } = pool(t)
  const long = take(two, png(BIG, 150))
  await until(() => long.running.stats().workers === 2 && long.pages.length >= 6)
  // A page's time on one worker, from the long job's own pace (two workers: two pages per interval).
  const gaps = long.pages
    .slice(1)
    .map((p, i) => p.at - long.pages[i]!.at)
    .sort((a, b) => a - b)
  const pageMs = 2 * gaps[Math.floor(gaps.length / 2)]!
  const slowestPageMs = 2 * gaps.at(-1)!
  const submitted = performance.now()
  const short = take(two, png('minimal-document.pdf', 150))
  assert.equal((await short.result).ok, true)
  const { queuedMs } = short.running.stats()
  const pagesLeft = 117 - long.pages.length
  // Counted in the long job's pages, not timed against them (load can slow one page and not another): while the short job
  // waited, each worker finished at most the page it had, and came with the pages held back to keep the order.
  const meanwhile = long.pages.filter((p) => p.at >= submitted && p.at <= submitted + queuedMs).length
  t.diagnostic(
    `one-page job waited ${queuedMs.toFixed(0)} ms, ${meanwhile} pages of the long one; a page of the long one takes ${pageMs.toFixed(0)} ms (slowest ${slowestPageMs.toFixed(0)} ms); ${pagesLeft} pages were left`,
  )
  assert.ok(pagesLeft > 20, 'the long job was still running')
  assert.ok(meanwhile <= 4, `waited ${meanwhile} pages of the long job, more than the page each worker had`)
  const result = await long.result
  assert.ok(result.ok && result.pages === 117)
  assert.deepEqual(
    long.pages.map((p) => p.page),
    Array.from({ length: 117 }, (_, i) => i + 1),
    'in order after the helper left and came back',
  )
})

test('the time limit ends a split job at once: both workers replaced, the next job works', { skip: SKIP_CORPUS, timeout: 60_000 }, async (t) => {
  const { pool: two, recycled } = pool(t, { timeoutMs: 1500 })
  const long = take(two, png(BIG, 150))
  await assert.rejects(long.result, (e: unknown) => e instanceof PoolError && e.reason === 'timeout')
  assert.equal(long.running.stats().workers, 2)
  assert.deepEqual(recycled, ['timeout', 'timeout'])
  assert.ok(long.pages.length > 0 && long.pages.length < 117)
  const next = take(two, png('pdflatex-4-pages.pdf', 72))
  assert.equal((await next.result).ok, true)
})

test('a client that stops taking pages from a split job is given up on; cancelling one stops both its workers at their next page, none replaced', {
  skip: SKIP_CORPUS,
  timeout: 60_000,
}, async (t) => {
  const { pool: two, recycled } = pool(t, { stallTimeoutMs: 800 })
  const seen: number[] = []
  const stalled = two.run(png(BIG, 72), {
    onPage: (page) => {
      seen.push(page)
    },
  })
  await assert.rejects(stalled.result, (e: unknown) => e instanceof PoolError && e.reason === 'stalled')
  // The window: two pages per worker, never more, however long the client waits.
  assert.deepEqual(seen, [1, 2, 3, 4])
  assert.deepEqual(recycled, ['stalled', 'stalled'])

  recycled.length = 0
  const cancelled = take(two, png(BIG, 150))
  await until(() => cancelled.running.stats().workers === 2 && cancelled.pages.length >= 3)
  cancelled.running.cancel()
  await assert.rejects(cancelled.result, (e: unknown) => e instanceof PoolError && e.reason === 'cancelled')
  const next = take(two, png('pdflatex-4-pages.pdf', 72))
  assert.equal((await next.result).ok, true)
  // Terminating a worker mid-page would lose what libvips holds of it for good: they stop at their next page, and stay.
  assert.deepEqual(recycled, [])
})

test("the output limit counts every part's pages in order: the first page over it is never handed over", { skip: SKIP_CORPUS, timeout: 60_000 }, async (t) => {
  const job = png(BIG, 72, [{ from: 1, to: 30 }])
  const { pool: two, recycled } = pool(t)
  const all = take(two, job)
  assert.equal((await all.result).ok, true)
  const sizes = all.pages.map((p) => p.png.byteLength)
  const limit = sizes.slice(0, 12).reduce((a, b) => a + b, 0) + 1
  const capped = take(two, { ...png(BIG, 72, [{ from: 1, to: 30 }]), limits: { ...limits, maxOutputBytes: limit } })
  const result = await capped.result
  assert.deepEqual(result, { ok: false, code: 'OUTPUT_TOO_LARGE', params: { limit } })
  assert.deepEqual(
    capped.pages.map((p) => p.page),
    Array.from({ length: 12 }, (_, i) => i + 1),
  )
  // The parts stop at their next page: no worker is replaced, and the next job runs on both.
  const next = take(two, png(BIG, 72, [{ from: 1, to: 8 }]))
  assert.equal((await next.result).ok, true)
  assert.deepEqual(recycled, [])
})

test("no worker joins a job while another conversion's upload is being read: it will want the worker in a moment", {
  skip: SKIP_CORPUS,
  timeout: 60_000,
}, async (t) => {
  const { pool: two } = pool(t)
  const place = two.reserve()
  const alone = take(two, png(BIG, 50, [{ from: 1, to: 20 }]))
  assert.equal((await alone.result).ok, true)
  assert.equal(alone.running.stats().workers, 1)
  place.release()
  const split = take(two, png(BIG, 50, [{ from: 1, to: 20 }]))
  assert.equal((await split.result).ok, true)
  assert.equal(split.running.stats().workers, 2)
})

test('through HTTP, a split conversion streams its zip in page order, named as before, and its log line counts both workers', {
  skip: SKIP_CORPUS,
  timeout: 60_000,
}, async (t) => {
  const app = await startApp(t, { CONVERTER_WORKERS: '2' })
  const res = await upload(app.url, '/converter/generateImage', app.key, real(BIG), { dpi: '36', pages: '2-60' }, 'report.pdf')
  assert.equal(res.status, 200)
  assert.equal(res.headers.get('x-page-count'), '59')
  const entries = unzip(Buffer.from(await res.arrayBuffer()))
  assert.deepEqual(
    entries.map((e) => e.name),
    Array.from({ length: 59 }, (_, i) => `report-${String(i + 2).padStart(3, '0')}.png`),
  )
  for (const e of entries) assert.equal(pngSize(e.data).width > 0, true)
  const line = app.logs.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'conversion finished')
  assert.equal(line?.workers, 2)
  assert.equal(line?.pages, 59)
})

test('through HTTP, a split conversion over its time limit is cut short, both its workers are replaced, and the next conversion works', {
  skip: SKIP_CORPUS,
  timeout: 60_000,
}, async (t) => {
  const app = await startApp(t, { CONVERTER_WORKERS: '2', CONVERSION_TIMEOUT_MS: '1500' })
  const res = await upload(app.url, '/converter/generateImage', app.key, real(BIG), { dpi: '150' })
  assert.equal(res.status, 200, 'the zip starts at the first page')
  await assert.rejects(res.arrayBuffer(), 'the zip is cut short')
  await until(() => app.logs.filter((l) => l.includes('conversion worker replaced') && l.includes('timed out')).length === 2)
  const line = app.logs.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'conversion finished')
  assert.equal(line?.outcome, 'timeout')
  assert.equal(line?.workers, 2)
  const next = await upload(app.url, '/converter/generateImage', app.key, real('pdflatex-4-pages.pdf'), { dpi: '72' })
  assert.equal(next.status, 200)
  assert.equal(unzip(Buffer.from(await next.arrayBuffer())).length, 4)
})

test('the memory limit ends a split job: no page of it is handed over, every worker on it is replaced, the next job works', {
  skip: SKIP_CORPUS,
  timeout: 60_000,
}, async (t) => {
  const { pool: two, recycled } = pool(t)
  // Every page draws a JPEG 2000 image of 60000 × 60000 pixels: each worker on the job is refused memory at its first page.
  const bombs = take(two, { ...png(BIG, 72), pdf: new Uint8Array(jpxBomb(60000, 60000, 6)) })
  const result = await bombs.result
  assert.deepEqual(result, { ok: false, code: 'CONVERSION_MEMORY_EXCEEDED', params: { limit: 768 } })
  assert.equal(bombs.pages.length, 0)
  assert.equal(bombs.running.stats().workers, 2, 'the free worker helped')
  await until(() => recycled.length >= 2)
  assert.deepEqual(recycled, ['memory', 'memory'])
  const next = take(two, png(BIG, 50, [{ from: 1, to: 4 }]))
  assert.equal((await next.result).ok, true)
  assert.equal(next.pages.length, 4)
})

test("conversion jobs' runs give way at their next page, once their slice is over, to another account's conversion; they go on after it, every page once, in order", {
  skip: SKIP_CORPUS,
  timeout: 120_000,
}, async (t) => {
  const { pool: two, recycled } = pool(t)
  const background = (account: string) => {
    const pages: number[] = []
    const running: Running = two.background(
      png(BIG, 72),
      {
        onPage: (page) => {
          pages.push(page)
          running.ack()
        },
      },
      account,
      60_000,
    )
    return { running, pages, result: running.result }
  }
  // Two accounts' jobs hold both workers as leads.
  const a = background('a')
  const b = background('b')
  await until(() => a.pages.length >= 5 && b.pages.length >= 5)
  await new Promise((resolve) => setTimeout(resolve, 1100)) // past their slices
  const started = performance.now()
  const sync: Made = (() => {
    const pages: Made['pages'] = []
    const running: Running = two.run(
      png('pdflatex-4-pages.pdf', 72),
      {
        onPage: (page, bytes) => {
          pages.push({ page, png: bytes, at: performance.now() })
          running.ack()
        },
      },
      'c',
    )
    return { running, pages, result: running.result }
  })()
  assert.equal((await sync.result).ok, true)
  const syncMs = performance.now() - started
  const aAt = a.pages.length
  for (const job of [a, b]) {
    assert.deepEqual(await job.result, { ok: true, op: 'image', pageCount: 117, pages: 117 })
    assert.deepEqual(
      job.pages,
      Array.from({ length: 117 }, (_, i) => i + 1),
    )
  }
  t.diagnostic(`the synchronous conversion beside two jobs' runs: ${syncMs.toFixed(0)} ms (A then at page ${aAt} of 117)`)
  assert.ok(aAt < 117, 'the jobs were still running')
  assert.ok(syncMs < 3000, `${syncMs.toFixed(0)} ms`)
  assert.deepEqual(recycled, [], 'giving way replaces no worker')
})
