/**
 * OneLineLogController writes one line per request, when it completes, with the request
 * (method, path), the outcome and the time taken; Fastify's default writes two.
 */
import { LogController, type FastifyReply, type FastifyRequest } from 'fastify'

export class OneLineLogController extends LogController {
  override incomingRequest(): void {}

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (error) reply.log.error({ req: request, res: reply, err: error, responseTime: reply.elapsedTime }, 'request errored')
    else reply.log.info({ req: request, res: reply, responseTime: reply.elapsedTime }, 'request completed')
  }
}
