/**
 * The curl examples of the README and the pages of docs/, read as test/checks/examples.test.ts runs them: each `curl` command of a
 * fenced `sh`, `bash` or `console` block (with its `\` continuation lines), the note on its line (`# 204`, `# 201: …`), and what the
 * comment lines under it show: the answer (`# {…}`, `# 201 {…}`, an answer a line, continued on lines that start with a space), the
 * answer when run again (`# again: 400 […]`), and the files it writes (`# writes report.zip: report-1.png, …`). A block after
 * `<!-- example: not run, because … -->` is not run, and says why.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

export interface Shown {
  /** The status shown, or null: any 2xx. */
  readonly status: number | null
  /** The answer as written, `…` included, or null when only a status is shown. */
  readonly body: string | null
}

/** A file a command writes: its name, the pages it holds (a PDF, a TIFF), and a zip's entries, in order. */
export interface Written {
  readonly name: string
  readonly pages: number | null
  readonly entries: readonly Written[] | null
}

export interface Example {
  readonly file: string
  readonly line: number
  /** The block it is in, counted from 1 in its file: a value shown in a block's answers stands for the real one in that block only. */
  readonly block: number
  readonly command: string
  readonly answer: Shown
  readonly again: Shown | null
  readonly writes: readonly Written[]
  /** Why it is not run (the block's marker), or null. */
  readonly notRun: string | null
}

const ROOT = join(import.meta.dirname, '..', '..')
/** The generated references: their curl lines are the reference's, checked by its own tests. */
const GENERATED = new Set(['api.md', 'admin-api.md', 'errors.md', 'configuration.md'])

/** The pages whose examples are run, in the order they run: the README, then docs/ by name. */
export const PAGES = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md') && !GENERATED.has(f))
    .sort()
    .map((f) => `docs/${f}`),
]

const NOT_RUN = /^<!-- example: not run, because (.+?) -->$/
const SHELL = new Set(['sh', 'bash', 'console', 'shell'])

/** splitNote cuts a command's line at a ` # ` outside quotes: the command, and the note after it. */
function splitNote(line: string): [string, string | null] {
  let quote: string | null = null
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!
    if (quote !== null) {
      if (c === quote) quote = null
    } else if (c === "'" || c === '"') quote = c
    else if (c === '#' && /\s/.test(line[i - 1] ?? '') && /\s/.test(line[i + 1] ?? ' ')) return [line.slice(0, i).trimEnd(), line.slice(i + 1).trim()]
  }
  return [line, null]
}

/** jsonEnd: where the JSON value that starts `text` ends (words may follow it: `{…}   (the secret is never echoed)`). */
function jsonEnd(text: string): number {
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!
    if (inString) {
      if (c === '\\') i++
      else if (c === '"') inString = false
    } else if (c === '"') inString = true
    else if (c === '{' || c === '[') depth++
    else if ((c === '}' || c === ']') && --depth === 0) return i + 1
  }
  return text.length
}

