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

export type OpenResult =
  | { readonly ok: true; readonly document: OpenDocument }
  | { readonly ok: false; readonly reason: 'unreadable' | 'password' }

export interface OpenDocument {
  readonly pageCount: number
  pageSize(index: number): PageSize
  /** renderPng draws one page (0-based) at `dpi`. */
  renderPng(index: number, dpi: number, color: ColorMode): Uint8Array
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
}

export interface PdfEngine {
  readonly name: string
  /** open parses a PDF (authenticating with `password` when it is encrypted). */
  open?(pdf: Uint8Array, password?: string): OpenResult
  /** postscript writes vector PostScript (DSC-conformant) of the selected pages. */
  postscript?(pdf: Uint8Array, options: PostScriptOptions): Uint8Array
  /** memoryBytes is the engine's WebAssembly memory, to decide when to recycle a worker. */
  memoryBytes(): number
}
