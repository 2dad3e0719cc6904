import { test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Worker } from 'node:worker_threads'
import { flatten, merge, pageCount, rotate, type Source, split } from './edit.ts'
import * as mupdf from 'mupdf'
import { DAMAGED_PDFS as damaged, REAL_PDFS as real } from '../../../test/support/corpus.ts'

const PASSWORD_FILE = 'libreoffice-writer-password.pdf'
const PASSWORD = 'openpassword'

function installed(command: string, args: string[]): boolean {
  return spawnSync(command, args, { stdio: 'ignore' }).error === undefined
}
const hasQpdf = installed('qpdf', ['--version'])
const scratch = mkdtempSync(join(tmpdir(), 'edit-test-'))
process.on('exit', () => rmSync(scratch, { recursive: true, force: true }))

const realFiles = readdirSync(real).filter((name) => name.endsWith('.pdf'))
const passwordOf = (name: string) => (name === PASSWORD_FILE ? PASSWORD : undefined)
const read = (name: string) => new Uint8Array(readFileSync(join(real, name)))
const source = (name: string, pages: number[] | null = null): Source => ({ pdf: read(name), password: passwordOf(name), pages })

/** qpdfCheck runs `qpdf --check` on a PDF: its exit status and output, or null without qpdf. */
function qpdfCheck(pdf: Uint8Array): { status: number | null; output: string } | null {
  if (!hasQpdf) return null
  const file = join(scratch, 'check.pdf')
  writeFileSync(file, pdf)
  const run = spawnSync('qpdf', ['--check', file], { encoding: 'utf8' })
  return { status: run.status, output: `${run.stdout}${run.stderr}` }
}

function assertClean(t: TestContext, pdf: Uint8Array, what: string): void {
  const check = qpdfCheck(pdf)
  if (check === null) t.diagnostic('qpdf is not installed: qpdf --check skipped')
  else assert.equal(check.status, 0, `qpdf --check ${what}:\n${check.output}`)
}

/** open reads a PDF with MuPDF for inspection; the caller destroys it. */
function open(pdf: Uint8Array, password?: string): mupdf.PDFDocument {
  const doc = mupdf.Document.openDocument(pdf, 'application/pdf').asPDF()!
  if (doc.needsPassword()) assert.ok(doc.authenticatePassword(password ?? '') > 0, 'password')
  return doc
}

function withDoc<T>(pdf: Uint8Array, password: string | undefined, inspect: (doc: mupdf.PDFDocument) => T): T {
  const doc = open(pdf, password)
  try {
    return inspect(doc)
  } finally {
    doc.destroy()
  }
}

function items(array: mupdf.PDFObject): mupdf.PDFObject[] {
  const list: mupdf.PDFObject[] = []
  if (array.isArray()) for (let i = 0; i < array.length; i++) list.push(array.get(i))
  return list
}

/** PageFacts is what a page operation must keep of a page: `targets` are where its links go (page indexes). */
interface PageFacts {
  content: string
  annots: string[]
  targets: (number | string)[]
  rotate: number
}

/**
 * pagesOf lists a document's page objects; for one whose page tree MuPDF cannot read, those in
 * the file in object order (the tree edit.ts, like the PNG engine, builds for it).
 */
function pagesOf(doc: mupdf.PDFDocument): mupdf.PDFObject[] {
  const count = doc.countPages()
  if (count > 0) return Array.from({ length: count }, (_, i) => doc.findPage(i))
  const pages: mupdf.PDFObject[] = []
  for (let i = 1; i < doc.countObjects(); i++) {
    const obj = doc.newIndirect(i)
    if (obj.isDictionary() && obj.get('Type').toString() === '/Page') pages.push(obj)
  }
  return pages
}

function contentOf(page: mupdf.PDFObject): string {
  const contents = page.get('Contents')
  const streams = contents.isArray() ? items(contents) : [contents]
  return Buffer.concat(streams.filter((s) => s.isStream()).map((s) => s.readStream().asUint8Array())).toString('latin1')
}

/** targetOf is where a link goes: a page index, 'none' for a page left out, or the kind of link. */
function targetOf(annot: mupdf.PDFObject, indexes: Map<number, number>): number | string {
  let dest = annot.get('Dest')
  const action = annot.get('A')
  if (dest.isNull() && action.isDictionary()) {
    if (action.get('S').toString() !== '/GoTo') return action.get('S').toString()
    dest = action.get('D')
  }
  if (!dest.isArray()) return dest.isNull() ? 'nowhere' : 'named'
  const page = dest.get(0)
  if (page.isNull()) return 'none'
  return (page.isIndirect() ? indexes.get(page.asIndirect()) : undefined) ?? 'not a page'
}

