/**
 * An account's overview, the page a user with one account lands on: the calls of today and of
 * the quota's window against the quota, the keys in use (and those about to stop), where the
 * account may call, and what needs attention: the account suspended, calls refused today (and why), failed
 * verifications and lockouts of its managed factors, webhook deliveries failing. Each figure
 * links to the page that tells more. Every read is bounded (a day's usage, a page of the audit
 * trail per action, a page of deliveries per endpoint), so the page costs the same for an
 * account of a thousand keys as for one of a single key.
 */
import type { FastifyInstance } from 'fastify'
import { html, type Html } from '../web/html.ts'
import type { InAccount, Kit } from '../web/kit.ts'
import { atLeast, pageRoute, sendPage, whoIn } from '../web/kit.ts'
import { isFailure } from '../../services/outcome.ts'
import { GROUPS, type Group } from '../../domain/regions.ts'
import type { ApiKeyInfo, AuditEvent, Plan, Subscription } from '../../domain/accounts.ts'
import type { RefusalLine } from '../../domain/usage.ts'
import { quotaWindow, utcDay } from '../../usage/windows.ts'
import { accountPath, GROUP_NAMES, REFUSAL_WORDS, when } from '../web/labels.ts'
import { keyLabel, keyState, liveKeys } from './keys-view.ts'
import { subscriptionBadge } from './subscriptions.ts'

/** Styles of this page, added to the portal's one stylesheet. */
export const css = `
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(15rem, 1fr)); gap: var(--space-3); margin: var(--space-3) 0; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: var(--space-2) var(--space-3); }
.card h2 { font-size: var(--step-0); margin: 0; color: var(--muted); }
.card .figure { font-size: var(--step-3); font-weight: 700; margin: .25rem 0; font-variant-numeric: tabular-nums; }
.card meter { width: 100%; height: 1rem; }
.card ul { padding-left: 1.1rem; margin: .25rem 0; }
ul.attention { list-style: none; padding: 0; display: grid; gap: var(--space-1); }
ul.attention li { border-left: 4px solid var(--line); padding: .25rem .75rem; }
ul.attention li.bad { border-color: var(--danger); }
ul.attention li.warn { border-color: var(--warn); }
`

const DAY = 86_400_000
/** Keys that stop within this many days are told about. */
const EXPIRY_NOTICE_DAYS = 7
/** The audit trail read per action: recent enough to count a day's failures, bounded whatever the account does. */
const EVENTS_READ = 100
/** The kinds of refused calls (key, group, region, reason) listed, the most first. */
const REFUSALS_SHOWN = 5
/** The deliveries read per endpoint, newest first. */
const DELIVERIES_READ = 20

const numbers = new Intl.NumberFormat('en')
const n = (value: number) => numbers.format(value)
const plural = (count: number, one: string, many = `${one}s`) => `${n(count)} ${count === 1 ? one : many}`

/** recent: the events of the last `ms` among a newest-first page, and whether the page may hold fewer than there were. */
function recent(events: readonly AuditEvent[], nowMs: number, ms: number): { readonly count: number; readonly more: boolean; readonly latest: string | null } {
  const within = events.filter((e) => Date.parse(e.at) > nowMs - ms)
  return { count: within.length, more: within.length === EVENTS_READ, latest: within[0]?.at ?? null }
}

interface Attention {
  readonly level: 'bad' | 'warn'
  readonly text: Html
}

/** failingEndpoints: each endpoint whose latest deliveries failed or are being retried after a failure (admins and owners only). */
async function failingEndpoints(kit: Kit, who: InAccount): Promise<Attention[]> {
  if (!atLeast(who.role, 'admin')) return []
  const endpoints = await kit.webhooks.list(who.account.id)
  if (isFailure(endpoints)) return []
  // At most WEBHOOK_MAX_ENDPOINTS reads, at once.
  const pages = await Promise.all(endpoints.map((e) => kit.webhooks.deliveries(who.account.id, e.id, { limit: DELIVERIES_READ })))
  const found: Attention[] = []
  endpoints.forEach((endpoint, i) => {
    const page = pages[i]!
    if (isFailure(page)) return
    const failed = page.items.filter((d) => d.status === 'failed').length
    const retrying = page.items.filter((d) => d.status === 'pending' && d.attempts.length > 0).length
    if (failed + retrying === 0) return
    const link = `${accountPath(who.account.id, 'webhooks')}/${encodeURIComponent(endpoint.id)}/deliveries`
    found.push({
      level: failed > 0 ? 'bad' : 'warn',
      text: html`Webhook endpoint <code>${endpoint.url}</code>: of its ${plural(page.items.length, 'latest delivery', 'latest deliveries')}, ${n(failed)} failed and ${n(retrying)} ${retrying === 1 ? 'is' : 'are'} being retried. <a href="${link}">See the deliveries</a>`,
    })
  })
  return found
}

type Calls = ReturnType<typeof sumLines>

