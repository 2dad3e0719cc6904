/** Route schemas of the conversion group, for the OpenAPI document (multipart bodies are checked in upload.ts). */
import { Type } from 'typebox'
import { errorResponses } from '../openapi/responses.ts'
import type { ErrorCode } from '../errors/catalogue.ts'
import { DEFAULT_QUALITY, IMAGE_FORMATS, MAX_BOX_SIDE, TIFF_BIT_DEPTHS, TIFF_COMPRESSIONS, WEBP_EFFORT } from '../domain/images.ts'

const body = (extra: Record<string, ReturnType<typeof Type.String>>, examples: Record<string, unknown>[] = [{}]) =>
  Type.Object(
    {
      pdfDocument: Type.String({ format: 'binary', description: 'The PDF.' }),
      pages: Type.Optional(Type.String({ description: "Pages to convert, e.g. '1-3,5,9-' (default: all)." })),
      colorMode: Type.Optional(Type.String({ enum: ['rgb', 'gray'], default: 'rgb' })),
      password: Type.Optional(Type.String({ maxLength: 256, description: 'Password of an encrypted PDF.' })),
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

const CODES: ErrorCode[] = [
  'PDF_REQUIRED',
  'NOT_A_PDF',
  'PAGES_INVALID',
  'COLOR_MODE_INVALID',
  'PASSWORD_INVALID',
  'PAGES_OUT_OF_RANGE',
  'FILE_TOO_LARGE',
  'TOO_MANY_PARTS',
  'PDF_UNREADABLE',
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
// Each header as a bare JSON schema: @fastify/swagger wraps it in the header object's `schema` itself.
const headers = {
  'X-Page-Count': { type: 'integer', description: 'Pages in the result.' },
  'Content-Disposition': { type: 'string', description: 'attachment, with a file name derived from the upload.' },
}

export const imageSchema = {
  operationId: 'generateImage',
  summary: 'PDF to images (PNG, JPEG, WebP, TIFF) or thumbnails: one page as an image, several as a zip of images or one multi-page TIFF',
  description:
    "PNG by default, as always. The zip holds `<basename>-<page>.<png|jpg|webp>` (page numbers zero-padded to the width of the page count), in page order, stored without recompression; it and a multi-page TIFF are streamed as pages are rendered. `width` and/or `height` make thumbnails: each page fitted within the box, its aspect kept, the limiting side exactly the box's.",
  tags: ['converter'],
  consumes: ['multipart/form-data'],
  body: body(imageFields as never, [{ dpi: 150 }, { format: 'jpeg', quality: 85 }, { format: 'webp', width: 320 }, { format: 'tiff', bitDepth: 1 }]),
  response: {
    200: {
      description: 'The page, or a zip of the pages, or one multi-page TIFF.',
      headers,
      content: imageContent,
    },
    ...errorResponses([...CODES, ...IMAGE_CODES, 'PAGE_TOO_LARGE', 'PAGE_TOO_LARGE_AT_ANY_DPI', 'BOX_TOO_LARGE']),
  },
}

export const postscriptSchema = {
  operationId: 'generatePostscript',
  summary: 'PDF to printer-friendly vector PostScript',
  description:
    "Ghostscript's ps2write: text and vector art stay vector; DSC-conformant Level 2 PostScript of the selected pages, streamed as it is written (at most `MAX_OUTPUT_BYTES`).",
  tags: ['converter'],
  consumes: ['multipart/form-data'],
  body: body({}),
  response: {
    200: { description: 'The PostScript.', headers, content: { 'application/postscript': { schema: Type.String({ format: 'binary' }) } } },
    // readUpload checks `dpi` on both routes, so a bad one is refused here too, though PostScript has no use for it.
    ...errorResponses([...CODES, 'DPI_INVALID']),
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
    "MuPDF's text extraction, page-parallel, streamed in page order. `format`: `json` (default) answers a JSON array of pages with their text; `structured` the same with blocks, lines and words (boxes in points, fonts, sizes) instead of the text; `text` plain UTF-8 text with a form feed after each page, as `pdftotext` writes it (also chosen by `Accept: text/plain` when `format` is not sent). A page with no text layer has `hasText: false` (no OCR).",
  tags: ['converter'],
  consumes: ['multipart/form-data'],
  body: body({ format: Type.Optional(Type.String({ enum: ['json', 'text', 'structured'], default: 'json' })) as never }, [{}, { format: 'structured' }]),
  response: {
    200: {
      description: 'The pages\' text.',
      headers: { 'X-Page-Count': headers['X-Page-Count'] },
      content: {
        'application/json': {
          schema: Type.Array(textPage, {
            examples: [[{ page: 1, width: 595.28, height: 841.89, hasText: true, text: 'Quarterly report\n\nRevenue rose 4% on the quarter.\n' }]],
          }),
        },
        'text/plain': { schema: Type.String() },
      },
    },
    ...errorResponses([...CODES, 'TEXT_FORMAT_INVALID', 'DPI_INVALID']),
  },
}