function allFacts(pdf: Uint8Array, password?: string): PageFacts[] {
  return withDoc(pdf, password, (doc) => {
    const pages = pagesOf(doc)
    const indexes = new Map(pages.map((page, i) => [page.asIndirect(), i]))
    return pages.map((page) => {
      const annots = items(page.get('Annots'))
      const rotate = page.getInheritable('Rotate')
      return {
        content: contentOf(page),
        annots: annots.map((a) => a.get('Subtype').toString()),
        targets: annots.filter((a) => a.get('Subtype').toString() === '/Link').map((a) => targetOf(a, indexes)),
        rotate: rotate.isNumber() ? rotate.asNumber() : 0,
      }
    })
  })
}

/** widgetFields counts the terminal fields of a document's form (each field with its widgets once). */
function widgetFields(doc: mupdf.PDFDocument): number {
  const seen = new Set<number>()
  const count = (field: mupdf.PDFObject): number => {
    if (field.isIndirect()) {
      if (seen.has(field.asIndirect())) return 0
      seen.add(field.asIndirect())
    }
    const kids = items(field.get('Kids'))
    const fieldKids = kids.filter((k) => !k.get('T').isNull() || !k.get('Kids').isNull())
    if (fieldKids.length === 0) return 1
    return fieldKids.reduce((sum, kid) => sum + count(kid), 0)
  }
  return items(doc.getTrailer().get('Root', 'AcroForm', 'Fields')).reduce((sum, field) => sum + count(field), 0)
}

function widgetsOnPages(doc: mupdf.PDFDocument): number {
  let widgets = 0
  for (const page of pagesOf(doc)) for (const annot of items(page.get('Annots'))) if (annot.get('Subtype').toString() === '/Widget') widgets++
  return widgets
}

function formOf(pdf: Uint8Array, password?: string): { fields: number; widgets: number } {
  return withDoc(pdf, password, (doc) => ({ fields: widgetFields(doc), widgets: widgetsOnPages(doc) }))
}

/** render draws page 1 at 72 dpi, RGB, as viewers show it (with its form fields). */
interface Render {
  width: number
  height: number
  samples: Uint8ClampedArray
}

function render(pdf: Uint8Array, password?: string): Render {
  return withDoc(pdf, password, (doc) => {
    const page = doc.loadPage(0)
    const pixmap = page.toPixmap(mupdf.Matrix.identity, mupdf.ColorSpace.DeviceRGB, false, true)
    try {
      return { width: pixmap.getWidth(), height: pixmap.getHeight(), samples: pixmap.getPixels().slice() }
    } finally {
      pixmap.destroy()
      page.destroy()
    }
  })
}

/** psnr compares two renders over their RGB samples: Infinity when they are identical. */
function psnr(a: Render, b: Render): number {
  assert.deepEqual([a.width, a.height], [b.width, b.height])
  let squares = 0
  for (let i = 0; i < a.samples.length; i++) squares += (a.samples[i]! - b.samples[i]!) ** 2
  return squares === 0 ? Number.POSITIVE_INFINITY : 10 * Math.log10((255 * 255) / (squares / a.samples.length))
}

/** assertPagesKept checks that each output page is the source page it was made from. */
function assertPagesKept(out: PageFacts[], expected: PageFacts[], what: string): void {
  assert.equal(out.length, expected.length, `${what}: pages`)
  for (const [i, page] of out.entries()) {
    const want = expected[i]!
    assert.ok(page.content === want.content, `${what}: page ${i + 1} content differs from its source page`)
    assert.deepEqual(page.annots, want.annots, `${what}: page ${i + 1} annotations`)
    assert.deepEqual(page.targets, want.targets, `${what}: page ${i + 1} link targets`)
    assert.equal(page.rotate, want.rotate, `${what}: page ${i + 1} rotation`)
  }
}

