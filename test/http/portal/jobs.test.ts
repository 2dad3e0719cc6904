/**
 * The jobs page over HTTP, with jobs made through the real API: a job that ran is listed with
 * its status, progress, result and metadata (escaped); its download is the API's, byte for
 * byte and header for header, for any member; a result deleted from the portal answers 410
 * on both doors; a queued job (on a node that runs none) is cancelled with the portal user in
 * the audit event; the status filter and the pages; a viewer sees no action and a forged post
 * of theirs is refused; another account's user and a malformed id get 404; and a region
 * without the conversion group has no jobs page.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { SKIP_CORPUS, real } from '../../support/convert.ts'
import { createCaller, startApp, type Running } from '../../support/helper.ts'
import { signedInClient } from '../../support/portal-helper.ts'
import { waitFor } from '../../support/receiver.ts'
import { PAGE_SIZE } from '../../../src/portal/pages/jobs.ts'

const DOC = 'pdflatex-4-pages.pdf'
const jobsOf = (accountId: string) => `/portal/accounts/${accountId}/jobs`

async function submit(app: Running, fields: Record<string, string> = {}, key = app.key): Promise<string> {
  const form = new FormData()
  form.append('pdfDocument', new Blob([new Uint8Array(real(DOC))], { type: 'application/pdf' }), 'Report 2026.pdf')
  for (const [k, v] of Object.entries({ operation: 'image', dpi: '72', ...fields })) form.append(k, v)
  const res = await fetch(`${app.url}/converter/jobs`, { method: 'POST', headers: { 'x-api-key': key }, body: form })
  assert.equal(res.status, 202, await res.clone().text())
  return ((await res.json()) as { jobID: string }).jobID
}

async function apiJob(app: Running, id: string): Promise<{ status: string; result: { size: number } | null }> {
  const res = await fetch(`${app.url}/converter/jobs/${id}`, { headers: { 'x-api-key': app.key } })
  assert.equal(res.status, 200)
  return (await res.json()) as { status: string; result: { size: number } | null }
}

/** ids: the jobs a page lists, in its order. */
const ids = (page: string) => [...page.matchAll(/<th scope="row"><code class="id">(job_[0-9a-f]{21})<\/code>/g)].map((m) => m[1]!)

/** rowOf: the table row of a job (asserted to be there). */
function rowOf(page: string, id: string): string {
  const m = new RegExp(`<tr>\\s*<th scope="row"><code class="id">${id}</code>[\\s\\S]*?</tr>`).exec(page)
  assert.ok(m, `the page lists ${id}`)
  return m[0]
}

const auditOf = async (app: Running, action: string) => (await app.store.audit.list({ accountId: app.accountId, action, limit: 10 })).items

