/**
 * What a conversion's answer is made of, the same for the synchronous routes and for jobs, so
 * that a job's result is byte for byte the synchronous route's answer: the names of the pages,
 * the zip's entries, and their date; a multi-page TIFF. The date is fixed, so the same document
 * and options give the same bytes (a cache, a checksum or a diff of two runs sees nothing change).
 */
import type { Readable } from 'node:stream'
import yazl from 'yazl'
// yazl's CRC-32 by zlib: installed before any zip is written (see zip-crc.ts).
import './zip-crc.ts'
import { IMAGE_TYPES, type ImageFormat } from '../domain/images.ts'
import type { TextFormat } from '../domain/text.ts'
import { TiffPages } from './tiff.ts'
import { Copier, Spool, release } from './spool.ts'

/** The date every zip entry carries (midday, so that no time zone moves it to another day). */
const ZIP_DATE = new Date('2000-01-01T12:00:00Z')

/** pageName: a page's file name (`extension` the format's); a one-page document's image carries the document's name alone. */
export function pageName(basename: string, page: number, pageCount: number, extension = 'png'): string {
  return `${basename}-${String(page).padStart(String(pageCount).length, '0')}.${extension}`
}

/** singleName: the file name of a one-page answer. */
export function singleName(basename: string, page: number, pageCount: number, extension = 'png'): string {
  return pageCount === 1 ? `${basename}.${extension}` : pageName(basename, page, pageCount, extension)
}

/** What a page operation or a compression did, in the name of the PDF it answers. */
const DONE = { merge: 'merged', rotate: 'rotated', flatten: 'flattened', compress: 'compressed' } as const

/**
 * pdfName: the file name of a PDF made from the upload `basename`: never the upload's own, so that a client that saves
 * the answer beside its input (`curl -OJ`, which refuses to replace a file) keeps both.
 */
export function pdfName(basename: string, done: keyof typeof DONE): string {
  return `${basename}-${DONE[done]}.pdf`
}

/** partName: the file name of a split's part, by its pages (`pagesLabel` of pages.ts: `report-pages-1-3.pdf`). */
export function partName(basename: string, label: string): string {
  return `${basename}-${label}.pdf`
}

/** splitOutput: a split's several PDFs, in a zip named `<basename>-split.zip`, each named by its pages (`labels`, in order). */
export function splitOutput(basename: string, labels: readonly string[]): PagesOutput {
  return zipOutput(`${basename}-split.zip`, (n) => partName(basename, labels[n - 1] ?? `part-${n}`))
}

/**
 * contentDisposition: `attachment` with a file name (one of ours: safeBasename's letters, digits, `.`, `-` and `_`). A name
 * that is not ASCII goes as RFC 6266's `filename*` (UTF-8, percent-encoded), beside an ASCII `filename` for clients that
 * read only that (curl's `-J`).
 */
export function contentDisposition(name: string): string {
  if (/^[\x20-\x7e]*$/.test(name)) return `attachment; filename="${name.replace(/["\\]/g, '_')}"`
  const ascii = name
    .normalize('NFKD')
    .replace(/\p{M}/gu, '')
    .replace(/[^\x20-\x7e]|["\\]/g, '_')
  const encoded = [...Buffer.from(name, 'utf8')]
    .map((byte) =>
      /[A-Za-z0-9!#$&+.^_`|~-]/.test(String.fromCharCode(byte)) ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`,
    )
    .join('')
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encoded}`
}

/** newZip: a zip to stream the pages into. */
export function newZip(): yazl.ZipFile {
  return new yazl.ZipFile()
}

/** addPage adds a page's image, stored as it is (every image format is compressed already). */
export function addPage(zip: yazl.ZipFile, bytes: Buffer, name: string): void {
  zip.addBuffer(bytes, name, { compress: false, mtime: ZIP_DATE })
}

/**
 * PagesOutput: the answer of several pages, streamed as they are added (in order): a zip of
 * images, or one TIFF, or text. It owns each page from `add` on: the page is copied out as the
 * stream is read and released then (spool.ts), or when the stream is destroyed; `taken` is
 * called once it is off the main thread's hands, either way.
 */
export interface PagesOutput {
  readonly type: string
  readonly name: string
  readonly stream: Readable
  add(page: number, bytes: Uint8Array, taken: () => void): void
  end(): void
}

/** pagesOutput: how `pages` pages of a `pageCount`-page document are answered in `format`. */
export function pagesOutput(format: ImageFormat, basename: string, pages: number, pageCount: number): PagesOutput {
  const { extension } = IMAGE_TYPES[format]
  if (format === 'tiff') {
    const tiff = new TiffPages(pages)
    const spool = new Spool()
    return {
      type: IMAGE_TYPES.tiff.type,
      name: `${basename}.${extension}`,
      stream: spool,
      add(_page, bytes, taken) {
        let parts: Uint8Array[]
        try {
          parts = tiff.page(bytes)
        } catch (error) {
          release(bytes)
          taken()
          spool.destroy(error as Error)
          return
        }
        spool.put(parts, bytes, taken)
      },
      end: () => spool.finish(),
    }
  }
  return zipOutput(`${basename}.zip`, (n) => pageName(basename, n, pageCount, extension))
}

/**
 * zipOutput: a zip named `name` of files named by `entry` (of each one's number, from 1), stored
 * (every format it holds is compressed already), streamed as they are added.
 * yazl keeps each buffer it is given until the zip's end (its entries hold them), and writes it
 * down whole: its output is read through a copier, which releases each page once copied out.
 */
function zipOutput(name: string, entry: (n: number) => string): PagesOutput {
  const zip = newZip()
  const copier = new Copier(zip.outputStream as Readable)
  return {
    type: 'application/zip',
    name,
    stream: copier,
    add(n, bytes, taken) {
      const page = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
      // An empty file is no chunk of yazl's output: nothing to wait for.
      if (page.byteLength === 0) taken()
      else copier.own(page, taken)
      if (!copier.destroyed) addPage(zip, page, entry(n))
    },
    end: () => zip.end(),
  }
}

/**
 * textOutput: a text answer, streamed as its pages are added (in order): a JSON array of the
 * pages' objects, or plain text with a form feed after each page (as pdftotext writes it).
 */
export function textOutput(format: TextFormat, basename: string): PagesOutput {
  const spool = new Spool()
  const plain = format === 'text'
  let written = 0
  return {
    type: plain ? 'text/plain; charset=utf-8' : 'application/json; charset=utf-8',
    name: `${basename}.${plain ? 'txt' : 'json'}`,
    stream: spool,
    add(_page, bytes, taken) {
      const parts = plain ? [bytes, FORM_FEED] : [written === 0 ? OPEN : COMMA, bytes]
      written++
      spool.put(parts, bytes, taken)
    },
    end() {
      if (!plain) spool.put([written === 0 ? EMPTY : CLOSE], null, () => undefined)
      spool.finish()
    },
  }
}

const FORM_FEED = Buffer.from('\f')
const OPEN = Buffer.from('[')
const COMMA = Buffer.from(',')
const CLOSE = Buffer.from(']')
const EMPTY = Buffer.from('[]')

/**
 * compressLimit: where pdfwrite is stopped. A file that grows a little is written to its end
 * (stopping Ghostscript costs its worker); one that would be more than twice the upload (at
 * least 4 MiB) is stopped there, as its output is no use: the upload is the answer.
 */
export function compressLimit(before: number, maxOutputBytes: number): number {
  return Math.min(maxOutputBytes, Math.max(2 * before, 4 * 1048576))
}
