/**
 * readUpload reads a conversion request: the PDF from the multipart field `pdfDocument`
 * (held in memory, up to MAX_UPLOAD_BYTES) and the option fields, and reports every
 * problem at once.
 */
import type { FastifyRequest } from 'fastify'
import type {} from '@fastify/multipart'
import type { Config } from '../config/config.ts'
import { ApiError, apiError, type Problem } from '../errors/errors.ts'
import { COMPRESS_PRESETS, type ColorMode, type CompressPreset } from './engines/engine.ts'
import { parsePages, type Range } from './pages.ts'
import { MAX_DPI, MIN_DPI } from './protocol.ts'
import { shared } from './pool.ts'
import type { ImageOptions } from '../domain/images.ts'
import { readImageOptions } from './image-options.ts'
import type { EditSpec, TextSpec } from './protocol.ts'
import { EDIT_KINDS, readEditOptions, type EditKind } from './edit-options.ts'
import { TEXT_FORMATS, type TextFormat } from '../domain/text.ts'
import type { JobOperation } from '../domain/jobs.ts'
import { OPERATION_ROUTES, takenFields } from './route-fields.ts'

/** A conversion's options, checked. */
export interface ConversionOptions {
  readonly dpi: number
  readonly pages: Range[] | null
  readonly color: ColorMode
  readonly password?: string
}

export interface Upload extends ConversionOptions {
  readonly pdf: Uint8Array
  readonly basename: string
  /** The image options, on the image route. */
  readonly image?: ImageOptions
  /** The text's form, on the text route. */
  readonly text?: TextSpec
  /** The pdfwrite preset, on the compress route. */
  readonly compress?: CompressPreset
  /** The page operation, on its route. */
  readonly edit?: EditSpec
}

