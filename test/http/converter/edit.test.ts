/**
 * The page operations (merge, split, rotate, flatten) and compress, through HTTP: what comes
 * back is a PDF (or a zip of them) whose pages draw as the originals' did, checked with MuPDF
 * and, where installed, `qpdf --check`.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as mupdf from 'mupdf'
import { codes, startApp } from '../../support/helper.ts'
import { SKIP_CORPUS, real, runJob, unzip, upload } from '../../support/convert.ts'
import { randomImagePages } from '../../support/hostile.ts'

const FOUR = 'pdflatex-4-pages.pdf'
const FORM = 'libreoffice-form.pdf'
const LOCKED = 'libreoffice-writer-password.pdf'
const HAS_QPDF = spawnSync('qpdf', ['--version']).status === 0

function open(pdf: Uint8Array, password?: string): mupdf.PDFDocument {
  const doc = mupdf.Document.openDocument(pdf, 'application/pdf') as mupdf.PDFDocument
  if (password !== undefined) doc.authenticatePassword(password)
  return doc
}

/** pixels: a page drawn at 36 dpi, as bytes to compare. */
function pixels(doc: mupdf.Document, index: number): string {
  const pixmap = doc.loadPage(index).toPixmap(mupdf.Matrix.scale(0.5, 0.5), mupdf.ColorSpace.DeviceRGB, false, true)
  return Buffer.from(pixmap.getPixels()).toString('base64')
}

