/**
 * The memory checks of issues 11 and 24: hostile PDFs whose PostScript would be huge, and
 * image bombs whose pixels would not fit in a worker, converted in parallel by the real
 * server process, must not take its memory far up, nor keep it.
 */
import { test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { tempDir } from '../support/helper.ts'
import { startServer, treeRssBytes } from '../support/process.ts'
import { SKIP_CORPUS, real, runJob, upload } from '../support/convert.ts'
import { hugeImage, jbig2Bomb, jpxBomb, randomImagePages, textPages } from '../support/hostile.ts'
import sharp from 'sharp'
import { ERROR_CODES } from '../../src/errors/catalogue.ts'

const MiB = 1048576

/** conversionNode starts the real server with two workers (and `env`), and gives its URL, the key it printed and its process. */
async function conversionNode(t: TestContext, env: Record<string, string> = {}) {
  const server = startServer({ DATA_DIR: tempDir(t), NODE_ENV: 'development', CONVERTER_WORKERS: '2', ...env }, t)
  const { url } = await server.ready
  const key = /API key is shown this once: (tsr_[0-9a-f]{40})/.exec(server.output())![1]!
  return { server, url, key, pid: server.child.pid! }
}
const PS = '/converter/generatePostscript'
const IMAGE = '/converter/generateImage'

test('two parallel conversions of each hostile PDF to PostScript, beside two JBIG2 bombs, keep the process tree under 1.5 GB and give it back', {
  skip: SKIP_CORPUS,
  timeout: 300_000,
}, async (t) => {
  const { url, key, pid } = await conversionNode(t)
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
  const jbig2 = jbig2Bomb()
  const jobs = [
    [PS, random],
    [PS, random],
    [PS, huge],
    [PS, huge],
    [PS, real('pdflatex-4-pages.pdf')],
    [PS, real('minimal-document.pdf')],
    [IMAGE, jbig2],
    [IMAGE, jbig2],
  ] as const
  const answers = await Promise.all(
    jobs.map(async ([path, pdf], i) => {
      const res = await upload(url, path, key, pdf)
      const body = Buffer.from(await res.arrayBuffer())
      return { i, status: res.status, type: res.headers.get('content-type') ?? '', body, seconds: (performance.now() - started) / 1000 }
    }),
  )
  sampling = false
  await sampler
  await sleep(10_000)
  const after = treeRssBytes(pid)

  const summary = answers.map(
    (a) => `#${a.i} ${a.status} ${a.type.startsWith('application/json') ? a.body.toString() : `${a.body.length} bytes`} at ${a.seconds.toFixed(1)} s`,
  )
  t.diagnostic(`RSS before ${(before / MiB).toFixed(0)} MiB, peak ${(peak / MiB).toFixed(0)} MiB, 10 s after ${(after / MiB).toFixed(0)} MiB`)
  for (const line of summary) t.diagnostic(line)
  for (const a of answers) {
    if (a.status === 200) {
      assert.equal(jobs[a.i]![0], PS, summary[a.i])
      assert.match(a.type, /^application\/postscript/)
      assert.ok(a.body.subarray(0, 4).toString() === '%!PS', `answer #${a.i} is PostScript`)
      assert.match(a.body.subarray(-4096).toString('latin1'), /%%EOF/, `answer #${a.i} is whole`)
    } else {
      assert.ok(a.status >= 400 && a.status < 500, summary[a.i])
      const problems = JSON.parse(a.body.toString()) as { type: string; code: string; message: string }[]
      assert.ok(
        problems.every((p) => p.type === 'Error' && ERROR_CODES.includes(p.code as never) && p.message.length > 0),
        summary[a.i],
      )
    }
  }
  assert.equal(answers[4]!.status, 200, 'the small conversions beside the hostile ones succeed')
  assert.equal(answers[5]!.status, 200, 'the small conversions beside the hostile ones succeed')
  assert.ok(peak < 1500 * 1e6, `peak RSS ${(peak / MiB).toFixed(0)} MiB`)
  assert.ok(after - before < 400 * 1e6, `RSS 10 s after: ${(after / MiB).toFixed(0)} MiB, from ${(before / MiB).toFixed(0)} MiB`)
})

/** peakWhile samples the resident memory of `pid`'s process tree every 100 ms until `work` settles. */
async function peakWhile<T>(pid: number, work: Promise<T>): Promise<{ value: T; peak: number }> {
  let peak = treeRssBytes(pid)
  let sampling = true
  const sampler = (async () => {
    while (sampling) {
      peak = Math.max(peak, treeRssBytes(pid))
      await sleep(100)
    }
  })()
  try {
    return { value: await work, peak }
  } finally {
    sampling = false
    await sampler
    peak = Math.max(peak, treeRssBytes(pid))
  }
}

test("image bombs (JPEG 2000, JBIG2) stop at the worker's memory cap with 422, their workers are replaced, and the node gives the memory back", {
  skip: SKIP_CORPUS,
  timeout: 180_000,
}, async (t) => {
  const budgetMiB = 768
  const { server, url, key, pid } = await conversionNode(t, { WORKER_MAX_MEMORY_MB: String(budgetMiB) })
  const small = async (path: string) => {
    const res = await upload(url, path, key, real('minimal-document.pdf'), path === IMAGE ? { dpi: '72' } : {})
    await res.arrayBuffer()
    return res.status
  }
  // Warm up: both workers loaded, as on a node that has served conversions.
  assert.deepEqual(await Promise.all([small(IMAGE), small(IMAGE)]), [200, 200])
  const before = treeRssBytes(pid)

  // Each claims 60000 × 60000 pixels in under 1 KB; two of each to PNG at once, and the JBIG2 one to PostScript.
  const bombs = [
    [IMAGE, jpxBomb()],
    [IMAGE, jpxBomb()],
    [IMAGE, jbig2Bomb()],
    [IMAGE, jbig2Bomb()],
    [PS, jbig2Bomb()],
  ] as const
  const started = performance.now()
  const { value: answers, peak } = await peakWhile(
    pid,
    Promise.all(
      bombs.map(async ([path, pdf], i) => {
        const res = await upload(url, path, key, pdf)
        return { i, status: res.status, body: await res.text(), seconds: (performance.now() - started) / 1000 }
      }),
    ),
  )
  await sleep(10_000)
  const after = treeRssBytes(pid)
  const replaced = server
    .output()
    .split('\n')
    .filter((line) => line.includes('conversion worker replaced'))

  const summary = answers.map((a) => `#${a.i} ${a.status} ${a.body.slice(0, 200)} at ${a.seconds.toFixed(1)} s`)
  t.diagnostic(
    `RSS before ${(before / MiB).toFixed(0)} MiB, peak ${(peak / MiB).toFixed(0)} MiB, 10 s after ${(after / MiB).toFixed(0)} MiB; ${replaced.length} workers replaced`,
  )
  for (const line of summary) t.diagnostic(line)
  for (const a of answers) {
    assert.equal(a.status, 422, summary[a.i])
    assert.deepEqual(
      (JSON.parse(a.body) as { code: string }[]).map((p) => p.code),
      ['CONVERSION_MEMORY_EXCEEDED'],
      summary[a.i],
    )
    assert.ok(a.seconds < 30, `stopped at the cap, not by the time limit: ${summary[a.i]}`)
  }
  // Every bomb's worker is replaced for its memory, whatever the job's outcome.
  assert.ok(replaced.filter((line) => line.includes('"reason":"memory"')).length >= bombs.length, replaced.join('\n'))
  // Two workers, each within its budget (which holds its engines as they start, about 290 MiB, as well).
  assert.ok(peak - before < 2 * budgetMiB * MiB, `peak RSS ${(peak / MiB).toFixed(0)} MiB, from ${(before / MiB).toFixed(0)} MiB`)
  assert.ok(after - before < 400 * 1e6, `RSS 10 s after: ${(after / MiB).toFixed(0)} MiB, from ${(before / MiB).toFixed(0)} MiB`)
  // And the node converts as before.
  assert.deepEqual(await Promise.all([small(IMAGE), small(PS)]), [200, 200])
})

test('pages of 35 megapixels written as PNG, WebP, TIFF and JPEG on both workers stay within the workers budgets, and the memory comes back', {
  skip: SKIP_CORPUS,
  timeout: 180_000,
}, async (t) => {
  const budgetMiB = 768
  const { url, key, pid } = await conversionNode(t, { WORKER_MAX_MEMORY_MB: String(budgetMiB) })
  const convert = async (fields: Record<string, string>) => {
    const res = await upload(url, IMAGE, key, real('pdflatex-image.pdf'), fields)
    return { status: res.status, bytes: (await res.arrayBuffer()).byteLength }
  }
  assert.deepEqual(
    (await Promise.all([convert({ dpi: '72', format: 'webp' }), convert({ dpi: '72', format: 'tiff' })])).map((r) => r.status),
    [200, 200],
  )
  const before = treeRssBytes(pid)
  // A4 at 600 dpi: 4961 × 7016 pixels, 34.8 megapixels (100 MiB of RGB), each page's pixels copied out of MuPDF for libvips.
  const big: Record<string, string>[] = [
    { dpi: '600', format: 'webp' },
    { dpi: '600', format: 'tiff' },
    { dpi: '600', format: 'jpeg' },
    { dpi: '600', format: 'tiff', bitDepth: '1' },
    { dpi: '600', format: 'png' },
  ]
  const { value: answers, peak } = await peakWhile(pid, Promise.all(big.map(convert)))
  await sleep(5_000)
  const after = treeRssBytes(pid)
  t.diagnostic(
    `RSS before ${(before / MiB).toFixed(0)} MiB, peak ${(peak / MiB).toFixed(0)} MiB, 5 s after ${(after / MiB).toFixed(0)} MiB; ${answers.map((a, i) => `${big[i]!.format}${big[i]!.bitDepth ?? ''} ${a.status} ${(a.bytes / MiB).toFixed(1)} MiB`).join(', ')}`,
  )
  for (const a of answers) assert.equal(a.status, 200)
  assert.ok(peak - before < 2 * budgetMiB * MiB, `peak RSS ${(peak / MiB).toFixed(0)} MiB, from ${(before / MiB).toFixed(0)} MiB`)
  assert.ok(after - before < 400 * 1e6, `RSS 5 s after: ${(after / MiB).toFixed(0)} MiB, from ${(before / MiB).toFixed(0)} MiB`)
})

test('hostile PDFs compressed, split and read for text, two at once each, keep the process tree under 1.5 GB and give it back', {
  skip: SKIP_CORPUS,
  timeout: 300_000,
}, async (t) => {
  const { url, key, pid } = await conversionNode(t)
  await Promise.all(
    ['/converter/compress', '/converter/compress'].map(async (path) => (await upload(url, path, key, real('minimal-document.pdf'))).arrayBuffer()),
  )
  const before = treeRssBytes(pid)
  const random = randomImagePages(500)
  const huge = hugeImage()
  const jobs: [string, Buffer, Record<string, string>][] = [
    ['/converter/compress', random, { preset: 'screen' }],
    ['/converter/compress', huge, { preset: 'printer' }],
    ['/converter/split', random, { every: '1' }],
    ['/converter/extractText', random, { format: 'structured' }],
    ['/converter/flatten', huge, {}],
    ['/converter/compress', real('pdflatex-4-pages.pdf'), {}],
  ]
  const { value: answers, peak } = await peakWhile(
    pid,
    Promise.all(
      jobs.map(async ([path, pdf, fields], i) => {
        const res = await upload(url, path, key, pdf, fields)
        const body = Buffer.from(await res.arrayBuffer().catch(() => new ArrayBuffer(0)))
        return { i, path, status: res.status, body }
      }),
    ),
  )
  await sleep(10_000)
  const after = treeRssBytes(pid)
  t.diagnostic(`RSS before ${(before / MiB).toFixed(0)} MiB, peak ${(peak / MiB).toFixed(0)} MiB, 10 s after ${(after / MiB).toFixed(0)} MiB`)
  for (const a of answers) {
    t.diagnostic(`#${a.i} ${a.path} ${a.status} ${a.status === 200 ? `${a.body.length} bytes` : a.body.toString().slice(0, 200)}`)
    assert.ok(a.status === 200 || (a.status >= 400 && a.status < 500), `#${a.i} ${a.path}: ${a.status}`)
  }
  assert.equal(answers[5]!.status, 200, 'the small conversion beside the hostile ones succeeds')
  assert.ok(peak < 1500 * 1e6, `peak RSS ${(peak / MiB).toFixed(0)} MiB`)
  assert.ok(after - before < 400 * 1e6, `RSS 10 s after: ${(after / MiB).toFixed(0)} MiB, from ${(before / MiB).toFixed(0)} MiB`)
})

test('600-dpi uncompressed TIFF pages, cut at the output limit, answered whole, cancelled by the client and run as jobs, leave the node where it was', {
  timeout: 300_000,
}, async (t) => {
  // Jobs' results limited as the routes' answers are: a job of three such pages passes it.
  const { url, key, pid } = await conversionNode(t, { JOB_MAX_OUTPUT_BYTES: String(128 * MiB) })
  const text = textPages(500)
  const tiff = { format: 'tiff', compression: 'none', dpi: '600' }
  // Warm up: both workers loaded, as on a node that has served conversions.
  for (const status of await Promise.all([1, 2].map(async () => (await upload(url, IMAGE, key, textPages(1), { format: 'tiff' })).status)))
    assert.equal(status, 200)
  await sleep(6000) // workers that grew in the warm-up are replaced once idle 5 s
  const before = treeRssBytes(pid)
  const drain = async (res: Response) => {
    let bytes = 0
    try {
      for await (const chunk of res.body!) bytes += chunk.byteLength
      return { status: res.status, bytes, cut: false }
    } catch {
      return { status: res.status, bytes, cut: true }
    }
  }
  const run = async () => {
    const cut = []
    // 500 pages of 96 MiB each: past the 128 MiB limit at the second page, every time (a 422 before the answer, or an answer cut there).
    for (let i = 0; i < 8; i++) cut.push(await drain(await upload(url, IMAGE, key, text, tiff)))
    // Two at once, and a client that goes away after the first megabytes.
    await Promise.all([1, 2].map(async () => cut.push(await drain(await upload(url, IMAGE, key, text, tiff)))))
    const gone = await upload(url, IMAGE, key, text, tiff)
    const reader = gone.body!.getReader()
    await reader.read()
    await reader.cancel()
    // One page whole: 96 MiB answered, within the limit.
    const one = await upload(url, IMAGE, key, text, { ...tiff, pages: '7' })
    const whole = Buffer.from(await one.arrayBuffer())
    // And as jobs: a cut one and a whole one.
    const jobs = await Promise.all(
      [
        { ...tiff, pages: '1-3' },
        { ...tiff, pages: '2' },
      ].map(async (fields) => {
        const form = new FormData()
        form.append('operation', 'image')
        for (const [k, v] of Object.entries(fields)) form.append(k, v)
        form.append('pdfDocument', new Blob([new Uint8Array(text)], { type: 'application/pdf' }), 'text.pdf')
        return (await runJob({ url, key }, form)).view
      }),
    )
    return { cut, one: { status: one.status, whole }, jobs }
  }
  const { value, peak } = await peakWhile(pid, run())
  await sleep(10_000)
  const after = treeRssBytes(pid)
  t.diagnostic(`RSS before ${(before / MiB).toFixed(0)} MiB, peak ${(peak / MiB).toFixed(0)} MiB, 10 s after ${(after / MiB).toFixed(0)} MiB`)
  for (const c of value.cut) {
    if (c.status === 200) assert.ok(c.cut, 'a 200 over the limit is cut, never completed')
    else assert.equal(c.status, 422)
  }
  assert.equal(value.one.status, 200)
  const meta = await sharp(value.one.whole).metadata()
  assert.deepEqual([meta.format, meta.width, meta.height, meta.channels], ['tiff', 5100, 6600, 3])
  assert.ok(value.one.whole.byteLength > 5100 * 6600 * 3, 'uncompressed')
  assert.deepEqual(
    value.jobs.map((j) => [j.status, j.error?.code ?? null]),
    [
      ['failed', 'OUTPUT_TOO_LARGE'],
      ['succeeded', null],
    ],
  )
  assert.ok(after - before < 300 * MiB, `RSS 10 s after: ${(after / MiB).toFixed(0)} MiB, from ${(before / MiB).toFixed(0)} MiB (it kept every page before)`)
})
