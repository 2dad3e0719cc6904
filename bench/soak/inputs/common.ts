/**
 * What the input table's entries share: bodies (form, JSON, multipart, written byte by byte so
 * that a hostile value goes as it is), the hostile IDs every path parameter is tried with, and
 * TOTP codes.
 */
import { randomBytes } from 'node:crypto'
import { HOTP, Secret } from 'otpauth'
import type { Request } from '../types.ts'

/**
 * percent percent-encodes text as a form or a path writes it, except that a lone surrogate goes
 * as the three bytes WTF-8 gives it (%ED%A0%80 for U+D800), which encodeURIComponent refuses to write.
 */
export function percent(text: string): string {
  return text.replace(/[\ud800-\udbff][\udc00-\udfff]|[\s\S]/g, (ch) => {
    const unit = ch.charCodeAt(0)
    if (ch.length === 1 && unit >= 0xd800 && unit <= 0xdfff)
      return `%ED%${(0x80 | ((unit >> 6) & 0x3f)).toString(16).toUpperCase()}%${(0x80 | (unit & 0x3f)).toString(16).toUpperCase()}`
    return encodeURIComponent(ch)
  })
}

/** form is an application/x-www-form-urlencoded body; values given as `raw(…)` go unencoded. */
export function form(fields: Record<string, string | { raw: string }>, headers: Record<string, string> = {}): Request {
  const body = Object.entries(fields)
    .map(([k, v]) => `${percent(k)}=${typeof v === 'string' ? percent(v) : v.raw}`)
    .join('&')
  return { body, headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers } }
}

export const raw = (text: string) => ({ raw: text })

/** json is an application/json body (a string body goes as it is: broken JSON, lone surrogates as \\ud800). */
export function json(value: unknown, headers: Record<string, string> = {}): Request {
  return { body: typeof value === 'string' ? value : JSON.stringify(value), headers: { 'content-type': 'application/json', ...headers } }
}

export interface Part {
  readonly name: string
  readonly value: string | Buffer
  readonly filename?: string
  readonly type?: string
}

/** multipart is a multipart/form-data body, each part as given (a file part when it has a filename). */
export function multipart(parts: readonly Part[], headers: Record<string, string> = {}): Request {
  const boundary = `soak${randomBytes(12).toString('hex')}`
  const pieces: Buffer[] = []
  for (const p of parts) {
    const disposition = `form-data; name="${p.name}"${p.filename === undefined ? '' : `; filename="${p.filename}"`}`
    const type = p.filename === undefined ? '' : `\r\nContent-Type: ${p.type ?? 'application/pdf'}`
    pieces.push(Buffer.from(`--${boundary}\r\nContent-Disposition: ${disposition}${type}\r\n\r\n`, 'utf8'), Buffer.from(p.value), Buffer.from('\r\n'))
  }
  pieces.push(Buffer.from(`--${boundary}--\r\n`))
  return { body: Buffer.concat(pieces), headers: { 'content-type': `multipart/form-data; boundary=${boundary}`, ...headers } }
}

/** pdf is the usual file part. */
export const pdf = (value: Buffer, filename = 'document.pdf'): Part => ({ name: 'pdfDocument', value, filename })

/**
 * Hostile path segments, as they go on the wire: the longest ID taken and one more, dot
 * segments plain and encoded, an encoded slash, a NUL, bidi overrides, a lone surrogate (its
 * WTF-8 bytes: no encoder writes them), combining marks, an emoji, spaces and quotes, and SQL.
 */
export const HOSTILE_IDS: readonly string[] = [
  'a'.repeat(256),
  'b'.repeat(257),
  'c'.repeat(4096),
  '..',
  '.',
  '%2e%2e',
  '%2E',
  '..%2f..%2fetc%2fpasswd',
  '%2F',
  '%00',
  'a%00b',
  encodeURIComponent('\u202eevil\u202c'),
  encodeURIComponent('\u2066x\u2069'),
  '%ED%A0%80',
  'x%ED%B0%80y',
  '%C0%AE%C0%AE',
  '%FF%FE',
  encodeURIComponent('e\u0301\u0301\u0301'),
  encodeURIComponent('\u{1F600}'),
  '%20',
  '%22%27%3C%3E',
  encodeURIComponent("1' OR '1'='1"),
  '%25',
  '%',
]

/** hostileId is the n-th hostile ID, in turn. */
export const hostileId = (n: number) => HOSTILE_IDS[n % HOSTILE_IDS.length]!

/** Hostile text values for body fields (not path segments): the same spirit, as text. */
export const HOSTILE_TEXT: readonly string[] = [
  'x'.repeat(257),
  'y'.repeat(100_000),
  '',
  ' ',
  '\u0000',
  '\u202eevil\u202c',
  '\ud800',
  '\udfff\ud800',
  '../../etc/passwd',
  '%2e%2e',
  '\u{1F600}'.repeat(100),
  "'; DROP TABLE accounts; --",
  '{"$gt":""}',
]

export const hostileText = (n: number) => HOSTILE_TEXT[n % HOSTILE_TEXT.length]!

/** base32 of fresh random bytes: a TOTP secret. */
export function newSecret(bytes = 20): string {
  return new Secret({ buffer: randomBytes(bytes).buffer as ArrayBuffer }).base32
}

/** code is the TOTP code of a base32 secret at a time step (default now), SHA1, 6 digits, 30 s, unless told. */
export function code(secret: string, step = Math.floor(Date.now() / 30_000), digits = 6, algorithm = 'SHA1'): string {
  return HOTP.generate({ secret: Secret.fromBase32(secret), counter: step, digits, algorithm })
}

export const stepNow = () => Math.floor(Date.now() / 30_000)

/** take removes and gives the oldest value kept under `name`, or undefined. */
export function take<T>(kept: Map<string, unknown[]>, name: string): T | undefined {
  return kept.get(name)?.shift() as T | undefined
}

/** keep adds a value under `name`, forgetting the oldest past `max`. */
export function keep(kept: Map<string, unknown[]>, name: string, value: unknown, max = 200): void {
  const list = kept.get(name) ?? []
  list.push(value)
  if (list.length > max) list.shift()
  kept.set(name, list)
}

/** bodyJson reads an answer's body as JSON, or null. */
export function bodyJson<T>(body: Buffer | null): T | null {
  if (body === null) return null
  try {
    return JSON.parse(body.toString('utf8')) as T
  } catch {
    return null
  }
}