test('merge keeps every page of the whole corpus as it was, with annotations, links and form fields', (t) => {
  let offset = 0
  const expected = realFiles.flatMap((name) => {
    const facts = allFacts(read(name), passwordOf(name)).map((page) => ({
      ...page,
      targets: page.targets.map((to) => (typeof to === 'number' ? to + offset : to)),
    }))
    offset += facts.length
    return facts
  })
  const result = merge(
    realFiles.map((name) => source(name)),
    { maxPages: 10_000 },
  )
  assert.ok(result.ok, JSON.stringify(result))
  assert.equal(result.pages, expected.length)
  assertPagesKept(allFacts(result.pdf), expected, 'merge')
  const forms = realFiles.map((name) => formOf(read(name), passwordOf(name)))
  const form = { fields: forms.reduce((sum, f) => sum + f.fields, 0), widgets: forms.reduce((sum, f) => sum + f.widgets, 0) }
  assert.deepEqual(formOf(result.pdf), form)
  const links = expected.flatMap((p) => p.targets).length
  t.diagnostic(
    `merged ${realFiles.length} files: ${result.pages} pages, ${expected.flatMap((p) => p.annots).length} annotations (${links} links), ${form.fields} fields with ${form.widgets} widgets`,
  )
  assertClean(t, result.pdf, 'merge of the corpus')
})

test('merge takes pages in the order asked, a page twice, and a form twice', (t) => {
  const four = allFacts(read('pdflatex-4-pages.pdf'))
  const form = allFacts(read('libreoffice-form.pdf'))
  const latexForm = allFacts(read('pdflatex-forms.pdf'))
  const result = merge(
    [source('pdflatex-4-pages.pdf', [4, 1, 1]), source('libreoffice-form.pdf', [1, 1]), source('pdflatex-forms.pdf'), source('libreoffice-form.pdf')],
    {
      maxPages: 10,
    },
  )
  assert.ok(result.ok, JSON.stringify(result))
  assertPagesKept(allFacts(result.pdf), [four[3]!, four[0]!, four[0]!, form[0]!, form[0]!, latexForm[0]!, form[0]!], 'merge with repeats')
  // libreoffice-form.pdf has 8 fields with 9 widgets (7 fields are their own widget, a radio
  // group has 2). Its page twice: the 7 again as fields of the same name, the radio group with 4
  // widgets, so 15 fields, 18 widgets; then pdflatex-forms.pdf (3, 3) and the form again (8, 9).
  assert.deepEqual(formOf(result.pdf), { fields: 26, widgets: 30 })
  assertClean(t, result.pdf, 'merge with repeats')
})

test('merge refuses what it cannot use, naming the source', () => {
  const four = source('pdflatex-4-pages.pdf')
  assert.deepEqual(merge([four, { pdf: read(PASSWORD_FILE), pages: null }], { maxPages: 100 }), { ok: false, reason: 'password', part: 1 })
  assert.deepEqual(merge([four, { pdf: read(PASSWORD_FILE), password: 'wrong', pages: null }], { maxPages: 100 }), {
    ok: false,
    reason: 'password',
    part: 1,
  })
  assert.deepEqual(merge([{ ...four, pages: [1, 5] }], { maxPages: 100 }), { ok: false, reason: 'pages', part: 0, pageCount: 4 })
  assert.deepEqual(merge([{ ...four, pages: [0] }], { maxPages: 100 }), { ok: false, reason: 'pages', part: 0, pageCount: 4 })
  assert.deepEqual(merge([four, { pdf: new TextEncoder().encode('not a pdf'), pages: null }], { maxPages: 100 }), {
    ok: false,
    reason: 'unreadable',
    part: 1,
  })
  assert.deepEqual(merge([four, four], { maxPages: 7 }), { ok: false, reason: 'too-many-pages', count: 8 })
  assert.deepEqual(merge([], { maxPages: 7 }), { ok: false, reason: 'pages' })
})

/** partsOf cuts pages 1..count into runs of `every`. */
function partsOf(count: number, every: number): number[][] {
  const parts: number[][] = []
  for (let first = 1; first <= count; first += every) parts.push(Array.from({ length: Math.min(every, count - first + 1) }, (_, i) => first + i))
  return parts
}

