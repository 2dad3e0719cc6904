/**
 * The chaos run's client: every request of the load goes through `call`, which records what
 * came of it (node, times, status, error code, Retry-After, or the connection error) for the
 * verdict. Nothing secret is recorded: no key, secret, code or password, only paths without
 * their query and the answer's error code.
 */
import type { ChaosNode } from './nodes.ts'

export interface Call {
  readonly loop: string
  readonly op: string
  readonly node: string
  /** Epoch ms: sent, and answered (or failed). */
  readonly start: number
  readonly end: number
  /** 0: no answer (a connection error or a timeout). */
  readonly status: number
  /** The error catalogue's code of a refusal, when its body names one. */
  readonly code: string | null
  readonly message: string | null
  readonly retryAfter: string | null
  /** The connection error's code (ECONNRESET, UND_ERR_SOCKET, …) or `timeout`. */
  readonly error: string | null
  /** Sent with the load account's key: the gateway counts it in the account's usage when it admits it. */
  readonly keyed: boolean
}

export interface Answer {
  readonly status: number
  readonly headers: Headers
  readonly body: Buffer
  readonly code: string | null
}

export interface Request {
  readonly loop: string
  readonly op: string
  readonly node: ChaosNode
  readonly path: string
  readonly method?: string
  readonly headers?: Record<string, string>
  readonly body?: string | FormData
  readonly timeoutMs?: number
  readonly keyed?: boolean
}

/** codeOf: the catalogue code (and message) of an error body: a list's first, a coded one's, or none. */
function codeOf(body: Buffer, type: string | null): { code: string | null; message: string | null } {
  if (!type?.includes('json')) return { code: null, message: null }
  try {
    const parsed = JSON.parse(body.toString('utf8')) as unknown
    const first = (Array.isArray(parsed) ? parsed[0] : parsed) as { code?: unknown; message?: unknown } | undefined
    return {
      code: typeof first?.code === 'string' ? first.code : null,
      message: typeof first?.message === 'string' ? first.message.slice(0, 200) : null,
    }
  } catch {
    return { code: null, message: null }
  }
}

export class Recorder {
  readonly calls: Call[] = []

  /** call sends one request and records it; a connection error or a timeout gives status 0 and no answer. */
  async call(r: Request): Promise<Answer | null> {
    const start = Date.now()
    const init: RequestInit = {
      method: r.method ?? (r.body === undefined ? 'GET' : 'POST'),
      headers: r.headers ?? {},
      redirect: 'manual',
      signal: AbortSignal.timeout(r.timeoutMs ?? 30_000),
      ...(r.body === undefined ? {} : { body: r.body }),
    }
    const op = { loop: r.loop, op: r.op, node: r.node.name, keyed: r.keyed ?? true }
    try {
      const res = await fetch(r.node.url + r.path, init)
      const body = Buffer.from(await res.arrayBuffer())
      const { code, message } = res.status >= 300 ? codeOf(body, res.headers.get('content-type')) : { code: null, message: null }
      this.calls.push({ ...op, start, end: Date.now(), status: res.status, code, message, retryAfter: res.headers.get('retry-after'), error: null })
      return { status: res.status, headers: res.headers, body, code }
    } catch (error) {
      const e = error as Error & { cause?: { code?: string } }
      const kind = e.name === 'TimeoutError' ? 'timeout' : (e.cause?.code ?? e.name)
      this.calls.push({ ...op, start, end: Date.now(), status: 0, code: null, message: null, retryAfter: null, error: kind })
      return null
    }
  }
}

/** json reads an answer's body as JSON. */
export const json = <T>(a: Answer): T => JSON.parse(a.body.toString('utf8')) as T

/** form: a urlencoded body and its content type. */
export const form = (fields: Record<string, string>) => ({
  headers: { 'content-type': 'application/x-www-form-urlencoded' },
  body: new URLSearchParams(fields).toString(),
})

/** jsonBody: a JSON body and its content type. */
export const jsonBody = (value: unknown) => ({ headers: { 'content-type': 'application/json' }, body: JSON.stringify(value) })
