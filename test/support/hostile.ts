/**
 * Hostile PDFs for the memory tests, written byte by byte: small files whose conversion to
 * PostScript would be huge. Built at test time so the repository holds no such file.
 */
import { randomBytes } from 'node:crypto'
import { deflateRawSync, deflateSync, constants } from 'node:zlib'

/** pdf assembles numbered objects (1..n, object 1 the catalogue) into a PDF with a valid xref table. */
function pdf(objects: readonly Buffer[]): Buffer {
  const parts: Buffer[] = [Buffer.from('%PDF-1.7\n%\xe2\xe3\xcf\xd3\n', 'latin1')]
  const offsets: number[] = []
  let at = parts[0]!.length
  objects.forEach((body, i) => {
    offsets.push(at)
    const obj = Buffer.concat([Buffer.from(`${i + 1} 0 obj\n`), body, Buffer.from('\nendobj\n')])
    parts.push(obj)
    at += obj.length
  })
  const xref = [`xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`, ...offsets.map((o) => `${String(o).padStart(10, '0')} 00000 n \n`)].join('')
  parts.push(Buffer.from(`${xref}trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${at}\n%%EOF\n`))
  return Buffer.concat(parts)
}

const stream = (dict: string, data: Buffer) => Buffer.concat([Buffer.from(`<< ${dict} /Length ${data.length} >>\nstream\n`), data, Buffer.from('\nendstream')])

/** pagesDrawing makes `pageCount` letter pages, each drawing image object 3 over the whole page. */
function pagesDrawing(pageCount: number, image: Buffer): Buffer {
  const first = 4
  const kids = Array.from({ length: pageCount }, (_, i) => `${first + i} 0 R`).join(' ')
  const content = stream('', Buffer.from('q 612 0 0 792 0 0 cm /Im0 Do Q'))
  const contentRef = first + pageCount
  const pages = Array.from({ length: pageCount }, () =>
    Buffer.from(`<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /XObject << /Im0 3 0 R >> >> /Contents ${contentRef} 0 R >>`),
  )
  return pdf([
    Buffer.from('<< /Type /Catalog /Pages 2 0 R >>'),
    Buffer.from(`<< /Type /Pages /Kids [${kids}] /Count ${pageCount} >>`),
    image,
    ...pages,
    content,
  ])
}

/** randomImagePages is about 1.2 MB: one image of random (incompressible) pixels, drawn on each of `pageCount` pages. */
export function randomImagePages(pageCount = 500): Buffer {
  const side = 632 // 632 x 632 RGB: 1.2 MB
  return pagesDrawing(
    pageCount,
    stream(`/Type /XObject /Subtype /Image /Width ${side} /Height ${side} /ColorSpace /DeviceRGB /BitsPerComponent 8`, randomBytes(side * side * 3)),
  )
}

/**
 * zerosZlib is the zlib stream of `bytes` zero bytes, made without producing them: after a
 * full flush deflate forgets its window, so every further 1 MiB of zeros compresses to the same bytes.
 */
function zerosZlib(bytes: number): Buffer {
  const MiB = 1 << 20
  if (bytes % MiB !== 0) throw new Error('whole MiB only')
  const block = deflateRawSync(Buffer.alloc(MiB), { finishFlush: constants.Z_FULL_FLUSH, level: 9 })
  const end = deflateRawSync(Buffer.alloc(0))
  const adler = Buffer.alloc(4)
  adler.writeUInt32BE((bytes % 65521) * 65536 + 1) // a = 1 + sum(0) = 1; b = n * 1 mod 65521
  return Buffer.concat([Buffer.from([0x78, 0xda]), ...Array<Buffer>(bytes / MiB).fill(block), end, adler])
}

/** hugeImage is a few KB: one page drawing one 40000 x 40000 RGB image of zeros (4.8 GB of pixels), Flate-compressed twice. */
export function hugeImage(side = 40000): Buffer {
  const raw = side * side * 3
  const padded = Math.ceil(raw / (1 << 20)) * (1 << 20) // extra bytes past the image are ignored by readers
  const twice = deflateSync(zerosZlib(padded), { level: 9 })
  return pagesDrawing(
    1,
    stream(
      `/Type /XObject /Subtype /Image /Width ${side} /Height ${side} /ColorSpace /DeviceRGB /BitsPerComponent 8 /Filter [/FlateDecode /FlateDecode]`,
      twice,
    ),
  )
}

