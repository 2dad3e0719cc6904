/**
 * The documents the soak sends, all made here at start (none read from outside the repository):
 * small valid PDFs of text pages, the page-count boundary, and the hostile ones of
 * test/support/hostile.ts (bombs of forms, JPEG 2000, JBIG2 and Flate, a fuzzer's damage by
 * seed) with a few damaged shapes of their own (cut short, its xref gone, not a PDF at all).
 */
import { formBomb, fuzzed, hugeImage, jbig2Bomb, jpxBomb, randomImagePages, textPages } from '../../test/support/hostile.ts'

const base100 = textPages(100)
const ten = textPages(10)

/** The documents by name; each is made once. */
export const DOCS = {
  one: textPages(1),
  three: textPages(3),
  ten,
  forty: textPages(40),
  /** MAX_PAGES (500) pages: the most a synchronous conversion takes. */
  maxPages: textPages(500),
  /** One page more than MAX_PAGES. */
  overMaxPages: textPages(501),
  /** 4^30 squares a page: no engine ends it (the page clock stops it). */
  formBomb: formBomb(),
  /** 65 536 squares on each of 3 pages: slow but finite. */
  shallowFormBomb: formBomb(8, 4, 3),
  jpxBomb: jpxBomb(),
  jbig2Bomb: jbig2Bomb(),
  hugeImage: hugeImage(),
  /** 1.2 MB of incompressible pixels on each of 60 pages: large output. */
  randomImages: randomImagePages(60),
  empty: Buffer.alloc(0),
  notPdf: Buffer.from('\x89PNG\r\n\x1a\n this is not a PDF at all', 'latin1'),
  /** A PDF cut at two thirds: no xref, no trailer. */
  truncated: ten.subarray(0, Math.floor((ten.length * 2) / 3)),
  /** The xref table's offsets all wrong by one: MuPDF repairs it. */
  badXref: Buffer.from(
    ten.toString('latin1').replace(/(\d{10}) 00000 n/g, (_m, o: string) => `${String(Number(o) + 1).padStart(10, '0')} 00000 n`),
    'latin1',
  ),
  /** Only the header. */
  headerOnly: Buffer.from('%PDF-1.7\n', 'latin1'),
} as const

export type DocName = keyof typeof DOCS

/** fuzz damages textPages(100) the way the fuzzer of hostile.ts does, the same for the same seed. */
export const fuzz = (seed: number) => fuzzed(base100, seed)

/** tooLarge is one byte over MAX_UPLOAD_BYTES (50 MiB): a PDF header and zeros, made on first use. */
let tooLargeDoc: Buffer | undefined
export const tooLarge = () => (tooLargeDoc ??= Buffer.concat([Buffer.from('%PDF-1.7\n'), Buffer.alloc(50 * 1024 * 1024 + 1 - 9)]))
