/** Messages between the conversion pool (main thread) and its workers. */
import type { ErrorCode } from '../errors/catalogue.ts'
import type { Box, ImageFormat, TiffBitDepth, TiffCompression } from '../domain/images.ts'
import type { TextFormat } from '../domain/text.ts'
import type { ColorMode, CompressPreset } from './engines/engine.ts'
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

/**
 * How each page of an image job is drawn and written: at `dpi`, or fitted within `box` (a
 * thumbnail); PNG by MuPDF, the other formats by libvips from MuPDF's pixels. Every option
 * resolved (image-options.ts: imageSpec).
 */
export interface ImageSpec {
  readonly format: ImageFormat
  readonly dpi: number
  readonly box: Box | null
  /** JPEG's or WebP's quality (1-100). */
  readonly quality: number
  readonly compression: TiffCompression
  readonly bitDepth: TiffBitDepth
}

/**
 * How each page of a text job is written: `text`, its plain text (the answer puts a form feed
 * after each page, as pdftotext does); `json`, an object with its text; `structured`, an object
 * with its blocks, lines and words.
 */
export interface TextSpec {
  readonly format: TextFormat
}

/** What is made of each page of a page-by-page job (the pages shared out among workers). */
export type PageWork = { readonly op: 'image'; readonly image: ImageSpec } | { readonly op: 'text'; readonly text: TextSpec }

/**
 * A page operation on MuPDF (engines/edit.ts), answering PDFs: merge (the job's document and
 * its pages first, then `others`), split (`parts`, page selections; or every `every` pages),
 * rotate (the job's pages by `angle` clockwise), flatten.
 */
export type EditSpec =
  | { readonly kind: 'merge'; readonly others: readonly { readonly pdf: Uint8Array; readonly password?: string; readonly pages: readonly Range[] | null }[] }
  | { readonly kind: 'split'; readonly parts: readonly (readonly Range[])[] | null; readonly every: number | null }
  | { readonly kind: 'rotate'; readonly angle: 90 | 180 | 270 }
  | { readonly kind: 'flatten' }

/** A Ghostscript job: PostScript, or with `compress` a PDF rewritten smaller by pdfwrite with that preset; its output streamed in pieces. */
export type Job =
  | (JobCommon & PageWork)
  | (JobCommon & { readonly op: 'ps'; readonly compress?: CompressPreset })
  | (JobCommon & { readonly op: 'edit'; readonly edit: EditSpec })

/** pageWork: a page-by-page job's work, for the workers that join it; null for a job of one piece. */
export function pageWork(job: Job): PageWork | null {
  if (job.op === 'image') return { op: 'image', image: job.image }
  if (job.op === 'text') return { op: 'text', text: job.text }
  return null
}

/** A refusal caused by the document (a 4xx), with the catalogue code and its parameters. */
export interface Refusal {
  readonly ok: false
  readonly code: ErrorCode
  readonly params?: Record<string, string | number>
}

export type JobResult =
  | Refusal
  | { readonly ok: true; readonly op: 'image' | 'text'; readonly pageCount: number; readonly pages: number }
  /** An edit: `pages` is the number of PDFs it made (sent as pages), `pageCount` the pages in them. */
  | { readonly ok: true; readonly op: 'edit'; readonly pageCount: number; readonly pages: number }
  | { readonly ok: true; readonly op: 'ps'; readonly pageCount: number; readonly pages: number; readonly bytes: number }

/**
 * A job's shared counters (an Int32Array over a SharedArrayBuffer, one per job, shared by
 * every worker rendering part of it). NEXT: the index (in the resolved page list) of the next
 * page to render; workers claim pages one at a time from it. TAKEN: the pages (or pieces of
 * PostScript) the consumer has taken, in order, which the pool counts up as it acknowledges
 * them. A worker never renders a page more than `window` ahead of TAKEN, nor sends a piece
 * of PostScript more than its window ahead: it blocks on TAKEN (Atomics.wait), even in the
 * middle of an engine's synchronous run, until the consumer catches up. HELD_KIB: the KiB of
 * the job's pages the main thread holds (sent, and not yet taken): a worker claims no page while
 * it is at WINDOW_KIB or more, so that what the main thread holds of a job is counted in bytes,
 * not only in pages (a 600-dpi TIFF page is 100 MB). The pool adds a page's size when it
 * arrives and takes it off, before it counts TAKEN up, when the page is taken.
 */
