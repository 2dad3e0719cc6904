/**
 * The admin API's conversion job routes: an account's jobs listed, and one cancelled (or its
 * kept result deleted) through the jobs service with the operator's token as actor: the
 * service writes the audit event in the same step as the change. Jobs are shown as the public
 * API shows them (`jobView`), their result's URL on the public base URL.
 */
import type { FastifyInstance } from 'fastify'
import type { Config } from '../../config/config.ts'
import type { JobStatus } from '../../domain/jobs.ts'
import { apiError } from '../../errors/errors.ts'
import type { Accounts } from '../../services/accounts.ts'
import { isRefusal, jobView, type Jobs } from '../../services/jobs.ts'
import { fail, isFailure } from '../../services/outcome.ts'
import { refusalReason } from '../job-refusal.ts'
import { context, ok } from './routes.ts'
import { cancelJobSchema, DEFAULT_JOB_LIMIT, listJobsSchema } from './job-schemas.ts'

const BASE = '/admin/v1/accounts/:id/jobs'

export interface JobRouteOptions {
  readonly config: Config
  readonly accounts: Accounts
  readonly jobs: Jobs
}

export default async function jobRoutes(app: FastifyInstance, opts: JobRouteOptions): Promise<void> {
  const { accounts, jobs } = opts
  const base = opts.config.publicBaseUrl
  // The jobs service answers an unknown account's list empty and its job as absent: the account is looked up first, for a 404 that says so.
  const requireAccount = async (id: string) => {
    if ((await accounts.getAccount(id)) === null) throw apiError('NOT_FOUND', { reason: `no account ${id}` })
  }

  app.get(BASE, { schema: listJobsSchema }, async (request) => {
    const { id } = request.params as { id: string }
    const q = request.query as { status?: JobStatus; after?: string; limit?: number }
    await requireAccount(id)
    const page = await jobs.list(id, {
      limit: q.limit ?? DEFAULT_JOB_LIMIT,
      ...(q.status === undefined ? {} : { status: q.status }),
      ...(q.after === undefined ? {} : { cursor: q.after }),
    })
    // The service's one refusal of a list is a cursor it did not give out: the admin API's answer to that, as its other lists give.
    if (isFailure(page)) throw apiError('BAD_CURSOR')
    return { items: page.items.map((job) => jobView(job, base)), next: page.next }
  })

  app.delete(`${BASE}/:jobID`, { schema: cancelJobSchema }, async (request) => {
    const { id, jobID } = request.params as { id: string; jobID: string }
    await requireAccount(id)
    const done = await jobs.cancel(context(request), id, jobID)
    // A refusal becomes the admin API's own answer (routes.ts `ok`: not_found → NOT_FOUND, conflict → CONFLICT), its reason naming the job.
    return jobView(ok(isRefusal(done) ? fail(done.failure, refusalReason(done, id, jobID)) : done), base)
  })
}
