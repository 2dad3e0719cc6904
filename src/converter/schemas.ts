/** Route schemas of the conversion group, for the OpenAPI document (multipart bodies are checked in upload.ts). */
import { Type } from 'typebox'
import { errorResponses } from '../openapi/responses.ts'
import type { ErrorCode } from '../errors/catalogue.ts'

const body = (extra: Record<string, ReturnType<typeof Type.String>>) =>
  Type.Object(
    {
      pdfDocument: Type.String({ format: 'binary', description: 'The PDF.' }),
      pages: Type.Optional(Type.String({ description: "Pages to convert, e.g. '1-3,5,9-' (default: all)." })),
      colorMode: Type.Optional(Type.String({ enum: ['rgb', 'gray'], default: 'rgb' })),
      password: Type.Optional(Type.String({ maxLength: 256, description: 'Password of an encrypted PDF.' })),
      ...extra,
    },
    { examples: [{ pdfDocument: '(the PDF file)', pages: '1-3', ...('dpi' in extra ? { dpi: 150 } : {}) }] },
  )

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
  summary: 'PDF to PNG: one page as a PNG, several as a zip of PNGs',
  description:
    'The zip holds `<basename>-<page>.png` (page numbers zero-padded to the width of the page count), in page order, stored without recompression, and is streamed as pages are rendered.',
  tags: ['converter'],
  consumes: ['multipart/form-data'],
  body: body({ dpi: Type.Optional(Type.Integer({ minimum: 36, maximum: 600, default: 150, description: 'Resolution of the PNGs.' })) as never }),
  response: {
    200: {
      description: 'The page, or a zip of the pages.',
      headers,
      content: {
        'image/png': { schema: Type.String({ format: 'binary' }) },
        'application/zip': { schema: Type.String({ format: 'binary' }) },
      },
    },
    ...errorResponses([...CODES, 'DPI_INVALID', 'PAGE_TOO_LARGE', 'PAGE_TOO_LARGE_AT_ANY_DPI']),
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
