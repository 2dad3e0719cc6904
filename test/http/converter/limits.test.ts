import { test } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { codes, get, post, startApp } from '../../support/helper.ts'
import { SKIP_CORPUS, pngSize, real, unzip, upload } from '../../support/convert.ts'
import { jpxBomb } from '../../support/hostile.ts'

const IMAGE = '/converter/generateImage'

/** a0Page is a one-page PDF of A0 size (2384 x 3370 pt), written by hand. */
function a0Page(): Buffer {
  const objects = [
    '<< /Type /Catalog /Pages 2 0 R >>',
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 2384 3370] >>',
  ]
  let body = '%PDF-1.7\n'
  const offsets = objects.map((o, i) => {
    const at = body.length
    body += `${i + 1} 0 obj\n${o}\nendobj\n`
    return at
  })
  const xref = `xref\n0 4\n0000000000 65535 f \n${offsets.map((o) => `${String(o).padStart(10, '0')} 00000 n \n`).join('')}`
  return Buffer.from(`${body}${xref}trailer\n<< /Size 4 /Root 1 0 R >>\nstartxref\n${body.length}\n%%EOF\n`)
}

const PS = '/converter/generatePostscript'

test('413 for an upload over the limit, 415 for a body that is not multipart', { skip: SKIP_CORPUS }, async (t) => {
  const app = await startApp(t, { MAX_UPLOAD_BYTES: '4096' })
  const big = await upload(app.url, IMAGE, app.key, real('pdflatex-4-pages.pdf'))
  assert.equal(big.status, 413)
  const [problem] = (await big.json()) as { code: string; message: string }[]
  assert.equal(problem!.code, 'FILE_TOO_LARGE')
  assert.match(problem!.message, /4096 bytes/)
  const form = await post(app.url, IMAGE, app.key, { pdfDocument: '%PDF-1.4' })
  assert.equal(form.status, 415)
  assert.deepEqual(await codes(form), ['UNSUPPORTED_MEDIA_TYPE'])
  const plain = await fetch(app.url + PS, {
    method: 'POST',
    headers: { 'x-api-key': app.key, 'content-type': 'application/pdf' },
    body: real('minimal-document.pdf'),
  })
  assert.equal(plain.status, 415)
})

test('the field, the file and every option are checked at once', { skip: SKIP_CORPUS }, async (t) => {
  const app = await startApp(t)
  const pdf = real('minimal-document.pdf')
  const cases: [Buffer | null, Record<string, string>, string[], string?][] = [
    [null, {}, ['PDF_REQUIRED']],
    [pdf, {}, ['PDF_REQUIRED'], 'file'],
    [Buffer.from('hello, not a pdf'), {}, ['NOT_A_PDF']],
    [
      pdf,
      { dpi: '35', pages: '2-1', colorMode: 'cmyk', password: 'x'.repeat(257) },
      ['DPI_INVALID', 'PAGES_INVALID', 'COLOR_MODE_INVALID', 'PASSWORD_INVALID'],
    ],
    [pdf, { dpi: '601' }, ['DPI_INVALID']],
    [pdf, { dpi: '1e2' }, ['DPI_INVALID']],
  ]
  for (const [file, fields, expected, field] of cases) {
    const res = await upload(app.url, IMAGE, app.key, file, fields, 'x.pdf', field)
    assert.equal(res.status, 400, JSON.stringify(fields))
    assert.deepEqual(await codes(res), expected)
  }
  const wrongField = await upload(app.url, IMAGE, app.key, pdf, {}, 'x.pdf', 'file')
  assert.match(((await wrongField.json()) as { message: string }[])[0]!.message, /'pdfDocument'.*'file' instead/)
  const outOfRange = await upload(app.url, PS, app.key, real('pdflatex-4-pages.pdf'), { pages: '3-5' })
  assert.equal(outOfRange.status, 400)
  const [problem] = (await outOfRange.json()) as { code: string; message: string }[]
  assert.equal(problem!.code, 'PAGES_OUT_OF_RANGE')
  assert.match(problem!.message, /4 pages/)
})

