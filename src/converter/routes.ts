/**
 * The conversion group (eu only): PDF to PNG (one page) or a zip of PNGs (several),
 * streamed as the worker renders them, and PDF to PostScript. HTTP in, a job to the worker
 * pool, HTTP out; the engines never run on the event loop.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import multipart from '@fastify/multipart'
import yazl from 'yazl'
import type { Readable } from 'node:stream'
import type { Config } from '../config/config.ts'
import { ApiError, apiError } from '../errors/errors.ts'
import { ConversionPool, PoolError, type Running } from './pool.ts'
import type { Job, JobResult, Refusal } from './protocol.ts'
import { readUpload } from './upload.ts'
import { imageSchema, postscriptSchema } from './schemas.ts'

export interface ConverterOptions {
  readonly config: Config
  readonly pool: ConversionPool
}

/** Multipart bodies are read and checked in upload.ts; the body schema is for the OpenAPI document. */
const documentOnly = () => () => true

function refusal(result: Refusal): ApiError {
  return apiError(result.code, result.params)
}

export default async function converterRoutes(app: FastifyInstance, opts: ConverterOptions): Promise<void> {
  const { config, pool } = opts
  await app.register(multipart)
  app.addHook('onRequest', app.guard('converter'))

  function failure(request: FastifyRequest, error: unknown): ApiError {
    if (!(error instanceof PoolError)) throw error
    switch (error.reason) {
      case 'queue-full':
        return apiError('QUEUE_FULL', { seconds: 5 }, { 'retry-after': '5' })
      case 'timeout':
        return apiError('CONVERSION_TIMEOUT', { seconds: config.conversionTimeoutMs / 1000 })
      case 'crashed':
      case 'failed':
        request.log.warn({ reason: error.message }, 'conversion failed')
        return apiError('CONVERSION_FAILED')
      case 'closed':
        return apiError('SERVICE_UNAVAILABLE', { what: 'the conversion service' }, { 'retry-after': '5' })
    }
  }

  /** submit queues a job and gives it up when the client goes away before the answer is complete. */
  function submit(request: FastifyRequest, reply: FastifyReply, job: Job, handlers: Parameters<ConversionPool['run']>[1]): Running {
    let running: Running
    try {
      running = pool.run(job, handlers)
    } catch (error) {
      throw failure(request, error)
    }
    reply.raw.on('close', () => {
      if (!reply.raw.writableFinished) running.cancel()
    })
    return running
  }

  const limits = { maxPages: config.maxPages, maxPixels: config.maxPageMegapixels * 1e6 }

  app.post('/converter/generateImage', { schema: imageSchema, validatorCompiler: documentOnly }, async (request, reply) => {
    const upload = await readUpload(request, config)
    const received: { page: number; png: Uint8Array }[] = []
    let sink: ((page: number, png: Uint8Array) => void) | null = null
    let started!: (shape: { pages: number; pageCount: number }) => void
    const start = new Promise<{ pages: number; pageCount: number }>((resolve) => { started = resolve })
    const running = submit(request, reply, { op: 'png', pdf: upload.pdf, dpi: upload.dpi, color: upload.color, pages: upload.pages, password: upload.password, limits }, {
      onStart: (pages, pageCount) => started({ pages, pageCount }),
      onPage: (page, png) => (sink ? sink(page, png) : received.push({ page, png })),
    })
    const settled = running.result.then((result) => ({ result }), (error: unknown) => ({ error }))
    const first = await Promise.race([start.then((shape) => ({ shape })), settled])
    if ('error' in first) throw failure(request, first.error)
    if ('result' in first) {
      if (!first.result.ok) throw refusal(first.result)
      throw new Error('a PNG job finished without starting')
    }
    const { pages, pageCount } = first.shape
    const name = (page: number) => `${upload.basename}-${String(page).padStart(String(pageCount).length, '0')}.png`
    reply.header('x-page-count', String(pages))

    if (pages === 1) {
      const done = await settled
      if ('error' in done) throw failure(request, done.error)
      if (!done.result.ok) throw refusal(done.result)
      const { page, png } = received[0]!
      return reply
        .type('image/png')
        .header('content-disposition', `attachment; filename="${pageCount === 1 ? `${upload.basename}.png` : name(page)}"`)
        .send(Buffer.from(png.buffer, png.byteOffset, png.byteLength))
    }

    // Several pages: a zip streamed as the pages come, each stored as it is (PNG is compressed already).
    const zip = new yazl.ZipFile()
    const add = (page: number, png: Uint8Array) => {
      zip.addBuffer(Buffer.from(png.buffer, png.byteOffset, png.byteLength), name(page), { compress: false })
      // Let the worker render further only while the client keeps up: memory stays bounded.
      if (reply.raw.writableNeedDrain) reply.raw.once('drain', () => running.ack())
      else running.ack()
    }
    for (const { page, png } of received.splice(0)) add(page, png)
    sink = add
    void settled.then((done) => {
      if ('result' in done && done.result.ok) return zip.end()
      // Too late for an error status: the client sees the download cut short.
      request.log.warn({ outcome: 'error' in done ? String(done.error) : (done.result as Refusal).code }, 'conversion stopped while streaming')
      ;(zip.outputStream as Readable).destroy(new Error('conversion stopped'))
    })
    return reply
      .type('application/zip')
      .header('content-disposition', `attachment; filename="${upload.basename}.zip"`)
      .send(zip.outputStream)
  })

  app.post('/converter/generatePostscript', { schema: postscriptSchema, validatorCompiler: documentOnly }, async (request, reply) => {
    const upload = await readUpload(request, config)
    const running = submit(request, reply, { op: 'ps', pdf: upload.pdf, color: upload.color, pages: upload.pages, password: upload.password, limits }, {})
    let result: JobResult
    try {
      result = await running.result
    } catch (error) {
      throw failure(request, error)
    }
    if (!result.ok) throw refusal(result)
    if (result.op !== 'ps') throw new Error('a PostScript job gave no PostScript')
    const ps = result.postscript
    return reply
      .type('application/postscript')
      .header('content-disposition', `attachment; filename="${upload.basename}.ps"`)
      .header('x-page-count', String(result.pages))
      .send(Buffer.from(ps.buffer, ps.byteOffset, ps.byteLength))
  })
}
