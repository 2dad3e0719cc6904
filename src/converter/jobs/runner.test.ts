/**
 * The job runner's decisions, on a real store with a stand-in pool: a worker that dies on a
 * job gives it back as an attempt, and after JOB_MAX_ATTEMPTS the job fails with its event; a
 * closing node gives its job back without spending an attempt; a sourceUrl whose name turns
 * private between the submission and the fetch (DNS rebinding) is refused at fetch time.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { openSqliteStore } from '../../storage/sqlite/store.ts'
import { keyring } from '../../crypto/keyring.ts'
import { loadConfig } from '../../config/config.ts'
import { Jobs, isRefusal } from '../../services/jobs.ts'
import { SYSTEM } from '../../domain/accounts.ts'
import { JobRunner } from './runner.ts'
import { PoolError, type ConversionPool, type Running } from '../pool.ts'
import type { Store } from '../../storage/ports.ts'

const PDF = Buffer.from('%PDF-1.7\n% a stand-in: the pool here never opens it\n')
const ring = keyring(new Map([[1, randomBytes(32)]]))

/** A pool whose every run ends with `fail()`'s error, counting runs; or waits until cancelled. */
function standIn(fail: () => Error | 'wait'): { pool: ConversionPool; runs: number[] } {
  const runs: number[] = []
  const pool = {
    background(): Running {
      runs.push(Date.now())
      const error = fail()
      let cancel: () => void = () => undefined
      const result = new Promise<never>((_, reject) => {
        if (error === 'wait') cancel = () => reject(new PoolError('cancelled', 'cancelled'))
        else setTimeout(() => reject(error), 5)
      })
      return { result, ack: () => undefined, cancel: () => cancel(), stats: () => ({ worker: null, workers: 0, queuedMs: 0, engineMs: 0 }) }
    },
  } as unknown as ConversionPool
  return { pool, runs }
}

async function setUp(t: { after(fn: () => unknown): void }, env: Record<string, string>, fail: () => Error | 'wait') {
  const store: Store = openSqliteStore({ path: ':memory:' })
  t.after(() => store.close())
  const accountId = 'acc_runner'
  await store.access.createAccount(
    { id: accountId, name: 'r', status: 'active', createdAt: new Date().toISOString() },
    {
      actor: 'cli',
      action: 'account.create',
      target: { type: 'account', id: accountId },
      accountId,
      ip: null,
      outcome: 'success',
      detail: {},
    },
  )
  const config = loadConfig({ NODE_ENV: 'test', JOB_POLL_MS: '20', JOB_WORKERS: '1', ...env })
  const { pool, runs } = standIn(fail)
  const runner = new JobRunner({ store: store.jobs, pool, keyring: ring, config, node: 'n1', log: { info() {}, warn() {}, error() {} } })
  const jobs = new Jobs({ store, keyring: ring, config, onSubmitted: () => runner.nudge() })
  return { store, accountId, runner, jobs, runs }
}

test('a worker dying on a job gives it back as an attempt; after JOB_MAX_ATTEMPTS it fails, with its event', async (t) => {
  const { store, accountId, runner, jobs, runs } = await setUp(t, { JOB_MAX_ATTEMPTS: '3' }, () => new PoolError('crashed', 'worker exited with code 1'))
  runner.start()
  t.after(() => runner.close())
  const made = await jobs.submit({ accountId, keyId: 'key_1' }, { fields: { operation: 'image' }, document: { bytes: PDF, filename: 'x.pdf' } }, null)
  assert.ok(!isRefusal(made))
  let job = await store.jobs.get(accountId, made.job.id)
  for (let i = 0; i < 200 && job?.status !== 'failed'; i++) {
    await new Promise((r) => setTimeout(r, 20))
    job = await store.jobs.get(accountId, made.job.id)
  }
  assert.equal(job?.status, 'failed')
  assert.equal(job?.error?.code, 'CONVERSION_FAILED')
  assert.equal(job?.attempts, 3)
  assert.equal(runs.length, 3, 'run three times, never a fourth')
  const events = await store.audit.list({ accountId, action: 'conversion.failed', limit: 10 })
  assert.equal(events.items.length, 1)
  assert.equal(events.items[0]!.detail.jobID, made.job.id)
})

