/**
 * Page selections such as `1-3,5,9-` (1-based; `9-` runs to the last page, `-3` from the
 * first). Parsing checks the syntax; resolving against a document checks the range.
 */
export interface Range {
  readonly from: number
  /** Infinity for an open range (`9-`). */
  readonly to: number
}

const PART = /^(\d{1,6})?(?:(-)(\d{1,6})?)?$/

/** parsePages returns the ranges, or null when the text is not a selection. */
export function parsePages(text: string): Range[] | null {
  const parts = text.split(',').map((p) => p.trim())
  if (parts.length > 200) return null
  const ranges: Range[] = []
  for (const part of parts) {
    const m = PART.exec(part)
    if (!m || part === '' || part === '-') return null
    const [, a, dash, b] = m
    const from = a === undefined ? 1 : Number(a)
    const to = dash === undefined ? from : b === undefined ? Infinity : Number(b)
    if (from < 1 || to < from) return null
    ranges.push({ from, to })
  }
  return ranges
}

/** resolvePages lists the selected pages in order, once each; null when a page is past the end. */
export function resolvePages(ranges: readonly Range[] | null, pageCount: number): number[] | null {
  if (ranges === null) return Array.from({ length: pageCount }, (_, i) => i + 1)
  const pages = new Set<number>()
  for (const { from, to } of ranges) {
    if (from > pageCount || (to !== Infinity && to > pageCount)) return null
    for (let p = from; p <= Math.min(to, pageCount); p++) pages.add(p)
  }
  return [...pages].sort((x, y) => x - y)
}

/** The longest label a split's part is named by; a longer one names the part by its number instead. */
const MAX_LABEL = 40

/**
 * pagesLabel names a split's part (1-based `part`) by its pages (ascending): `pages-` and the runs, `1-3`, joined by `_`
 * (`pages-1-3_5`), so that `report-pages-1-3_5.pdf` says what it holds; a selection too scattered to name so in 40
 * characters is `part-<n>`.
 */
export function pagesLabel(pages: readonly number[], part: number): string {
  const runs: string[] = []
  for (let i = 0; i < pages.length; ) {
    let j = i
    while (j + 1 < pages.length && pages[j + 1] === pages[j]! + 1) j++
    runs.push(i === j ? String(pages[i]) : `${pages[i]}-${pages[j]}`)
    i = j + 1
  }
  const label = runs.join('_')
  return label === '' || label.length > MAX_LABEL ? `part-${part}` : `pages-${label}`
}
