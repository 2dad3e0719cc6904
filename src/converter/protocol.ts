/** Messages between the conversion pool (main thread) and its workers. */
import type { ErrorCode } from '../errors/catalogue.ts'
import type { ColorMode } from './engines/engine.ts'
import type { Range } from './pages.ts'

export interface Limits {
  readonly maxPages: number
  readonly maxPixels: number
  /** Most bytes one answer may have (the PNG, the zip's pages, the PostScript). */
  readonly maxOutputBytes: number
  /** Most memory a worker may use during a job (WebAssembly, JS heap, the engine's scratch files). */
  readonly maxMemoryBytes: number
}

export interface JobCommon {
  readonly pdf: Uint8Array
  readonly password?: string
  readonly color: ColorMode
  readonly pages: readonly Range[] | null
  readonly limits: Limits
}

export type Job =
  | (JobCommon & { readonly op: 'png'; readonly dpi: number })
  | (JobCommon & { readonly op: 'ps' })

/** A refusal caused by the document (a 4xx), with the catalogue code and its parameters. */
export interface Refusal {
  readonly ok: false
  readonly code: ErrorCode
  readonly params?: Record<string, string | number>
}

export type JobResult =
  | Refusal
  | { readonly ok: true; readonly op: 'png'; readonly pageCount: number; readonly pages: number }
  | { readonly ok: true; readonly op: 'ps'; readonly pageCount: number; readonly pages: number; readonly bytes: number }

/**
 * The worker's shared credit counter (an Int32Array over a SharedArrayBuffer, one per
 * worker): at index 0, the pieces of output (pages, chunks) sent and not yet taken by the
 * consumer. The worker blocks on it (Atomics.wait), even in the middle of an engine's
 * synchronous run, and the pool decrements it as the consumer takes each piece.
 */
export const IN_FLIGHT = 0

export interface WorkerData {
  readonly credit: SharedArrayBuffer
  /** WORKER_MAX_MEMORY_MB in bytes: no engine heap grows past it. */
  readonly maxMemoryBytes: number
}

export type ToWorker = { readonly type: 'job'; readonly id: number; readonly job: Job }

export type FromWorker =
  | { readonly type: 'ready' }
  /** Rendering starts: how many pages the result will hold. */
  | { readonly type: 'start'; readonly id: number; readonly pages: number; readonly pageCount: number }
  | { readonly type: 'page'; readonly id: number; readonly page: number; readonly png: Uint8Array }
  /** A piece of the PostScript, in order. */
  | { readonly type: 'chunk'; readonly id: number; readonly bytes: Uint8Array }
  /** The worker waits for the consumer to take output (that time does not count against the job's limit). */
  | { readonly type: 'paused'; readonly id: number }
  | { readonly type: 'resumed'; readonly id: number }
  /** `spent`: the engine was stopped mid-run and the worker must be replaced. */
  | { readonly type: 'done'; readonly id: number; readonly result: JobResult; readonly memoryBytes: number; readonly spent: boolean }
  /** An engine error; `fatal` when it was a WebAssembly trap, after which the engine's state cannot be trusted. */
  | { readonly type: 'failed'; readonly id: number; readonly message: string; readonly fatal: boolean }

/** The dpi a PNG may be rendered at. */
export const MIN_DPI = 36
export const MAX_DPI = 600
