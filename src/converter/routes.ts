/**
 * The conversion group (eu only): PDF to PNG (one page) or a zip of PNGs (several),
 * streamed as the worker renders them, and PDF to PostScript, streamed in pieces as
 * Ghostscript writes it. HTTP in, a job to the worker pool, HTTP out; the engines never run
 * on the event loop. A conversion takes its place in the pool before its body is read, so
 * that a refused client is told at once.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import multipart from '@fastify/multipart'
import type { Readable } from 'node:stream'
import type { Config } from '../config/config.ts'
import { type ApiError, apiError } from '../errors/errors.ts'
import { type ConversionPool, PoolError, type Handlers, type Reservation, type Running } from './pool.ts'
import type { ConversionOutcome, ConversionRoute, Metrics } from '../metrics/metrics.ts'
import type { Job, JobResult, Refusal } from './protocol.ts'
import { readUpload, requireMultipart, type Upload } from './upload.ts'
import { begin } from '../tracing/tracing.ts'
import { compressSchema, editSchemas, imageSchema, postscriptSchema, textSchema } from './schemas.ts'
import { EDIT_KINDS, type EditKind } from './edit-options.ts'
import { dropWhenStalled } from './stall.ts'
import { Spool, release } from './spool.ts'
import { compressLimit, contentDisposition, pagesOutput, partName, pdfName, singleName, splitOutput, textOutput, type PagesOutput } from './output.ts'
import { imageSpec } from './image-options.ts'
import { IMAGE_TYPES } from '../domain/images.ts'
import type { JobOperation } from '../domain/jobs.ts'
import { jobReadRoutes, jobSubmitRoute } from './job-routes.ts'
import type { Jobs } from '../services/jobs.ts'

export interface ConverterOptions {
  readonly config: Config
  readonly pool: ConversionPool
  readonly metrics: Pick<Metrics, 'conversion'>
  readonly jobs: Jobs
}

/** Multipart bodies are read and checked in upload.ts; the body schema is for the OpenAPI document. */
const documentOnly = () => () => true

function refusal(result: Refusal): ApiError {
  return apiError(result.code, result.params)
}

type Settled = { result: JobResult } | { error: unknown }

/** outcomeOf names how a conversion ended, for the metrics and the log. */
function outcomeOf(done: Settled): ConversionOutcome {
  if ('result' in done) return done.result.ok ? 'ok' : 'refused'
  if (!(done.error instanceof PoolError)) return 'failed'
  switch (done.error.reason) {
    case 'queue-full':
      return 'queue full'
    case 'account-busy':
      return 'account busy'
    case 'timeout':
    case 'page-timeout':
    case 'stalled':
      return 'timeout'
    case 'crashed':
    case 'failed':
      return 'failed'
    case 'cancelled':
      return 'cancelled'
    case 'closed':
      return 'unavailable'
  }
}

/** The conversion door's steps, shared by both routes: taking a place, running a job, answering its end. */
class Conversions {
  readonly config: Config
  readonly pool: ConversionPool
  readonly metrics: Pick<Metrics, 'conversion'>
  readonly limits: Job['limits']

  constructor(opts: ConverterOptions) {
    const { config } = opts
    this.config = config
    this.pool = opts.pool
    this.metrics = opts.metrics
    this.limits = {
      maxPages: config.maxPages,
      maxPixels: config.maxPageMegapixels * 1e6,
      maxOutputBytes: config.maxOutputBytes,
      maxMemoryBytes: config.workerMaxMemoryMb * 1048576,
    }
  }

  failure(request: FastifyRequest, error: unknown): ApiError {
    if (!(error instanceof PoolError)) throw error
    const { config } = this
    switch (error.reason) {
      case 'queue-full':
        // The body is left unread: closing the connection spares reading what the client still sends.
        return apiError('QUEUE_FULL', { seconds: 5 }, { 'retry-after': '5', connection: 'close' })
      case 'account-busy':
        // As for a full queue; the account's own conversions free its places, one at a time.
        return apiError('CONVERSIONS_PER_ACCOUNT', { limit: config.converterMaxPerAccount, seconds: 5 }, { 'retry-after': '5', connection: 'close' })
      case 'page-timeout':
        return apiError('CONVERSION_PAGE_TIMEOUT', { seconds: config.conversionPageTimeoutMs / 1000 })
      case 'timeout':
      case 'stalled':
        return apiError('CONVERSION_TIMEOUT', { seconds: config.conversionTimeoutMs / 1000 })
      case 'crashed':
      case 'failed':
        request.log.warn({ reason: error.message }, 'conversion failed')
        return apiError('CONVERSION_FAILED')
      case 'cancelled':
      case 'closed':
        return apiError('SERVICE_UNAVAILABLE', { what: 'the conversion service' }, { 'retry-after': '5' })
    }
  }

