/**
 * What the admin doors (the admin API and the CLI) say when the jobs service refuses an
 * operator's cancel. The service's refusals carry the public API's codes (JOB_NOT_FOUND,
 * JOB_NOTHING_TO_DELETE), which the admin API does not answer: a reason for people, naming
 * the job and the account, goes in their place.
 */
import { render } from '../errors/catalogue.ts'
import type { JobRefusal } from '../services/jobs.ts'

/** refusalReason: why a cancel was refused (the admin API's NOT_FOUND or CONFLICT `reason`, the CLI's error line). */
export function refusalReason(refusal: JobRefusal, accountId: string, jobId: string): string {
  if (refusal.failure === 'not_found') return `no job ${jobId} in account ${accountId}`
  const problem = refusal.problems[0]!
  if (problem.code === 'JOB_NOTHING_TO_DELETE') return `job ${jobId} is ${problem.params?.status} and keeps no result: nothing to cancel or delete`
  return render(problem.code, problem.params).replace(/\.$/, '')
}
