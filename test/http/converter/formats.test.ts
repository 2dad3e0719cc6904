/**
 * Image formats and thumbnails on POST /converter/generateImage: JPEG, WebP and TIFF (one
 * multi-page TIFF for several pages), each page matching the PNG of the same page; thumbnails
 * fitted within their box; and the options' errors, all at once.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { codes, startApp, tempDir } from '../../support/helper.ts'
import { toolSkip } from '../../support/services.ts'
import { TIFF_COMPRESSIONS } from '../../../src/domain/images.ts'
import { SKIP_CORPUS, real, runJob, unzip, upload } from '../../support/convert.ts'
import { decode, metadata, psnr } from '../../support/images.ts'
import { TiffPages } from '../../../src/converter/tiff.ts'

const IMAGE = '/converter/generateImage'
const FOUR = 'pdflatex-4-pages.pdf'

async function convert(app: { url: string; key: string }, file: string, fields: Record<string, string>) {
  const res = await upload(app.url, IMAGE, app.key, real(file), fields)
  const body = Buffer.from(await res.arrayBuffer())
  assert.equal(res.status, 200, body.toString().slice(0, 300))
  return { res, body, type: res.headers.get('content-type'), name: res.headers.get('content-disposition') }
}

test('JPEG, WebP and TIFF pages match the PNG of the same page, one page alone and several in a zip', { skip: SKIP_CORPUS }, async (t) => {
  const app = await startApp(t)
  const png = unzip((await convert(app, FOUR, { dpi: '72' })).body)
  const reference = await Promise.all(png.map((entry) => decode(entry.data)))
  for (const [format, type, extension, floor] of [
    ['jpeg', 'image/jpeg', 'jpg', 30],
    ['jpg', 'image/jpeg', 'jpg', 30],
    ['webp', 'image/webp', 'webp', 28],
    ['tiff', 'image/tiff', 'tif', Number.POSITIVE_INFINITY],
  ] as const) {
    const one = await convert(app, FOUR, { dpi: '72', format, pages: '2' })
    assert.equal(one.type, type, format)
    assert.equal(one.name, `attachment; filename="document-2.${extension}"`)
    assert.equal(one.res.headers.get('x-page-count'), '1')
    const page = await decode(one.body)
    assert.ok(psnr(page, reference[1]!) >= floor, `${format}: page 2 at ${psnr(page, reference[1]!).toFixed(1)} dB of the PNG`)
    if (format === 'tiff') continue
    const several = await convert(app, FOUR, { dpi: '72', format })
    assert.equal(several.type, 'application/zip')
    const entries = unzip(several.body)
    assert.deepEqual(
      entries.map((e) => e.name),
      [1, 2, 3, 4].map((n) => `document-${n}.${extension}`),
    )
    for (const [i, entry] of entries.entries()) {
      const decoded = await decode(entry.data)
      const db = psnr(decoded, reference[i]!)
      assert.ok(db >= floor, `${format}: page ${i + 1} at ${db.toFixed(1)} dB of the PNG`)
    }
  }
  // JPEG's quality is the caller's: a lower one is smaller and further from the PNG.
  const low = await convert(app, FOUR, { dpi: '72', format: 'jpeg', quality: '20', pages: '2' })
  const high = await convert(app, FOUR, { dpi: '72', format: 'jpeg', quality: '95', pages: '2' })
  assert.ok(low.body.length < high.body.length / 2, `quality 20: ${low.body.length} bytes, 95: ${high.body.length}`)
  assert.ok(psnr(await decode(low.body), reference[1]!) < psnr(await decode(high.body), reference[1]!))
  const meta = await metadata(high.body)
  assert.equal(meta.density, 72, 'the JPEG carries its resolution')
})

test("PNG pages are MuPDF's pixels, losslessly, colour and gray, and carry their resolution", { skip: SKIP_CORPUS }, async (t) => {
  const app = await startApp(t)
  const mupdf = await import('mupdf')
  const doc = mupdf.Document.openDocument(real(FOUR), 'application/pdf')
  for (const [dpi, color, space, channels] of [
    ['150', 'rgb', mupdf.ColorSpace.DeviceRGB, 3],
    ['96', 'gray', mupdf.ColorSpace.DeviceGray, 1],
  ] as const) {
    const one = await convert(app, FOUR, { dpi, colorMode: color, pages: '2' })
    assert.equal(one.type, 'image/png')
    const pixmap = doc.loadPage(1).toPixmap(mupdf.Matrix.scale(Number(dpi) / 72, Number(dpi) / 72), space, false, true)
    const engine = await decode(pixmap.asPNG(), channels)
    assert.equal(psnr(await decode(one.body, channels), engine), Number.POSITIVE_INFINITY, `${color} at ${dpi} dpi: MuPDF's own pixels`)
    const meta = await metadata(one.body)
    assert.deepEqual([meta.channels, meta.density], [channels, Number(dpi)], `${color}: ${channels} channel(s), ${dpi} dpi in its pHYs`)
  }
})

test('several pages in TIFF are one multi-page TIFF, streamed, each page numbered and lossless', { skip: SKIP_CORPUS }, async (t) => {
  const app = await startApp(t)
  const png = unzip((await convert(app, FOUR, { dpi: '72' })).body)
  const { body, type, name, res } = await convert(app, FOUR, { dpi: '72', format: 'tif' })
  assert.equal(type, 'image/tiff')
  assert.equal(name, 'attachment; filename="document.tif"')
  assert.equal(res.headers.get('x-page-count'), '4')
  const meta = await metadata(body)
  assert.equal(meta.pages, 4)
  assert.equal(meta.density, 72)
  for (let i = 0; i < 4; i++) {
    assert.equal(psnr(await decode(body, 3, i), await decode(png[i]!.data)), Number.POSITIVE_INFINITY, `page ${i + 1} is the PNG's pixels`)
  }
  // Each directory is a page of a multi-page document, numbered (NewSubfileType 2, PageNumber n of 4).
  assert.deepEqual(
    tiffTags(body).map(({ subfile, page }) => ({ subfile, page })),
    [0, 1, 2, 3].map((n) => ({ subfile: 2, page: [n, 4] })),
  )
  // Gray and 1-bit pages: one channel; fax Group 4 is what a 1-bit TIFF gets unless asked otherwise.
  for (const format of ['tiff', 'jpeg']) {
    const gray = await convert(app, FOUR, { dpi: '72', format, colorMode: 'gray', pages: '1' })
    assert.equal((await metadata(gray.body)).channels, 1, `a gray ${format} has one channel`)
  }
  const deflated = await convert(app, FOUR, { dpi: '72', format: 'tiff', compression: 'deflate', pages: '1-2' })
  assert.deepEqual(
    tiffTags(deflated.body).map((tags) => tags.compression),
    [8, 8],
    'Deflate (8) as asked',
  )
  assert.deepEqual(
    tiffTags(body).map((tags) => tags.compression),
    [5, 5, 5, 5],
    'LZW (5) by default',
  )
  const fax = await convert(app, FOUR, { dpi: '72', format: 'tiff', bitDepth: '1', pages: '1-2' })
  assert.deepEqual(
    tiffTags(fax.body).map((tags) => tags.compression),
    [4, 4],
    'fax Group 4 (4)',
  )
  const faxMeta = await metadata(fax.body)
  assert.equal(faxMeta.pages, 2)
  assert.equal(faxMeta.channels, 1)
  const bilevel = await decode(fax.body, 1, 1)
  assert.ok(
    bilevel.data.every((v) => v === 0 || v === 255),
    'only black and white',
  )
  const grayPage = await decode(png[1]!.data, 1)
  const agree = bilevel.data.filter((v, i) => (v === 255) === grayPage.data[i]! >= 128).length
  assert.ok(agree / bilevel.data.length > 0.99, `the 1-bit page is the gray page cut at the middle (${agree} of ${bilevel.data.length} pixels agree)`)
})

/** How tiffinfo (libtiff) names each compression the API takes. */
const TIFFINFO_SCHEME: Readonly<Record<string, string>> = {
  lzw: 'LZW',
  deflate: 'AdobeDeflate',
  packbits: 'PackBits',
  ccittfax4: 'CCITT Group 4',
  none: 'None',
}

