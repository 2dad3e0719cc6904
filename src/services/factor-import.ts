/**
 * Bulk import of the secrets an account's users already have: a CSV of `userID, secret or
 * otpauth URI, label` (RFC 4180, read by csv-parse as it streams in), each line imported as the
 * single import does (Factors.importAs: sealed on arrival, one `factor.created` event a factor,
 * never the secret), each line's outcome reported as it is known, in line order.
 *
 * Resumable twice over: an imported factor's id is derived from account, user and secret, so a
 * file imported again reports what went in before as `exists` and adds the rest; and `from`
 * skips the lines before a given one (where an interrupted run's report stopped).
 * Bounded: a line's size, the file's bytes, and the lines in flight at once.
 */
import { parse } from 'csv-parse'
import type { Readable } from 'node:stream'
import type { FactorStatus } from '../domain/factors.ts'
import type { ProfileName } from '../totp/profiles.ts'
import type { Factors } from './factors.ts'
import { isFailure, type Context } from './outcome.ts'

export interface BulkImportOptions {
  /** The issuer of lines whose secret is bare base32 (a URI's own issuer wins). */
  readonly applicationId?: string
  readonly profile: ProfileName
  readonly status: FactorStatus
  /** The first line to import (1-based, as reported); earlier lines are read and skipped. */
  readonly from: number
  /** The most bytes read; beyond them the import stops with a refusal of its own. */
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
/** The longest line taken: a user ID (1 KiB in UTF-8 at most), a URI (4 KiB) and a label, quoted. */
const MAX_LINE = 8192
const HEADER = new Set(['userid', 'user_id', 'user'])

/**
 * importCsv imports the CSV `input` into the account, yielding each line's outcome in order,
 * then the summary. The account must exist (the caller checks: a door answers 404 before it
 * starts streaming).
 */
export async function* importCsv(
  factors: Factors,
  ctx: Context,
  accountId: string,
  input: Readable | AsyncIterable<Buffer | string>,
  options: BulkImportOptions,
): AsyncGenerator<LineOutcome | ImportSummary> {
  const counts = { lines: 0, imported: 0, exists: 0, refused: 0, skipped: 0 }
  let stopped: string | null = null
  let bytes = 0
  const parser = parse({
    bom: true,
    trim: true,
    skip_empty_lines: true,
    relax_column_count: true,
    max_record_size: MAX_LINE,
    skip_records_with_error: true,
    info: true,
  })
  const unreadable: LineOutcome[] = []
  parser.on('skip', (error: Error & { lines?: number; code?: string }) => {
    // The parser's own message may quote the line (a secret in it): only its code is told.
    const why = error.code === 'CSV_MAX_RECORD_SIZE' ? `longer than ${MAX_LINE} bytes` : `not CSV (${error.code ?? 'unreadable'})`
    unreadable.push({ line: error.lines ?? 0, userID: null, outcome: 'refused', code: 'CSV_LINE_INVALID', message: `the line is ${why}` })
  })
  // Fed by hand, so that a file past its bytes stops being read (and the parser ends cleanly).
  const feed = (async () => {
    try {
      for await (const chunk of input) {
        bytes += typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.length
        if (bytes > options.maxBytes) {
          stopped = `the file is larger than ${options.maxBytes} bytes: lines after the last reported were not read`
          break
        }
        if (!parser.write(chunk)) await new Promise((resolve) => parser.once('drain', resolve))
      }
    } catch (error) {
      stopped = `the upload broke off: ${(error as Error).message}`
    }
    parser.end()
  })()

  const pending: Promise<LineOutcome>[] = []
  const take = (record: { record: string[]; info: { lines: number } }): Promise<LineOutcome> | LineOutcome | null => {
    const line = record.info.lines
    const [user = '', secret = '', label = ''] = record.record
    if (counts.lines === 0 && line === 1 && HEADER.has(user.toLowerCase())) return null
    counts.lines++
    if (line < options.from) return { line, outcome: 'skipped' }
    return importLine(factors, ctx, accountId, line, user, secret, label, options)
  }
  const tally = (o: LineOutcome) => {
    counts[o.outcome]++
    return o
  }

  for await (const record of parser as AsyncIterable<{ record: string[]; info: { lines: number } }>) {
    while (unreadable.length > 0) {
      // A record the parser could not read comes before the next one it could: report it in its place.
      while (pending.length > 0) yield tally(await pending.shift()!)
      counts.lines++
      yield tally(unreadable.shift()!)
    }
    const taken = take(record)
    if (taken === null) continue
    pending.push(Promise.resolve(taken))
    if (pending.length >= IN_FLIGHT) yield tally(await pending.shift()!)
  }
  await feed
  while (pending.length > 0) yield tally(await pending.shift()!)
  for (const u of unreadable.splice(0)) {
    counts.lines++
    yield tally(u)
  }
  yield { done: true, ...counts, stopped }
}

async function importLine(
  factors: Factors,
  ctx: Context,
  accountId: string,
  line: number,
  rawUser: string,
  secret: string,
  label: string,
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
