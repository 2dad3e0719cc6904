/**
 * send: one HTTP POST of a webhook, bounded in every way a receiver could stretch it: one
 * deadline from the name lookup to the end of the answer, at most MAX_ANSWER_BYTES of the
 * answer read (and then dropped), no redirect followed (a 3xx is a failed attempt), and the
 * connection made to the address resolveTarget checked, handed to Node as the only answer of
 * its lookup: TLS still checks the certificate for the URL's host name, sent as SNI and Host.
 */
import http from 'node:http'
import https from 'node:https'
import type { LookupFunction } from 'node:net'
import { resolveTarget, type Lookup } from './address.ts'

/** What is read of an answer at most (its body is not used: the status says it all). */
export const MAX_ANSWER_BYTES = 64 * 1024

export interface SendOptions {
  readonly timeoutMs: number
  readonly allowPrivate: boolean
  /** Extra trusted certificates (tests' own CA); default: Node's. */
  readonly ca?: string | Buffer
  readonly lookup?: Lookup
}

export interface Sent {
  /** The status answered, or null when there was none. */
  readonly statusCode: number | null
  /** Why the attempt failed (null: a 2xx). Never holds the secret or the payload. */
  readonly error: string | null
}

export async function send(url: string, headers: Record<string, string>, body: string, options: SendOptions): Promise<Sent> {
  const target = new URL(url)
  const controller = new AbortController()
  const timer = setTimeout(() => controller.abort(), options.timeoutMs)
  try {
    const resolved = await Promise.race([
      resolveTarget(target.hostname, options.allowPrivate, options.lookup),
      new Promise<never>((_, reject) => controller.signal.addEventListener('abort', () => reject(new Error('name lookup timed out')))),
    ])
    if ('reason' in resolved) return { statusCode: null, error: `refused: ${resolved.reason}` }
    const pinned: LookupFunction = (_hostname, opts, callback) => {
      if ((opts as { all?: boolean }).all) (callback as unknown as (e: null, a: { address: string; family: number }[]) => void)(null, [resolved])
      else callback(null, resolved.address, resolved.family)
    }
    const statusCode = await post(target, headers, body, pinned, controller.signal, options.ca)
    return { statusCode, error: statusCode >= 200 && statusCode < 300 ? null : `HTTP ${statusCode}` }
  } catch (error) {
    const e = error as NodeJS.ErrnoException
    return { statusCode: null, error: controller.signal.aborted ? `timed out after ${options.timeoutMs} ms` : (e.code ?? e.message) }
  } finally {
    clearTimeout(timer)
  }
}

function post(target: URL, headers: Record<string, string>, body: string, lookup: LookupFunction, signal: AbortSignal, ca?: string | Buffer): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = (target.protocol === 'https:' ? https : http).request(
      {
        protocol: target.protocol,
        hostname: target.hostname.replace(/^\[(.*)\]$/, '$1'),
        port: target.port === '' ? undefined : Number(target.port),
        path: `${target.pathname}${target.search}`,
        method: 'POST',
        headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
        lookup,
        signal,
        // A connection of its own: nothing pooled outlives the attempt, or carries another endpoint's address.
        agent: false,
        ...(ca === undefined ? {} : { ca }),
      },
      (response) => {
        let read = 0
        response.on('data', (chunk: Buffer) => {
          read += chunk.length
          if (read > MAX_ANSWER_BYTES) {
            response.destroy()
            resolve(response.statusCode ?? 0)
          }
        })
        response.on('end', () => resolve(response.statusCode ?? 0))
        response.on('error', reject)
      },
    )
    request.on('error', reject)
    request.end(body)
  })
}
