/**
 * The memory check of issue 11: hostile PDFs whose PostScript would be huge, converted in
 * parallel by the real server process, must not take its memory far up, nor keep it.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { tempDir } from '../../test/helper.ts'
import { startServer, treeRssBytes } from '../../test/process.ts'
import { SKIP_CORPUS, real, upload } from '../../test/convert.ts'
import { hugeImage, randomImagePages } from '../../test/hostile.ts'
import { ERROR_CODES } from '../errors/catalogue.ts'

const MiB = 1048576
const PS = '/converter/generatePostscript'

test('two parallel conversions of each hostile PDF to PostScript keep the process tree under 1.5 GB and give it back', { skip: SKIP_CORPUS, timeout: 300_000 }, async (t) => {
  const server = startServer({ DATA_DIR: tempDir(t), NODE_ENV: 'development', CONVERTER_WORKERS: '2' }, t)
  const { url } = await server.ready
  const key = /API key is shown this once: (tsr_[0-9a-f]{40})/.exec(server.output())![1]!
  const pid = server.child.pid!
  // Warm up: both workers loaded, as on a node that has served conversions.
  await Promise.all([1, 2].map(async () => assert.equal((await upload(url, PS, key, real('minimal-document.pdf'))).status, 200)))
  const before = treeRssBytes(pid)

  let peak = before
  let sampling = true
  const sampler = (async () => {
    while (sampling) {
      peak = Math.max(peak, treeRssBytes(pid))
      await sleep(100)
    }
  })()
  const random = randomImagePages(500)
  const huge = hugeImage()
  const started = performance.now()
  const answers = await Promise.all([random, random, huge, huge, real('pdflatex-4-pages.pdf'), real('minimal-document.pdf')].map(async (pdf, i) => {
    const res = await upload(url, PS, key, pdf)
    const body = Buffer.from(await res.arrayBuffer())
    return { i, status: res.status, type: res.headers.get('content-type') ?? '', body, seconds: (performance.now() - started) / 1000 }
  }))
  sampling = false
  await sampler
  await sleep(10_000)
  const after = treeRssBytes(pid)

  const summary = answers.map((a) => `#${a.i} ${a.status} ${a.type.startsWith('application/json') ? a.body.toString() : `${a.body.length} bytes`} at ${a.seconds.toFixed(1)} s`)
  t.diagnostic(`RSS before ${(before / MiB).toFixed(0)} MiB, peak ${(peak / MiB).toFixed(0)} MiB, 10 s after ${(after / MiB).toFixed(0)} MiB`)
  for (const line of summary) t.diagnostic(line)
  for (const a of answers) {
    if (a.status === 200) {
      assert.match(a.type, /^application\/postscript/)
      assert.ok(a.body.subarray(0, 4).toString() === '%!PS', `answer #${a.i} is PostScript`)
      assert.match(a.body.subarray(-4096).toString('latin1'), /%%EOF/, `answer #${a.i} is whole`)
    } else {
      assert.ok(a.status >= 400 && a.status < 500, summary[a.i])
      const problems = JSON.parse(a.body.toString()) as { type: string; code: string; message: string }[]
      assert.ok(problems.every((p) => p.type === 'Error' && ERROR_CODES.includes(p.code as never) && p.message.length > 0), summary[a.i])
    }
  }
  assert.equal(answers[4]!.status, 200, 'the small conversions beside the hostile ones succeed')
  assert.equal(answers[5]!.status, 200, 'the small conversions beside the hostile ones succeed')
  assert.ok(peak < 1500 * 1e6, `peak RSS ${(peak / MiB).toFixed(0)} MiB`)
  assert.ok(after - before < 400 * 1e6, `RSS 10 s after: ${(after / MiB).toFixed(0)} MiB, from ${(before / MiB).toFixed(0)} MiB`)
})
