/**
 * readEditOptions reads the options of a page operation, adding a problem for each bad one:
 * a merge's documents and the `pages` and `password` sent once per document, in their order;
 * a split's `ranges` or `every`; a rotation's `angle`.
 */
import type { Problem } from '../errors/errors.ts'
import { parsePages, type Range } from './pages.ts'
import type { EditSpec } from './protocol.ts'

export const EDIT_KINDS = ['merge', 'split', 'rotate', 'flatten'] as const
export type EditKind = (typeof EDIT_KINDS)[number]

/** The most parts one split makes from `ranges` (every page of a document at the most with `every`). */
export const MAX_SPLIT_RANGES = 200

export interface EditOptions {
  readonly edit: EditSpec
  /** A merge's first document's pages (its others are in `edit`). */
  readonly pages?: Range[] | null
  readonly password?: string
}

interface Given {
  readonly fields: Readonly<Record<string, string>>
  readonly repeated: Readonly<Record<string, readonly string[]>>
  readonly files: readonly { readonly data: Uint8Array }[]
}

const ANGLES: Readonly<Record<string, 90 | 180 | 270>> = { '90': 90, '180': 180, '270': 270, '-90': 270, '-180': 180, '-270': 90 }

export function readEditOptions(kind: EditKind, given: Given, maxDocuments: number, problems: Problem[]): EditOptions {
  switch (kind) {
    case 'merge':
      return readMerge(given, maxDocuments, problems)
    case 'split':
      return { edit: readSplit(rangesText(given.repeated.ranges ?? [given.fields.ranges ?? '']), given.fields.every, problems) }
    case 'rotate': {
      const angle = ANGLES[given.fields.angle?.trim() ?? '']
      if (angle === undefined) problems.push({ code: 'ANGLE_INVALID' })
      return { edit: { kind: 'rotate', angle: angle ?? 90 } }
    }
    case 'flatten':
      // Every page is flattened (a form is one across its pages): `pages` is not taken (route-fields.ts).
      return { edit: { kind: 'flatten' } }
  }
}

/**
 * mergeFields: each document's `pages` and `password` as sent, in the documents' order (null:
 * all pages, no password); more of either than documents is a problem, as is a bad selection.
 */
export function mergeFields(repeated: Readonly<Record<string, readonly string[]>>, documents: number, problems: Problem[]) {
  for (const field of ['pages', 'password'] as const) {
    const values = repeated[field] ?? []
    if (values.length > Math.max(documents, 1)) problems.push({ code: 'MERGE_FIELDS_MISMATCH', params: { field, count: values.length, documents } })
  }
  const pages: (string | null)[] = []
  const passwords: (string | null)[] = []
  for (let i = 0; i < documents; i++) {
    const text = repeated.pages?.[i]?.trim() ?? ''
    if (text !== '' && parsePages(text) === null) problems.push({ code: 'PAGES_INVALID' })
    pages.push(text === '' ? null : text)
    const password = repeated.password?.[i] ?? ''
    // As a single password is checked (readOptions): at most 256 characters of well-formed text.
    if (password.length > 256 || !password.isWellFormed()) problems.push({ code: 'PASSWORD_INVALID' })
    passwords.push(password === '' ? null : password)
  }
  return { pages, passwords }
}

/** readMerge: the documents in order, each with the `pages` and `password` sent in its place (empty: all pages, no password). */
function readMerge({ repeated, files }: Given, maxDocuments: number, problems: Problem[]): EditOptions {
  if (files.length < 2) problems.push({ code: 'MERGE_DOCUMENTS_REQUIRED', params: { max: maxDocuments, count: files.length } })
  const { pages: texts, passwords } = mergeFields(repeated, files.length, problems)
  const pages = texts.map((text) => (text === null ? null : parsePages(text)))
  const others = files
    .slice(1)
    .map((file, i) => ({ pdf: file.data, pages: pages[i + 1] ?? null, ...(passwords[i + 1] ? { password: passwords[i + 1]! } : {}) }))
  return { edit: { kind: 'merge', others }, pages: pages[0] ?? null, ...(passwords[0] ? { password: passwords[0] } : {}) }
}

/**
 * rangesText: a split's `ranges` as one text, its parts separated by semicolons. Each `ranges` field sent is a part (or several,
 * separated by semicolons): `curl -F 'ranges=1-3;4-6'` sends only `1-3`, since curl reads what follows a `;` in `-F` as a
 * parameter of the part, so `-F ranges=1-3 -F ranges=4-6` is the form that survives it.
 */
export function rangesText(values: readonly string[]): string {
  return values.map((value) => value.trim()).join(';')
}

/** readSplit: `ranges` (page selections separated by semicolons, one file each) or `every` (pages a file), one of them. */
function readSplit(rangesGiven: string, every: string | undefined, problems: Problem[]): EditSpec {
  const rangesText = rangesGiven.trim()
  const everyText = every?.trim() ?? ''
  if ((rangesText === '') === (everyText === '')) {
    problems.push({ code: 'SPLIT_PARTS_REQUIRED' })
    return { kind: 'split', parts: null, every: 1 }
  }
  if (everyText !== '') {
    const every = /^\d{1,6}$/.test(everyText) ? Number(everyText) : 0
    if (every < 1) problems.push({ code: 'SPLIT_EVERY_INVALID' })
    return { kind: 'split', parts: null, every: Math.max(every, 1) }
  }
  const texts = rangesText.split(';').map((part) => part.trim())
  const parts = texts.map((text) => (text === '' ? null : parsePages(text)))
  if (texts.length > MAX_SPLIT_RANGES || parts.some((part) => part === null)) problems.push({ code: 'SPLIT_RANGES_INVALID', params: { max: MAX_SPLIT_RANGES } })
  return { kind: 'split', parts: parts.filter((part) => part !== null), every: null }
}

/** The page operations a job can run (a merge takes several documents: not a job). */
export const isJobEdit = (operation: string): operation is 'split' | 'rotate' | 'flatten' =>
  operation === 'split' || operation === 'rotate' || operation === 'flatten'

/** jobEditOptions: a page operation's options as a job keeps them (checked as the route checks them). */
export function jobEditOptions(kind: 'split' | 'rotate' | 'flatten', fields: Readonly<Record<string, string | undefined>>, problems: Problem[]) {
  const given = Object.fromEntries(Object.entries(fields).filter((entry): entry is [string, string] => entry[1] !== undefined))
  const { edit } = readEditOptions(kind, { fields: given, repeated: {}, files: [] }, 1, problems)
  if (edit.kind === 'rotate') return { angle: edit.angle }
  if (edit.kind !== 'split') return {}
  return edit.every !== null ? { every: edit.every } : { ranges: given.ranges!.trim() }
}

/** editSpecOf: a job's page operation, from what it keeps. */
export function editSpecOf(
  kind: 'split' | 'rotate' | 'flatten',
  kept: { readonly ranges?: string; readonly every?: number; readonly angle?: 90 | 180 | 270 },
): EditSpec {
  if (kind === 'rotate') return { kind, angle: kept.angle ?? 90 }
  if (kind === 'flatten') return { kind }
  if (kept.every !== undefined) return { kind, parts: null, every: kept.every }
  return { kind, parts: (kept.ranges ?? '').split(';').map((part) => parsePages(part.trim()) ?? []), every: null }
}
