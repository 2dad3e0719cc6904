/**
 * runEdit runs a page operation (merge, split, rotate, flatten) for a worker: the job's page
 * selections resolved against each document, the limits checked, and the PDFs it makes, in
 * order, or the refusal its input earns.
 */
import { flatten, merge, pageCount as countPages, rotate, split, type EditRefusal } from './engines/edit.ts'
import { pagesLabel, resolvePages } from './pages.ts'
import type { EditSpec, Job, Refusal } from './protocol.ts'

/** The PDFs made, or the refusal; a split's were given to `Emit.part` as they were made (`pdfs` is then empty). */
export type EditOutcome = { readonly ok: true; readonly pdfs: Uint8Array[]; readonly files: number; readonly pageCount: number } | Refusal

/**
 * Where a page operation tells how it goes: its files and pages before the first (a split's parts named by their pages), a split's
 * each PDF (false: stop), progress.
 */
export interface Emit {
  start(files: number, pageCount: number, labels?: readonly string[]): void
  part(pdf: Uint8Array): boolean
  progress(): void
}

const refuse = (code: Refusal['code'], params?: Refusal['params']): Refusal => ({ ok: false, code, params })

/** refusalOf: the catalogue error for an input the engine refused (in a merge, naming the document: `part`, 0-based). */
function refusalOf(refusal: EditRefusal, part?: number): Refusal {
  if (part !== undefined) {
    const reason =
      refusal.reason === 'password'
        ? 'needs its password (or the one given is wrong)'
        : refusal.reason === 'pages'
          ? `has ${refusal.pageCount ?? 0} pages, fewer than its pages ask for`
          : 'is not a PDF that can be read'
    return refuse('MERGE_DOCUMENT_REFUSED', { part: part + 1, reason })
  }
  if (refusal.reason === 'password') return refuse('PDF_PASSWORD_REQUIRED')
  if (refusal.reason === 'pages') return refuse('PAGES_OUT_OF_RANGE', { count: refusal.pageCount ?? 0 })
  if (refusal.page !== undefined) return refuse('PAGE_UNREADABLE', { page: refusal.page })
  return refuse('PDF_UNREADABLE')
}

/** runMerge: the job's document and pages first, then the others, each selection resolved against its own document. */
function runMerge(job: Job & { op: 'edit' }, edit: EditSpec & { kind: 'merge' }, progress: () => void): EditOutcome {
  const sources = [{ pdf: job.pdf, password: job.password, pages: job.pages }, ...edit.others]
  const resolved = []
  for (const [part, source] of sources.entries()) {
    let pages: number[] | null = null
    if (source.pages !== null) {
      const count = countPages(source.pdf, source.password)
      if (typeof count !== 'number') return refusalOf(count, part)
      pages = resolvePages(source.pages, count)
      if (pages === null) return refusalOf({ ok: false, reason: 'pages', pageCount: count }, part)
    }
    resolved.push({ pdf: source.pdf, pages, ...(source.password === undefined ? {} : { password: source.password }) })
  }
  const merged = merge(resolved, { maxPages: job.limits.maxPages }, progress)
  if (merged.ok) return { ok: true, pdfs: [merged.pdf], files: 1, pageCount: merged.pages }
  if (merged.reason === 'too-many-pages') return refuse('TOO_MANY_PAGES', { count: merged.count, limit: job.limits.maxPages })
  return refusalOf(merged, merged.part)
}

/** splitParts: the pages of each part, from the job's selection (every `every` pages) or the parts' own selections. */
function splitParts(edit: EditSpec & { kind: 'split' }, selected: number[], count: number): number[][] | null {
  if (edit.every !== null) {
    const parts: number[][] = []
    for (let at = 0; at < selected.length; at += edit.every) parts.push(selected.slice(at, at + edit.every))
    return parts
  }
  const parts = (edit.parts ?? []).map((ranges) => resolvePages(ranges, count))
  return parts.some((pages) => pages === null) ? null : (parts as number[][])
}

/** runEdit: the PDFs a page operation makes (a split's go to `emit` as they are made); `emit.progress` is the pool's clock. */
export function runEdit(job: Job & { op: 'edit' }, emit: Emit): EditOutcome {
  const { edit, limits } = job
  if (edit.kind === 'merge') return runMerge(job, edit, emit.progress)
  const count = countPages(job.pdf, job.password)
  if (typeof count !== 'number') return refusalOf(count)
  if (count > limits.maxPages) return refuse('TOO_MANY_PAGES', { count, limit: limits.maxPages })
  const selected = resolvePages(job.pages, count)
  if (selected === null) return refuse('PAGES_OUT_OF_RANGE', { count })
  const source = { pdf: job.pdf, pages: selected, ...(job.password === undefined ? {} : { password: job.password }) }
  if (edit.kind === 'split') {
    const parts = splitParts(edit, selected, count)
    if (parts === null) return refuse('PAGES_OUT_OF_RANGE', { count })
    const pageCount = parts.reduce((n, part) => n + part.length, 0)
    let started = false
    const made = split(source, parts, (pdf) => {
      if (!started)
        emit.start(
          parts.length,
          pageCount,
          parts.map((pages, i) => pagesLabel(pages, i + 1)),
        )
      started = true
      return emit.part(pdf)
    })
    return made.ok ? { ok: true, pdfs: [], files: parts.length, pageCount } : refusalOf(made)
  }
  const made = edit.kind === 'rotate' ? rotate(source, edit.angle) : flatten(source)
  return made.ok ? { ok: true, pdfs: [made.pdf], files: 1, pageCount: made.pages } : refusalOf(made)
}
