/**
 * Conversion jobs over HTTP (`/converter/jobs`): HTTP in, a call of the jobs service
 * (services/jobs.ts), HTTP out. A submission takes a multipart body (the PDF in
 * `pdfDocument`), or JSON or a urlencoded form (with `sourceUrl`); the answer is 202 at once.
 * A result is streamed from the store piece by piece, from whichever node is asked.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Config } from '../config/config.ts'
import { ApiError, apiError } from '../errors/errors.ts'
import type { ErrorCode } from '../errors/catalogue.ts'
import { parseForm } from '../bodies/fields.ts'
import { isJobStatus, type ConversionJob } from '../domain/jobs.ts'
import { isFailure } from '../services/outcome.ts'
import { isRefusal, jobView, type JobInput, type Jobs } from '../services/jobs.ts'
import { MAX_MERGE_DOCUMENTS, readParts } from './upload.ts'
import { OPTION_FIELDS } from './route-fields.ts'
import { rangesText } from './edit-options.ts'
import { sendJobResult } from '../http/job-result.ts'
import { idempotencyKey } from '../http/idempotency.ts'
import { cancelJobSchema, getJobSchema, jobResultSchema, listJobsSchema, submitJobSchema } from './job-schemas.ts'

export interface JobRouteOptions {
  readonly config: Config
  readonly jobs: Jobs
}

/** Bodies and queries are checked by the service and here; the schemas are for the OpenAPI document. */
const documentOnly = () => () => true

/** The fields a job takes from a form or a JSON body (metadata apart: an object in JSON, JSON text in a form): its own, and every option (route-fields.ts). */
const FIELDS = ['operation', 'sourceUrl', 'resultUrl', ...OPTION_FIELDS] as const

/**
 * UploadPlaces bounds the job documents a node reads at once, and per account: each is held
 * in memory until it is stored. A place is taken before the body is read, so that a refused
 * client is told at once (and its body left unread).
 */
class UploadPlaces {
  readonly #config: Config
  readonly #byAccount = new Map<string, number>()
  #total = 0

  constructor(config: Config) {
    this.#config = config
  }

