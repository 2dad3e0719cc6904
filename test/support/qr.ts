/** decodeQr reads a PNG and returns the text of the QR code in it, with a real decoder (jsQR). */
import { PNG } from 'pngjs'
import { createRequire } from 'node:module'

/** jsQR is CommonJS whose types declare an ES default export: load it as what it is. */
export const jsQR = createRequire(import.meta.url)('jsqr') as typeof import('jsqr').default

export function decodeQr(png: Buffer): { text: string; width: number; height: number } {
  const image = PNG.sync.read(png)
  const found = jsQR(new Uint8ClampedArray(image.data.buffer, image.data.byteOffset, image.data.byteLength), image.width, image.height)
  if (found === null) throw new Error('no QR code found in the image')
  // jsQR gives the raw bytes too: decode them as UTF-8 so that non-ASCII text round-trips.
  return { text: Buffer.from(found.binaryData).toString('utf8'), width: image.width, height: image.height }
}

export function dataUrlBytes(url: string, mime: string): Buffer {
  const prefix = `data:${mime};base64,`
  if (!url.startsWith(prefix)) throw new Error(`not a ${mime} data URL: ${url.slice(0, 40)}`)
  return Buffer.from(url.slice(prefix.length), 'base64')
}