  /** accept takes a place in the pool, then reads the upload; the place is given back if the upload is refused. */
  async accept(request: FastifyRequest, route: ConversionRoute, operation: JobOperation): Promise<{ place: Reservation; upload: Upload }> {
    requireMultipart(request)
    let place: Reservation
    try {
      // Every key of an account shares the account's places.
      place = this.pool.reserve(request.caller!.accountId)
    } catch (error) {
      this.metrics.conversion(route, outcomeOf({ error }))
      throw this.failure(request, error)
    }
    const span = begin('conversion.upload', { 'tessera.operation': operation })
    try {
      const upload = await readUpload(request, this.config, operation)
      span.set({ 'tessera.bytes': upload.pdf.byteLength })
      span.end()
      return { place, upload }
    } catch (error) {
      span.end(error)
      place.release()
      throw error
    }
  }

  /** submit runs a job in its place and gives it up when the client goes away before the answer is complete. */
  submit(
    request: FastifyRequest,
    reply: FastifyReply,
    route: ConversionRoute,
    place: Reservation,
    job: Job,
    handlers: Handlers,
    outputBytes: () => number,
  ): Running {
    let running: Running
    // The conversion's span: its queue wait, each worker's share and each page are under it (pool.ts).
    const span = begin('conversion', { 'tessera.route': route })
    try {
      running = span.within(() => place.run(job, handlers))
    } catch (error) {
      span.end(error)
      this.metrics.conversion(route, outcomeOf({ error }))
      throw this.failure(request, error)
    }
    reply.raw.on('close', () => {
      if (!reply.raw.writableFinished) running.cancel()
    })
    void settle(running).then((done) => {
      const result = 'result' in done ? done.result : null
      try {
        this.finished(request, route, running, done, outputBytes())
      } finally {
        span.set({ 'tessera.pages': result?.ok === true ? result.pages : undefined, 'tessera.outcome': outcomeOf(done) })
        span.end(result?.ok === true ? undefined : 'error' in done ? done.error : { code: result?.ok === false ? result.code : 'failed' })
      }
    })
    return running
  }

  /**
   * finished counts a conversion that has settled and writes its line: pages, output, engine
   * time, its lead worker and how many workers rendered it (what an operator looks for when one is slow). Never the document or its name.
   */
  finished(request: FastifyRequest, route: ConversionRoute, running: Running, done: Settled, outputBytes: number): void {
    const outcome = outcomeOf(done)
    const { worker, workers, queuedMs, engineMs } = running.stats()
    const result = 'result' in done ? done.result : null
    if (result?.ok === true) this.metrics.conversion(route, outcome, { pages: result.pages, outputBytes, engineSeconds: engineMs / 1000 })
    else this.metrics.conversion(route, outcome)
    request.log.info(
      {
        outcome,
        pages: result?.ok === true ? result.pages : undefined,
        pageCount: result?.ok === true ? result.pageCount : undefined,
        code: result !== null && !result.ok ? result.code : undefined,
        outputBytes,
        engineMs: Math.round(engineMs),
        queuedMs: Math.round(queuedMs),
        worker,
        workers,
      },
      'conversion finished',
    )
  }

  /**
   * endWhenSettled ends a streaming answer, or stops it when the conversion fails: with the
   * error answer while no byte was sent yet (Fastify answers a stream's error with the error
   * handler until the headers are out), else cut short, as the status is gone.
   */
  endWhenSettled(request: FastifyRequest, settled: Promise<Settled>, end: () => void, stream: Readable): void {
    void settled.then((done) => {
      if ('result' in done && done.result.ok) return end()
      request.log.warn({ outcome: 'error' in done ? String(done.error) : (done.result as Refusal).code }, 'conversion stopped while streaming')
      let error: Error
      try {
        error = 'error' in done ? this.failure(request, done.error) : refusal(done.result as Refusal)
      } catch (fault) {
        error = fault as Error
      }
      stream.destroy(error)
    })
  }

  /** throwIfFailed answers a conversion that ended before its answer began: its catalogue error. */
  throwIfFailed(request: FastifyRequest, done: Settled): void {
    if ('error' in done) throw this.failure(request, done.error)
    if (!done.result.ok) throw refusal(done.result)
  }