/** What the page shows, read once. */
interface Facts {
  readonly now: number
  readonly today: Calls
  readonly week: Calls
  readonly plan: Plan | null
  readonly windowEnd: string | null
  readonly used: number
  readonly live: readonly ApiKeyInfo[]
  readonly stopping: readonly ApiKeyInfo[]
  readonly subs: readonly Subscription[]
  readonly failures: ReturnType<typeof recent>
  readonly lockouts: ReturnType<typeof recent>
  readonly failing: readonly Attention[]
  /** Today's refused calls, the most first, and their total. */
  readonly refused: readonly RefusalLine[]
  readonly keys: readonly ApiKeyInfo[]
}

async function factsOf(kit: Kit, who: InAccount): Promise<Facts> {
  const { accounts } = kit
  const id = who.account.id
  const now = kit.now()
  const day = utcDay(now)
  const [todayLines, weekLines, planOf, keys, subs, failed, lockouts, failing, refused] = await Promise.all([
    accounts.usage(id, day, day, 'day'),
    accounts.usage(id, utcDay(now - 6 * DAY), day, 'day'),
    accounts.getPlan(id),
    accounts.listKeys(id),
    accounts.listSubscriptions(id),
    accounts.auditEvents({ accountId: id, action: 'factor.verification_failed', limit: EVENTS_READ }),
    accounts.auditEvents({ accountId: id, action: 'factor.lockout_started', limit: EVENTS_READ }),
    failingEndpoints(kit, who),
    accounts.refusals(id, day, day),
  ])
  const plan = planOf?.plan ?? null
  const window = plan === null ? null : quotaWindow(now, plan.period)
  const used = window === null ? 0 : await accounts.usageTotal(id, utcDay(window.start), utcDay(window.end - 1))
  const live = liveKeys(keys, now)
  return {
    now,
    today: sumLines(isFailure(todayLines) ? [] : todayLines),
    week: sumLines(isFailure(weekLines) ? [] : weekLines),
    plan,
    windowEnd: window === null ? null : new Date(window.end).toISOString(),
    used,
    live,
    stopping: live.filter((k) => k.expiresAt !== null && Date.parse(k.expiresAt) - now < EXPIRY_NOTICE_DAYS * DAY),
    subs,
    failures: recent(failed.items, now, DAY),
    lockouts: recent(lockouts.items, now, DAY),
    failing,
    refused: isFailure(refused) ? [] : refused,
    keys,
  }
}

/** attentionOf: what needs attention, worst first within each kind. */
function attentionOf(who: InAccount, f: Facts): Attention[] {
  const path = (page: string) => accountPath(who.account.id, page)
  const found: Attention[] = []
  if (who.account.status !== 'active')
    found.push({ level: 'bad', text: html`This account is ${who.account.status}: every call with its keys is refused until an operator activates it.` })
  if (!f.subs.some((s) => s.status === 'active'))
    found.push({ level: 'warn', text: html`No active subscription: calls are refused in every region. <a href="${path('subscriptions')}">Subscribe</a>` })
  if (f.live.length === 0) found.push({ level: 'warn', text: html`No key in use: <a href="${path('keys')}#create">create one</a> to call the API.` })
  const { plan, used } = f
  if (plan !== null && plan.quota > 0 && used >= plan.quota * 0.8)
    found.push({
      level: used >= plan.quota ? 'bad' : 'warn',
      text: html`${used >= plan.quota ? 'The quota is used up: calls are refused with 429' : 'Over 80 % of the quota is used'} until the ${plan.period} ends (${when(f.windowEnd)}). <a href="${path('usage')}">See the usage</a>`,
    })
  for (const k of f.stopping)
    found.push({
      level: 'warn',
      text: html`Key ${keyLabel(k)} stops working ${when(k.expiresAt)}${keyState(k, f.now) === 'expiring' ? ' (rolled: its grace ends)' : ''}. <a href="${path('keys')}/${encodeURIComponent(k.id)}">See the key</a>`,
    })
  const refusedToday = f.refused.reduce((a, r) => a + r.count, 0)
  if (refusedToday > 0) {
    const names = new Map(f.keys.map((k) => [k.id, k]))
    const shown = f.refused.slice(0, REFUSALS_SHOWN)
    found.push({
      level: 'warn',
      text: html`${plural(refusedToday, 'call')} refused today (UTC):<ul>${shown.map((r) => {
        const key = names.get(r.keyId)
        return html`<li>${n(r.count)} with key ${key === undefined ? r.keyId : keyLabel(key)}, ${GROUP_NAMES[r.group]} in ${r.region}: ${REFUSAL_WORDS[r.reason]}</li>`
      })}</ul>${f.refused.length > shown.length ? html`and ${plural(f.refused.length - shown.length, 'more kind')}. ` : ''}<a href="${path('usage')}#refused">See the refused calls</a>`,
    })
  }
  if (f.failures.count > 0)
    found.push({
      level: 'warn',
      text: html`${f.failures.more ? `At least ${n(f.failures.count)}` : n(f.failures.count)} failed ${f.failures.count === 1 ? 'verification' : 'verifications'} of managed factors in the last 24 hours, the latest ${when(f.failures.latest)}. <a href="${path('audit')}?action=factor.verification_failed">See them in the audit trail</a>`,
    })
  if (f.lockouts.count > 0)
    found.push({
      level: 'bad',
      text: html`${plural(f.lockouts.count, 'factor')} locked out after too many failed codes in the last 24 hours. <a href="${path('audit')}?action=factor.lockout_started">See them in the audit trail</a>`,
    })
  return [...found, ...f.failing]
}