test('a 1-bit TIFF is written in every compression the docs allow it, as libtiff reads it back', {
  skip: SKIP_CORPUS || toolSkip('tiffinfo', 'libtiff-tools', ['-h']),
}, async (t) => {
  const app = await startApp(t)
  const dir = tempDir(t)
  const grayPages = unzip((await convert(app, FOUR, { dpi: '72', pages: '1-2' })).body)
  // Every compression but JPEG, which is for 8-bit pages only (COMPRESSION_BIT_DEPTH_CONFLICT); LZW is the default of a TIFF.
  const allowed = TIFF_COMPRESSIONS.filter((compression) => compression !== 'jpeg')
  for (const compression of allowed) {
    const { body } = await convert(app, FOUR, { dpi: '72', format: 'tiff', bitDepth: '1', compression, pages: '1-2' })
    const file = join(dir, `${compression}.tif`)
    writeFileSync(file, body)
    // tiffinfo -D decodes every strip with libtiff, which says so on stderr when one does not decode.
    const info = spawnSync('tiffinfo', ['-D', file], { encoding: 'utf8' })
    assert.equal(info.status, 0, `${compression}: ${info.stderr}`)
    assert.equal(info.stderr.trim(), '', `${compression}: libtiff reads every strip`)
    assert.deepEqual(
      [...info.stdout.matchAll(/Bits\/Sample: (\d+)/g)].map((m) => m[1]),
      ['1', '1'],
      `${compression}: two pages of 1 bit a sample`,
    )
    assert.deepEqual(
      [...info.stdout.matchAll(/Compression Scheme: (.+)/g)].map((m) => m[1]!.trim()),
      [TIFFINFO_SCHEME[compression], TIFFINFO_SCHEME[compression]],
      `${compression}: as asked`,
    )
    for (const page of [0, 1]) {
      const bilevel = await decode(body, 1, page)
      const gray = await decode(grayPages[page]!.data, 1)
      const agree = bilevel.data.filter((v, i) => (v === 0 || v === 255) && (v === 255) === gray.data[i]! >= 128).length
      assert.ok(agree / bilevel.data.length > 0.99, `${compression}: page ${page + 1} is the gray page cut at the middle (${agree} of ${bilevel.data.length})`)
    }
  }
})

