/**
 * What a conversion's answer is made of, the same for the synchronous routes and for jobs, so
 * that a job's result is byte for byte the synchronous route's answer: the names of the pages,
 * the zip's entries, and their date. The date is fixed, so the same document and options give
 * the same bytes (a cache, a checksum or a diff of two runs sees nothing change).
 */
import yazl from 'yazl'

/** The date every zip entry carries (midday, so that no time zone moves it to another day). */
const ZIP_DATE = new Date('2000-01-01T12:00:00Z')

/** pageName: a page's file name; a one-page document's PNG carries the document's name alone. */
export function pageName(basename: string, page: number, pageCount: number): string {
  return `${basename}-${String(page).padStart(String(pageCount).length, '0')}.png`
}

/** singleName: the file name of a one-page answer. */
export function singleName(basename: string, page: number, pageCount: number): string {
  return pageCount === 1 ? `${basename}.png` : pageName(basename, page, pageCount)
}

/** newZip: a zip to stream the pages into. */
export function newZip(): yazl.ZipFile {
  return new yazl.ZipFile()
}

/** addPage adds a page's PNG, stored as it is (PNG is compressed already). */
export function addPage(zip: yazl.ZipFile, png: Uint8Array, name: string): void {
  zip.addBuffer(Buffer.from(png.buffer, png.byteOffset, png.byteLength), name, { compress: false, mtime: ZIP_DATE })
}