test('split every page, every 2 pages and by ranges keeps each page as it was', (t) => {
  let outputs = 0
  for (const name of realFiles) {
    const password = passwordOf(name)
    const facts = allFacts(read(name), password)
    const count = facts.length
    const half = Math.ceil(count / 2)
    const ways = [partsOf(count, 1), partsOf(count, 2), [partsOf(count, half)[0]!, [count, 1], Array.from({ length: count }, (_, i) => count - i)]]
    for (const parts of ways) {
      const result = split(source(name), parts)
      assert.ok(result.ok, `${name}: ${JSON.stringify(result)}`)
      assert.equal(result.pdfs.length, parts.length)
      for (const [i, pdf] of result.pdfs.entries()) {
        const what = `${name} part ${JSON.stringify(parts[i])}`
        const part = parts[i]!
        // A link to a page of the part goes to its first place in the part; to a page left out, nowhere.
        const expected = part.map((p) => ({
          ...facts[p - 1]!,
          targets: facts[p - 1]!.targets.map((to) => (typeof to === 'number' ? (part.indexOf(to + 1) === -1 ? 'none' : part.indexOf(to + 1)) : to)),
        }))
        assertPagesKept(allFacts(pdf), expected, what)
        assertClean(t, pdf, what)
        outputs++
      }
    }
  }
  t.diagnostic(`split ${realFiles.length} files into ${outputs} documents`)
  assert.deepEqual(split(source('pdflatex-4-pages.pdf'), [[1], [9]]), { ok: false, reason: 'pages', pageCount: 4 })
  assert.deepEqual(split(source('pdflatex-4-pages.pdf'), [[1], []]), { ok: false, reason: 'pages', pageCount: 4 })
  assert.deepEqual(split({ pdf: read(PASSWORD_FILE), pages: null }, [[1]]), { ok: false, reason: 'password' })
})

test('split gives each part the form fields of its own pages only', (t) => {
  const both = merge([source('libreoffice-form.pdf'), source('pdflatex-forms.pdf')], { maxPages: 10 })
  assert.ok(both.ok)
  const result = split({ pdf: both.pdf, pages: null }, [[1], [2], [2, 1]])
  assert.ok(result.ok)
  assert.deepEqual(
    result.pdfs.map((pdf) => formOf(pdf)),
    [
      { fields: 8, widgets: 9 },
      { fields: 3, widgets: 3 },
      { fields: 11, widgets: 12 },
    ],
  )
  for (const pdf of result.pdfs) assertClean(t, pdf, 'split of a form')
})

test('rotate adds to each page its own rotation, appends to the file, and leaves the contents', (t) => {
  const rotated = read('habibi-rotated.pdf')
  const before = allFacts(rotated)
  t.diagnostic(`habibi-rotated.pdf rotations: ${before.map((p) => p.rotate).join(', ')}`)
  assert.ok(
    before.some((p) => p.rotate !== 0),
    'the file has rotated pages',
  )
  const all = rotate({ pdf: rotated, pages: null }, 90)
  assert.ok(all.ok)
  assert.equal(all.pages, before.length)
  assertPagesKept(
    allFacts(all.pdf),
    before.map((p) => ({ ...p, rotate: (p.rotate + 90) % 360 })),
    'rotate all',
  )
  assert.deepEqual(all.pdf.subarray(0, rotated.length), rotated, 'saved incrementally: the original bytes come first')
  assertClean(t, all.pdf, 'rotate habibi-rotated.pdf')

  const four = allFacts(read('pdflatex-4-pages.pdf'))
  const some = rotate(source('pdflatex-4-pages.pdf', [2, 4, 4]), 270)
  assert.ok(some.ok)
  assertPagesKept(
    allFacts(some.pdf),
    four.map((p, i) => ({ ...p, rotate: i % 2 === 1 ? 270 : 0 })),
    'rotate 2 and 4',
  )
  const twice = rotate({ pdf: some.pdf, pages: [4] }, 180)
  assert.ok(twice.ok)
  assert.equal(allFacts(twice.pdf)[3]!.rotate, 90)
  assertClean(t, twice.pdf, 'rotate twice')

  assert.deepEqual(rotate(source('pdflatex-4-pages.pdf', [5]), 90), { ok: false, reason: 'pages', pageCount: 4 })
  assert.deepEqual(rotate({ pdf: read(PASSWORD_FILE), pages: null }, 90), { ok: false, reason: 'password' })
})

test('rotate and flatten write an encrypted input back open', (t) => {
  const facts = allFacts(read(PASSWORD_FILE), PASSWORD)
  for (const result of [rotate(source(PASSWORD_FILE), 180), flatten(source(PASSWORD_FILE))]) {
    assert.ok(result.ok)
    withDoc(result.pdf, undefined, (doc) => {
      assert.equal(doc.needsPassword(), false)
      assert.ok(doc.getTrailer().get('Encrypt').isNull(), 'no /Encrypt')
    })
    assert.equal(allFacts(result.pdf)[0]!.content, facts[0]!.content)
    assertClean(t, result.pdf, 'an encrypted input written open')
  }
})

