import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import * as mupdf from 'mupdf'
import { startApp } from '../support/helper.ts'
import { CORPUS, HAS_CORPUS, SKIP_CORPUS, pngSize, real, realFiles, unzip, upload } from '../support/convert.ts'
import { difference, psnr, renderPostScript } from '../support/render.ts'

const DPI = 50
/**
 * Largest mean gray-level difference between the PostScript rendered back by Ghostscript
 * and MuPDF's PNG of the same page (0 = same, 1 = black on white). Text anti-aliasing at
 * 50 dpi differs between the engines by up to about 3.2% on this corpus.
 */
const MAX_DIFFERENCE = 0.04
/** Files on which the two engines disagree about the PDF itself, and why (see docs/development.md, "Tests on real files"). */
const ICC =
  'its 16x16 image has an ICC profile with 3 components for a gray colour space: MuPDF ignores the profile and draws the image, Ghostscript drops the image'
const KNOWN_DIFFERENCES: Record<string, string> = {
  'imagemagick-ASCII85Decode.pdf': ICC,
  'imagemagick-images.pdf': ICC,
  'imagemagick-lzw.pdf': ICC,
  'imagemagick-CCITTFaxDecode.pdf':
    'a 16x16 bilevel image on a 3.84 pt page: at 50 dpi the page is 3x3 pixels, and the engines downsample the image differently',
}
/** Where files.json (another library's reading) and any repair can agree no further. */
const PAGE_COUNT_EXCEPTIONS: Record<string, { pages: number; why: string }> = {
  'unreadablemetadata.pdf': {
    pages: 3,
    why: 'its page tree root and one of its four page objects are overwritten with zeros: the page tree is rebuilt from the three pages left',
  },
}
const PASSWORDS: Record<string, string> = { 'libreoffice-writer-password.pdf': 'openpassword' }
/** Documents whose pages are text set in fonts: their PostScript must draw text, not pictures of text. */
const TEXT_DOCUMENTS = ['minimal-document.pdf', 'pdflatex-4-pages.pdf', 'multicolumn.pdf', '002-trivial-libre-office-writer.pdf', 'google-doc-document.pdf']

/** The corpus's own metadata (not our engines) says how many pages each file has. */
const expectedPages: Record<string, number> = HAS_CORPUS
  ? Object.fromEntries(
      (JSON.parse(readFileSync(join(CORPUS, 'real', 'files.json'), 'utf8')) as { data: { path: string; pages: number }[] }).data.map((f) => [
        f.path.split('/').pop()!,
        f.pages,
      ]),
    )
  : {}

function pageSizes(pdf: Buffer, password?: string): { width: number; height: number }[] {
  const doc = mupdf.Document.openDocument(pdf, 'application/pdf')
  if (password) doc.authenticatePassword(password)
  const sizes = Array.from({ length: doc.countPages() }, (_, i) => {
    const [x0, y0, x1, y1] = doc.loadPage(i).getBounds()
    return { width: x1 - x0, height: y1 - y0 }
  })
  doc.destroy()
  return sizes
}

test('every real-world PDF converts to PNG and to vector PostScript that renders back the same', { skip: SKIP_CORPUS, timeout: 600_000 }, async (t) => {
  const app = await startApp(t)
  const report: string[] = []
  const offenders: string[] = []
  for (const name of realFiles()) {
    const pdf = real(name)
    const password = PASSWORDS[name]
    const fields = { dpi: String(DPI), ...(password ? { password } : {}) }
    assert.ok(expectedPages[name], `${name} is in files.json`)
    const pages = PAGE_COUNT_EXCEPTIONS[name]?.pages ?? expectedPages[name]!

    const image = await upload(app.url, '/converter/generateImage', app.key, pdf, fields, name)
    assert.equal(image.status, 200, `${name}: ${image.status}`)
    assert.equal(image.headers.get('x-page-count'), String(pages), name)
    const body = Buffer.from(await image.arrayBuffer())
    const base = name.replace(/\.pdf$/, '')
    const pngs =
      pages === 1
        ? [body]
        : unzip(body).map((e, i) => {
            assert.equal(e.name, `${base}-${String(i + 1).padStart(String(pages).length, '0')}.png`)
            return e.data
          })
    assert.equal(pngs.length, pages, name)
    // Page sizes read straight from the file (for a file whose page tree is lost, there are none to read).
    const sizes = pageSizes(pdf, password)
    if (!(name in PAGE_COUNT_EXCEPTIONS))
      pngs.forEach((png, i) => {
        const { width, height } = pngSize(png)
        assert.ok(
          Math.abs(width - (sizes[i]!.width * DPI) / 72) <= 1 && Math.abs(height - (sizes[i]!.height * DPI) / 72) <= 1,
          `${name} page ${i + 1}: ${width}x${height} for ${sizes[i]!.width}x${sizes[i]!.height} pt at ${DPI} dpi`,
        )
      })

    const ps = await upload(app.url, '/converter/generatePostscript', app.key, pdf, password ? { password } : {}, name)
    assert.equal(ps.status, 200, name)
    assert.equal(ps.headers.get('content-type'), 'application/postscript')
    assert.equal(ps.headers.get('content-disposition'), `attachment; filename="${base}.ps"`)
    const postscript = Buffer.from(await ps.arrayBuffer())
    const text = postscript.toString('latin1')
    // Checked with assert.ok: a failing assert.match would print megabytes of PostScript.
    assert.ok(text.startsWith('%!PS-Adobe-3.0\n'), `${name}: DSC header`)
    assert.ok(new RegExp(`^%%Pages: ${pages}$`, 'm').test(text), `${name}: %%Pages`)
    assert.equal(text.match(/^%%Page: /gm)?.length, pages, `${name}: one %%Page per page`)
    assert.ok(/%%EOF\s*$/.test(text), `${name}: %%EOF`)
    if (TEXT_DOCUMENTS.includes(name)) {
      // Text shown with the PDF text operators, in fonts carried in the file: not a picture of the page.
      assert.ok((text.match(/\bT[Jj]\b/g)?.length ?? 0) >= 5, `${name}: text is drawn as text`)
    }

    // Render the PostScript back and compare it with the PNG of the same page (up to three pages a file).
    const compared = Math.min(pages, 3)
    const back = await renderPostScript(postscript, DPI, 1, compared)
    const worst = Math.max(...back.map((png, i) => difference(png, pngs[i]!).mean))
    report.push(`${name}: ${pages} p, PS ${(postscript.length / 1024).toFixed(0)} KiB, worst difference ${(worst * 100).toFixed(2)}%`)
    if (worst > MAX_DIFFERENCE && !(name in KNOWN_DIFFERENCES)) offenders.push(`${name} (${(worst * 100).toFixed(2)}%)`)
  }
  t.diagnostic(report.join('\n'))
  assert.deepEqual(offenders, [], 'PostScript that renders unlike the PDF')
})

