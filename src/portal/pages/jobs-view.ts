/**
 * The markup of the jobs page: the table of an account's conversion jobs (a row a job: what
 * it converts, how far it got, its result or its error, and the customer's metadata, escaped
 * as every value is), the status filter, the pages, the empty state, and the confirmations
 * asked before a job is cancelled or its result deleted. Built from one page of jobs and no
 * further lookups.
 */
import { JOB_STATUSES, type ConversionJob, type JobStatus } from '../../domain/jobs.ts'
import { html, wide, type Html } from '../web/html.ts'
import { when } from '../web/labels.ts'

/** Styles of these pages, added to the portal's one stylesheet. */
export const css = `
table.jobs td, table.jobs th[scope="row"] { font-size: .95rem; }
table.jobs th[scope="row"] { font-weight: 400; }
table.jobs td.actions { white-space: nowrap; }
table.jobs td.actions a { display: block; }
table.jobs td.when { min-width: 7rem; }
table.jobs code.meta { display: block; min-width: 8rem; max-width: 16rem; white-space: pre-wrap; overflow-wrap: anywhere; }
table.jobs details > summary { margin: 0; font-weight: 400; }
table.jobs .error { margin: .25rem 0 0; }
table.jobs .hint { display: block; }
@media (max-width: 40rem) {
  dl.job-facts { grid-template-columns: 1fr; gap: 0; }
  dl.job-facts dd { margin-bottom: .5rem; }
}
`

/** How each status looks, in the tints every state has on every page (waiting, done, failed, off). */
const STATUS_BADGE: Readonly<Record<JobStatus, Html>> = {
  queued: html`<span class="badge warn">queued</span>`,
  running: html`<span class="badge warn">running</span>`,
  succeeded: html`<span class="badge ok">succeeded</span>`,
  failed: html`<span class="badge bad">failed</span>`,
  cancelled: html`<span class="badge off">cancelled</span>`,
}

/** JOBS_WITH: the jobs of each status, as a caption names them. */
export const JOBS_WITH: Readonly<Record<JobStatus, string>> = {
  queued: 'Queued jobs',
  running: 'Running jobs',
  succeeded: 'Jobs that succeeded',
  failed: 'Failed jobs',
  cancelled: 'Cancelled jobs',
}

/** What each operation makes, for the reader. */

/** Metadata up to this many characters is shown as it is; longer, folded in a `<details>`. */
const METADATA_SHOWN = 80

const numbers = new Intl.NumberFormat('en', { maximumFractionDigits: 1 })

/** sizeText: a size in bytes as people read it (binary units, as the limits are given). */
export function sizeText(bytes: number): string {
  if (bytes < 1024) return `${numbers.format(bytes)} bytes`
  if (bytes < 1024 * 1024) return `${numbers.format(bytes / 1024)} KiB`
  return `${numbers.format(bytes / (1024 * 1024))} MiB`
}

/** durationText: how long results are kept (JOB_RESULT_TTL_SECONDS), in whole hours or else minutes. */
export function durationText(seconds: number): string {
  const [count, unit] = seconds % 3600 === 0 ? [seconds / 3600, 'hour'] : [Math.max(1, Math.round(seconds / 60)), 'minute']
  return `${numbers.format(count)} ${unit}${count === 1 ? '' : 's'}`
}

/** jobIdCode: a job's whole id in monospace, never broken (as every identifier of the portal). */
export const jobIdCode = (id: string): Html => html`<code class="id">${id}</code>`

/** canCancel: the job may still be cancelled. */
export const canCancel = (job: ConversionJob): boolean => job.status === 'queued' || job.status === 'running'

/** operationText: what the job makes, and with which options. */
export function operationText(job: ConversionJob): string {
  const { dpi, pages, colorMode } = job.options
  if (job.operation === 'split' || job.operation === 'rotate' || job.operation === 'flatten') {
    const { ranges, every, angle } = job.options.edit ?? {}
    const how = ranges !== undefined ? `ranges ${ranges}` : every !== undefined ? `every ${every}` : angle !== undefined ? `${angle}°` : ''
    return [job.operation, ...(how === '' ? [] : [how]), ...(pages === null ? [] : [`pages ${pages}`])].join(', ')
  }
  if (job.operation === 'merge') {
    const parts = job.options.merge?.pages ?? []
    return `merge (${parts.length} documents${parts.some((p) => p !== null) ? `, pages ${parts.map((p) => p ?? 'all').join(' + ')}` : ''})`
  }
  if (job.operation === 'compress') return `compress (${job.options.compress?.preset ?? 'ebook'})`
  if (job.operation === 'text') return [`text (${job.options.text?.format ?? 'json'})`, ...(pages === null ? [] : [`pages ${pages}`])].join(', ')
  if (job.operation === 'postscript') {
    return [`${job.operation} (to PostScript)`, ...(pages === null ? [] : [`pages ${pages}`]), ...(colorMode === 'gray' ? ['gray'] : [])].join(', ')
  }
  const image = job.options.image ?? { format: 'png' }
  const box = image.width !== undefined || image.height !== undefined ? `within ${image.width ?? 'any'}×${image.height ?? 'any'} px` : `${dpi} dpi`
  return [
    `${job.operation} (to ${image.format === 'jpeg' ? 'JPEG' : image.format === 'webp' ? 'WebP' : image.format.toUpperCase()})`,
    box,
    ...(pages === null ? [] : [`pages ${pages}`]),
    ...(colorMode === 'gray' ? ['gray'] : []),
    ...(image.quality === undefined ? [] : [`quality ${image.quality}`]),
    ...(image.bitDepth === undefined ? [] : [`${image.bitDepth}-bit`]),
    ...(image.compression === undefined ? [] : [image.compression]),
  ].join(', ')
}

