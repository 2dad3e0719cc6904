/**
 * The portal's usage page of an account: calls per day of the last 7, 30 or 90 days as a chart
 * and as tables (per day, per region and group, per key: the tables are the page, the chart an
 * addition for those who can see it and run scripts), the plan's limits with how much of the
 * current quota window is used, and the same reports as CSV downloads.
 *
 * The CSP allows no inline script or style: the chart's numbers travel in a data- attribute
 * (escaped like any other) and /portal/assets/usage-chart.js draws them with uPlot, which is
 * served from the node as htmx is.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { html, wide, type Html } from '../web/html.ts'
import type { InAccount, Kit } from '../web/kit.ts'
import { pageRoute, sendPage, whoIn } from '../web/kit.ts'
import { isFailure } from '../../services/outcome.ts'
import { GROUPS, REGIONS, type Group } from '../../domain/regions.ts'
import type { ApiKeyInfo, Plan } from '../../domain/accounts.ts'
import type { RefusalLine, UsageBy, UsageLine } from '../../domain/usage.ts'
import { REFUSAL_WORDS } from '../web/labels.ts'
import { keyLabel } from './keys-view.ts'
import { quotaWindow, utcDay } from '../../usage/windows.ts'
import { csv } from '../../usage/csv.ts'
import { CHART_JS } from '../web/usage-chart.ts'

const require = createRequire(import.meta.url)
const UPLOT_JS = readFileSync(require.resolve('uplot/dist/uPlot.iife.min.js'))
const UPLOT_CSS = readFileSync(require.resolve('uplot/dist/uPlot.min.css'))

const DAY = 86_400_000
/** The periods the page offers, in days. 30 by default: the admin API's default report, and a month's worth of rows to read. */
export const PERIODS = [7, 30, 90] as const
export const DEFAULT_DAYS = 30
/** Keys a page of the per-key report: the most used first. */
export const KEYS_PER_PAGE = 100

const GROUP_NAMES: Readonly<Record<Group, string>> = { totp: 'TOTP', converter: 'Converter' }

/** Styles of these pages, added to the portal's one stylesheet. */
export const css = `
.usage-chart { min-height: 300px; margin: 1rem 0; }
.usage-chart .u-legend { font-size: .9rem; }
.quota meter { width: 100%; max-width: 30rem; height: 1.25rem; }
dl.plan { display: grid; grid-template-columns: max-content 1fr; gap: .25rem 1rem; }
dl.plan dt { font-weight: 600; }
dl.plan dd { margin: 0; }
.downloads { display: flex; flex-wrap: wrap; gap: 1rem; list-style: none; padding: 0; }
`

/** Totals: calls per group, and all calls and units, of a day, a region or a key. */
interface Totals {
  readonly calls: Record<Group, number>
  count: number
  units: number
}

const zero = (): Totals => ({ calls: { totp: 0, converter: 0 }, count: 0, units: 0 })

/** tally sums usage lines by `keyOf` (a day, a region, a key id). */
function tally(lines: readonly UsageLine[], keyOf: (line: UsageLine) => string, into = new Map<string, Totals>()): Map<string, Totals> {
  for (const line of lines) {
    const key = keyOf(line)
    let t = into.get(key)
    if (t === undefined) {
      t = zero()
      into.set(key, t)
    }
    t.calls[line.group] += line.count
    t.count += line.count
    t.units += line.units
  }
  return into
}

function sum(all: Iterable<Totals>): Totals {
  const s = zero()
  for (const t of all) {
    for (const g of GROUPS) s.calls[g] += t.calls[g]
    s.count += t.count
    s.units += t.units
  }
  return s
}

const numbers = new Intl.NumberFormat('en')
const n = (value: number) => numbers.format(value)

/** daysBetween: every UTC day from `from` to `to`, inclusive. */
function daysBetween(from: string, to: string): string[] {
  const days: string[] = []
  for (let d = Date.parse(from); d <= Date.parse(to); d += DAY) days.push(utcDay(d))
  return days
}

