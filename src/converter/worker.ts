/**
 * A conversion worker: loads the engines once, then takes one job at a time from the
 * pool. Pages are rendered and sent one by one, never more than PAGE_WINDOW ahead of what
 * the consumer has taken, so memory stays bounded whatever the page count.
 */
import { parentPort } from 'node:worker_threads'
import * as mupdf from 'mupdf'
import { mupdfEngine } from './engines/mupdf.ts'
import { createGhostscriptEngine } from './engines/ghostscript.ts'
import type { OpenDocument, PdfEngine } from './engines/engine.ts'
import { resolvePages } from './pages.ts'
import { MIN_DPI, type FromWorker, type Job, type JobResult, type Refusal, type ToWorker } from './protocol.ts'

const PAGE_WINDOW = 2

if (parentPort === null) throw new Error('worker.ts runs as a worker thread')
const port = parentPort

// MuPDF reports repairs and warnings on stderr: the worker keeps them out of the logs.
mupdf.setLog(() => {})

const raster: PdfEngine = mupdfEngine
const vector: PdfEngine = await createGhostscriptEngine()

const send = (message: FromWorker, transfer: ArrayBuffer[] = []) => port.postMessage(message, transfer)

let acks = 0
let waiting: (() => void) | null = null
function nextAck(): Promise<void> {
  if (acks > 0) {
    acks--
    return Promise.resolve()
  }
  return new Promise((resolve) => {
    waiting = () => {
      waiting = null
      resolve()
    }
  })
}

const refuse = (code: Refusal['code'], params?: Refusal['params']): Refusal => ({ ok: false, code, params })

/** pixelsAt is the size of a page's render at `dpi`, in pixels. */
function pixelsAt(size: { width: number; height: number }, dpi: number): number {
  return Math.ceil((size.width * dpi) / 72) * Math.ceil((size.height * dpi) / 72)
}

function tooLarge(page: number, size: { width: number; height: number }, job: Job & { op: 'png' }): Refusal {
  const params = { page, dpi: job.dpi, megapixels: (pixelsAt(size, job.dpi) / 1e6).toFixed(1), limit: job.limits.maxPixels / 1e6 }
  let fit = Math.floor(72 * Math.sqrt(job.limits.maxPixels / (size.width * size.height)))
  while (fit > 1 && pixelsAt(size, fit) > job.limits.maxPixels) fit-- // pixels are whole: round down until it fits
  if (fit < MIN_DPI) return refuse('PAGE_TOO_LARGE_AT_ANY_DPI', { ...params, minDpi: MIN_DPI })
  return refuse('PAGE_TOO_LARGE', { ...params, fit })
}

async function renderPages(id: number, doc: OpenDocument, pages: readonly number[], job: Job & { op: 'png' }): Promise<JobResult> {
  for (const page of pages) {
    const size = doc.pageSize(page - 1)
    if (pixelsAt(size, job.dpi) > job.limits.maxPixels) return tooLarge(page, size, job)
  }
  send({ type: 'start', id, pages: pages.length, pageCount: doc.pageCount })
  let ahead = 0
  for (const page of pages) {
    if (ahead >= PAGE_WINDOW) {
      const blocked = acks === 0
      if (blocked) send({ type: 'paused', id })
      await nextAck()
      if (blocked) send({ type: 'resumed', id })
      ahead--
    }
    const png = doc.renderPng(page - 1, job.dpi, job.color)
    send({ type: 'page', id, page, png }, [png.buffer as ArrayBuffer])
    ahead++
  }
  return { ok: true, op: 'png', pageCount: doc.pageCount, pages: pages.length }
}

async function run(id: number, job: Job): Promise<JobResult> {
  const opened = raster.open!(job.pdf, job.password)
  if (!opened.ok) return opened.reason === 'password' ? refuse('PDF_PASSWORD_REQUIRED') : refuse('PDF_UNREADABLE')
  const doc = opened.document
  try {
    if (doc.pageCount > job.limits.maxPages) return refuse('TOO_MANY_PAGES', { count: doc.pageCount, limit: job.limits.maxPages })
    if (doc.pageCount === 0) return refuse('PDF_UNREADABLE')
    const pages = resolvePages(job.pages, doc.pageCount)
    if (pages === null) return refuse('PAGES_OUT_OF_RANGE', { count: doc.pageCount })
    if (job.op === 'png') return await renderPages(id, doc, pages, job)
    // A document MuPDF had to repair goes to Ghostscript as MuPDF repaired it, so that both engines see the same pages.
    const source = doc.repaired() ?? job.pdf
    const postscript = vector.postscript!(source, { pages, pageCount: doc.pageCount, color: job.color, password: job.password })
    return { ok: true, op: 'ps', pageCount: doc.pageCount, pages: pages.length, postscript }
  } finally {
    doc.close()
  }
}

port.on('message', (message: ToWorker) => {
  if (message.type === 'ack') {
    if (waiting) waiting()
    else acks++
    return
  }
  acks = 0
  run(message.id, message.job).then(
    (result) => send(
      { type: 'done', id: message.id, result, memoryBytes: raster.memoryBytes() + vector.memoryBytes() },
      result.ok && result.op === 'ps' ? [result.postscript.buffer as ArrayBuffer] : [],
    ),
    (error: unknown) => send({
      type: 'failed',
      id: message.id,
      message: error instanceof Error ? error.message : String(error),
      fatal: error instanceof WebAssembly.RuntimeError,
    }),
  )
})

send({ type: 'ready' })
