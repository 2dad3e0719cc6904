/**
 * Bodies that are a set of text fields (the TOTP routes), in the three forms Renda.io's
 * clients send: application/x-www-form-urlencoded, JSON, and multipart/form-data (what
 * `curl -F` sends). Each is read whole within the route's body limit (413 past it) and
 * decoded strictly:
 * - text that is not valid UTF-8 (raw bytes or percent-escapes) and JSON strings with a
 *   lone UTF-16 surrogate become a value that fails the field's schema, so the client gets
 *   the field's own 400 beside every other problem, never the text with replacement
 *   characters or a 500 further in;
 * - a body that does not parse as its type (no multipart boundary, a truncated part,
 *   broken JSON) is MALFORMED_BODY.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { isAscii, isUtf8 } from 'node:buffer'
import querystring from 'node:querystring'
import fastQuerystring from 'fast-querystring'
import { Busboy } from '@fastify/busboy'

/** MALFORMED_TEXT stands in for a value that is not text: no string schema accepts it. */
export const MALFORMED_TEXT = Object.freeze({ malformedText: true })
/** A lone surrogate marks undecodable text between the parsers and the check (it is not well-formed either). */
const UNDECODABLE = '\uD800'
/** Most fields a body may have; the schemas name at most eight. */
const MAX_FIELDS = 32

function badBody(message: string): Error & { statusCode: number } {
  return Object.assign(new Error(message), { statusCode: 400 })
}

/** utf8 decodes bytes strictly: UNDECODABLE when they are not UTF-8. */
function utf8(bytes: Buffer): string {
  return isUtf8(bytes) ? bytes.toString('utf8') : UNDECODABLE
}

/** add keeps every value of a repeated field (an array then fails the field's schema, as a repeated form field does). */
function add(fields: Record<string, unknown>, name: string, value: string): void {
  const had = fields[name]
  fields[name] = had === undefined ? value : Array.isArray(had) ? [...had, value] : [had, value]
}

const HEX = /^[0-9a-fA-F]{2}$/

/** unescapeBytes turns a latin1 string (one character per raw byte) with %XX escapes into bytes; a broken escape stays as it is. */
function unescapeBytes(text: string): Buffer {
  const out = Buffer.allocUnsafe(text.length)
  let n = 0
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === 0x25 && HEX.test(text.slice(i + 1, i + 3))) {
      out[n++] = Number.parseInt(text.slice(i + 1, i + 3), 16)
      i += 2
    } else out[n++] = c === 0x2b ? 0x20 : c
  }
  return out.subarray(0, n)
}

/**
 * The usual body (base32 secrets, digits, names without escapes) has nothing to decode:
 * fast-querystring (what @fastify/formbody used) is exact there and several times cheaper,
 * and ASCII is well-formed text, so there is nothing to mark either.
 */
const isPlain = (body: Buffer) => body.indexOf(0x25) === -1 && isAscii(body)

/** parseForm reads urlencoded bytes: `+` is a space, escapes are bytes, the bytes must be UTF-8. */
export function parseForm(body: Buffer): Record<string, unknown> {
  if (isPlain(body)) return fastQuerystring.parse(body.toString('latin1'))
  // latin1 keeps each raw byte as one character, which unescapeBytes writes back as that byte.
  return querystring.parse(body.toString('latin1'), '&', '=', {
    maxKeys: MAX_FIELDS,
    decodeURIComponent: (text) => utf8(unescapeBytes(text)),
  })
}

/** parseMultipart reads a whole multipart body into fields; a file part's content is its field's value. */
export function parseMultipart(contentType: string, body: Buffer, limit: number): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    let parser: InstanceType<typeof Busboy>
    try {
      // latin1 gives the bytes back unchanged, to decode strictly as UTF-8 here.
      parser = new Busboy({ headers: { 'content-type': contentType }, defCharset: 'latin1', limits: { parts: MAX_FIELDS, fieldSize: limit, fileSize: limit } })
    } catch (error) {
      reject(badBody((error as Error).message))
      return
    }
    const fields: Record<string, unknown> = Object.create(null)
    parser.on('field', (name: string, value: string) => add(fields, name, utf8(Buffer.from(value, 'latin1'))))
    parser.on('file', (name: string, stream: NodeJS.ReadableStream) => {
      const chunks: Buffer[] = []
      stream.on('data', (chunk: Buffer) => chunks.push(chunk))
      stream.on('end', () => add(fields, name, utf8(Buffer.concat(chunks))))
    })
    parser.on('partsLimit', () => reject(badBody('too many parts')))
    parser.on('error', (error: Error) => reject(badBody(error.message)))
    parser.on('finish', () => resolve(fields))
    parser.end(body)
  })
}

/** markMalformed swaps each top-level value that is not well-formed text for MALFORMED_TEXT, and gives the body back. */
function markMalformed(body: unknown): unknown {
  if (typeof body === 'object' && body !== null && !Array.isArray(body)) {
    const fields = body as Record<string, unknown>
    for (const name of Object.keys(fields)) {
      const value = fields[name]
      const bad = typeof value === 'string' ? !value.isWellFormed() : Array.isArray(value) && value.some((v) => typeof v === 'string' && !v.isWellFormed())
      if (bad) fields[name] = MALFORMED_TEXT
    }
  }
  return body
}

/**
 * acceptFields gives a route scope its field bodies; call it before the scope's routes.
 * Each parser marks malformed text itself. No body at all, or a JSON body of no bytes, is an
 * empty set of fields: a route whose fields are all optional (a passkey's options) takes it,
 * and a route with required fields names them, as it does for an empty form.
 */
export function acceptFields(scope: FastifyInstance, bodyLimit: number): void {
  const json = scope.getDefaultJsonParser('error', 'error')
  scope.removeContentTypeParser('application/json')
  scope.addContentTypeParser('application/json', { parseAs: 'buffer', bodyLimit }, (request, body, done) => {
    const bytes = body as Buffer
    if (bytes.length === 0) return done(null, {})
    if (!isUtf8(bytes)) return done(badBody('not UTF-8'), undefined)
    json(request, bytes.toString('utf8'), (error, parsed) => (error ? done(error, undefined) : done(null, markMalformed(parsed))))
  })
  scope.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'buffer', bodyLimit }, (_request, body, done) => {
    const bytes = body as Buffer
    done(null, isPlain(bytes) ? fastQuerystring.parse(bytes.toString('latin1')) : markMalformed(parseForm(bytes)))
  })
  scope.addContentTypeParser('multipart/form-data', { parseAs: 'buffer', bodyLimit }, async (request: FastifyRequest, body: string | Buffer) =>
    markMalformed(await parseMultipart(String(request.headers['content-type']), body as Buffer, bodyLimit)),
  )
  emptyBodyIsNoFields(scope)
}

/** emptyBodyIsNoFields: a request with no body at all (a POST with none) reaches a route that takes a body as an empty object, not a type error. */
export function emptyBodyIsNoFields(scope: FastifyInstance): void {
  scope.addHook('preValidation', (request, _reply, done) => {
    if (request.body === undefined && request.routeOptions.schema?.body !== undefined) request.body = {}
    done()
  })
}
