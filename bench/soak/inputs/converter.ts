/**
 * The soak's inputs for the synchronous conversions (/converter/*): each route's valid options
 * and its limits (MAX_PAGES, dpi, boxes), the damaged and fuzzed documents and the bombs of
 * documents.ts, multipart bodies bent every way, uploads cut off or sent slowly, and answers
 * read slowly, not read, or hung up on.
 */
import { DOCS, fuzz, tooLarge, type DocName } from '../documents.ts'
import type { Case, Mode, Request, Table } from '../types.ts'
import { hostileText, multipart, pdf, type Part } from './common.ts'

const fields = (f: Record<string, string>): Part[] => Object.entries(f).map(([name, value]) => ({ name, value }))
const send = (doc: Buffer, f: Record<string, string> = {}, mode?: Mode): Request => ({ ...multipart([pdf(doc), ...fields(f)]), ...(mode ? { mode } : {}) })

/** The documents every route is tried with, and what each may get. */
const DAMAGED: readonly DocName[] = ['truncated', 'badXref', 'headerOnly', 'empty', 'notPdf']
const BOMBS: readonly DocName[] = ['formBomb', 'jpxBomb', 'jbig2Bomb', 'hugeImage']

/** Cases every synchronous route gets with its own fields (`f`) besides its own cases. */
function documents(f: Record<string, string>, pages = true, stallFields?: Record<string, string>): Case[] {
  return [
    ...DAMAGED.map((d): Case => ({ name: `damaged: ${d}`, kind: 'hostile', make: () => ({ ...send(DOCS[d], f), note: d }) })),
    {
      name: 'fuzzed (a seed each time)',
      kind: 'hostile',
      mayCut: true,
      make: (c) => {
        const seed = c.next()
        return { ...send(fuzz(seed), f), note: `fuzz seed ${seed}` }
      },
    },
    ...BOMBS.map((d): Case => ({ name: `bomb: ${d}`, kind: 'hostile', heavy: true, mayCut: true, make: () => ({ ...send(DOCS[d], f), note: d }) })),
    { name: 'a shallow form bomb (slow, finite)', kind: 'hostile', heavy: true, mayCut: true, make: () => send(DOCS.shallowFormBomb, f) },
    { name: 'one page past MAX_PAGES', kind: 'hostile', expect: [422], make: () => send(DOCS.overMaxPages, f) },
    { name: 'one byte past MAX_UPLOAD_BYTES', kind: 'hostile', heavy: true, expect: [413], make: () => send(tooLarge(), f) },
    { name: 'no document', kind: 'hostile', expect: [400], make: () => multipart(fields(f)) },
    {
      name: 'the document in another field, a path for its name',
      kind: 'hostile',
      make: () => multipart([{ ...pdf(DOCS.one, '../../etc/passwd\u202e.pdf'), name: 'file' }]),
    },
    {
      name: 'a file name of hostile text',
      kind: 'hostile',
      make: (c) => multipart([pdf(DOCS.one, `${hostileText(c.next()).slice(0, 300)}.pdf`), ...fields(f)]),
    },
    {
      name: 'a broken multipart body',
      kind: 'hostile',
      make: () => ({
        body: '--x\r\nContent-Disposition: form-data; name="pdfDocument"\r\n\r\n%PDF',
        headers: { 'content-type': 'multipart/form-data; boundary=x' },
      }),
    },
    { name: 'not multipart', kind: 'hostile', expect: [415, 400], make: () => ({ body: DOCS.one, headers: { 'content-type': 'application/pdf' } }) },
    { name: 'a password of 257', kind: 'hostile', expect: [400], make: () => send(DOCS.one, { ...f, password: 'p'.repeat(257) }) },
    ...(pages
      ? [
          {
            name: 'pages of junk',
            kind: 'hostile',
            expect: [400, 422],
            make: (c) => send(DOCS.ten, { ...f, pages: ['0', '-', '1-999999', 'a'.repeat(5000), '3-1', '1,,2', '\ud800'][c.next() % 7]! }),
          } satisfies Case,
          { name: 'the same page 2000 times', kind: 'boundary', make: () => send(DOCS.three, { ...f, pages: Array(2000).fill('1').join(',') }) } satisfies Case,
        ]
      : []),
    { name: 'no key', kind: 'hostile', expect: [403], make: () => withHeaders(send(DOCS.one, f), { 'x-api-key': '' }) },
    { name: 'hang up mid-upload', kind: 'hostile', make: () => send(DOCS.forty, f, 'abort-upload') },
    { name: 'slow upload', kind: 'boundary', make: () => send(DOCS.ten, f, 'slow-upload') },
    { name: 'hang up mid-download', kind: 'hostile', make: () => send(DOCS.forty, f, 'abort-download') },
    { name: 'slow reader', kind: 'boundary', make: () => send(DOCS.forty, f, 'slow-read') },
    { name: 'a reader that stops reading', kind: 'hostile', make: () => send(DOCS.forty, stallFields ?? f, 'stall') },
  ]
}

