/**
 * PDF page operations on MuPDF (merge, split, rotate, flatten), run in the conversion workers:
 * synchronous, bytes in and bytes out. Expected failures come back as data, faults are thrown.
 *
 *   merge(sources, { maxPages })  → { ok, pdf, pages } | EditRefusal (part = the source) | too-many-pages
 *   split(source, parts)          → { ok, pdfs }        | EditRefusal
 *   rotate(source, angle)         → { ok, pdf, pages }  | EditRefusal
 *   flatten(source)               → { ok, pdf, pages, fieldsLeft } | EditRefusal
 *   pageCount(pdf, password?)     → number              | EditRefusal
 *
 * Pages are 1-based everywhere; an empty page list, no sources or no parts are refused as
 * 'pages'. A file MuPDF can repair is edited as repaired (a lost page tree is rebuilt from the
 * page objects, as the PNG engine does); one where it stops on a missing or broken object is
 * refused as 'unreadable'. Every output is an open PDF: merge and split write new documents,
 * and rotate and flatten write an encrypted input back without its encryption (the caller
 * proved it may read it by giving the password; a file it cannot open again is no use).
 *
 * Merge and split copy pages with their annotations (links, notes, form fields), not what
 * belongs to the whole document: outline, named destinations, page labels, metadata. A link to
 * a page left out goes nowhere; a named destination is left unresolved.
 */
import './mupdf-heap.ts' // before mupdf: it sets how mupdf instantiates its module
import * as mupdf from 'mupdf'
import { hasAppearance, rebuildPageTree } from './mupdf.ts'

/** EditRefusal is an input the operation cannot use: `part` names the merge source, `pageCount` its pages. */
export type EditRefusal = { ok: false; reason: 'unreadable' | 'password' | 'pages'; part?: number; pageCount?: number; page?: number }

/** Source is one input: `pages` lists 1-based pages in order (a page may come twice), null is every page. */
export interface Source {
  pdf: Uint8Array
  password?: string
  pages: readonly number[] | null
}

export type MergeResult = { ok: true; pdf: Uint8Array; pages: number } | EditRefusal | { ok: false; reason: 'too-many-pages'; count: number }
export type SplitResult = { ok: true; pdfs: Uint8Array[] } | EditRefusal
export type RotateResult = { ok: true; pdf: Uint8Array; pages: number } | EditRefusal
/** FlattenResult's `fieldsLeft` counts the /AcroForm fields and widget annotations still there: 0 when flat. */
export type FlattenResult = { ok: true; pdf: Uint8Array; pages: number; fieldsLeft: number } | EditRefusal

// Unused objects dropped, streams compressed. Not 'objstms' (6% smaller on the corpus): MuPDF
// then packs some objects its garbage collection dropped into object streams, and qpdf --check
// warns "object has unexpected xref entry type" (a split of a merged form, a flattened form).
const WRITE = 'garbage,compress'
// The same, for an encrypted input, without its encryption.
const WRITE_OPEN = 'garbage,compress,encrypt=none'

// The page entries a copied page keeps (those pdf_graft_page copies, and the transparency
// group, which changes how the page blends): none of them leads to another page.
const PAGE_KEYS = ['Contents', 'Resources', 'MediaBox', 'CropBox', 'BleedBox', 'TrimBox', 'ArtBox', 'Rotate', 'UserUnit', 'Group']
const INHERITED = new Set(['Resources', 'MediaBox', 'CropBox', 'Rotate'])
// Entries of annotations and fields that hold appearances and fonts, never a page: not walked.
const NO_PAGES_BELOW = new Set(['AP', 'MK', 'DR', 'Resources', 'Font', 'Contents'])

// MuPDF reports repairs and warnings on stderr: the engine keeps them out of the logs.
mupdf.setLog(() => {})

type Opened = { ok: true; pdf: mupdf.PDFDocument; pageCount: number; encrypted: boolean }

