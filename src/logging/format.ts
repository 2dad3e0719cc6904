/**
 * Log format (LOG_FORMAT): pino's JSON lines, for collectors and for anything that reads
 * standard output through a pipe, or one readable line per entry (pino-pretty) for a
 * developer at a terminal. Both the public app and the admin listener take their logger's
 * stream from here, so that they always write the same format.
 */
import type { Config } from '../config/config.ts'

/** Where pino writes each entry: one JSON line per write. */
export interface LogStream {
  write(line: string): void
}

/** logFormatOf: `auto` is pretty only in development on a terminal; in production, under test and whenever piped the lines stay JSON. */
export function logFormatOf(setting: Config['logFormat'], nodeEnv: Config['nodeEnv'], isTTY: boolean): 'json' | 'pretty' {
  if (setting !== 'auto') return setting
  return nodeEnv === 'development' && isTTY ? 'pretty' : 'json'
}

/**
 * logDestination is the `stream` part of a Fastify logger's options: the stream given (tests
 * capture lines with it), else none for JSON (pino's own synchronous standard output), else a
 * pretty stream. pino-pretty is imported only then, so that a production process never loads it.
 */
export async function logDestination(config: Pick<Config, 'logFormat' | 'nodeEnv'>, given?: LogStream): Promise<{ stream?: LogStream }> {
  if (given !== undefined) return { stream: given }
  const isTTY = process.stdout.isTTY === true
  if (logFormatOf(config.logFormat, config.nodeEnv, isTTY) === 'json') return {}
  const { default: pretty } = await import('pino-pretty')
  // In process rather than as a worker transport: a line is written before log() returns
  // (none lost at process.exit), and a function can be given as messageFormat.
  const stream = pretty({
    destination: 1,
    sync: true,
    colorize: isTTY,
    singleLine: true,
    translateTime: 'SYS:HH:MM:ss.l',
    // The message says these (see requestMessage); the rest of the entry follows it as JSON.
    ignore: 'pid,hostname,reqId,req,res,responseTime',
    messageFormat: (log, messageKey) => requestMessage(log, messageKey),
  })
  return { stream }
}

/** Control characters (a terminal's escape sequences) never reach the terminal from a log field. */
const unsafe = (value: unknown): string => String(value).replace(/[\u0000-\u001f\u007f-\u009f]/g, '?')

/**
 * requestMessage puts the request in front of the message, `[reqId] GET /path 200 1.2 ms
 * request completed`, and after it the caller's fields (`keyId=…`, `adminTokenId=…`): what
 * the `req` and `res` serialisers of app.ts and admin/api/app.ts give, which the pretty
 * line would otherwise print as nested JSON.
 */
export function requestMessage(log: Record<string, unknown>, messageKey: string): string {
  const parts: string[] = []
  if (log.reqId !== undefined) parts.push(`[${unsafe(log.reqId)}]`)
  const req = log.req as { method?: unknown; path?: unknown } | undefined
  if (req?.method !== undefined) parts.push(unsafe(req.method), unsafe(req.path))
  const { statusCode, ...caller } = (log.res ?? {}) as Record<string, unknown>
  if (statusCode !== undefined) parts.push(unsafe(statusCode))
  if (typeof log.responseTime === 'number') parts.push(`${log.responseTime.toFixed(1)} ms`)
  if (log[messageKey] !== undefined) parts.push(unsafe(log[messageKey]))
  for (const [name, value] of Object.entries(caller)) parts.push(`${name}=${unsafe(value)}`)
  return parts.join(' ')
}
