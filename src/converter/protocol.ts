/** Messages between the conversion pool (main thread) and its workers. */
import type { ErrorCode } from '../errors/catalogue.ts'
import type { ColorMode } from './engines/engine.ts'
import type { Range } from './pages.ts'

export interface Limits {
  readonly maxPages: number
  readonly maxPixels: number
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
  | { readonly ok: true; readonly op: 'ps'; readonly pageCount: number; readonly pages: number; readonly postscript: Uint8Array }

export type ToWorker =
  | { readonly type: 'job'; readonly id: number; readonly job: Job }
  /** The consumer took a page: the worker may render one more. */
  | { readonly type: 'ack'; readonly id: number }

export type FromWorker =
  | { readonly type: 'ready' }
  /** Rendering starts: how many pages the result will hold. */
  | { readonly type: 'start'; readonly id: number; readonly pages: number; readonly pageCount: number }
  | { readonly type: 'page'; readonly id: number; readonly page: number; readonly png: Uint8Array }
  /** The worker waits for the consumer to take a page (that time does not count against the job's limit). */
  | { readonly type: 'paused'; readonly id: number }
  | { readonly type: 'resumed'; readonly id: number }
  | { readonly type: 'done'; readonly id: number; readonly result: JobResult; readonly memoryBytes: number }
  /** An engine error; `fatal` when it was a WebAssembly trap, after which the engine's state cannot be trusted. */
  | { readonly type: 'failed'; readonly id: number; readonly message: string; readonly fatal: boolean }

/** The dpi a PNG may be rendered at. */
export const MIN_DPI = 36
export const MAX_DPI = 600