/** open reads a PDF MuPDF can read or repair, with its password; the caller destroys it. */
function open(bytes: Uint8Array, password: string | undefined): Opened | EditRefusal {
  let doc: mupdf.Document
  try {
    doc = mupdf.Document.openDocument(bytes, 'application/pdf')
  } catch {
    return { ok: false, reason: 'unreadable' }
  }
  const pdf = doc.asPDF()
  if (pdf === null) {
    doc.destroy()
    return { ok: false, reason: 'unreadable' }
  }
  if (pdf.needsPassword() && (password === undefined || pdf.authenticatePassword(password) === 0)) {
    pdf.destroy()
    return { ok: false, reason: 'password' }
  }
  try {
    // Counting pages walks the page tree: a damaged tree fails here.
    let pageCount = pdf.countPages()
    if (pageCount === 0) pageCount = rebuildPageTree(pdf)
    if (pageCount > 0) return { ok: true, pdf, pageCount, encrypted: pdf.getTrailer().get('Encrypt').isDictionary() }
  } catch {
    // unreadable, below
  }
  pdf.destroy()
  return { ok: false, reason: 'unreadable' }
}

/**
 * unlessDamaged runs an edit, and gives `refusal` when MuPDF stops on something in the file it
 * cannot use (a reference to an object that is not there, a page that is not a dictionary).
 * MuPDF throws those as plain Errors with its message; TypeErrors and RangeErrors are faults of
 * this code, and a WebAssembly.RuntimeError the engine's: those are thrown on.
 */
function unlessDamaged<T>(edit: () => T, refusal: EditRefusal): T | EditRefusal {
  try {
    return edit()
  } catch (error) {
    if (error instanceof PageDamage) return { ...refusal, page: error.page }
    if (isDamage(error)) return refusal
    throw error
  }
}

function isDamage(error: unknown): boolean {
  return error instanceof Error && error.constructor === Error
}

/** indexes turns a 1-based page list into 0-based indexes, or null when a page is not in 1..count. */
function indexes(pages: readonly number[] | null, count: number): number[] | null {
  if (pages === null) return Array.from({ length: count }, (_, i) => i)
  if (pages.length === 0 || !pages.every((p) => Number.isInteger(p) && p >= 1 && p <= count)) return null
  return pages.map((p) => p - 1)
}

/** save writes a document out and copies the bytes out of the WebAssembly heap. */
function save(pdf: mupdf.PDFDocument, options: string): Uint8Array {
  const buffer = pdf.saveToBuffer(options)
  try {
    return buffer.asUint8Array().slice()
  } finally {
    buffer.destroy()
  }
}

/** numberOf is an object's number, 0 for a direct object. */
function numberOf(obj: mupdf.PDFObject): number {
  return obj.isIndirect() ? obj.asIndirect() : 0
}

function isNamed(obj: mupdf.PDFObject, key: string, name: string): boolean {
  const value = obj.get(key)
  return value.isName() && value.asName() === name
}

/** entriesOf lists a dictionary's entries (a copy: the dictionary may change after). */
function entriesOf(dict: mupdf.PDFObject): [string, mupdf.PDFObject][] {
  const entries: [string, mupdf.PDFObject][] = []
  dict.forEach((value, key) => {
    entries.push([String(key), value])
  })
  return entries
}

/** withEntries runs `fn` while `dict` holds only `entries`, then gives it its own back. */
function withEntries<T>(dict: mupdf.PDFObject, entries: readonly [string, mupdf.PDFObject][], fn: () => T): T {
  const saved = entriesOf(dict)
  for (const [key] of saved) dict.delete(key)
  for (const [key, value] of entries) dict.put(key, value)
  try {
    return fn()
  } finally {
    for (const [key] of entries) dict.delete(key)
    for (const [key, value] of saved) dict.put(key, value)
  }
}

/**
 * Copy carries the pages of one source into an output document. Its graft map copies each
 * object once, so pages share the fonts and images they shared in the source. Before any
 * annotation is copied, every source page an annotation can reach is put in the map: the
 * chosen ones as their output pages, so an annotation's /P, a link to another chosen page and
 * a field's widgets land on the right page, and the others as null, so a link to a page left
 * out goes nowhere instead of bringing that page, and through its /Parent the whole source.
 */
interface Copy {
  out: mupdf.PDFDocument
  src: mupdf.PDFDocument
  /** The source's page objects, in page order. */
  pages: readonly mupdf.PDFObject[]
  map: mupdf.PDFGraftMap
  /** The output page of each source page copied, by the source page's object number. */
  copied: Map<number, mupdf.PDFObject>
  /** The widget annotations placed on output pages, by object number. */
  placed: Set<number>
  /** Fields made for a repeated page whose widget is its own field. */
  extraFields: mupdf.PDFObject[]
}

