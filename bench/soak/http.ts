/**
 * The soak's client: one HTTP exchange over node:http, in one of the modes of types.ts (read,
 * read slowly, stop reading, hang up mid-download or mid-upload, upload slowly), and what came of
 * it: the status, the body when read to its end, and whether the answer ended before the end its
 * framing promised (`res.complete` is false: fewer bytes than its content-length, or no last chunk).
 */
import { Agent, request as httpRequest, type IncomingMessage } from 'node:http'
import type { Answer, Mode } from './types.ts'

export interface Exchange {
  /** The server, `http://host:port`. */
  readonly origin: string
  /** The path and query as they go on the wire: never parsed as a URL, which would resolve dot segments (`..`, `%2e`) away. */
  readonly path: string
  readonly method: string
  readonly headers: Record<string, string>
  readonly body?: Buffer | string
  readonly mode: Mode
  readonly agent: Agent
  /** Give up (and count it) after this long without the answer's end. */
  readonly timeoutMs: number
  /** How long a stalled reader holds the connection before it hangs up itself. */
  readonly stallMs: number
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** A connection the server closed as a keep-alive socket was reused is retried once (Node's advice); anything else counts. */
const RETRYABLE = new Set(['ECONNRESET', 'EPIPE'])

export async function exchange(x: Exchange): Promise<Answer> {
  const first = await once(x)
  if (first.error !== undefined && first.status === 0 && first.retry === true) return once(x)
  return first
}

type Attempt = Answer & { retry?: boolean }

function once(x: Exchange): Promise<Attempt> {
  const started = performance.now()
  const body = x.body === undefined ? undefined : Buffer.isBuffer(x.body) ? x.body : Buffer.from(x.body)
  return new Promise<Attempt>((resolve) => {
    let settled = false
    let hungUp = false
    let status = 0
    let headers: IncomingMessage['headers'] = {}
    const finish = (a: Omit<Answer, 'ms' | 'status' | 'headers'> & { retry?: boolean }) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      resolve({ status, headers, ...a, ms: performance.now() - started })
    }
    const { hostname, port } = new URL(x.origin)
    const req = httpRequest({
      host: hostname,
      port,
      path: x.path,
      method: x.method,
      agent: x.agent,
      headers: { ...x.headers, ...(body === undefined ? {} : { 'content-length': String(body.length) }) },
    })
    const timer = setTimeout(() => {
      req.destroy()
      finish({ body: null, cut: false, error: `no answer's end in ${x.timeoutMs} ms` })
    }, x.timeoutMs)
    req.on('error', (error: NodeJS.ErrnoException) => {
      if (status !== 0) return // the answer came; its own events tell the rest
      const retry = req.reusedSocket && RETRYABLE.has(error.code ?? '')
      finish({ body: null, cut: false, error: hungUp ? 'client-abort' : `${error.code ?? error.message}`, retry })
    })
    const hangUp = () => {
      hungUp = true
      req.destroy()
    }
    req.on('response', (res) => {
      status = res.statusCode ?? 0
      headers = res.headers
      read(res, x, hangUp, () => hungUp, finish)
    })
    void send(req, body, x.mode, hangUp)
  })
}

async function send(req: ReturnType<typeof httpRequest>, body: Buffer | undefined, mode: Mode, hangUp: () => void): Promise<void> {
  if (body === undefined) return void req.end()
  if (mode === 'abort-upload') {
    req.write(body.subarray(0, Math.floor(body.length / 2)))
    await sleep(20)
    return hangUp()
  }
  if (mode !== 'slow-upload') return void req.end(body)
  const piece = Math.max(1024, Math.ceil(body.length / 20))
  for (let at = 0; at < body.length && !req.destroyed; at += piece) {
    req.write(body.subarray(at, at + piece))
    await sleep(25)
  }
  req.end()
}

function read(
  res: IncomingMessage,
  x: Exchange,
  hangUp: () => void,
  hungUp: () => boolean,
  finish: (a: Omit<Answer, 'ms' | 'status' | 'headers'>) => void,
): void {
  const chunks: Buffer[] = []
  if (x.mode === 'stall') {
    res.pause()
    let held = false
    // Whether the server drops a reader that takes nothing (CLIENT_STALL_TIMEOUT_MS) or the answer fitted in the buffers: either way, hang up after.
    const hold = setTimeout(() => {
      held = true
      hangUp()
      finish({ body: null, cut: false, error: 'client-abort' })
    }, x.stallMs)
    // The socket's close, not the paused answer's: a paused stream may not tell.
    res.socket.once('close', () => {
      clearTimeout(hold)
      finish({ body: null, cut: false, error: held ? 'client-abort' : 'stalled reader dropped' })
    })
    return
  }
  res.on('data', (chunk: Buffer) => {
    chunks.push(chunk)
    if (x.mode === 'abort-download') hangUp()
    else if (x.mode === 'slow-read') {
      res.pause()
      setTimeout(() => res.resume(), 10)
    }
  })
  res.on('error', () => undefined)
  res.on('close', () => {
    // The client's own hang-up (mid-download, or mid-upload while the answer had begun) cuts nothing of the server's; what it kept of the
    // body is not the answer's whole even when the parser saw the answer end (a small answer already in the socket's buffer when it hung up).
    if (hungUp()) return finish({ body: null, cut: false, error: 'client-abort' })
    const body = Buffer.concat(chunks)
    finish({ body: res.complete ? body : null, cut: !res.complete })
  })
}

/** agent is a keep-alive agent for one client (an account's lanes share it). */
export const agent = () => new Agent({ keepAlive: true, maxSockets: 64 })