/** pagesText: the pages converted, of how many when known; nothing before the first. */
function pagesText(job: ConversionJob): string {
  if (job.pagesTotal !== null) return `${numbers.format(job.pagesDone)} of ${numbers.format(job.pagesTotal)} pages`
  return job.pagesDone === 0 ? '' : `${numbers.format(job.pagesDone)} ${job.pagesDone === 1 ? 'page' : 'pages'}`
}

function metadataCell(job: ConversionJob): Html | string {
  if (job.metadata === null) return '—'
  const json = JSON.stringify(job.metadata)
  if (json.length <= METADATA_SHOWN) return html`<code class="meta">${json}</code>`
  return html`<details><summary>Metadata (${numbers.format(json.length)} characters)</summary><code class="meta">${json}</code></details>`
}

/** statusCell: the status, the pages converted, and the error of a job that failed (the API's words). */
function statusCell(view: TableView, job: ConversionJob): Html {
  const pages = pagesText(job)
  const error = view.errors.get(job.id)
  return html`<td>${STATUS_BADGE[job.status]}${pages === '' ? '' : html`<span class="hint">${pages}</span>`}${error === undefined ? '' : html`<p class="error">${error}</p>`}</td>`
}

/** resultCell: the result while it is kept (its download), or that it is gone. */
function resultCell(view: TableView, job: ConversionJob): Html | string {
  const kept = job.result
  if (kept !== null)
    return html`<a href="${view.base}/${encodeURIComponent(job.id)}/result">Download ${kept.name}</a>
<span class="hint">${sizeText(kept.bytes)}, ${kept.type}; kept until ${when(job.expiresAt, 'it is deleted')}</span>`
  return job.resultGone ? html`<span class="hint">Gone: expired or deleted</span>` : '—'
}

function actionsCell(view: TableView, job: ConversionJob): Html {
  const path = `${view.base}/${encodeURIComponent(job.id)}`
  const links = [
    ...(canCancel(job) ? [html`<a href="${path}/cancel" class="danger">Cancel<span class="visually-hidden"> job ${job.id}</span></a>`] : []),
    ...(job.result !== null
      ? [html`<a href="${path}/delete-result" class="danger">Delete result<span class="visually-hidden"> of job ${job.id}</span></a>`]
      : []),
  ]
  return html`<td class="actions">${links.length === 0 ? '—' : links}</td>`
}

function row(view: TableView, job: ConversionJob): Html {
  return html`<tr>
<th scope="row">${jobIdCode(job.id)}<span class="hint">${operationText(job)}</span></th>
${statusCell(view, job)}
<td>${resultCell(view, job)}</td>
<td class="when">${when(job.createdAt)}</td>
<td class="when">${when(job.finishedAt, '—')}</td>
<td>${metadataCell(job)}</td>
${view.acting ? actionsCell(view, job) : ''}
</tr>`
}

export interface TableView {
  /** The jobs page's path. */
  readonly base: string
  readonly jobs: readonly ConversionJob[]
  /** The error message of each failed job (the API's words), by job id. */
  readonly errors: ReadonlyMap<string, string>
  /** The caller may cancel jobs and delete results: the table has its actions. */
  readonly acting: boolean
  readonly caption: string
}

/** jobTable: a page of jobs, in its own scroller. */
export function jobTable(view: TableView): Html {
  return wide(
    view.caption,
    html`<table class="jobs">
<caption>${view.caption}</caption>
<thead><tr><th scope="col">Job</th><th scope="col">Status</th><th scope="col">Result</th><th scope="col">Submitted</th><th scope="col">Finished</th><th scope="col">Metadata</th>${view.acting ? html`<th scope="col">Actions</th>` : ''}</tr></thead>
<tbody>${view.jobs.map((job) => row(view, job))}</tbody>
</table>`,
  )
}

