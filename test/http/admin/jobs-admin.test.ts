/**
 * The admin API's conversion job routes over real HTTP, on jobs made through the public API:
 * an account's jobs listed as the public API shows them (by status, in pages), another
 * account's job as absent as one that never was, a queued job cancelled and a kept result
 * deleted (its download then 410), each audited with the token as actor; a read token may
 * list but not cancel; bad queries are the admin API's 400s. Every answer is checked against
 * the admin document (startAdmin).
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { SKIP_CORPUS, real } from '../../support/convert.ts'
import { startAdmin, type Admin } from '../../support/admin-helper.ts'
import { createCaller } from '../../support/helper.ts'
import { waitFor } from '../../support/receiver.ts'

const JOBS = { JOB_POLL_MS: '50', PLAN_RATE: '0' }

// biome-ignore lint/suspicious/noExplicitAny: each test reads the fields of the answer it expects
type Body = any

async function call(a: Admin, method: string, path: string, bearer = a.write.secret): Promise<{ status: number; body: Body }> {
  const res = await fetch(a.url + path, { method, headers: { authorization: `Bearer ${bearer}` } })
  const text = await res.text()
  return { status: res.status, body: text === '' ? null : JSON.parse(text) }
}

/** submit makes a job through the public API with the account's key (the test account's by default). */
async function submit(a: Admin, key = a.pub.key): Promise<string> {
  const form = new FormData()
  form.append('pdfDocument', new Blob([new Uint8Array(real('pdflatex-4-pages.pdf'))], { type: 'application/pdf' }), 'Report 2026.pdf')
  form.append('operation', 'image')
  form.append('dpi', '72')
  const res = await fetch(`${a.pub.url}/converter/jobs`, { method: 'POST', headers: { 'x-api-key': key }, body: form })
  assert.equal(res.status, 202)
  return ((await res.json()) as { jobID: string }).jobID
}

async function publicJob(a: Admin, id: string): Promise<{ status: number; body: Body }> {
  const res = await fetch(`${a.pub.url}/converter/jobs/${id}`, { headers: { 'x-api-key': a.pub.key } })
  return { status: res.status, body: await res.json() }
}

const codes = (body: Body) => (body as { code: string }[]).map((p) => p.code)
const ids = (body: Body) => (body.items as { jobID: string }[]).map((j) => j.jobID)

test("admin jobs: listed by status and in pages, cancelled (audited), another account's as absent; read tokens only read; bad queries 400", {
  skip: SKIP_CORPUS,
}, async (t) => {
  // No runner: the jobs stay queued.
  const a = await startAdmin(t, { ...JOBS, JOB_WORKERS: '0' })
  const base = `/admin/v1/accounts/${a.pub.accountId}/jobs`
  const made = [await submit(a), await submit(a), await submit(a)]
  const newestFirst = [...made].sort().reverse()

  const all = await call(a, 'GET', base)
  assert.equal(all.status, 200)
  assert.deepEqual(ids(all.body), newestFirst)
  assert.equal(all.body.next, null)
  assert.deepEqual(all.body.items[0], (await publicJob(a, newestFirst[0]!)).body, "the public API's view of the job")

  // Paging: two, then the rest after the cursor.
  const first = await call(a, 'GET', `${base}?limit=2`)
  assert.deepEqual(ids(first.body), newestFirst.slice(0, 2))
  assert.equal(typeof first.body.next, 'string')
  const rest = await call(a, 'GET', `${base}?limit=2&after=${encodeURIComponent(first.body.next)}`)
  assert.deepEqual(ids(rest.body), newestFirst.slice(2))
  assert.equal(rest.body.next, null)

  // A read token lists, and may not cancel.
  assert.equal((await call(a, 'GET', base, a.read.secret)).status, 200)
  const refused = await call(a, 'DELETE', `${base}/${made[0]}`, a.read.secret)
  assert.equal(refused.status, 403)
  assert.deepEqual(codes(refused.body), ['ADMIN_READ_ONLY'])
  assert.equal((await publicJob(a, made[0]!)).body.status, 'queued', 'nothing cancelled by the read token')

  // Another account's path: its own (empty) list, and this account's job is not found there.
  const other = await createCaller(a.pub.accounts)
  const otherBase = `/admin/v1/accounts/${other.accountId}/jobs`
  assert.deepEqual((await call(a, 'GET', otherBase)).body, { items: [], next: null })
  const elsewhere = await call(a, 'DELETE', `${otherBase}/${made[0]}`)
  assert.equal(elsewhere.status, 404)
  assert.deepEqual(codes(elsewhere.body), ['NOT_FOUND'])
  assert.equal(elsewhere.body[0].message, `Not found: no job ${made[0]} in account ${other.accountId}.`)
  assert.equal((await publicJob(a, made[0]!)).body.status, 'queued', 'nothing cancelled through the wrong account')

  const cancelled = await call(a, 'DELETE', `${base}/${made[0]}`)
  assert.equal(cancelled.status, 200)
  assert.equal(cancelled.body.jobID, made[0])
  assert.equal(cancelled.body.status, 'cancelled')
  assert.equal((await publicJob(a, made[0]!)).body.status, 'cancelled', 'the public API sees it cancelled')
  const again = await call(a, 'DELETE', `${base}/${made[0]}`)
  assert.equal(again.status, 409)
  assert.deepEqual(codes(again.body), ['CONFLICT'])
  assert.match(again.body[0].message, new RegExp(`^Conflict: job ${made[0]} is cancelled and keeps no result: nothing to cancel or delete\\.$`))

  const events = await a.pub.accounts.auditEvents({ accountId: a.pub.accountId, action: 'job.cancel', limit: 10 })
  assert.deepEqual(
    events.items.map((e) => [e.actor, e.target.id, e.outcome, e.ip]),
    [[`admin-token:${a.write.id}`, made[0], 'success', '127.0.0.1']],
    'one event, by the write token: the refused tries wrote none',
  )

  assert.deepEqual(ids((await call(a, 'GET', `${base}?status=cancelled`)).body), [made[0]])
  assert.deepEqual(
    ids((await call(a, 'GET', `${base}?status=queued`)).body),
    newestFirst.filter((id) => id !== made[0]),
  )
  assert.deepEqual(ids((await call(a, 'GET', `${base}?status=succeeded`)).body), [])

  // Unknown account, unknown job.
  const noAccount = await call(a, 'GET', '/admin/v1/accounts/acc_nope/jobs')
  assert.deepEqual([noAccount.status, codes(noAccount.body), noAccount.body[0].message], [404, ['NOT_FOUND'], 'Not found: no account acc_nope.'])
  assert.equal((await call(a, 'DELETE', `/admin/v1/accounts/acc_nope/jobs/${made[1]}`)).status, 404)
  for (const jobId of [`job_${'0'.repeat(21)}`, `job_${'0'.repeat(22)}`, 'nonsense']) {
    const missing = await call(a, 'DELETE', `${base}/${jobId}`)
    assert.deepEqual([missing.status, codes(missing.body)], [404, ['NOT_FOUND']], jobId)
  }

  // Bad queries: the admin API's 400, naming the field.
  const bad: [string, string, string][] = [
    ['limit=0', 'FIELD_INVALID', 'limit'],
    ['limit=101', 'FIELD_INVALID', 'limit'],
    ['limit=ten', 'FIELD_INVALID', 'limit'],
    ['status=done', 'FIELD_INVALID', 'status'],
    ['stauts=queued', 'FIELD_INVALID', 'stauts'],
    ['after=', 'FIELD_INVALID', 'after'],
    ['after=nope', 'BAD_CURSOR', 'after'],
  ]
  for (const [query, code, field] of bad) {
    const res = await call(a, 'GET', `${base}?${query}`)
    assert.equal(res.status, 400, query)
    assert.deepEqual(codes(res.body), [code], query)
    assert.match(res.body[0].message, new RegExp(`\\b${field}\\b`), query)
  }
})

