/**
 * encodePage writes a page's pixels (MuPDF's, copied out of its heap) as PNG, JPEG, WebP or
 * TIFF with libvips (the `sharp` package: libspng on zlib-ng, libjpeg-turbo/mozjpeg, libwebp
 * and libtiff, native and SIMD). It runs in the conversion workers, on pixels we made: the PDF
 * itself never reaches it. PNG was MuPDF's own writer, whose zlib in WebAssembly was two thirds
 * of a page's time: zlib-ng at the same level takes 0.30× its time for 1.06× its bytes on the
 * corpus at 150 dpi (docs/performance.md).
 *
 * libvips runs each encode on a thread of its own pool, one thread per encode: the workers are
 * the parallelism (one page each). Its operation cache is off (every page is new).
 */
import sharp from 'sharp'
import { crc32 } from 'node:zlib'
import type { Raster } from './engines/engine.ts'
import type { ImageSpec } from './protocol.ts'
import { WEBP_EFFORT } from '../domain/images.ts'

sharp.cache(false)
sharp.concurrency(1)

/** The quality of the JPEG compression within a TIFF. */
const TIFF_JPEG_QUALITY = 90

/** The zlib level of PNG pages: zlib's and MuPDF's default. Filtering stays off (MuPDF's choice too): adaptive filters took 4× the time. */
const PNG_LEVEL = 6

/** encodePage: the page in the spec's format, `density` its dots per inch, as the file's resolution. */
export async function encodePage(raster: Raster, spec: ImageSpec, density: number): Promise<Uint8Array> {
  const { width, height, channels, pixels } = raster
  // Gray pixels stay one channel (libvips would write them as sRGB); WebP has no gray and takes them as RGB.
  const image = channels === 1 ? sharp(pixels, { raw: { width, height, channels } }).toColourspace('b-w') : sharp(pixels, { raw: { width, height, channels } })
  let out: ReturnType<typeof sharp>
  switch (spec.format) {
    case 'jpeg':
      // At quality 90 and above, colours are kept at full resolution (4:4:4), as ImageMagick and Photoshop do: coloured text and
      // small images stay sharp. Below, the usual 4:2:0.
      out = image.jpeg({ quality: spec.quality, chromaSubsampling: spec.quality >= 90 ? '4:4:4' : '4:2:0' }).withDensity(density)
      break
    case 'webp':
      out = image.webp({ quality: spec.quality, effort: WEBP_EFFORT })
      break
    case 'tiff': {
      const resolution = { xres: density / 25.4, yres: density / 25.4, resolutionUnit: 'inch' as const }
      // A 1-bit page (fax, archives of scans) is the page's gray levels cut at the middle, 0 as white as fax readers expect.
      // No predictor: libtiff has none for 1-bit samples and fails an LZW or Deflate page with sharp's default (horizontal).
      out =
        spec.bitDepth === 1
          ? image
              .threshold(128)
              .toColourspace('b-w')
              .tiff({ compression: spec.compression, bitdepth: 1, miniswhite: true, predictor: 'none', ...resolution })
          : image.tiff({ compression: spec.compression, quality: TIFF_JPEG_QUALITY, predictor: 'horizontal', ...resolution })
      break
    }
    case 'png':
      out = image.png({ compressionLevel: PNG_LEVEL, adaptiveFiltering: false })
      break
  }
  // toBuffer, not toUint8Array: sharp 0.35's toUint8Array leaves libvips' own buffer of an uncompressed TIFF allocated for
  // good (a 128 MiB mapping for each 600-dpi page, measured). The page leaves in a copy of V8's, and libvips' buffer is freed
  // now, on this thread: a free posted from the main thread would wait while this worker blocks on its consumer, and for
  // ever once the worker is replaced.
  const data = await out.toBuffer()
  const page = new Uint8Array(data)
  data.buffer.transfer(0)
  if (spec.format === 'png') setPngDensity(page, density)
  return page
}

/**
 * setPngDensity writes `density` into a PNG's pHYs chunk, in place (libvips writes one, at its default of 25.4 dpi for raw pixels; its
 * withDensity adds an EXIF chunk as well). A PNG without one is left as it is.
 */
function setPngDensity(png: Uint8Array, density: number): void {
  const view = new DataView(png.buffer, png.byteOffset, png.byteLength)
  const perMetre = Math.round(density / 0.0254)
  for (let at = 8; at + 12 <= png.length; ) {
    const length = view.getUint32(at)
    const type = String.fromCharCode(...png.subarray(at + 4, at + 8))
    if (type === 'IDAT' || type === 'IEND') return
    if (type === 'pHYs' && length === 9) {
      view.setUint32(at + 8, perMetre)
      view.setUint32(at + 12, perMetre)
      png[at + 16] = 1 // the unit: the metre
      view.setUint32(at + 17, crc32(png.subarray(at + 4, at + 17)))
      return
    }
    at += 12 + length
  }
}