/**
 * The form whose fields are checked one by one, at a dpi where a field's 1 pt border is more
 * than a pixel wide. Each field's box must score at least MIN_FIELD_PSNR against MuPDF's PNG:
 * drawn as MuPDF draws them, the three fields score 24.7, 24.4 and 18.8 dB; with the checkbox
 * left out it scores 11.9 dB, and the push button drawn from its stale appearance 11.0 dB.
 */
const FORM = 'pdflatex-forms.pdf'
const FORM_DPI = 100
const MIN_FIELD_PSNR = 15

/** fieldBoxes gives each form field's box on the first page, in pixels at `dpi`. */
function fieldBoxes(pdf: Buffer, dpi: number): { name: string; box: [number, number, number, number] }[] {
  const doc = mupdf.Document.openDocument(pdf, 'application/pdf')
  const page = doc.loadPage(0) as mupdf.PDFPage
  const boxes = page.getWidgets().map((widget) => {
    const [x0, y0, x1, y1] = widget.getBounds().map((v) => (v * dpi) / 72) as [number, number, number, number]
    return { name: widget.getName(), box: [Math.floor(x0), Math.floor(y0), Math.ceil(x1), Math.ceil(y1)] as [number, number, number, number] }
  })
  doc.destroy()
  return boxes
}

/** withoutNeedAppearances gives the form no longer asking readers to make its fields' appearances. */
function withoutNeedAppearances(pdf: Buffer): Buffer {
  const doc = mupdf.Document.openDocument(pdf, 'application/pdf')
  const form = doc.asPDF()!
  form.getTrailer().get('Root', 'AcroForm').delete('NeedAppearances')
  const bytes = Buffer.from(form.saveToBuffer('incremental').asUint8Array())
  doc.destroy()
  return bytes
}

test('form fields are drawn in the PostScript as in the PNG', { skip: SKIP_CORPUS, timeout: 120_000 }, async (t) => {
  const app = await startApp(t)
  // As published, the form asks readers to make every field's appearance (NeedAppearances);
  // without that, a reader makes only the checkbox's, which has none for its state (/Off).
  const forms = { 'as published': real(FORM), 'without NeedAppearances': withoutNeedAppearances(real(FORM)) }
  const offenders: string[] = []
  for (const [variant, pdf] of Object.entries(forms)) {
    const image = await upload(app.url, '/converter/generateImage', app.key, pdf, { dpi: String(FORM_DPI) }, FORM)
    assert.equal(image.status, 200, variant)
    const png = Buffer.from(await image.arrayBuffer())
    const ps = await upload(app.url, '/converter/generatePostscript', app.key, pdf, {}, FORM)
    assert.equal(ps.status, 200, variant)
    const [back] = await renderPostScript(Buffer.from(await ps.arrayBuffer()), FORM_DPI, 1, 1)

    const fields = fieldBoxes(pdf, FORM_DPI)
    assert.equal(fields.length, 3, 'a text field, a checkbox and a push button')
    const scores = fields.map(({ name, box }) => ({ name, score: psnr(back!, png, box) }))
    t.diagnostic(`${variant}: ${scores.map(({ name, score }) => `${name} ${score.toFixed(1)} dB`).join(', ')}`)
    offenders.push(...scores.filter(({ score }) => score < MIN_FIELD_PSNR).map(({ name }) => `${variant}: ${name}`))
  }
  assert.deepEqual(offenders, [], 'fields drawn unlike the PNG')
})
