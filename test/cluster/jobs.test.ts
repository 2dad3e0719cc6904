/**
 * Conversion jobs across nodes (server processes on one PostgreSQL and one Redis): a job
 * submitted on node A is heard of once by a real receiver, downloads from node B as the
 * synchronous answer and reaches its resultUrl; a node killed in the middle of a 117-page job
 * leaves it to another, which finishes it; and a job whose runs keep killing their node fails
 * after JOB_MAX_ATTEMPTS, with its event.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { randomBytes } from 'node:crypto'
import { loadConfig } from '../../src/config/config.ts'
import { resolvePepper } from '../../src/config/pepper.ts'
import { resolveKeyring } from '../../src/config/encryption.ts'
import { openStore } from '../../src/storage/factory.ts'
import { Accounts } from '../../src/services/accounts.ts'
import { Webhooks } from '../../src/services/webhooks.ts'
import { isFailure } from '../../src/services/outcome.ts'
import { SYSTEM } from '../../src/domain/accounts.ts'
import { createCaller, tempDir } from '../support/helper.ts'
import { startServer, type ServerProcess } from '../support/process.ts'
import { createDatabase, dropPrefix, redisUrl, skipUnless, uniqueName } from '../support/services.ts'
import { SKIP_CORPUS, real, upload } from '../support/convert.ts'
import { Receiver, waitFor } from '../support/receiver.ts'

const skip = skipUnless('TEST_DATABASE_URL', 'TEST_REDIS_URL') || SKIP_CORPUS
const PEPPER = 'cluster-jobs-pepper-'.padEnd(40, 'x')
const BIG = 'GeoTopo-komprimiert.pdf' // 117 pages

interface JobBody {
  jobID: string
  status: string
  attempts: number
  pagesDone: number
  result: { size: number; type: string } | null
  error: { code: string } | null
}

async function submit(node: string, key: string, file: Buffer, fields: Record<string, string>): Promise<string> {
  const form = new FormData()
  form.append('pdfDocument', new Blob([new Uint8Array(file)], { type: 'application/pdf' }), 'doc.pdf')
  for (const [k, v] of Object.entries(fields)) form.append(k, v)
  const res = await fetch(`${node}/converter/jobs`, { method: 'POST', headers: { 'x-api-key': key }, body: form })
  assert.equal(res.status, 202, await res.clone().text())
  return ((await res.json()) as { jobID: string }).jobID
}

async function status(node: string, key: string, id: string): Promise<JobBody> {
  const res = await fetch(`${node}/converter/jobs/${id}`, { headers: { 'x-api-key': key } })
  assert.equal(res.status, 200)
  return (await res.json()) as JobBody
}

async function until(node: string, key: string, id: string, done: (b: JobBody) => boolean, ms: number, what: string): Promise<JobBody> {
  let last: JobBody | null = null
  await waitFor(
    async () => {
      last = await status(node, key, id)
      return done(last)
    },
    ms,
    what,
  )
  return last!
}

test('conversion jobs on two nodes: any node runs them, serves them, and takes over from a dead one', { skip, timeout: 300_000 }, async (t) => {
  const databaseUrl = await createDatabase(t)
  const prefix = `${uniqueName('t')}:`
  t.after(() => dropPrefix(prefix))
  const env = {
    NODE_ENV: 'test',
    PEPPER,
    // One keyring for every node: a job's sealed resultUrl opens wherever it runs.
    ENCRYPTION_KEYS: `1:${randomBytes(32).toString('base64')}`,
    DATABASE_URL: databaseUrl,
    REDIS_URL: redisUrl(),
    REDIS_PREFIX: prefix,
    WEBHOOK_ALLOW_PRIVATE: 'true',
    WEBHOOK_POLL_MS: '100',
    JOB_POLL_MS: '100',
    JOB_LEASE_SECONDS: '2',
    JOB_MAX_ATTEMPTS: '2',
    CONVERTER_WORKERS: '2',
    PLAN_RATE: '0',
  }
  const config = loadConfig({ ...env, DATA_DIR: tempDir(t) })
  const store = await openStore(config)
  t.after(() => store.close())
  const accounts = new Accounts({ store, pepper: resolvePepper(config), config })
  const { apiKey, accountId } = await createCaller(accounts)
  const receiver = await new Receiver().start()
  t.after(() => receiver.stop())
  const made = await new Webhooks({ store, keyring: resolveKeyring(config), config }).create({ actor: SYSTEM }, accountId, {
    url: `http://127.0.0.1:${receiver.port}/hooks`,
  })
  assert.ok(!isFailure(made))
  receiver.secret = made.secret
  const node = async (extra: Record<string, string> = {}): Promise<{ server: ServerProcess; url: string }> => {
    const server = startServer({ ...env, DATA_DIR: tempDir(t), ...extra }, t)
    return { server, url: (await server.ready).url }
  }

  await t.test('submitted on A, heard once, downloaded from B as the synchronous answer, and put at its resultUrl', async () => {
    const puts: Buffer[] = []
    const bucket = http.createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        puts.push(Buffer.concat(chunks))
        res.end()
      })
    })
    await new Promise<void>((resolve) => bucket.listen(0, '127.0.0.1', resolve))
    t.after(() => new Promise((resolve) => bucket.close(resolve)))
    const [a, b] = await Promise.all([node(), node()])
    const doc = real('pdflatex-4-pages.pdf')
    const id = await submit(a.url, apiKey, doc, {
      operation: 'image',
      dpi: '96',
      resultUrl: `http://127.0.0.1:${(bucket.address() as AddressInfo).port}/out.zip`,
    })
    const done = await until(b.url, apiKey, id, (j) => j.status === 'succeeded' || j.status === 'failed', 60_000, 'the job')
    assert.equal(done.status, 'succeeded', JSON.stringify(done.error))
    const fromB = Buffer.from(await (await fetch(`${b.url}/converter/jobs/${id}/result`, { headers: { 'x-api-key': apiKey } })).arrayBuffer())
    const sync = Buffer.from(await (await upload(a.url, '/converter/generateImage', apiKey, doc, { dpi: '96' }, 'doc.pdf')).arrayBuffer())
    assert.ok(fromB.equals(sync), 'node B serves the synchronous answer, byte for byte')
    assert.equal(puts.length, 1)
    assert.ok(puts[0]!.equals(sync), 'the resultUrl got the same bytes')
    await waitFor(() => receiver.deliveries.some((d) => d.payload?.data.jobID === id), 15_000, 'the event')
    await new Promise((r) => setTimeout(r, 500))
    const heard = receiver.deliveries.filter((d) => d.payload?.data.jobID === id)
    assert.deepEqual(
      heard.map((d) => d.payload!.type),
      ['conversion.succeeded'],
      'once, verified',
    )
    await Promise.all([a.server.stop(), b.server.stop()])
  })

  await t.test('node A killed in the middle of a 117-page job: node B runs it again to the end', async (st) => {
    const a = await node()
    const id = await submit(a.url, apiKey, real(BIG), { operation: 'image', dpi: '200' })
    const midway = await until(a.url, apiKey, id, (j) => j.status === 'running' && j.pagesDone >= 5, 60_000, 'A midway')
    assert.equal(await a.server.stop('SIGKILL'), null)
    const killedAt = Date.now()
    const b = await node()
    const done = await until(b.url, apiKey, id, (j) => j.status === 'succeeded' || j.status === 'failed', 120_000, 'B to finish it')
    assert.equal(done.status, 'succeeded', JSON.stringify(done.error))
    assert.equal(done.attempts, 2)
    st.diagnostic(`A died at page ${midway.pagesDone}; B finished ${Date.now() - killedAt} ms later`)
    const res = await fetch(`${b.url}/converter/jobs/${id}/result`, { headers: { 'x-api-key': apiKey } })
    assert.equal(res.headers.get('x-page-count'), '117')
    assert.equal((await res.arrayBuffer()).byteLength, done.result!.size)
    await waitFor(() => receiver.deliveries.some((d) => d.payload?.data.jobID === id), 15_000, 'its event')
    await b.server.stop()
  })

  await t.test('a job whose runs kill their node fails after JOB_MAX_ATTEMPTS, with its event', async () => {
    let current = await node()
    const id = await submit(current.url, apiKey, real(BIG), { operation: 'image', dpi: '200' })
    for (let attempt = 1; attempt <= 2; attempt++) {
      const seen = await until(current.url, apiKey, id, (j) => j.status !== 'queued' && j.attempts === attempt && j.pagesDone >= 1, 60_000, `run ${attempt}`)
      assert.equal(seen.status, 'running', `run ${attempt} was still running when its node was killed`)
      await current.server.stop('SIGKILL')
      current = await node()
    }
    const failed = await until(current.url, apiKey, id, (j) => j.status !== 'running' && j.status !== 'queued', 30_000, 'the poison job to fail')
    assert.equal(failed.status, 'failed')
    assert.equal(failed.error?.code, 'CONVERSION_FAILED')
    await waitFor(() => receiver.deliveries.some((d) => d.payload?.data.jobID === id && d.payload.type === 'conversion.failed'), 15_000, 'conversion.failed')
    await current.server.stop()
  })
})