/** u16 and u32 write big-endian fields of a codestream. */
const u16 = (n: number) => Buffer.from([n >> 8, n & 255])
const u32 = (n: number) => Buffer.from([n >>> 24, (n >> 16) & 255, (n >> 8) & 255, n & 255])

/**
 * jpxBomb is under 1 KB: `pageCount` pages drawing a JPEG 2000 image that claims `side` × `side` × 3
 * (60000: 10.8 GB of pixels), in one tile (`tile` pixels a side) whose packets hold nothing.
 */
export function jpxBomb(side = 60000, tile = side, pageCount = 1): Buffer {
  const marker = (code: number, body: Buffer) => Buffer.concat([u16(code), u16(body.length + 2), body])
  const siz = marker(
    0xff51,
    Buffer.concat([
      u16(0),
      u32(side),
      u32(side),
      u32(0),
      u32(0),
      u32(tile),
      u32(tile),
      u32(0),
      u32(0),
      u16(3),
      ...Array<Buffer>(3).fill(Buffer.from([7, 1, 1])),
    ]),
  )
  // One layer, no colour transform, no wavelet levels, 64 × 64 code blocks, reversible 5-3 filter; no quantisation, 2 guard bits.
  const cod = marker(0xff52, Buffer.from([0, 0, 0, 1, 0, 0, 4, 4, 0, 1]))
  const qcd = marker(0xff5c, Buffer.from([0x40, 0x40]))
  // The first tile alone: the decoder still sets up the whole image. Its one tile-part holds an empty packet per component.
  const data = Buffer.from([0, 0, 0])
  const sot = marker(0xff90, Buffer.concat([u16(0), u32(12 + 2 + data.length), Buffer.from([0, 1])]))
  const codestream = Buffer.concat([u16(0xff4f), siz, cod, qcd, sot, u16(0xff93), data, u16(0xffd9)])
  return pagesDrawing(
    pageCount,
    stream(`/Type /XObject /Subtype /Image /Width ${side} /Height ${side} /ColorSpace /DeviceRGB /BitsPerComponent 8 /Filter /JPXDecode`, codestream),
  )
}

/**
 * jbig2Bomb is under 1 KB: one page drawing a JBIG2 image of `side` × `side` (60000: 450 MB
 * at one bit a pixel), its page and one generic region of the same size, of arithmetic-coded
 * data that is a few bytes long (the decoder reads past its end as 0xFF bytes).
 */
export function jbig2Bomb(side = 60000): Buffer {
  const segment = (number: number, type: number, data: Buffer) => Buffer.concat([u32(number), Buffer.from([type, 0, 1]), u32(data.length), data]) // one-byte page association: page 1
  // Page information: width, height, resolution unknown, flags 0, no striping.
  const page = segment(0, 48, Buffer.concat([u32(side), u32(side), u32(0), u32(0), Buffer.from([0]), u16(0)]))
  // Immediate lossless generic region: the region's size and place, combination OR, then template 0, its four adaptive pixels, the data.
  const region = segment(
    1,
    38,
    Buffer.concat([
      u32(side),
      u32(side),
      u32(0),
      u32(0),
      Buffer.from([0]),
      Buffer.from([0]),
      Buffer.from([3, 0xff, 0xfd, 0xff, 2, 0xfe, 0xfe, 0xfe]),
      Buffer.from([0, 0, 0, 0]),
    ]),
  )
  return pagesDrawing(
    1,
    stream(
      `/Type /XObject /Subtype /Image /Width ${side} /Height ${side} /ColorSpace /DeviceGray /BitsPerComponent 1 /Filter /JBIG2Decode`,
      Buffer.concat([page, region]),
    ),
  )
}

