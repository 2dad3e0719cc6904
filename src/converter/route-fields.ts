/**
 * Which option fields each conversion operation takes, the one table that both doors read: the
 * synchronous routes' multipart uploads (upload.ts) and job submissions, as a form or a JSON
 * body (services/jobs.ts). A field of another operation is refused (400 OPTION_NOT_TAKEN,
 * naming the field and the operation) rather than ignored, so that a caller never believes an
 * option was applied that was not: a `dpi` on extractText, an `angle` on flatten.
 *
 * generateImage and generatePostscript are Renda.io's routes, and keep what its clients send
 * them: `dpi`, `pages`, `colorMode` and `password` on both. PostScript is vector and has no use
 * for a dpi, but the route has always taken (and checked) one, and clients send it (a validating
 * proxy saw generatePostscript answer DPI_INVALID): it stays taken, checked, without effect.
 */
import type { Problem } from '../errors/errors.ts'
import type { JobOperation } from '../domain/jobs.ts'

/** Every option field of the conversion group (a job's own fields, operation, sourceUrl, resultUrl and metadata, apart). */
export const OPTION_FIELDS = [
  'dpi',
  'pages',
  'colorMode',
  'password',
  'format',
  'width',
  'height',
  'quality',
  'compression',
  'bitDepth',
  'ranges',
  'every',
  'angle',
  'preset',
] as const
export type OptionField = (typeof OPTION_FIELDS)[number]

/**
 * The fields each operation takes. compress rewrites the whole document and flatten a form
 * across its pages: neither takes `pages`. A merge takes `pages` and `password` once per document.
 */
export const FIELDS_TAKEN: Readonly<Record<JobOperation, readonly OptionField[]>> = {
  image: ['dpi', 'pages', 'colorMode', 'password', 'format', 'width', 'height', 'quality', 'compression', 'bitDepth'],
  postscript: ['dpi', 'pages', 'colorMode', 'password'],
  text: ['pages', 'password', 'format'],
  compress: ['colorMode', 'password', 'preset'],
  merge: ['pages', 'password'],
  split: ['pages', 'password', 'ranges', 'every'],
  rotate: ['pages', 'password', 'angle'],
  flatten: ['password'],
}

/** Each operation's synchronous route (POST /converter/<route>), the name a refusal of the route gives. */
export const OPERATION_ROUTES: Readonly<Record<JobOperation, string>> = {
  image: 'generateImage',
  postscript: 'generatePostscript',
  text: 'extractText',
  compress: 'compress',
  merge: 'merge',
  split: 'split',
  rotate: 'rotate',
  flatten: 'flatten',
}

/**
 * takenFields adds a problem for each option field sent (not empty) that `operation` does not
 * take, naming it and `name` (the route, or the job's operation), and gives the fields without
 * them, so that what is refused is not also checked as a value it would have had elsewhere.
 */
export function takenFields<T extends Readonly<Record<string, string | undefined>>>(operation: JobOperation, name: string, fields: T, problems: Problem[]): T {
  const taken = FIELDS_TAKEN[operation]
  const refused = OPTION_FIELDS.filter((field) => !taken.includes(field) && (fields[field]?.trim() ?? '') !== '')
  for (const field of refused) problems.push({ code: 'OPTION_NOT_TAKEN', params: { field, route: name } })
  return Object.fromEntries(
    Object.entries(fields).filter(([field]) => !(OPTION_FIELDS as readonly string[]).includes(field) || taken.includes(field as OptionField)),
  ) as T
}
