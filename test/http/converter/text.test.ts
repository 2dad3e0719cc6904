/**
 * POST /converter/extractText: each page's text as JSON, plain text with form feeds, or
 * structured (blocks, lines, words with boxes and fonts), page-parallel and in page order; the
 * same as a `text` job.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { codes, startApp } from '../../support/helper.ts'
import { SKIP_CORPUS, real, runJob, upload } from '../../support/convert.ts'

const TEXT = '/converter/extractText'
const FOUR = 'pdflatex-4-pages.pdf'

interface Word {
  text: string
  bbox: number[]
  font: string
  size: number
}
interface Page {
  page: number
  width: number
  height: number
  hasText: boolean
  text?: string
  blocks?: { bbox: number[]; lines: { bbox: number[]; wmode: number; text: string; words: Word[] }[] }[]
}

async function extract(app: { url: string; key: string }, file: string, fields: Record<string, string> = {}) {
  const res = await upload(app.url, TEXT, app.key, real(file), fields)
  const body = await res.text()
  assert.equal(res.status, 200, body.slice(0, 300))
  return { res, body }
}

const words = (text: string) => text.split(/\s+/u).filter((w) => w !== '')

test('the three forms of a text: JSON pages, plain text with form feeds, and structured words, all the same text', { skip: SKIP_CORPUS }, async (t) => {
  const app = await startApp(t)
  const json = await extract(app, FOUR)
  assert.equal(json.res.headers.get('content-type'), 'application/json; charset=utf-8')
  assert.equal(json.res.headers.get('x-page-count'), '4')
  const pages = JSON.parse(json.body) as Page[]
  assert.deepEqual(
    pages.map((p) => p.page),
    [1, 2, 3, 4],
  )
  for (const page of pages) {
    assert.equal(page.hasText, true)
    assert.deepEqual([page.width, page.height], [595.28, 841.89])
  }
  assert.match(pages[0]!.text!, /^Hello, here is some text without a meaning\. This text should show what a printed text\n/)

  const plain = await extract(app, FOUR, { format: 'text' })
  assert.equal(plain.res.headers.get('content-type'), 'text/plain; charset=utf-8')
  assert.ok(plain.body.endsWith('\f'), 'each page ends with a form feed, as pdftotext writes it')
  assert.deepEqual(
    plain.body.split('\f').slice(0, -1),
    pages.map((p) => p.text),
  )
  // A client that asks for text/plain gets it without the field.
  const negotiated = await fetch(app.url + TEXT, {
    method: 'POST',
    headers: { 'x-api-key': app.key, accept: 'text/plain' },
    body: form(FOUR, { pages: '2-3' }),
  })
  assert.equal(negotiated.headers.get('content-type'), 'text/plain; charset=utf-8')
  assert.equal(await negotiated.text(), `${pages[1]!.text}\f${pages[2]!.text}\f`)

  const structured = JSON.parse((await extract(app, FOUR, { format: 'structured', pages: '1' })).body) as Page[]
  assert.equal(structured.length, 1)
  const [first] = structured
  assert.equal(first!.text, undefined)
  const all = first!.blocks!.flatMap((b) => b.lines.flatMap((l) => l.words))
  assert.deepEqual(
    all.map((w) => w.text),
    words(pages[0]!.text!),
    'the words are the text',
  )
  for (const block of first!.blocks!) {
    for (const line of block.lines) {
      assert.equal(line.text.trim().split(/\s+/u).join(' '), line.words.map((w) => w.text).join(' '))
      for (const word of line.words) {
        const [x0, y0, x1, y1] = word.bbox as [number, number, number, number]
        assert.ok(x0 < x1 && y0 < y1 && x0 >= line.bbox[0]! - 0.01 && x1 <= line.bbox[2]! + 0.01, `${word.text} lies in its line`)
        assert.ok(x0 >= 0 && y0 >= 0 && x1 <= first!.width && y1 <= first!.height, `${word.text} lies on the page`)
        assert.match(word.font, /^[A-Z]{6}\+CM/)
        assert.ok(word.size > 5 && word.size < 30)
      }
    }
  }
  const hello = all[0]!
  assert.deepEqual(hello, { text: 'Hello,', bbox: hello.bbox, font: hello.font, size: 10.91 })
})

function form(file: string, fields: Record<string, string> = {}, name = 'document.pdf'): FormData {
  const body = new FormData()
  body.append('pdfDocument', new Blob([new Uint8Array(real(file))], { type: 'application/pdf' }), name)
  for (const [k, v] of Object.entries(fields)) body.append(k, v)
  return body
}

test('a page with no text layer says so; an encrypted document needs its password; bad options are refused', { skip: SKIP_CORPUS }, async (t) => {
  const app = await startApp(t)
  const scan = JSON.parse((await extract(app, 'imagemagick-images.pdf')).body) as Page[]
  assert.ok(scan.length > 1)
  for (const page of scan) assert.deepEqual([page.hasText, page.text], [false, ''])
  const none = JSON.parse((await extract(app, 'imagemagick-images.pdf', { format: 'structured', pages: '1' })).body) as Page[]
  assert.deepEqual([none[0]!.hasText, none[0]!.blocks], [false, []])

  assert.deepEqual(await codes(await upload(app.url, TEXT, app.key, real('libreoffice-writer-password.pdf'))), ['PDF_PASSWORD_REQUIRED'])
  const opened = JSON.parse((await extract(app, 'libreoffice-writer-password.pdf', { password: 'openpassword' })).body) as Page[]
  assert.ok(opened[0]!.hasText)
  assert.deepEqual(await codes(await upload(app.url, TEXT, app.key, real(FOUR), { format: 'xml', pages: 'x' })), ['PAGES_INVALID', 'TEXT_FORMAT_INVALID'])
  assert.deepEqual(await codes(await upload(app.url, TEXT, app.key, real(FOUR), { pages: '9' })), ['PAGES_OUT_OF_RANGE'])
  assert.deepEqual(await codes(await upload(app.url, TEXT, app.key, Buffer.from('not a pdf'))), ['NOT_A_PDF'])
})

test('text output counts against MAX_OUTPUT_BYTES: refused before the first byte, or cut short past it', { skip: SKIP_CORPUS }, async (t) => {
  const app = await startApp(t, { MAX_OUTPUT_BYTES: '65536', CONVERTER_WORKERS: '1' })
  // GeoTopo-komprimiert.pdf: 117 pages of text, about 300 kB as structured JSON.
  // The first pages go at once and the limit is passed a few milliseconds later: the client may see the cut before the headers.
  await assert.rejects(async () => {
    const cut = await upload(app.url, TEXT, app.key, real('GeoTopo-komprimiert.pdf'), { format: 'structured' })
    assert.equal(cut.status, 200)
    await cut.text()
  }, /terminated/)
  const structured = await upload(app.url, TEXT, app.key, real(FOUR), { format: 'structured', pages: '1' })
  assert.deepEqual(await codes(structured), ['OUTPUT_TOO_LARGE'], 'a first page over the limit is refused')
  await extract(app, FOUR, { pages: '1' })
})

test("a text job makes the route's answer, byte for byte", { skip: SKIP_CORPUS }, async (t) => {
  const app = await startApp(t)
  for (const format of ['json', 'text', 'structured']) {
    const { view, result: answer } = await runJob(app, form(FOUR, { operation: 'text', format, pages: '2-4' }, 'Notes.pdf'))
    assert.equal(view.status, 'succeeded')
    assert.deepEqual(view.options.text, { format })
    assert.equal(view.result!.name, format === 'text' ? 'Notes.txt' : 'Notes.json')
    const result = answer!
    const sync = await upload(app.url, TEXT, app.key, real(FOUR), { format, pages: '2-4' })
    assert.equal(result.headers.get('content-type'), sync.headers.get('content-type'))
    assert.equal(await result.text(), await sync.text())
  }
})
