/** The PDF engine of pages and text: MuPDF's official WebAssembly build (the `mupdf` package), which opens, repairs and draws them. */
import { mupdfHeap } from './mupdf-heap.ts' // before mupdf: it sets how mupdf instantiates its module
import * as mupdf from 'mupdf'
import type { ColorMode, OpenDocument, OpenResult, PdfEngine, Raster, Scale } from './engine.ts'
import { plainText, structuredText } from './mupdf-text.ts'

/**
 * rebuildPageTree gives a PDF whose page tree is lost (its root overwritten, say) a new one
 * made of the page objects still in the file, in object order. MuPDF's own repair rebuilds
 * the cross-reference table but not the page tree. Returns the number of pages found.
 */
export function rebuildPageTree(pdf: mupdf.PDFDocument): number {
  const kids = pdf.newArray()
  for (let i = 1; i < pdf.countObjects(); i++) {
    const ref = pdf.newIndirect(i)
    let obj: mupdf.PDFObject
    try {
      obj = ref.resolve()
    } catch {
      continue
    }
    const type = obj.isDictionary() ? obj.get('Type') : null
    if (type?.isName() && type.asName() === 'Page') kids.push(ref)
  }
  if (kids.length === 0) return 0
  const pages = pdf.addObject(pdf.newDictionary())
  pages.put('Type', pdf.newName('Pages'))
  pages.put('Kids', kids)
  pages.put('Count', kids.length)
  kids.forEach((kid) => {
    kid.resolve().put('Parent', pages)
  })
  pdf.getTrailer().get('Root').put('Pages', pages)
  return kids.length
}

/**
 * hasAppearance tells whether a form field's widget (or an annotation) carries an appearance stream for its
 * current state. Ghostscript draws nothing for one that does not (a checkbox whose /AP has no
 * entry for its /AS), where MuPDF draws the field's box from its /MK colours.
 */
export function hasAppearance(annotation: mupdf.PDFAnnotation): boolean {
  const annot = annotation.getObject()
  const normal = annot.get('AP', 'N')
  if (normal.isStream()) return true
  const state = annot.get('AS')
  return state.isName() && normal.isDictionary() && normal.get(state.asName()).isStream()
}

/**
 * makeFieldAppearances writes into the document the appearances MuPDF draws form fields with:
 * every field's when the form asks readers to make them (/NeedAppearances), else those of the
 * fields that have none. MuPDF makes them when it renders but keeps them out of the document,
 * and Ghostscript makes its own, which differ (it leaves out a field's value, or a checkbox
 * altogether). Returns whether any was written.
 */
function makeFieldAppearances(doc: mupdf.Document, pdf: mupdf.PDFDocument, pageCount: number): boolean {
  const form = pdf.getTrailer().get('Root', 'AcroForm')
  if (!form.isDictionary() || !form.get('Fields').isArray() || form.get('Fields').length === 0) return false
  const needAppearances = form.get('NeedAppearances')
  const all = needAppearances.isBoolean() && needAppearances.asBoolean()
  let made = false
  for (let i = 0; i < pageCount; i++) {
    let page: mupdf.PDFPage
    try {
      page = doc.loadPage(i) as mupdf.PDFPage
    } catch {
      continue // a page MuPDF cannot load has no fields it draws
    }
    try {
      for (const widget of page.getWidgets()) {
        try {
          if (!all && hasAppearance(widget)) continue
          // Setting a property (to its own value) marks the widget for a new appearance, which
          // update() then writes into the document rather than into MuPDF's render-only copy.
          widget.setFlags(widget.getFlags())
          made = widget.update() || made
        } catch {
          // The field keeps the appearance the file gives it.
        }
      }
    } finally {
      page.destroy()
    }
  }
  return made
}

/**
 * draw renders a page (with its annotations and form fields, as viewers show them): at a dpi,
 * as MuPDF sizes it (the page box scaled and rounded out), or to exactly `width` × `height`
 * pixels, the page box mapped onto them (a thumbnail of the size asked for, to the pixel).
 */
