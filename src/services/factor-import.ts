/**
 * Bulk import of the secrets an account's users already have: a CSV of `userID, secret or
 * otpauth URI, label` (RFC 4180), split into lines as it streams in (csv-lines.ts) and each line
 * read by csv-parse on its own, so that a malformed line is refused alone; each imported as the
 * single import does (Factors.importAs: sealed on arrival, one `factor.created` event a factor,
 * never the secret), each line's outcome reported as it is known, in line order.
 *
 * Resumable twice over: an imported factor's id is derived from account, user and secret, so a
 * file imported again reports what went in before as `exists` and adds the rest; and `from`
 * skips the lines before a given one (where an interrupted run's report stopped).
 * Bounded: a line's size, the file's bytes, and the lines in flight at once.
 */
import { parse } from 'csv-parse/sync'
import { render } from '../errors/catalogue.ts'
import type { FactorStatus } from '../domain/factors.ts'
import type { ProfileName } from '../totp/profiles.ts'
import type { Factors } from './factors.ts'
import { isFailure, type Context } from './outcome.ts'
import { fileLines, type FileLine } from './csv-lines.ts'

export interface BulkImportOptions {
  /** The issuer of lines whose secret is bare base32 (a URI's own issuer wins). */
  readonly applicationId?: string
  readonly profile: ProfileName
  readonly status: FactorStatus
  /** The first line to import (1-based, as reported); earlier lines are read and skipped. */
  readonly from: number
  /** The most bytes read; beyond them the import stops, and the summary's `stopped` says so. */
  readonly maxBytes: number
}

export type LineOutcome =
  | { readonly line: number; readonly userID: string; readonly outcome: 'imported'; readonly factorID: string }
  | { readonly line: number; readonly userID: string; readonly outcome: 'exists'; readonly factorID: string }
  | { readonly line: number; readonly userID: string | null; readonly outcome: 'refused'; readonly code: string; readonly message: string }
  | { readonly line: number; readonly outcome: 'skipped' }

export interface ImportSummary {
  readonly done: true
  readonly lines: number
  readonly imported: number
  readonly exists: number
  readonly refused: number
  readonly skipped: number
  /** Why the import stopped before the end of the file (too large, unreadable), or null. */
  readonly stopped: string | null
}

/** Lines imported at once: enough to keep a PostgreSQL pool busy, few enough that a report stays in step. */
const IN_FLIGHT = 8
/** MAX_LINE is the longest line taken, in bytes: a user ID (1 KiB in UTF-8 at most), a URI (4 KiB) and a label, quoted. */
export const MAX_LINE = 8192
const HEADER = new Set(['userid', 'user_id', 'user'])

/** The codes only an import's report gives (a line's `refused`, in an answer of 200), never an HTTP answer. */
export const IMPORT_LINE_CODES = ['CSV_LINE_INVALID', 'CSV_LINE_TOO_LONG'] as const

// ignoreBOM keeps a byte order mark in the text (the decoder would drop one that starts a line), so that the line is refused for it.
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

/** What no line may hold (its fields' rules would not all see them): NUL (a UTF-16 file?), a byte order mark past the file's start, a CR not ending the line. */
const STRAY = /[\u0000\ufeff\r]/

/**
 * importCsv imports the CSV `input` into the account, yielding each line's outcome in order,
 * then the summary. Every line of the file but blank ones and the header is reported once, so
 * that `lines` is `imported + exists + refused + skipped`. The account must exist (the caller
 * checks: a door answers 404 before it starts streaming).
 */
export async function* importCsv(
  factors: Factors,
  ctx: Context,
  accountId: string,
  input: AsyncIterable<Buffer | string>,
  options: BulkImportOptions,
): AsyncGenerator<LineOutcome | ImportSummary> {
  const counts = { lines: 0, imported: 0, exists: 0, refused: 0, skipped: 0 }
  let stopped: string | null = null
  let seen = false
  const pending: Promise<LineOutcome>[] = []
  const tally = (o: LineOutcome) => {
    counts.lines++
    counts[o.outcome]++
    return o
  }

  for await (const item of fileLines(input, MAX_LINE, options.maxBytes)) {
    if (item.kind === 'stopped') {
      stopped = item.why
      break
    }
    const outcome = readLine(item)
    if (outcome === null) continue
    const first = !seen
    seen = true
    if (first && outcome.fields !== undefined && HEADER.has(outcome.fields[0]!.toLowerCase())) continue
    const { line } = item
    const taken: LineOutcome | Promise<LineOutcome> =
      line < options.from
        ? { line, outcome: 'skipped' }
        : outcome.fields === undefined
          ? outcome.refused
          : importLine(factors, ctx, accountId, line, outcome.fields, options)
    pending.push(Promise.resolve(taken))
    if (pending.length >= IN_FLIGHT) yield tally(await pending.shift()!)
  }
  while (pending.length > 0) yield tally(await pending.shift()!)
  yield { done: true, ...counts, stopped }
}

