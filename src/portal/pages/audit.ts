/**
 * The portal's audit page of an account: the account's own events, newest first, 50 a page
 * with a link to the older ones (the store's cursor), filtered by action if asked. Portal users
 * are shown by their email (one lookup per user on the page); admin tokens, the CLI and the
 * service by their names. A user's sign-in and sign-out are recorded in each of their accounts
 * (auth.ts), so they appear here too.
 */
import type { FastifyInstance, FastifyReply } from 'fastify'
import { html, wide, type Html } from '../web/html.ts'
import type { InAccount, Kit } from '../web/kit.ts'
import { pageRoute, sendPage, whoIn } from '../web/kit.ts'
import { CursorError } from '../../domain/errors.ts'
import type { AuditEvent } from '../../domain/accounts.ts'
import { EVENT_TYPES } from '../../domain/events.ts'

/** Events a page. */
export const PAGE_SIZE = 50
/** An action as the service writes them (`key.roll`, `totp-lockout.clear`): anything else is refused, not searched for. */
const ACTION = /^[a-z][a-z_-]{0,40}(\.[a-z][a-z_-]{0,40}){0,3}$/

/** The actions an account's trail holds, offered as suggestions (the field takes any action). */
const KNOWN_ACTIONS = [
  'account.create',
  'account.update',
  'account.suspend',
  'account.activate',
  'key.create',
  'key.roll',
  'key.revoke',
  'subscription.set',
  'subscription.approve',
  'subscription.refuse',
  'plan.set',
  'plan.reset',
  'totp-lockout.clear',
  'member.add',
  'member.invite',
  'member.invite-cancel',
  'member.join',
  'member.role',
  'member.remove',
  'user.sign-in',
  'user.sign-out',
  'user.recovery-codes',
  'user.password-check',
  'job.cancel',
  'job.result_delete',
  ...EVENT_TYPES,
]

/** Styles of these pages, added to the portal's one stylesheet. */
export const css = `
table.audit td { font-size: .95rem; }
table.audit td code { white-space: nowrap; }
table.audit td.detail code { white-space: normal; }
nav.pager ul { display: flex; gap: 1.5rem; list-style: none; padding: 0; }
`

/** detailText: an event's detail as `key=value` pairs, strings as they are, the rest as JSON. */
export function detailText(detail: Readonly<Record<string, unknown>>): string {
  return Object.entries(detail)
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(' ')
}

const PORTAL_USER = 'portal-user:'

/**
 * actorNames: each portal user of the events by email, other actors as they are. The account's
 * members come in one read; others (former members, operators) are looked up once each.
 */
async function actorNames(kit: Kit, accountId: string, events: readonly AuditEvent[]): Promise<Map<string, string>> {
  const users = [...new Set(events.map((e) => e.actor).filter((a) => a.startsWith(PORTAL_USER)))]
  if (users.length === 0) return new Map()
  const emails = await kit.team.emailsOf(
    accountId,
    users.map((a) => a.slice(PORTAL_USER.length)),
  )
  return new Map(users.map((a) => [a, emails.get(a.slice(PORTAL_USER.length)) ?? a]))
}

const when = (at: string) => html`<time datetime="${at}">${at.slice(0, 10)} ${at.slice(11, 19)} UTC</time>`

function row(event: AuditEvent, names: ReadonlyMap<string, string>): Html {
  const detail = detailText(event.detail)
  return html`<tr>
<td>${when(event.at)}</td>
<td>${names.get(event.actor) ?? event.actor}</td>
<td class="action"><code>${event.action}</code></td>
<td>${event.target.type} <code>${event.target.id}</code></td>
<td><span class="badge ${event.outcome === 'success' ? 'ok' : 'bad'}">${event.outcome}</span></td>
<td>${event.ip ?? '—'}</td>
<td class="detail">${detail === '' ? '—' : html`<code>${detail}</code>`}</td>
</tr>`
}

