/**
 * drawQr turns a text and drawing options into the image bytes: plan, symbol, look, render.
 * It is pure and takes plain data, so that the same function runs on the event loop for
 * small symbols and in a QR worker for large ones (see drawer.ts).
 */
import { matrixOfPlan, modulesOf, type Ecc } from './matrix.ts'
import { renderPng, renderSvg, type Look, type Rgba } from './render.ts'
import type { Plan } from './segments.ts'

export interface DrawJob {
  readonly text: string
  readonly ecc: Ecc
  readonly format: 'png' | 'svg'
  /** Width and height in pixels; default: `scale` pixels per module. */
  readonly size?: number | undefined
  /** Quiet zone in modules (default 4). */
  readonly margin?: number | undefined
  readonly color: Rgba
  readonly background: Rgba
  /** Pixels per module when `size` is not given. */
  readonly scale: number
}

/** lookOf gives the drawing options for a symbol of `modules` per side; `size` is kept to at least one pixel per module. */
export function lookOf(job: DrawJob, modules: number): Look {
  const margin = job.margin ?? 4
  const total = modules + 2 * margin
  return { margin, size: Math.max(job.size ?? total * job.scale, total), color: job.color, background: job.background }
}

export function drawQr(job: DrawJob, plan: Plan): Uint8Array {
  const matrix = matrixOfPlan(plan, job.ecc)
  const look = lookOf(job, matrix.size)
  return job.format === 'svg' ? Buffer.from(renderSvg(matrix, look)) : renderPng(matrix, look)
}

/**
 * drawCostMs estimates what drawQr costs, from medians measured on this project's machine
 * (2 shared cores): building the symbol about 0.3 ms plus 0.26 µs a module (version 1:
 * 0.35 ms, version 10: 0.9 ms, version 40: 8.8 ms, mostly `qrcode` scoring the masks), a
 * PNG about 0.5 ns a pixel (2048 px a side: 2-4 ms), an SVG about 20 ns a module.
 */
export function drawCostMs(job: DrawJob, plan: Plan): number {
  const modules = modulesOf(plan.version)
  const side = lookOf(job, modules).size
  const build = 0.3 + 0.00026 * modules * modules
  const render = job.format === 'png' ? 0.0000005 * side * side : 0.00002 * modules * modules
  return build + render
}
