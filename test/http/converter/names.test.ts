/**
 * The names of what the converter answers: each output has a file name of its own, never the
 * upload's (a client that saves it beside its input, as `curl -OJ` does, keeps both), safe in a
 * header and a file system; a split's parts are named by their pages, and its `ranges` survive
 * curl's `-F` (one field a part). And no output names a path of the machine that made it.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import * as mupdf from 'mupdf'
import { startApp, testClock } from '../../support/helper.ts'
import { runJob, unzip, upload } from '../../support/convert.ts'
import { filledForm } from '../../support/pdf-writer.ts'
import type { Lookup } from '../../../src/webhooks/address.ts'

/** report.pdf: eight pages, a line of text each. */
const REPORT = filledForm(Array.from({ length: 8 }, (_, i) => ({ lines: [{ text: `Page ${i + 1}`, x: 72, y: 700 }], fields: [] })))
const COVER = filledForm([{ lines: [{ text: 'Cover', x: 72, y: 700 }], fields: [] }])
const FORM = filledForm([{ lines: [{ text: 'Name:', x: 72, y: 700 }], fields: [{ name: 'name', value: 'Jane', x: 140, y: 696 }] }])

const pagesOf = (pdf: Uint8Array) => mupdf.Document.openDocument(pdf, 'application/pdf').countPages()

/** send: a form of `files` (name and bytes) and fields, each value of a list sent as a field of its own, in order. */
function send(url: string, key: string, path: string, files: [string, Buffer][], fields: Record<string, string | string[]> = {}) {
  const form = new FormData()
  for (const [name, bytes] of files) form.append('pdfDocument', new Blob([new Uint8Array(bytes)], { type: 'application/pdf' }), name)
  for (const [name, value] of Object.entries(fields)) for (const v of [value].flat()) form.append(name, v)
  return fetch(url + path, { method: 'POST', headers: { 'x-api-key': key }, body: form })
}

async function answer(res: Response) {
  const body = Buffer.from(await res.arrayBuffer())
  assert.equal(res.status, 200, body.toString().slice(0, 300))
  return { body, disposition: res.headers.get('content-disposition'), type: res.headers.get('content-type') }
}

test('every output is named apart from its upload: merged, rotated, flattened, compressed, a split by its pages; images, PostScript, text', async (t) => {
  const app = await startApp(t)
  const cases: [string, [string, Buffer][], Record<string, string | string[]>, string, string][] = [
    [
      '/converter/merge',
      [
        ['report.pdf', REPORT],
        ['cover.pdf', COVER],
      ],
      {},
      'report-merged.pdf',
      'application/pdf',
    ],
    ['/converter/rotate', [['report.pdf', REPORT]], { angle: '90', pages: '2,4' }, 'report-rotated.pdf', 'application/pdf'],
    ['/converter/flatten', [['report.pdf', FORM]], {}, 'report-flattened.pdf', 'application/pdf'],
    ['/converter/compress', [['report.pdf', REPORT]], {}, 'report-compressed.pdf', 'application/pdf'],
    ['/converter/split', [['report.pdf', REPORT]], { ranges: '1-3' }, 'report-pages-1-3.pdf', 'application/pdf'],
    ['/converter/split', [['report.pdf', REPORT]], { every: '8' }, 'report-pages-1-8.pdf', 'application/pdf'],
    ['/converter/split', [['report.pdf', REPORT]], { ranges: '2,4-5' }, 'report-pages-2_4-5.pdf', 'application/pdf'],
    ['/converter/generateImage', [['report.pdf', REPORT]], { pages: '1' }, 'report-1.png', 'image/png'],
    ['/converter/generateImage', [['report.pdf', COVER]], {}, 'report.png', 'image/png'],
    ['/converter/generateImage', [['report.pdf', REPORT]], { pages: '1-2' }, 'report.zip', 'application/zip'],
    ['/converter/generateImage', [['report.pdf', REPORT]], { pages: '1-2', format: 'tiff' }, 'report.tif', 'image/tiff'],
    ['/converter/generatePostscript', [['report.pdf', REPORT]], {}, 'report.ps', 'application/postscript'],
    ['/converter/extractText', [['report.pdf', REPORT]], {}, 'report.json', 'application/json; charset=utf-8'],
    ['/converter/extractText', [['report.pdf', REPORT]], { format: 'structured' }, 'report.json', 'application/json; charset=utf-8'],
    ['/converter/extractText', [['report.pdf', REPORT]], { format: 'text' }, 'report.txt', 'text/plain; charset=utf-8'],
  ]
  for (const [path, files, fields, name, type] of cases) {
    const got = await answer(await send(app.url, app.key, path, files, fields))
    assert.equal(got.disposition, `attachment; filename="${name}"`, `${path} ${JSON.stringify(fields)}`)
    assert.equal(got.type, type, path)
  }
})

