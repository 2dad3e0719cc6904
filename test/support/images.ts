/** Reading the conversion group's images in the tests: decoded by libvips (sharp), compared as PSNR. */
import sharp from 'sharp'

export interface Decoded {
  readonly width: number
  readonly height: number
  readonly channels: number
  readonly data: Buffer
}

/** decode reads an image (a page of a multi-page TIFF with `page`) as 8-bit pixels, `channels` of them (1 gray, 3 RGB). */
export async function decode(bytes: Uint8Array, channels: 1 | 3 = 3, page = 0): Promise<Decoded> {
  let image = sharp(bytes, { page })
  image = channels === 1 ? image.toColourspace('b-w') : image.toColourspace('srgb').removeAlpha()
  const { data, info } = await image.raw().toBuffer({ resolveWithObject: true })
  return { width: info.width, height: info.height, channels: info.channels, data }
}

/** psnr of two decodes of one page, over every sample, in dB (Infinity when identical); their sizes must match. */
export function psnr(a: Decoded, b: Decoded): number {
  if (a.width !== b.width || a.height !== b.height || a.channels !== b.channels) {
    throw new Error(`sizes differ: ${a.width}×${a.height}×${a.channels} and ${b.width}×${b.height}×${b.channels}`)
  }
  let squares = 0
  for (let i = 0; i < a.data.length; i++) squares += (a.data[i]! - b.data[i]!) ** 2
  return squares === 0 ? Number.POSITIVE_INFINITY : 10 * Math.log10((255 * 255 * a.data.length) / squares)
}

/** metadata: what libvips reads of an image's header (format, size, pages, density, channels). */
export const metadata = (bytes: Uint8Array) => sharp(bytes).metadata()