test('flatten draws form fields and annotations into the pages, leaving none, as they looked', (t) => {
  // annotated_pdf.pdf's note (a Text annotation, with a /Rect 3 points wide) MuPDF draws with an
  // icon of its own size; baked, it is the icon of the appearance stream, a little smaller.
  const least: Record<string, number> = { 'libreoffice-form.pdf': 40, 'pdflatex-forms.pdf': 40, 'annotated_pdf.pdf': 35 }
  for (const [name, db] of Object.entries(least)) {
    const pdf = read(name)
    const result = flatten({ pdf, pages: null })
    assert.ok(result.ok, name)
    assert.equal(result.fieldsLeft, 0, name)
    assert.deepEqual(formOf(result.pdf), { fields: 0, widgets: 0 }, name)
    withDoc(result.pdf, undefined, (doc) => assert.ok(doc.getTrailer().get('Root', 'AcroForm', 'Fields').isNull(), `${name}: no /AcroForm /Fields`))
    assert.deepEqual(
      allFacts(result.pdf).flatMap((page) => page.annots.filter((subtype) => subtype !== '/Link')),
      [],
      `${name}: only links are left`,
    )
    const psnrDb = psnr(render(pdf), render(result.pdf))
    t.diagnostic(`${name}: page 1 after flatten ${psnrDb === Number.POSITIVE_INFINITY ? 'identical' : `at ${psnrDb.toFixed(2)} dB`}`)
    assert.ok(psnrDb >= db, `${name}: ${psnrDb} dB`)
    assertClean(t, result.pdf, `flatten ${name}`)
  }
})

test('pageCount counts pages, with the password', () => {
  assert.equal(pageCount(read('pdflatex-4-pages.pdf')), 4)
  assert.equal(pageCount(read('GeoTopo-komprimiert.pdf')), 117)
  assert.equal(pageCount(read(PASSWORD_FILE), PASSWORD), 1)
  assert.deepEqual(pageCount(read(PASSWORD_FILE)), { ok: false, reason: 'password' })
  assert.deepEqual(pageCount(new Uint8Array(0)), { ok: false, reason: 'unreadable' })
})

// Runs in a worker so that a file that makes MuPDF loop can be stopped.
const tryAll = `
const { parentPort, workerData } = process.getBuiltinModule('node:worker_threads')
const { readFileSync } = process.getBuiltinModule('node:fs')
const loading = import(workerData)
parentPort.on('message', async (path) => {
  const { merge, split, rotate, flatten, pageCount } = await loading
  const pdf = new Uint8Array(readFileSync(path))
  const source = { pdf, pages: null }
  const operations = {
    pageCount: () => pageCount(pdf),
    merge: () => merge([source, source], { maxPages: 100000 }),
    split: () => split(source, [[1]]),
    rotate: () => rotate(source, 90),
    flatten: () => flatten(source),
  }
  const outcomes = {}
  const outputs = []
  for (const [name, operation] of Object.entries(operations)) {
    try {
      const result = operation()
      if (typeof result === 'number') outcomes[name] = 'ok'
      else if (!result.ok) outcomes[name] = 'refused ' + result.reason
      else {
        outcomes[name] = 'ok'
        outputs.push([name, result.pdf ?? result.pdfs[0]])
      }
    } catch (error) {
      outcomes[name] = { threw: error instanceof Error && error.message !== '' ? 'Error: ' + error.message : 'not an Error: ' + String(error) }
    }
  }
  parentPort.postMessage({ outcomes, outputs })
})
`

type Tried = { outcomes: Record<string, string | { threw: string }>; outputs: [string, Uint8Array][] }

/** Trier runs the operations on one file at a time in a worker, replaced when a file takes too long. */
class Trier {
  worker = this.start()
  start(): Worker {
    return new Worker(tryAll, { eval: true, workerData: new URL('./edit.ts', import.meta.url).href })
  }
  try(path: string, ms: number): Promise<Tried | 'timeout'> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.worker.removeAllListeners()
        void this.worker.terminate()
        this.worker = this.start()
        resolve('timeout')
      }, ms)
      this.worker.postMessage(path)
      this.worker.once('message', (tried: Tried) => {
        clearTimeout(timer)
        this.worker.removeAllListeners('error')
        resolve(tried)
      })
      this.worker.once('error', (error) => {
        clearTimeout(timer)
        reject(error)
      })
    })
  }
}

