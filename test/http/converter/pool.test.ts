import { test } from 'node:test'
import assert from 'node:assert/strict'
import { ConversionPool, PoolError } from '../../../src/converter/pool.ts'
import { SKIP_CORPUS, real } from '../../support/convert.ts'
import { imageSpec } from '../../../src/converter/image-options.ts'

const limits = { maxPages: 500, maxPixels: 50e6, maxOutputBytes: 2 ** 30, maxMemoryBytes: 2 ** 30 }
const job = () => ({
  op: 'image' as const,
  pdf: new Uint8Array(real('pdflatex-4-pages.pdf')),
  color: 'rgb' as const,
  pages: null,
  limits,
  image: imageSpec({ format: 'png' }, 36),
})
const options = { size: 1, maxQueue: 1, maxJobsPerWorker: 100, maxMemoryBytes: 768 * 1048576 }

test('time spent waiting for a slow consumer does not count against the limit', { skip: SKIP_CORPUS }, async (t) => {
  const pool = new ConversionPool({ ...options, timeoutMs: 1000, stallTimeoutMs: 5000 })
  t.after(() => pool.close())
  const pages: number[] = []
  const start = performance.now()
  // Page n is taken 0.9 n seconds in: the worker, two pages ahead at most, waits about 1.8 s in all.
  const running = pool.run(job(), {
    onPage: (page) => {
      pages.push(page)
      setTimeout(() => running.ack(), 900 * page)
    },
  })
  const result = await running.result
  assert.equal(result.ok, true)
  assert.deepEqual(pages, [1, 2, 3, 4])
  assert.ok(performance.now() - start > 1000, 'the job outlived the limit while it waited for its consumer')
})

test('a consumer that takes no page for the stall limit is given up on', { skip: SKIP_CORPUS }, async (t) => {
  const pool = new ConversionPool({ ...options, timeoutMs: 20000, stallTimeoutMs: 800 })
  t.after(() => pool.close())
  const running = pool.run(job(), { onPage: () => {} })
  await assert.rejects(running.result, (e: unknown) => e instanceof PoolError && e.reason === 'stalled' && /client took nothing/.test(e.message))
  const next = pool.run({ ...job(), pages: [{ from: 1, to: 1 }] }, { onPage: () => {} })
  assert.equal((await next.result).ok, true, 'a fresh worker takes the next job')
})

test('PostScript comes in acknowledged pieces; a consumer that stops taking them stops Ghostscript mid-run', { skip: SKIP_CORPUS }, async (t) => {
  const pool = new ConversionPool({ ...options, timeoutMs: 60000, stallTimeoutMs: 1500 })
  t.after(() => pool.close())
  const ps = (pdf: Buffer) => ({ op: 'ps' as const, pdf: new Uint8Array(pdf), color: 'rgb' as const, pages: null, limits })
  // base64image.pdf gives 22 MB of PostScript: far more than the worker may send ahead.
  const chunks: number[] = []
  const stalled = pool.run(ps(real('base64image.pdf')), {
    onChunk: (bytes) => {
      chunks.push(bytes.byteLength)
    },
  })
  await assert.rejects(stalled.result, (e: unknown) => e instanceof PoolError && e.reason === 'stalled')
  const sent = chunks.reduce((a, b) => a + b, 0)
  assert.ok(chunks.length > 0 && sent <= 2 * 1048576, `the worker sent ${sent} bytes in ${chunks.length} pieces without an ack`)

  let total = 0
  const taken = pool.run(ps(real('base64image.pdf')), {
    onChunk: (bytes) => {
      total += bytes.byteLength
      setImmediate(() => taken.ack())
    },
  })
  const result = await taken.result
  assert.ok(result.ok && result.op === 'ps')
  assert.equal(result.bytes, total)
  assert.ok(total > 20e6)
})