  /** dropStalled drops a client that takes no bytes for CLIENT_STALL_TIMEOUT_MS. */
  dropStalled(request: FastifyRequest, reply: FastifyReply): void {
    dropWhenStalled(reply.raw, this.config.clientStallTimeoutMs, () => request.log.warn('client took no bytes: dropped'))
  }
}

/** settle: a conversion's end as a value, never a rejection. */
function settle(running: Running): Promise<Settled> {
  return running.result.then(
    (result) => ({ result }),
    (error: unknown) => ({ error }),
  )
}

const asBuffer = (bytes: Uint8Array) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)

/**
 * sendStream answers with `stream` (a spool or an output over one) and destroys it when the
 * answer ends short (a client gone, a failure): what it still holds is released then.
 */
function sendStream(reply: FastifyReply, stream: Readable): FastifyReply {
  // The answer's span: from its first byte handed to Fastify to the socket's close, whole or cut.
  const span = begin('conversion.stream', {})
  const ended = () => {
    span.set({ 'tessera.complete': reply.raw.writableFinished })
    span.end()
  }
  // An answer already closed (a client gone while the conversion ran) fires no 'close' again: its span ends now (Fastify
  // destroys the stream it is handed then). One listener either way: the answer carries several already.
  if (reply.raw.closed) ended()
  else
    reply.raw.once('close', () => {
      stream.destroy()
      ended()
    })
  return reply.send(stream)
}

/** How an answer of parts (pages, PDFs) is made: the one part alone, or the several streamed as they come. */
interface Parts {
  /** The one part's media type and file name (`labels`: a split's parts named by their pages). */
  single(part: number, pageCount: number, labels?: readonly string[]): { type: string; name: string }
  several(parts: number, pageCount: number, labels?: readonly string[]): PagesOutput
  /** X-Page-Count: the pages in the answer (`parts` of a `pageCount`-page document, or the pages of the PDFs made). */
  pageCount(parts: number, pageCount: number): number
}

/**
 * answerParts runs a job whose parts come in order and answers them: the one part alone once the
 * job has ended (a refusal is still a clean 4xx), or several streamed as they come.
 */
async function answerParts(c: Conversions, request: FastifyRequest, reply: FastifyReply, route: ConversionRoute, place: Reservation, job: Job, parts: Parts) {
  const received: { part: number; bytes: Uint8Array }[] = []
  let outputBytes = 0
  let sink: ((part: number, bytes: Uint8Array) => void) | null = null
  let started!: (shape: { count: number; pageCount: number; labels?: readonly string[] }) => void
  const start = new Promise<{ count: number; pageCount: number; labels?: readonly string[] }>((resolve) => {
    started = resolve
  })
  const handlers: Handlers = {
    onStart: (count, pageCount, labels) => started({ count, pageCount, ...(labels === undefined ? {} : { labels }) }),
    onPage: (part, bytes) => {
      outputBytes += bytes.byteLength
      if (sink) sink(part, bytes)
      else received.push({ part, bytes })
    },
  }
  const running = c.submit(request, reply, route, place, job, handlers, () => outputBytes)
  const settled = settle(running)
  // Pages taken before the answer began are released if it never does.
  const unsent = () => {
    for (const { bytes } of received.splice(0)) {
      release(bytes)
      running.ack()
    }
  }
  const first = await Promise.race([start.then((shape) => ({ shape })), settled])
  if (!('shape' in first)) {
    unsent()
    c.throwIfFailed(request, first)
    throw new Error('a conversion finished without starting')
  }
  const { count, pageCount, labels } = first.shape
  reply.header('x-page-count', String(parts.pageCount(count, pageCount)))
  if (count === 1) {
    const done = await settled
    if (!('result' in done && done.result.ok)) unsent()
    c.throwIfFailed(request, done)
    const { part, bytes } = received.splice(0)[0]!
    const { type, name } = parts.single(part, pageCount, labels)
    reply.type(type).header('content-disposition', contentDisposition(name)).header('content-length', String(bytes.byteLength))
    return sendStream(
      reply,
      Spool.of(bytes, () => running.ack()),
    )
  }
  const output = parts.several(count, pageCount, labels)
  const add = (part: number, bytes: Uint8Array) => output.add(part, bytes, () => running.ack())
  for (const { part, bytes } of received.splice(0)) add(part, bytes)
  sink = add
  c.endWhenSettled(request, settled, () => output.end(), output.stream)
  c.dropStalled(request, reply)
  reply.type(output.type).header('content-disposition', contentDisposition(output.name))
  return sendStream(reply, output.stream)
}

/**
 * POST /converter/generateImage: one image (PNG, JPEG, WebP or TIFF), or several: a zip of
 * images, or one multi-page TIFF, streamed as the pages come.
 */
