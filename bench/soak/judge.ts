/**
 * What the soak makes of one answer: the failures it shows (a 5xx other than a documented 503
 * with Retry-After; a status the case does not take, or the operation does not document; an
 * answer the served document does not describe; a 200 cut short outside the documented case,
 * or whose bytes are not whole; no answer at all), or that it is a cut the guide documents.
 */
import { checkAnswer, type OpenApiDocument } from '../../test/support/conformance.ts'
import { incomplete } from './complete.ts'
import type { Answer, Case, Mode, Operation } from './types.ts'

export interface Verdict {
  readonly failures: string[]
  /** A 200 that ended short where docs/guide.md says one may ("When an answer can end short"). */
  readonly documentedCut: boolean
  /** The client hung up on purpose (its mode): nothing to judge past the status. */
  readonly clientAbort: boolean
  /** The server dropped a client that stopped reading. */
  readonly stallDropped: boolean
}

/** Streamed answers: the kinds the guide says may end short (a zip of pages, a multi-page TIFF, text, PostScript). */
const STREAMED = /^(application\/zip|image\/tiff|application\/postscript|application\/json|text\/plain)/

/** Answers Node's HTTP parser gives before any route runs: no document can list them. */
const PROTOCOL = new Set([400, 413, 414, 431])

const header = (a: Answer, name: string) => {
  const v = a.headers[name]
  return Array.isArray(v) ? v.join(', ') : (v ?? '')
}

/** errorCode: a catalogue error's code and message, as ` (CODE: message)`, when the body is one; '' otherwise. */
function errorCode(a: Answer): string {
  try {
    const body = JSON.parse(a.body?.toString('utf8') ?? '') as { code?: unknown; message?: unknown }
    return typeof body.code === 'string' ? ` (${body.code}: ${String(body.message ?? '').slice(0, 200)})` : ''
  } catch {
    return ''
  }
}

export async function judge(doc: OpenApiDocument, op: Operation, c: Case, mode: Mode, urlPath: string, a: Answer): Promise<Verdict> {
  const failures: string[] = []
  const verdict = { failures, documentedCut: false, clientAbort: a.error === 'client-abort', stallDropped: a.error === 'stalled reader dropped' }
  if (a.status === 0) {
    // No status: the client's own hang-up before the answer (an aborted upload) is fine; anything else is a failure.
    if (!verdict.clientAbort && !verdict.stallDropped && !(mode === 'abort-upload' && /ECONNRESET|EPIPE/.test(a.error ?? ''))) {
      failures.push(`no answer: ${a.error ?? 'unknown'}`)
    }
    return verdict
  }
  const status = a.status
  const retryAfter = header(a, 'retry-after')
  if (status >= 500 && !(status === 503 && retryAfter !== '' && op.statuses.includes('503'))) {
    failures.push(`${status}${status === 503 ? ' without Retry-After' : ''}: ${(a.body?.toString('utf8') ?? '').slice(0, 300)}`)
  }
  const limited = status === 429 || (status === 503 && retryAfter !== '')
  const documented = op.statuses.includes(String(status))
  if (c.expect !== undefined && !c.expect.includes(status) && !limited)
    failures.push(`status ${status}${errorCode(a)}, the case takes ${c.expect.join(' or ')}`)
  else if (c.expect === undefined && !documented && !PROTOCOL.has(status)) failures.push(`status ${status} is not documented for ${op.id}`)
  if (verdict.clientAbort || verdict.stallDropped) return verdict
  if (a.cut) {
    const type = header(a, 'content-type')
    if (status === 200 && c.mayCut === true && STREAMED.test(type) && header(a, 'content-length') === '') verdict.documentedCut = true
    else failures.push(`${status} ${type} cut short (${header(a, 'content-length') === '' ? 'chunked' : `content-length ${header(a, 'content-length')}`})`)
    return verdict
  }
  if (a.body === null) return verdict
  if (status === 200 || status === 201) {
    const broken = incomplete(header(a, 'content-type'), a.body)
    if (broken !== null) failures.push(`${status} not whole: ${broken}`)
  }
  if (documented) {
    try {
      const headers = new Headers()
      for (const [k, v] of Object.entries(a.headers)) if (v !== undefined) headers.set(k, Array.isArray(v) ? v.join(', ') : v)
      const empty = status === 204 || status === 304 || op.method === 'HEAD'
      await checkAnswer(doc, op.method, urlPath, new Response(empty ? null : new Uint8Array(a.body), { status, headers }))
    } catch (error) {
      failures.push(`not as documented: ${(error as Error).message}`)
    }
  }
  return verdict
}
