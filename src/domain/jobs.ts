/**
 * Conversion jobs: a conversion submitted now and run later by whichever node has a free
 * worker, its result kept for a while where every node can read it. What a job is, its
 * states and its ids; nothing here imports anything of ours.
 *
 * A job goes queued → running → succeeded | failed, or cancelled from queued or running. A
 * running job holds a lease: the node that claimed it renews it as it works, and a job whose
 * lease ran out (its node died) is claimed again by another node, until its attempts are
 * spent (a poison job: it fails).
 */
import { randomBytes } from 'node:crypto'
import type { ImageOptions } from './images.ts'
import type { TextFormat } from './text.ts'

export const JOB_STATUSES = ['queued', 'running', 'succeeded', 'failed', 'cancelled'] as const
export type JobStatus = (typeof JOB_STATUSES)[number]

export const isJobStatus = (value: string): value is JobStatus => (JOB_STATUSES as readonly string[]).includes(value)

/**
 * What a job makes: the synchronous routes' outputs (image: an image, a zip of images or a
 * multi-page TIFF; postscript; text; merge, split, rotate, flatten: a PDF or a zip of PDFs; compress:
 * a PDF). A merge's documents are kept as one (bundle.ts).
 */
export const JOB_OPERATIONS = ['image', 'postscript', 'text', 'merge', 'split', 'rotate', 'flatten', 'compress'] as const
export type JobOperation = (typeof JOB_OPERATIONS)[number]

export const isJobOperation = (value: string): value is JobOperation => (JOB_OPERATIONS as readonly string[]).includes(value)

/** The options of the synchronous routes, as checked at submission (pages as given: the runner parses them again). */
export interface JobOptions {
  readonly dpi: number
  readonly pages: string | null
  readonly colorMode: 'rgb' | 'gray'
  /** An image job's format and its options (absent: PNG, as jobs submitted before formats were). */
  readonly image?: ImageOptions
  /** A text job's format. */
  readonly text?: { readonly format: TextFormat }
  /** A split's `ranges` (as given) or `every`; a rotation's `angle` (90, 180 or 270). */
  readonly edit?: { readonly ranges?: string; readonly every?: number; readonly angle?: 90 | 180 | 270 }
  /** A merge's pages of each document, in order (null: all; the first document's are these, `pages` is null). */
  readonly merge?: { readonly pages: readonly (string | null)[] }
  /** A compression's pdfwrite preset. */
  readonly compress?: { readonly preset: 'screen' | 'ebook' | 'printer' | 'prepress' }
}

/** The result of a job that succeeded, while it is kept. */
export interface JobResultInfo {
  /** Its media type: an image's (image/png, image/jpeg, image/webp, image/tiff), application/zip or application/postscript. */
  readonly type: string
  readonly bytes: number
  /** The file name its download carries. */
  readonly name: string
  /** Pages in it. */
  readonly pages: number
}

/** A catalogue error that ended a job. */
export interface JobError {
  readonly code: string
  readonly params: Readonly<Record<string, string | number>>
}

export interface ConversionJob {
  readonly id: string
  readonly accountId: string
  /** The key that submitted it (its id, never the key). */
  readonly keyId: string
  readonly status: JobStatus
  readonly operation: JobOperation
  readonly options: JobOptions
  /** The document's name without its extension, made harmless (safeBasename). */
  readonly basename: string
  /** Where the document comes from: uploaded with the job, or fetched from the sourceUrl when it runs. */
  readonly source: 'upload' | 'url'
  /** Whether the result is also sent to a URL of the customer's (the URL itself is sealed). */
  readonly hasResultUrl: boolean
  /** The customer's own object, echoed in the job and its events. */
  readonly metadata: Readonly<Record<string, unknown>> | null
  readonly pagesDone: number
  readonly pagesTotal: number | null
  /** Claims so far (a job whose node died is claimed again). */
  readonly attempts: number
  readonly createdAt: string
  readonly startedAt: string | null
  readonly finishedAt: string | null
  /** When the result goes, or went (null: no result). */
  readonly expiresAt: string | null
  /** The result, while it is kept; null before, after its expiry or deletion, or when there is none. */
  readonly result: JobResultInfo | null
  /** Whether a result was made and has since expired or been deleted. */
  readonly resultGone: boolean
  readonly error: JobError | null
}

/** A job as submitted: the sealed part (password, URLs) stays in the store, sealed. */
export interface NewJob
  extends Pick<ConversionJob, 'id' | 'accountId' | 'keyId' | 'operation' | 'options' | 'basename' | 'source' | 'hasResultUrl' | 'metadata' | 'createdAt'> {
  /** The sealed secrets of the job (its PDF password, source and result URLs), or null when it has none. */
  readonly sealed: string | null
  /** The W3C traceparent of the submission's span, kept so that the job's run joins its trace on whichever node (null: not traced). */
  readonly traceParent: string | null
}

/** An Idempotency-Key and the fingerprint of the request it came with. */
export interface Idempotency {
  readonly key: string
  readonly fingerprint: string
  /** A key used before this time is forgotten (24 h). */
  readonly sinceIso: string
}

/** The secrets of a job, sealed together with the keyring (the store keeps them only so). */
export interface JobSecrets {
  readonly password?: string
  /** A merge's passwords, one per document in order (null: none). */
  readonly passwords?: readonly (string | null)[]
  readonly sourceUrl?: string
  readonly resultUrl?: string
}

/** secretsContext: what a job's sealed secrets are bound to (a copy in another job's row does not open). */
export const secretsContext = (accountId: string, jobId: string): string[] => ['job', accountId, jobId]

/** Size of the pieces documents and results are kept in. */
export const JOB_CHUNK_BYTES = 1048576

/** Job ids sort by time: `job_`, 11 hex digits of epoch ms, 10 random hex digits. */
export function newJobId(nowMs: number): string {
  return `job_${Math.floor(nowMs).toString(16).padStart(11, '0')}${randomBytes(5).toString('hex')}`
}

/** submittedMs: when a job was submitted (epoch ms), read from its id. */
export const submittedMs = (id: string): number => Number.parseInt(id.slice(4, 15), 16)

const JOB_ID = /^job_[0-9a-f]{21}$/

/** isJobId: whether a path's id could be a job's (anything else is a 404 without a read). */
export const isJobId = (value: string): boolean => JOB_ID.test(value)

/** Whether a job is over (nothing more happens to it but its result's expiry). */
export const isFinal = (status: JobStatus): boolean => status === 'succeeded' || status === 'failed' || status === 'cancelled'