export const NEXT = 0
export const TAKEN = 1
export const HELD_KIB = 2
export const JOB_COUNTERS = 3
/** The most a job's pages may hold of the main thread before its workers wait (one page goes whatever its size). */
export const WINDOW_KIB = 32 * 1024

/**
 * A worker's own flag (an Int32Array over a SharedArrayBuffer, one per worker): STOP set to 1
 * asks it to end its part of a job at the next page boundary (another request is waiting for
 * the worker, or the job is over). The pool clears it before each part.
 */
export const STOP = 0

export interface WorkerData {
  readonly control: SharedArrayBuffer
  /** WORKER_MAX_MEMORY_MB in bytes: the engines' heaps grow only while the worker's memory as a whole stays within it. */
  readonly maxMemoryBytes: number
}

/** What a worker joining a page-by-page job (a helper) needs: the lead has opened and checked the document already. */
export interface Share {
  readonly pdf: Uint8Array
  readonly password?: string
  readonly work: PageWork
  readonly color: ColorMode
  /** The resolved page list (1-based), as the lead sent it. */
  readonly pages: readonly number[]
}

/**
 * A part of a job for one worker: `job` for the lead (which opens and checks the document, then
 * renders its share), `help` for a worker that joins a page-by-page job already started. The PDF's bytes
 * are in a SharedArrayBuffer: every part reads the same copy.
 */
export type ToWorker =
  | { readonly type: 'job'; readonly id: number; readonly job: Job; readonly counters: SharedArrayBuffer; readonly window: number }
  | { readonly type: 'help'; readonly id: number; readonly share: Share; readonly counters: SharedArrayBuffer; readonly window: number }

export type FromWorker =
  /** The worker has loaded its engines; `memoryBytes` is what it holds fresh. */
  | { readonly type: 'ready'; readonly memoryBytes: number }
  /** Rendering starts: the pages (1-based, in order) the result will hold; a split's parts' names by their pages (pagesLabel). */
  | { readonly type: 'start'; readonly id: number; readonly pages: readonly number[]; readonly pageCount: number; readonly labels?: readonly string[] }
  /**
   * One page, written in the job's format (a TIFF page is a TIFF file of its own, which the
   * answer joins to the others; a text page its text or its JSON object): `index` is its place in the page list (parts send pages out
   * of order; the pool puts them back in order).
   */
  | {
      readonly type: 'page'
      readonly id: number
      readonly index: number
      readonly page: number
      readonly bytes: Uint8Array
      /** When the worker began and ended the page (epoch ms, sub-ms precision): its span when the job is traced. */
      readonly from: number
      readonly to: number
    }
  /** The part begins a page (Ghostscript's word; an image part's pages speak for themselves): it is not stuck. */
  | { readonly type: 'progress'; readonly id: number }
  /** A piece of the PostScript, in order. */
  | { readonly type: 'chunk'; readonly id: number; readonly bytes: Uint8Array }
  /** The worker waits for the consumer to take output (that time does not count against the job's limit). */
  | { readonly type: 'paused'; readonly id: number }
  | { readonly type: 'resumed'; readonly id: number }
  /**
   * The worker's part is over. `result` is the lead's (null from a helper, unless it was
   * refused: it ran out of memory); `spent`: the engine was stopped mid-run and the worker must
   * be replaced; `memoryBytes`: what the worker holds now (engines' memory and JS heap).
   */
  | { readonly type: 'done'; readonly id: number; readonly result: JobResult | null; readonly memoryBytes: number; readonly spent: boolean }
  /** An engine error; `fatal` when it was a WebAssembly trap, after which the engine's state cannot be trusted. */
  | { readonly type: 'failed'; readonly id: number; readonly message: string; readonly fatal: boolean; readonly memoryBytes: number }

/** The dpi a page may be drawn at. */
export const MIN_DPI = 36
export const MAX_DPI = 600
