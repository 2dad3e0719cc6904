/**
 * A conversion worker: loads the engines once, then takes one part of a job at a time from
 * the pool. The lead part opens and checks the document, then renders; a helper part (an image
 * job, another worker being free) opens the same bytes and renders pages too. Every part
 * claims pages one at a time from the job's shared counter, so the pages are shared out as
 * the workers come free. Output (pages, pieces of PostScript) is sent as it is made, never
 * more than a small window ahead of what the consumer has taken, so memory stays bounded
 * whatever its size: the worker blocks on the job's shared counter until the consumer catches
 * up, which works even in the middle of Ghostscript's synchronous run.
 */
import { parentPort, workerData } from 'node:worker_threads'
import { getHeapStatistics } from 'node:v8'
import { mupdfHeap } from './engines/mupdf-heap.ts'
import { mupdfEngine } from './engines/mupdf.ts'
import { GhostscriptError, createGhostscriptEngine } from './engines/ghostscript.ts'
import type { HeapGuard } from './engines/heap.ts'
import type { OpenDocument, PageSize, PdfEngine, Scale } from './engines/engine.ts'
import { resolvePages } from './pages.ts'
import {
  MIN_DPI,
  NEXT,
  STOP,
  TAKEN,
  HELD_KIB,
  WINDOW_KIB,
  type FromWorker,
  type ImageSpec,
  type Job,
  type JobResult,
  type PageWork,
  pageWork,
  type Refusal,
  type TextSpec,
  type Share,
  type ToWorker,
  type WorkerData,
} from './protocol.ts'
import { encodePage } from './encode.ts'
import { runEdit } from './edit-run.ts'
import { fitBox } from '../domain/images.ts'

/** PostScript goes out in pieces of this size, at most CHUNK_WINDOW of them not yet taken. */
const CHUNK_BYTES = 256 * 1024
const CHUNK_WINDOW = 4

if (parentPort === null) throw new Error('worker.ts runs as a worker thread')
const port = parentPort
const own = new Int32Array((workerData as WorkerData).control)
const budget = (workerData as WorkerData).maxMemoryBytes

/** The engines loaded so far (memoryBytes counts them while Ghostscript loads). */
const engines: PdfEngine[] = []

/** The bytes a page being encoded holds outside the engines: its pixels, and the encoder's copy of them (libvips). */
let encodingBytes = 0

/** Now, in epoch milliseconds with this thread's sub-millisecond clock (a page's span is drawn from it by the main thread). */
const epochMs = (): number => performance.timeOrigin + performance.now()

/** memoryBytes is what the worker holds: both engines' WebAssembly memory, the live JS heap and a page being encoded. */
function memoryBytes(): number {
  let bytes = getHeapStatistics().used_heap_size + encodingBytes
  for (const engine of engines) bytes += engine.memoryBytes()
  return bytes
}

/** capped is set when an engine was refused memory during the current part: the part ends with CONVERSION_MEMORY_EXCEEDED. */
let capped = false

/** Both engines' heaps grow only while the worker as a whole stays within its budget. */
const guard: HeapGuard = {
  allow: (bytes) => memoryBytes() + bytes <= budget,
  refused: () => {
    capped = true
  },
}
mupdfHeap.guard = guard
const raster: PdfEngine = mupdfEngine
engines.push(raster)
const vector: PdfEngine = await createGhostscriptEngine(guard)
engines.push(vector)

const send = (message: FromWorker, transfer: ArrayBuffer[] = []) => port.postMessage(message, transfer)

/** A part being run: its job's id and shared counters, and how far ahead of the consumer it may go. */
interface Part {
  readonly id: number
  readonly counters: Int32Array
  readonly window: number
}

const stopped = () => Atomics.load(own, STOP) !== 0

/**
 * waitForConsumer blocks until the consumer has taken at least `taken` pieces, telling the
 * pool while it waits (that time does not count against the job's limit). It gives up
 * (returns false) when the pool asks this worker to stop, if `stoppable`.
 */
function waitForConsumer(part: Part, taken: number, stoppable: boolean): boolean {
  let now = Atomics.load(part.counters, TAKEN)
  if (now >= taken) return true
  send({ type: 'paused', id: part.id })
  try {
    while (now < taken) {
      if (stoppable && stopped()) return false
      Atomics.wait(part.counters, TAKEN, now)
      now = Atomics.load(part.counters, TAKEN)
    }
    return true
  } finally {
    send({ type: 'resumed', id: part.id })
  }
}

