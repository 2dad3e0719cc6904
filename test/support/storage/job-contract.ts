/**
 * The conversion job block of the storage contract (storeContract runs it on every store):
 * an Idempotency-Key makes one job however many submit it at once; an account's limit holds
 * under parallel submissions; claims never hand a job to two nodes, go to the account with
 * the fewest running, and take back a job whose lease ran out; only a lease's holder writes,
 * renews or ends its job; a job's end and its event (and so the outbox) commit together.
 */
import assert from 'node:assert/strict'
import type { AuditDraft } from '../../../src/domain/accounts.ts'
import type { Store } from '../../../src/storage/ports.ts'
import { CursorError } from '../../../src/domain/errors.ts'
import { newId } from '../../../src/domain/ids.ts'
import { newJobId, type NewJob } from '../../../src/domain/jobs.ts'

type WithStore = (title: string, body: (s: Store) => Promise<void>) => void

const event = (accountId: string, action: string, id = 'job_x', detail: Record<string, unknown> = {}): AuditDraft => ({
  actor: 'system',
  action,
  target: { type: 'job', id },
  accountId,
  ip: null,
  outcome: 'success',
  detail,
})

async function account(store: Store): Promise<string> {
  const id = newId('acc')
  await store.access.createAccount({ id, name: 'j', status: 'active', createdAt: new Date().toISOString() }, event(id, 'account.create'))
  return id
}

let clock = Date.now()
function job(accountId: string, extra: Partial<NewJob> = {}): NewJob {
  clock += 1
  return {
    id: newJobId(clock),
    accountId,
    keyId: 'key_1',
    operation: 'image',
    options: { dpi: 150, pages: null, colorMode: 'rgb' },
    basename: 'doc',
    source: 'upload',
    hasResultUrl: false,
    metadata: { batch: 7 },
    sealed: null,
    createdAt: new Date(clock).toISOString(),
    traceParent: null,
    ...extra,
  }
}

const NOW = () => Date.now()
const LEASE = 30_000
const doc = [Buffer.from('%PDF-1.7 first piece '), Buffer.from('second piece')]
const idem = (key: string, fingerprint: string) => ({ key, fingerprint, sinceIso: new Date(Date.now() - 86_400_000).toISOString() })
const created = (r: unknown) => (r as { created: { id: string } }).created

