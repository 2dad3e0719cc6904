/**
 * TiffPages joins single-page TIFF files (libvips writes one per page, in the workers) into
 * one multi-page TIFF, streamed: each page goes out as soon as it comes, in page order, so a
 * document's TIFF never has to be held whole (libvips could join pages only once all of them
 * are in memory). No TIFF library for Node writes pages as a stream; the container is simple.
 *
 * Each page becomes one block: its directory (IFD) first, then the directory's values, then
 * the page's strips (or tiles), every offset rewritten to the block's place in the file. The
 * directory's link to the next one is the end of its own block (the last page's is 0), which
 * is known when the block is written, whatever the next page will be. Each directory gets
 * NewSubfileType "page of a multi-page image" and PageNumber (its page, of how many), as
 * fax and archive readers expect; pointers to other directories (EXIF, sub-images) are dropped.
 * Classic little-endian TIFF only (what libtiff writes on the platforms the image is built for).
 */

/** Bytes per value of each TIFF field type. */
const TYPE_SIZE: Readonly<Record<number, number>> = { 1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 1, 7: 1, 8: 2, 9: 4, 10: 8, 11: 4, 12: 8, 13: 4 }
const SHORT = 3
const LONG = 4
const NEW_SUBFILE_TYPE = 254
const PAGE_NUMBER = 297
/** Tags whose values point elsewhere in the file (sub-IFDs, EXIF, GPS, interoperability): dropped, with the page tags set anew. */
const DROPPED = new Set([NEW_SUBFILE_TYPE, PAGE_NUMBER, 330, 34665, 34853, 40965])
/** Offsets and byte counts of the image data: strips, or tiles. */
const DATA_TAGS: readonly (readonly [number, number])[] = [
  [273, 279],
  [324, 325],
]
const MAX_OFFSET = 0xffffffff

interface Field {
  readonly tag: number
  readonly type: number
  readonly count: number
  /** The field's values, as the file stores them (little-endian). */
  readonly data: Uint8Array
}

class TiffError extends Error {
  override name = 'TiffError'
}

/** readPage reads a single-page TIFF: its first directory's fields, and its image data in order. */
function readPage(file: Uint8Array): { fields: Field[]; offsetsTag: number; chunks: Uint8Array[] } {
  const view = new DataView(file.buffer, file.byteOffset, file.byteLength)
  if (file.byteLength < 8 || view.getUint16(0) !== 0x4949 || view.getUint16(2, true) !== 42) throw new TiffError('not a little-endian classic TIFF')
  const at = view.getUint32(4, true)
  const count = view.getUint16(at, true)
  const fields: Field[] = []
  for (let i = 0; i < count; i++) {
    const entry = at + 2 + 12 * i
    const tag = view.getUint16(entry, true)
    const type = view.getUint16(entry + 2, true)
    const n = view.getUint32(entry + 4, true)
    const size = (TYPE_SIZE[type] ?? Number.NaN) * n
    if (!Number.isFinite(size)) throw new TiffError(`field ${tag} has an unknown type ${type}`)
    const start = size <= 4 ? entry + 8 : view.getUint32(entry + 8, true)
    if (start + size > file.byteLength) throw new TiffError(`field ${tag} runs past the end of the file`)
    fields.push({ tag, type, count: n, data: file.subarray(start, start + size) })
  }
  const values = (field: Field): number[] => {
    const v = new DataView(field.data.buffer, field.data.byteOffset, field.data.byteLength)
    return Array.from({ length: field.count }, (_, i) => (field.type === SHORT ? v.getUint16(2 * i, true) : v.getUint32(4 * i, true)))
  }
  for (const [offsetsTag, countsTag] of DATA_TAGS) {
    const offsets = fields.find((f) => f.tag === offsetsTag)
    const counts = fields.find((f) => f.tag === countsTag)
    if (offsets === undefined || counts === undefined) continue
    const starts = values(offsets)
    const lengths = values(counts)
    if (starts.length !== lengths.length) throw new TiffError('the image data has not as many offsets as counts')
    const chunks = starts.map((start, i) => {
      if (start + lengths[i]! > file.byteLength) throw new TiffError('image data runs past the end of the file')
      return file.subarray(start, start + lengths[i]!)
    })
    return { fields: fields.filter((f) => !DROPPED.has(f.tag)), offsetsTag, chunks }
  }
  throw new TiffError('the page has no image data')
}

