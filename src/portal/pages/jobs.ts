/**
 * An account's conversion jobs, on the nodes of the regions that serve the conversion group:
 * listed to every member, newest first, a page at a time, filtered by status; each result
 * downloaded while it is kept, streamed from the store as the API streams it; and, by the
 * roles that change the account's keys, a job cancelled or a result deleted after a
 * confirmation. Every read and change goes through the jobs service, which writes the audit
 * events (`job.cancel`, `job.result_delete`) with the portal user as their actor. Plain forms
 * and links: nothing here needs a script.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { html, type Html } from '../web/html.ts'
import type { InAccount, Kit } from '../web/kit.ts'
import { actorOf, atLeast, csrfField, formExpired, formField, formOk, notFound, pageRoute, refusedPage, sendPage, servesJobs, whoIn } from '../web/kit.ts'
import type { Role } from '../../domain/portal.ts'
import { isJobId, isJobStatus, type ConversionJob, type JobStatus } from '../../domain/jobs.ts'
import { isFailure } from '../../services/outcome.ts'
import { isRefusal, jobView, type JobRefusal } from '../../services/jobs.ts'
import { render } from '../../errors/catalogue.ts'
import { sendJobResult } from '../../http/job-result.ts'
import { accountPath, regionBase } from '../web/labels.ts'
import { canCancel, confirmCancel, confirmDelete, durationText, emptyState, filterForm, jobTable, JOBS_WITH, pager } from './jobs-view.ts'

export { css } from './jobs-view.ts'

/** Jobs a page. */
export const PAGE_SIZE = 20

/**
 * CHANGES: who may cancel a job or delete a result: the role that manages the account's keys,
 * since any key of the account may do both through the API (`DELETE /converter/jobs/{id}`).
 */
export const CHANGES: Role = 'developer'

type Params = { accountId: string; jobId: string }
type ListQuery = { Params: { accountId: string }; Querystring: { status?: unknown; after?: unknown; cancelled?: unknown; deleted?: unknown } }

/** here: the jobs page's entry in the account's navigation. */
const here = (who: InAccount) => ({ id: who.account.id, name: who.account.name, here: 'jobs' as const })

/** refusalText: what the service's refusal says, in the API's words (without the last full stop, for a sentence of the page's). */
const refusalText = (refusal: JobRefusal) => refusal.problems.map((p) => render(p.code, p.params).replace(/\.$/, '')).join('; ')

/** refused: a change the jobs service turned down, told on a page of its own with the way back. */
function refused(kit: Kit, reply: FastifyReply, who: InAccount, title: string, refusal: JobRefusal): FastifyReply {
  return refusedPage(kit, reply, who, { title, failure: { failure: refusal.failure, message: refusalText(refusal) }, here: 'jobs', back: 'the jobs' })
}

function badRequest(kit: Kit, reply: FastifyReply, who: InAccount, message: string): FastifyReply {
  return sendPage(kit, reply, {
    title: 'Jobs',
    status: 400,
    current: who,
    account: here(who),
    body: html`<p class="error" role="alert">${message}. <a href="${accountPath(who.account.id, 'jobs')}">Show the latest jobs</a>.</p>`,
  })
}

/** jobOf: the account's job of the path (the service answers null for another account's and for a malformed id); otherwise a 404 is sent and null returned. */
async function jobOf(kit: Kit, request: FastifyRequest<{ Params: Params }>, reply: FastifyReply, who: InAccount): Promise<ConversionJob | null> {
  const job = await kit.jobs.get(who.account.id, request.params.jobId)
  if (job === null) await notFound(kit, reply, who)
  return job
}

/** notice: what the last change did, told after its redirect (the id only when it is a job's). */
function notice(query: ListQuery['Querystring']): Html | string {
  const { cancelled, deleted } = query
  if (typeof cancelled === 'string' && isJobId(cancelled)) return html`<p class="notice" role="status">Job ${cancelled} is cancelled.</p>`
  if (typeof deleted === 'string' && isJobId(deleted))
    return html`<p class="notice" role="status">The result of job ${deleted} is deleted: its download answers 410.</p>`
  return ''
}

