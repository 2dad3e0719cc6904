/** Route schemas of the conversion group, for the OpenAPI document (multipart bodies are checked in upload.ts). */
import { Type } from 'typebox'
import { errorResponses } from '../openapi/responses.ts'
import type { ErrorCode } from '../errors/catalogue.ts'
import { DEFAULT_QUALITY, IMAGE_FORMATS, MAX_BOX_SIDE, TIFF_BIT_DEPTHS, TIFF_COMPRESSIONS, WEBP_EFFORT } from '../domain/images.ts'
import type { JobOperation } from '../domain/jobs.ts'
import { FIELDS_TAKEN, type OptionField } from './route-fields.ts'

/** The fields the converting routes share, each documented where its route takes it (route-fields.ts). */
const SHARED_FIELDS = {
  pages: Type.Optional(Type.String({ description: "Pages to convert, e.g. '1-3,5,9-' (default: all)." })),
  colorMode: Type.Optional(Type.String({ enum: ['rgb', 'gray'], default: 'rgb' })),
  password: Type.Optional(Type.String({ maxLength: 256, description: 'Password of an encrypted PDF.' })),
}

const body = (operation: JobOperation, extra: Record<string, ReturnType<typeof Type.String>>, examples: Record<string, unknown>[] = [{}]) =>
  Type.Object(
    {
      pdfDocument: Type.String({ format: 'binary', description: 'The PDF.' }),
      ...Object.fromEntries(Object.entries(SHARED_FIELDS).filter(([field]) => FIELDS_TAKEN[operation].includes(field as OptionField))),
      ...extra,
    },
    { examples: examples.map((example) => ({ pdfDocument: '(the PDF file)', pages: '1-3', ...example })) },
  )

/** The image options (image-options.ts reads them), for the image route and image jobs. */
export const imageFields = {
  dpi: Type.Optional(Type.Integer({ minimum: 36, maximum: 600, default: 150, description: 'Resolution of the images (not with `width` or `height`).' })),
  format: Type.Optional(
    Type.String({
      enum: [...IMAGE_FORMATS],
      default: 'png',
      description:
        'The image format (`jpg` and `tif` are taken too). Several pages come as a zip of images, except TIFF: one multi-page TIFF, each page tagged with its number.',
    }),
  ),
  width: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: MAX_BOX_SIDE,
      description: 'A thumbnail: each page fitted within `width` × `height` pixels, its aspect kept (either may be left out), instead of a `dpi`.',
    }),
  ),
  height: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_BOX_SIDE, description: 'See `width`.' })),
  quality: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: 100,
      description: `JPEG and WebP only: the encoder's quality (default ${DEFAULT_QUALITY.jpeg} for JPEG, ${DEFAULT_QUALITY.webp} for WebP; WebP is written at effort ${WEBP_EFFORT}).`,
    }),
  ),
  compression: Type.Optional(
    Type.String({
      enum: [...TIFF_COMPRESSIONS],
      description: 'TIFF only (default `lzw`, or `ccittfax4` at `bitDepth` 1): `ccittfax4` is fax Group 4, for 1-bit pages; `jpeg` is for 8-bit ones.',
    }),
  ),
  bitDepth: Type.Optional(
    Type.Integer({
      enum: [...TIFF_BIT_DEPTHS],
      default: 8,
      description: 'TIFF only: 8 (gray levels or colours, as `colorMode`) or 1 (black and white: the gray levels cut at the middle, as fax pages are).',
    }),
  ),
}

/** The image options' errors. */
export const IMAGE_CODES: ErrorCode[] = [
  'DPI_INVALID',
  'IMAGE_FORMAT_INVALID',
  'BOX_SIZE_INVALID',
  'SIZE_CONFLICT',
  'QUALITY_INVALID',
  'COMPRESSION_INVALID',
  'BIT_DEPTH_INVALID',
  'COMPRESSION_BIT_DEPTH_CONFLICT',
  'OPTION_NOT_APPLICABLE',
]

/** The media types of an image answer. */
export const imageContent = {
  'image/png': { schema: Type.String({ format: 'binary' }) },
  'image/jpeg': { schema: Type.String({ format: 'binary' }) },
  'image/webp': { schema: Type.String({ format: 'binary' }) },
  'image/tiff': { schema: Type.String({ format: 'binary' }) },
  'application/zip': { schema: Type.String({ format: 'binary' }) },
}

/** The errors of the shared fields, answered by the routes that take them. */
const FIELD_CODES: Partial<Record<OptionField, ErrorCode[]>> = {
  dpi: ['DPI_INVALID'],
  pages: ['PAGES_INVALID', 'PAGES_OUT_OF_RANGE'],
  colorMode: ['COLOR_MODE_INVALID'],
  password: ['PASSWORD_INVALID'],
}