/** readCompress: the compress route's `preset` (`ebook` by default). */
export function readCompress(fields: Readonly<Record<string, string | undefined>>, problems: Problem[]): CompressPreset {
  const given = fields.preset?.trim().toLowerCase().replace(/^\//, '') ?? ''
  if (given === '') return 'ebook'
  if ((COMPRESS_PRESETS as readonly string[]).includes(given)) return given as CompressPreset
  problems.push({ code: 'PRESET_INVALID', params: { presets: COMPRESS_PRESETS.join(', ') } })
  return 'ebook'
}

/**
 * readTextFormat: the text route's `format`, or, when none is sent, `text` for a client that
 * asks for text/plain first in its Accept header (`curl -H 'Accept: text/plain'`), else `json`.
 */
export function readTextFormat(fields: Readonly<Record<string, string | undefined>>, accept: string | undefined, problems: Problem[]): TextSpec {
  const given = fields.format?.trim().toLowerCase() ?? ''
  if (given === '') return { format: /^\s*text\/plain\b/i.test(accept ?? '') ? 'text' : 'json' }
  if ((TEXT_FORMATS as readonly string[]).includes(given)) return { format: given as TextFormat }
  problems.push({ code: 'TEXT_FORMAT_INVALID', params: { formats: TEXT_FORMATS.join(', ') } })
  return { format: 'json' }
}

const PDF_FIELD = 'pdfDocument'
const HEADER = Buffer.from('%PDF-')

/**
 * safeBasename keeps a name that is harmless in a Content-Disposition header, a zip entry and a file system: the last
 * path segment, without `.pdf`, in NFC, of letters, marks and digits of any script, `.`, `-` and `_` (anything else, quotes,
 * control, format and bidi characters among them, becomes `_`), at most 100 characters, never starting with a dot.
 */
export function safeBasename(filename: string | undefined): string {
  const leaf = (filename ?? '').split(/[\\/]/).pop() ?? ''
  const stem = [
    ...leaf
      .replace(/\.pdf$/i, '')
      .normalize('NFC')
      .replace(/[^\p{L}\p{M}\p{N}._-]+/gu, '_')
      .replace(/^[._\p{M}]+|_+$/gu, ''),
  ]
    .slice(0, 100)
    .join('')
  return stem === '' ? 'document' : stem
}

/** The most documents one merge takes. */
export const MAX_MERGE_DOCUMENTS = 20

/**
 * readParts reads a multipart body: its fields (a field sent more than once: its last value in
 * `fields`, every value in order in `repeated`), and the PDF (at most `maxFileBytes`); with
 * `maxFiles`, up to that many PDFs in `pdfDocument` parts, in order, at most `maxFileBytes` together.
 */
export async function readParts(request: FastifyRequest, maxFileBytes: number, maxFiles = 1) {
  const fields: Record<string, string> = {}
  const repeated: Record<string, string[]> = {}
  const otherFiles: string[] = []
  const files: { data: Buffer; filename: string }[] = []
  let total = 0
  try {
    const parts = request.parts({
      limits: { fileSize: maxFileBytes, files: maxFiles + 3, fields: 16 + 2 * maxFiles, parts: 20 + 3 * maxFiles, fieldSize: 4096 },
    })
    for await (const part of parts) {
      if (part.type === 'file') {
        if (part.fieldname === PDF_FIELD && files.length < maxFiles) {
          const data = await part.toBuffer()
          total += data.byteLength
          if (total > maxFileBytes) throw Object.assign(new Error('the files are too large together'), { code: 'FST_REQ_FILE_TOO_LARGE' })
          files.push({ data, filename: part.filename })
        } else {
          otherFiles.push(part.fieldname)
          part.file.resume()
        }
      } else {
        const value = String(part.value)
        fields[part.fieldname] = value
        repeated[part.fieldname] = [...(repeated[part.fieldname] ?? []), value]
      }
    }
  } catch (error) {
    const code = (error as { code?: string }).code
    if (code === 'FST_REQ_FILE_TOO_LARGE') throw apiError('FILE_TOO_LARGE', { limit: maxFileBytes })
    if (code === 'FST_PARTS_LIMIT' || code === 'FST_FILES_LIMIT' || code === 'FST_FIELDS_LIMIT') throw apiError('TOO_MANY_PARTS')
    // Anything else the parser raises is the body's fault: no boundary, a part never closed, garbage.
    throw new ApiError([{ code: 'MALFORMED_BODY', params: { contentType: 'multipart/form-data' } }], {}, { cause: error })
  }
  return { fields, repeated, otherFiles, file: files[0], files }
}

/** requireMultipart refuses a body of another type (415) before anything else is done with the request. */
export function requireMultipart(request: FastifyRequest): void {
  if (!request.isMultipart()) throw apiError('UNSUPPORTED_MEDIA_TYPE')
}

/** isPdf: whether bytes start like a PDF (its header within the first KiB, as readers allow). */
export const isPdf = (bytes: Uint8Array): boolean => Buffer.from(bytes.buffer, bytes.byteOffset, Math.min(bytes.byteLength, 1024)).includes(HEADER)

/**
 * readUpload reads a conversion's upload and options (those of its `operation`: another's are
 * refused, route-fields.ts), every problem reported at once.
 */
export async function readUpload(request: FastifyRequest, config: Config, operation: JobOperation): Promise<Upload> {
  requireMultipart(request)
  const merging = operation === 'merge'
  const parts = await readParts(request, config.maxUploadBytes, merging ? MAX_MERGE_DOCUMENTS : 1)
  const { repeated, otherFiles, file, files } = parts
  const problems: Problem[] = []
  const fields = takenFields(operation, OPERATION_ROUTES[operation], parts.fields, problems)
  if (file === undefined || file.data.byteLength === 0) {
    const detail = otherFiles.length > 0 ? ` A file was sent in '${otherFiles[0]!.slice(0, 40)}' instead.` : ''
    problems.push({ code: 'PDF_REQUIRED', params: { detail } })
  } else if (!isPdf(file.data)) {
    problems.push({ code: 'NOT_A_PDF' })
  }
  // Documents past a merge's limit are counted, never dropped.
  const extra = otherFiles.filter((name) => name === PDF_FIELD).length
  if (merging && extra > 0) problems.push({ code: 'MERGE_DOCUMENTS_REQUIRED', params: { max: MAX_MERGE_DOCUMENTS, count: files.length + extra } })
  for (const [i, other] of files.entries()) {
    if (i > 0 && !isPdf(other.data)) problems.push({ code: 'MERGE_DOCUMENT_REFUSED', params: { part: i + 1, reason: 'is not a PDF (it has no %PDF- header)' } })
  }
  // A merge's `pages` and `password` come once per document: the first document's are read with its others.
  const options = readOptions(merging ? { ...fields, pages: undefined, password: undefined } : fields, problems)
  if ((EDIT_KINDS as readonly string[]).includes(operation)) {
    const editing = readEditOptions(operation as EditKind, { fields, repeated, files }, MAX_MERGE_DOCUMENTS, problems)
    if (problems.length > 0) throw new ApiError(problems)
    const { pages, password } = editing
    return {
      pdf: shared(file!.data),
      basename: safeBasename(file!.filename),
      ...options,
      ...(merging ? { pages: pages ?? null, ...(password === undefined ? {} : { password }) } : {}),
      edit: merging
        ? { kind: 'merge', others: (editing.edit as EditSpec & { kind: 'merge' }).others.map((o) => ({ ...o, pdf: shared(o.pdf) })) }
        : editing.edit,
    }
  }
  const own =
    operation === 'image'
      ? { image: readImageOptions(fields, problems) }
      : operation === 'text'
        ? { text: readTextFormat(fields, request.headers.accept, problems) }
        : operation === 'compress'
          ? { compress: readCompress(fields, problems) }
          : {}
  if (problems.length > 0) throw new ApiError(problems)
  return { pdf: shared(file!.data), basename: safeBasename(file!.filename), ...options, ...own }
}

/** readOptions checks a conversion's option fields, adding a problem for each bad one. */
export function readOptions(fields: Readonly<Record<string, string | undefined>>, problems: Problem[]): ConversionOptions {
  const dpiText = fields.dpi?.trim() ?? ''
  const dpi = dpiText === '' ? 150 : /^\d{1,4}$/.test(dpiText) ? Number(dpiText) : NaN
  if (!(dpi >= MIN_DPI && dpi <= MAX_DPI)) problems.push({ code: 'DPI_INVALID' })
  const pagesText = fields.pages?.trim() ?? ''
  const pages = pagesText === '' ? null : parsePages(pagesText)
  if (pagesText !== '' && pages === null) problems.push({ code: 'PAGES_INVALID' })
  const color = (fields.colorMode?.trim().toLowerCase() || 'rgb') as ColorMode
  if (color !== 'rgb' && color !== 'gray') problems.push({ code: 'COLOR_MODE_INVALID' })
  const password = fields.password
  if (password !== undefined && (password.length > 256 || !password.isWellFormed())) problems.push({ code: 'PASSWORD_INVALID' })
  return password ? { dpi, pages, color, password } : { dpi, pages, color }
}