async function generateImage(c: Conversions, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const route = '/converter/generateImage'
  const { place, upload } = await c.accept(request, route, 'image')
  const image = imageSpec(upload.image!, upload.dpi)
  const job: Job = { op: 'image', pdf: upload.pdf, image, color: upload.color, pages: upload.pages, password: upload.password, limits: c.limits }
  const { type, extension } = IMAGE_TYPES[image.format]
  return answerParts(c, request, reply, route, place, job, {
    single: (page, pageCount) => ({ type, name: singleName(upload.basename, page, pageCount, extension) }),
    several: (pages, pageCount) => pagesOutput(image.format, upload.basename, pages, pageCount),
    pageCount: (pages) => pages,
  })
}

/** POST /converter/generatePostscript: PostScript streamed in pieces as Ghostscript writes it. */
async function generatePostscript(c: Conversions, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const route = '/converter/generatePostscript'
  const { place, upload } = await c.accept(request, route, 'postscript')
  let outputBytes = 0
  // The pieces wait in the worker's window, not here: each is taken once copied out.
  const out = new Spool()
  let pages = 0
  let firstPiece!: () => void
  const flowing = new Promise<void>((resolve) => {
    firstPiece = resolve
  })
  const job: Job = { op: 'ps', pdf: upload.pdf, color: upload.color, pages: upload.pages, password: upload.password, limits: c.limits }
  const running = c.submit(
    request,
    reply,
    route,
    place,
    job,
    {
      onStart: (count) => {
        pages = count
      },
      onChunk: (bytes) => {
        outputBytes += bytes.byteLength
        out.put([bytes], bytes, () => running.ack())
        firstPiece()
      },
    },
    () => outputBytes,
  )
  const settled = settle(running)
  // Nothing is sent before the first piece: until then a refusal is still a clean 4xx.
  const first = await Promise.race([flowing.then(() => null), settled])
  if (first !== null) {
    out.destroy()
    c.throwIfFailed(request, first)
  }
  c.endWhenSettled(request, settled, () => out.finish(), out)
  c.dropStalled(request, reply)
  reply.type('application/postscript').header('content-disposition', contentDisposition(`${upload.basename}.ps`))
  // The worker tells the page count before the first piece.
  return sendStream(reply.header('x-page-count', String(pages)), out)
}

/**
 * POST /converter/extractText: each page's text, streamed in page order as the workers
 * extract it: a JSON array of pages (plain or structured), or text/plain with a form feed
 * after each page.
 */
async function extractText(c: Conversions, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const route = '/converter/extractText'
  const { place, upload } = await c.accept(request, route, 'text')
  const output = textOutput(upload.text!.format, upload.basename)
  let outputBytes = 0
  let pages = 0
  let firstPage!: () => void
  const flowing = new Promise<void>((resolve) => {
    firstPage = resolve
  })
  const job: Job = { op: 'text', text: upload.text!, pdf: upload.pdf, color: upload.color, pages: upload.pages, password: upload.password, limits: c.limits }
  const running = c.submit(
    request,
    reply,
    route,
    place,
    job,
    {
      onStart: (count) => {
        pages = count
      },
      onPage: (page, bytes) => {
        outputBytes += bytes.byteLength
        output.add(page, bytes, () => running.ack())
        firstPage()
      },
    },
    () => outputBytes,
  )
  const settled = settle(running)
  // Nothing is sent before the first page: until then a refusal is still a clean 4xx.
  const first = await Promise.race([flowing.then(() => null), settled])
  if (first !== null) {
    output.stream.destroy()
    c.throwIfFailed(request, first)
  }
  c.endWhenSettled(request, settled, () => output.end(), output.stream)
  c.dropStalled(request, reply)
  return sendStream(reply.type(output.type).header('content-disposition', contentDisposition(output.name)).header('x-page-count', String(pages)), output.stream)
}

/**
 * POST /converter/compress: the PDF rewritten smaller by Ghostscript's pdfwrite with a preset.
 * The answer is held (never more than the upload's size) so that it is never larger than the
 * upload: when pdfwrite's file would be, the upload itself is answered. Both sizes are in headers.
 */