  take(accountId: string): () => void {
    const { jobUploadsAtOnce, jobUploadsPerAccount } = this.#config
    const mine = this.#byAccount.get(accountId) ?? 0
    const retry = { 'retry-after': '5', connection: 'close' }
    if (mine >= jobUploadsPerAccount) throw apiError('JOB_UPLOADS_PER_ACCOUNT', { limit: jobUploadsPerAccount, seconds: 5 }, retry)
    if (this.#total >= jobUploadsAtOnce) throw apiError('JOB_UPLOADS_BUSY', { seconds: 5 }, retry)
    this.#total++
    this.#byAccount.set(accountId, mine + 1)
    let held = true
    return () => {
      if (!held) return
      held = false
      this.#total--
      const left = (this.#byAccount.get(accountId) ?? 1) - 1
      if (left > 0) this.#byAccount.set(accountId, left)
      else this.#byAccount.delete(accountId)
    }
  }
}

/** readInput: the submission's fields and document, whatever its body's type (a multipart body in an upload place, `places`). */
async function readInput(request: FastifyRequest, config: Config): Promise<JobInput> {
  if (request.isMultipart()) {
    // A merge's documents come as several pdfDocument parts (at most its limit, together JOB_MAX_DOCUMENT_BYTES).
    const { fields, repeated, files, otherFiles } = await readParts(request, config.jobMaxDocumentBytes, MAX_MERGE_DOCUMENTS)
    const [first, ...others] = files.map((file) => ({ bytes: file.data, filename: file.filename }))
    // Documents past a merge's limit are counted (the service refuses them), never dropped.
    const extra = otherFiles.filter((name) => name === 'pdfDocument').length
    // Several `ranges` fields are a split's parts, one each (edit-options.ts).
    if ((repeated.ranges?.length ?? 0) > 1) fields.ranges = rangesText(repeated.ranges!)
    return { fields, repeated, document: first ?? null, others, extraDocuments: extra }
  }
  const body = request.body
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw apiError('JOB_SOURCE_REQUIRED')
  const given = body as Record<string, unknown>
  const fields: Record<string, string> = {}
  for (const name of FIELDS) {
    const value = given[name]
    if (value === undefined || value === null) continue
    // A split's `ranges` as an array (JSON, or a form's field sent several times): one part each.
    if (name === 'ranges' && Array.isArray(value) && value.every((part) => typeof part === 'string')) {
      fields.ranges = rangesText(value)
      continue
    }
    // A value of another type is refused by its own check (an object is no dpi).
    fields[name] = typeof value === 'string' || typeof value === 'number' ? String(value) : '\u0000'
  }
  return { fields, metadata: given.metadata, document: null }
}

function refusalError(result: { readonly problems: readonly { code: ErrorCode; params?: Record<string, string | number> }[] }): ApiError {
  const first = result.problems[0]!
  return new ApiError(result.problems, first.code === 'JOBS_PER_ACCOUNT' ? { 'retry-after': '60' } : {})
}

async function submit(opts: JobRouteOptions, places: UploadPlaces, request: FastifyRequest, reply: FastifyReply) {
  const key = idempotencyKey(request)
  const caller = request.caller!
  // A document is held in memory until it is stored: its place is taken before its body is read, and given back once stored or refused.
  const give = request.isMultipart() ? places.take(caller.accountId) : () => undefined
  let done: Awaited<ReturnType<Jobs['submit']>>
  try {
    done = await opts.jobs.submit({ accountId: caller.accountId, keyId: caller.keyId }, await readInput(request, opts.config), key)
  } finally {
    give()
  }
  if (isRefusal(done)) throw refusalError(done)
  const { job, replayed } = done
  const path = `/converter/jobs/${job.id}`
  if (replayed) reply.header('idempotent-replayed', 'true')
  return reply
    .code(202)
    .header('location', path)
    .send({ jobID: job.id, status: job.status, statusUrl: `${opts.config.publicBaseUrl}${path}` })
}

async function result(opts: JobRouteOptions, request: FastifyRequest<{ Params: { jobID: string } }>, reply: FastifyReply) {
  const found = await opts.jobs.result(request.caller!.accountId, request.params.jobID)
  if (isRefusal(found)) throw refusalError(found)
  return sendJobResult(request, reply, found, opts.config.clientStallTimeoutMs)
}

async function list(opts: JobRouteOptions, request: FastifyRequest<{ Querystring: Record<string, string | undefined> }>) {
  const { status, limit: limitText, after } = request.query
  const problems: { code: ErrorCode; params: Record<string, string> }[] = []
  if (status !== undefined && !isJobStatus(status)) problems.push({ code: 'JOB_QUERY_INVALID', params: { field: 'status', reason: 'not a job status' } })
  const limit = limitText === undefined ? 20 : /^\d{1,3}$/.test(limitText) ? Number(limitText) : 0
  if (limit < 1 || limit > 100) problems.push({ code: 'JOB_QUERY_INVALID', params: { field: 'limit', reason: 'must be a whole number from 1 to 100' } })
  if (problems.length > 0) throw new ApiError(problems)
  const page = await opts.jobs.list(request.caller!.accountId, {
    limit,
    ...(status === undefined ? {} : { status: status as ConversionJob['status'] }),
    ...(after === undefined ? {} : { cursor: after }),
  })
  if (isFailure(page)) throw new ApiError([{ code: 'JOB_QUERY_INVALID', params: { field: 'after', reason: page.message } }])
  return { jobs: page.items.map((j) => jobView(j, opts.config.publicBaseUrl)), next: page.next }
}

/** jobSubmitRoute registers POST /converter/jobs in a scope of the conversion group (its guard and multipart parser). */
export async function jobSubmitRoute(app: FastifyInstance, opts: JobRouteOptions): Promise<void> {
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'buffer' }, (_request, body, done) => done(null, parseForm(body as Buffer)))
  const places = new UploadPlaces(opts.config)
  app.post('/converter/jobs', { schema: submitJobSchema, validatorCompiler: documentOnly }, (request, reply) => submit(opts, places, request, reply))
}

/** jobReadRoutes registers the routes that read, list and cancel jobs, in a scope of the conversion group. */
export async function jobReadRoutes(app: FastifyInstance, opts: JobRouteOptions): Promise<void> {
  const base = opts.config.publicBaseUrl
  const validatorCompiler = documentOnly
  app.get('/converter/jobs', { schema: listJobsSchema, validatorCompiler }, (request) =>
    list(opts, request as FastifyRequest<{ Querystring: Record<string, string | undefined> }>),
  )
  app.get<{ Params: { jobID: string } }>('/converter/jobs/:jobID', { schema: getJobSchema, validatorCompiler }, async (request) => {
    const job = await opts.jobs.get(request.caller!.accountId, request.params.jobID)
    if (job === null) throw apiError('JOB_NOT_FOUND')
    return jobView(job, base)
  })
  app.get<{ Params: { jobID: string } }>('/converter/jobs/:jobID/result', { schema: jobResultSchema, validatorCompiler }, (request, reply) =>
    result(opts, request, reply),
  )
  app.delete<{ Params: { jobID: string } }>('/converter/jobs/:jobID', { schema: cancelJobSchema, validatorCompiler }, async (request) => {
    const caller = request.caller!
    const done = await opts.jobs.cancel({ keyId: caller.keyId, ip: request.ip }, caller.accountId, request.params.jobID)
    if (isRefusal(done)) throw refusalError(done)
    return jobView(done, base)
  })
}