/** pageKey identifies a source page: its object number, or its index for a direct page object. */
function pageKey(page: mupdf.PDFObject, index: number): number {
  return numberOf(page) || -(index + 1)
}

/** seedPage copies a source page's own entries (the inherited ones made its own) as an output page. */
function seedPage(copy: Copy, page: mupdf.PDFObject): mupdf.PDFObject {
  const entries: [string, mupdf.PDFObject][] = [['Type', copy.src.newName('Page')]]
  for (const key of PAGE_KEYS) {
    const value = INHERITED.has(key) ? page.getInheritable(key) : page.get(key)
    if (!value.isNull()) entries.push([key, value])
  }
  const grafted = withEntries(page, entries, () => copy.map.graftObject(page))
  return grafted.isIndirect() ? grafted : copy.out.addObject(grafted)
}

/** seedNull puts a page left out into the map as null, which is what references to it become. */
function seedNull(copy: Copy, page: mupdf.PDFObject): void {
  if (!page.isIndirect()) return
  const grafted = withEntries(page, [], () => copy.map.graftObject(page))
  grafted.writeObject(copy.out.newNull())
}

/** pagesReached finds the source pages (by object number) that objects reach other than through a page. */
function pagesReached(roots: readonly mupdf.PDFObject[], pages: ReadonlySet<number>): Set<number> {
  const reached = new Set<number>()
  const seen = new Set<number>()
  const stack = [...roots]
  for (let obj = stack.pop(); obj !== undefined; obj = stack.pop()) {
    const num = numberOf(obj)
    if (pages.has(num)) {
      reached.add(num)
      continue
    }
    if (num !== 0) {
      if (seen.has(num)) continue
      seen.add(num)
    }
    if (obj.isArray()) {
      obj.forEach((value) => {
        stack.push(value)
      })
    } else if (obj.isDictionary()) {
      obj.forEach((value, key) => {
        if (!NO_PAGES_BELOW.has(String(key))) stack.push(value)
      })
    }
  }
  return reached
}

/** arrayItems lists an array's items, none when it is not an array. */
function arrayItems(array: mupdf.PDFObject): mupdf.PDFObject[] {
  const items: mupdf.PDFObject[] = []
  if (array.isArray()) for (let i = 0; i < array.length; i++) items.push(array.get(i))
  return items
}

/** formEntry is an entry of a document's /AcroForm (null when there is no form). */
function formEntry(pdf: mupdf.PDFDocument, key: string): mupdf.PDFObject {
  // One path: a lookup on a missing object (MuPDF's shared null) would throw.
  return pdf.getTrailer().get('Root', 'AcroForm', key)
}

/** sourceFields is the source form's field list, when there is one. */
function sourceFields(src: mupdf.PDFDocument): mupdf.PDFObject[] {
  return arrayItems(formEntry(src, 'Fields'))
}

/** seedPages maps the chosen pages to new output pages, and the others annotations reach to null. */
function seedPages(copy: Copy, chosen: readonly number[]): void {
  const all = copy.pages
  for (const index of chosen) {
    const page = all[index]!
    const key = pageKey(page, index)
    if (!copy.copied.has(key)) copy.copied.set(key, seedPage(copy, page))
  }
  const others = new Map<number, mupdf.PDFObject>()
  for (const [i, page] of all.entries()) if (!copy.copied.has(pageKey(page, i))) others.set(numberOf(page), page)
  others.delete(0)
  if (others.size === 0) return
  const roots = [...chosen.map((i) => all[i]!.get('Annots')), ...sourceFields(copy.src)]
  // The walk stops at every page (a chosen one leads, through /Parent, to all the others).
  const pageNumbers = new Set(all.map(numberOf))
  pageNumbers.delete(0)
  const reached = pagesReached(roots, pageNumbers)
  for (const [num, page] of others) if (reached.has(num)) seedNull(copy, page)
}