test('a closing node gives its running job back without spending an attempt', async (t) => {
  const { store, accountId, runner, jobs } = await setUp(t, {}, () => 'wait')
  runner.start()
  const made = await jobs.submit({ accountId, keyId: 'key_1' }, { fields: { operation: 'postscript' }, document: { bytes: PDF, filename: 'x.pdf' } }, null)
  assert.ok(!isRefusal(made))
  for (let i = 0; i < 100 && (await store.jobs.get(accountId, made.job.id))?.status !== 'running'; i++) await new Promise((r) => setTimeout(r, 20))
  await runner.close()
  const job = await store.jobs.get(accountId, made.job.id)
  assert.deepEqual([job?.status, job?.attempts], ['queued', 0])
  // And a customer's cancel reaches a running job: its run stops at once.
  const again = await setUp(t, {}, () => 'wait')
  again.runner.start()
  t.after(() => again.runner.close())
  const other = await again.jobs.submit(
    { accountId: again.accountId, keyId: 'key_1' },
    { fields: { operation: 'image' }, document: { bytes: PDF, filename: 'x.pdf' } },
    null,
  )
  assert.ok(!isRefusal(other))
  for (let i = 0; i < 100 && (await again.store.jobs.get(again.accountId, other.job.id))?.status !== 'running'; i++) await new Promise((r) => setTimeout(r, 20))
  const cancelled = await again.jobs.cancel({ actor: SYSTEM }, again.accountId, other.job.id)
  assert.ok(!isRefusal(cancelled) && cancelled.status === 'cancelled')
})

test('a sourceUrl whose name turns private after the submission is refused at fetch time, never fetched', async (t) => {
  let answer = '93.184.216.34'
  const lookup = async () => [{ address: answer, family: 4 }]
  const { store, accountId, jobs, runs } = await setUp(t, {}, () => new Error('the pool must not be reached'))
  const config = loadConfig({ NODE_ENV: 'test', JOB_POLL_MS: '20', JOB_WORKERS: '1' })
  const checked = new Jobs({ store, keyring: ring, config, lookup })
  const made = await checked.submit(
    { accountId, keyId: 'key_1' },
    { fields: { operation: 'image', sourceUrl: 'https://files.example.com/doc.pdf' }, document: null },
    null,
  )
  assert.ok(!isRefusal(made), 'public at submission')
  answer = '10.0.0.5'
  const refused = await checked.submit(
    { accountId, keyId: 'key_1' },
    { fields: { operation: 'image', sourceUrl: 'https://files.example.com/doc.pdf' }, document: null },
    null,
  )
  assert.ok(isRefusal(refused) && refused.problems[0]!.code === 'SOURCE_URL_INVALID', 'private at submission: refused at once')
  const runner = new JobRunner({
    store: store.jobs,
    pool: standIn(() => new Error('unreached')).pool,
    keyring: ring,
    config,
    node: 'n1',
    log: { info() {}, warn() {}, error() {} },
    transfer: { lookup },
  })
  runner.start()
  t.after(() => runner.close())
  let job = await store.jobs.get(accountId, made.job.id)
  for (let i = 0; i < 200 && job?.status !== 'failed'; i++) {
    await new Promise((r) => setTimeout(r, 20))
    job = await store.jobs.get(accountId, made.job.id)
  }
  assert.equal(job?.status, 'failed')
  assert.equal(job?.error?.code, 'SOURCE_FETCH_FAILED')
  // Refused, and never saying what the name resolved to: the job's error is the customer's to read.
  assert.equal(job?.error?.params.reason, 'files.example.com resolves to an address that is not public')
  assert.ok(!JSON.stringify(refused).includes('10.0.0.5'), 'nor the refusal at submission')
  assert.equal(runs.length, 0)
  void jobs
})
