/** Route schemas of the admin API's conversion job routes (see schemas.ts for the shared parts). */
import { Type } from 'typebox'
import { errors, id, page, strict } from './schemas.ts'
import { adminJobViewSchema as job, JOB_ID_EXAMPLE, jobStatus } from '../../openapi/job-view.ts'

/** A page of jobs, as the public API's list has it: 1 to 100, 20 by default. */
export const MAX_JOB_LIMIT = 100
export const DEFAULT_JOB_LIMIT = 20

export const JOBS_TAG = { name: 'jobs', description: "An account's conversion jobs: listed, cancelled, their kept results deleted" }

const accountParams = Type.Object({ id: id('account', 'acc_01JD3Q5Z8X') })

export const listJobsSchema = {
  operationId: 'listJobs',
  summary: "List an account's conversion jobs, newest first",
  description: "Every job whose record is kept (`JOB_RETENTION_DAYS`), in the public API's shape; `status` keeps one status only.",
  tags: ['jobs'],
  params: accountParams,
  querystring: Type.Object(
    {
      status: Type.Optional(jobStatus),
      after: Type.Optional(Type.String({ minLength: 1, maxLength: 512, description: 'The `next` cursor of the previous page.' })),
      limit: Type.Optional(
        Type.Integer({ minimum: 1, maximum: MAX_JOB_LIMIT, default: DEFAULT_JOB_LIMIT, description: `Items per page, 1 to ${MAX_JOB_LIMIT}.` }),
      ),
    },
    strict,
  ),
  response: { 200: page(job, 'A page of jobs, newest first.'), ...errors(['NOT_FOUND', 'BAD_CURSOR']) },
}

export const cancelJobSchema = {
  operationId: 'cancelJob',
  summary: 'Cancel a queued or running job, or delete the result a finished job keeps',
  description:
    "A queued job is cancelled at once, a running one stops at its next page; a job that succeeded loses its kept result (its download answers 410) and keeps its record. Audited as `job.cancel` or `job.result_delete`, with the token as actor. 409 when there is nothing to cancel or delete (the job failed or was cancelled, or its result is gone already); another account's job is the same 404 as one that never was.",
  tags: ['jobs'],
  params: Type.Object({ id: id('account', 'acc_01JD3Q5Z8X'), jobID: id('job', JOB_ID_EXAMPLE) }),
  response: {
    200: { ...job, description: 'The job as it now stands.' },
    ...errors(['NOT_FOUND', 'CONFLICT'], { write: true }),
  },
}