/** qpdfCheck: `qpdf --check`'s exit code (0: clean), or 0 where qpdf is not installed. */
function qpdfCheck(pdf: Uint8Array): number {
  if (!HAS_QPDF) return 0
  const dir = mkdtempSync(join(tmpdir(), 'tessera-qpdf-'))
  try {
    writeFileSync(join(dir, 'a.pdf'), pdf)
    return spawnSync('qpdf', ['--check', join(dir, 'a.pdf')]).status ?? -1
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

function documents(files: readonly string[], fields: Record<string, readonly string[]> = {}): FormData {
  const form = new FormData()
  for (const file of files) form.append('pdfDocument', new Blob([new Uint8Array(real(file))], { type: 'application/pdf' }), file)
  for (const [k, values] of Object.entries(fields)) for (const v of values) form.append(k, v)
  return form
}

async function pdfOf(res: Response): Promise<Buffer> {
  const body = Buffer.from(await res.arrayBuffer())
  assert.equal(res.status, 200, body.toString().slice(0, 300))
  return body
}

test('merge: the pages of each document, in order, drawn as before, with their forms; one password per document', { skip: SKIP_CORPUS }, async (t) => {
  const app = await startApp(t)
  const form = documents([FOUR, FORM, LOCKED], { pages: ['3-4', '', '1'], password: ['', '', 'openpassword'] })
  const res = await fetch(`${app.url}/converter/merge`, { method: 'POST', headers: { 'x-api-key': app.key }, body: form })
  const merged = await pdfOf(res)
  assert.equal(res.headers.get('content-type'), 'application/pdf')
  assert.equal(res.headers.get('content-disposition'), 'attachment; filename="pdflatex-4-pages-merged.pdf"')
  assert.equal(res.headers.get('x-page-count'), '4')
  assert.equal(qpdfCheck(merged), 0, 'qpdf --check is clean')
  const out = open(merged)
  assert.equal(out.countPages(), 4)
  assert.equal(out.needsPassword(), false, 'the merge is not encrypted')
  const sources: [mupdf.Document, number][] = [
    [open(real(FOUR)), 2],
    [open(real(FOUR)), 3],
    [open(real(FORM)), 0],
    [open(real(LOCKED), 'openpassword'), 0],
  ]
  for (const [i, [doc, page]] of sources.entries()) assert.equal(pixels(out, i), pixels(doc, page), `page ${i + 1} draws as its source`)
  const fields = out.getTrailer().get('Root', 'AcroForm', 'Fields')
  assert.ok(fields.isArray() && fields.length > 0, "the form's fields came along")

  const refused = async (body: FormData) => codes(await fetch(`${app.url}/converter/merge`, { method: 'POST', headers: { 'x-api-key': app.key }, body }))
  assert.deepEqual(await refused(documents([FOUR])), ['MERGE_DOCUMENTS_REQUIRED'])
  assert.deepEqual(await refused(documents(Array.from({ length: 21 }, () => FOUR))), ['MERGE_DOCUMENTS_REQUIRED'], 'a 21st document is refused, not dropped')
  assert.deepEqual(await refused(documents([FOUR, FORM], { pages: ['1', '1', '1'] })), ['MERGE_FIELDS_MISMATCH'])
  assert.deepEqual(await refused(documents([FOUR, FORM], { pages: ['1', '5'] })), ['MERGE_DOCUMENT_REFUSED'])
  assert.deepEqual(await refused(documents([FOUR, FORM], { password: ['', 'x'.repeat(257)], pages: ['1-', 'x'] })), ['PAGES_INVALID', 'PASSWORD_INVALID'])
  assert.deepEqual(await refused(documents([FOUR, LOCKED])), ['MERGE_DOCUMENT_REFUSED'])
  const bad = new FormData()
  bad.append('pdfDocument', new Blob([new Uint8Array(real(FOUR))]), 'a.pdf')
  bad.append('pdfDocument', new Blob(['not a pdf']), 'b.pdf')
  const res2 = await fetch(`${app.url}/converter/merge`, { method: 'POST', headers: { 'x-api-key': app.key }, body: bad })
  const [problem] = (await res2.json()) as { code: string; message: string }[]
  assert.deepEqual([res2.status, problem!.message], [422, 'Document 2 of the merge is not a PDF (it has no %PDF- header).'])
})

test('split: by ranges or every N pages, a zip of PDFs whose pages draw as the original', { skip: SKIP_CORPUS }, async (t) => {
  const app = await startApp(t)
  const source = open(real(FOUR))
  const every = await upload(app.url, '/converter/split', app.key, real(FOUR), { every: '1' }, 'Report.pdf')
  const entries = unzip(await pdfOf(every))
  assert.equal(every.headers.get('content-type'), 'application/zip')
  assert.deepEqual(
    entries.map((e) => e.name),
    ['Report-pages-1.pdf', 'Report-pages-2.pdf', 'Report-pages-3.pdf', 'Report-pages-4.pdf'],
  )
  for (const [i, entry] of entries.entries()) {
    const part = open(entry.data)
    assert.equal(part.countPages(), 1)
    assert.equal(pixels(part, 0), pixels(source, i))
    assert.equal(qpdfCheck(entry.data), 0)
  }
  const ranges = unzip(await pdfOf(await upload(app.url, '/converter/split', app.key, real(FOUR), { ranges: '1-2;4' })))
  assert.deepEqual(
    ranges.map((e) => open(e.data).countPages()),
    [2, 1],
  )
  assert.equal(pixels(open(ranges[1]!.data), 0), pixels(source, 3))
  // Every two of the pages chosen; one part alone is a PDF, not a zip.
  const two = await upload(app.url, '/converter/split', app.key, real(FOUR), { every: '2', pages: '2-3' })
  assert.equal(two.headers.get('content-type'), 'application/pdf')
  assert.equal(open(await pdfOf(two)).countPages(), 2)
  const refused = async (fields: Record<string, string>) => codes(await upload(app.url, '/converter/split', app.key, real(FOUR), fields))
  assert.deepEqual(await refused({}), ['SPLIT_PARTS_REQUIRED'])
  assert.deepEqual(await refused({ every: '1', ranges: '1' }), ['SPLIT_PARTS_REQUIRED'])
  assert.deepEqual(await refused({ every: '0' }), ['SPLIT_EVERY_INVALID'])
  assert.deepEqual(await refused({ ranges: '1;;2' }), ['SPLIT_RANGES_INVALID'])
  assert.deepEqual(await refused({ ranges: '1;9' }), ['PAGES_OUT_OF_RANGE'])
})

test('rotate turns the chosen pages by quarter turns; flatten leaves no form and draws as before', { skip: SKIP_CORPUS }, async (t) => {
  const app = await startApp(t)
  const turned = open(await pdfOf(await upload(app.url, '/converter/rotate', app.key, real(FOUR), { angle: '-90', pages: '2,4' })))
  assert.deepEqual(
    [0, 1, 2, 3].map((i) => turned.loadPage(i).getObject().get('Rotate').valueOf() ?? 0),
    [0, 270, 0, 270],
  )
  const rotated = await upload(app.url, '/converter/rotate', app.key, real('habibi-rotated.pdf'), { angle: '180' })
  const habibi = open(await pdfOf(rotated))
  const before = open(real('habibi-rotated.pdf'))
  for (let i = 0; i < habibi.countPages(); i++) {
    const was = Number(before.loadPage(i).getObject().getInheritable('Rotate').valueOf() ?? 0)
    assert.equal(Number(habibi.loadPage(i).getObject().getInheritable('Rotate').valueOf()), (was + 180) % 360)
  }
  assert.deepEqual(await codes(await upload(app.url, '/converter/rotate', app.key, real(FOUR), { angle: '45' })), ['ANGLE_INVALID'])
  assert.deepEqual(await codes(await upload(app.url, '/converter/rotate', app.key, real(FOUR))), ['ANGLE_INVALID'])

  const flat = await pdfOf(await upload(app.url, '/converter/flatten', app.key, real(FORM)))
  const doc = open(flat)
  const fields = doc.getTrailer().get('Root', 'AcroForm', 'Fields')
  assert.ok(!fields.isArray() || fields.length === 0, 'no form left')
  assert.equal((doc.loadPage(0) as mupdf.PDFPage).getWidgets().length, 0, 'no widget left')
  assert.equal(pixels(doc, 0), pixels(open(real(FORM)), 0), 'the filled-in values are drawn as before')
  assert.equal(qpdfCheck(flat), 0)
  assert.deepEqual(await codes(await upload(app.url, '/converter/flatten', app.key, real(FORM), { pages: '1' })), ['OPTION_NOT_TAKEN'])
  const open2 = open(await pdfOf(await upload(app.url, '/converter/flatten', app.key, real(LOCKED), { password: 'openpassword' })))
  assert.equal(open2.needsPassword(), false, 'a flattened encrypted document comes back open')
})

test('compress: smaller, with both sizes in headers; never larger than the upload; presets checked', { skip: SKIP_CORPUS }, async (t) => {
  const app = await startApp(t)
  const original = real('base64image.pdf')
  const res = await upload(app.url, '/converter/compress', app.key, original, { preset: 'screen' })
  const small = await pdfOf(res)
  assert.equal(res.headers.get('x-size-before'), String(original.length))
  assert.equal(res.headers.get('x-size-after'), String(small.length))
  assert.equal(res.headers.get('x-compressed'), 'true')
  assert.ok(small.length < original.length / 10, `${original.length} -> ${small.length} bytes`)
  assert.equal(open(small).countPages(), 1)
  // cmyk-image.pdf comes out larger from pdfwrite at every preset: the upload itself is the answer.
  const kept = await upload(app.url, '/converter/compress', app.key, real('cmyk-image.pdf'), { preset: 'ebook' })
  const body = await pdfOf(kept)
  assert.equal(kept.headers.get('x-compressed'), 'false')
  assert.ok(body.equals(real('cmyk-image.pdf')), 'the upload, byte for byte')
  // One image on 200 pages: pdfwrite writes it again for each page, far past the upload, and is stopped at twice its size (4 MiB at least).
  const repeated = randomImagePages(200)
  const stopped = await upload(app.url, '/converter/compress', app.key, repeated, { preset: 'screen' })
  const same = await pdfOf(stopped)
  assert.deepEqual([stopped.headers.get('x-compressed'), same.equals(repeated)], ['false', true])
  assert.deepEqual(await codes(await upload(app.url, '/converter/compress', app.key, original, { preset: 'tiny', pages: '1' })), [
    'OPTION_NOT_TAKEN',
    'PRESET_INVALID',
  ])
  assert.deepEqual(await codes(await upload(app.url, '/converter/compress', app.key, real(LOCKED))), ['PDF_PASSWORD_REQUIRED'])
  const gray = await pdfOf(await upload(app.url, '/converter/compress', app.key, real('pdflatex-image.pdf'), { preset: '/printer', colorMode: 'gray' }))
  assert.ok(gray.length > 0)
})

test("split, rotate, flatten and compress jobs make the routes' answers: byte for byte, or else (compress, and MuPDF's rewrites now and then) page for page", {
  skip: SKIP_CORPUS,
}, async (t) => {
  const app = await startApp(t)
  for (const [operation, fields, file] of [
    ['split', { ranges: '1-2;4' }, FOUR],
    ['split', { every: '3', pages: '1-3' }, FOUR],
    ['rotate', { angle: '270', pages: '2' }, FOUR],
    ['flatten', {}, FOUR],
    ['compress', { preset: 'screen' }, FOUR],
    // pdfwrite's file would be larger: the document itself is the result.
    ['compress', { preset: 'ebook' }, 'cmyk-image.pdf'],
  ] as const) {
    const form = documents([file], { operation: [operation], ...Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, [v]])) })
    const { view, result: answer } = await runJob(app, form)
    assert.equal(view.status, 'succeeded', JSON.stringify(view))
    const result = answer!
    const sync = await upload(app.url, `/converter/${operation}`, app.key, real(file), fields, file)
    assert.equal(result.headers.get('content-type'), sync.headers.get('content-type'), operation)
    assert.equal(result.headers.get('x-page-count'), sync.headers.get('x-page-count'), operation)
    // A file written anew gets a new second /ID each time, as the PDF specification asks, and Ghostscript's its dates and both IDs:
    // the rest is the same, byte for byte (where the dates are in the open).
    const sameId = (bytes: ArrayBuffer) =>
      Buffer.from(
        Buffer.from(bytes)
          .toString('latin1')
          .replace(/\/ID\s*\[\s*<[0-9A-Fa-f]+>\s*<[0-9A-Fa-f]+>\s*\]/g, '/ID[]')
          .replace(/\(D:[0-9+\-Z']+\)/g, '(D:)'),
        'latin1',
      )
    const [a, b] = [sameId(await result.arrayBuffer()), sameId(await sync.arrayBuffer())]
    if (operation !== 'split' && !a.equals(b)) {
      // pdfwrite puts its dates in a compressed object stream, where they cannot be set aside; and a file MuPDF writes anew now and then
      // differs in bytes that are neither (a flattened one once in four runs, a rotated one once in a CI run; not yet explained): then the
      // same pages, drawn the same. How often it happens is logged, so that the cause can be looked for.
      if (operation !== 'compress')
        t.diagnostic(`${operation}: the job's file and the route's differ in bytes (${a.length} and ${b.length}); compared page for page`)
      if (operation === 'compress') assert.ok(Math.abs(a.length - b.length) <= 16, `compress: ${a.length} and ${b.length} bytes`)
      const [x, y] = [open(a), open(b)]
      assert.equal(x.countPages(), y.countPages())
      for (let i = 0; i < x.countPages(); i++) assert.equal(pixels(x, i), pixels(y, i), `${operation}: page ${i + 1}`)
    } else assert.ok(a.equals(b), `${operation} ${JSON.stringify(fields)}: the job's result is the route's answer`)
  }
  const bad = documents([FOUR], { operation: ['rotate'], angle: ['12'] })
  assert.deepEqual(await codes(await fetch(`${app.url}/converter/jobs`, { method: 'POST', headers: { 'x-api-key': app.key }, body: bad })), ['ANGLE_INVALID'])
})

test("a merge job keeps its documents in order, each with its pages and password, and makes the route's merge", { skip: SKIP_CORPUS }, async (t) => {
  const app = await startApp(t)
  const fields = { pages: ['3-4', '', '1'], password: ['', '', 'openpassword'] }
  const form = documents([FOUR, FORM, LOCKED], { operation: ['merge'], ...fields })
  const { view: done, result: answer } = await runJob(app, form)
  assert.equal(done.status, 'succeeded', JSON.stringify(done))
  assert.deepEqual([done.options.pages, done.options.merge], [null, { pages: ['3-4', null, '1'] }])
  assert.equal(done.result!.pages, 4)
  const result = answer!
  const merged = open(Buffer.from(await result.arrayBuffer()))
  const sync = open(
    await pdfOf(
      await fetch(`${app.url}/converter/merge`, { method: 'POST', headers: { 'x-api-key': app.key }, body: documents([FOUR, FORM, LOCKED], fields) }),
    ),
  )
  assert.equal(merged.countPages(), 4)
  for (let i = 0; i < 4; i++) assert.equal(pixels(merged, i), pixels(sync, i), `page ${i + 1}`)

  const submit = async (files: string[], extra: Record<string, string[]>) =>
    codes(await fetch(`${app.url}/converter/jobs`, { method: 'POST', headers: { 'x-api-key': app.key }, body: documents(files, extra) }))
  assert.deepEqual(await submit([FOUR], { operation: ['merge'] }), ['MERGE_DOCUMENTS_REQUIRED'])
  assert.deepEqual(
    await submit(
      Array.from({ length: 21 }, () => FOUR),
      { operation: ['merge'] },
    ),
    ['MERGE_DOCUMENTS_REQUIRED'],
  )
  assert.deepEqual(await submit([FOUR, FORM], { operation: ['merge'], pages: ['1', '1', '1'] }), ['MERGE_FIELDS_MISMATCH'])
  assert.deepEqual(await submit([FOUR, FORM], { operation: ['image'] }), ['OPTION_NOT_TAKEN'])
})