/** shown reads `201`, `201 {…}`, `{…}` or `201: words` into a status and an answer. */
function shown(text: string): Shown | null {
  const m = /^(\d{3})(?:\b|:)\s*([[{].*)?/s.exec(text)
  const body = (json: string) => json.slice(0, jsonEnd(json)).trim()
  if (m) return { status: Number(m[1]), body: m[2] === undefined ? null : body(m[2]) }
  if (/^[[{]/.test(text)) return { status: null, body: body(text) }
  return null
}

/** writtenOf reads `report.zip: a.pdf (3 pages), b.pdf` or `report.pdf (8 pages)`. */
function writtenOf(text: string): Written {
  const [head = '', list] = text.split(/:\s+/, 2)
  const one = (item: string): Written => {
    const m = /^(\S+)(?:\s+\((\d+) pages?\))?$/.exec(item.trim())
    if (!m) throw new Error(`a # writes line names files as 'name (N pages)': ${item}`)
    return { name: m[1]!, pages: m[2] === undefined ? null : Number(m[2]), entries: null }
  }
  const file = one(head)
  return list === undefined ? file : { ...file, entries: list.split(/,\s+/).map(one) }
}

/** examplesOf reads a page's examples. */
export function examplesOf(file: string, text = readFileSync(join(ROOT, file), 'utf8')): Example[] {
  const lines = text.split('\n')
  const examples: Example[] = []
  let block = 0
  for (let i = 0; i < lines.length; i++) {
    const fence = /^\s*```(\w*)\s*$/.exec(lines[i]!)
    if (!fence) continue
    const lang = fence[1] ?? ''
    let end = i + 1
    while (end < lines.length && !/^\s*```\s*$/.test(lines[end]!)) end++
    const before =
      lines
        .slice(0, i)
        .findLast((l) => l.trim() !== '')
        ?.trim() ?? ''
    const notRun = NOT_RUN.exec(before)?.[1] ?? null
    block++
    if (SHELL.has(lang)) examples.push(...blockExamples(file, lines, i + 1, end, block, notRun))
    i = end
  }
  return examples
}

function blockExamples(file: string, lines: readonly string[], from: number, to: number, block: number, notRun: string | null): Example[] {
  const examples: Example[] = []
  for (let i = from; i < to; i++) {
    const first = lines[i]!.trim().replace(/^\$ /, '')
    if (!/^curl\s/.test(first)) continue
    const line = i + 1
    const parts = [first]
    while (parts.at(-1)!.endsWith('\\') && i + 1 < to) parts.push(lines[++i]!.trim())
    const [command, note] = splitNote(parts.join('\n'))
    const comments: string[] = []
    for (let j = i + 1; j < to && /^\s*#/.test(lines[j]!); j++) comments.push(lines[j]!.trim().replace(/^#\s?/, ''))
    let answer = (note === null ? null : shown(note)) ?? { status: null, body: null }
    let again: Shown | null = null
    const writes: Written[] = []
    // What the comments under a command show, up to the first that is prose (it introduces the next command).
    let last: 'answer' | 'again' | null = null
    for (const comment of comments) {
      if (comment.startsWith('writes ')) writes.push(writtenOf(comment.slice(7)))
      else if (comment.startsWith('again: ')) {
        again = shown(comment.slice(7))
        last = 'again'
      } else if (/^\s/.test(comment) && last !== null) {
        const into = last === 'again' ? again! : answer
        const joined = { ...into, body: `${into.body ?? ''}${comment.trim()}` }
        if (last === 'again') again = joined
        else answer = joined
      } else if (answer.body !== null && last === 'answer' && /^[[{]/.test(comment)) {
        // One answer a line (a stream of JSON lines).
        answer = { ...answer, body: `${answer.body}\n${comment.slice(0, jsonEnd(comment))}` }
      } else {
        const s = answer.body === null ? shown(comment) : null
        if (s === null) break
        answer = { status: s.status ?? answer.status, body: s.body }
        last = 'answer'
      }
    }
    examples.push({ file, line, block, command, answer, again, writes, notRun })
  }
  return examples
}

/**
 * lenient reads an answer as the docs write it: `…` as a member of an object (`{"a":1,…}`, `{…}`) leaves the object open to other
 * members, as the last item of an array (`[1,…]`) leaves it open to more items; in a string it matches any text.
 */
export function lenient(text: string): unknown {
  let out = ''
  const stack: string[] = []
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!
    if (inString) {
      out += c
      if (c === '\\') out += text[++i] ?? ''
      else if (c === '"') inString = false
    } else if (c === '"') {
      inString = true
      out += c
    } else if (c === '{' || c === '[') {
      stack.push(c)
      out += c
    } else if (c === '}' || c === ']') {
      stack.pop()
      out += c
    } else if (c === '…') out += stack.at(-1) === '{' ? '"…":"…"' : '"…"'
    else out += c
  }
  return JSON.parse(out)
}

/**
 * Bindings: what a value shown in a block stands for. A string of the docs that the real answer gives otherwise (an ID, a code,
 * a secret written `JBSW…`) stands for the real value in the block's later commands and answers.
 */
export type Bindings = Map<string, string>

/** apply writes the bound values into a text of the docs, the longest first. */
export function apply(text: string, bindings: Bindings): string {
  let out = text
  for (const [shownText, real] of [...bindings].sort((a, b) => b[0].length - a[0].length)) out = out.split(shownText).join(real)
  return out
}

/** shape: a value's letters and digits as `x` (all digits: `9`), so that `job_19a5…` and `492039` match any of their kind. */
const shape = (s: string) => (/^\d+$/.test(s) ? s.replace(/\d/g, '9') : s.replace(/[A-Za-z0-9]/g, 'x'))

/**
 * matches compares a shown answer with the real one, adding to `problems`: objects have the members shown (and only those, unless
 * `…` is one); arrays the items shown (more after a last `…`); a string is equal, or matches with `…` as any text (a word cut short,
 * `JBSW…`, as any word), or, when it holds a digit (an ID, a code, a date), has the same shape; numbers, booleans and null are equal.
 */
export function matches(shownValue: unknown, real: unknown, bindings: Bindings, problems: string[], at = '$'): void {
  if (typeof shownValue === 'string') {
    const expected = apply(shownValue, bindings)
    if (typeof real !== 'string') {
      problems.push(`${at}: ${JSON.stringify(real)} is not a string`)
      return
    }
    if (expected === real) return
    const pattern = new RegExp(
      `^${expected
        .split('…')
        .map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
        .join('[\\s\\S]*')}$`,
    )
    // `JBSW…`: a value of letters and digits cut short (a secret) stands for any such value.
    const ok = /^[A-Za-z0-9]+…$/.test(expected)
      ? /^[A-Za-z0-9]+$/.test(real)
      : expected.includes('…')
        ? pattern.test(real)
        : /\d/.test(expected) && shape(expected) === shape(real)
    if (!ok) problems.push(`${at}: ${JSON.stringify(real)}, the docs show ${JSON.stringify(shownValue)}`)
    // A value shown that stands for another: an ID, a code, a secret (`…` alone stands for nothing).
    else if (shownValue.replace(/…/g, '') !== '' && !bindings.has(shownValue)) bindings.set(shownValue, real)
    return
  }
  if (Array.isArray(shownValue)) {
    if (!Array.isArray(real)) {
      problems.push(`${at}: not an array`)
      return
    }
    const open = shownValue.at(-1) === '…'
    const items = open ? shownValue.slice(0, -1) : shownValue
    if (open ? real.length < items.length : real.length !== items.length) problems.push(`${at}: ${real.length} items, the docs show ${shownValue.length}`)
    items.forEach((item, i) => {
      matches(item, real[i], bindings, problems, `${at}[${i}]`)
    })
    return
  }
  if (shownValue !== null && typeof shownValue === 'object') {
    if (real === null || typeof real !== 'object' || Array.isArray(real)) {
      problems.push(`${at}: not an object`)
      return
    }
    const members = Object.entries(shownValue).filter(([k]) => k !== '…')
    for (const [k, v] of members) {
      if (!(k in real)) problems.push(`${at}.${k}: missing`)
      else matches(v, (real as Record<string, unknown>)[k], bindings, problems, `${at}.${k}`)
    }
    if (!('…' in shownValue)) {
      const extra = Object.keys(real).filter((k) => !(k in shownValue))
      if (extra.length > 0) problems.push(`${at}: members the docs do not show (and no …): ${extra.join(', ')}`)
    }
    return
  }
  if (shownValue !== real) problems.push(`${at}: ${JSON.stringify(real)}, the docs show ${JSON.stringify(shownValue)}`)
}