/** tiffTags reads each directory's NewSubfileType, PageNumber and Compression (little-endian classic TIFF). */
function tiffTags(tiff: Buffer): { subfile: number; page: number[]; compression: number }[] {
  const pages: { subfile: number; page: number[]; compression: number }[] = []
  for (let at = tiff.readUInt32LE(4); at !== 0; ) {
    const count = tiff.readUInt16LE(at)
    const found = { subfile: -1, page: [] as number[], compression: -1 }
    for (let i = 0; i < count; i++) {
      const entry = at + 2 + 12 * i
      const tag = tiff.readUInt16LE(entry)
      if (tag === 254) found.subfile = tiff.readUInt32LE(entry + 8)
      if (tag === 297) found.page = [tiff.readUInt16LE(entry + 8), tiff.readUInt16LE(entry + 10)]
      if (tag === 259) found.compression = tiff.readUInt16LE(entry + 8)
    }
    pages.push(found)
    at = tiff.readUInt32LE(at + 2 + 12 * count)
  }
  return pages
}

test('thumbnails fit within the box asked for, aspect kept, the limiting side exact', { skip: SKIP_CORPUS }, async (t) => {
  const app = await startApp(t)
  // pdflatex pages are A4 portrait (595 × 842 pt); habibi-rotated.pdf is turned a quarter (landscape as shown).
  for (const [file, fields, width, height] of [
    [FOUR, { width: '200' }, 200, 283],
    [FOUR, { height: '200' }, 141, 200],
    [FOUR, { width: '300', height: '300' }, 212, 300],
    [FOUR, { width: '100', height: '1000' }, 100, 141],
    [FOUR, { width: '1' }, 1, 1],
  ] as const) {
    for (const format of ['png', 'jpeg', 'webp', 'tiff']) {
      const { body } = await convert(app, file, { ...fields, format, pages: '1' })
      const meta = await metadata(body)
      assert.deepEqual([meta.width, meta.height], [width, height], `${format} ${JSON.stringify(fields)}`)
    }
  }
  const rotated = await metadata((await convert(app, 'habibi-rotated.pdf', { width: '200', height: '200', pages: '1' })).body)
  assert.equal(Math.max(rotated.width!, rotated.height!), 200)
  assert.ok(rotated.width! > rotated.height!, 'a page turned a quarter is fitted as it is shown')
  // A thumbnail is the page drawn, not a blank: a letter page (612 × 792 pt) fitted within 612 pixels is its PNG at 72 dpi.
  const at72 = await decode((await convert(app, 'crazyones-pdfa.pdf', { dpi: '72' })).body)
  const thumb = await decode((await convert(app, 'crazyones-pdfa.pdf', { width: '612', format: 'tiff' })).body)
  assert.deepEqual([thumb.width, thumb.height], [612, 792])
  assert.ok(psnr(thumb, at72) > 40, `the thumbnail is the 72 dpi page (${psnr(thumb, at72).toFixed(1)} dB)`)
})

