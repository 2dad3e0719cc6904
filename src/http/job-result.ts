/**
 * sendJobResult: a conversion job's kept result as a download, the same from the public API
 * and the portal: the synchronous route's headers, the pieces streamed one at a time from the
 * store, and a client that takes nothing for `stallTimeoutMs` dropped.
 */
import type { FastifyReply, FastifyRequest } from 'fastify'
import { Readable } from 'node:stream'
import type { ConversionJob } from '../domain/jobs.ts'
import { dropWhenStalled } from '../converter/stall.ts'
import { contentDisposition } from '../converter/output.ts'

export function sendJobResult(
  request: FastifyRequest,
  reply: FastifyReply,
  found: { readonly job: ConversionJob; readonly pieces: () => AsyncGenerator<Uint8Array> },
  stallTimeoutMs: number,
): FastifyReply {
  const info = found.job.result!
  dropWhenStalled(reply.raw, stallTimeoutMs, () => request.log.warn('client took no bytes of a job result: dropped'))
  return reply
    .type(info.type)
    .header('content-length', String(info.bytes))
    .header('content-disposition', contentDisposition(info.name))
    .header('x-page-count', String(info.pages))
    .send(Readable.from(found.pieces(), { objectMode: false }))
}