const CODES: ErrorCode[] = [
  'PDF_REQUIRED',
  'NOT_A_PDF',
  'FILE_TOO_LARGE',
  'TOO_MANY_PARTS',
  'PDF_UNREADABLE',
  'PAGE_UNREADABLE',
  'PDF_PASSWORD_REQUIRED',
  'TOO_MANY_PAGES',
  'CONVERSION_TIMEOUT',
  'CONVERSION_PAGE_TIMEOUT',
  'CONVERSION_FAILED',
  'QUEUE_FULL',
  'CONVERSIONS_PER_ACCOUNT',
  'OUTPUT_TOO_LARGE',
  'CONVERSION_MEMORY_EXCEEDED',
]
/** codesOf: a route's errors: every conversion's, its fields', OPTION_NOT_TAKEN for another route's field, and its own (`own`). */
const codesOf = (operation: JobOperation, own: ErrorCode[]): ErrorCode[] => [
  ...new Set([...CODES, ...FIELDS_TAKEN[operation].flatMap((field) => FIELD_CODES[field] ?? []), 'OPTION_NOT_TAKEN' as const, ...own]),
]

// Each header as a bare JSON schema: @fastify/swagger wraps it in the header object's `schema` itself.
const headers = {
  'X-Page-Count': { type: 'integer', description: 'Pages in the result.' },
  'Content-Disposition': {
    type: 'string',
    description:
      "attachment, with a file name derived from the upload's and never the same (`report.png`, `report.zip`, `report-merged.pdf`, `report-pages-1-3.pdf`); `filename*` (RFC 6266) when it is not ASCII.",
  },
}

export const imageSchema = {
  operationId: 'generateImage',
  summary: 'PDF to images (PNG, JPEG, WebP, TIFF) or thumbnails: one page as an image, several as a zip of images or one multi-page TIFF',
  description:
    "PNG by default, as always. The zip holds `<basename>-<page>.<png|jpg|webp>` (page numbers zero-padded to the width of the page count), in page order, stored without recompression; it and a multi-page TIFF are streamed as pages are rendered. `width` and/or `height` make thumbnails: each page fitted within the box, its aspect kept, the limiting side exactly the box's.",
  tags: ['converter'],
  consumes: ['multipart/form-data'],
  body: body('image', imageFields as never, [{ dpi: 150 }, { format: 'jpeg', quality: 85 }, { format: 'webp', width: 320 }, { format: 'tiff', bitDepth: 1 }]),
  response: {
    200: {
      description: 'The page, or a zip of the pages, or one multi-page TIFF.',
      headers,
      content: imageContent,
    },
    ...errorResponses(codesOf('image', [...IMAGE_CODES, 'PAGE_TOO_LARGE', 'PAGE_TOO_LARGE_AT_ANY_DPI', 'BOX_TOO_LARGE'])),
  },
}

export const postscriptSchema = {
  operationId: 'generatePostscript',
  summary: 'PDF to printer-friendly vector PostScript',
  description:
    "Ghostscript's ps2write: text and vector art stay vector; DSC-conformant Level 2 PostScript of the selected pages, streamed as it is written (at most `MAX_OUTPUT_BYTES`).",
  tags: ['converter'],
  consumes: ['multipart/form-data'],
  body: body('postscript', {
    dpi: Type.Optional(
      Type.Integer({
        minimum: 36,
        maximum: 600,
        default: 150,
        description: "Taken and checked as Renda.io's route took it (its clients send it), but PostScript is vector: it changes nothing.",
      }),
    ) as never,
  }),
  response: {
    200: { description: 'The PostScript.', headers, content: { 'application/postscript': { schema: Type.String({ format: 'binary' }) } } },
    ...errorResponses(codesOf('postscript', [])),
  },
}

const box = Type.Array(Type.Number(), { minItems: 4, maxItems: 4, description: 'x0, y0, x1, y1 in points from the top left of the page.' })

const textPage = Type.Object({
  page: Type.Integer({ description: 'The page number (1-based).' }),
  width: Type.Number({ description: 'The page width in points, as shown (after its rotation).' }),
  height: Type.Number({ description: 'The page height in points.' }),
  hasText: Type.Boolean({ description: 'Whether the page has text (false: no text layer, such as a scan; no OCR is made).' }),
  text: Type.Optional(Type.String({ description: '`json`: the text in reading order, lines ended by newlines, blocks by an empty line.' })),
  blocks: Type.Optional(
    Type.Array(
      Type.Object({
        bbox: box,
        lines: Type.Array(
          Type.Object({
            bbox: box,
            wmode: Type.Integer({ description: '0: horizontal, 1: vertical writing.' }),
            text: Type.String(),
            words: Type.Array(
              Type.Object({
                text: Type.String(),
                bbox: box,
                font: Type.String({ description: "The font's name as the PDF has it (a subset's `ABCDEF+` tag included)." }),
                size: Type.Number({ description: 'The font size in points.' }),
              }),
            ),
          }),
        ),
      }),
      { description: '`structured`: the text blocks, lines and words, in reading order.' },
    ),
  ),
})