test('a job that ran: listed with its status, result and escaped metadata; downloaded as from the API by any member; its result deleted behind a confirmation', {
  skip: SKIP_CORPUS,
  timeout: 120_000,
}, async (t) => {
  const app = await startApp(t, { JOB_POLL_MS: '50', PLAN_RATE: '0' })
  const id = await submit(app, { metadata: JSON.stringify({ invoice: 'INV-7', note: '</code><script>alert(1)</script>' }) })
  await waitFor(async () => (await apiJob(app, id)).status === 'succeeded', 60_000, 'the job to succeed')
  const { client: dev, user } = await signedInClient(app, { role: 'developer' })
  const base = jobsOf(app.accountId)

  const list = await dev.get(base)
  assert.equal(list.status, 200)
  assert.match(list.text, new RegExp(`<a href="${base}" aria-current="page">Jobs</a>`), 'the tab, marked')
  const row = rowOf(list.text, id)
  assert.match(row, /<span class="badge ok">succeeded<\/span>/)
  assert.match(row, /image \(to PNG\), 72 dpi/)
  assert.match(row, /<span class="badge ok">succeeded<\/span><span class="hint">4 of 4 pages<\/span>/)
  assert.match(row, new RegExp(`<a href="${base}/${id}/result">Download Report_2026\\.zip</a>`))
  assert.match(row, /KiB, application\/zip; kept until <time datetime="[^"]+">/)
  assert.ok(!list.text.includes('<script>alert'), 'the metadata is not markup')
  assert.match(
    row,
    /<code class="meta">\{&quot;invoice&quot;:&quot;INV-7&quot;,&quot;note&quot;:&quot;&lt;\/code&gt;&lt;script&gt;alert\(1\)&lt;\/script&gt;&quot;\}<\/code>/,
  )
  assert.match(row, new RegExp(`<a href="${base}/${id}/delete-result" class="danger">Delete result`))
  assert.ok(!row.includes('/cancel"'), 'a job that ended cannot be cancelled')

  // The download: the API's bytes and headers.
  const api = await fetch(`${app.url}/converter/jobs/${id}/result`, { headers: { 'x-api-key': app.key } })
  assert.equal(api.status, 200)
  const apiBytes = Buffer.from(await api.arrayBuffer())
  const viewer = await signedInClient(app, { role: 'viewer' })
  for (const client of [dev, viewer.client]) {
    const res = await fetch(`${app.url}${base}/${id}/result`, { headers: { cookie: client.cookieHeader } })
    assert.equal(res.status, 200)
    for (const header of ['content-type', 'content-length', 'content-disposition', 'x-page-count'])
      assert.equal(res.headers.get(header), api.headers.get(header), header)
    assert.equal(res.headers.get('content-disposition'), 'attachment; filename="Report_2026.zip"')
    assert.equal(res.headers.get('cache-control'), 'no-store')
    const bytes = Buffer.from(await res.arrayBuffer())
    assert.equal(bytes.length, (await apiJob(app, id)).result?.size)
    assert.ok(bytes.equals(apiBytes), 'the same bytes as the API')
  }

  // A viewer sees the job but no action; their posts are refused, and nothing changes.
  const seen = await viewer.client.get(base)
  assert.equal(seen.status, 200)
  assert.match(rowOf(seen.text, id), /Download Report_2026\.zip/)
  assert.ok(!seen.text.includes('/delete-result') && !seen.text.includes('>Actions<'), 'no action for a viewer')
  for (const answer of [
    await viewer.client.get(`${base}/${id}/delete-result`),
    await viewer.client.post(`${base}/${id}/delete-result`, { confirm: '1' }),
    await viewer.client.post(`${base}/${id}/cancel`, { confirm: '1' }),
  ]) {
    assert.equal(answer.status, 403)
    assert.match(answer.text, /Your role in test \(viewer\) does not allow this/)
  }
  // A developer's form without its token, or from another site: nothing changes either.
  await dev.get(`${base}/${id}/delete-result`)
  for (const forged of [
    await dev.post(`${base}/${id}/delete-result`, { confirm: '1' }, { csrf: false }),
    await dev.post(`${base}/${id}/delete-result`, { confirm: '1' }, { origin: 'https://evil.example' }),
  ]) {
    assert.equal(forged.status, 403)
    assert.match(forged.text, /This form has expired or did not come from this site; nothing was changed/)
  }
  assert.equal((await fetch(`${app.url}/converter/jobs/${id}/result`, { headers: { 'x-api-key': app.key } })).status, 200, 'still kept')

  // Another account's user: 404 through either account, and for a malformed id.
  const other = await createCaller(app.accounts)
  const stranger = await signedInClient(app, { accountId: other.accountId, role: 'owner' })
  const theirs = jobsOf(other.accountId)
  for (const path of [`${base}/${id}/result`, `${theirs}/${id}/result`, `${theirs}/not-a-job/result`, `${theirs}/job_${'0'.repeat(21)}/result`])
    assert.equal((await stranger.client.get(path)).status, 404, path)
  await stranger.client.get(theirs)
  for (const path of [`${base}/${id}/cancel`, `${theirs}/${id}/cancel`, `${theirs}/${id}/delete-result`, `${theirs}/job_x%0d%0a/delete-result`])
    assert.equal((await stranger.client.post(path, { confirm: '1' })).status, 404, path)
  assert.equal((await dev.get(`${base}/${encodeURIComponent('job_"; x')}/result`)).status, 404, 'a malformed id of the own account')
  assert.equal((await dev.get(`${base}/${id}/cancel`)).status, 409, 'a job that ended is not cancelled')

  // Delete the result: a post without confirm=1 only asks; the confirmation's post deletes, with its audit event.
  const ask = await dev.get(`${base}/${id}/delete-result`)
  assert.equal(ask.status, 200)
  assert.match(ask.text, new RegExp(`<button type="submit" class="danger">Delete the result of job ${id}</button>`))
  assert.equal((await dev.post(`${base}/${id}/delete-result`, {})).status, 200)
  assert.equal((await fetch(`${app.url}${base}/${id}/result`, { headers: { cookie: dev.cookieHeader } })).status, 200, 'asked, not deleted')
  const deleted = await dev.post(`${base}/${id}/delete-result`, { confirm: '1' }, { from: `${base}/${id}/delete-result` })
  assert.equal(deleted.status, 303)
  assert.equal(deleted.location, `${base}?deleted=${id}`)
  const after = await dev.get(deleted.location!)
  assert.match(after.text, new RegExp(`<p class="notice" role="status">The result of job ${id} is deleted`))
  assert.match(rowOf(after.text, id), /Gone: expired or deleted/)
  assert.ok(!rowOf(after.text, id).includes('Download'), 'no download link once gone')
  assert.equal((await fetch(`${app.url}${base}/${id}/result`, { headers: { cookie: dev.cookieHeader } })).status, 410)
  assert.equal((await fetch(`${app.url}/converter/jobs/${id}/result`, { headers: { 'x-api-key': app.key } })).status, 410)
  const events = await auditOf(app, 'job.result_delete')
  assert.equal(events.length, 1)
  assert.equal(events[0]!.actor, `portal-user:${user.id}`)
  assert.deepEqual(events[0]!.target, { type: 'job', id })
  assert.equal((await dev.post(`${base}/${id}/delete-result`, { confirm: '1' }, { from: base })).status, 409, 'nothing left to delete')
  assert.equal((await auditOf(app, 'job.result_delete')).length, 1, 'refused: no second event')
})