test('admin jobs: deleting a kept result answers the job with resultGone, audited; its download is then 410', {
  skip: SKIP_CORPUS,
  timeout: 120_000,
}, async (t) => {
  const a = await startAdmin(t, JOBS)
  const base = `/admin/v1/accounts/${a.pub.accountId}/jobs`
  const id = await submit(a)
  await waitFor(async () => (await publicJob(a, id)).body.status === 'succeeded', 60_000, 'the job to succeed')

  const listed = await call(a, 'GET', `${base}?status=succeeded`)
  assert.deepEqual(ids(listed.body), [id])
  assert.equal(listed.body.items[0].result.url, `${a.pub.config.publicBaseUrl}/converter/jobs/${id}/result`)
  assert.equal(listed.body.items[0].resultGone, false)
  const download = () => fetch(`${a.pub.url}/converter/jobs/${id}/result`, { headers: { 'x-api-key': a.pub.key } })
  const before = await download()
  assert.equal(before.status, 200)
  await before.arrayBuffer()

  const deleted = await call(a, 'DELETE', `${base}/${id}`)
  assert.equal(deleted.status, 200)
  assert.deepEqual([deleted.body.jobID, deleted.body.status, deleted.body.result, deleted.body.resultGone], [id, 'succeeded', null, true])
  const gone = await download()
  assert.equal(gone.status, 410)
  assert.deepEqual(codes(await gone.json()), ['JOB_RESULT_GONE'])

  const again = await call(a, 'DELETE', `${base}/${id}`)
  assert.deepEqual([again.status, codes(again.body)], [409, ['CONFLICT']])
  const events = await a.pub.accounts.auditEvents({ accountId: a.pub.accountId, action: 'job.result_delete', limit: 10 })
  assert.deepEqual(
    events.items.map((e) => [e.actor, e.target.id]),
    [[`admin-token:${a.write.id}`, id]],
  )
})

test('admin jobs in the admin document: operationIds, the bearer 401, and the 403 of a read token on the cancel', async (t) => {
  const a = await startAdmin(t)
  const paths = (a.doc() as { paths: Record<string, Record<string, { operationId: string; responses: Record<string, { headers?: object }> }>> }).paths
  const list = paths['/admin/v1/accounts/{id}/jobs']?.get
  const cancel = paths['/admin/v1/accounts/{id}/jobs/{jobID}']?.delete
  assert.deepEqual([list?.operationId, cancel?.operationId], ['listJobs', 'cancelJob'])
  for (const op of [list!, cancel!]) assert.ok(op.responses['401']?.headers, `${op.operationId}: 401 with WWW-Authenticate`)
  assert.ok(cancel!.responses['403'] && cancel!.responses['409'] && cancel!.responses['404'])
  assert.equal(list!.responses['403'], undefined)
})
