/**
 * The API reference at /docs: one server-rendered page made from the app's own OpenAPI
 * document, usable without JavaScript, with every control named and landmarks for every part,
 * so that it passes axe with no serious or critical finding and runs under a CSP that allows
 * nothing but its own stylesheet and filter script. For every operation it shows what it does,
 * its parameters and body fields, an example request (a `curl` line with the document's
 * example values, and the body as JSON), and every answer: what it is, its fields, an example
 * answer, and each error code with its status and message. (Swagger UI, served here before,
 * had five serious or critical axe violations and needed scripts and inline styles; Redoc
 * injects style elements, so it needs 'unsafe-inline' or a nonce on every answer: Redocly/redoc#1566.)
 *
 * Descriptions may carry Markdown code spans (`like this`) and nothing else is interpreted:
 * every text is escaped first.
 */
import { catalogue, render, type ErrorCode } from '../errors/catalogue.ts'

type Json = Record<string, unknown>

interface Schema {
  readonly type?: string | string[]
  readonly enum?: readonly unknown[]
  readonly description?: string
  readonly properties?: Record<string, Schema>
  readonly required?: readonly string[]
  readonly minimum?: number
  readonly maximum?: number
  readonly maxLength?: number
  readonly format?: string
  readonly items?: Schema
  readonly default?: unknown
  readonly examples?: readonly unknown[]
  readonly anyOf?: readonly Schema[]
  readonly 'x-error-codes'?: readonly ErrorCode[]
}

interface Operation {
  readonly operationId?: string
  readonly summary?: string
  readonly description?: string
  readonly tags?: readonly string[]
  readonly parameters?: readonly { name: string; in: string; required?: boolean; description?: string; schema?: Schema }[]
  readonly requestBody?: { content?: Record<string, Media> }
  readonly responses?: Record<string, { description?: string; content?: Record<string, Media> }>
  readonly security?: readonly unknown[]
}

/** A body of one content type: its schema and example (@fastify/swagger moves a schema's first `examples` entry to `example`). */
interface Media {
  readonly schema?: Schema
  readonly example?: unknown
  readonly examples?: Record<string, { value?: unknown }>
}

const exampleOf = (media: Media | undefined): unknown =>
  media === undefined ? undefined : (media.example ?? Object.values(media.examples ?? {})[0]?.value ?? media.schema?.examples?.[0])

const METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!)
}

/**
 * A Markdown link whose target is on this server (relative: `docs#errors`, `#errors`) or https;
 * anything else (a `javascript:` URL, say) stays text.
 */
