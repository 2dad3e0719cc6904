/**
 * The Fastify base of both listeners (the public app and the admin API), written once: the
 * logger (its format, the path without the query string, one line per request), request ids
 * (a well-formed incoming X-Request-Id is kept so that logs join across a proxy, and echoed),
 * connection timeouts and the connection cap, validation errors that carry every problem at
 * once, and no text/plain parser (each route group registers the bodies it takes). What
 * differs between the two is given: the caller's name in the log, the body limit, the proxy
 * trust, the answer to a path that does not decode, and how a completed request is counted.
 */
import Fastify, { type FastifyInstance, type FastifyPluginCallback, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from 'fastify'
import { randomUUID } from 'node:crypto'
import { STATUS_CODES } from 'node:http'
import type { Socket } from 'node:net'
import type { Config } from '../config/config.ts'
import { answerError } from '../errors/errors.ts'
import { lazyChildLoggerFactory } from '../logging/lazy-child.ts'
import { OneLineLogController } from '../logging/controller.ts'
import { logDestination, type LogStream } from '../logging/format.ts'
import { MAX_USER_ID_LENGTH, MAX_USER_ID_PATH_LENGTH } from '../domain/user-ids.ts'
import { logIds, requestPlugin, tracingOn } from '../tracing/tracing.ts'
import { capConnections, httpServerOptions, type CapStats, type Connections } from '../ops/connections.ts'

const REQUEST_ID = /^[\w.:-]{1,128}$/
/** How often a closing listener closes the connections that went idle since it last looked. */
const CLOSE_SWEEP_MS = 100
/** While the listener closes, how long a connection may stay without sending a byte (closeAsIdle). */
const SILENT_GRACE_MS = 1000
const PATH_TOO_LONG = `a segment is longer than ${MAX_USER_ID_PATH_LENGTH} characters, percent-escapes included (a user ID is at most ${MAX_USER_ID_LENGTH} characters)`

export interface BaseOptions {
  readonly config: Config
  /** The logger's name (none: the public app). */
  readonly name?: string
  /** Where logs go (default: standard output). */
  readonly logStream?: LogStream
  /** The completed request's line in the log says who called, by id, never by key or token. */
  readonly who: (request: FastifyRequest) => Readonly<Record<string, string>> | null
  /** Called once for each completed request (metrics). */
  readonly onCompleted?: (request: FastifyRequest, reply: FastifyReply) => void
  readonly bodyLimit: number
  readonly trustProxy: Config['trustProxy'] | false
  /** Ajv's removeAdditional (the admin API refuses unknown fields instead of dropping them). */
  readonly removeAdditional?: false
  /** The answer to a request whose path does not decode, or has a segment past the router's bound (the catalogue's 400 of each API), with why. */
  readonly badPath: (reply: FastifyReply, reason: string) => void
  /** Told when the connection cap closes idle connections to make room. */
  readonly onCapReached?: (stats: CapStats) => void
}

/**
 * clientErrorHandler answers a client error (a request past REQUEST_TIMEOUT_MS, headers too large, a broken request) as Fastify does,
 * but only when no answer has begun on the socket, as Node's own handler does: Fastify's wrote its 408 into an answer under way, and a
 * chunked answer then ended in bytes its client could not parse ("Invalid character in chunk size"). An answer under way is cut.
 */
function clientErrorHandler(this: FastifyInstance, error: Error & { code?: string }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return
  const status = error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : error.code === 'HPE_HEADER_OVERFLOW' ? 431 : 400
  const message = status === 408 ? 'Client Timeout' : status === 431 ? 'Exceeded maximum allowed HTTP header size' : 'Client Error'
  const answer = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage
  if (socket.writable && answer?.headersSent !== true) {
    const body = JSON.stringify({ error: STATUS_CODES[status], message, statusCode: status })
    socket.write(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Length: ${body.length}\r\nContent-Type: application/json\r\n\r\n${body}`)
  }
  socket.destroy(error)
}

/** createBase: a Fastify instance with what both listeners share; routes and error handling are the caller's. */
export async function createBase(opts: BaseOptions): Promise<FastifyInstance> {
  const { config, who } = opts
  const logger: FastifyServerOptions['logger'] = {
    level: config.logLevel,
    ...(opts.name === undefined ? {} : { name: opts.name }),
    ...(await logDestination(config, opts.logStream)),
    // While tracing, each line written inside a traced request or job carries its trace_id and span_id.
    ...(tracingOn() ? { mixin: () => logIds() ?? {} } : {}),
    serializers: {
      // The path only: a query string could carry anything.
      req: (req: { method: string; url: string; ip?: string }) => ({ method: req.method, path: req.url.split('?')[0], ip: req.ip }),
      res: (reply: { statusCode: number; request?: FastifyRequest }) => {
        const caller = reply.request === undefined ? null : who(reply.request)
        return caller ? { statusCode: reply.statusCode, ...caller } : { statusCode: reply.statusCode }
      },
    },
  }
  const app = Fastify({
    logger,
    childLoggerFactory: lazyChildLoggerFactory,
    logController: new OneLineLogController(opts.onCompleted),
    bodyLimit: opts.bodyLimit,
    requestTimeout: config.requestTimeoutMs,
    keepAliveTimeout: config.keepAliveTimeoutMs,
    // A request that arrives on a kept-alive connection while the server closes is served (the store is open until the
    // close ends), its answer closing the connection (server.ts), rather than refused with a 503 that a proxy cannot retry.
    return503OnClosing: false,
    http: httpServerOptions(config),
    // A list goes to proxy-addr as it is (config.ts checked every entry); Fastify takes a mutable array.
    trustProxy: typeof opts.trustProxy === 'boolean' ? opts.trustProxy : [...opts.trustProxy],
    genReqId: (req) => {
      const given = req.headers['x-request-id']
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID()
    },
    // All problems at once; the body is at most bodyLimit bytes, which bounds the work.
    ajv: { customOptions: { allErrors: true, coerceTypes: true, ...(opts.removeAdditional === false ? { removeAdditional: false } : {}) } },
    // The error handlers read the ajv errors themselves; the message is for the log only.
    schemaErrorFormatter: (_errors, dataVar) => answerError(`${dataVar} failed validation`),
    // A parameter is at most a user ID's longest spelling in a path (Fastify's default, 100, refused the IDs of 101 to 256 characters the rule takes).
    routerOptions: { maxParamLength: MAX_USER_ID_PATH_LENGTH },
    clientErrorHandler,
    frameworkErrors: (error, _request, reply) => {
      opts.badPath(reply, error.code === 'FST_ERR_MAX_PARAM_LENGTH' ? PATH_TOO_LONG : 'its percent-escapes must encode UTF-8 text')
    },
  })
  // First, so that every route and hook registered after it is inside the request's span (tracing on only).
  const traced = requestPlugin()
  if (traced !== null) await app.register(traced as FastifyPluginCallback)
  closeAsIdle(app, capConnections(app.server, config.maxConnections, opts.onCapReached))
  app.removeContentTypeParser('text/plain')
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id)
    done()
  })
  return app
}

/**
 * closeAsIdle: while the listener closes, its kept-alive connections are closed as they go idle.
 * Node's server.close() closes only those idle at that moment: one whose answer was still under
 * way (a conversion streaming) goes idle after it, and would hold the close, and so the process's
 * exit or a test's end, until KEEP_ALIVE_TIMEOUT_MS and Node's second of margin (73 s by default).
 * A connection that has sent nothing for a second is closed too (ops/connections.ts: a browser's
 * connection opened ahead held a node's close for a minute, past SHUTDOWN_TIMEOUT_MS).
 */
function closeAsIdle(app: FastifyInstance, connections: Connections): void {
  app.addHook('preClose', (done) => {
    const sweep = setInterval(() => {
      app.server.closeIdleConnections()
      connections.closeSilent(SILENT_GRACE_MS)
    }, CLOSE_SWEEP_MS).unref()
    app.server.once('close', () => clearInterval(sweep))
    done()
  })
}
