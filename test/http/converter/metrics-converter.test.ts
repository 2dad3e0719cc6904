/**
 * Conversion metrics and log lines (issue 14), through real conversions on the real engines:
 * outcomes by route, pages, output bytes and engine time of those that completed, queue wait,
 * the queue and the workers as a scrape sees them, and worker replacements by reason. Each
 * conversion writes one line with its pages, engine time and worker; never the document's
 * name or password.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { startApp, type Running } from '../../support/helper.ts'
import { request as httpRequest } from 'node:http'
import { SKIP_CORPUS, real, runJob, unzip, upload } from '../../support/convert.ts'
import { textPages } from '../../support/hostile.ts'

const TOKEN = 'a-metrics-token-of-at-least-32-characters'
const IMAGE = '/converter/generateImage'
const PS = '/converter/generatePostscript'

function sample(text: string, name: string, labels: Record<string, string>): number {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !(Object.keys(labels).length === 0 && line.startsWith(`${name} `))) continue
    const inside = line.slice(name.length + 1, line.lastIndexOf('}'))
    if (Object.entries(labels).every(([k, v]) => inside.includes(`${k}="${v}"`))) return Number(line.slice(line.lastIndexOf(' ') + 1))
  }
  return NaN
}

const scrape = async (app: Running) => (await fetch(`${app.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).text()
const finished = (app: Running) => app.logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === 'conversion finished')

async function until(what: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !what(); i++) await new Promise((r) => setTimeout(r, 10))
}

test('completed and refused conversions: outcomes, pages, output bytes, engine time, a line each with pages, engine time and worker', {
  skip: SKIP_CORPUS,
}, async (t) => {
  const app = await startApp(t, { METRICS_TOKEN: TOKEN, CONVERTER_WORKERS: '1', WORKER_MAX_JOBS: '2' })
  let text = await scrape(app)
  assert.equal(sample(text, 'tessera_conversion_workers_configured', {}), 1)
  assert.equal(sample(text, 'tessera_conversion_queue_capacity', {}), 4, 'CONVERTER_QUEUE_PER_WORKER defaults to 4')
  assert.equal(sample(text, 'tessera_conversion_queue_depth', {}), 0)
  assert.equal(sample(text, 'tessera_conversions_total', { route: IMAGE, outcome: 'ok' }), 0, 'every outcome from the start')

  const zip = await upload(app.url, IMAGE, app.key, real('pdflatex-4-pages.pdf'), { dpi: '36', password: 'pw-probe-8181' }, 'name-probe-7272.pdf')
  assert.equal(zip.status, 200)
  const entries = unzip(Buffer.from(await zip.arrayBuffer()))
  const pngBytes = entries.reduce((n, e) => n + e.data.length, 0)
  const ps = await upload(app.url, PS, app.key, real('minimal-document.pdf'))
  assert.equal(ps.status, 200)
  const psBytes = (await ps.arrayBuffer()).byteLength
  // A PDF header and nothing of a PDF after it: past the upload's checks, refused by the engine.
  const refused = await upload(app.url, PS, app.key, Buffer.from(`%PDF-1.7\n${'garbage '.repeat(200)}`))
  assert.equal(refused.status, 422)
  const refusedCode = ((await refused.json()) as { code: string }[])[0]!.code
  await until(() => finished(app).length >= 3)

  text = await scrape(app)
  assert.equal(sample(text, 'tessera_conversions_total', { route: IMAGE, outcome: 'ok' }), 1)
  assert.equal(sample(text, 'tessera_conversions_total', { route: PS, outcome: 'ok' }), 1)
  assert.equal(sample(text, 'tessera_conversions_total', { route: PS, outcome: 'refused' }), 1)
  assert.equal(sample(text, 'tessera_conversion_pages_total', { route: IMAGE }), 4)
  assert.equal(sample(text, 'tessera_conversion_pages_total', { route: PS }), 1)
  assert.equal(sample(text, 'tessera_conversion_output_bytes_total', { route: IMAGE }), pngBytes, 'the PNGs, not the zip around them')
  assert.equal(sample(text, 'tessera_conversion_output_bytes_total', { route: PS }), psBytes)
  assert.equal(sample(text, 'tessera_conversion_engine_seconds_count', { route: IMAGE }), 1, 'engine time of completed conversions only')
  assert.ok(sample(text, 'tessera_conversion_engine_seconds_sum', { route: IMAGE }) > 0)
  assert.equal(sample(text, 'tessera_conversion_queue_wait_seconds_count', {}), 3)
  assert.equal(
    sample(text, 'tessera_conversion_worker_replacements_total', { reason: 'job count' }),
    1,
    'WORKER_MAX_JOBS=2: one replacement after the second job',
  )
  assert.equal(sample(text, 'tessera_conversion_worker_replacements_total', { reason: 'death' }), 0)
  assert.equal(sample(text, 'tessera_conversion_workers_alive', {}), 1)
  assert.equal(sample(text, 'tessera_conversion_workers_busy', {}), 0)

  const lines = finished(app)
  const [image, post, bad] = lines
  assert.deepEqual([image!.outcome, image!.pages, image!.pageCount, image!.outputBytes], ['ok', 4, 4, pngBytes])
  assert.deepEqual([post!.outcome, post!.pages, post!.outputBytes], ['ok', 1, psBytes])
  assert.deepEqual([bad!.outcome, bad!.code], ['refused', refusedCode])
  for (const l of lines) {
    assert.equal(typeof l.reqId, 'string', 'the line carries its request id')
    assert.equal(typeof l.worker, 'number')
    assert.ok(typeof l.engineMs === 'number' && l.engineMs >= 0)
    assert.ok(typeof l.queuedMs === 'number' && l.queuedMs >= 0)
  }
  assert.ok((image!.engineMs as number) > 0)
  assert.notEqual(post!.worker, bad!.worker, 'the worker was replaced after its second job')
  const all = app.logs.join('')
  for (const probe of ['name-probe-7272', 'pw-probe-8181']) assert.ok(!all.includes(probe), `the logs hold ${probe}`)
})

test('a full queue, a timeout: counted by outcome, the worker replaced for its reason, the wait measured', { skip: SKIP_CORPUS }, async (t) => {
  const app = await startApp(t, { METRICS_TOKEN: TOKEN, CONVERTER_WORKERS: '1', CONVERTER_QUEUE_PER_WORKER: '1' })
  const pdf = real('GeoTopo-komprimiert.pdf')
  const answers = await Promise.all(Array.from({ length: 4 }, () => upload(app.url, PS, app.key, pdf, { pages: '1-8' })))
  assert.deepEqual(answers.map((r) => r.status).sort(), [200, 200, 503, 503])
  await Promise.all(answers.map((r) => r.arrayBuffer()))
  await until(() => finished(app).length >= 2)
  let text = await scrape(app)
  assert.equal(sample(text, 'tessera_conversions_total', { route: PS, outcome: 'queue full' }), 2)
  assert.equal(sample(text, 'tessera_conversions_total', { route: PS, outcome: 'ok' }), 2)
  assert.equal(sample(text, 'tessera_conversion_queue_wait_seconds_count', {}), 2)
  // The second waited for the first: at least one wait above 1 ms.
  assert.ok(sample(text, 'tessera_conversion_queue_wait_seconds_bucket', { le: '0.001' }) < 2)

  const slow = await startApp(t, { METRICS_TOKEN: TOKEN, CONVERSION_TIMEOUT_MS: '300', CONVERTER_WORKERS: '1' })
  const timedOut = await upload(slow.url, PS, slow.key, pdf)
  assert.equal(timedOut.status, 422, 'CONVERSION_TIMEOUT')
  await timedOut.arrayBuffer()
  await until(() => finished(slow).length >= 1)
  text = await scrape(slow)
  assert.equal(sample(text, 'tessera_conversions_total', { route: PS, outcome: 'timeout' }), 1)
  assert.equal(sample(text, 'tessera_conversion_worker_replacements_total', { reason: 'timeout' }), 1)
  assert.ok(Number.isNaN(sample(text, 'tessera_conversion_engine_seconds_count', { route: PS })), 'no engine time for a conversion that did not complete')
  assert.equal(finished(slow)[0]!.outcome, 'timeout')
})

test('tessera_conversion_held_bytes: what the main thread holds of pages rises while a client reads slowly and is back to 0 after every kind of end', async (t) => {
  const app = await startApp(t, { METRICS_TOKEN: TOKEN, CONVERTER_WORKERS: '1', MAX_OUTPUT_BYTES: String(64 * 1024 * 1024), CLIENT_STALL_TIMEOUT_MS: '60000' })
  const held = async () => sample(await scrape(app), 'tessera_conversion_held_bytes', {})
  const settles = async (what: string) => {
    let value = NaN
    for (let i = 0; i < 300; i++) {
      value = await held()
      if (value === 0) return
      await new Promise((r) => setTimeout(r, 20))
    }
    assert.fail(`${what}: ${value} bytes still held`)
  }
  assert.equal(await held(), 0, 'nothing at the start')
  const pdf = textPages(30)

  // One page, answered whole; a zip of pages; PostScript; a job's one page and a job's zip.
  assert.equal((await (await upload(app.url, IMAGE, app.key, pdf, { pages: '3', dpi: '72' })).arrayBuffer()).byteLength > 0, true)
  await settles('a one-page answer')
  assert.equal(unzip(Buffer.from(await (await upload(app.url, IMAGE, app.key, pdf, { pages: '1-6', dpi: '72' })).arrayBuffer())).length, 6)
  await settles('a zip of pages')
  assert.equal((await upload(app.url, PS, app.key, pdf, { pages: '1-4' })).status, 200)
  await settles('PostScript')
  for (const pages of ['2', '1-3']) {
    const form = new FormData()
    form.append('pdfDocument', new Blob([new Uint8Array(pdf)], { type: 'application/pdf' }), 'held.pdf')
    form.append('operation', 'image')
    form.append('pages', pages)
    const { view, result } = await runJob(app, form)
    assert.equal(view.status, 'succeeded', JSON.stringify(view))
    await result!.arrayBuffer()
    await settles(`a job of pages ${pages}`)
  }

  // Cut at the output limit: 30 pages of 300-dpi uncompressed TIFF (25 MB each) pass 64 MiB after the answer began.
  const cut = await upload(app.url, IMAGE, app.key, pdf, { dpi: '300', format: 'tiff', compression: 'none' })
  await cut.arrayBuffer().catch(() => undefined)
  await settles('an answer cut at the output limit')

  // A client that reads the headers and then nothing: the pages wait for it on the main thread, counted; it goes, they are freed.
  const gone = await new Promise<() => void>((resolve, reject) => {
    const body = new FormData()
    body.append('pdfDocument', new Blob([new Uint8Array(pdf)], { type: 'application/pdf' }), 'slow.pdf')
    body.append('dpi', '72')
    body.append('pages', '1-20')
    body.append('format', 'tiff')
    body.append('compression', 'none')
    const encoded = new Response(body)
    void encoded.arrayBuffer().then((bytes) => {
      const req = httpRequest(new URL(app.url + IMAGE), {
        method: 'POST',
        headers: { 'x-api-key': app.key, 'content-type': encoded.headers.get('content-type')! },
      })
      req.on('response', (res) => {
        assert.equal(res.statusCode, 200)
        res.pause()
        resolve(() => req.destroy())
      })
      req.on('error', reject)
      req.end(Buffer.from(bytes))
    })
  })
  let peak = 0
  for (let i = 0; i < 200 && peak === 0; i++) {
    peak = await held()
    if (peak === 0) await new Promise((r) => setTimeout(r, 20))
  }
  assert.ok(peak > 0, 'pages waiting for a slow client are counted')
  gone()
  await settles('a client gone mid-answer')
})