test('bad image options are refused all at once, naming each field', { skip: SKIP_CORPUS }, async (t) => {
  const app = await startApp(t)
  const refused = async (fields: Record<string, string>) => codes(await upload(app.url, IMAGE, app.key, real(FOUR), fields))
  assert.deepEqual(await refused({ format: 'gif', dpi: '100', width: '0', height: '10001' }), [
    'IMAGE_FORMAT_INVALID',
    'BOX_SIZE_INVALID',
    'BOX_SIZE_INVALID',
    'SIZE_CONFLICT',
  ])
  assert.deepEqual(await refused({ quality: '90' }), ['OPTION_NOT_APPLICABLE'])
  assert.deepEqual(await refused({ format: 'webp', compression: 'lzw', bitDepth: '1' }), ['OPTION_NOT_APPLICABLE', 'OPTION_NOT_APPLICABLE'])
  assert.deepEqual(await refused({ format: 'jpeg', quality: '0' }), ['QUALITY_INVALID'])
  assert.deepEqual(await refused({ format: 'jpeg', quality: '101' }), ['QUALITY_INVALID'])
  assert.deepEqual(await refused({ format: 'jpeg', quality: '9.5' }), ['QUALITY_INVALID'])
  assert.deepEqual(await refused({ format: 'tiff', compression: 'zip', bitDepth: '4' }), ['COMPRESSION_INVALID', 'BIT_DEPTH_INVALID'])
  assert.deepEqual(await refused({ format: 'tiff', compression: 'ccittfax4', bitDepth: '8' }), ['COMPRESSION_BIT_DEPTH_CONFLICT'])
  assert.deepEqual(await refused({ format: 'tiff', compression: 'jpeg', bitDepth: '1' }), ['COMPRESSION_BIT_DEPTH_CONFLICT'])
  assert.deepEqual(await refused({ format: 'jpeg\u202e', width: '１００' }), ['IMAGE_FORMAT_INVALID', 'BOX_SIZE_INVALID'])
  const res = await upload(app.url, IMAGE, app.key, real(FOUR), { format: 'png', quality: '50' })
  const [problem] = (await res.json()) as { message: string }[]
  assert.equal(problem!.message, 'quality applies to jpeg and webp only, not to png.')
  assert.equal(res.headers.get('content-disposition'), null)
})