test('a split by ranges, one field a part (what survives curl -F) or semicolons in one, is a zip named for the split, its PDFs by their pages', async (t) => {
  const app = await startApp(t)
  const expected = [
    ['report-pages-1-3.pdf', 3],
    ['report-pages-4-6.pdf', 3],
    ['report-pages-7-8.pdf', 2],
  ]
  for (const ranges of [['1-3', '4-6', '7-'], ['1-3;4-6', '7-'], '1-3;4-6;7-']) {
    const got = await answer(await send(app.url, app.key, '/converter/split', [['report.pdf', REPORT]], { ranges }))
    assert.equal(got.disposition, 'attachment; filename="report-split.zip"', JSON.stringify(ranges))
    assert.deepEqual(
      unzip(got.body).map((e) => [e.name, pagesOf(e.data)]),
      expected,
      JSON.stringify(ranges),
    )
  }
  const every = await answer(await send(app.url, app.key, '/converter/split', [['report.pdf', REPORT]], { every: '3', pages: '2-' }))
  assert.deepEqual(
    unzip(every.body).map((e) => e.name),
    ['report-pages-2-4.pdf', 'report-pages-5-7.pdf', 'report-pages-8.pdf'],
  )
  // An empty part among the fields is refused, as an empty one between semicolons is.
  const empty = await send(app.url, app.key, '/converter/split', [['report.pdf', REPORT]], { ranges: ['1-3', ''] })
  assert.equal(empty.status, 400)
  assert.deepEqual(
    ((await empty.json()) as { code: string }[]).map((p) => p.code),
    ['SPLIT_RANGES_INVALID'],
  )
})

test('a name is made safe: no path, quote, control or bidi character; a name that is not ASCII goes as filename* beside an ASCII one', async (t) => {
  const app = await startApp(t)
  // The part's header as a client writes it (FormData would escape a quote as %22), the name's bytes UTF-8.
  const named = async (filename: string) => {
    const head = `--B\r\ncontent-disposition: form-data; name="angle"\r\n\r\n90\r\n--B\r\ncontent-disposition: form-data; name="pdfDocument"; filename="${filename}"\r\n\r\n`
    const body = Buffer.concat([Buffer.from(head), REPORT, Buffer.from('\r\n--B--\r\n')])
    const headers = { 'x-api-key': app.key, 'content-type': 'multipart/form-data; boundary=B' }
    return (await answer(await fetch(`${app.url}/converter/rotate`, { method: 'POST', headers, body }))).disposition
  }
  assert.equal(await named('../../etc/Report \\"Q3\\".pdf'), 'attachment; filename="Report_Q3-rotated.pdf"')
  assert.equal(await named('a\u0007b\u202ecod.exe.pdf'), 'attachment; filename="a_b_cod.exe-rotated.pdf"')
  assert.equal(await named('..pdf'), 'attachment; filename="document-rotated.pdf"')
  assert.equal(await named('C:\\Users\\me\\.hidden.pdf'), 'attachment; filename="hidden-rotated.pdf"')
  assert.equal(await named('Résumé 2026.pdf'), `attachment; filename="Resume_2026-rotated.pdf"; filename*=UTF-8''R%C3%A9sum%C3%A9_2026-rotated.pdf`)
  assert.equal(await named('報告.pdf'), `attachment; filename="__-rotated.pdf"; filename*=UTF-8''%E5%A0%B1%E5%91%8A-rotated.pdf`)
  // The zip's entries carry the same name (UTF-8, as the zip's flag says).
  const zip = await answer(await upload(app.url, '/converter/split', app.key, REPORT, { every: '4' }, 'Résumé.pdf'))
  assert.deepEqual(
    unzip(zip.body).map((e) => e.name),
    ['Résumé-pages-1-4.pdf', 'Résumé-pages-5-8.pdf'],
  )
})

