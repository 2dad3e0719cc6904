import { test } from 'node:test'
import assert from 'node:assert/strict'
import { ConversionPool, PoolError } from './pool.ts'
import { SKIP_CORPUS, real } from '../../test/convert.ts'

const limits = { maxPages: 500, maxPixels: 50e6 }
const job = () => ({ op: 'png' as const, pdf: new Uint8Array(real('pdflatex-4-pages.pdf')), color: 'rgb' as const, pages: null, limits, dpi: 36 })

test('time spent waiting for a slow consumer does not count against the limit', { skip: SKIP_CORPUS }, async (t) => {
  const pool = new ConversionPool({ size: 1, maxQueue: 1, timeoutMs: 1000, maxJobsPerWorker: 100, maxMemoryBytes: 2 ** 31 })
  t.after(() => pool.close())
  const pages: number[] = []
  const start = performance.now()
  // Page n is taken 0.9 n seconds in: the worker, two pages ahead at most, waits about 1.8 s in all.
  const running = pool.run(job(), { onPage: (page) => { pages.push(page); setTimeout(() => running.ack(), 900 * page) } })
  const result = await running.result
  assert.equal(result.ok, true)
  assert.deepEqual(pages, [1, 2, 3, 4])
  assert.ok(performance.now() - start > 1000, 'the job outlived the limit while it waited for its consumer')
})

test('a consumer that takes no page for as long as the limit is given up on', { skip: SKIP_CORPUS }, async (t) => {
  const pool = new ConversionPool({ size: 1, maxQueue: 1, timeoutMs: 800, maxJobsPerWorker: 100, maxMemoryBytes: 2 ** 31 })
  t.after(() => pool.close())
  const running = pool.run(job(), { onPage: () => {} })
  await assert.rejects(running.result, (e: unknown) => e instanceof PoolError && e.reason === 'timeout' && /client took no page/.test(e.message))
  const next = pool.run({ ...job(), pages: [{ from: 1, to: 1 }] }, { onPage: () => {} })
  assert.equal((await next.result).ok, true, 'a fresh worker takes the next job')
})