/** periodOf reads `days` from the query: a period the page offers, the default when absent, null when anything else. */
function periodOf(query: unknown): number | null {
  const days = (query as { days?: unknown }).days
  if (days === undefined || days === '') return DEFAULT_DAYS
  return typeof days === 'string' && (PERIODS as readonly number[]).includes(Number(days)) && /^\d+$/.test(days) ? Number(days) : null
}

/** pageOf reads `page` (1 when absent), null when not a whole number from 1. */
function pageOf(query: unknown): number | null {
  const page = (query as { page?: unknown }).page
  if (page === undefined || page === '') return 1
  return typeof page === 'string' && /^[1-9]\d{0,5}$/.test(page) ? Number(page) : null
}

function badRequest(kit: Kit, reply: FastifyReply, here: InAccount, message: string): FastifyReply {
  return sendPage(kit, reply, {
    title: 'Usage',
    status: 400,
    current: here,
    account: { id: here.account.id, name: here.account.name, here: 'usage' },
    body: html`<p class="error" role="alert">${message}. <a href="/portal/accounts/${encodeURIComponent(here.account.id)}/usage">Show the last ${DEFAULT_DAYS} days</a>.</p>`,
  })
}

/** A row of a totals table: its heading cell, then calls per group, calls, units. */
const totalsCells = (t: Totals) =>
  html`${GROUPS.map((g) => html`<td class="num">${n(t.calls[g])}</td>`)}<td class="num">${n(t.count)}</td><td class="num">${n(t.units)}</td>`

/** totalsTable: rows of totals, and their sum (`partial`: the rows are one page of many, and have none). */
function totalsTable(caption: string, first: string, rows: readonly (readonly [Html | string, Totals])[], empty: string, partial = false): Html {
  const total = sum(rows.map(([, t]) => t))
  return wide(
    caption,
    html`<table>
<caption>${caption}</caption>
<thead><tr><th scope="col">${first}</th>${GROUPS.map((g) => html`<th scope="col" class="num">${GROUP_NAMES[g]} calls</th>`)}<th scope="col" class="num">Calls</th><th scope="col" class="num">Units</th></tr></thead>
<tbody>${rows.length === 0 ? html`<tr><td colspan="${GROUPS.length + 3}">${empty}</td></tr>` : rows.map(([head, t]) => html`<tr><th scope="row">${head}</th>${totalsCells(t)}</tr>`)}</tbody>
${partial ? '' : html`<tfoot><tr><th scope="row">Total</th>${totalsCells(total)}</tr></tfoot>`}
</table>`,
  )
}

/** planSection: the plan's limits, and how much of the current quota window is used. */
function planSection(plan: Plan, own: boolean, used: number, flushMs: number): Html {
  const when = plan.period === 'month' ? 'this month' : 'today'
  const percent = plan.quota === 0 ? 0 : (used / plan.quota) * 100
  return html`<h2>Plan and quota</h2>
<div class="quota">
${
  plan.quota === 0
    ? html`<p>No quota: ${n(used)} units used ${when} (UTC), without a limit.</p>`
    : html`<p id="quota-used">${n(used)} of ${n(plan.quota)} units used ${when} (${percent.toFixed(1)} %).</p>
<meter min="0" max="${plan.quota}" value="${Math.min(used, plan.quota)}" high="${Math.floor(plan.quota * 0.8)}" aria-labelledby="quota-used">${percent.toFixed(1)} %</meter>`
}
<p class="hint">The quota counts units per UTC ${plan.period}; the counts of the last ${Math.ceil(flushMs / 1000)} seconds may not show yet.</p>
</div>
<dl class="plan">
<dt>Plan</dt><dd>${own ? "This account's own plan" : "The service's default plan"}</dd>
<dt>Rate</dt><dd>${plan.rate === 0 ? 'No throttle' : `${n(plan.rate)} calls per second, bursts of up to ${n(plan.burst)}`}</dd>
<dt>Quota</dt><dd>${plan.quota === 0 ? 'None' : `${n(plan.quota)} units per ${plan.period}`}</dd>
${GROUPS.map((g) => html`<dt>${GROUP_NAMES[g]} call</dt><dd>${plan.weights[g] === 0 ? 'Free' : `${n(plan.weights[g])} unit${plan.weights[g] === 1 ? '' : 's'}`}</dd>`)}
</dl>`
}

