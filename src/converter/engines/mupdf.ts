/** The PNG engine: MuPDF's official WebAssembly build (the `mupdf` package). */
import * as mupdf from 'mupdf'
import type { ColorMode, OpenDocument, OpenResult, PdfEngine } from './engine.ts'

function openDocument(doc: mupdf.Document): OpenDocument {
  const pageCount = doc.countPages()
  return {
    pageCount,
    pageSize(index) {
      const page = doc.loadPage(index)
      try {
        const [x0, y0, x1, y1] = page.getBounds()
        return { width: x1 - x0, height: y1 - y0 }
      } finally {
        page.destroy()
      }
    },
    renderPng(index, dpi, color: ColorMode) {
      const page = doc.loadPage(index)
      let pixmap: mupdf.Pixmap | undefined
      try {
        const space = color === 'gray' ? mupdf.ColorSpace.DeviceGray : mupdf.ColorSpace.DeviceRGB
        pixmap = page.toPixmap(mupdf.Matrix.scale(dpi / 72, dpi / 72), space, false, true)
        // asPNG copies out of the WebAssembly heap, so the bytes outlive the pixmap.
        return pixmap.asPNG()
      } finally {
        pixmap?.destroy()
        page.destroy()
      }
    },
    close() {
      doc.destroy()
      mupdf.emptyStore()
    },
  }
}

export const mupdfEngine = {
  name: 'mupdf',
  open(pdf: Uint8Array, password?: string): OpenResult {
    let doc: mupdf.Document
    try {
      doc = mupdf.Document.openDocument(pdf, 'application/pdf')
    } catch {
      return { ok: false, reason: 'unreadable' }
    }
    if (doc.needsPassword() && (password === undefined || doc.authenticatePassword(password) === 0)) {
      doc.destroy()
      return { ok: false, reason: 'password' }
    }
    try {
      // Counting pages walks the page tree: a damaged tree fails here.
      return { ok: true, document: openDocument(doc) }
    } catch {
      doc.destroy()
      return { ok: false, reason: 'unreadable' }
    }
  },
  memoryBytes() {
    // The heap is not exported; a (tiny) mupdf Buffer is a view into it.
    const probe = new mupdf.Buffer()
    try {
      return probe.asUint8Array().buffer.byteLength
    } finally {
      probe.destroy()
    }
  },
} satisfies PdfEngine