/** copyAnnotations gives an output page the source page's annotations, each on its new page. */
function copyAnnotations(copy: Copy, page: mupdf.PDFObject, target: mupdf.PDFObject): void {
  const annots = copy.out.newArray()
  for (const annot of arrayItems(page.get('Annots'))) {
    let grafted: mupdf.PDFObject
    try {
      grafted = copy.map.graftObject(annot)
    } catch (error) {
      if (isDamage(error)) continue // an annotation the file lost (a reference to a missing object) is left out
      throw error
    }
    if (!grafted.isDictionary()) continue
    grafted.put('P', target)
    if (isNamed(grafted, 'Subtype', 'Widget')) copy.placed.add(numberOf(grafted))
    annots.push(grafted)
  }
  if (annots.length > 0) target.put('Annots', annots)
}

/**
 * repeatPage places a page a second time: a new page object sharing the first one's contents,
 * with its own copies of the annotations. A widget copy becomes one more widget of its field;
 * a widget that is its own field makes a second field of the same name.
 */
function repeatPage(copy: Copy, first: mupdf.PDFObject): mupdf.PDFObject {
  const page = copy.out.newDictionary()
  for (const [key, value] of entriesOf(first)) if (key !== 'Parent' && key !== 'Annots') page.put(key, value)
  const target = copy.out.addObject(page)
  const annots = copy.out.newArray()
  for (const annot of arrayItems(first.get('Annots'))) {
    const dict = copy.out.newDictionary()
    for (const [key, value] of entriesOf(annot)) dict.put(key, value)
    const again = copy.out.addObject(dict)
    again.put('P', target)
    annots.push(again)
    if (!isNamed(again, 'Subtype', 'Widget')) continue
    copy.placed.add(numberOf(again))
    const kids = again.get('Parent', 'Kids')
    if (kids.isArray()) kids.push(again)
    else copy.extraFields.push(again)
  }
  if (annots.length > 0) target.put('Annots', annots)
  return target
}

/** placePages puts the chosen pages, in order, at the end of the output document. */
function placePages(copy: Copy, chosen: readonly number[]): void {
  const done = new Set<number>()
  for (const index of chosen) {
    const page = copy.pages[index]!
    const key = pageKey(page, index)
    const first = copy.copied.get(key)!
    if (done.has(key)) {
      copy.out.insertPage(-1, repeatPage(copy, first))
      continue
    }
    done.add(key)
    copy.out.insertPage(-1, first)
    copyAnnotations(copy, page, first)
  }
}

/** Form gathers the output's /AcroForm over the sources. */
interface Form {
  fields: mupdf.PDFObject[]
  da?: mupdf.PDFObject
  dr?: mupdf.PDFObject
  needAppearances: boolean
}

/** rootOf climbs a field's /Parent chain to its top field. */
function rootOf(field: mupdf.PDFObject): mupdf.PDFObject {
  const seen = new Set<number>()
  let root = field
  for (let parent = root.get('Parent'); parent.isDictionary() && !seen.has(numberOf(parent)); parent = root.get('Parent')) {
    seen.add(numberOf(parent))
    root = parent
  }
  return root
}

/** prune keeps of a field the widgets placed on output pages; false when none is left. */
function prune(out: mupdf.PDFDocument, field: mupdf.PDFObject, placed: ReadonlySet<number>, seen: Set<number>): boolean {
  const num = numberOf(field)
  if (!field.isDictionary() || (num !== 0 && seen.has(num))) return false
  seen.add(num)
  const kids = field.get('Kids')
  if (!kids.isArray()) return placed.has(num)
  const kept = out.newArray()
  for (const kid of arrayItems(kids)) if (prune(out, kid, placed, seen)) kept.push(kid)
  field.put('Kids', kept)
  return kept.length > 0 || placed.has(num)
}