/** GET jobs: a page of the account's jobs, newest first, filtered by status. */
async function listJobs(kit: Kit, request: FastifyRequest<ListQuery>, reply: FastifyReply): Promise<FastifyReply> {
  const who = whoIn(request)
  const { status: statusText = '', after = '' } = request.query
  if (typeof statusText !== 'string' || (statusText !== '' && !isJobStatus(statusText)))
    return badRequest(kit, reply, who, 'A status is one of queued, running, succeeded, failed or cancelled')
  if (typeof after !== 'string' || after.length > 200) return badRequest(kit, reply, who, 'That link to older jobs is not valid')
  const status = statusText as JobStatus | ''
  const page = await kit.jobs.list(who.account.id, {
    limit: PAGE_SIZE,
    ...(status === '' ? {} : { status }),
    ...(after === '' ? {} : { cursor: after }),
  })
  if (isFailure(page)) return badRequest(kit, reply, who, 'That link to older jobs is not valid')
  const base = accountPath(who.account.id, 'jobs')
  const errors = new Map(page.items.flatMap((j) => (j.error === null ? [] : [[j.id, jobView(j, kit.config.publicBaseUrl).error!.message] as const])))
  const caption = `${status === '' ? 'Jobs' : JOBS_WITH[status]}${after === '' ? ', newest first' : ', older'}`
  const kept = durationText(kit.config.jobResultTtlSeconds)
  // No job at all: what jobs are, instead of a filter with nothing to filter.
  const none = page.items.length === 0 && status === '' && after === ''
  return sendPage(kit, reply, {
    title: 'Jobs',
    current: who,
    account: here(who),
    body: none
      ? html`${notice(request.query)}${emptyState(regionBase(kit, 'eu') ?? kit.config.publicBaseUrl, accountPath(who.account.id, 'keys'), kept)}`
      : html`${notice(request.query)}
<p>Conversion jobs submitted with this account's keys (<code>POST /converter/jobs</code>), newest first. Results are kept for download for ${kept}; job records for ${kit.config.jobRetentionDays} days.</p>
${filterForm(base, status)}
${
  page.items.length === 0
    ? html`<p role="status">${after !== '' || status === '' ? 'No older jobs.' : `No ${JOBS_WITH[status].toLowerCase()}.`}</p>`
    : jobTable({ base, jobs: page.items, errors, acting: atLeast(who.role, CHANGES), caption })
}
${pager(base, status, after, page.next)}`,
  })
}

/** GET result: the job's result, streamed with the API's headers; a page saying why when there is none. */
async function download(kit: Kit, request: FastifyRequest<{ Params: Params }>, reply: FastifyReply): Promise<FastifyReply> {
  const who = whoIn(request)
  const found = await kit.jobs.result(who.account.id, request.params.jobId)
  if (isRefusal(found)) {
    if (found.failure === 'not_found') return notFound(kit, reply, who)
    const gone = found.problems[0]?.code === 'JOB_RESULT_GONE'
    return sendPage(kit, reply, {
      title: gone ? 'Result gone' : 'No result yet',
      status: gone ? 410 : 409,
      current: who,
      account: here(who),
      body: html`<p class="error" role="alert">${refusalText(found)}.</p><p><a href="${accountPath(who.account.id, 'jobs')}">Back to the jobs</a></p>`,
    })
  }
  return sendJobResult(request, reply, found, kit.config.clientStallTimeoutMs)
}