/**
 * waitForRoom blocks until page `index` may be claimed: the consumer has taken all but `window`
 * of the pages before it, and the main thread holds less than WINDOW_KIB of the job's pages
 * (each page taken lowers that count before it counts TAKEN up, so a wait on TAKEN sees both).
 * Every page the main thread holds comes before `index`, and every one of those is claimed:
 * they reach the consumer whatever this worker does, so the wait ends. False when told to stop.
 */
function waitForRoom(part: Part, index: number): boolean {
  const { counters } = part
  const room = () => Atomics.load(counters, TAKEN) >= index - part.window + 1 && Atomics.load(counters, HELD_KIB) < WINDOW_KIB
  if (room()) return true
  send({ type: 'paused', id: part.id })
  try {
    for (;;) {
      const now = Atomics.load(counters, TAKEN)
      if (room()) return true
      if (stopped()) return false
      Atomics.wait(counters, TAKEN, now)
    }
  } finally {
    send({ type: 'resumed', id: part.id })
  }
}

const refuse = (code: Refusal['code'], params?: Refusal['params']): Refusal => ({ ok: false, code, params })

/** pixelsAt is the size of a page's render at `dpi`, in pixels. */
function pixelsAt(size: PageSize, dpi: number): number {
  return Math.ceil((size.width * dpi) / 72) * Math.ceil((size.height * dpi) / 72)
}

/** scaleOf: how a page is drawn, at the spec's dpi or fitted within its box. */
function scaleOf(size: PageSize, image: ImageSpec): Scale {
  return image.box === null ? { dpi: image.dpi } : fitBox(size, image.box)
}

/** pixelsOf: a page's pixels as the spec draws it. */
function pixelsOf(size: PageSize, image: ImageSpec): number {
  const scale = scaleOf(size, image)
  return 'dpi' in scale ? pixelsAt(size, scale.dpi) : scale.width * scale.height
}

function tooLarge(page: number, size: PageSize, job: Job & { op: 'image' }): Refusal {
  const { image } = job
  const megapixels = (pixelsOf(size, image) / 1e6).toFixed(1)
  const limit = job.limits.maxPixels / 1e6
  if (image.box !== null) {
    const fitted = fitBox(size, image.box)
    const box = `${image.box.width ?? 'any'}×${image.box.height ?? 'any'}`
    return refuse('BOX_TOO_LARGE', { page, box, size: `${fitted.width}×${fitted.height}`, megapixels, limit })
  }
  const params = { page, dpi: image.dpi, megapixels, limit }
  let fit = Math.floor(72 * Math.sqrt(job.limits.maxPixels / (size.width * size.height)))
  while (fit > 1 && pixelsAt(size, fit) > job.limits.maxPixels) fit-- // pixels are whole: round down until it fits
  if (fit < MIN_DPI) return refuse('PAGE_TOO_LARGE_AT_ANY_DPI', { ...params, minDpi: MIN_DPI })
  return refuse('PAGE_TOO_LARGE', { ...params, fit })
}

/**
 * renderShare renders pages of the list, claiming them one at a time, until none is left or
 * the pool asks this worker to stop. A page is claimed only once it is within the window of
 * what the consumer has taken, so a worker that waits holds no page.
 */
async function renderShare(part: Part, doc: OpenDocument, pages: readonly number[], work: PageWork, color: Share['color']): Promise<void> {
  const { counters } = part
  for (;;) {
    if (stopped()) return
    const index = Atomics.load(counters, NEXT)
    if (index >= pages.length) return
    if (!waitForRoom(part, index)) return
    if (Atomics.compareExchange(counters, NEXT, index, index + 1) !== index) continue // another part took it
    const page = pages[index]!
    const from = epochMs()
    const bytes = work.op === 'image' ? await drawPage(doc, page - 1, work.image, color) : textPage(doc, page, work.text)
    // A page drawn while memory was refused may lack what could not be allocated: never sent.
    if (capped) return
    send({ type: 'page', id: part.id, index, page, bytes, from, to: epochMs() }, [bytes.buffer as ArrayBuffer])
  }
}

/** drawPage draws a page (0-based) and writes it in the spec's format. */
async function drawPage(doc: OpenDocument, index: number, image: ImageSpec, color: Share['color']): Promise<Uint8Array> {
  const size = doc.pageSize(index)
  const scale = scaleOf(size, image)
  const raster = doc.renderRaster(index, scale, color)
  // The encoder holds about another copy of the pixels while it works (libvips' own buffers, WebP's YUV planes).
  const held = 2 * raster.pixels.byteLength
  encodingBytes += held
  try {
    return await encodePage(raster, image, 'dpi' in scale ? scale.dpi : (72 * scale.width) / size.width)
  } finally {
    encodingBytes -= held
  }
}

