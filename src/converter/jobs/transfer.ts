/**
 * transfer: the two outbound HTTP transfers of an asynchronous conversion job: fetching the
 * source PDF a customer names (sourceUrl) and PUTting the result to the URL the customer gives
 * (typically a presigned S3, GCS or Azure Blob URL). Both go where a customer says, so both
 * keep the webhook SSRF rules (../../webhooks/address.ts): https only, every address the name
 * resolves to public, the connection made to the address checked (a pinned lookup; TLS still
 * verifies the certificate for the URL's host name), and every redirect of a fetch checked
 * again. Each transfer has one deadline from the first name lookup to the last byte and reads
 * no more than it may (maxBytes of a source, nothing of an answer it does not use); an upload
 * pulls its chunks only as the connection takes them. No detail ever holds a URL's query:
 * presigned URLs carry their credentials there.
 */
import http, { type IncomingHttpHeaders } from 'node:http'
import https from 'node:https'
import type { LookupFunction } from 'node:net'
import type { Readable, Writable } from 'node:stream'
import { checkEndpointUrl, MAX_TRANSFER_URL_LENGTH, resolveTarget, type Lookup, type Target } from '../../webhooks/address.ts'
import { VERSION } from '../../version.ts'

const USER_AGENT = `tessera-jobs/${VERSION}`
const REDIRECTS: ReadonlySet<number> = new Set([301, 302, 303, 307, 308])

export interface FetchOptions {
  readonly timeoutMs: number
  readonly maxBytes: number
  readonly allowPrivate: boolean
  /** How many redirects are followed at most (default 3). */
  readonly maxRedirects?: number
  /** Extra trusted certificates (tests' own CA); default: Node's. */
  readonly ca?: string | Buffer
  readonly lookup?: Lookup
}

export interface Fetched {
  readonly ok: true
  /** The body, over a SharedArrayBuffer (the conversion pool hands it to a worker without a copy). */
  readonly bytes: Uint8Array
  /** As the server named it (Content-Disposition, else the final URL's last segment), not sanitised. */
  readonly filename: string | null
}

export interface TransferRefusal {
  readonly ok: false
  readonly reason: 'refused' | 'failed' | 'too-large'
  /** A short phrase for people; names the host at most, never the URL's query. */
  readonly detail: string
}

export interface ResultBody {
  readonly size: number
  readonly contentType: string
  /** The body, pulled one chunk at a time as the connection takes it. */
  readonly chunks: () => AsyncIterable<Uint8Array>
  /** Extra headers (e.g. `x-ms-blob-type: BlockBlob` for Azure). */
  readonly headers?: Readonly<Record<string, string>>
}

export interface PutOptions {
  readonly timeoutMs: number
  readonly allowPrivate: boolean
  readonly ca?: string | Buffer
  readonly lookup?: Lookup
}

export interface PutOutcome {
  /** The status answered, or null when there was none. */
  readonly statusCode: number | null
  /** Why the upload failed (null: a 2xx). Never holds the URL's query. */
  readonly error: string | null
}

/** One request as sent: to `url`, connected to `target`, the address checked for it. */
export interface Outgoing {
  readonly url: URL
  readonly target: Target
  readonly method: 'GET' | 'PUT'
  readonly headers: Readonly<Record<string, string>>
  /** Writes the body (absent: none); the request is ended when it resolves, destroyed when it rejects. */
  readonly body?: (request: Writable) => Promise<void>
  readonly ca?: string | Buffer
}

/** An answer's status and headers, its body still unread. */
export interface Answer {
  readonly status: number
  readonly headers: IncomingHttpHeaders
  readonly body: Readable
}

/** Exchange: sends one request and resolves with the answer's head, its body still to read. */
export type Exchange = (outgoing: Outgoing, signal: AbortSignal) => Promise<Answer>

/** exchange: one request over a connection of its own, to the checked address, cut when `signal` aborts. */
const exchange: Exchange = (outgoing, signal) =>
  new Promise((resolve, reject) => {
    const { url, target } = outgoing
    const pinned: LookupFunction = (_hostname, options, callback) => {
      if ((options as { all?: boolean }).all) (callback as unknown as (e: null, a: Target[]) => void)(null, [target])
      else callback(null, target.address, target.family)
    }
    const request = (url.protocol === 'https:' ? https : http).request(
      {
        protocol: url.protocol,
        hostname: url.hostname.replace(/^\[(.*)\]$/, '$1'),
        port: url.port === '' ? undefined : Number(url.port),
        path: `${url.pathname}${url.search}`,
        method: outgoing.method,
        headers: outgoing.headers,
        lookup: pinned,
        signal,
        // A connection of its own: nothing pooled outlives the transfer, or carries another host's address.
        agent: false,
        ...(outgoing.ca === undefined ? {} : { ca: outgoing.ca }),
      },
      (response) => resolve({ status: response.statusCode ?? 0, headers: response.headers, body: response }),
    )
    request.on('error', reject)
    if (outgoing.body === undefined) request.end()
    else
      outgoing.body(request).then(
        () => request.end(),
        (error: Error) => {
          reject(error)
          request.destroy(error)
        },
      )
  })