/** The two changes: what each asks of the job, how it is confirmed, and where it leads. */
const CHANGE = {
  cancel: {
    title: 'Cancel a job',
    refusedTitle: 'Job not cancelled',
    allowed: canCancel,
    ended: (job: ConversionJob) => `job ${job.id} is ${job.status} already`,
    confirm: confirmCancel,
  },
  'delete-result': {
    title: 'Delete a result',
    refusedTitle: 'Result not deleted',
    allowed: (job: ConversionJob) => job.result !== null,
    ended: (job: ConversionJob) => `job ${job.id} keeps no result (it is ${job.status}${job.resultGone ? ', its result gone' : ''})`,
    confirm: confirmDelete,
  },
} as const

type Change = keyof typeof CHANGE

/** ask: the confirmation of a change, or the refusal when the job is past it. */
function ask(kit: Kit, reply: FastifyReply, who: InAccount, change: Change, job: ConversionJob): FastifyReply {
  const { title, refusedTitle, allowed, ended, confirm } = CHANGE[change]
  if (!allowed(job))
    return refusedPage(kit, reply, who, { title: refusedTitle, failure: { failure: 'conflict', message: ended(job) }, here: 'jobs', back: 'the jobs' })
  const base = accountPath(who.account.id, 'jobs')
  return sendPage(kit, reply, {
    title,
    current: who,
    account: here(who),
    body: confirm(`${base}/${encodeURIComponent(job.id)}/${change}`, csrfField(kit, who), job, base),
  })
}

/** GET cancel, GET delete-result: the confirmation page. */
async function confirmPage(kit: Kit, change: Change, request: FastifyRequest<{ Params: Params }>, reply: FastifyReply): Promise<FastifyReply> {
  const who = whoIn(request)
  const job = await jobOf(kit, request, reply, who)
  if (job === null) return reply
  return ask(kit, reply, who, change, job)
}

/**
 * POST cancel, POST delete-result: the change, when the post is the confirmation's and the job
 * still allows it (any other post asks first). The service decides from the job as it finds it:
 * a running job that ends in the instant between this read and the service's has its result
 * deleted instead, and the notice says which happened.
 */
async function makeChange(kit: Kit, change: Change, request: FastifyRequest<{ Params: Params }>, reply: FastifyReply): Promise<FastifyReply> {
  const who = whoIn(request)
  const base = accountPath(who.account.id, 'jobs')
  if (!formOk(kit, request, who)) return formExpired(kit, reply, who, base)
  const job = await jobOf(kit, request, reply, who)
  if (job === null) return reply
  if (formField(request, 'confirm') !== '1' || !CHANGE[change].allowed(job)) return ask(kit, reply, who, change, job)
  const done = await kit.jobs.cancel(actorOf(who, request), who.account.id, job.id)
  if (isRefusal(done)) return refused(kit, reply, who, CHANGE[change].refusedTitle, done)
  return reply.redirect(`${base}?${done.status === 'cancelled' ? 'cancelled' : 'deleted'}=${encodeURIComponent(done.id)}`, 303)
}

/** jobPages: the routes, only where the conversion group is served (elsewhere there are no jobs, and these paths are 404s). */
export default async function jobPages(app: FastifyInstance, kit: Kit): Promise<void> {
  if (!servesJobs(kit.config.region)) return
  app.get<ListQuery>('/accounts/:accountId/jobs', pageRoute(kit, 'viewer'), (request, reply) => listJobs(kit, request, reply))
  app.get<{ Params: Params }>('/accounts/:accountId/jobs/:jobId/result', pageRoute(kit, 'viewer'), (request, reply) => download(kit, request, reply))
  for (const name of ['cancel', 'delete-result'] as const) {
    app.get<{ Params: Params }>(`/accounts/:accountId/jobs/:jobId/${name}`, pageRoute(kit, CHANGES), (request, reply) => confirmPage(kit, name, request, reply))
    app.post<{ Params: Params }>(`/accounts/:accountId/jobs/:jobId/${name}`, pageRoute(kit, CHANGES), (request, reply) => makeChange(kit, name, request, reply))
  }
}