const encoder = new TextEncoder()

/** textPage writes a page's (1-based) text as the spec asks: its plain text, or its JSON object (with its size, and its blocks when structured). */
function textPage(doc: OpenDocument, page: number, text: TextSpec): Uint8Array {
  if (text.format === 'text') return encoder.encode(doc.plainText(page - 1))
  const { width, height } = doc.pageSize(page - 1)
  const size = { page, width: Math.round(width * 100) / 100, height: Math.round(height * 100) / 100 }
  if (text.format === 'json') {
    const plain = doc.plainText(page - 1)
    return encoder.encode(JSON.stringify({ ...size, hasText: /\S/u.test(plain), text: plain }))
  }
  const blocks = doc.structuredText(page - 1)
  return encoder.encode(JSON.stringify({ ...size, hasText: blocks.some((b) => b.lines.some((l) => l.words.length > 0)), blocks }))
}

/** pageSizeOf: a page's size (1-based), null when MuPDF cannot load it (a damaged page tree or page); a fault of this code is thrown on. */
function pageSizeOf(doc: OpenDocument, page: number): PageSize | null {
  try {
    return doc.pageSize(page - 1)
  } catch (error) {
    if (error instanceof Error && error.constructor === Error) return null
    throw error
  }
}

/** renderPages makes every page of a page-by-page job (images, text), shared out with the workers that join. */
async function renderPages(part: Part, doc: OpenDocument, pages: readonly number[], job: Job & PageWork): Promise<JobResult> {
  // Every page asked for is loaded (and, for images, sized) before the answer begins: a page the document cannot give is a
  // refusal then, not a 200 cut short at that page.
  for (const page of pages) {
    const size = pageSizeOf(doc, page)
    if (size === null) return refuse('PAGE_UNREADABLE', { page })
    if (job.op === 'image' && pixelsOf(size, job.image) > job.limits.maxPixels) return tooLarge(page, size, job)
  }
  // The output limit is the pool's to keep: it counts the pages of every part, in order.
  send({ type: 'start', id: part.id, pages, pageCount: doc.pageCount })
  await renderShare(part, doc, pages, pageWork(job)!, job.color)
  return { ok: true, op: job.op, pageCount: doc.pageCount, pages: pages.length }
}

/** writePostscript runs Ghostscript with its output cut into pieces and sent as it comes. */
function writePostscript(part: Part, pdf: Uint8Array, pages: readonly number[], pageCount: number, job: Job & { op: 'ps' }): JobResult {
  let chunk = new Uint8Array(CHUNK_BYTES)
  let used = 0
  let sent = 0
  const flush = () => {
    const full = used === CHUNK_BYTES ? chunk : chunk.slice(0, used)
    // A piece goes once fewer than CHUNK_WINDOW are waiting for the consumer (Ghostscript cannot stop between pieces).
    waitForConsumer(part, sent - CHUNK_WINDOW + 1, false)
    sent++
    send({ type: 'chunk', id: part.id, bytes: full }, [full.buffer as ArrayBuffer])
    chunk = new Uint8Array(CHUNK_BYTES)
    used = 0
  }
  const sink = (bytes: Uint8Array) => {
    for (let at = 0; at < bytes.byteLength; ) {
      const n = Math.min(CHUNK_BYTES - used, bytes.byteLength - at)
      chunk.set(bytes.subarray(at, at + n), used)
      used += n
      at += n
      if (used === CHUNK_BYTES) flush()
    }
  }
  const { maxOutputBytes, maxMemoryBytes } = job.limits
  const progress = () => send({ type: 'progress', id: part.id })
  const options = { pages, pageCount, color: job.color, password: job.password, onPage: progress, ...(job.compress ? { compress: job.compress } : {}) }
  const outcome = vector.postscript!(pdf, options, sink, {
    maxOutputBytes,
    // ps2write's scratch files run about twice the size of its output (the real corpus: 1.3 to 2.5 times).
    maxScratchBytes: 2 * maxOutputBytes,
    overMemory: (scratchBytes) => capped || memoryBytes() + scratchBytes > maxMemoryBytes,
  })
  if (!outcome.ok) {
    spent = true
    if (outcome.reason === 'output') return refuse('OUTPUT_TOO_LARGE', { limit: maxOutputBytes })
    return overBudget()
  }
  if (used > 0) flush()
  return { ok: true, op: 'ps', pageCount, pages: pages.length, bytes: outcome.bytes }
}

/** spent is set when an engine was stopped mid-run: the pool then replaces this worker. */
let spent = false