async function compress(c: Conversions, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const route = '/converter/compress'
  const { place, upload } = await c.accept(request, route, 'compress')
  const before = upload.pdf.byteLength
  const held: Buffer[] = []
  let heldBytes = 0
  let larger = false
  let outputBytes = 0
  let pages = 0
  const limits = { ...c.limits, maxOutputBytes: compressLimit(before, c.limits.maxOutputBytes) }
  const job: Job = { op: 'ps', compress: upload.compress!, pdf: upload.pdf, color: upload.color, pages: null, password: upload.password, limits }
  const running = c.submit(
    request,
    reply,
    route,
    place,
    job,
    {
      onStart: (count) => {
        pages = count
      },
      onChunk: (bytes) => {
        outputBytes += bytes.byteLength
        // Past the upload's size, pdfwrite's file is no use: it is counted and let go (Ghostscript runs on to compressLimit).
        if (!larger && heldBytes + bytes.byteLength <= before) {
          held.push(asBuffer(bytes))
          heldBytes += bytes.byteLength
        } else {
          if (!larger) for (const piece of held.splice(0)) release(piece)
          larger = true
          release(bytes)
        }
        running.ack()
      },
    },
    () => outputBytes,
  )
  const done = await settle(running)
  // pdfwrite stopped past its limit: its file would have been far larger than the upload, which is the answer.
  if ('result' in done && !done.result.ok && done.result.code === 'OUTPUT_TOO_LARGE') larger = true
  else if (!('result' in done && done.result.ok)) {
    for (const piece of held.splice(0)) release(piece)
    c.throwIfFailed(request, done)
  }
  const body = larger ? Buffer.from(upload.pdf.buffer, upload.pdf.byteOffset, before) : Buffer.concat(held, heldBytes)
  for (const piece of held.splice(0)) release(piece)
  return reply
    .type('application/pdf')
    .header('content-disposition', contentDisposition(pdfName(upload.basename, 'compress')))
    .header('x-page-count', String(pages))
    .header('x-size-before', String(before))
    .header('x-size-after', String(body.byteLength))
    .header('x-compressed', String(!larger))
    .send(body)
}

/**
 * A page operation (POST /converter/merge, split, rotate, flatten): one PDF named for what was done (`<basename>-merged.pdf`,
 * a split's part by its pages: `<basename>-pages-1-3.pdf`), or a split's several in a zip (`<basename>-split.zip`), streamed as
 * they come.
 */
async function editPdf(c: Conversions, request: FastifyRequest, reply: FastifyReply, kind: EditKind): Promise<FastifyReply> {
  const route = `/converter/${kind}` as const
  const { place, upload } = await c.accept(request, route, kind)
  const job: Job = { op: 'edit', edit: upload.edit!, pdf: upload.pdf, color: upload.color, pages: upload.pages, password: upload.password, limits: c.limits }
  return answerParts(c, request, reply, route, place, job, {
    single: (_part, _pageCount, labels) => ({
      type: 'application/pdf',
      name: kind === 'split' ? partName(upload.basename, labels?.[0] ?? 'part-1') : pdfName(upload.basename, kind),
    }),
    several: (files, _pageCount, labels) => splitOutput(upload.basename, labels ?? Array.from({ length: files }, (_, i) => `part-${i + 1}`)),
    // The pages in the PDFs made, however many files hold them.
    pageCount: (_files, pages) => pages,
  })
}

export default async function converterRoutes(app: FastifyInstance, opts: ConverterOptions): Promise<void> {
  const conversions = new Conversions(opts)
  await app.register(multipart)
  // A conversion and a job's submission cost the group's units; reading or cancelling a job costs none.
  await app.register(async (paid) => {
    paid.addHook('onRequest', app.guard('converter'))
    paid.post('/converter/generateImage', { schema: imageSchema, validatorCompiler: documentOnly }, (request, reply) =>
      generateImage(conversions, request, reply),
    )
    paid.post('/converter/generatePostscript', { schema: postscriptSchema, validatorCompiler: documentOnly }, (request, reply) =>
      generatePostscript(conversions, request, reply),
    )
    for (const kind of EDIT_KINDS) {
      paid.post(`/converter/${kind}`, { schema: editSchemas[kind], validatorCompiler: documentOnly }, (request, reply) =>
        editPdf(conversions, request, reply, kind),
      )
    }
    paid.post('/converter/compress', { schema: compressSchema, validatorCompiler: documentOnly }, (request, reply) => compress(conversions, request, reply))
    paid.post('/converter/extractText', { schema: textSchema, validatorCompiler: documentOnly }, (request, reply) => extractText(conversions, request, reply))
    await jobSubmitRoute(paid, { config: opts.config, jobs: opts.jobs })
  })
  await app.register(async (free) => {
    free.addHook('onRequest', app.guard('converter', { free: true }))
    await jobReadRoutes(free, { config: opts.config, jobs: opts.jobs })
  })
}
