/**
 * POST /converter/extractText: each page's text as JSON, plain text with form feeds, or
 * structured (blocks, lines, words with boxes and fonts), page-parallel and in page order; the
 * same as a `text` job.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { codes, startApp, tempDir } from '../../support/helper.ts'
import { SKIP_CORPUS, real, runJob, upload } from '../../support/convert.ts'
import { filledForm } from '../../support/pdf-writer.ts'
import { toolSkip } from '../../support/services.ts'

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

/** wordF1: the F1 score of two texts' words as multisets (NFKC, cut at white space): order and line breaks do not count. */
function wordF1(a: string, b: string): number {
  const x = words(a.normalize('NFKC'))
  const y = words(b.normalize('NFKC'))
  if (x.length === 0 && y.length === 0) return 1
  const left = new Map<string, number>()
  for (const w of x) left.set(w, (left.get(w) ?? 0) + 1)
  let common = 0
  for (const w of y) {
    const n = left.get(w) ?? 0
    if (n === 0) continue
    common++
    left.set(w, n - 1)
  }
  return (2 * common) / (x.length + y.length)
}

/** A two-page form, filled in: most of its words are the fields' values. */
const FORM = filledForm([
  {
    lines: [
      { text: 'Application for a reader ticket', x: 72, y: 720 },
      { text: 'Full name:', x: 72, y: 680 },
      { text: 'Address:', x: 72, y: 650 },
      { text: 'Institution:', x: 72, y: 620 },
    ],
    fields: [
      { name: 'name', value: 'Margaret Heafield Hamilton', x: 180, y: 676 },
      { name: 'address', value: '1 Apollo Way, Cambridge MA 02139', x: 180, y: 646 },
      { name: 'institution', value: 'Instrumentation Laboratory of the Massachusetts Institute', x: 180, y: 616, width: 360 },
    ],
  },
  {
    lines: [
      { text: 'Purpose of the visit:', x: 72, y: 720 },
      { text: 'Signed:', x: 72, y: 690 },
    ],
    fields: [
      { name: 'purpose', value: 'Reading the flight software listings of Colossus and Luminary', x: 200, y: 716, width: 380 },
      { name: 'signed', value: 'M. H. Hamilton, 20 July 1969', x: 200, y: 686 },
    ],
  },
])

test("filled form fields' values are their page's text, as pdftotext and mutool read them, in every form of the answer", {
  skip: toolSkip('pdftotext', 'poppler-utils', ['-v']) || toolSkip('mutool', 'mupdf-tools', ['-v']),
}, async (t) => {
  const app = await startApp(t)
  const file = join(tempDir(t), 'form.pdf')
  writeFileSync(file, FORM)
  const native = {
    pdftotext: [1, 2].map((page) => execFileSync('pdftotext', ['-f', String(page), '-l', String(page), file, '-'], { encoding: 'utf8' })),
    mutool: [1, 2].map((page) => execFileSync('mutool', ['draw', '-q', '-F', 'txt', '-o', '-', file, String(page)], { encoding: 'utf8', stdio: 'pipe' })),
  }
  for (const tool of ['pdftotext', 'mutool'] as const) assert.match(native[tool][0]!, /Margaret Heafield Hamilton/, `${tool} reads the values`)
  const answer = async (fields: Record<string, string>) => {
    const res = await upload(app.url, TEXT, app.key, FORM, fields)
    const body = await res.text()
    assert.equal(res.status, 200, body.slice(0, 300))
    return body
  }
  const json = (JSON.parse(await answer({})) as Page[]).map((page) => page.text!)
  const plain = (await answer({ format: 'text' })).split('\f').slice(0, -1)
  const structured = (JSON.parse(await answer({ format: 'structured' })) as Page[]).map((page) =>
    page.blocks!.flatMap((b) => b.lines.flatMap((l) => l.words.map((w) => w.text))).join(' '),
  )
  for (const [form, pages] of Object.entries({ json, plain, structured })) {
    assert.equal(pages.length, 2, form)
    for (const [i, text] of pages.entries()) {
      for (const tool of ['pdftotext', 'mutool'] as const) {
        const score = wordF1(text, native[tool][i]!)
        assert.ok(score >= 0.95, `${form}, page ${i + 1}: word F1 ${score.toFixed(3)} against ${tool}\n${text}`)
      }
    }
    // In page order: each page has its own fields' values, and only those.
    assert.match(pages[0]!, /Instrumentation Laboratory/, form)
    assert.doesNotMatch(pages[0]!, /Colossus/, form)
    assert.match(pages[1]!, /Colossus and Luminary/, form)
  }
})

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