const overBudget = (): Refusal => refuse('CONVERSION_MEMORY_EXCEEDED', { limit: Math.round(budget / 1048576) })

/**
 * edit runs a page operation and sends the PDFs it makes as its pages, each once the consumer has
 * room for it: a split's as each is made, so that it holds one at a time and stops when its job does.
 */
function edit(part: Part, job: Job & { op: 'edit' }): JobResult {
  let sent = 0
  let started = false
  let from = epochMs()
  const emit = {
    start(files: number, pageCount: number, labels?: readonly string[]) {
      started = true
      send({ type: 'start', id: part.id, pages: Array.from({ length: files }, (_, i) => i + 1), pageCount, ...(labels === undefined ? {} : { labels }) })
    },
    part(bytes: Uint8Array) {
      if (!waitForConsumer(part, sent - part.window + 1, true)) return false
      send({ type: 'page', id: part.id, index: sent, page: sent + 1, bytes, from, to: epochMs() }, [bytes.buffer as ArrayBuffer])
      sent++
      from = epochMs()
      return !stopped()
    },
    progress: () => send({ type: 'progress', id: part.id }),
  }
  const made = runEdit(job, emit)
  if (!made.ok) return made
  if (!started) emit.start(made.files, made.pageCount)
  for (const bytes of made.pdfs) if (!emit.part(bytes)) break
  return { ok: true, op: 'edit', pageCount: made.pageCount, pages: made.files }
}

async function run(part: Part, job: Job): Promise<JobResult> {
  if (job.op === 'edit') return edit(part, job)
  const opened = raster.open!(job.pdf, job.password)
  if (!opened.ok) return opened.reason === 'password' ? refuse('PDF_PASSWORD_REQUIRED') : refuse('PDF_UNREADABLE')
  const doc = opened.document
  try {
    if (doc.pageCount > job.limits.maxPages) return refuse('TOO_MANY_PAGES', { count: doc.pageCount, limit: job.limits.maxPages })
    if (doc.pageCount === 0) return refuse('PDF_UNREADABLE')
    const pages = resolvePages(job.pages, doc.pageCount)
    if (pages === null) return refuse('PAGES_OUT_OF_RANGE', { count: doc.pageCount })
    if (job.op === 'image' || job.op === 'text') return await renderPages(part, doc, pages, job)
    for (const page of pages) if (pageSizeOf(doc, page) === null) return refuse('PAGE_UNREADABLE', { page })
    // A document MuPDF had to repair, or whose form fields it draws anew, goes to Ghostscript as MuPDF
    // draws it, so that the PostScript shows the same pages and fields as the PNG.
    const source = doc.forPostScript() ?? job.pdf
    send({ type: 'start', id: part.id, pages, pageCount: doc.pageCount })
    return writePostscript(part, source, pages, doc.pageCount, job)
  } finally {
    doc.close()
  }
}

/** help renders a share of a page-by-page job the lead has opened and checked already. */
async function help(part: Part, share: Share): Promise<null> {
  const opened = raster.open!(share.pdf, share.password)
  // The lead opened the same bytes: should this copy fail, the other parts render the pages.
  if (!opened.ok) return null
  try {
    await renderShare(part, opened.document, share.pages, share.work, share.color)
    return null
  } finally {
    opened.document.close()
  }
}

// The pool gives a worker one part at a time: the next message comes after this part's 'done' or 'failed'.
port.on('message', async (message: ToWorker) => {
  const part: Part = { id: message.id, counters: new Int32Array(message.counters), window: message.window }
  capped = false
  let result: JobResult | null = null
  try {
    result = message.type === 'job' ? await run(part, message.job) : await help(part, message.share)
  } catch (error) {
    // An engine refused memory fails in its own way (MuPDF's "malloc failed", a Ghostscript VMerror, an abort): the cap is the cause.
    if (!capped) {
      send({
        type: 'failed',
        id: message.id,
        message: error instanceof Error ? error.message : String(error),
        fatal: error instanceof WebAssembly.RuntimeError || (error instanceof GhostscriptError && error.fatal),
        memoryBytes: memoryBytes(),
      })
      return
    }
  }
  // An engine that ran out of its budget may have gone on without what it could not allocate
  // (MuPDF leaves out an image it cannot decode): the job ends, whatever the part answered, and the worker is replaced.
  if (capped) {
    result = overBudget()
    spent = true
  }
  send({ type: 'done', id: message.id, result, memoryBytes: memoryBytes(), spent })
})

send({ type: 'ready', memoryBytes: memoryBytes() })