/** REFUSED_SHOWN: the kinds of refused calls the usage page lists, the most first. */
const REFUSED_SHOWN = 50

/** refusedSection: the calls refused with the account's keys in the period, by key, group, region and why. */
function refusedSection(lines: readonly RefusalLine[], keys: readonly ApiKeyInfo[], days: number): Html {
  const names = new Map(keys.map((k) => [k.id, k]))
  const total = lines.reduce((a, r) => a + r.count, 0)
  const shown = lines.slice(0, REFUSED_SHOWN)
  return html`<h2 id="refused">Refused calls</h2>
<p>Calls made with this account's keys that were refused, and why (calls without a key, or with an unknown one, belong to no account and are not counted here). They cost nothing against the quota.</p>
${
  lines.length === 0
    ? html`<p>No call was refused in the last ${days} days.</p>`
    : wide(
        'Refused calls',
        html`<table>
<caption>Refused calls, last ${days} days: ${n(total)}${lines.length > shown.length ? `; the ${shown.length} most refused kinds of ${lines.length}` : ''}</caption>
<thead><tr><th scope="col">Key</th><th scope="col">API group</th><th scope="col">Region</th><th scope="col">Why</th><th scope="col" class="num">Calls</th><th scope="col">Last on</th></tr></thead>
<tbody>${shown.map((r) => {
          const key = names.get(r.keyId)
          return html`<tr><th scope="row">${key === undefined ? r.keyId : keyLabel(key)}</th><td>${GROUP_NAMES[r.group]}</td><td>${r.region}</td><td>${REFUSAL_WORDS[r.reason]}</td><td class="num">${n(r.count)}</td><td>${r.lastDay}</td></tr>`
        })}</tbody>
</table>`,
      )
}`
}

