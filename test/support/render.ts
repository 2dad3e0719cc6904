/** Rendering and comparing pages in the tests: PostScript back to PNG with the Ghostscript engine, and a pixel metric. */
import { PNG } from 'pngjs'
import { loadGhostscript } from '../../src/converter/engines/ghostscript.ts'

/** renderPostScript renders pages `first`..`last` of a PostScript file to 8-bit gray PNGs at `dpi`. */
export async function renderPostScript(ps: Uint8Array, dpi: number, first: number, last: number): Promise<Buffer[]> {
  const errors: string[] = []
  const { module: gs } = await loadGhostscript((line) => errors.push(line))
  gs.FS.writeFile('/in.ps', ps)
  const code = gs.callMain([
    '-dSAFER',
    '-dBATCH',
    '-dNOPAUSE',
    '-dQUIET',
    '-sDEVICE=pnggray',
    `-r${dpi}`,
    `-dFirstPage=${first}`,
    `-dLastPage=${last}`,
    '-dTextAlphaBits=4',
    '-dGraphicsAlphaBits=4',
    '-sOutputFile=/page-%d.png',
    '/in.ps',
  ])
  if (code !== 0) throw new Error(`ghostscript failed (${code}): ${errors.join(' | ')}`)
  const pages: Buffer[] = []
  for (let i = 1; i <= last - first + 1; i++) pages.push(Buffer.from(gs.FS.readFile(`/page-${i}.png`)))
  return pages
}

function gray(png: Buffer): { width: number; height: number; value: (x: number, y: number) => number } {
  const image = PNG.sync.read(png)
  return {
    width: image.width,
    height: image.height,
    value: (x, y) => {
      const i = (y * image.width + x) * 4
      return (image.data[i]! + image.data[i + 1]! + image.data[i + 2]!) / 3
    },
  }
}

/**
 * difference compares two renders of one page: the mean absolute difference of gray
 * levels over the area both cover, from 0 (same) to 1 (black against white). Sizes may
 * differ by a pixel (rounding of the page box); the larger render's extra edge is ignored.
 */
export function difference(a: Buffer, b: Buffer): { mean: number; sizeDelta: number } {
  const ga = gray(a)
  const gb = gray(b)
  const width = Math.min(ga.width, gb.width)
  const height = Math.min(ga.height, gb.height)
  let sum = 0
  for (let y = 0; y < height; y++) for (let x = 0; x < width; x++) sum += Math.abs(ga.value(x, y) - gb.value(x, y))
  return { mean: sum / (width * height * 255), sizeDelta: Math.max(Math.abs(ga.width - gb.width), Math.abs(ga.height - gb.height)) }
}

/**
 * psnr compares one region of two renders of a page (a box in pixels: x0, y0, x1, y1), as the
 * peak signal-to-noise ratio of gray levels in dB: higher is closer, identical is Infinity.
 * Unlike a mean over the page, it notices a thin line missing from a small box.
 */
export function psnr(a: Buffer, b: Buffer, [x0, y0, x1, y1]: readonly [number, number, number, number]): number {
  const ga = gray(a)
  const gb = gray(b)
  let squares = 0
  let count = 0
  for (let y = Math.max(0, y0); y < Math.min(y1, ga.height, gb.height); y++) {
    for (let x = Math.max(0, x0); x < Math.min(x1, ga.width, gb.width); x++) {
      squares += (ga.value(x, y) - gb.value(x, y)) ** 2
      count++
    }
  }
  return 10 * Math.log10((255 * 255 * count) / squares)
}