export const CONVERTER: Table = {
  generateImage: [
    { name: 'one page to PNG', kind: 'valid', expect: [200], make: () => send(DOCS.one, { dpi: '72' }) },
    { name: 'three pages, a zip of PNGs', kind: 'valid', expect: [200], make: () => send(DOCS.three, { dpi: '100', pages: '1-3' }) },
    {
      name: 'JPEG, WebP, gray',
      kind: 'valid',
      expect: [200],
      make: (c) => send(DOCS.three, { format: c.next() % 2 ? 'jpeg' : 'webp', quality: '60', colorMode: 'gray' }),
    },
    {
      name: 'a multi-page TIFF, fax Group 4',
      kind: 'valid',
      expect: [200],
      make: () => send(DOCS.ten, { format: 'tiff', bitDepth: '1', compression: 'ccittfax4', dpi: '100' }),
    },
    { name: 'thumbnails in a box', kind: 'valid', expect: [200], make: () => send(DOCS.ten, { width: '200', height: '200' }) },
    { name: 'dpi 600 on one page', kind: 'boundary', expect: [200], make: () => send(DOCS.one, { dpi: '600' }) },
    { name: 'the largest box', kind: 'boundary', expect: [200, 422], make: () => send(DOCS.one, { width: '10000', height: '10000' }) },
    { name: 'MAX_PAGES at the lowest dpi', kind: 'boundary', heavy: true, expect: [200], mayCut: true, make: () => send(DOCS.maxPages, { dpi: '36' }) },
    {
      name: 'dpi and a box out of range',
      kind: 'hostile',
      expect: [400],
      make: (c) => send(DOCS.one, [{ dpi: '601' }, { dpi: '0' }, { width: '10001' }, { dpi: '1e309' }][c.next() % 4]!),
    },
    {
      name: 'options in conflict',
      kind: 'hostile',
      expect: [400],
      make: () => send(DOCS.one, { format: 'png', bitDepth: '1', compression: 'jpeg', dpi: '72', width: '10' }),
    },
    { name: 'large pages of random pixels', kind: 'hostile', heavy: true, mayCut: true, make: () => send(DOCS.randomImages, { dpi: '300' }) },
    // At 300 dpi the zip of forty pages (about 8 MB) outgrows the socket's buffers: a reader that stops holds the answer up.
    ...documents({ dpi: '72' }, true, { dpi: '300' }),
  ],
  generatePostscript: [
    { name: 'three pages', kind: 'valid', expect: [200], make: () => send(DOCS.three) },
    { name: 'gray, some pages', kind: 'valid', expect: [200], make: () => send(DOCS.ten, { colorMode: 'gray', pages: '2-4,9' }) },
    { name: 'MAX_PAGES', kind: 'boundary', heavy: true, expect: [200], mayCut: true, make: () => send(DOCS.maxPages) },
    { name: 'pages of random pixels', kind: 'hostile', heavy: true, mayCut: true, make: () => send(DOCS.randomImages) },
    ...documents({}),
  ],
  extractText: [
    { name: 'JSON', kind: 'valid', expect: [200], make: () => send(DOCS.three) },
    {
      name: 'plain text by Accept',
      kind: 'valid',
      expect: [200],
      make: () => withHeaders(send(DOCS.ten), { accept: 'text/plain' }),
    },
    { name: 'structured', kind: 'valid', expect: [200], make: () => send(DOCS.three, { format: 'structured' }) },
    { name: 'MAX_PAGES, structured', kind: 'boundary', heavy: true, expect: [200], mayCut: true, make: () => send(DOCS.maxPages, { format: 'structured' }) },
    { name: 'a format it does not know', kind: 'hostile', expect: [400], make: () => send(DOCS.one, { format: 'xml' }) },
    ...documents({ format: 'text' }),
  ],
  mergePdfs: [
    { name: 'two documents', kind: 'valid', expect: [200], make: () => multipart([pdf(DOCS.three, 'a.pdf'), pdf(DOCS.ten, 'b.pdf')]) },
    {
      name: 'pages per document',
      kind: 'valid',
      expect: [200],
      make: () => multipart([pdf(DOCS.three), pdf(DOCS.ten), ...fields({ pages: '1' }), ...fields({ pages: '2-' })]),
    },
    {
      name: 'twenty documents',
      kind: 'boundary',
      expect: [200],
      make: () => multipart(Array.from({ length: 20 }, (_, i) => pdf(i % 2 ? DOCS.one : DOCS.three, `d${i}.pdf`))),
    },
    { name: 'twenty-one documents', kind: 'hostile', expect: [400], make: () => multipart(Array.from({ length: 21 }, () => pdf(DOCS.one))) },
    { name: 'one document', kind: 'hostile', expect: [400], make: () => multipart([pdf(DOCS.one)]) },
    {
      name: 'pages given for the first of three',
      kind: 'boundary',
      expect: [200],
      make: () => multipart([pdf(DOCS.one), pdf(DOCS.three), pdf(DOCS.one), ...fields({ pages: '1' })]),
    },
    {
      name: 'more pages fields than documents',
      kind: 'hostile',
      expect: [400],
      make: () => multipart([pdf(DOCS.one), pdf(DOCS.one), ...fields({ pages: '1' }), ...fields({ pages: '1' }), ...fields({ pages: '1' })]),
    },
    { name: 'a damaged one among them', kind: 'hostile', make: (c) => multipart([pdf(DOCS.three), pdf(fuzz(c.next())), pdf(DOCS.truncated)]) },
    ...documents({}, false).map((d) => ({ ...d, make: async (c: Parameters<Case['make']>[0]) => withSecond(await d.make(c)) })),
  ],
  splitPdf: [
    { name: 'every page', kind: 'valid', expect: [200], make: () => send(DOCS.ten, { every: '1' }) },
    { name: 'ranges', kind: 'valid', expect: [200], make: () => send(DOCS.ten, { ranges: '1-3;4-6;7-' }) },
    {
      name: 'ranges, one field a part (as curl -F sends them)',
      kind: 'valid',
      expect: [200],
      make: () => multipart([pdf(DOCS.ten), ...['1-3', '4-6', '7-'].map((value) => ({ name: 'ranges', value }))]),
    },
    { name: 'every page of MAX_PAGES', kind: 'boundary', heavy: true, expect: [200], mayCut: true, make: () => send(DOCS.maxPages, { every: '1' }) },
    {
      name: 'ranges and every, zero, junk',
      kind: 'hostile',
      expect: [400],
      make: (c) => send(DOCS.ten, [{ every: '0' }, { every: '-1' }, { ranges: ';;;' }, { ranges: '1-3', every: '2' }, {}][c.next() % 5]!),
    },
    ...documents({ every: '2' }),
  ],
  rotatePdf: [
    { name: 'a quarter turn of some pages', kind: 'valid', expect: [200], make: () => send(DOCS.ten, { angle: '90', pages: '2,4' }) },
    { name: 'every page the other way', kind: 'boundary', expect: [200], make: () => send(DOCS.three, { angle: '-270' }) },
    { name: 'an angle it does not take', kind: 'hostile', expect: [400], make: (c) => send(DOCS.one, [{ angle: '45' }, {}, { angle: '9e99' }][c.next() % 3]!) },
    ...documents({ angle: '180' }),
  ],
  flattenPdf: [
    { name: 'three pages', kind: 'valid', expect: [200], make: () => send(DOCS.three) },
    { name: 'MAX_PAGES', kind: 'boundary', heavy: true, expect: [200], make: () => send(DOCS.maxPages) },
    { name: 'pages, which it does not take', kind: 'hostile', expect: [400], make: () => send(DOCS.three, { pages: '1' }) },
    ...documents({}, false),
  ],
  compressPdf: [
    { name: 'ebook', kind: 'valid', expect: [200], make: () => send(DOCS.three) },
    { name: 'screen, gray', kind: 'valid', expect: [200], make: () => send(DOCS.ten, { preset: 'screen', colorMode: 'gray' }) },
    { name: 'prepress on pixels', kind: 'boundary', heavy: true, expect: [200], make: () => send(DOCS.randomImages, { preset: 'prepress' }) },
    {
      name: 'a preset it does not know, pages',
      kind: 'hostile',
      expect: [400],
      make: (c) => send(DOCS.one, [{ preset: 'tiny' }, { pages: '1' }][c.next() % 2]!),
    },
    ...documents({ preset: 'screen' }, false),
  ],
}

/** withHeaders adds headers to a request's own (its content type, with its boundary, kept). */
const withHeaders = (r: Request, headers: Record<string, string>): Request => ({ ...r, headers: { ...r.headers, ...headers } })

/** withSecond adds a valid second document to a case's body, so that a merge gets the first as one of two. */
function withSecond(r: Request): Request {
  const type = r.headers?.['content-type'] ?? ''
  const boundary = /boundary=(\S+)/.exec(type)?.[1]
  if (boundary === undefined || !Buffer.isBuffer(r.body)) return r
  const end = Buffer.from(`--${boundary}--\r\n`)
  const at = r.body.lastIndexOf(end)
  if (at < 0) return r
  const second = Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="pdfDocument"; filename="second.pdf"\r\nContent-Type: application/pdf\r\n\r\n`),
    DOCS.one,
    Buffer.from('\r\n'),
  ])
  return { ...r, body: Buffer.concat([r.body.subarray(0, at), second, r.body.subarray(at)]) }
}