/** GET usage: the chart, the plan and its quota used, and the tables of a period (the per-key table loads on its own). */
async function usagePage(kit: Kit, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const here = whoIn(request)
  const days = periodOf(request.query)
  if (days === null) return badRequest(kit, reply, here, `Choose a period of ${PERIODS.join(', ')} days`)
  const id = here.account.id
  const now = kit.now()
  const to = utcDay(now)
  const from = utcDay(now - (days - 1) * DAY)
  // The per-key report (the costly one: a line per key) is a page of its own, loaded into this one by htmx.
  const [byDay, byRegion, plan, refused, keys] = await Promise.all([
    kit.accounts.usage(id, from, to, 'day'),
    kit.accounts.usage(id, from, to, 'region'),
    kit.accounts.getPlan(id),
    kit.accounts.refusals(id, from, to),
    kit.accounts.listKeys(id),
  ])
  if (isFailure(byDay) || isFailure(byRegion) || isFailure(refused) || plan === null) return badRequest(kit, reply, here, 'This report is not available')
  const window = quotaWindow(now, plan.plan.period)
  const used = await kit.accounts.usageTotal(id, utcDay(window.start), utcDay(window.end - 1))

  const perDay = tally(byDay, (l) => l.day!)
  const dayRows = daysBetween(from, to).map((d) => [d, perDay.get(d) ?? zero()] as const)
  const perRegion = tally(byRegion, (l) => l.region!)
  const regionRows = REGIONS.filter((r) => perRegion.has(r)).map((r) => [r, perRegion.get(r)!] as const)
  const total = sum(dayRows.map(([, t]) => t))
  const chart = { days: dayRows.map(([d]) => d), series: GROUPS.map((g) => ({ label: GROUP_NAMES[g], values: dayRows.map(([, t]) => t.calls[g]) })) }
  const base = `/portal/accounts/${encodeURIComponent(id)}`
  const csvLink = (by: UsageBy, label: string) => html`<li><a href="${base}/usage.csv?from=${from}&amp;to=${to}&amp;by=${by}" download>${label}</a></li>`

  return sendPage(kit, reply, {
    title: 'Usage',
    current: here,
    account: { id, name: here.account.name, here: 'usage' },
    body: html`
<link rel="stylesheet" href="/portal/assets/uplot.min.css">
<script src="/portal/assets/uplot.min.js" defer></script>
<script src="/portal/assets/usage-chart.js" defer></script>
<form method="get" action="${base}/usage" class="row">
<div><label for="days">Period</label>
<select id="days" name="days">${PERIODS.map((p) => html`<option value="${p}"${p === days ? html` selected` : ''}>Last ${p} days</option>`)}</select></div>
<button type="submit" class="secondary">Show usage</button>
</form>
<h2>Calls per day</h2>
<p>From ${from} to ${to} (UTC): ${n(total.count)} calls, ${n(total.units)} units.</p>
<div id="usage-chart" class="usage-chart" role="img" aria-label="${`Calls per day, last ${days} days: ${n(total.count)} in total`}" data-chart="${JSON.stringify(chart)}">
<p class="hint">The chart needs JavaScript; the tables below hold the same numbers.</p>
</div>
<ul class="downloads">
${csvLink('day', 'Download usage as CSV')}
${csvLink('region', 'Download usage by region as CSV')}
${csvLink('key', 'Download usage by key as CSV')}
</ul>
${planSection(plan.plan, plan.own, used, kit.config.usageFlushMs)}
<h2>Tables</h2>
${totalsTable(
  `Days with calls, ${from} to ${to} (UTC); days without calls are left out`,
  'Day',
  dayRows.filter(([, t]) => t.count > 0),
  'No calls in this period.',
)}
${totalsTable(`Calls per region, last ${days} days`, 'Region', regionRows, 'No calls in this period.')}
${refusedSection(refused, keys, days)}
<div id="keys-usage"><p><a href="${base}/usage/keys?days=${days}" hx-get="${base}/usage/keys?days=${days}" hx-trigger="load" hx-select="#keys-usage" hx-target="#keys-usage" hx-swap="outerHTML">Calls per key, last ${days} days</a></p></div>`,
  })
}

/** GET usage/keys: calls per key, most used first, in pages (loaded into the usage page by htmx). */
async function keysUsage(kit: Kit, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const here = whoIn(request)
  const days = periodOf(request.query)
  if (days === null) return badRequest(kit, reply, here, `Choose a period of ${PERIODS.join(', ')} days`)
  const pageNo = pageOf(request.query)
  if (pageNo === null) return badRequest(kit, reply, here, 'That page of keys does not exist')
  const id = here.account.id
  const now = kit.now()
  const [from, to] = [utcDay(now - (days - 1) * DAY), utcDay(now)]
  const [byKey, keys] = await Promise.all([kit.accounts.usage(id, from, to, 'key'), kit.accounts.listKeys(id)])
  if (isFailure(byKey)) return badRequest(kit, reply, here, 'This report is not available')
  const ranked = [...tally(byKey, (l) => l.keyId!)].sort((a, b) => b[1].count - a[1].count || (a[0] < b[0] ? -1 : 1))
  const pages = Math.max(1, Math.ceil(ranked.length / KEYS_PER_PAGE))
  if (pageNo > pages) return badRequest(kit, reply, here, 'That page of keys does not exist')
  const names = new Map(keys.map((k) => [k.id, k]))
  const rows = ranked.slice((pageNo - 1) * KEYS_PER_PAGE, pageNo * KEYS_PER_PAGE).map(([keyId, t]) => {
    const key = names.get(keyId)
    return [key === undefined ? keyId : html`${key.name === '' ? '(unnamed)' : key.name} <span class="hint">…${key.hint}</span>`, t] as const
  })
  const base = `/portal/accounts/${encodeURIComponent(id)}`
  const link = (p: number, label: string, rel: string) => html`<li><a href="${base}/usage/keys?days=${days}&amp;page=${p}" rel="${rel}">${label}</a></li>`
  const range = ranked.length === 0 ? '' : `, ${(pageNo - 1) * KEYS_PER_PAGE + 1} to ${Math.min(ranked.length, pageNo * KEYS_PER_PAGE)} of ${ranked.length}`
  return sendPage(kit, reply, {
    title: 'Usage per key',
    current: here,
    account: { id, name: here.account.name, here: 'usage' },
    body: html`
<div id="keys-usage">
${totalsTable(`Calls per key, last ${days} days, most used first${range}`, 'Key', rows, 'No key made calls in this period.', pages > 1)}
${
  pages === 1
    ? ''
    : html`<nav class="pager" aria-label="Pages of keys"><ul>
${pageNo > 1 ? link(pageNo - 1, 'More used keys', 'prev') : ''}
${pageNo < pages ? link(pageNo + 1, 'Less used keys', 'next') : ''}
</ul></nav>`
}
</div>
<p><a href="${base}/usage.csv?from=${from}&amp;to=${to}&amp;by=key" download>Download usage by key as CSV</a> (every key)</p>
<p><a href="${base}/usage?days=${days}">Back to the usage of the last ${days} days</a></p>`,
  })
}

