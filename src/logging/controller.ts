/**
 * OneLineLogController writes one line per request, when it completes, with the request
 * (method, path), the outcome and the time taken; Fastify's default writes two.
 */
import { LogController, type FastifyBaseLogger, type FastifyReply, type FastifyRequest } from 'fastify'

/** pino's isLevelEnabled, which Fastify's logger type leaves out. */
const enabled = (log: FastifyBaseLogger, level: string) => (log as unknown as { isLevelEnabled(l: string): boolean }).isLevelEnabled(level)

export class OneLineLogController extends LogController {
  readonly #completed: (request: FastifyRequest, reply: FastifyReply) => void

  /**
   * `completed` is told of every request as it completes (the metrics): here rather than in an
   * onResponse hook, whose presence alone took 16% of GET /totp/ping's throughput (bench/ab.ts).
   */
  constructor(completed: (request: FastifyRequest, reply: FastifyReply) => void = () => undefined) {
    super()
    this.#completed = completed
  }

  override incomingRequest(): void {}

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    this.#completed(request, reply)
    if (error) reply.log.error({ req: request, res: reply, err: error, responseTime: reply.elapsedTime }, 'request errored')
    // The level is checked before the line's fields are gathered: at warn and above a request costs no clock read.
    else if (enabled(reply.log, 'info')) reply.log.info({ req: request, res: reply, responseTime: reply.elapsedTime }, 'request completed')
  }
}