test('a thumbnail box a page cannot fit within MAX_PAGE_MEGAPIXELS is refused, naming the page and the size', { skip: SKIP_CORPUS }, async (t) => {
  const app = await startApp(t, { MAX_PAGE_MEGAPIXELS: '1' })
  const res = await upload(app.url, IMAGE, app.key, real(FOUR), { width: '2000', format: 'webp' })
  assert.equal(res.status, 422)
  const [problem] = (await res.json()) as { code: string; message: string }[]
  assert.equal(problem!.code, 'BOX_TOO_LARGE')
  assert.equal(problem!.message, 'Page 1 fitted within 2000×any would be 2000×2829 pixels, 5.7 megapixels; the limit is 1. Give a smaller width or height.')
  assert.equal(res.headers.get('content-disposition'), null, 'a problem is not an attachment')
  await convert(app, FOUR, { width: '500', format: 'webp' })
})

test('the output limit counts the pages in their format; a TIFF of several pages is cut short past it', { skip: SKIP_CORPUS }, async (t) => {
  const app = await startApp(t, { MAX_OUTPUT_BYTES: '300000', CONVERTER_WORKERS: '1' })
  // pdflatex-4-pages.pdf at 72 dpi as LZW TIFF: about 90 kB a page; the fourth goes over.
  const res = await upload(app.url, IMAGE, app.key, real(FOUR), { dpi: '72', format: 'tiff' })
  assert.equal(res.status, 200)
  await assert.rejects(res.arrayBuffer(), 'the TIFF is cut short')
  const one = await upload(app.url, IMAGE, app.key, real(FOUR), { dpi: '300', format: 'tiff', pages: '1' })
  assert.deepEqual(await codes(one), ['OUTPUT_TOO_LARGE'])
  await convert(app, FOUR, { dpi: '72', format: 'jpeg', pages: '1' })
})

test("an image job in each format makes the synchronous route's answer, byte for byte, and shows its options", { skip: SKIP_CORPUS }, async (t) => {
  const app = await startApp(t)
  for (const fields of [
    { format: 'tiff', bitDepth: '1', pages: '1-3' },
    { format: 'webp', width: '300', quality: '70' },
    { format: 'jpeg', pages: '2', dpi: '100' },
  ] as Record<string, string>[]) {
    const form = new FormData()
    form.append('pdfDocument', new Blob([new Uint8Array(real(FOUR))], { type: 'application/pdf' }), 'Report 2026.pdf')
    for (const [k, v] of Object.entries({ operation: 'image', ...fields })) form.append(k, v)
    const { view: done, result: answer } = await runJob(app, form)
    assert.equal(done.status, 'succeeded', JSON.stringify(done))
    const { pages: _pages, dpi: _dpi, ...image } = fields
    assert.deepEqual(done.options.image, Object.fromEntries(Object.entries(image).map(([k, v]) => [k, k === 'format' || k === 'compression' ? v : Number(v)])))
    const result = answer!
    const bytes = Buffer.from(await result.arrayBuffer())
    const sync = await upload(app.url, IMAGE, app.key, real(FOUR), fields, 'Report 2026.pdf')
    assert.equal(result.headers.get('content-type'), sync.headers.get('content-type'))
    assert.equal(result.headers.get('content-disposition'), sync.headers.get('content-disposition'))
    assert.ok(bytes.equals(Buffer.from(await sync.arrayBuffer())), `${fields.format}: the job's result is the route's answer`)
  }
  // A job's image options are checked as the route's are, at submission.
  const form = new FormData()
  form.append('pdfDocument', new Blob([new Uint8Array(real(FOUR))], { type: 'application/pdf' }), 'a.pdf')
  form.append('operation', 'image')
  form.append('format', 'png')
  form.append('quality', '80')
  form.append('width', '20000')
  assert.deepEqual(await codes(await fetch(`${app.url}/converter/jobs`, { method: 'POST', headers: { 'x-api-key': app.key }, body: form })), [
    'BOX_SIZE_INVALID',
    'OPTION_NOT_APPLICABLE',
  ])
})

test('TiffPages refuses what is not a classic little-endian TIFF, and more pages than announced', async () => {
  const pages = new TiffPages(1)
  assert.throws(() => pages.page(Buffer.from('MM\0*\0\0\0\x08')), /little-endian classic TIFF/)
  assert.throws(() => pages.page(Buffer.from('not a tiff at all')), /little-endian classic TIFF/)
})