interface Route {
  readonly allowPrivate: boolean
  readonly lookup?: Lookup | undefined
}

/** checkHop: `raw` as it may be called and the address to connect to, or why neither (hop 0: the URL given; n: the nth redirect). */
async function checkHop(raw: string, hop: number, route: Route, signal: AbortSignal): Promise<{ url: URL; target: Target } | { refused: string }> {
  const checked = checkEndpointUrl(raw, route.allowPrivate, MAX_TRANSFER_URL_LENGTH)
  if ('reason' in checked) return { refused: `${hop === 0 ? 'the URL' : `redirect ${hop}`} ${checked.reason}` }
  const url = new URL(checked.url)
  const resolved = await beforeDeadline(resolveTarget(url.hostname, route.allowPrivate, route.lookup), signal)
  if ('reason' in resolved) return { refused: hop === 0 ? resolved.reason : `redirect ${hop}: ${resolved.reason}` }
  return { url, target: resolved }
}

/** beforeDeadline: `work`, or a rejection when `signal` aborts first (a name lookup takes no signal). */
function beforeDeadline<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  return Promise.race([
    work,
    new Promise<never>((_, reject) => {
      if (signal.aborted) reject(new Error('timed out'))
      signal.addEventListener('abort', () => reject(new Error('timed out')), { once: true })
    }),
  ])
}

/** deadline: an AbortController that aborts after `ms`, and its disposal (which aborts whatever is still open). */
function deadline(ms: number): { signal: AbortSignal; done: () => void } {
  const controller = new AbortController()
  const timer = setTimeout(() => controller.abort(), ms)
  return {
    signal: controller.signal,
    done: () => {
      clearTimeout(timer)
      controller.abort()
    },
  }
}

/** why: a failure's cause in a few words: the deadline, an errno or TLS code, or the message of our own errors. */
function why(error: unknown, aborted: boolean, timeoutMs: number): string {
  if (aborted) return `timed out after ${timeoutMs} ms`
  const e = error as NodeJS.ErrnoException
  return e.code ?? e.message
}

/**
 * drop: closes an answer whose body is not used, unread: the status says it all, the connection
 * is not reused, and an error page that drips or never ends must not hold the transfer to its deadline.
 */
function drop(body: Readable): void {
  body.destroy()
}

/** fetchSource: the body at `url` (a source PDF), following checked redirects, or why not. */
export function fetchSource(url: string, options: FetchOptions): Promise<Fetched | TransferRefusal> {
  return fetchSourceVia(exchange, url, options)
}

/**
 * fetchSourceVia: fetchSource with each request made by `send` (tests give a server that
 * answers as a public host would, to prove a redirect from it is checked again).
 */
export async function fetchSourceVia(send: Exchange, url: string, options: FetchOptions): Promise<Fetched | TransferRefusal> {
  const maxRedirects = options.maxRedirects ?? 3
  const { signal, done } = deadline(options.timeoutMs)
  const headers = { 'user-agent': USER_AGENT, accept: 'application/pdf, */*' }
  try {
    let next = url
    for (let hop = 0; ; hop++) {
      const checked = await checkHop(next, hop, options, signal)
      if ('refused' in checked) return refusal('refused', checked.refused)
      const answer = await send({ url: checked.url, target: checked.target, method: 'GET', headers, ca: options.ca }, signal)
      if (REDIRECTS.has(answer.status)) {
        drop(answer.body)
        if (hop >= maxRedirects) return refusal('refused', `more than ${maxRedirects} redirects`)
        const location = answer.headers.location === undefined ? null : URL.parse(answer.headers.location, checked.url)
        if (location === null) return refusal('failed', `HTTP ${answer.status} without a valid Location`)
        location.hash = ''
        next = location.href
        continue
      }
      if (answer.status < 200 || answer.status >= 300) {
        drop(answer.body)
        return refusal('failed', `HTTP ${answer.status}`)
      }
      return await readSource(answer, checked.url, options.maxBytes)
    }
  } catch (error) {
    return refusal('failed', why(error, signal.aborted, options.timeoutMs))
  } finally {
    done()
  }
}

const refusal = (reason: TransferRefusal['reason'], detail: string): TransferRefusal => ({ ok: false, reason, detail })