/** cards: the four figures at the top. */
function cards(kit: Kit, who: InAccount, f: Facts): Html {
  const path = (page: string) => accountPath(who.account.id, page)
  const { plan, used } = f
  const shown = f.subs.filter((s) => s.status !== 'inactive')
  return html`<div class="cards">
<section class="card" aria-labelledby="today-title">
<h2 id="today-title">Calls today</h2>
<p class="figure" id="calls-today">${n(f.today.count)}</p>
<p class="hint">${GROUPS.map((g) => `${GROUP_NAMES[g]} ${n(f.today.per[g])}`).join(' · ')}; ${n(f.week.count)} in the last 7 days (UTC days).</p>
<p><a href="${path('usage')}">Usage</a></p>
</section>
<section class="card" aria-labelledby="quota-title">
<h2 id="quota-title">Quota this ${plan?.period ?? 'period'}</h2>
${
  plan === null || plan.quota === 0
    ? html`<p class="figure" id="quota-used">${n(used)} units</p><p class="hint">No quota on this account's plan.</p>`
    : html`<p class="figure" id="quota-used">${n(used)} <span class="hint">of ${n(plan.quota)} units</span></p>
<meter min="0" max="${plan.quota}" value="${Math.min(used, plan.quota)}" high="${Math.floor(plan.quota * 0.8)}" aria-labelledby="quota-title quota-used">${((used / plan.quota) * 100).toFixed(1)} %</meter>
<p class="hint">Until ${when(f.windowEnd)}.</p>`
}
</section>
<section class="card" aria-labelledby="keys-title">
<h2 id="keys-title">Keys in use</h2>
<p class="figure" id="keys-in-use">${n(f.live.length)} <span class="hint">of ${n(kit.accounts.keyLimit)}</span></p>
<p class="hint">${f.stopping.length === 0 ? `None stops in the next ${EXPIRY_NOTICE_DAYS} days.` : `${plural(f.stopping.length, 'key')} ${f.stopping.length === 1 ? 'stops' : 'stop'} in the next ${EXPIRY_NOTICE_DAYS} days.`}</p>
<p><a href="${path('keys')}">Keys</a></p>
</section>
<section class="card" aria-labelledby="subs-title">
<h2 id="subs-title">Subscriptions</h2>
${shown.length === 0 ? html`<p>None yet.</p>` : html`<ul>${shown.map((s) => html`<li>${GROUP_NAMES[s.group]} in ${s.region} ${subscriptionBadge(s.status)}</li>`)}</ul>`}
<p><a href="${path('subscriptions')}">Subscriptions</a></p>
</section>
</div>`
}

export default async function overviewPages(app: FastifyInstance, kit: Kit): Promise<void> {
  app.get<{ Params: { accountId: string } }>('/accounts/:accountId/overview', pageRoute(kit, 'viewer'), async (request, reply) => {
    const who = whoIn(request)
    const facts = await factsOf(kit, who)
    const attention = attentionOf(who, facts)
    return sendPage(kit, reply, {
      title: 'Overview',
      current: who,
      account: { id: who.account.id, name: who.account.name, here: 'overview' },
      body: html`${cards(kit, who, facts)}
<h2>Needs attention</h2>
${
  attention.length === 0
    ? html`<p id="attention">Nothing: the account is active, subscribed and has keys in use; no call refused today, no failed verification or lockout in the last 24 hours${atLeast(who.role, 'admin') ? ', and no webhook delivery failing' : ''}.</p>`
    : html`<ul class="attention" id="attention">${attention.map((a) => html`<li class="${a.level}">${a.text}</li>`)}</ul>`
}
<p class="hint">Counts reach this page within ${Math.ceil(kit.config.usageFlushMs / 1000)} seconds. New here? <a href="${accountPath(who.account.id, 'start')}">Getting started</a> has a first call to paste.</p>`,
    })
  })
}

function sumLines(lines: readonly { group: Group; count: number; units: number }[]): { count: number; units: number; per: Record<Group, number> } {
  const per: Record<Group, number> = { totp: 0, converter: 0 }
  let count = 0
  let units = 0
  for (const l of lines) {
    per[l.group] += l.count
    count += l.count
    units += l.units
  }
  return { count, units, per }
}