/** readLine gives a line's fields (userID, secret, and a label or ''), its refusal, or null for a blank line. */
function readLine(item: Exclude<FileLine, { kind: 'stopped' }>): { fields: string[]; refused?: never } | { fields?: never; refused: LineOutcome } | null {
  const { line } = item
  const refuse = (code: (typeof IMPORT_LINE_CODES)[number], params: Record<string, string | number>) => ({
    refused: { line, userID: null, outcome: 'refused', code, message: render(code, params) } as const,
  })
  if (item.kind === 'too-long') return refuse('CSV_LINE_TOO_LONG', { limit: MAX_LINE })
  let text: string
  try {
    text = utf8.decode(item.bytes)
  } catch {
    return refuse('CSV_LINE_INVALID', { reason: 'it is not UTF-8 text' })
  }
  // Blank: spaces and tabs only (String.trim would take a lone byte order mark for blank too).
  if (/^[ \t]*$/.test(text)) return null
  const stray = STRAY.exec(text)?.[0]
  if (stray !== undefined) {
    const reason = {
      '\u0000': 'it holds a NUL byte (a UTF-16 file? save it as UTF-8)',
      '\ufeff': 'it holds a byte order mark (U+FEFF), which may only begin the file',
      '\r': 'it holds a carriage return that does not end it (lines end in LF or CRLF)',
    }[stray]!
    return refuse('CSV_LINE_INVALID', { reason })
  }
  let records: string[][]
  try {
    records = parse(text, { trim: true, relax_column_count: true, record_delimiter: '\n', bom: false })
  } catch (error) {
    // The parser's own message quotes the line (a secret in it): only what is wrong is told.
    return refuse('CSV_LINE_INVALID', { reason: PARSE_ERRORS[(error as { code?: string }).code ?? ''] ?? 'it is not RFC 4180 CSV' })
  }
  const fields = records[0] ?? []
  if (records.length !== 1 || fields.length < 2 || fields.length > 3)
    return refuse('CSV_LINE_INVALID', { reason: `it has ${fields.length} field(s): userID, secret and an optional label are 2 or 3` })
  return { fields }
}

const PARSE_ERRORS: Record<string, string> = {
  CSV_QUOTE_NOT_CLOSED: 'a quoted field is not closed on the line',
  INVALID_OPENING_QUOTE: 'a quote inside a field that does not start with one',
  CSV_INVALID_CLOSING_QUOTE: 'text after the closing quote of a field',
}

async function importLine(
  factors: Factors,
  ctx: Context,
  accountId: string,
  line: number,
  [rawUser = '', secret = '', label = '']: string[],
  options: BulkImportOptions,
): Promise<LineOutcome> {
  const userId = await factors.userId(accountId, rawUser)
  if (isFailure(userId)) return { line, userID: rawUser, outcome: 'refused', code: 'USER_ID_INVALID', message: userId.message }
  if (label.length > 64 || /[\u0000-\u001f\u007f]/.test(label)) {
    return { line, userID: userId, outcome: 'refused', code: 'LABEL_INVALID', message: 'label must be at most 64 characters, without control characters' }
  }
  const uri = /^otpauth:/i.test(secret)
  const made = await factors.importAs(ctx, accountId, userId, {
    source: {
      ...(uri ? { otpURL: secret } : { secret }),
      ...(options.applicationId === undefined ? {} : { fallbackApplicationId: options.applicationId }),
      profile: options.profile,
    },
    label: label === '' ? null : label,
    status: options.status,
  })
  if (!isFailure(made)) return { line, userID: userId, outcome: 'imported', factorID: made.id }
  const problem = made.problems[0]!
  if (problem.code === 'FACTOR_EXISTS') return { line, userID: userId, outcome: 'exists', factorID: String(problem.params!.factorID) }
  // The message names what is wrong, never the secret (the catalogue's messages hold no value given).
  return { line, userID: userId, outcome: 'refused', code: problem.code, message: made.message }
}