const even = (n: number) => n + (n & 1)

export class TiffPages {
  readonly #pages: number
  #written = 0
  #index = 0

  /** `pages`: how many pages the file will hold (each page's directory says so). */
  constructor(pages: number) {
    this.#pages = pages
  }

  /**
   * page gives the bytes that add the next page (the file's header first, with the first page),
   * in parts: a small block of its own (the directory and its values), then the page's image
   * data as views into `file` (never copied: a 600-dpi page is 100 MB), with the padding between.
   */
  page(file: Uint8Array): Uint8Array[] {
    if (this.#index >= this.#pages) throw new TiffError('more pages than announced')
    const { fields, offsetsTag, chunks } = readPage(file)
    const header = this.#written === 0 ? 8 : 0
    const base = this.#written + header
    const pageFields: Field[] = [
      ...fields.filter((f) => f.tag !== offsetsTag),
      { tag: NEW_SUBFILE_TYPE, type: LONG, count: 1, data: u32s([2]) },
      { tag: PAGE_NUMBER, type: SHORT, count: 2, data: u16s([this.#index, this.#pages]) },
      { tag: offsetsTag, type: LONG, count: chunks.length, data: new Uint8Array(4 * chunks.length) },
    ].sort((a, b) => a.tag - b.tag)
    // Where everything goes: the directory, its values (each on an even offset), then the image data.
    let end = base + 2 + 12 * pageFields.length + 4
    const placed = pageFields.map((field) => {
      if (field.data.byteLength <= 4) return -1
      const at = even(end)
      end = at + field.data.byteLength
      return at
    })
    const chunkAt: number[] = []
    for (const chunk of chunks) {
      chunkAt.push(even(end))
      end = even(end) + chunk.byteLength
    }
    end = even(end)
    if (end > MAX_OFFSET) throw new TiffError('the TIFF would pass 4 GiB')
    const offsets = pageFields.find((f) => f.tag === offsetsTag)!
    const offsetsView = new DataView(offsets.data.buffer, offsets.data.byteOffset, offsets.data.byteLength)
    for (const [i, at] of chunkAt.entries()) offsetsView.setUint32(4 * i, at, true)

    const headEnd = chunkAt[0] ?? end
    const head = Buffer.alloc(headEnd - this.#written)
    const put = (at: number, bytes: Uint8Array) => head.set(bytes, at - this.#written)
    if (header > 0) head.set([0x49, 0x49, 42, 0, 8, 0, 0, 0])
    head.writeUInt16LE(pageFields.length, base - this.#written)
    pageFields.forEach((field, i) => {
      const entry = base - this.#written + 2 + 12 * i
      head.writeUInt16LE(field.tag, entry)
      head.writeUInt16LE(field.type, entry + 2)
      head.writeUInt32LE(field.count, entry + 4)
      if (placed[i] === -1) head.set(field.data, entry + 8)
      else {
        head.writeUInt32LE(placed[i]!, entry + 8)
        put(placed[i]!, field.data)
      }
    })
    this.#index++
    head.writeUInt32LE(this.#index < this.#pages ? end : 0, base - this.#written + 2 + 12 * pageFields.length)
    const parts: Uint8Array[] = [head]
    for (const [i, chunk] of chunks.entries()) {
      parts.push(chunk)
      const gap = (chunkAt[i + 1] ?? end) - (chunkAt[i]! + chunk.byteLength)
      if (gap > 0) parts.push(new Uint8Array(gap))
    }
    this.#written = end
    return parts
  }
}

function u32s(values: number[]): Uint8Array {
  const bytes = Buffer.alloc(4 * values.length)
  for (const [i, v] of values.entries()) bytes.writeUInt32LE(v, 4 * i)
  return bytes
}

function u16s(values: number[]): Uint8Array {
  const bytes = Buffer.alloc(2 * values.length)
  for (const [i, v] of values.entries()) bytes.writeUInt16LE(v, 2 * i)
  return bytes
}