export function jobContract(withStore: WithStore): void {
  withStore('jobs: a job keeps the traceparent it was submitted under, and its claim hands it to the run', async (store) => {
    const a = await account(store)
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'
    const traced = created(await store.jobs.submit(job(a, { traceParent: traceparent }), doc, null, 10))
    const plain = created(await store.jobs.submit(job(a), doc, null, 10))
    const seen = new Map<string, string | null>()
    for (let i = 0; i < 2; i++) {
      const c = await store.jobs.claim('node-1', NOW(), 60_000, 10, 3)
      if (c !== null) seen.set(c.job.id, c.traceParent)
    }
    assert.deepEqual(Object.fromEntries(seen), { [traced.id]: traceparent, [plain.id]: null })
  })

  withStore('jobs: submitted with their document, read by their account only, listed newest first by status', async (store) => {
    const a = await account(store)
    const first = created(await store.jobs.submit(job(a), doc, null, 10))
    const second = created(await store.jobs.submit(job(a, { operation: 'postscript', metadata: null }), [], null, 10))
    const got = await store.jobs.get(a, first.id)
    assert.equal(got?.status, 'queued')
    assert.deepEqual(got?.metadata, { batch: 7 })
    assert.deepEqual(got?.options, { dpi: 150, pages: null, colorMode: 'rgb' })
    assert.equal(got?.result, null)
    assert.equal(await store.jobs.get('acc_other', first.id), null)
    assert.deepEqual(Buffer.concat(await store.jobs.documentPieces(first.id)).toString(), '%PDF-1.7 first piece second piece')
    const page1 = await store.jobs.list(a, { limit: 1 })
    assert.deepEqual(
      page1.items.map((j) => j.id),
      [second.id],
    )
    const page2 = await store.jobs.list(a, { limit: 1, cursor: page1.next! })
    assert.deepEqual(
      page2.items.map((j) => j.id),
      [first.id],
    )
    assert.equal(page2.next, null)
    assert.equal((await store.jobs.list(a, { limit: 10, status: 'running' })).items.length, 0)
    await assert.rejects(store.jobs.list(a, { limit: 10, cursor: 'job_../x' }), CursorError)
  })

  withStore('jobs: 20 parallel submissions of one Idempotency-Key make one job; another body is a mismatch', async (store) => {
    const a = await account(store)
    const results = await Promise.all(Array.from({ length: 20 }, () => store.jobs.submit(job(a), doc, idem('k1', 'f1'), 100)))
    const made = results.filter((r) => 'created' in r)
    assert.equal(made.length, 1)
    const id = created(made[0]).id
    for (const r of results) if (!('created' in r)) assert.equal((r as { replayed: { id: string } }).replayed.id, id)
    assert.equal((await store.jobs.list(a, { limit: 100 })).items.length, 1)
    const other = await store.jobs.submit(job(a), doc, idem('k1', 'f2'), 100)
    assert.equal((other as { mismatch: { id: string } }).mismatch.id, id)
    assert.ok('created' in (await store.jobs.submit(job(await account(store)), doc, idem('k1', 'f1'), 100)), 'keys are per account')
    // A key older than the window is forgotten: the same key makes a new job.
    const later = await store.jobs.submit(job(a), doc, { key: 'k1', fingerprint: 'f2', sinceIso: new Date(Date.now() + 60_000).toISOString() }, 100)
    assert.ok('created' in later)
  })

  withStore('jobs: an account never has more than its limit queued and running, however many submit at once', async (store) => {
    const a = await account(store)
    const results = await Promise.all(Array.from({ length: 12 }, () => store.jobs.submit(job(a), doc, null, 5)))
    assert.equal(results.filter((r) => 'created' in r).length, 5)
    assert.deepEqual(
      results.find((r) => 'limit' in r),
      { limit: 5 },
    )
    assert.equal((await store.jobs.list(a, { limit: 100 })).items.length, 5, 'a refused submission leaves nothing, its document neither')
  })

  withStore('jobs: parallel claims take each job once; an account with the fewest running goes first', async (store) => {
    const x = await account(store)
    const y = await account(store)
    for (let i = 0; i < 4; i++) await store.jobs.submit(job(x), doc, null, 100)
    const now = NOW()
    const first = await store.jobs.claim('n1', now, LEASE, 10, 3)
    assert.equal(first?.job.accountId, x, 'the oldest job first')
    assert.equal(first?.job.status, 'running')
    assert.equal(first?.reclaimed, false)
    // X's job ends: X and Y have none running, and Y, whose turn is older, goes first.
    const end = { status: 'failed' as const, error: { code: 'CONVERSION_FAILED', params: {} } }
    assert.equal(await store.jobs.finish(first!.job.id, first!.lease, end, new Date().toISOString(), event(x, 'conversion.failed')), true)
    const yJob = created(await store.jobs.submit(job(y), doc, null, 100))
    const next = await store.jobs.claim('n1', now + 1, LEASE, 10, 3)
    assert.equal(next?.job.id, yJob.id, 'Y before X’s backlog')
    const afterY = await store.jobs.claim('n1', now + 2, LEASE, 10, 3)
    assert.equal(afterY?.job.accountId, x, 'then X again')
    const claims = await Promise.all(Array.from({ length: 8 }, (_, i) => store.jobs.claim(`n${i}`, now, LEASE, 10, 3)))
    const ids = claims.filter((c) => c !== null).map((c) => c!.job.id)
    assert.equal(ids.length, 2, 'the two jobs left')
    assert.equal(new Set(ids).size, 2, 'each to one claim')
    assert.equal(await store.jobs.claim('n1', now, LEASE, 10, 3), null)
  })

  withStore('jobs: the running limit per account holds under parallel claims', async (store) => {
    const x = await account(store)
    for (let i = 0; i < 6; i++) await store.jobs.submit(job(x), doc, null, 100)
    const now = NOW()
    const claims = await Promise.all(Array.from({ length: 6 }, () => store.jobs.claim('n', now, LEASE, 2, 3)))
    assert.equal(claims.filter((c) => c !== null).length, 2)
  })

  withStore('jobs: a lease only its holder renews and writes under; one run out is claimed again, until its attempts are spent', async (store) => {
    const a = await account(store)
    const { id } = created(await store.jobs.submit(job(a), doc, null, 100))
    const t0 = NOW()
    const c1 = (await store.jobs.claim('n1', t0, 1000, 10, 2))!
    assert.equal(await store.jobs.renew(id, c1.lease, t0 + 500, 1000, 3, 10), true)
    assert.equal(await store.jobs.renew(id, 'stolen', t0 + 500, 1000, 3, 10), false)
    assert.equal(await store.jobs.writePiece(id, c1.lease, 0, Buffer.from('old')), true)
    assert.equal(await store.jobs.claim('n2', t0 + 1400, 1000, 10, 2), null, 'the lease was renewed to t0+1500')
    const c2 = (await store.jobs.claim('n2', t0 + 1600, 1000, 10, 2))!
    assert.equal(c2.job.id, id)
    assert.equal(c2.reclaimed, true)
    assert.equal(c2.job.attempts, 2)
    assert.equal(await store.jobs.writePiece(id, c1.lease, 1, Buffer.from('late')), false, 'the first holder lost it')
    assert.equal(await store.jobs.renew(id, c1.lease, t0 + 1600, 1000, 3, 10), false)
    assert.equal(
      await store.jobs.finish(
        id,
        c1.lease,
        { status: 'failed', error: { code: 'X', params: {} } },
        new Date().toISOString(),
        event(a, 'conversion.failed', id),
      ),
      false,
    )
    assert.equal(await store.jobs.claim('n3', t0 + 3000, 1000, 10, 2), null, 'attempts spent: not claimed a third time')
    const failed = await store.jobs.failSpent(t0 + 3000, 2, new Date().toISOString(), { code: 'CONVERSION_FAILED', params: { attempts: 2 } }, (j) =>
      event(a, 'conversion.failed', j.id, { jobID: j.id }),
    )
    assert.deepEqual(
      failed.map((j) => [j.id, j.status, j.error?.code]),
      [[id, 'failed', 'CONVERSION_FAILED']],
    )
    assert.equal((await store.audit.list({ accountId: a, action: 'conversion.failed', limit: 10 })).items.length, 1)
    assert.deepEqual(await store.jobs.documentPieces(id), [], 'the document goes with the job’s end')
  })

  withStore('jobs: a release gives the job back, an attempt or not; a finish keeps the result and writes the event and the outbox', async (store) => {
    const a = await account(store)
    await store.webhooks.createEndpoint(
      { id: newId('whe'), accountId: a, url: 'https://hooks.example.com/in', eventTypes: null, createdAt: new Date().toISOString(), sealedSecret: 's' },
      10,
      event(a, 'webhook.create'),
    )
    const { id } = created(await store.jobs.submit(job(a), doc, null, 100))
    const c1 = (await store.jobs.claim('n1', NOW(), LEASE, 10, 3))!
    assert.equal(await store.jobs.writePiece(id, c1.lease, 0, Buffer.from('partial')), true)
    const docBytes = doc.reduce((n, b) => n + b.length, 0)
    assert.equal(await store.jobs.keptBytes(a), docBytes + 7, 'a running job’s document and what it has written count')
    assert.equal(await store.jobs.release(id, c1.lease, false), true)
    assert.equal((await store.jobs.get(a, id))?.status, 'queued')
    assert.equal((await store.jobs.get(a, id))?.attempts, 0, 'a node closing takes back its attempt')
    const c2 = (await store.jobs.claim('n2', NOW(), LEASE, 10, 3))!
    assert.equal(c2.reclaimed, false)
    assert.equal(await store.jobs.writePiece(id, c2.lease, 0, Buffer.from('hello ')), true)
    assert.equal(await store.jobs.writePiece(id, c2.lease, 1, Buffer.from('world')), true)
    assert.equal(Buffer.from((await store.jobs.resultPiece(id, 1))!).toString(), 'world', 'its runner reads what it wrote')
    const expiresAt = new Date(Date.now() + 3_600_000).toISOString()
    const result = { type: 'application/zip', bytes: 11, name: 'doc.zip', pages: 2 }
    const end = { status: 'succeeded' as const, result, expiresAt }
    assert.equal(await store.jobs.finish(id, c2.lease, end, new Date().toISOString(), event(a, 'conversion.succeeded', id, { jobID: id })), true)
    assert.equal(await store.jobs.finish(id, c2.lease, end, new Date().toISOString(), event(a, 'conversion.succeeded', id)), false, 'once')
    const done = (await store.jobs.get(a, id))!
    // A job that succeeded did all its pages, though it ended before a renewal recorded how many there were.
    assert.deepEqual([done.status, done.result, done.expiresAt, done.pagesDone, done.pagesTotal], ['succeeded', result, expiresAt, 2, 2])
    assert.equal(Buffer.from((await store.jobs.resultPiece(id, 0))!).toString() + Buffer.from((await store.jobs.resultPiece(id, 1))!).toString(), 'hello world')
    assert.equal(await store.jobs.resultPiece(id, 2), null)
    assert.equal(await store.jobs.keptBytes(a), 11, 'the document went with the job’s end; its result stays')
    const deliveries = await store.webhooks.claim(10, Date.now() + 1000, 60_000)
    assert.deepEqual(
      deliveries.map((d) => [d.eventType, d.data.jobID]),
      [['conversion.succeeded', id]],
    )
    const gauges = await store.jobs.gauges()
    assert.equal(gauges.byStatus.succeeded, 1)
    assert.equal(gauges.resultBytes, 11)
  })

  withStore('jobs: a cancel stops a queued or running job, or deletes a kept result; prune drops expired results and old jobs', async (store) => {
    const a = await account(store)
    const queued = created(await store.jobs.submit(job(a), doc, null, 100))
    const running = created(await store.jobs.submit(job(a), doc, null, 100))
    assert.equal((await store.jobs.cancel(a, queued.id, new Date().toISOString(), (action) => event(a, action)))?.status, 'cancelled')
    assert.equal(await store.jobs.cancel(a, queued.id, new Date().toISOString(), (action) => event(a, action)), null, 'nothing left to do')
    assert.equal(await store.jobs.cancel('acc_other', running.id, new Date().toISOString(), (action) => event(a, action)), null)
    const c = (await store.jobs.claim('n', NOW(), LEASE, 10, 3))!
    assert.equal(c.job.id, running.id)
    assert.equal((await store.jobs.cancel(a, running.id, new Date().toISOString(), (action) => event(a, action)))?.status, 'cancelled')
    assert.equal(await store.jobs.renew(running.id, c.lease, NOW(), LEASE, 1, 2), false, 'its node learns at its next renewal')
    assert.equal(await store.jobs.writePiece(running.id, c.lease, 0, Buffer.from('x')), false)
    assert.equal((await store.audit.list({ accountId: a, action: 'job.cancel', limit: 10 })).items.length, 2, 'one event a cancel that did something')

    const kept = created(await store.jobs.submit(job(a), doc, null, 100))
    const k = (await store.jobs.claim('n', NOW(), LEASE, 10, 3))!
    await store.jobs.writePiece(kept.id, k.lease, 0, Buffer.from('abc'))
    const result = { type: 'image/png', bytes: 3, name: 'doc.png', pages: 1 }
    await store.jobs.finish(
      kept.id,
      k.lease,
      { status: 'succeeded', result, expiresAt: new Date(Date.now() + 60_000).toISOString() },
      new Date().toISOString(),
      event(a, 'conversion.succeeded'),
    )
    const deleted = await store.jobs.cancel(a, kept.id, new Date().toISOString(), (action) => event(a, action))
    assert.deepEqual([deleted?.status, deleted?.result, deleted?.resultGone], ['succeeded', null, true])
    const deletions = await store.audit.list({ accountId: a, action: 'job.result_delete', limit: 10 })
    assert.deepEqual(
      deletions.items.map((e) => e.action),
      ['job.result_delete'],
      'the event says what the store did',
    )
    assert.equal(await store.jobs.resultPiece(kept.id, 0), null)

    const expiring = created(await store.jobs.submit(job(a), doc, null, 100))
    const e = (await store.jobs.claim('n', NOW(), LEASE, 10, 3))!
    await store.jobs.writePiece(expiring.id, e.lease, 0, Buffer.from('abc'))
    await store.jobs.finish(
      expiring.id,
      e.lease,
      { status: 'succeeded', result, expiresAt: new Date(Date.now() + 1000).toISOString() },
      new Date().toISOString(),
      event(a, 'conversion.succeeded'),
    )
    assert.deepEqual(await store.jobs.prune(new Date(Date.now() + 2000).toISOString(), new Date(0).toISOString()), { results: 1, jobs: 0 })
    const pruned = (await store.jobs.get(a, expiring.id))!
    assert.deepEqual([pruned.status, pruned.result, pruned.resultGone], ['succeeded', null, true])
    assert.equal(await store.jobs.resultPiece(expiring.id, 0), null)
    assert.deepEqual(await store.jobs.prune(new Date().toISOString(), new Date(Date.now() + 60_000).toISOString()), { results: 0, jobs: 4 })
    assert.equal((await store.jobs.list(a, { limit: 10 })).items.length, 0)
  })
}