test("a job's result has the route's name; a JSON job takes ranges as a list", async (t) => {
  const lookup: Lookup = async () => [{ address: '93.184.215.14', family: 4 }]
  const app = await startApp(t, {}, testClock(), { lookup })
  const form = new FormData()
  form.append('operation', 'split')
  for (const range of ['1-3', '4-']) form.append('ranges', range)
  form.append('pdfDocument', new Blob([new Uint8Array(REPORT)], { type: 'application/pdf' }), 'report.pdf')
  const { view, result } = await runJob(app, form)
  assert.equal(view.result?.name, 'report-split.zip')
  const zip = await answer(result!)
  assert.equal(zip.disposition, 'attachment; filename="report-split.zip"')
  assert.deepEqual(
    unzip(zip.body).map((e) => [e.name, pagesOf(e.data)]),
    [
      ['report-pages-1-3.pdf', 3],
      ['report-pages-4-8.pdf', 5],
    ],
  )
  const rotated = new FormData()
  rotated.append('operation', 'compress')
  rotated.append('pdfDocument', new Blob([new Uint8Array(REPORT)], { type: 'application/pdf' }), 'report.pdf')
  assert.equal((await runJob(app, rotated)).view.result?.name, 'report-compressed.pdf')

  const submitted = await fetch(`${app.url}/converter/jobs`, {
    method: 'POST',
    headers: { 'x-api-key': app.key, 'content-type': 'application/json' },
    body: JSON.stringify({ operation: 'split', ranges: ['1-3', '4-6', '7-'], sourceUrl: 'https://files.example.com/report.pdf' }),
  })
  assert.equal(submitted.status, 202, await submitted.clone().text())
  const { jobID } = (await submitted.json()) as { jobID: string }
  const job = (await (await fetch(`${app.url}/converter/jobs/${jobID}`, { headers: { 'x-api-key': app.key } })).json()) as {
    options: { edit?: { ranges?: string } }
  }
  assert.equal(job.options.edit?.ranges, '1-3;4-6;7-')
  const bad = await fetch(`${app.url}/converter/jobs`, {
    method: 'POST',
    headers: { 'x-api-key': app.key, 'content-type': 'application/json' },
    body: JSON.stringify({ operation: 'split', ranges: ['1-3', 4], sourceUrl: 'https://files.example.com/report.pdf' }),
  })
  assert.equal(bad.status, 400)
  assert.deepEqual(
    ((await bad.json()) as { code: string }[]).map((p) => p.code),
    ['SPLIT_RANGES_INVALID'],
  )
})

test('no output names a path of the machine: PostScript says it was made by `gs`, not by our worker script', async (t) => {
  const app = await startApp(t)
  const local = [process.cwd(), import.meta.dirname, 'worker.ts', '.ts ', 'node_modules', '/tmp/']
  for (const [path, fields] of [
    ['/converter/generatePostscript', {}],
    ['/converter/generatePostscript', { password: 'not-needed' }],
    ['/converter/compress', {}],
    ['/converter/merge', {}],
  ] as const) {
    const files: [string, Buffer][] =
      path === '/converter/merge'
        ? [
            ['report.pdf', REPORT],
            ['cover.pdf', COVER],
          ]
        : [['report.pdf', REPORT]]
    const { body } = await answer(await send(app.url, app.key, path, files, fields))
    const text = body.toString('latin1')
    for (const part of local) assert.ok(!text.includes(part), `${path} names ${part}: ${/.*Invocation.*/.exec(text)?.[0] ?? ''}`)
    if (path === '/converter/generatePostscript') assert.match(text, /^%%Invocation: gs -dSAFER /m)
  }
})
