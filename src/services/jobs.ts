/**
 * The conversion jobs service: submission (its checks, its Idempotency-Key, the account's
 * limit), reading, listing, cancelling, and the result's pieces, for every door (the public
 * API, the portal, the admin API and CLI). The runner (converter/jobs/runner.ts) does the work.
 *
 * What a job carries that is a secret (its PDF password; its source and result URLs, which
 * are often presigned and so credentials) is sealed before it reaches the store and opened
 * only by the runner; the job shows only whether it has a result URL. A job's fingerprint (the
 * Idempotency-Key's "same request") is a hash of its document and every field.
 */
import { IDEMPOTENCY_MS } from './idempotency.ts'
import { createHash } from 'node:crypto'
import type { Config } from '../config/config.ts'
import type { Keyring } from '../crypto/keyring.ts'
import {
  isJobId,
  isJobOperation,
  JOB_CHUNK_BYTES,
  JOB_OPERATIONS,
  newJobId,
  secretsContext,
  type ConversionJob,
  type JobSecrets,
  type JobStatus,
  type NewJob,
} from '../domain/jobs.ts'
import { CursorError } from '../domain/errors.ts'
import type { Problem } from '../errors/errors.ts'
import { render, type ErrorCode } from '../errors/catalogue.ts'
import type { JobChange, JobStore } from '../storage/ports.ts'
import { pieces } from '../storage/job-rows.ts'
import { checkEndpointUrl, MAX_TRANSFER_URL_LENGTH, refusalText, resolveTarget, type Lookup, type Refusal } from '../webhooks/address.ts'
import { isPdf, MAX_MERGE_DOCUMENTS, readCompress, readOptions, readTextFormat, safeBasename } from '../converter/upload.ts'
import { readImageOptions } from '../converter/image-options.ts'
import { isJobEdit, jobEditOptions, mergeFields } from '../converter/edit-options.ts'
import { takenFields } from '../converter/route-fields.ts'
import { bundle } from '../domain/bundle.ts'
import { draft, fail, type Context, type Failure } from './outcome.ts'
import { SYSTEM } from '../domain/accounts.ts'
import { traceparent } from '../tracing/tracing.ts'

/** The largest `metadata`, as JSON. */
export const MAX_METADATA_BYTES = 4096
/** How long a submission waits for the name of a sourceUrl or resultUrl to resolve (an answer later is the fetch's business). */
const LOOKUP_MS = 5000

/** What a door hands over: the form's or the JSON body's fields, and the uploaded document if any. */
export interface JobInput {
  readonly fields: Readonly<Record<string, string | undefined>>
  /** A form's fields sent more than once, every value in order (a merge's `pages` and `password`, once per document). */
  readonly repeated?: Readonly<Record<string, readonly string[]>>
  /** A merge's documents after the first, in order. */
  readonly others?: readonly { readonly bytes: Uint8Array; readonly filename: string }[]
  /** Documents past the most a merge takes (not read). */
  readonly extraDocuments?: number
  /** A JSON body's metadata object (a form's comes as JSON text in `fields.metadata`). */
  readonly metadata?: unknown
  readonly document: { readonly bytes: Uint8Array; readonly filename: string } | null
}

/** JobCaller: a call of the public API with an API key. */
export interface JobCaller {
  readonly accountId: string
  readonly keyId: string
}

/** KeyContext: a change asked with an API key (its events' actor is the key). */
export interface KeyContext {
  readonly keyId: string
  readonly ip: string | null
}

/** JobRefusal: an expected refusal of the public API's, with the catalogue problems it is answered with. */
export interface JobRefusal extends Failure {
  readonly problems: readonly Problem[]
}

export const isRefusal = (value: unknown): value is JobRefusal => typeof value === 'object' && value !== null && 'problems' in value

const refuse = (kind: Failure['failure'], ...problems: Problem[]): JobRefusal => ({
  ...fail(kind, render(problems[0]!.code, problems[0]!.params)),
  problems,
})