test('damaged files are refused or edited, never hang, and throw only clear errors', async (t) => {
  const trier = new Trier()
  const threw: string[] = []
  const unclean: string[] = []
  const worse: string[] = []
  const tally: Record<string, number> = {}
  try {
    for (const name of readdirSync(damaged).filter((n) => n.endsWith('.pdf'))) {
      const tried = await trier.try(join(damaged, name), 30_000)
      assert.notEqual(tried, 'timeout', `${name} took over 30 s`)
      if (tried === 'timeout') continue
      for (const [operation, outcome] of Object.entries(tried.outcomes)) {
        if (typeof outcome === 'string') tally[`${operation} ${outcome}`] = (tally[`${operation} ${outcome}`] ?? 0) + 1
        else threw.push(`${name} ${operation}: ${outcome.threw}`)
      }
      // qpdf --check exits 0 when clean, 3 with warnings, 2 with errors: an output may keep the
      // input's damage (rotate appends to the file; a broken stream is copied as it is), not add to it.
      const input = qpdfCheck(new Uint8Array(readFileSync(join(damaged, name))))
      for (const [operation, pdf] of tried.outputs) {
        const check = qpdfCheck(pdf)
        if (input === null || check === null || check.status === 0) continue
        const rank = (status: number | null) => [0, 3, 2].indexOf(status ?? 2)
        if (rank(check.status) > rank(input.status)) worse.push(`${name} ${operation} (qpdf ${check.status}, input ${input.status})`)
        else unclean.push(`${name} ${operation}`)
      }
    }
  } finally {
    await trier.worker.terminate()
  }
  t.diagnostic(`outcomes: ${JSON.stringify(tally)}`)
  t.diagnostic(`threw (${threw.length}): ${threw.join('; ') || 'none'}`)
  t.diagnostic(`outputs as damaged as their input for qpdf --check (${unclean.length}): ${unclean.join('; ') || 'none'}`)
  t.diagnostic(`outputs more damaged than their input (${worse.length}): ${worse.join('; ') || 'none'}`)
  for (const message of threw) assert.match(message, /: Error: /, message)
  assert.deepEqual(worse, [])
})

/** time runs `work` and gives the milliseconds it took. */
function time(work: () => unknown): number {
  const start = performance.now()
  work()
  return performance.now() - start
}

/** qpdf runs qpdf for a timing; its exit status is not looked at (it finds no pages in unreadablemetadata.pdf). */
function qpdf(args: string[]): void {
  spawnSync('qpdf', args, { stdio: 'ignore' })
}

test('timings against qpdf (printed, not asserted)', { skip: hasQpdf ? false : 'qpdf is not installed' }, (t) => {
  const out = join(scratch, 'out.pdf')
  const paths = realFiles.map((name) => join(real, name))
  const sources = realFiles.map((name) => source(name))
  const pwArgs = (name: string) => (passwordOf(name) === undefined ? [] : [`--password=${PASSWORD}`])
  const rows: [string, number, number][] = [
    [
      'merge the corpus',
      time(() => merge(sources, { maxPages: 10_000 })),
      time(() => qpdf(['--empty', '--pages', ...realFiles.flatMap((name, i) => [paths[i]!, ...pwArgs(name), '1-z']), '--', out])),
    ],
    [
      'pages 1-2 of each file',
      time(() => {
        for (const s of sources) split(s, [[1, 2].filter((p) => p <= (pageCount(s.pdf, s.password) as number))])
      }),
      time(() => {
        for (const [i, name] of realFiles.entries()) qpdf([...pwArgs(name), paths[i]!, '--pages', '.', '1-2', '--', out])
      }),
    ],
    [
      'rotate each file +90',
      time(() => {
        for (const s of sources) rotate(s, 90)
      }),
      time(() => {
        for (const [i, name] of realFiles.entries()) qpdf([...pwArgs(name), paths[i]!, '--rotate=+90', '--', out])
      }),
    ],
    [
      'flatten each file',
      time(() => {
        for (const s of sources) flatten(s)
      }),
      time(() => {
        for (const [i, name] of realFiles.entries()) qpdf([...pwArgs(name), paths[i]!, '--generate-appearances', '--flatten-annotations=all', '--', out])
      }),
    ],
  ]
  for (const [what, ours, theirs] of rows) t.diagnostic(`${what}: edit.ts ${ours.toFixed(0)} ms, qpdf ${theirs.toFixed(0)} ms`)
})