const LINK = /\[([^\]]+)\]\((https:\/\/[^\s()"<>]+|#[\w-]+|[a-z][\w-]*(?:\/[\w-]+)*(?:#[\w-]+)?)\)/gi

/** prose: escaped text with `code spans`, [links](docs#errors) and paragraphs (blank lines). */
function prose(text: string | undefined): string {
  if (text === undefined || text.trim() === '') return ''
  return text
    .split(/\n{2,}/)
    .map(
      (p) =>
        `<p>${escapeHtml(p)
          .replace(LINK, '<a href="$2">$1</a>')
          .replace(/`([^`]+)`/g, '<code>$1</code>')}</p>`,
    )
    .join('\n')
}

const slug = (text: string) =>
  text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '')

function typeOf(s: Schema | undefined): string {
  if (s === undefined) return ''
  if (s.anyOf !== undefined) return s.anyOf.map(typeOf).join(' | ')
  if (s.enum !== undefined) return s.enum.map(String).join(' | ')
  if (s.type === 'array' && s.items !== undefined) return `array of ${s.items.properties === undefined ? typeOf(s.items) : 'objects (below)'}`
  const type = Array.isArray(s.type) ? s.type.join(' | ') : (s.type ?? 'any')
  const range = s.minimum !== undefined || s.maximum !== undefined ? ` (${s.minimum ?? '…'} to ${s.maximum ?? '…'})` : ''
  const length = s.maxLength !== undefined ? ` (at most ${s.maxLength} characters)` : ''
  return `${type}${s.format === undefined ? '' : `, ${s.format}`}${range}${length}`
}

function fieldTable(caption: string, rows: readonly { name: string; type: string; required: boolean; description?: string | undefined }[]): string {
  if (rows.length === 0) return ''
  return stackedTable(
    caption,
    ['Name', 'Type', 'Required', 'Description'],
    rows.map((r) => [`<code>${escapeHtml(r.name)}</code>`, escapeHtml(r.type), r.required ? 'yes' : 'no', prose(r.description)]),
  )
}

/**
 * stackedTable: a table that on a narrow screen shows each row as a block, every cell under its
 * column's name (REFERENCE_CSS). The roles keep it a table for screen readers, which drop the
 * table's semantics when its display changes; the first cell of a row heads the row.
 */
function stackedTable(caption: string, columns: readonly string[], rows: readonly (readonly string[])[]): string {
  const head = columns.map((c) => `<th scope="col" role="columnheader">${escapeHtml(c)}</th>`).join('')
  const body = rows
    .map(
      (cells) =>
        `<tr role="row">${cells
          .map((cell, i) =>
            i === 0 ? `<th scope="row" role="rowheader">${cell}</th>` : `<td role="cell" data-label="${escapeHtml(columns[i]!)}">${cell}</td>`,
          )
          .join('')}</tr>`,
    )
    .join('\n')
  return `<table class="stacked" role="table">
<caption>${escapeHtml(caption)}</caption>
<thead role="rowgroup"><tr role="row">${head}</tr></thead>
<tbody role="rowgroup">
${body}
</tbody>
</table>`
}

/** A shell word: single-quoted, with a quote inside written as '\''. */
const shellWord = (text: string) => `'${text.replace(/'/g, "'\\''")}'`

/**
 * curlLine: the operation as a `curl` command, with the body's example values where the document
 * has an example (else its required fields, as `…`): a form where the operation takes one (the
 * TOTP group also takes JSON and multipart), else multipart, a file field as a file.
 */
function curlLine(base: string, method: string, path: string, op: Operation): string {
  const secured = op.security === undefined || op.security.length > 0
  const form = op.requestBody?.content?.['application/x-www-form-urlencoded']?.schema
  const multipart = op.requestBody?.content?.['multipart/form-data']?.schema
  const json = op.requestBody?.content?.['application/json']?.schema
  const body = form ?? multipart ?? json
  const content = op.requestBody?.content ?? {}
  const example = exampleOf(content['application/x-www-form-urlencoded'] ?? content['multipart/form-data'] ?? content['application/json']) as
    | Record<string, unknown>
    | undefined
  // A field whose example is a list is sent once per item (a merge's documents and pages, a split's ranges).
  const fields: [string, string][] =
    example !== undefined
      ? Object.entries(example).flatMap(([k, v]): [string, string][] =>
          Array.isArray(v) ? v.map((item): [string, string] => [k, String(item)]) : [[k, typeof v === 'object' ? JSON.stringify(v) : String(v)]],
        )
      : (body?.required ?? []).map((name) => [name, '…'])
  const parts = ['curl']
  if (method !== 'get' && body === undefined) parts.push(`-X ${method.toUpperCase()}`)
  if (secured) parts.push("-H 'x-api-key: YOUR_KEY'")
  if (form !== undefined) for (const [name, value] of fields) parts.push(`--data-urlencode ${shellWord(`${name}=${value}`)}`)
  else if (multipart !== undefined) {
    for (const [name, value] of fields) {
      const property = multipart.properties?.[name]
      const file = property?.format === 'binary' || property?.items?.format === 'binary'
      // An example file written as `(cover.pdf)` is sent as that file.
      const named = /^\(([\w.-]+\.pdf)\)$/.exec(value)?.[1] ?? 'document.pdf'
      parts.push(file ? `-F ${shellWord(`${name}=@${named}`)}` : `-F ${shellWord(`${name}=${value}`)}`)
    }
  } else if (json !== undefined) parts.push("-H 'content-type: application/json'", `-d ${shellWord(JSON.stringify(example ?? {}))}`)
  parts.push(shellWord(`${base}${path}`))
  return parts.join(' \\\n  ')
}

/**
 * curlHtml: the command, each line continuation (` \\`) held to the word before it: a narrow
 * screen wraps a long word, never the `\\` alone onto a line of its own. The text is the
 * command as it is, so that a copy of it runs.
 */
const curlHtml = (command: string) => command.split(' \\\n').map(escapeHtml).join('<span class="cont"> \\</span>\n')

/**
 * pathHtml: a path in the side navigation, which may break before a `/` (never after the method,
 * which the non-breaking space before it keeps on the path's first line).
 */
const pathHtml = (path: string) => escapeHtml(path).replace(/(.)\//g, '$1<wbr>/')

/** The fields of an answer: an object's properties, or those of an array's items. */
function answerFields(schema: Schema | undefined): {
  caption: string
  rows: { name: string; type: string; required: boolean; description?: string | undefined }[]
} {
  const object = schema?.type === 'array' ? schema.items : schema
  const rows = Object.entries(object?.properties ?? {}).map(([name, s]) => ({
    name,
    type: typeOf(s),
    required: object?.required?.includes(name) === true,
    description: s.description,
  }))
  // One level down, as `parent[].child`: a list of factors, say, shows what each factor holds.
  for (const [name, s] of Object.entries(object?.properties ?? {})) {
    const inner = s.type === 'array' ? s.items : undefined
    for (const [child, c] of Object.entries(inner?.properties ?? {}))
      rows.push({ name: `${name}[].${child}`, type: typeOf(c), required: inner?.required?.includes(child) === true, description: c.description })
  }
  return { caption: schema?.type === 'array' ? 'Fields of each item' : 'Fields', rows }
}

const pretty = (value: unknown) => JSON.stringify(value, null, 2)

/** errorExample: the body a status answers for its first code, in the shape the catalogue gives that code. */
function errorExample(codes: readonly ErrorCode[]): string {
  const code = codes[0]!
  const { shape } = catalogue[code]
  const message = render(code, {})
  if (shape === 'list') return pretty([{ type: 'Error', code, message }])
  return pretty(shape === 'coded' ? { message, code } : { message })
}

/** answers: each success with what it is, its fields and an example; then the errors, each code with its status and message, and one example body. */
function answers(op: Operation): string {
  const out: string[] = []
  const errors: [string, ErrorCode[]][] = []
  for (const [status, r] of Object.entries(op.responses ?? {})) {
    const content = Object.entries(r.content ?? {})
    const codes = content.map(([, c]) => c.schema?.['x-error-codes']).find((c) => c !== undefined)
    if (codes !== undefined) {
      errors.push([status, [...codes]])
      continue
    }
    const parts = [
      `<h5>${escapeHtml(status)} ${content.length === 0 ? '' : `<span class="types">${content.map(([t]) => `<code>${escapeHtml(t)}</code>`).join(' or ')}</span>`}</h5>`,
    ]
    parts.push(prose(r.description))
    for (const [type, c] of content) {
      const { caption, rows } = answerFields(c.schema)
      parts.push(fieldTable(caption, rows))
      const example = exampleOf(c)
      if (example !== undefined)
        parts.push(
          `<p class="example-label">Example answer (<code>${escapeHtml(type)}</code>):</p>\n<pre class="example"><code>${escapeHtml(pretty(example))}</code></pre>`,
        )
      else if (c.schema?.format === 'binary' || type.startsWith('image/'))
        parts.push(`<p>The answer is the file itself (<code>${escapeHtml(type)}</code>).</p>`)
    }
    if (content.length === 0) parts.push('<p>No body.</p>')
    out.push(`<div class="answer">${parts.join('\n')}</div>`)
  }
  if (errors.length > 0) {
    const rows = errors.flatMap(([status, codes]) => codes.map((code) => [`<code>${code}</code>`, escapeHtml(status), escapeHtml(render(code, {}))]))
    const [firstStatus, firstCodes] = errors[0]!
    out.push(`<div class="answer">
<h5>Errors</h5>
${stackedTable('Error answers: the code, its status and its message', ['Code', 'Status', 'Message'], rows)}
<p class="example-label">Example error answer (${escapeHtml(firstStatus)}):</p>
<pre class="example"><code>${escapeHtml(errorExample(firstCodes))}</code></pre>
</div>`)
  }
  return out.join('\n')
}

function operation(base: string, method: string, path: string, op: Operation): string {
  const id = op.operationId ?? slug(`${method} ${path}`)
  const params = (op.parameters ?? []).map((p) => ({
    name: `${p.name} (${p.in})`,
    type: typeOf(p.schema),
    required: p.required === true,
    description: p.description ?? p.schema?.description,
  }))
  const bodies = Object.entries(op.requestBody?.content ?? {})
  const body = bodies[0]?.[1].schema
  const bodyRows = Object.entries(body?.properties ?? {}).map(([name, s]) => ({
    name,
    type: typeOf(s),
    required: body?.required?.includes(name) === true,
    description: s.description,
  }))
  const requestExample = exampleOf(bodies[0]?.[1])
  return `<section class="operation" aria-labelledby="${id}" data-filter="${escapeHtml(`${method} ${path} ${op.operationId ?? ''} ${op.summary ?? ''}`.toLowerCase())}">
<h3 id="${id}"><span class="method">${method.toUpperCase()}</span> <code>${escapeHtml(path)}</code></h3>
${op.summary === undefined ? '' : `<p class="summary">${escapeHtml(op.summary)}</p>`}
${prose(op.description)}
${fieldTable('Parameters', params)}
${bodies.length === 0 ? '' : `<p>Body: ${bodies.map(([type]) => `<code>${escapeHtml(type)}</code>`).join(' or ')}.</p>`}
${fieldTable('Body fields', bodyRows)}
<p class="example-label">Example request:</p>
<pre class="example curl"><code>${curlHtml(curlLine(base, method, path, op))}</code></pre>
${requestExample === undefined || op.requestBody?.content?.['application/json'] === undefined ? '' : `<p class="example-label">The same body as JSON (<code>content-type: application/json</code>):</p>\n<pre class="example"><code>${escapeHtml(pretty(requestExample))}</code></pre>`}
<h4 class="answers">Answers</h4>
${answers(op)}
</section>`
}

function errorTable(codes: readonly ErrorCode[] | undefined): string {
  const list = codes ?? (Object.keys(catalogue) as ErrorCode[])
  return stackedTable(
    'Error codes',
    ['Code', 'Status', 'Message', 'When'],
    list.map((code) => [`<code>${code}</code>`, String(catalogue[code].status), escapeHtml(render(code, {})), prose(catalogue[code].doc)]),
  )
}

export interface ReferenceOptions {
  /** The stylesheet's URL (served beside the page: the CSP allows nothing else). */
  readonly stylesheet: string
  /** The filter's script (served beside the page; the page works without it). */
  readonly script: string
  /** The page's icon (served beside it). */
  readonly icon: string
  /** The error codes to list (default: the whole catalogue). */
  readonly codes?: readonly ErrorCode[]
  /** Lines of introduction, plain text with code spans. */
  readonly intro: readonly string[]
}

/** renderReference makes the page of an OpenAPI document. */
export function renderReference(doc: Json, opts: ReferenceOptions): string {
  const info = (doc.info ?? {}) as { title?: string; version?: string }
  const servers = (doc.servers ?? []) as { url: string; description?: string }[]
  const base = servers[0]?.url ?? ''
  const paths = (doc.paths ?? {}) as Record<string, Partial<Record<(typeof METHODS)[number], Operation>>>
  const tags = (doc.tags ?? []) as { name: string; description?: string }[]
  const groups = new Map<string, { description?: string | undefined; ops: [string, string, Operation][] }>(
    tags.map((t) => [t.name, { description: t.description, ops: [] }]),
  )
  for (const [path, item] of Object.entries(paths)) {
    for (const method of METHODS) {
      const op = item[method]
      if (op === undefined) continue
      const tag = op.tags?.[0] ?? 'other'
      if (!groups.has(tag)) groups.set(tag, { ops: [] })
      groups.get(tag)!.ops.push([method, path, op])
    }
  }
  const title = `${info.title ?? 'API'} reference`
  const nav = [...groups]
    .filter(([, g]) => g.ops.length > 0)
    .map(
      ([tag, g]) => `<li class="tag"><a href="#tag-${slug(tag)}">${escapeHtml(tag)}</a>
<ul>${g.ops
        .map(([method, path, op]) => {
          const words = `${method} ${path} ${op.operationId ?? ''} ${op.summary ?? ''}`.toLowerCase()
          return `<li data-filter="${escapeHtml(words)}"><a href="#${op.operationId ?? slug(`${method} ${path}`)}"><span class="verb">${method.toUpperCase()}</span>&nbsp;<span class="path">${pathHtml(path)}</span></a></li>`
        })
        .join('')}</ul></li>`,
    )
    .join('\n')
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<link rel="icon" href="${escapeHtml(opts.icon)}" type="image/svg+xml">
<link rel="stylesheet" href="${escapeHtml(opts.stylesheet)}">
<script src="${escapeHtml(opts.script)}" defer></script>
</head>
<body>
<a class="skip" href="#main">Skip to the reference</a>
<header>
<h1>${escapeHtml(title)}</h1>
<p>Version ${escapeHtml(info.version ?? '')}. ${servers.map((s) => `Base URL: <code>${escapeHtml(s.url)}</code>${s.description === undefined ? '' : ` (${escapeHtml(s.description)})`}.`).join(' ')}
The machine-readable document is at <a href="openapi.json">openapi.json</a>.</p>
</header>
<div class="layout">
<nav aria-label="Operations">
<details open id="toc">
<summary><h2>Operations</h2></summary>
<p class="filter" hidden><label for="filter">Filter</label> <input type="search" id="filter" placeholder="onboardUser, /keys, verify…" autocomplete="off"></p>
<p id="filter-none" role="status" hidden>No operation matches.</p>
<ul>
${nav}
<li><a href="#errors">Errors</a></li>
</ul>
</details>
</nav>
<main id="main">
${opts.intro.map((line) => prose(line)).join('\n')}
${[...groups]
  .filter(([, g]) => g.ops.length > 0)
  .map(
    ([tag, g]) => `<section aria-labelledby="tag-${slug(tag)}">
<h2 id="tag-${slug(tag)}">${escapeHtml(tag)}</h2>
${prose(g.description)}
${g.ops.map(([method, path, op]) => operation(base, method, path, op)).join('\n')}
</section>`,
  )
  .join('\n')}
<section aria-labelledby="errors">
<h2 id="errors">Errors</h2>
${errorTable(opts.codes)}
</section>
</main>
</div>
</body>
</html>
`
}

/**
 * The filter: shows the operations whose method, path, id or summary hold every word typed, in
 * the list and on the page. On a narrow screen the list starts closed. Without it the page is
 * whole: the field stays hidden.
 */
export const REFERENCE_JS = `
document.addEventListener('DOMContentLoaded', () => {
  const input = document.getElementById('filter')
  const none = document.getElementById('filter-none')
  const toc = document.getElementById('toc')
  if (window.matchMedia('(max-width: 63.99rem)').matches) toc.open = false
  input.parentElement.hidden = false
  input.addEventListener('input', () => {
    const words = input.value.toLowerCase().split(/\\s+/).filter(Boolean)
    const match = (el) => words.every((w) => el.dataset.filter.includes(w))
    let shown = 0
    for (const el of document.querySelectorAll('nav li[data-filter]')) {
      el.hidden = !match(el)
      if (!el.hidden) shown++
    }
    for (const el of document.querySelectorAll('nav li.tag')) el.hidden = el.querySelector('li[data-filter]:not([hidden])') === null
    for (const el of document.querySelectorAll('section.operation')) el.hidden = !match(el)
    none.hidden = shown > 0
  })
})
`

/** The page's stylesheet: readable, with contrast above WCAG AA (4.5:1) everywhere. */
export const REFERENCE_CSS = `
:root { color-scheme: light; --ink: #1a1a1a; --muted: #4a4a4a; --line: #c8c8c8; --accent: #0b4f9c; --code: #f3f3f3; }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 84rem; padding: 1rem 1rem 4rem; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink); background: #fff; }
a { color: var(--accent); }
a:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; }
.skip { position: absolute; left: -999px; }
.skip:focus { left: 1rem; top: 1rem; background: #fff; padding: .5rem; }
code, pre { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: .9em; background: var(--code); }
code { padding: 0 .2em; overflow-wrap: anywhere; }
pre { padding: .75rem; white-space: pre-wrap; overflow-wrap: anywhere; }
pre code { padding: 0; }
nav ul { padding-left: 1.2rem; }
table { border-collapse: collapse; width: 100%; margin: .75rem 0 1.25rem; }
caption { text-align: left; font-weight: 600; padding: .25rem 0; }
th, td { border: 1px solid var(--line); padding: .35rem .5rem; text-align: left; vertical-align: top; }
td p, th p { margin: 0; }
.operation { border-top: 2px solid var(--line); margin-top: 2rem; }
.method { display: inline-block; min-width: 4.5rem; font-weight: 700; color: var(--accent); }
.summary { color: var(--muted); font-weight: 600; }
th, td { overflow-wrap: break-word; }
table.stacked th[scope="row"] { white-space: nowrap; }
h1 { font-size: 1.75rem; line-height: 1.2; }
h2 { font-size: 1.4rem; } h3 { font-size: 1.2rem; overflow-wrap: anywhere; } h4 { font-size: 1.05rem; margin: 1.25rem 0 .25rem; } h5 { font-size: 1rem; margin: 1rem 0 .25rem; }
summary { cursor: pointer; }
summary h2 { display: inline; font-size: 1.1rem; }
nav ul { list-style: none; padding-left: .75rem; margin: .25rem 0; }
nav > details > ul { padding-left: 0; }
nav li { margin: .15rem 0; overflow-wrap: anywhere; }
nav li[data-filter] a { display: block; padding-left: 4.2rem; text-indent: -4.2rem; text-decoration: none; }
nav li[data-filter] a .path { text-decoration: underline; }
nav .verb { display: inline-block; width: 3.9rem; text-indent: 0; white-space: nowrap; font-size: .8rem; font-weight: 700; color: var(--muted); }
.filter input { width: 100%; font: inherit; padding: .35rem .5rem; border: 1px solid var(--muted); border-radius: 4px; }
.answer { border-left: 3px solid var(--line); padding-left: .75rem; margin: .5rem 0 1rem; }
.example-label { margin: .75rem 0 .25rem; font-weight: 600; }
pre.example { margin-top: 0; }
pre.curl { word-break: break-all; }
pre.curl .cont { white-space: nowrap; }
.types code { font-weight: 400; }
.layout { display: grid; gap: 2rem; grid-template-columns: minmax(0, 1fr); }
@media (min-width: 64rem) {
  .layout { grid-template-columns: 19rem minmax(0, 1fr); }
  nav { position: sticky; top: 0; align-self: start; max-height: 100vh; overflow-y: auto; padding: .5rem 0; }
}
@media (max-width: 40rem) {
  .method { min-width: 0; margin-right: .4rem; }
  table.stacked, table.stacked tbody, table.stacked tr, table.stacked th, table.stacked td { display: block; }
  table.stacked thead { position: absolute; left: -9999px; }
  table.stacked tr { border: 1px solid var(--line); margin-bottom: .5rem; }
  table.stacked th, table.stacked td { border: none; padding: .2rem .5rem; }
  table.stacked th[scope="row"] { white-space: normal; overflow-wrap: anywhere; background: var(--code); }
  table.stacked td::before { content: attr(data-label) ": "; font-weight: 600; }
  table.stacked td p { display: inline; }
  table.stacked caption { display: block; }
}
[hidden] { display: none !important; }
`