test('queued jobs (a node that runs none): the empty state, paging, the status filter, and a cancel with its audit event', {
  skip: SKIP_CORPUS,
  timeout: 120_000,
}, async (t) => {
  const app = await startApp(t, { JOB_WORKERS: '0', PLAN_RATE: '0' })
  const { client, user } = await signedInClient(app, { role: 'developer' })
  const base = jobsOf(app.accountId)

  assert.match((await client.get(`/portal/accounts/${app.accountId}/overview`)).text, new RegExp(`<a href="${base}">Jobs</a>`), 'the tab, in eu')
  const empty = await client.get(base)
  assert.equal(empty.status, 200)
  assert.match(empty.text, /<h2 id="no-jobs">No conversion jobs yet<\/h2>/)
  assert.match(empty.text, /<a href="\/docs#submitConversionJob">API reference<\/a>/)
  // Each link of the empty state leads to an operation of the reference.
  const reference = await (await fetch(`${app.url}/docs`)).text()
  const anchors = [...empty.text.matchAll(/href="\/docs#(\w+)"/g)].map((m) => m[1]!)
  assert.deepEqual(anchors, ['submitConversionJob', 'listConversionJobs', 'getConversionJobResult', 'cancelConversionJob'])
  for (const anchor of anchors) assert.ok(reference.includes(`id="${anchor}"`), `the reference has #${anchor}`)
  assert.match(empty.text, /-F operation=image http:\/\/[^ ]+\/converter\/jobs<\/pre>/)
  assert.ok(!empty.text.includes('<table class="jobs">') && !empty.text.includes('Filter the jobs'), 'no table, no filter')

  // Submitted a millisecond apart, so that newest first is one order.
  const made: string[] = []
  for (let i = 0; i < PAGE_SIZE + 3; i++) {
    made.push(await submit(app))
    app.clock.advance(1)
  }
  const newest = [...made].reverse()

  const first = await client.get(base)
  assert.deepEqual(ids(first.text), newest.slice(0, PAGE_SIZE))
  for (const id of ids(first.text))
    assert.match(rowOf(first.text, id), /<span class="badge warn">queued<\/span>[\s\S]*<a href="[^"]+\/cancel" class="danger">Cancel/)
  const older = /<a href="([^"]+)" rel="next">Older jobs<\/a>/.exec(first.text)
  assert.ok(older, 'a link to the older jobs')
  assert.ok(!first.text.includes('>Newest jobs<'), 'the first page links to no newer one')
  const second = await client.get(older[1]!.replace(/&amp;/g, '&'))
  assert.equal(second.status, 200)
  assert.deepEqual(ids(second.text), newest.slice(PAGE_SIZE))
  assert.ok(!second.text.includes('rel="next"'), 'the last page')
  assert.match(second.text, new RegExp(`<a href="${base}">Newest jobs</a>`))

  // Cancel the oldest: a confirmation, then cancelled, with the portal user in the audit event.
  const oldest = made[0]!
  const ask = await client.get(`${base}/${oldest}/cancel`)
  assert.equal(ask.status, 200)
  assert.match(ask.text, new RegExp(`<button type="submit" class="danger">Cancel job ${oldest}</button>`))
  assert.equal((await client.get(`${base}/${oldest}/delete-result`)).status, 409, 'a queued job keeps no result')
  assert.equal((await client.get(`${base}/${oldest}/result`)).status, 409, 'nor has one to download')
  const cancelled = await client.post(`${base}/${oldest}/cancel`, { confirm: '1' }, { from: `${base}/${oldest}/cancel` })
  assert.equal(cancelled.status, 303)
  assert.equal(cancelled.location, `${base}?cancelled=${oldest}`)
  assert.match((await client.get(cancelled.location!)).text, new RegExp(`<p class="notice" role="status">Job ${oldest} is cancelled\\.</p>`))
  assert.equal((await apiJob(app, oldest)).status, 'cancelled')
  assert.equal((await apiJob(app, made[1]!)).status, 'queued', 'only that one')
  const events = await auditOf(app, 'job.cancel')
  assert.equal(events.length, 1)
  assert.equal(events[0]!.actor, `portal-user:${user.id}`)
  assert.deepEqual(events[0]!.target, { type: 'job', id: oldest })
  assert.equal(events[0]!.ip, '127.0.0.1')
  assert.equal((await client.post(`${base}/${oldest}/cancel`, { confirm: '1' }, { from: base })).status, 409, 'cancelled already')

  // The filter: a plain GET form; each status shows its own jobs, and keeps itself in the older link.
  const byCancelled = await client.get(`${base}?status=cancelled`)
  assert.deepEqual(ids(byCancelled.text), [oldest])
  assert.match(rowOf(byCancelled.text, oldest), /<span class="badge off">cancelled<\/span>/)
  assert.match(byCancelled.text, /<caption>Cancelled jobs, newest first<\/caption>/)
  assert.match(byCancelled.text, /<form method="get" action="[^"]+\/jobs" class="row" role="search" aria-label="Filter the jobs">/)
  assert.match(byCancelled.text, /<option value="cancelled" selected>cancelled<\/option>/)
  const byQueued = await client.get(`${base}?status=queued`)
  assert.deepEqual(ids(byQueued.text), newest.slice(0, PAGE_SIZE))
  const olderQueued = /<a href="([^"]+)" rel="next">Older jobs<\/a>/.exec(byQueued.text)
  assert.ok(olderQueued)
  assert.match(olderQueued[1]!, /\?status=queued&amp;after=job_/)
  assert.deepEqual(ids((await client.get(olderQueued[1]!.replace(/&amp;/g, '&'))).text), newest.slice(PAGE_SIZE, -1), 'the cancelled one is not queued')
  const none = await client.get(`${base}?status=succeeded`)
  assert.deepEqual(ids(none.text), [])
  assert.match(none.text, /<p role="status">No jobs that succeeded\.<\/p>/)
  assert.equal((await client.get(`${base}?status=done`)).status, 400)
  assert.equal((await client.get(`${base}?after=nope`)).status, 400)
})

test('a region without the conversion group has no jobs page, nor its tab', async (t) => {
  const app = await startApp(t, { REGION: 'us' })
  const { client } = await signedInClient(app, { role: 'owner' })
  const overview = await client.get(`/portal/accounts/${app.accountId}/overview`)
  assert.equal(overview.status, 200)
  assert.match(overview.text, /\/usage">Usage<\/a>/)
  assert.ok(!overview.text.includes('/jobs">Jobs</a>'), 'no tab')
  assert.equal((await client.get(jobsOf(app.accountId))).status, 404)
  assert.equal((await client.get(`${jobsOf(app.accountId)}/job_${'0'.repeat(21)}/result`)).status, 404)
})