/**
 * formBomb is a few KB: `pageCount` pages drawing form XObject 0, each form drawing the next
 * one `fanOut` times, `depth` levels deep, the last a small filled square: fanOut^depth
 * squares a page (4^30, about 10^18, by default), which no engine finishes. A shallow one
 * (depth 8: 65536 squares) takes a fraction of a second a page.
 */
export function formBomb(depth = 30, fanOut = 4, pageCount = 1): Buffer {
  const first = 3 + pageCount // objects 1-2: catalogue, pages; then the pages
  const forms = Array.from({ length: depth + 1 }, (_, i) => {
    const body = i === depth ? '0 0 1 1 re f' : Array.from({ length: fanOut }, () => 'q /X Do Q').join(' ')
    const resources = i === depth ? '' : `/Resources << /XObject << /X ${first + i + 1} 0 R >> >>`
    return stream(`/Type /XObject /Subtype /Form /BBox [0 0 612 792] ${resources}`, Buffer.from(body))
  })
  const content = first + depth + 1
  const kids = Array.from({ length: pageCount }, (_, i) => `${3 + i} 0 R`).join(' ')
  const pages = Array.from({ length: pageCount }, () =>
    Buffer.from(`<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /XObject << /X ${first} 0 R >> >> /Contents ${content} 0 R >>`),
  )
  return pdf([
    Buffer.from('<< /Type /Catalog /Pages 2 0 R >>'),
    Buffer.from(`<< /Type /Pages /Kids [${kids}] /Count ${pageCount} >>`),
    ...pages,
    ...forms,
    stream('', Buffer.from('/X Do')),
  ])
}

/**
 * textPages is about 80 KB for 500 pages: letter pages of Helvetica text sharing one content
 * stream. Cheap to send, and each page at 600 dpi is 5100 × 6600 pixels (a 96 MiB uncompressed RGB TIFF).
 */
export function textPages(pageCount = 500): Buffer {
  const lines = Array.from({ length: 40 }, (_, i) => `(Line ${i} of a text page: the quick brown fox jumps over the lazy dog.) Tj 0 -14 Td`)
  const content = stream('', Buffer.from(`BT /F1 12 Tf 72 720 Td ${lines.join(' ')} ET`))
  const first = 5
  const kids = Array.from({ length: pageCount }, (_, i) => `${first + i} 0 R`).join(' ')
  const pages = Array.from({ length: pageCount }, () =>
    Buffer.from('<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents 4 0 R >>'),
  )
  return pdf([
    Buffer.from('<< /Type /Catalog /Pages 2 0 R >>'),
    Buffer.from(`<< /Type /Pages /Kids [${kids}] /Count ${pageCount} >>`),
    Buffer.from('<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>'),
    content,
    ...pages,
  ])
}

/**
 * fuzzed damages a PDF as a fuzzer would, the same way for the same seed: one to four edits,
 * each a PDF token dropped in (a reference, a count, a bracket, a type), a run of up to 20 bytes
 * cut, or a byte changed. On textPages(100) about a third of them leave a page tree MuPDF opens
 * and repairs, with pages it cannot load or copy further on.
 */
export function fuzzed(base: Buffer, seed: number): Buffer {
  let state = seed
  const random = () => {
    state = (state * 1103515245 + 12345) & 0x7fffffff
    return state / 0x7fffffff
  }
  const tokens = ['0', '1', '999', '-1', 'R', 'obj', '/Kids', '/Count', '/Parent', 'null', '[', ']', '<<', '>>', '/Type /Pages', '/Type /Page']
  let text = base.toString('latin1')
  const edits = 1 + Math.floor(random() * 4)
  for (let i = 0; i < edits; i++) {
    const at = Math.floor(random() * text.length)
    const kind = random()
    if (kind < 0.4) text = text.slice(0, at) + tokens[Math.floor(random() * tokens.length)] + text.slice(at + 1)
    else if (kind < 0.7) text = text.slice(0, at) + text.slice(at + 1 + Math.floor(random() * 20))
    else text = text.slice(0, at) + String.fromCharCode(Math.floor(random() * 256)) + text.slice(at + 1)
  }
  return Buffer.from(text, 'latin1')
}