/** copyFields brings the source's fields whose widgets were placed into the output form. */
function copyFields(copy: Copy, form: Form): void {
  if (copy.placed.size === 0) return
  const roots = new Map<number, mupdf.PDFObject>()
  for (const field of sourceFields(copy.src)) {
    try {
      const grafted = copy.map.graftObject(field)
      roots.set(numberOf(grafted), grafted)
    } catch (error) {
      if (!isDamage(error)) throw error // else a field the file lost is left out
    }
  }
  for (const num of copy.placed) {
    const root = rootOf(copy.out.newIndirect(num))
    roots.set(numberOf(root), root)
  }
  const seen = new Set<number>()
  const kept = [...roots.values()].filter((root) => prune(copy.out, root, copy.placed, seen))
  kept.push(...copy.extraFields)
  if (kept.length === 0) return
  if (form.fields.length === 0 && form.da === undefined) {
    const da = formEntry(copy.src, 'DA')
    const dr = formEntry(copy.src, 'DR')
    if (da.isString()) form.da = copy.map.graftObject(da)
    if (dr.isDictionary()) form.dr = copy.map.graftObject(dr)
  } else {
    mergeDefaults(copy, form, kept)
  }
  const need = formEntry(copy.src, 'NeedAppearances')
  form.needAppearances ||= need.isBoolean() && need.asBoolean()
  form.fields.push(...kept)
}

/**
 * mergeDefaults keeps a later source's fields drawn as their own form said: its default
 * appearance goes onto its top fields that have none, and its resource fonts join the
 * output's under the names not yet taken.
 */
function mergeDefaults(copy: Copy, form: Form, roots: readonly mupdf.PDFObject[]): void {
  const da = formEntry(copy.src, 'DA')
  if (da.isString() && (form.da === undefined || form.da.asString() !== da.asString())) {
    for (const root of roots) if (!root.get('DA').isString()) root.put('DA', copy.map.graftObject(da))
  }
  const fonts = copy.src.getTrailer().get('Root', 'AcroForm', 'DR', 'Font')
  if (!fonts.isDictionary()) return
  form.dr ??= copy.out.addObject(copy.out.newDictionary())
  let outFonts = form.dr.get('Font')
  if (!outFonts.isDictionary()) outFonts = form.dr.put('Font', copy.out.newDictionary())
  for (const [name, font] of entriesOf(fonts)) if (outFonts.get(name).isNull()) outFonts.put(name, copy.map.graftObject(font))
}

/** finishForm writes the gathered form into the output's catalogue. */
function finishForm(out: mupdf.PDFDocument, form: Form): void {
  if (form.fields.length === 0) return
  const acroForm = out.newDictionary()
  const fields = out.newArray()
  for (const field of form.fields) fields.push(field)
  acroForm.put('Fields', fields)
  if (form.da !== undefined) acroForm.put('DA', form.da)
  if (form.dr !== undefined) acroForm.put('DR', form.dr)
  if (form.needAppearances) acroForm.put('NeedAppearances', true)
  out.getTrailer().get('Root').put('AcroForm', out.addObject(acroForm))
}

/** A page the page tree lists but that is not a page dictionary (1-based): the edit is refused before it makes anything. */
class PageDamage extends Error {
  readonly page: number

  constructor(page: number) {
    super(`page ${page} is not a page dictionary`)
    this.page = page
  }
}

/**
 * pageObjects lists a document's page objects, in page order, each checked to be a dictionary: a
 * split sends its parts as it makes them, so a page it could not copy must be found before the first.
 */
function pageObjects(opened: Opened): mupdf.PDFObject[] {
  return Array.from({ length: opened.pageCount }, (_, i) => {
    const page = opened.pdf.findPage(i)
    if (!page.isDictionary()) throw new PageDamage(i + 1)
    return page
  })
}

/** copyPages appends a source's chosen pages (0-based, in order) to `out`, with annotations and fields. */
function copyPages(out: mupdf.PDFDocument, src: mupdf.PDFDocument, pages: readonly mupdf.PDFObject[], chosen: readonly number[], form: Form): undefined {
  const map = out.newGraftMap()
  const copy: Copy = { out, src, pages, map, copied: new Map(), placed: new Set(), extraFields: [] }
  try {
    seedPages(copy, chosen)
    placePages(copy, chosen)
    copyFields(copy, form)
  } finally {
    map.destroy()
  }
}