/** readSource: the answer's body, counted as it arrives and refused past `maxBytes`, copied once into shared memory. */
async function readSource(answer: Answer, url: URL, maxBytes: number): Promise<Fetched | TransferRefusal> {
  const declared = Number(answer.headers['content-length'])
  if (declared > maxBytes) {
    answer.body.destroy()
    return refusal('too-large', `${declared} bytes, over the limit of ${maxBytes}`)
  }
  const chunks: Buffer[] = []
  let total = 0
  for await (const chunk of answer.body) {
    total += (chunk as Buffer).length
    if (total > maxBytes) {
      answer.body.destroy()
      return refusal('too-large', `over the limit of ${maxBytes} bytes`)
    }
    chunks.push(chunk as Buffer)
  }
  const bytes = new Uint8Array(new SharedArrayBuffer(total))
  let at = 0
  for (const chunk of chunks) {
    bytes.set(chunk, at)
    at += chunk.length
  }
  return { ok: true, bytes, filename: filenameOf(answer.headers['content-disposition'], url) }
}

const PARAMETER = /;\s*(filename\*?)\s*=\s*("(?:[^"\\]|\\.)*"|[^;]*)/gi

/** filenameOf: Content-Disposition's filename* or filename (RFC 6266), else the URL's last path segment, else null. */
function filenameOf(disposition: string | undefined, url: URL): string | null {
  const found = new Map<string, string>()
  for (const [, name, raw] of (disposition ?? '').matchAll(PARAMETER)) {
    const value = raw!.trim()
    found.set(name!.toLowerCase(), value.startsWith('"') ? value.slice(1, -1).replace(/\\(.)/g, '$1') : value)
  }
  const extended = found.has('filename*') ? decodeExtended(found.get('filename*')!) : null
  const named = extended ?? found.get('filename') ?? ''
  if (named !== '') return named
  const last = url.pathname.split('/').at(-1) ?? ''
  if (last === '') return null
  try {
    return decodeURIComponent(last)
  } catch {
    return last
  }
}

/** decodeExtended: an RFC 8187 value (`UTF-8''r%C3%A9sum%C3%A9.pdf`), or null when it does not decode. */
function decodeExtended(value: string): string | null {
  const match = /^([\w!#$%&+^`{}~-]+)'[^']*'(.*)$/.exec(value)
  if (match === null) return null
  const charset = match[1]!.toLowerCase()
  try {
    if (charset === 'utf-8') return decodeURIComponent(match[2]!) || null
    // Latin-1 bytes are the first 256 code points.
    if (charset === 'iso-8859-1') return match[2]!.replace(/%([0-9a-f]{2})/gi, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16))) || null
  } catch {
    return null
  }
  return null
}

/**
 * putResult: uploads a finished result by one PUT to `url` (no redirect followed: a 3xx is a
 * failure), with its exact size announced (presigned S3 PUTs refuse chunked bodies) and its
 * chunks pulled only as fast as the connection takes them.
 */
export async function putResult(url: string, body: ResultBody, options: PutOptions): Promise<PutOutcome> {
  const { signal, done } = deadline(options.timeoutMs)
  let written: Promise<void> = Promise.resolve()
  try {
    const checked = await checkHop(url, 0, options, signal)
    if ('refused' in checked) return { statusCode: null, error: `refused: ${checked.refused}` }
    const headers = { ...body.headers, 'user-agent': USER_AGENT, 'content-type': body.contentType, 'content-length': String(body.size) }
    const write = (request: Writable) => {
      written = writeChunks(request, body)
      return written
    }
    const answer = await exchange({ url: checked.url, target: checked.target, method: 'PUT', headers, body: write, ca: options.ca }, signal)
    if (answer.status < 200 || answer.status >= 300) {
      drop(answer.body)
      return { statusCode: answer.status, error: `HTTP ${answer.status}` }
    }
    // A receiver that says yes before it has the whole body has not stored it whole: a success only once all was sent.
    await written
    drop(answer.body)
    return { statusCode: answer.status, error: null }
  } catch (error) {
    return { statusCode: null, error: why(error, signal.aborted, options.timeoutMs) }
  } finally {
    done()
  }
}

/** writeChunks: the body's chunks into `request`, waiting for it to drain, refusing a total other than the size announced. */
async function writeChunks(request: Writable, body: ResultBody): Promise<void> {
  let sent = 0
  for await (const chunk of body.chunks()) {
    if (request.destroyed) throw new Error('the connection closed while sending')
    sent += chunk.byteLength
    if (sent > body.size) throw new Error(`the result is longer than the ${body.size} bytes announced`)
    if (!request.write(chunk)) await drained(request)
  }
  if (sent !== body.size) throw new Error(`the result is ${sent} bytes, not the ${body.size} announced`)
}

/** drained: resolves when `stream` takes writes again, rejects when it closes first. */
function drained(stream: Writable): Promise<void> {
  return new Promise((resolve, reject) => {
    const settle = () => {
      stream.off('drain', settle)
      stream.off('close', settle)
      stream.off('error', settle)
      if (stream.destroyed) reject(new Error('the connection closed while sending'))
      else resolve()
    }
    stream.on('drain', settle)
    stream.on('close', settle)
    stream.on('error', settle)
  })
}