export const textSchema = {
  operationId: 'extractText',
  summary: "PDF to text: each page's text in reading order, plain or with its layout (blocks, lines, words with boxes and fonts)",
  description:
    "MuPDF's text extraction of what is drawn on each page: its contents, and its annotations and form fields (a filled field's value is its page's text, as `pdftotext` and `mutool draw -F txt` read it); page-parallel, streamed in page order. `format`: `json` (default) answers a JSON array of pages with their text; `structured` the same with blocks, lines and words (boxes in points, fonts, sizes) instead of the text; `text` plain UTF-8 text with a form feed after each page, as `pdftotext` writes it (also chosen by `Accept: text/plain` when `format` is not sent). A page with no text layer has `hasText: false` (no OCR).",
  tags: ['converter'],
  consumes: ['multipart/form-data'],
  body: body('text', { format: Type.Optional(Type.String({ enum: ['json', 'text', 'structured'], default: 'json' })) as never }, [
    {},
    { format: 'structured' },
  ]),
  response: {
    200: {
      description: "The pages' text.",
      headers: { 'X-Page-Count': headers['X-Page-Count'], 'Content-Disposition': headers['Content-Disposition'] },
      content: {
        'application/json': {
          schema: Type.Array(textPage, {
            examples: [[{ page: 1, width: 595.28, height: 841.89, hasText: true, text: 'Quarterly report\n\nRevenue rose 4% on the quarter.\n' }]],
          }),
        },
        'text/plain': { schema: Type.String() },
      },
    },
    ...errorResponses(codesOf('text', ['TEXT_FORMAT_INVALID'])),
  },
}

export const compressSchema = {
  operationId: 'compressPdf',
  summary: "PDF made smaller by Ghostscript's pdfwrite with a preset, never larger than it came",
  description:
    "Ghostscript's `pdfwrite` with `-dPDFSETTINGS=/<preset>`, as `gs` would: `screen` (72 dpi images, smallest), `ebook` (150 dpi, the default), `printer` (300 dpi), `prepress` (300 dpi, colour kept for print). The whole document is rewritten (`pages` is not taken); `colorMode=gray` also converts it to gray. When pdfwrite's file would be larger than the upload, the upload itself is answered (`X-Compressed: false`). `X-Size-Before` and `X-Size-After` give both sizes in bytes.",
  tags: ['converter'],
  consumes: ['multipart/form-data'],
  body: Type.Object(
    {
      pdfDocument: Type.String({ format: 'binary', description: 'The PDF.' }),
      preset: Type.Optional(Type.String({ enum: ['screen', 'ebook', 'printer', 'prepress'], default: 'ebook' })),
      colorMode: Type.Optional(Type.String({ enum: ['rgb', 'gray'], default: 'rgb' })),
      password: Type.Optional(Type.String({ maxLength: 256, description: 'Password of an encrypted PDF (the answer is not encrypted).' })),
    },
    { examples: [{ pdfDocument: '(the PDF file)', preset: 'ebook' }] },
  ),
  response: {
    200: {
      description: 'The smaller PDF, or the upload when pdfwrite could not make it smaller.',
      headers: {
        ...headers,
        'X-Size-Before': { type: 'integer', description: "The upload's size in bytes." },
        'X-Size-After': { type: 'integer', description: "The answer's size in bytes (at most X-Size-Before)." },
        'X-Compressed': { type: 'string', enum: ['true', 'false'], description: "false when the upload itself is answered (pdfwrite's file was larger)." },
      },
      content: { 'application/pdf': { schema: Type.String({ format: 'binary' }) } },
    },
    ...errorResponses(codesOf('compress', ['PRESET_INVALID'])),
  },
}

const pdfAnswer = (description: string) => ({
  description,
  headers: {
    'X-Page-Count': { type: 'integer', description: 'Pages in the answer (in all its PDFs).' },
    ...{ 'Content-Disposition': headers['Content-Disposition'] },
  },
  content: { 'application/pdf': { schema: Type.String({ format: 'binary' }) }, 'application/zip': { schema: Type.String({ format: 'binary' }) } },
})

const password = Type.Optional(Type.String({ maxLength: 256, description: 'Password of an encrypted PDF (the answer is not encrypted).' }))
const pdfDocument = Type.String({ format: 'binary', description: 'The PDF.' })
const pages = Type.Optional(Type.String({ description: "Pages, e.g. '1-3,5,9-' (default: all)." }))