/** merge puts the sources' pages, in order, into one new document; `progress` is told as each source is done (the pool's clock). */
export function merge(sources: readonly Source[], limits: { maxPages: number }, progress: () => void = () => {}): MergeResult {
  if (sources.length === 0) return { ok: false, reason: 'pages' }
  const out = new mupdf.PDFDocument()
  const form: Form = { fields: [], needAppearances: false }
  let total = 0
  try {
    for (const [part, source] of sources.entries()) {
      const opened = open(source.pdf, source.password)
      if (!opened.ok) return { ...opened, part }
      try {
        const chosen = indexes(source.pages, opened.pageCount)
        if (chosen === null) return { ok: false, reason: 'pages', part, pageCount: opened.pageCount }
        total += chosen.length
        // Counted before copying; the sources after this one are not opened, so `count` is at least this.
        if (total > limits.maxPages) return { ok: false, reason: 'too-many-pages', count: total }
        const failed = unlessDamaged(() => copyPages(out, opened.pdf, pageObjects(opened), chosen, form), { ok: false, reason: 'unreadable', part })
        if (failed) return failed
        progress()
      } finally {
        opened.pdf.destroy()
      }
    }
    return unlessDamaged(
      () => {
        finishForm(out, form)
        return { ok: true, pdf: save(out, WRITE), pages: total }
      },
      { ok: false, reason: 'unreadable' },
    )
  } finally {
    out.destroy()
    mupdf.emptyStore()
  }
}

/** splitOff makes a new document of a source's chosen pages (0-based, in order). */
function splitOff(src: mupdf.PDFDocument, pages: readonly mupdf.PDFObject[], chosen: readonly number[]): Uint8Array {
  const out = new mupdf.PDFDocument()
  try {
    const form: Form = { fields: [], needAppearances: false }
    copyPages(out, src, pages, chosen, form)
    finishForm(out, form)
    return save(out, WRITE)
  } finally {
    out.destroy()
  }
}

/**
 * split makes one new document per part, each with its pages (1-based, in order). With `each`,
 * every document goes to it as soon as it is made (then let go, so that a split never holds more
 * than one part), and the split stops when it answers false; without, they are returned.
 */
export function split(source: Source, parts: readonly (readonly number[])[], each?: (pdf: Uint8Array) => boolean): SplitResult {
  const opened = open(source.pdf, source.password)
  if (!opened.ok) return opened
  try {
    const chosen = parts.map((pages) => indexes(pages, opened.pageCount))
    if (parts.length === 0 || chosen.some((pages) => pages === null)) return { ok: false, reason: 'pages', pageCount: opened.pageCount }
    return unlessDamaged(
      () => {
        const pages = pageObjects(opened)
        const pdfs: Uint8Array[] = []
        for (const part of chosen) {
          const made = splitOff(opened.pdf, pages, part!)
          if (each === undefined) pdfs.push(made)
          else if (!each(made)) break
        }
        return { ok: true, pdfs }
      },
      { ok: false, reason: 'unreadable' },
    )
  } finally {
    opened.pdf.destroy()
    mupdf.emptyStore()
  }
}

/** saveEdited writes an edited input: appended to its bytes when it can be, written anew (and open) when not. */
function saveEdited(opened: Opened): Uint8Array {
  if (opened.encrypted) return save(opened.pdf, WRITE_OPEN)
  // An incremental save leaves the original bytes as they were and is fast; a repaired file cannot take one.
  return save(opened.pdf, opened.pdf.canBeSavedIncrementally() ? 'incremental' : WRITE)
}

/**
 * rotate turns pages clockwise by `angle` degrees, added to the rotation each page has (its own
 * /Rotate or the one it inherits), kept in 0..270. `source.pages` are the pages to turn, null all.
 */
export function rotate(source: Source, angle: 90 | 180 | 270): RotateResult {
  if (angle % 90 !== 0) throw new RangeError(`rotate: angle ${angle} is not a multiple of 90`)
  const opened = open(source.pdf, source.password)
  if (!opened.ok) return opened
  try {
    const chosen = indexes(source.pages, opened.pageCount)
    if (chosen === null) return { ok: false, reason: 'pages', pageCount: opened.pageCount }
    return unlessDamaged(
      () => {
        for (const index of new Set(chosen)) {
          const page = opened.pdf.findPage(index)
          const own = page.getInheritable('Rotate')
          // MuPDF reads a rotation that is not a multiple of 90 as the nearest one.
          const current = own.isNumber() ? Math.round(own.asNumber() / 90) * 90 : 0
          page.put('Rotate', (((current + angle) % 360) + 360) % 360)
        }
        return { ok: true, pdf: saveEdited(opened), pages: opened.pageCount }
      },
      { ok: false, reason: 'unreadable' },
    )
  } finally {
    opened.pdf.destroy()
    mupdf.emptyStore()
  }
}

