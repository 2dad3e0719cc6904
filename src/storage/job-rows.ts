/**
 * Row mappers and cursors of the conversion job tables, shared by both relational adapters
 * (rows as SQLite or pg gives them: text or Date times, text or parsed JSON, integers or
 * bigint strings, 0/1 or booleans).
 */
import type { ConversionJob, Idempotency, JobError, JobOperation, JobOptions, JobStatus, NewJob } from '../domain/jobs.ts'
import { isJobId } from '../domain/jobs.ts'
import { CursorError } from '../domain/errors.ts'
import { iso, type Row } from './rows.ts'

const json = <T>(value: unknown): T | null => (value === null || value === undefined ? null : ((typeof value === 'string' ? JSON.parse(value) : value) as T))
const isoOrNull = (value: unknown): string | null => (value === null || value === undefined ? null : iso(value))
const numOrNull = (value: unknown): number | null => (value === null || value === undefined ? null : Number(value))
const truthy = (value: unknown): boolean => value === true || value === 1 || value === 1n || value === '1'

export const toJob = (r: Row): ConversionJob => {
  const gone = truthy(r.result_gone)
  const made = r.result_type !== null && r.result_type !== undefined
  return {
    id: String(r.id),
    accountId: String(r.account_id),
    keyId: String(r.key_id),
    status: r.status as JobStatus,
    operation: r.operation as JobOperation,
    options: json<JobOptions>(r.options)!,
    basename: String(r.basename),
    source: r.source === 'url' ? 'url' : 'upload',
    hasResultUrl: truthy(r.has_result_url),
    metadata: json<Record<string, unknown>>(r.metadata),
    pagesDone: Number(r.pages_done),
    pagesTotal: numOrNull(r.pages_total),
    attempts: Number(r.attempts),
    createdAt: iso(r.created_at),
    startedAt: isoOrNull(r.started_at),
    finishedAt: isoOrNull(r.finished_at),
    expiresAt: made ? isoOrNull(r.expires_at) : null,
    result: made && !gone ? { type: String(r.result_type), bytes: Number(r.result_bytes), name: String(r.result_name), pages: Number(r.result_pages) } : null,
    resultGone: made && gone,
    error: r.error_code === null || r.error_code === undefined ? null : { code: String(r.error_code), params: json<JobError['params']>(r.error_params) ?? {} },
  }
}

/** traceParentOf: the traceparent a job was submitted under (null: not traced). */
export const traceParentOf = (r: Row): string | null => (typeof r.trace_parent === 'string' ? r.trace_parent : null)

/** Job cursors are the last job's id (the list goes by id, newest first; ids sort by time). */
export function readJobCursor(cursor: string): string {
  if (!isJobId(cursor)) throw new CursorError()
  return cursor
}

/** pieces cuts `bytes` into pieces of at most `size` bytes (views, not copies). */
export function pieces(bytes: Uint8Array, size: number): Uint8Array[] {
  const out: Uint8Array[] = []
  for (let at = 0; at < bytes.byteLength; at += size) out.push(bytes.subarray(at, Math.min(at + size, bytes.byteLength)))
  return out
}

/** The job's columns as submitted, in the INSERT's order (status is 'queued', written by the statement). */
export const JOB_INSERT_COLUMNS =
  'id, account_id, key_id, status, operation, options, basename, source, has_result_url, metadata, sealed, idempotency_key, fingerprint, created_at, trace_parent'

/** jobInsertValues: the values of JOB_INSERT_COLUMNS but status, a flag as the adapter keeps one (`flag`). */
export function jobInsertValues(job: NewJob, idempotency: Idempotency | null, flag: (value: boolean) => unknown): unknown[] {
  return [
    job.id,
    job.accountId,
    job.keyId,
    job.operation,
    JSON.stringify(job.options),
    job.basename,
    job.source,
    flag(job.hasResultUrl),
    job.metadata === null ? null : JSON.stringify(job.metadata),
    job.sealed,
    idempotency?.key ?? null,
    idempotency?.fingerprint ?? null,
    job.createdAt,
    job.traceParent,
  ]
}