/** The page operations' route schemas. */
export const editSchemas = {
  merge: {
    operationId: 'mergePdfs',
    summary: 'Merge PDFs: the pages of several documents, in order, in one PDF',
    description:
      "2 to 20 documents, each in a `pdfDocument` part, in the order their pages go (at most `MAX_UPLOAD_BYTES` together). `pages` and `password` may be sent once per document, in the documents' order (an empty one: all pages, no password). Each page keeps its content, annotations, links between the pages kept and form fields; the documents' outlines, page labels and metadata are not carried.",
    tags: ['converter'],
    consumes: ['multipart/form-data'],
    body: Type.Object(
      {
        pdfDocument: Type.Array(pdfDocument, { minItems: 2, maxItems: 20, description: 'The documents, in order.' }),
        pages: Type.Optional(Type.Array(Type.String(), { description: "Each document's pages, in the documents' order." })),
        password: Type.Optional(Type.Array(Type.String({ maxLength: 256 }), { description: "Each document's password, in the documents' order." })),
      },
      { examples: [{ pdfDocument: ['(cover.pdf)', '(report.pdf)'], pages: ['1', '2-'] }] },
    ),
    response: {
      200: pdfAnswer('The merged PDF.'),
      ...errorResponses(codesOf('merge', ['MERGE_DOCUMENTS_REQUIRED', 'MERGE_FIELDS_MISMATCH', 'MERGE_DOCUMENT_REFUSED'])),
    },
  },
  split: {
    operationId: 'splitPdf',
    summary: 'Split a PDF into several: by page ranges, or every N pages (a zip of PDFs)',
    description:
      "`ranges`: a page selection a PDF, one `ranges` field each (`-F ranges=1-3 -F ranges=4-6 -F ranges=7-`; a field may also hold several separated by semicolons, `1-3;4-6;7-`, which curl's `-F` cuts at the first `;`: send that with `--form-string`); or `every`: that many pages a PDF (of the pages chosen by `pages`). Each PDF is named by its pages (`<name>-pages-1-3.pdf`), in a zip (`<name>-split.zip`), or alone. Pages keep their content, annotations and form fields.",
    tags: ['converter'],
    consumes: ['multipart/form-data'],
    body: Type.Object(
      {
        pdfDocument,
        ranges: Type.Optional(
          Type.Array(Type.String(), {
            description: 'A page selection a PDF, one field each, in order (a field may hold several separated by semicolons); not with `every`.',
          }),
        ),
        every: Type.Optional(Type.Integer({ minimum: 1, description: 'Pages a PDF (not with `ranges`).' })),
        pages,
        password,
      },
      {
        examples: [
          { pdfDocument: '(the PDF file)', ranges: ['1-3', '4-'] },
          { pdfDocument: '(the PDF file)', every: 1 },
        ],
      },
    ),
    response: {
      200: pdfAnswer('The PDFs in a zip, or the one PDF.'),
      ...errorResponses(codesOf('split', ['SPLIT_PARTS_REQUIRED', 'SPLIT_EVERY_INVALID', 'SPLIT_RANGES_INVALID'])),
    },
  },
  rotate: {
    operationId: 'rotatePdf',
    summary: 'Rotate pages of a PDF by quarter turns',
    description:
      "`angle` (90, 180, 270 clockwise; negative turns the other way) is added to each chosen page's rotation; the other pages are left as they are. The file is appended to (its bytes kept) unless it had to be repaired or decrypted.",
    tags: ['converter'],
    consumes: ['multipart/form-data'],
    body: Type.Object(
      {
        pdfDocument,
        angle: Type.Integer({ enum: [90, 180, 270, -90, -180, -270] }),
        pages: Type.Optional(Type.String({ description: "Pages to turn, e.g. '2,4' (default: all)." })),
        password,
      },
      { examples: [{ pdfDocument: '(the PDF file)', angle: 90, pages: '2' }] },
    ),
    response: { 200: pdfAnswer('The PDF with its pages turned.'), ...errorResponses(codesOf('rotate', ['ANGLE_INVALID'])) },
  },
  flatten: {
    operationId: 'flattenPdf',
    summary: 'Flatten a PDF: form fields and annotations drawn into the pages, no form left',
    description:
      'Each field is drawn with its value as viewers show it (appearances made where the form asks readers to make them), then fields and annotations become part of the page content: what prints is what was filled in, and nothing can be edited.',
    tags: ['converter'],
    consumes: ['multipart/form-data'],
    body: Type.Object({ pdfDocument, password }, { examples: [{ pdfDocument: '(the filled-in form)' }] }),
    response: { 200: pdfAnswer('The flat PDF.'), ...errorResponses(codesOf('flatten', [])) },
  },
}