/** writeAppearance makes update() write a new appearance into the document (see makeAppearances). */
function writeAppearance(annot: mupdf.PDFAnnotation): void {
  try {
    // Setting a property (to its own value) marks the annotation for a new appearance, which
    // update() then writes into the document rather than into MuPDF's render-only copy.
    annot.setFlags(annot.getFlags())
    annot.update()
  } catch (error) {
    if (!isDamage(error)) throw error // else the annotation keeps the appearance the file gives it
  }
}

/**
 * makeAppearances writes into the document the appearances MuPDF draws form fields and
 * annotations with, where the document has none (every field's when the form asks readers to
 * make them, /NeedAppearances). MuPDF makes them when it renders but keeps them out of the
 * document, and baking draws what the document holds: without them a field whose value only a
 * reader draws (LibreOffice's forms), or a note without an appearance, would be baked blank.
 * The form part is the PNG engine's makeFieldAppearances.
 */
function makeAppearances(pdf: mupdf.PDFDocument, pageCount: number): void {
  const needAppearances = formEntry(pdf, 'NeedAppearances')
  const allFields = needAppearances.isBoolean() && needAppearances.asBoolean()
  for (let i = 0; i < pageCount; i++) {
    let page: mupdf.PDFPage
    try {
      page = pdf.loadPage(i)
    } catch (error) {
      if (isDamage(error)) continue // a page MuPDF cannot load has nothing it draws
      throw error
    }
    try {
      for (const widget of page.getWidgets()) if (allFields || !hasAppearance(widget)) writeAppearance(widget)
      for (const annot of page.getAnnotations()) if (!hasAppearance(annot)) writeAppearance(annot)
    } finally {
      page.destroy()
    }
  }
}

/**
 * indirectAnnotations makes each annotation written inside its page's /Annots an object of its
 * own: MuPDF draws such an annotation, but bakes nothing for it (annotated_pdf.pdf lost all three).
 */
function indirectAnnotations(pdf: mupdf.PDFDocument, pageCount: number): void {
  for (let i = 0; i < pageCount; i++) {
    const annots = pdf.findPage(i).get('Annots')
    for (const [at, annot] of arrayItems(annots).entries()) if (annot.isDictionary() && !annot.isIndirect()) annots.put(at, pdf.addObject(annot))
  }
}

/** fieldsLeft counts the /AcroForm fields and the widget annotations on pages. */
function fieldsLeft(pdf: mupdf.PDFDocument, pageCount: number): number {
  let left = sourceFields(pdf).length
  for (let i = 0; i < pageCount; i++) {
    for (const annot of arrayItems(pdf.findPage(i).get('Annots'))) if (annot.isDictionary() && isNamed(annot, 'Subtype', 'Widget')) left++
  }
  return left
}

/** flatten draws form fields and annotations into the page contents, leaving no form. `source.pages` is ignored. */
export function flatten(source: Source): FlattenResult {
  const opened = open(source.pdf, source.password)
  if (!opened.ok) return opened
  try {
    return unlessDamaged(
      () => {
        indirectAnnotations(opened.pdf, opened.pageCount)
        makeAppearances(opened.pdf, opened.pageCount)
        opened.pdf.bake()
        const left = fieldsLeft(opened.pdf, opened.pageCount)
        return { ok: true, pdf: save(opened.pdf, opened.encrypted ? WRITE_OPEN : WRITE), pages: opened.pageCount, fieldsLeft: left }
      },
      { ok: false, reason: 'unreadable' },
    )
  } finally {
    opened.pdf.destroy()
    mupdf.emptyStore()
  }
}

/** pageCount counts a PDF's pages (what a split's page ranges resolve against). */
export function pageCount(pdf: Uint8Array, password?: string): number | EditRefusal {
  const opened = open(pdf, password)
  if (!opened.ok) return opened
  opened.pdf.destroy()
  mupdf.emptyStore()
  return opened.pageCount
}