function draw(page: mupdf.Page, scale: Scale, color: ColorMode): mupdf.Pixmap {
  const space = color === 'gray' ? mupdf.ColorSpace.DeviceGray : mupdf.ColorSpace.DeviceRGB
  if ('dpi' in scale) return page.toPixmap(mupdf.Matrix.scale(scale.dpi / 72, scale.dpi / 72), space, false, true)
  const [x0, y0, x1, y1] = page.getBounds()
  const pixmap = new mupdf.Pixmap(space, [0, 0, scale.width, scale.height], false)
  try {
    pixmap.clear(255)
    const matrix = mupdf.Matrix.concat(mupdf.Matrix.translate(-x0, -y0), mupdf.Matrix.scale(scale.width / (x1 - x0), scale.height / (y1 - y0)))
    const device = new mupdf.DrawDevice(mupdf.Matrix.identity, pixmap)
    try {
      page.run(device, matrix)
      device.close()
    } finally {
      device.destroy()
    }
    return pixmap
  } catch (error) {
    pixmap.destroy()
    throw error
  }
}

/** raster copies a pixmap's samples out of the WebAssembly heap, rows packed. */
function raster(pixmap: mupdf.Pixmap): Raster {
  const width = pixmap.getWidth()
  const height = pixmap.getHeight()
  const channels = pixmap.getNumberOfComponents() as 1 | 3
  const stride = pixmap.getStride()
  const row = width * channels
  const samples = pixmap.getPixels()
  const pixels = new Uint8Array(row * height)
  if (stride === row) pixels.set(samples.subarray(0, row * height))
  else for (let y = 0; y < height; y++) pixels.set(samples.subarray(y * stride, y * stride + row), y * row)
  return { width, height, channels, pixels }
}

function openDocument(doc: mupdf.Document): OpenDocument {
  const pdf = doc.asPDF()
  let pageCount = doc.countPages()
  let rebuilt = false
  if (pageCount === 0 && pdf !== null) {
    pageCount = rebuildPageTree(pdf)
    rebuilt = pageCount > 0
  }
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
    renderRaster(index, scale, color) {
      return withPixmap(doc, index, scale, color, raster)
    },
    plainText(index) {
      return withPage(doc, index, plainText)
    },
    structuredText(index) {
      return withPage(doc, index, structuredText)
    },
    forPostScript() {
      if (pdf === null) return null
      const repaired = rebuilt || pdf.wasRepaired()
      const fieldsMade = makeFieldAppearances(doc, pdf, pageCount)
      if (!repaired && !fieldsMade) return null
      // Appearances alone are appended to the original bytes; a repaired document is written anew.
      const options = !repaired && pdf.canBeSavedIncrementally() ? 'incremental' : ''
      return pdf.saveToBuffer(options).asUint8Array().slice()
    },
    close() {
      doc.destroy()
      mupdf.emptyStore()
    },
  }
}

/** withPage loads a page for `read`, then frees it. */
function withPage<T>(doc: mupdf.Document, index: number, read: (page: mupdf.Page) => T): T {
  const page = doc.loadPage(index)
  try {
    return read(page)
  } finally {
    page.destroy()
  }
}

/** withPixmap draws a page and reads what it needs of the pixmap, which is then freed. */
function withPixmap<T>(doc: mupdf.Document, index: number, scale: Scale, color: ColorMode, read: (pixmap: mupdf.Pixmap) => T): T {
  const page = doc.loadPage(index)
  let pixmap: mupdf.Pixmap | undefined
  try {
    pixmap = draw(page, scale, color)
    return read(pixmap)
  } finally {
    pixmap?.destroy()
    page.destroy()
  }
}

// MuPDF reports repairs and warnings on stderr: the engine keeps them out of the logs.
mupdf.setLog(() => {})

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
    return mupdfHeap.memory?.buffer.byteLength ?? 0
  },
} satisfies PdfEngine
