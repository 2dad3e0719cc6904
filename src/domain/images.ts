/**
 * Image output of the conversion group: the formats a page can be drawn to, and the options
 * each takes, as checked (src/converter/image-options.ts reads them from a request). Shared by
 * the synchronous route and by jobs, which keep them with the job.
 */

export const IMAGE_FORMATS = ['png', 'jpeg', 'webp', 'tiff'] as const
export type ImageFormat = (typeof IMAGE_FORMATS)[number]

/** TIFF's compressions: ccittfax4 (fax Group 4) is for 1-bit pages only, jpeg for 8-bit ones only. */
export const TIFF_COMPRESSIONS = ['lzw', 'deflate', 'packbits', 'ccittfax4', 'jpeg', 'none'] as const
export type TiffCompression = (typeof TIFF_COMPRESSIONS)[number]

export const TIFF_BIT_DEPTHS = [1, 8] as const
export type TiffBitDepth = (typeof TIFF_BIT_DEPTHS)[number]

/** The media type and file extension of each format. */
export const IMAGE_TYPES: Readonly<Record<ImageFormat, { readonly type: string; readonly extension: string }>> = {
  png: { type: 'image/png', extension: 'png' },
  jpeg: { type: 'image/jpeg', extension: 'jpg' },
  webp: { type: 'image/webp', extension: 'webp' },
  tiff: { type: 'image/tiff', extension: 'tif' },
}

/** The quality JPEG and WebP are written at when none is asked for. */
export const DEFAULT_QUALITY: Readonly<Record<'jpeg' | 'webp', number>> = { jpeg: 90, webp: 80 }

/**
 * WebP's effort (libwebp's -m, 0-6; cwebp's default is 4). Through the server on the real corpus
 * at 150 dpi, 0 writes files 0.56 times PNG's size at 0.97 times PNG's time a page; 1 wrote 0.54
 * of PNG's size at 1.21 times its time, 2 wrote 0.45 at 1.3 to 1.8 times (docs/performance.md).
 */
export const WEBP_EFFORT = 0

/** The largest thumbnail box side, in pixels (the page's pixels are also held to MAX_PAGE_MEGAPIXELS). */
export const MAX_BOX_SIDE = 10000

/**
 * ImageOptions: what a page is drawn to. A page is drawn at `dpi`, or fitted within a box of
 * `width` and/or `height` pixels, its aspect kept (a thumbnail); `quality` is JPEG's or WebP's,
 * `compression` and `bitDepth` are TIFF's. Only the options of the format are set.
 */
export interface ImageOptions {
  readonly format: ImageFormat
  readonly width?: number
  readonly height?: number
  readonly quality?: number
  readonly compression?: TiffCompression
  readonly bitDepth?: TiffBitDepth
}

/** A box of pixels a page is fitted within: one side may be open. */
export interface Box {
  readonly width: number | null
  readonly height: number | null
}

/** boxOf: the thumbnail box of image options, or null when the page is drawn at a dpi. */
export function boxOf(options: ImageOptions): Box | null {
  if (options.width === undefined && options.height === undefined) return null
  return { width: options.width ?? null, height: options.height ?? null }
}

/**
 * fitBox: the pixel size of a page of `width` × `height` points fitted within `box`, its
 * aspect kept: the side that limits is the box's exactly, the other rounded (at least 1).
 */
export function fitBox(page: { readonly width: number; readonly height: number }, box: Box): { width: number; height: number } {
  const sx = box.width === null ? Number.POSITIVE_INFINITY : box.width / page.width
  const sy = box.height === null ? Number.POSITIVE_INFINITY : box.height / page.height
  if (sx <= sy) return { width: box.width!, height: Math.max(1, Math.min(box.height ?? Number.POSITIVE_INFINITY, Math.round(page.height * sx))) }
  return { width: Math.max(1, Math.min(box.width ?? Number.POSITIVE_INFINITY, Math.round(page.width * sy))), height: box.height! }
}