test('422 for too many pages, too many pixels, a missing or wrong password, an unreadable file', { skip: SKIP_CORPUS }, async (t) => {
  const app = await startApp(t, { MAX_PAGES: '3', MAX_PAGE_MEGAPIXELS: '2' })
  const four = await upload(app.url, IMAGE, app.key, real('pdflatex-4-pages.pdf'), { dpi: '50' })
  assert.equal(four.status, 422)
  assert.match(((await four.json()) as { message: string }[])[0]!.message, /4 pages; the limit is 3/)

  const huge = await upload(app.url, IMAGE, app.key, real('minimal-document.pdf'), { dpi: '300' })
  assert.equal(huge.status, 422)
  const [pixels] = (await huge.json()) as { code: string; message: string }[]
  assert.equal(pixels!.code, 'PAGE_TOO_LARGE')
  // A4 is 595.28 x 841.89 pt: at 143 dpi, 1183 x 1673 pixels (1.98 MP) fit in 2 megapixels; at 144, 1191 x 1684 do not.
  assert.match(pixels!.message, /Use a dpi of 143 or less/)
  // An A0 page (2384 x 3370 pt) at 36 dpi is 1192 x 1685 pixels, 2.0 MP: the dpi that fits (35) is below the minimum.
  const a0 = await upload(app.url, IMAGE, app.key, a0Page(), { dpi: '36' })
  assert.equal(a0.status, 422)
  const [any] = (await a0.json()) as { code: string; message: string }[]
  assert.equal(any!.code, 'PAGE_TOO_LARGE_AT_ANY_DPI')
  assert.match(any!.message, /too large at any allowed dpi \(even at 36\)/)
  assert.doesNotMatch(any!.message, /Use a dpi/)
  assert.equal((await upload(app.url, IMAGE, app.key, real('minimal-document.pdf'), { dpi: '143' })).status, 200)
  assert.equal((await upload(app.url, IMAGE, app.key, real('minimal-document.pdf'), { dpi: '144' })).status, 422)

  for (const path of [IMAGE, PS]) {
    for (const fields of [{}, { password: 'wrong' }] as Record<string, string>[]) {
      const res = await upload(app.url, path, app.key, real('libreoffice-writer-password.pdf'), fields)
      assert.equal(res.status, 422)
      assert.deepEqual(await codes(res), ['PDF_PASSWORD_REQUIRED'])
    }
    const ok = await upload(app.url, path, app.key, real('libreoffice-writer-password.pdf'), { password: 'openpassword', dpi: '50' })
    assert.equal(ok.status, 200)
    await ok.arrayBuffer()
  }
  const broken = await upload(app.url, IMAGE, app.key, Buffer.from('%PDF-1.7\nnothing else'))
  assert.equal(broken.status, 422)
  assert.deepEqual(await codes(broken), ['PDF_UNREADABLE'])
})

test('a conversion over its time limit is stopped with 422, its worker replaced, and the next one works', { skip: SKIP_CORPUS }, async (t) => {
  const app = await startApp(t, { CONVERSION_TIMEOUT_MS: '300', CONVERTER_WORKERS: '1' })
  const slow = await upload(app.url, PS, app.key, real('GeoTopo-komprimiert.pdf'))
  assert.equal(slow.status, 422)
  const [problem] = (await slow.json()) as { code: string; message: string }[]
  assert.equal(problem!.code, 'CONVERSION_TIMEOUT')
  assert.match(problem!.message, /0\.3 seconds/)
  const next = await upload(app.url, IMAGE, app.key, real('minimal-document.pdf'), { dpi: '36' })
  assert.equal(next.status, 200)
  assert.ok(app.logs.some((l) => l.includes('conversion worker replaced') && l.includes('timed out')))
})

test('503 with Retry-After when the queue is full', { skip: SKIP_CORPUS }, async (t) => {
  const app = await startApp(t, { CONVERTER_WORKERS: '1', CONVERTER_QUEUE_PER_WORKER: '1' })
  const pdf = real('GeoTopo-komprimiert.pdf')
  const calls = Array.from({ length: 4 }, () => upload(app.url, PS, app.key, pdf, { pages: '1-8' }))
  const answers = await Promise.all(calls)
  const statuses = answers.map((r) => r.status).sort()
  assert.ok(statuses.includes(503), `statuses ${statuses}`)
  assert.ok(statuses.includes(200), `statuses ${statuses}`)
  assert.deepEqual(statuses, [200, 200, 503, 503], 'one runs, one waits, two are turned away')
  const full = answers.find((r) => r.status === 503)!
  assert.equal(full.headers.get('retry-after'), '5')
  assert.deepEqual(await codes(full), ['QUEUE_FULL'])
  await Promise.all(answers.filter((r) => r !== full).map((r) => r.arrayBuffer()))
})

test('eight simultaneous multi-page conversions complete correctly, and ping answers meanwhile', { skip: SKIP_CORPUS }, async (t) => {
  const app = await startApp(t)
  const pdf = real('pdflatex-4-pages.pdf')
  const pings: number[] = []
  let converting = true
  const pinger = (async () => {
    while (converting) {
      const start = performance.now()
      assert.equal((await get(app.url, '/totp/ping', app.key)).status, 200)
      pings.push(performance.now() - start)
      await new Promise((r) => setTimeout(r, 20))
    }
  })()
  const answers = await Promise.all(
    Array.from({ length: 8 }, (_, i) => upload(app.url, IMAGE, app.key, pdf, { dpi: '72', pages: i % 2 ? '1-4' : '2-4' }, `doc${i}.pdf`)),
  )
  converting = false
  await pinger
  for (const [i, res] of answers.entries()) {
    assert.equal(res.status, 200)
    assert.equal(res.headers.get('content-type'), 'application/zip')
    assert.equal(res.headers.get('content-disposition'), `attachment; filename="doc${i}.zip"`)
    const entries = unzip(Buffer.from(await res.arrayBuffer()))
    const expected = i % 2 ? [1, 2, 3, 4] : [2, 3, 4]
    assert.equal(res.headers.get('x-page-count'), String(expected.length))
    assert.deepEqual(
      entries.map((e) => e.name),
      expected.map((p) => `doc${i}-${p}.png`),
    )
    for (const e of entries) {
      assert.equal(e.method, 0, 'stored, not recompressed')
      assert.deepEqual(pngSize(e.data), { width: 596, height: 842 })
    }
  }
  assert.ok(pings.length > 0)
  t.diagnostic(`ping during conversions: ${pings.length} calls, max ${Math.max(...pings).toFixed(1)} ms`)
})

