/**
 * The API reference at /docs: one server-rendered page made from the app's own OpenAPI
 * document, usable without JavaScript, with every control named and landmarks for every part,
 * so that it passes axe with no serious or critical finding and runs under a CSP that allows
 * nothing but its own stylesheet. (Swagger UI, served here before, had five serious or
 * critical axe violations and needed scripts and inline styles.) The interactive console it
 * gave is replaced by a `curl` line per operation.
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
}

interface Operation {
  readonly operationId?: string
  readonly summary?: string
  readonly description?: string
  readonly tags?: readonly string[]
  readonly parameters?: readonly { name: string; in: string; required?: boolean; description?: string; schema?: Schema }[]
  readonly requestBody?: { content?: Record<string, { schema?: Schema }> }
  readonly responses?: Record<string, { description?: string; content?: Record<string, unknown> }>
  readonly security?: readonly unknown[]
}

const METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!)
}

/** prose: escaped text with `code spans` and paragraphs (blank lines). */
function prose(text: string | undefined): string {
  if (text === undefined || text.trim() === '') return ''
  return text
    .split(/\n{2,}/)
    .map((p) => `<p>${escapeHtml(p).replace(/`([^`]+)`/g, '<code>$1</code>')}</p>`)
    .join('\n')
}

const slug = (text: string) =>
  text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '')

function typeOf(s: Schema | undefined): string {
  if (s === undefined) return ''
  if (s.enum !== undefined) return s.enum.map(String).join(' | ')
  const type = Array.isArray(s.type) ? s.type.join(' | ') : (s.type ?? 'any')
  const range = s.minimum !== undefined || s.maximum !== undefined ? ` (${s.minimum ?? '…'} to ${s.maximum ?? '…'})` : ''
  const length = s.maxLength !== undefined ? ` (at most ${s.maxLength} characters)` : ''
  return `${type}${s.format === undefined ? '' : `, ${s.format}`}${range}${length}`
}

function fieldTable(caption: string, rows: readonly { name: string; type: string; required: boolean; description?: string | undefined }[]): string {
  if (rows.length === 0) return ''
  return `<table>
<caption>${escapeHtml(caption)}</caption>
<thead><tr><th scope="col">Name</th><th scope="col">Type</th><th scope="col">Required</th><th scope="col">Description</th></tr></thead>
<tbody>
${rows.map((r) => `<tr><th scope="row"><code>${escapeHtml(r.name)}</code></th><td>${escapeHtml(r.type)}</td><td>${r.required ? 'yes' : 'no'}</td><td>${prose(r.description)}</td></tr>`).join('\n')}
</tbody>
</table>`
}

function curlLine(base: string, method: string, path: string, op: Operation): string {
  const secured = op.security === undefined || op.security.length > 0
  const form = op.requestBody?.content?.['application/x-www-form-urlencoded']?.schema
  const multipart = op.requestBody?.content?.['multipart/form-data']?.schema
  const parts = ['curl']
  if (method !== 'get' && form === undefined && multipart === undefined) parts.push(`-X ${method.toUpperCase()}`)
  if (secured) parts.push("-H 'x-api-key: YOUR_KEY'")
  // A form where the operation takes one (the TOTP group also takes JSON and multipart), else multipart (files as files).
  if (form !== undefined) for (const name of form.required ?? []) parts.push(`--data-urlencode '${name}=…'`)
  else {
    for (const name of multipart?.required ?? []) {
      const file = multipart?.properties?.[name]?.format === 'binary'
      parts.push(file ? `-F '${name}=@document.pdf'` : `-F '${name}=…'`)
    }
  }
  parts.push(`${base}${path}`)
  return parts.join(' ')
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
  const responses = Object.entries(op.responses ?? {})
  return `<section class="operation" aria-labelledby="${id}">
<h3 id="${id}"><span class="method">${method.toUpperCase()}</span> <code>${escapeHtml(path)}</code></h3>
${op.summary === undefined ? '' : `<p class="summary">${escapeHtml(op.summary)}</p>`}
${prose(op.description)}
${fieldTable('Parameters', params)}
${bodies.length === 0 ? '' : `<p>Body: ${bodies.map(([type]) => `<code>${escapeHtml(type)}</code>`).join(' or ')}.</p>`}
${fieldTable('Body fields', bodyRows)}
<table>
<caption>Responses</caption>
<thead><tr><th scope="col">Status</th><th scope="col">Meaning</th><th scope="col">Content type</th></tr></thead>
<tbody>
${responses
  .map(
    ([status, r]) =>
      `<tr><th scope="row">${escapeHtml(status)}</th><td>${prose(r.description)}</td><td>${Object.keys(r.content ?? {})
        .map((t) => `<code>${escapeHtml(t)}</code>`)
        .join(', ')}</td></tr>`,
  )
  .join('\n')}
</tbody>
</table>
<p>Example:</p>
<pre><code>${escapeHtml(curlLine(base, method, path, op))}</code></pre>
</section>`
}

function errorTable(codes: readonly ErrorCode[] | undefined): string {
  const list = codes ?? (Object.keys(catalogue) as ErrorCode[])
  return `<table>
<caption>Error codes</caption>
<thead><tr><th scope="col">Code</th><th scope="col">Status</th><th scope="col">Message</th><th scope="col">When</th></tr></thead>
<tbody>
${list.map((code) => `<tr><th scope="row"><code>${code}</code></th><td>${catalogue[code].status}</td><td>${escapeHtml(render(code, {}))}</td><td>${prose(catalogue[code].doc)}</td></tr>`).join('\n')}
</tbody>
</table>`
}

export interface ReferenceOptions {
  /** The stylesheet's URL (served beside the page: the CSP allows nothing else). */
  readonly stylesheet: string
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
      ([tag, g]) => `<li><a href="#tag-${slug(tag)}">${escapeHtml(tag)}</a>
<ul>${g.ops.map(([method, path, op]) => `<li><a href="#${op.operationId ?? slug(`${method} ${path}`)}">${method.toUpperCase()} ${escapeHtml(path)}</a></li>`).join('')}</ul></li>`,
    )
    .join('\n')
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<link rel="stylesheet" href="${escapeHtml(opts.stylesheet)}">
</head>
<body>
<a class="skip" href="#main">Skip to the reference</a>
<header>
<h1>${escapeHtml(title)}</h1>
<p>Version ${escapeHtml(info.version ?? '')}. ${servers.map((s) => `Base URL: <code>${escapeHtml(s.url)}</code>${s.description === undefined ? '' : ` (${escapeHtml(s.description)})`}.`).join(' ')}
The machine-readable document is at <a href="openapi.json">openapi.json</a>.</p>
</header>
<nav aria-label="Operations">
<h2>Operations</h2>
<ul>
${nav}
<li><a href="#errors">Errors</a></li>
</ul>
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
</body>
</html>
`
}

/** The page's stylesheet: readable, with contrast above WCAG AA (4.5:1) everywhere. */
export const REFERENCE_CSS = `
:root { color-scheme: light; --ink: #1a1a1a; --muted: #4a4a4a; --line: #c8c8c8; --accent: #0b4f9c; --code: #f3f3f3; }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 70rem; padding: 1rem 1.5rem 4rem; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink); background: #fff; }
a { color: var(--accent); }
a:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; }
.skip { position: absolute; left: -999px; }
.skip:focus { left: 1rem; top: 1rem; background: #fff; padding: .5rem; }
code, pre { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: .9em; background: var(--code); }
code { padding: 0 .2em; }
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
`