export interface JobsOptions {
  readonly store: { readonly jobs: JobStore }
  /** Seals a job's secrets; a function is called when a job first needs it (a CLI that only lists writes no key file). */
  readonly keyring: Keyring | (() => Keyring)
  readonly config: Pick<Config, 'webhookAllowPrivate' | 'jobMaxActivePerAccount' | 'jobStoragePerAccountMb' | 'nodeEnv'>
  /** Told when a job is queued, so that this node's runner looks at once. */
  readonly onSubmitted?: () => void
  readonly now?: () => number
  readonly lookup?: Lookup
}

export class Jobs {
  readonly #o: JobsOptions
  readonly #now: () => number

  constructor(options: JobsOptions) {
    this.#o = options
    this.#now = options.now ?? Date.now
  }

  #ring(): Keyring {
    const { keyring } = this.#o
    return typeof keyring === 'function' ? keyring() : keyring
  }

  /** submit checks and queues a job; the same Idempotency-Key and request within 24 h answer the job made first (`replayed`). */
  async submit(caller: JobCaller, input: JobInput, idempotencyKey: string | null): Promise<{ job: ConversionJob; replayed: boolean } | JobRefusal> {
    const checked = await this.#check(input)
    if (isRefusal(checked)) return checked
    const { operation, options, secrets, metadata } = checked
    const nowMs = this.#now()
    const id = newJobId(nowMs)
    const hasSecrets = Object.keys(secrets).length > 0
    // A merge's documents are kept as one, in their order.
    const document =
      input.document === null
        ? null
        : checked.merge !== undefined
          ? bundle([input.document.bytes, ...(input.others ?? []).map((o) => o.bytes)])
          : input.document.bytes
    const job: NewJob = {
      id,
      accountId: caller.accountId,
      keyId: caller.keyId,
      operation,
      options: {
        dpi: options.dpi,
        pages: checked.merge === undefined ? input.fields.pages?.trim() || null : null,
        colorMode: options.color,
        // A plain PNG job keeps its options as before formats were (absent: PNG), so its fingerprint stays what it was.
        ...(checked.image === undefined || (Object.keys(checked.image).join() === 'format' && checked.image.format === 'png') ? {} : { image: checked.image }),
        ...(checked.text === undefined ? {} : { text: checked.text }),
        ...(checked.edit === undefined ? {} : { edit: checked.edit }),
        ...(checked.compress === undefined ? {} : { compress: { preset: checked.compress } }),
        ...(checked.merge === undefined ? {} : { merge: { pages: checked.merge.pages } }),
      },
      basename: safeBasename(input.document?.filename ?? lastSegment(secrets.sourceUrl)),
      source: document === null ? 'url' : 'upload',
      hasResultUrl: secrets.resultUrl !== undefined,
      metadata,
      sealed: hasSecrets ? this.#ring().seal(Buffer.from(JSON.stringify(secrets)), secretsContext(caller.accountId, id)) : null,
      createdAt: new Date(nowMs).toISOString(),
      traceParent: traceparent() ?? null,
    }
    const idempotency =
      idempotencyKey === null
        ? null
        : { key: idempotencyKey, fingerprint: fingerprint(job, secrets, document), sinceIso: new Date(nowMs - IDEMPOTENCY_MS).toISOString() }
    const { jobMaxActivePerAccount: max, jobStoragePerAccountMb } = this.#o.config
    // A document waiting in the queue is kept as a result is: it counts against the account's storage, checked as it is written.
    const maxBytes = jobStoragePerAccountMb * 1048576
    const done = await this.#o.store.jobs.submit(job, document === null ? [] : pieces(document, JOB_CHUNK_BYTES), idempotency, max, maxBytes)
    if ('limit' in done) return refuse('limit', { code: 'JOBS_PER_ACCOUNT', params: { limit: done.limit } })
    if ('full' in done) return refuse('invalid', { code: 'JOB_STORAGE_FULL', params: { limit: done.full } })
    if ('mismatch' in done) return refuse('conflict', { code: 'IDEMPOTENCY_KEY_REUSED', params: { what: ` (job ${done.mismatch.id})` } })
    if ('replayed' in done) return { job: done.replayed, replayed: true }
    this.#o.onSubmitted?.()
    return { job: done.created, replayed: false }
  }

  /** check reads a submission's fields, reporting every problem at once. */
  async #check(input: JobInput) {
    const problems: Problem[] = []
    const operation = input.fields.operation?.trim().toLowerCase() ?? ''
    if (!isJobOperation(operation)) problems.push({ code: 'OPERATION_INVALID', params: { operations: JOB_OPERATIONS.join(', ') } })
    // The options of another operation are refused, as its route refuses them (route-fields.ts).
    const fields = isJobOperation(operation) ? takenFields(operation, operation, input.fields, problems) : input.fields
    const merging = operation === 'merge'
    // A merge's `pages` and `password` come once per document (checkMerge).
    const options = readOptions(merging ? { ...fields, pages: undefined, password: undefined } : fields, problems)
    const merge = checkMerge(operation, input, problems)
    const image = operation === 'image' ? readImageOptions(fields, problems) : undefined
    const text = operation === 'text' ? readTextFormat(fields, undefined, problems) : undefined
    const edit = isJobEdit(operation) ? jobEditOptions(operation, fields, problems) : undefined
    const compress = operation === 'compress' ? readCompress(fields, problems) : undefined
    const sourceText = fields.sourceUrl?.trim() ?? ''
    if ((input.document === null) === (sourceText === '')) problems.push({ code: 'JOB_SOURCE_REQUIRED' })
    else if (input.document !== null && (input.document.bytes.byteLength === 0 || !isPdf(input.document.bytes))) problems.push({ code: 'NOT_A_PDF' })
    const secrets: { password?: string; passwords?: (string | null)[]; sourceUrl?: string; resultUrl?: string } = {}
    if (options.password !== undefined) secrets.password = options.password
    if (merge?.passwords.some((p) => p !== null)) secrets.passwords = merge.passwords
    for (const [field, code] of [
      ['sourceUrl', 'SOURCE_URL_INVALID'],
      ['resultUrl', 'RESULT_URL_INVALID'],
    ] as const) {
      const text = fields[field]?.trim() ?? ''
      if (text === '') continue
      const url = await this.#publicUrl(text)
      if ('reason' in url) problems.push({ code, params: { reason: refusalText(url, this.#o.config.nodeEnv) } })
      else secrets[field] = url.url
    }
    const metadata = readMetadata(input.metadata ?? fields.metadata)
    if (metadata === undefined) problems.push({ code: 'METADATA_INVALID', params: { limit: MAX_METADATA_BYTES } })
    if (problems.length > 0) return refuse('invalid', ...problems)
    return { operation: operation as ConversionJob['operation'], options, image, text, edit, compress, merge, secrets, metadata: metadata ?? null }
  }

  /** publicUrl: the URL checked as a webhook's is (https, a public host), and its name's addresses when it resolves in time. */
  async #publicUrl(text: string): Promise<{ url: string } | Refusal> {
    const allowPrivate = this.#o.config.webhookAllowPrivate
    const checked = checkEndpointUrl(text, allowPrivate, MAX_TRANSFER_URL_LENGTH)
    if ('reason' in checked || allowPrivate) return checked
    let timer: NodeJS.Timeout | undefined
    const late = new Promise<null>((resolve) => {
      timer = setTimeout(() => resolve(null), LOOKUP_MS)
    })
    try {
      const target = await Promise.race([resolveTarget(new URL(checked.url).hostname, false, this.#o.lookup), late])
      // A name that does not resolve now may by the time the job runs: the fetch decides then, under the same rules.
      return target !== null && 'reason' in target && target.unresolved !== true
        ? { reason: `must reach a public address: ${target.reason}`, private: true }
        : checked
    } catch {
      return checked
    } finally {
      clearTimeout(timer)
    }
  }

  /** get: the account's job, or null (another account's job is as absent as one that never was). */
  async get(accountId: string, jobId: string): Promise<ConversionJob | null> {
    if (!isJobId(jobId)) return null
    const job = await this.#o.store.jobs.get(accountId, jobId)
    return job === null ? null : this.#asOfNow(job)
  }

  /** asOfNow: a job whose result has passed its expiry shows it gone, whether or not the hourly pruning has deleted it yet. */
  #asOfNow(job: ConversionJob): ConversionJob {
    if (job.expiresAt === null || Date.parse(job.expiresAt) > this.#now()) return job
    return { ...job, result: null, resultGone: true }
  }

  /** list: the account's jobs, newest first; a cursor that is not one of ours is a Failure. */
  async list(accountId: string, query: { readonly status?: JobStatus; readonly cursor?: string; readonly limit: number }) {
    try {
      const page = await this.#o.store.jobs.list(accountId, query)
      return { ...page, items: page.items.map((job) => this.#asOfNow(job)) }
    } catch (error) {
      if (error instanceof CursorError) return fail('invalid', 'the cursor is not one this API gave out', 'after')
      throw error
    }
  }

  /** cancel stops a queued or running job, or deletes a kept result: asked by an operator or a portal user (`Context`), or with an API key. */
  async cancel(by: Context | KeyContext, accountId: string, jobId: string): Promise<ConversionJob | JobRefusal> {
    const job = await this.get(accountId, jobId)
    if (job === null) return refuse('not_found', { code: 'JOB_NOT_FOUND' })
    const target = { type: 'job', id: jobId } as const
    // The store decides, in its step, whether the job stops or its result goes (it may have ended since it was read).
    const event = (action: JobChange) =>
      'keyId' in by ? { ...draft({ actor: SYSTEM, ip: by.ip }, action, target, accountId), actor: `api-key:${by.keyId}` } : draft(by, action, target, accountId)
    const done = await this.#o.store.jobs.cancel(accountId, jobId, new Date(this.#now()).toISOString(), event)
    if (done !== null) return done
    const now = await this.get(accountId, jobId)
    return refuse('conflict', { code: 'JOB_NOTHING_TO_DELETE', params: { status: now?.status ?? job.status } })
  }

  /**
   * result: a job's kept result and a reader of its pieces, in order, one at a time (never
   * whole in memory), or the refusal: no such job, no result yet, or gone.
   */
  async result(accountId: string, jobId: string): Promise<{ job: ConversionJob; pieces: () => AsyncGenerator<Uint8Array> } | JobRefusal> {
    const job = await this.get(accountId, jobId)
    if (job === null) return refuse('not_found', { code: 'JOB_NOT_FOUND' })
    if (job.resultGone) return refuse('conflict', { code: 'JOB_RESULT_GONE', params: { expiredAt: job.expiresAt ?? job.finishedAt ?? '' } })
    if (job.result === null) return refuse('conflict', { code: 'JOB_RESULT_NOT_READY', params: { status: job.status } })
    const store = this.#o.store.jobs
    const count = Math.ceil(job.result.bytes / JOB_CHUNK_BYTES)
    return {
      job,
      async *pieces() {
        for (let seq = 0; seq < count; seq++) {
          const piece = await store.resultPiece(jobId, seq)
          // Deleted or expired while it was being read: the answer stops short, which the client sees against Content-Length.
          if (piece === null) throw new Error('the result went while it was being read')
          yield piece
        }
      },
    }
  }
}

/** jobView: a job as the APIs show it (the public one, the admin one): never a URL the customer gave, nor the password. */
export function jobView(job: ConversionJob, baseUrl: string) {
  return {
    jobID: job.id,
    status: job.status,
    operation: job.operation,
    options: job.options,
    source: job.source,
    resultUrl: job.hasResultUrl,
    metadata: job.metadata,
    pagesDone: job.pagesDone,
    pagesTotal: job.pagesTotal,
    attempts: job.attempts,
    createdAt: job.createdAt,
    startedAt: job.startedAt,
    finishedAt: job.finishedAt,
    result:
      job.result === null
        ? null
        : {
            url: `${baseUrl}/converter/jobs/${job.id}/result`,
            size: job.result.bytes,
            type: job.result.type,
            name: job.result.name,
            pages: job.result.pages,
            expiresAt: job.expiresAt,
          },
    resultGone: job.resultGone,
    error: job.error === null ? null : { code: job.error.code, message: render(job.error.code as ErrorCode, job.error.params) },
  }
}

/** readMetadata: a JSON object of at most MAX_METADATA_BYTES (null: none; undefined: not acceptable). */
function readMetadata(value: unknown): Record<string, unknown> | null | undefined {
  if (value === undefined || value === null || value === '') return null
  let parsed = value
  if (typeof value === 'string') {
    try {
      parsed = JSON.parse(value)
    } catch {
      return undefined
    }
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return undefined
  // Text a JSON column keeps as it was given: no lone surrogate, no NUL (PostgreSQL's jsonb takes neither).
  let storable = true
  const text = JSON.stringify(parsed, (key, v: unknown) => {
    if (!key.isWellFormed() || key.includes('\0') || (typeof v === 'string' && (!v.isWellFormed() || v.includes('\0')))) storable = false
    return v
  })
  return storable && Buffer.byteLength(text) <= MAX_METADATA_BYTES ? (parsed as Record<string, unknown>) : undefined
}

/** lastSegment: a URL's last path segment (for the name of a fetched document), or ''. */
function lastSegment(url: string | undefined): string {
  if (url === undefined) return ''
  const segment = new URL(url).pathname.split('/').pop() ?? ''
  try {
    return decodeURIComponent(segment)
  } catch {
    return segment
  }
}

/** fingerprint: what makes two submissions the same request: the document, every option, the URLs and the metadata. */
function fingerprint(job: NewJob, secrets: JobSecrets, document: Uint8Array | null): string {
  const hash = createHash('sha256')
  // A merge's passwords only when there are some: the fingerprints of every other submission stay as they were.
  const passwords = secrets.passwords === undefined ? [] : [secrets.passwords]
  hash.update(
    JSON.stringify([job.operation, job.options, job.metadata, secrets.password ?? null, secrets.sourceUrl ?? null, secrets.resultUrl ?? null, ...passwords]),
  )
  hash.update('\0')
  if (document !== null) hash.update(document)
  return hash.digest('base64url')
}

/**
 * checkMerge: a merge's documents (2 to MAX_MERGE_DOCUMENTS uploaded, each a PDF; no sourceUrl)
 * and each one's pages and password; for another operation, that it came with one document.
 */
function checkMerge(operation: string, input: JobInput, problems: Problem[]): { pages: (string | null)[]; passwords: (string | null)[] } | undefined {
  const others = input.others ?? []
  if (operation !== 'merge') {
    if (others.length > 0 || (input.extraDocuments ?? 0) > 0)
      problems.push({ code: 'OPTION_NOT_TAKEN', params: { field: 'a second pdfDocument', route: operation || 'a job' } })
    return undefined
  }
  const count = (input.document === null ? 0 : 1) + others.length + (input.extraDocuments ?? 0)
  if ((input.fields.sourceUrl?.trim() ?? '') !== '') problems.push({ code: 'OPTION_NOT_TAKEN', params: { field: 'sourceUrl', route: 'merge' } })
  if (count < 2 || count > MAX_MERGE_DOCUMENTS) problems.push({ code: 'MERGE_DOCUMENTS_REQUIRED', params: { max: MAX_MERGE_DOCUMENTS, count } })
  for (const [i, other] of others.entries()) {
    if (!isPdf(other.bytes)) problems.push({ code: 'MERGE_DOCUMENT_REFUSED', params: { part: i + 2, reason: 'is not a PDF (it has no %PDF- header)' } })
  }
  return mergeFields(input.repeated ?? {}, count, problems)
}