export default async function auditPages(app: FastifyInstance, kit: Kit): Promise<void> {
  const refuse = (reply: FastifyReply, here: InAccount, message: string) =>
    sendPage(kit, reply, {
      title: 'Audit',
      status: 400,
      current: here,
      account: { id: here.account.id, name: here.account.name, here: 'audit' },
      body: html`<p class="error" role="alert">${message}. <a href="/portal/accounts/${encodeURIComponent(here.account.id)}/audit">Show the latest events</a>.</p>`,
    })

  app.get('/accounts/:accountId/audit', pageRoute(kit, 'viewer'), async (request, reply) => {
    const here = whoIn(request)
    const q = request.query as Record<string, unknown>
    const action = q.action === undefined ? '' : q.action
    const cursor = q.cursor === undefined ? '' : q.cursor
    if (typeof action !== 'string' || (action !== '' && !ACTION.test(action))) return refuse(reply, here, 'An action is a word and a verb, like key.create')
    if (typeof cursor !== 'string' || cursor.length > 200) return refuse(reply, here, 'That link to older events is not valid')
    const id = here.account.id
    let page: Awaited<ReturnType<typeof kit.accounts.auditEvents>>
    try {
      page = await kit.accounts.auditEvents({ accountId: id, limit: PAGE_SIZE, ...(action === '' ? {} : { action }), ...(cursor === '' ? {} : { cursor }) })
    } catch (error) {
      if (error instanceof CursorError) return refuse(reply, here, 'That link to older events is not valid')
      throw error
    }
    const names = await actorNames(kit, id, page.items)
    const base = `/portal/accounts/${encodeURIComponent(id)}/audit`
    const filter = action === '' ? '' : `action=${encodeURIComponent(action)}`
    const older = page.next === null ? null : `${base}?${filter === '' ? '' : `${filter}&`}cursor=${encodeURIComponent(page.next)}`
    const latest = cursor === '' ? null : `${base}${filter === '' ? '' : `?${filter}`}`

    return sendPage(kit, reply, {
      title: 'Audit',
      current: here,
      account: { id, name: here.account.name, here: 'audit' },
      body: html`
<p>Every change to this account, its keys, subscriptions, plan and team, and its members' sign-ins, newest first.</p>
<form method="get" action="${base}" class="row" role="search" aria-label="Filter the events">
<div><label for="action">Action</label>
<input id="action" name="action" type="text" list="actions" value="${action}" placeholder="all actions" aria-describedby="action-hint" autocomplete="off" spellcheck="false">
<datalist id="actions">${KNOWN_ACTIONS.map((a) => html`<option value="${a}"></option>`)}</datalist></div>
<button type="submit" class="secondary">Filter events</button>
${action === '' ? '' : html`<a href="${base}">Show all actions</a>`}
</form>
<p class="hint" id="action-hint">For example key.create or user.sign-in; leave empty for all.</p>
${
  page.items.length === 0
    ? html`<p role="status">${cursor === '' ? (action === '' ? 'No events yet.' : `No ${action} events.`) : 'No older events.'}</p>`
    : wide(
        action === '' ? 'Events' : `${action} events`,
        html`<table class="audit">
<caption>${action === '' ? 'Events' : html`<code>${action}</code> events`}${cursor === '' ? ', newest first' : ', older'}</caption>
<thead><tr><th scope="col">Time</th><th scope="col">Who</th><th scope="col">Action</th><th scope="col">Target</th><th scope="col">Outcome</th><th scope="col">Source IP</th><th scope="col">Detail</th></tr></thead>
<tbody>${page.items.map((e) => row(e, names))}</tbody>
</table>`,
      )
}
${
  older === null && latest === null
    ? ''
    : html`<nav class="pager" aria-label="Pages of events"><ul>
${latest === null ? '' : html`<li><a href="${latest}">Newest events</a></li>`}
${older === null ? '' : html`<li><a href="${older}" rel="next">Older events</a></li>`}
</ul></nav>`
}`,
    })
  })
}
