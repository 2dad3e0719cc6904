/**
 * The CLI's jobs commands against a running server on the same store: an account's jobs
 * listed (people's table, --json in the admin API's shape, by status, in pages), a queued job
 * cancelled and a kept result deleted, each audited as the CLI's; a wrong account or job id,
 * a job with nothing left to cancel and bad flags fail with one line and their exit code.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { SKIP_CORPUS, real } from '../../support/convert.ts'
import { createCaller, startApp, tempDir, type Running } from '../../support/helper.ts'
import { admin, adminJson } from '../../support/admin-helper.ts'
import { waitFor } from '../../support/receiver.ts'

interface Job {
  jobID: string
  status: string
  result: { url: string } | null
  resultGone: boolean
}

async function submit(app: Running): Promise<string> {
  const form = new FormData()
  form.append('pdfDocument', new Blob([new Uint8Array(real('pdflatex-4-pages.pdf'))], { type: 'application/pdf' }), 'Report 2026.pdf')
  form.append('operation', 'image')
  form.append('dpi', '72')
  const res = await fetch(`${app.url}/converter/jobs`, { method: 'POST', headers: { 'x-api-key': app.key }, body: form })
  assert.equal(res.status, 202)
  return ((await res.json()) as { jobID: string }).jobID
}

const status = async (app: Running, id: string) =>
  ((await (await fetch(`${app.url}/converter/jobs/${id}`, { headers: { 'x-api-key': app.key } })).json()) as Job).status

test('jobs list/cancel: a table or JSON, by status and in pages; a queued job cancelled as the CLI; wrong ids and bad flags fail', {
  skip: SKIP_CORPUS,
}, async (t) => {
  const dataDir = tempDir(t)
  const app = await startApp(t, { DATA_DIR: dataDir, JOB_WORKERS: '0', JOB_POLL_MS: '50', PLAN_RATE: '0' })
  const made = [await submit(app), await submit(app), await submit(app)]
  const newestFirst = [...made].sort().reverse()
  const acc = app.accountId

  const listed = await adminJson<{ items: Job[]; next: string | null }>(dataDir, ['jobs', 'list', acc])
  assert.deepEqual(
    listed.items.map((j) => [j.jobID, j.status]),
    newestFirst.map((id) => [id, 'queued']),
  )
  assert.equal(listed.next, null)
  const table = await admin(dataDir, ['jobs', 'list', acc])
  assert.equal(table.code, 0)
  assert.match(table.stdout, /^jobID\s+status\s+operation\s+pages\s+createdAt\s+finishedAt\s+result\s+error\n/)
  assert.match(table.stdout, new RegExp(`^${newestFirst[0]}\\s+queued\\s+image\\s+0\\s+\\d{4}-`, 'm'))

  const first = await admin(dataDir, ['jobs', 'list', acc, '--limit', '1'])
  assert.match(first.stdout, new RegExp(`\\n\\(more: --after ${newestFirst[0]}\\)\\n$`))
  const page = await adminJson<{ items: Job[]; next: string | null }>(dataDir, ['jobs', 'list', acc, '--limit', '1', '--after', newestFirst[0]!])
  assert.deepEqual([page.items.map((j) => j.jobID), page.next], [[newestFirst[1]], newestFirst[1]])

  const cancelled = await admin(dataDir, ['jobs', 'cancel', acc, made[0]!])
  assert.deepEqual([cancelled.code, cancelled.stdout], [0, `Job ${made[0]} of account ${acc} is cancelled\n`])
  assert.equal(await status(app, made[0]!), 'cancelled', 'the server sees it cancelled')
  const asJson = await adminJson<Job>(dataDir, ['jobs', 'cancel', acc, made[2]!])
  assert.deepEqual([asJson.jobID, asJson.status, asJson.result, asJson.resultGone], [made[2], 'cancelled', null, false])
  const queued = await adminJson<{ items: Job[] }>(dataDir, ['jobs', 'list', acc, '--status', 'queued'])
  assert.deepEqual(
    queued.items.map((j) => j.jobID),
    [made[1]],
  )
  const events = (await app.accounts.auditEvents({ accountId: acc, action: 'job.cancel', limit: 10 })).items
  assert.deepEqual(
    events.map((e) => [e.actor, e.target.id, e.outcome]),
    [
      ['cli', made[2], 'success'],
      ['cli', made[0], 'success'],
    ],
  )

  const other = await createCaller(app.accounts)
  const failures: [string[], number, string | RegExp][] = [
    [['jobs', 'cancel', 'acc_nope', made[1]!], 1, 'error: no account acc_nope\n'],
    [['jobs', 'list', 'acc_nope'], 1, 'error: no account acc_nope\n'],
    [['jobs', 'cancel', other.accountId, made[1]!], 1, `error: no job ${made[1]} in account ${other.accountId}\n`],
    [['jobs', 'cancel', acc, 'job_nope'], 1, `error: no job job_nope in account ${acc}\n`],
    [['jobs', 'cancel', acc, made[0]!], 1, `error: job ${made[0]} is cancelled and keeps no result: nothing to cancel or delete\n`],
    [['jobs', 'list', acc, '--after', 'nope'], 1, /^error: --after: the cursor is not one this API gave out\n$/],
    [['jobs', 'list', acc, '--status', 'done'], 2, /^error: --status must be one of queued, running, succeeded, failed, cancelled \(got "done"\)\n/],
    [['jobs', 'list', acc, '--limit', '101'], 2, /^error: --limit must be a whole number from 1 to 100 \(got "101"\)\n/],
    [['jobs', 'cancel', acc], 2, /^error: missing the job id\n[\s\S]*jobs cancel ACCOUNTID JOBID/],
    [['jobs', 'list'], 2, /^error: missing the account id\n/],
    [['jobs', 'purge', acc], 2, /^error: unknown command "jobs purge /],
  ]
  // None changes anything: they run at once.
  const answers = await Promise.all(failures.map(([args]) => admin(dataDir, args)))
  for (const [i, [args, code, message]] of failures.entries()) {
    const r = answers[i]!
    assert.equal(r.code, code, args.join(' '))
    if (typeof message === 'string') assert.equal(r.stderr, message, args.join(' '))
    else assert.match(r.stderr, message, args.join(' '))
  }
  assert.equal(await status(app, made[1]!), 'queued', 'no failed command cancelled it')
  assert.equal((await app.accounts.auditEvents({ accountId: acc, action: 'job.cancel', limit: 10 })).items.length, 2)

  const help = await admin(dataDir, ['jobs', '--help'])
  assert.equal(help.code, 0)
  assert.match(help.stdout, /jobs list ACCOUNTID \[--status [^\n]*\n[\s\S]*jobs cancel ACCOUNTID JOBID/)
  assert.doesNotMatch(help.stdout, /account create/)
})

test("jobs cancel of a job that succeeded deletes its kept result (the CLI's, audited); the download is then 410", {
  skip: SKIP_CORPUS,
  timeout: 120_000,
}, async (t) => {
  const dataDir = tempDir(t)
  const app = await startApp(t, { DATA_DIR: dataDir, JOB_POLL_MS: '50', PLAN_RATE: '0' })
  const id = await submit(app)
  await waitFor(async () => (await status(app, id)) === 'succeeded', 60_000, 'the job to succeed')

  const listed = await admin(dataDir, ['jobs', 'list', app.accountId, '--status', 'succeeded'])
  assert.match(listed.stdout, new RegExp(`^${id}\\s+succeeded\\s+image\\s+4/4\\s+\\S+\\s+\\S+\\s+\\d+ bytes until \\S+$`, 'm'))
  const deleted = await admin(dataDir, ['jobs', 'cancel', app.accountId, id])
  assert.deepEqual(
    [deleted.code, deleted.stdout],
    [0, `Job ${id} of account ${app.accountId} keeps no result now (it stays succeeded; its download answers 410)\n`],
  )
  const job = (await adminJson<{ items: Job[] }>(dataDir, ['jobs', 'list', app.accountId])).items[0]!
  assert.deepEqual([job.jobID, job.status, job.result, job.resultGone], [id, 'succeeded', null, true])
  const download = await fetch(`${app.url}/converter/jobs/${id}/result`, { headers: { 'x-api-key': app.key } })
  assert.equal(download.status, 410)
  await download.arrayBuffer()
  const events = (await app.accounts.auditEvents({ accountId: app.accountId, action: 'job.result_delete', limit: 10 })).items
  assert.deepEqual(
    events.map((e) => [e.actor, e.target.id]),
    [['cli', id]],
  )
  const gone = await admin(dataDir, ['jobs', 'list', app.accountId])
  assert.match(gone.stdout, new RegExp(`^${id}\\s+succeeded\\s+image\\s+4/4\\s+\\S+\\s+\\S+\\s+gone$`, 'm'))
})