/** filterForm: the status filter, a plain GET form. */
export function filterForm(base: string, status: JobStatus | ''): Html {
  return html`<form method="get" action="${base}" class="row" role="search" aria-label="Filter the jobs">
<div><label for="job-status">Status</label>
<select id="job-status" name="status"><option value="">Any status</option>${JOB_STATUSES.map(
    (s) => html`<option value="${s}"${s === status ? html` selected` : ''}>${s}</option>`,
  )}</select></div>
<button type="submit" class="secondary">Show jobs</button>
${status === '' ? '' : html`<a href="${base}">Show every job</a>`}
</form>`
}

/** pager: the links to the newest page and to the older jobs, keeping the filter. */
export function pager(base: string, status: JobStatus | '', after: string, next: string | null): Html | string {
  if (after === '' && next === null) return ''
  const query = (cursor: string | null) => {
    const q = new URLSearchParams({ ...(status === '' ? {} : { status }), ...(cursor === null ? {} : { after: cursor }) }).toString()
    return q === '' ? base : `${base}?${q}`
  }
  return html`<nav class="pager" aria-label="Pages of jobs"><ul class="menu">
${after === '' ? '' : html`<li><a href="${query(null)}">Newest jobs</a></li>`}
${next === null ? '' : html`<li><a href="${query(next)}" rel="next">Older jobs</a></li>`}
</ul></nav>`
}

/** emptyState: what jobs are, where they come from, and where the API reference tells the rest. */
export function emptyState(apiBase: string, keysPath: string, kept: string): Html {
  const command = `curl -H 'x-api-key: YOUR_KEY' -F pdfDocument=@document.pdf -F operation=image ${apiBase}/converter/jobs`
  return html`<section aria-labelledby="no-jobs"><h2 id="no-jobs">No conversion jobs yet</h2>
<p>A conversion job converts a PDF in the background: your code submits the document with a <a href="${keysPath}">key</a> of this account, gets the job's ID at once, and fetches the result when the job has succeeded (or takes the signed <code>conversion.succeeded</code> webhook event). Large documents convert this way without holding a request open.</p>
<pre id="job-call">${command}</pre>
<p><button type="button" class="secondary" data-copy="job-call" hidden>Copy command</button> <span role="status" id="job-call-status"></span></p>
<p>The jobs of this account are listed here, newest first, with their progress; each result can be downloaded here for ${kept}.
The <a href="/docs#submitConversionJob">API reference</a> tells every field of a submission, and how to <a href="/docs#listConversionJobs">list</a>, <a href="/docs#getConversionJobResult">download</a> and <a href="/docs#cancelConversionJob">cancel</a> jobs.</p>
</section>`
}

/** jobFacts: what a confirmation names of the job it asks about. */
function jobFacts(job: ConversionJob): Html {
  return html`<dl class="facts job-facts">
<dt>Job</dt><dd>${jobIdCode(job.id)}</dd>
<dt>Operation</dt><dd>${operationText(job)}</dd>
<dt>Status</dt><dd>${STATUS_BADGE[job.status]}</dd>
<dt>Submitted</dt><dd>${when(job.createdAt)}</dd>
${job.result === null ? '' : html`<dt>Result</dt><dd>${job.result.name}, ${sizeText(job.result.bytes)}, kept until ${when(job.expiresAt, 'it is deleted')}</dd>`}
</dl>`
}

/** confirmCancel: the question asked before a queued or running job is cancelled. */
export function confirmCancel(path: string, csrf: Html, job: ConversionJob, back: string): Html {
  const what = job.status === 'running' ? 'It stops at its next page; its document is deleted' : 'Its document is deleted'
  return html`<p>Cancel this job? ${what}, and it cannot be resumed: submit it again to convert it.</p>
${jobFacts(job)}
<form method="post" action="${path}" class="row">
${csrf}
<input type="hidden" name="confirm" value="1">
<button type="submit" class="danger">Cancel job ${job.id}</button>
<a href="${back}">Keep it: back to the jobs</a>
</form>`
}

/** confirmDelete: the question asked before a kept result is deleted. */
export function confirmDelete(path: string, csrf: Html, job: ConversionJob, back: string): Html {
  return html`<p>Delete the result of this job? Its download answers 410 from then on, from the API as here; the job's record stays. This cannot be undone.</p>
${jobFacts(job)}
<form method="post" action="${path}" class="row">
${csrf}
<input type="hidden" name="confirm" value="1">
<button type="submit" class="danger">Delete the result of job ${job.id}</button>
<a href="${back}">Keep it: back to the jobs</a>
</form>`
}
