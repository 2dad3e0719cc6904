/**
 * A conversion worker: loads the engines once, then takes one job at a time from the
 * pool. Output (pages, pieces of PostScript) is sent as it is made, never more than a small
 * window ahead of what the consumer has taken, so memory stays bounded whatever its size:
 * the worker blocks on a shared counter until the consumer catches up, which works even in
 * the middle of Ghostscript's synchronous run.
 */
import { parentPort, workerData } from 'node:worker_threads'
import { getHeapStatistics } from 'node:v8'
import * as mupdf from 'mupdf'
import { mupdfEngine } from './engines/mupdf.ts'
import { GhostscriptError, createGhostscriptEngine } from './engines/ghostscript.ts'
import type { OpenDocument, PdfEngine } from './engines/engine.ts'
import { resolvePages } from './pages.ts'
import { IN_FLIGHT, MIN_DPI, type FromWorker, type Job, type JobResult, type Refusal, type ToWorker, type WorkerData } from './protocol.ts'

const PAGE_WINDOW = 2
/** PostScript goes out in pieces of this size, at most CHUNK_WINDOW of them not yet taken. */
const CHUNK_BYTES = 256 * 1024
const CHUNK_WINDOW = 4

if (parentPort === null) throw new Error('worker.ts runs as a worker thread')
const port = parentPort
const inFlight = new Int32Array((workerData as WorkerData).credit)

// MuPDF reports repairs and warnings on stderr: the worker keeps them out of the logs.
mupdf.setLog(() => {})

const raster: PdfEngine = mupdfEngine
const vector: PdfEngine = await createGhostscriptEngine((workerData as WorkerData).maxMemoryBytes)

const send = (message: FromWorker, transfer: ArrayBuffer[] = []) => port.postMessage(message, transfer)

/** memoryBytes is what the worker holds: both engines' WebAssembly memory and the live JS heap. */
function memoryBytes(): number {
  return raster.memoryBytes() + vector.memoryBytes() + getHeapStatistics().used_heap_size
}

/** sendOutput sends one piece of output once fewer than `window` are waiting for the consumer. */
function sendOutput(id: number, window: number, message: FromWorker, transfer: ArrayBuffer): void {
  let waiting = Atomics.load(inFlight, IN_FLIGHT)
  if (waiting >= window) {
    send({ type: 'paused', id })
    while (waiting >= window) {
      Atomics.wait(inFlight, IN_FLIGHT, waiting)
      waiting = Atomics.load(inFlight, IN_FLIGHT)
    }
    send({ type: 'resumed', id })
  }
  Atomics.add(inFlight, IN_FLIGHT, 1)
  send(message, [transfer])
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
  let total = 0
  for (const page of pages) {
    const png = doc.renderPng(page - 1, job.dpi, job.color)
    total += png.byteLength
    // The first page over the limit is refused before it is sent: a single PNG never starts.
    if (total > job.limits.maxOutputBytes) return refuse('OUTPUT_TOO_LARGE', { limit: job.limits.maxOutputBytes })
    sendOutput(id, PAGE_WINDOW, { type: 'page', id, page, png }, png.buffer as ArrayBuffer)
  }
  return { ok: true, op: 'png', pageCount: doc.pageCount, pages: pages.length }
}

/** writePostscript runs Ghostscript with its output cut into pieces and sent as it comes. */
function writePostscript(id: number, pdf: Uint8Array, pages: readonly number[], pageCount: number, job: Job & { op: 'ps' }): JobResult {
  let chunk = new Uint8Array(CHUNK_BYTES)
  let used = 0
  const flush = () => {
    const full = used === CHUNK_BYTES ? chunk : chunk.slice(0, used)
    sendOutput(id, CHUNK_WINDOW, { type: 'chunk', id, bytes: full }, full.buffer as ArrayBuffer)
    chunk = new Uint8Array(CHUNK_BYTES)
    used = 0
  }
  const sink = (bytes: Uint8Array) => {
    for (let at = 0; at < bytes.byteLength;) {
      const n = Math.min(CHUNK_BYTES - used, bytes.byteLength - at)
      chunk.set(bytes.subarray(at, at + n), used)
      used += n
      at += n
      if (used === CHUNK_BYTES) flush()
    }
  }
  const { maxOutputBytes, maxMemoryBytes } = job.limits
  const outcome = vector.postscript!(pdf, { pages, pageCount, color: job.color, password: job.password }, sink, {
    maxOutputBytes,
    // ps2write's scratch files run about twice the size of its output (the real corpus: 1.3 to 2.5 times).
    maxScratchBytes: 2 * maxOutputBytes,
    overMemory: (scratchBytes) => memoryBytes() + scratchBytes > maxMemoryBytes,
  })
  if (!outcome.ok) {
    spent = true
    if (outcome.reason === 'output') return refuse('OUTPUT_TOO_LARGE', { limit: maxOutputBytes })
    return refuse('CONVERSION_MEMORY_EXCEEDED', { limit: Math.round(maxMemoryBytes / 1048576) })
  }
  if (used > 0) flush()
  return { ok: true, op: 'ps', pageCount, pages: pages.length, bytes: outcome.bytes }
}

/** spent is set when an engine was stopped mid-run: the pool then replaces this worker. */
let spent = false

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
    // A document MuPDF had to repair, or whose form fields it draws anew, goes to Ghostscript as MuPDF
    // draws it, so that the PostScript shows the same pages and fields as the PNG.
    const source = doc.forPostScript() ?? job.pdf
    send({ type: 'start', id, pages: pages.length, pageCount: doc.pageCount })
    return writePostscript(id, source, pages, doc.pageCount, job)
  } finally {
    doc.close()
  }
}

port.on('message', (message: ToWorker) => {
  Atomics.store(inFlight, IN_FLIGHT, 0)
  run(message.id, message.job).then(
    (result) => send({ type: 'done', id: message.id, result, memoryBytes: memoryBytes(), spent }),
    (error: unknown) => send({
      type: 'failed',
      id: message.id,
      message: error instanceof Error ? error.message : String(error),
      fatal: error instanceof WebAssembly.RuntimeError || (error instanceof GhostscriptError && error.fatal),
    }),
  )
})

send({ type: 'ready' })