/** GET usage.csv: a report as CSV, by day, region or key. */
async function usageCsv(kit: Kit, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const here = whoIn(request)
  const q = request.query as Record<string, unknown>
  const text = (name: string, fallback: string) => (q[name] === undefined || q[name] === '' ? fallback : typeof q[name] === 'string' ? q[name] : null)
  const now = kit.now()
  const to = text('to', utcDay(now))
  const from = text('from', utcDay(now - (DEFAULT_DAYS - 1) * DAY))
  const by = text('by', 'day')
  if (by !== 'day' && by !== 'key' && by !== 'region') return badRequest(kit, reply, here, 'by must be day, key or region')
  if (from === null || to === null) return badRequest(kit, reply, here, 'Give one from and one to date, YYYY-MM-DD')
  const id = here.account.id
  const lines = await kit.accounts.usage(id, from, to, by)
  if (isFailure(lines)) return badRequest(kit, reply, here, `That report cannot be made: ${lines.message}`)
  const names = by === 'key' ? new Map((await kit.accounts.listKeys(id)).map((k) => [k.id, k.name])) : new Map<string, string>()
  const rows: unknown[][] = lines.map((l) =>
    by === 'day'
      ? [l.day, l.group, l.count, l.units]
      : by === 'region'
        ? [l.region, l.group, l.count, l.units]
        : [l.keyId, names.get(l.keyId!) ?? '', l.group, l.count, l.units],
  )
  const header = by === 'key' ? ['keyId', 'keyName', 'group', 'count', 'units'] : [by, 'group', 'count', 'units']
  return reply
    .type('text/csv; charset=utf-8')
    .header('content-disposition', `attachment; filename="usage-${id.replace(/[^\w-]/g, '_')}-${from}-${to}.csv"`)
    .send(csv(header, rows))
}

export default async function usagePages(app: FastifyInstance, kit: Kit): Promise<void> {
  app.get('/accounts/:accountId/usage', pageRoute(kit, 'viewer'), (request, reply) => usagePage(kit, request, reply))

  app.get('/accounts/:accountId/usage/keys', pageRoute(kit, 'viewer'), (request, reply) => keysUsage(kit, request, reply))

  app.get('/accounts/:accountId/usage.csv', pageRoute(kit, 'viewer'), (request, reply) => usageCsv(kit, request, reply))

  const asset = (path: string, type: string, body: Buffer | string) =>
    app.get(path, { schema: { hide: true } }, async (_request, reply) => reply.type(type).header('cache-control', 'public, max-age=3600').send(body))
  asset('/assets/uplot.min.js', 'text/javascript; charset=utf-8', UPLOT_JS)
  asset('/assets/uplot.min.css', 'text/css; charset=utf-8', UPLOT_CSS)
  asset('/assets/usage-chart.js', 'text/javascript; charset=utf-8', CHART_JS)
}
