/**
 * readImageOptions reads the image options of a request (the synchronous route's fields, or a
 * job's), adding a problem for each bad one, all at once: the format, a thumbnail box instead
 * of a dpi, and the options of the format. An option that the format does not take is refused
 * rather than ignored, so that a caller never gets a file other than the one asked for.
 */
import type { Problem } from '../errors/errors.ts'
import type { ImageSpec } from './protocol.ts'
import {
  boxOf,
  DEFAULT_QUALITY,
  IMAGE_FORMATS,
  MAX_BOX_SIDE,
  TIFF_BIT_DEPTHS,
  TIFF_COMPRESSIONS,
  type ImageFormat,
  type ImageOptions,
  type TiffBitDepth,
  type TiffCompression,
} from '../domain/images.ts'

/** Other names the formats are known by (the files' extensions). */
const ALIASES: Readonly<Record<string, ImageFormat>> = { jpg: 'jpeg', tif: 'tiff' }

/** Which formats take each option. */
const TAKEN_BY: Readonly<Record<'quality' | 'compression' | 'bitDepth', readonly ImageFormat[]>> = {
  quality: ['jpeg', 'webp'],
  compression: ['tiff'],
  bitDepth: ['tiff'],
}

const text = (value: string | undefined): string => value?.trim() ?? ''

/** wholeNumber: a field of digits only within [min, max], else NaN. */
function wholeNumber(value: string, min: number, max: number): number {
  const n = /^\d{1,6}$/.test(value) ? Number(value) : Number.NaN
  return n >= min && n <= max ? n : Number.NaN
}

export function readImageOptions(fields: Readonly<Record<string, string | undefined>>, problems: Problem[]): ImageOptions {
  const formatText = text(fields.format).toLowerCase()
  const named = ALIASES[formatText] ?? (formatText === '' ? 'png' : formatText)
  const format: ImageFormat = (IMAGE_FORMATS as readonly string[]).includes(named) ? (named as ImageFormat) : 'png'
  if (format !== named) problems.push({ code: 'IMAGE_FORMAT_INVALID', params: { formats: IMAGE_FORMATS.join(', ') } })
  const options: { -readonly [K in keyof ImageOptions]: ImageOptions[K] } = { format }

  for (const side of ['width', 'height'] as const) {
    const value = text(fields[side])
    if (value === '') continue
    const n = wholeNumber(value, 1, MAX_BOX_SIDE)
    if (Number.isNaN(n)) problems.push({ code: 'BOX_SIZE_INVALID', params: { field: side, max: MAX_BOX_SIDE } })
    else options[side] = n
  }
  if (text(fields.dpi) !== '' && (text(fields.width) !== '' || text(fields.height) !== '')) problems.push({ code: 'SIZE_CONFLICT' })

  for (const field of ['quality', 'compression', 'bitDepth'] as const) {
    if (text(fields[field]) !== '' && !TAKEN_BY[field].includes(format)) {
      problems.push({ code: 'OPTION_NOT_APPLICABLE', params: { field, formats: TAKEN_BY[field].join(' and '), format } })
    }
  }
  if (format === 'jpeg' || format === 'webp') readQuality(text(fields.quality), options, problems)
  if (format === 'tiff') readTiff(text(fields.compression).toLowerCase(), text(fields.bitDepth), options, problems)
  return options
}

function readQuality(value: string, options: { quality?: number }, problems: Problem[]): void {
  if (value === '') return
  const n = wholeNumber(value, 1, 100)
  if (Number.isNaN(n)) problems.push({ code: 'QUALITY_INVALID' })
  else options.quality = n
}

/** readTiff: the compression and the bit depth, which must suit each other (fax Group 4 is 1-bit, JPEG 8-bit). */
function readTiff(compressionText: string, depthText: string, options: { compression?: TiffCompression; bitDepth?: TiffBitDepth }, problems: Problem[]): void {
  let compression: TiffCompression | undefined
  if (compressionText !== '') {
    if ((TIFF_COMPRESSIONS as readonly string[]).includes(compressionText)) compression = compressionText as TiffCompression
    else problems.push({ code: 'COMPRESSION_INVALID', params: { compressions: TIFF_COMPRESSIONS.join(', ') } })
  }
  let bitDepth: TiffBitDepth | undefined
  if (depthText !== '') {
    const n = Number(depthText)
    if ((TIFF_BIT_DEPTHS as readonly number[]).includes(n) && /^\d$/.test(depthText)) bitDepth = n as TiffBitDepth
    else problems.push({ code: 'BIT_DEPTH_INVALID' })
  }
  const needs = compression === 'ccittfax4' ? 1 : compression === 'jpeg' ? 8 : undefined
  if (needs !== undefined && bitDepth !== undefined && bitDepth !== needs) {
    problems.push({ code: 'COMPRESSION_BIT_DEPTH_CONFLICT', params: { compression: compression!, bitDepth: needs } })
  }
  if (compression !== undefined) options.compression = compression
  if (bitDepth !== undefined || needs !== undefined) options.bitDepth = bitDepth ?? needs
}

/** imageSpec resolves image options for the workers: every default filled in, the box or the dpi. */
export function imageSpec(options: ImageOptions, dpi: number): ImageSpec {
  const { format } = options
  const bitDepth = options.bitDepth ?? 8
  return {
    format,
    dpi,
    box: boxOf(options),
    quality: options.quality ?? (format === 'webp' ? DEFAULT_QUALITY.webp : DEFAULT_QUALITY.jpeg),
    // A 1-bit page is fax Group 4's unless another compression is asked for.
    compression: options.compression ?? (bitDepth === 1 ? 'ccittfax4' : 'lzw'),
    bitDepth,
  }
}