test('workers are recycled after their job limit and past their memory limit, and conversions go on', { skip: SKIP_CORPUS }, async (t) => {
  const jobs = await startApp(t, { WORKER_MAX_JOBS: '1', CONVERTER_WORKERS: '1' })
  for (let i = 0; i < 3; i++) assert.equal((await upload(jobs.url, IMAGE, jobs.key, real('minimal-document.pdf'), { dpi: '36' })).status, 200)
  assert.ok(jobs.logs.filter((l) => l.includes('recycled after 1 jobs')).length >= 2)

  // The lowest limit: Ghostscript's heap alone starts at 256 MiB and MuPDF's at 22, so a worker has about 90 MiB of room.
  const memory = await startApp(t, { WORKER_MAX_MEMORY_MB: '384', CONVERTER_WORKERS: '1' })
  const convert = async () => {
    const res = await upload(memory.url, PS, memory.key, real('pdflatex-4-pages.pdf'))
    assert.equal(res.status, 200)
    await res.arrayBuffer() // read to the end: PostScript streams, and an unread answer would hold the app's close up
  }
  for (let i = 0; i < 2; i++) await convert()
  // Four pages at 500 dpi fit (MuPDF's heap grows about 63 MiB for a page), and take the worker past half its room: it is replaced,
  // so that the next job has that room at least.
  const fits = await upload(memory.url, IMAGE, memory.key, real('pdflatex-4-pages.pdf'), { dpi: '500' })
  assert.equal(fits.status, 200)
  await fits.arrayBuffer()
  assert.ok(
    memory.logs.some((l) => /recycled at \d+ MiB of memory"/.test(l)),
    memory.logs.filter((l) => l.includes('replaced')).join('\n'),
  )
  // At 600 dpi a page does not fit: MuPDF is refused the memory, the job stopped, and the next job runs on a fresh worker.
  const over = await upload(memory.url, IMAGE, memory.key, real('pdflatex-4-pages.pdf'), { dpi: '600' })
  assert.equal(over.status, 422)
  assert.deepEqual(await codes(over), ['CONVERSION_MEMORY_EXCEEDED'])
  assert.ok(memory.logs.some((l) => l.includes('the job ran out of its memory')))
  await convert()
})

test('a worker whose job failed is checked too: one that grew is replaced, at the latest once idle', { skip: SKIP_CORPUS }, async (t) => {
  // With room enough, MuPDF grows to about 1 GB for a JPEG 2000 image of 60000 × 60000 pixels, then gives up on it: the engine fails, it is not refused memory.
  const app = await startApp(t, { WORKER_MAX_MEMORY_MB: '4096', CONVERTER_WORKERS: '1' })
  const failed = await upload(app.url, IMAGE, app.key, jpxBomb())
  assert.equal(failed.status, 422)
  assert.deepEqual(await codes(failed), ['CONVERSION_FAILED'])
  const replaced = () => app.logs.filter((l) => l.includes('conversion worker replaced') && l.includes('"reason":"grown"'))
  for (let waited = 0; replaced().length === 0 && waited < 5000; waited += 100) await sleep(100)
  assert.equal(replaced().length, 1, app.logs.filter((l) => l.includes('replaced')).join('\n'))
  // A job that grows the worker a little (a 600-dpi page: about 100 MiB of MuPDF's heap): kept for the next job, then replaced once idle.
  const grows = await upload(app.url, IMAGE, app.key, real('pdflatex-4-pages.pdf'), { dpi: '600' })
  assert.equal(grows.status, 200)
  await grows.arrayBuffer()
  await sleep(500)
  assert.equal(replaced().length, 1, 'kept while work may come')
  for (let waited = 0; replaced().length === 1 && waited < 10_000; waited += 100) await sleep(100)
  assert.match(replaced()[1] ?? '', /recycled at \d+ MiB of memory, idle/)
  const next = await upload(app.url, IMAGE, app.key, real('minimal-document.pdf'), { dpi: '72' })
  assert.equal(next.status, 200)
})
