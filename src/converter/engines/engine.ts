/**
 * PdfEngine is what a conversion worker needs from a PDF engine. Engines run only inside
 * the workers (WebAssembly: no host file system, no network). Expected outcomes (a wrong
 * password, an unreadable file) are returned as data; only faults throw.
 */

/** A page's size in points (1/72 inch), after its rotation. */
export interface PageSize {
  readonly width: number
  readonly height: number
}

export type ColorMode = 'rgb' | 'gray'

export type OpenResult = { readonly ok: true; readonly document: OpenDocument } | { readonly ok: false; readonly reason: 'unreadable' | 'password' }

/** How large a page is drawn: at a dpi, or to a size in pixels (the page's box stretched to it: the caller keeps the aspect). */
export type Scale = { readonly dpi: number } | { readonly width: number; readonly height: number }

/** A page's pixels, rows packed: `channels` bytes a pixel (1: gray, 3: RGB), no alpha. */
export interface Raster {
  readonly width: number
  readonly height: number
  readonly channels: 1 | 3
  readonly pixels: Uint8Array
}

/** A box in points from the page's top left: x0, y0, x1, y1. */
export type TextBox = [number, number, number, number]

export interface TextWord {
  readonly text: string
  readonly bbox: TextBox
  /** The font's name as the PDF gives it (a subset's tag included, `ABCDEF+`). */
  readonly font: string
  /** Its size in points. */
  readonly size: number
}

export interface TextLine {
  readonly bbox: TextBox
  /** 0: horizontal, 1: vertical writing. */
  readonly wmode: number
  readonly text: string
  readonly words: TextWord[]
}

export interface TextBlock {
  readonly bbox: TextBox
  readonly lines: TextLine[]
}

export interface OpenDocument {
  readonly pageCount: number
  pageSize(index: number): PageSize
  /** renderRaster draws one page (0-based) as pixels, copied out of the engine. */
  renderRaster(index: number, scale: Scale, color: ColorMode): Raster
  /** plainText: one page's (0-based) text in reading order, lines ended by newlines. */
  plainText(index: number): string
  /** structuredText: one page's text blocks, lines and words with their boxes, fonts and sizes. */
  structuredText(index: number): TextBlock[]
  /**
   * forPostScript gives the document as the engine draws it, for the PostScript engine:
   * repaired, and carrying the form-field appearances the engine makes; null when that is the original.
   */
  forPostScript(): Uint8Array | null
  close(): void
}

export interface PostScriptOptions {
  /** 1-based page numbers, ascending. */
  readonly pages: readonly number[]
  readonly pageCount: number
  readonly color: ColorMode
  readonly password?: string
  /** onPage is told as the engine begins each page (the pool's page clock). */
  readonly onPage?: () => void
  /** Write a PDF made smaller with this pdfwrite preset instead of PostScript. */
  readonly compress?: CompressPreset
}

/** Ghostscript's pdfwrite presets (-dPDFSETTINGS), from smallest to most faithful. */
export const COMPRESS_PRESETS = ['screen', 'ebook', 'printer', 'prepress'] as const
export type CompressPreset = (typeof COMPRESS_PRESETS)[number]

/** OutputSink takes the output as it is written; it may block until the consumer has caught up. The bytes are only valid during the call. */
export type OutputSink = (bytes: Uint8Array) => void

export interface OutputBudget {
  /** Most bytes of output. */
  readonly maxOutputBytes: number
  /** Most bytes the engine may write to its scratch files before the output. */
  readonly maxScratchBytes: number
  /** overMemory tells whether the worker's memory (WebAssembly, heap) with `scratchBytes` more is over its limit, or an engine was refused memory. */
  overMemory(scratchBytes: number): boolean
}

/** The outcome of a PostScript conversion: the bytes written to the sink, or why it was stopped (the engine cannot be used again then). */
export type PostScriptOutcome =
  | { readonly ok: true; readonly bytes: number }
  | { readonly ok: false; readonly reason: 'output' | 'memory'; readonly bytes: number }

export interface PdfEngine {
  readonly name: string
  /** open parses a PDF (authenticating with `password` when it is encrypted). */
  open?(pdf: Uint8Array, password?: string): OpenResult
  /** postscript writes vector PostScript (DSC-conformant) of the selected pages to `sink`, within `budget` (or a compressed PDF: `compress`). */
  postscript?(pdf: Uint8Array, options: PostScriptOptions, sink: OutputSink, budget: OutputBudget): PostScriptOutcome
  /** memoryBytes is the engine's WebAssembly memory. */
  memoryBytes(): number
}
