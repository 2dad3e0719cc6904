/**
 * The subscriptions of an account: which API group it may call in which region, a table of
 * groups by regions. Developers (and up) subscribe and cancel through the accounts layer;
 * with SUBSCRIPTION_APPROVAL=operator a subscription asked for waits as pending until an
 * operator approves it. Each region runs its own instances of the service, all on one store:
 * a subscription in a region is what lets the account's keys call that region's base URL.
 */
import type { FastifyInstance, FastifyReply } from 'fastify'
import { html, wide, type Html } from '../web/html.ts'
import type { InAccount, Kit } from '../web/kit.ts'
import { actorOf, atLeast, csrfField, formExpired, formField, formOk, pageRoute, sendPage, whoIn } from '../web/kit.ts'
import { isFailure } from '../../services/outcome.ts'
import { GROUPS, REGIONS, groupServedIn, isGroup, isRegion, type Group, type Region } from '../../domain/regions.ts'
import type { Subscription, SubscriptionStatus } from '../../domain/accounts.ts'
import { accountPath, GROUP_NAMES, regionBase } from '../web/labels.ts'

/** Styles of these pages, added to the portal's one stylesheet. */
export const css = `
table.subscriptions th[scope="col"] .base { display: block; font-weight: 400; font-size: .9rem; color: var(--muted); word-break: break-all; }
table.subscriptions td form { margin-top: .4rem; }
`

type Cell = SubscriptionStatus | 'not-served'

const BADGE: Readonly<Record<Cell, Html>> = {
  active: html`<span class="badge ok">active</span>`,
  pending: html`<span class="badge warn">pending approval</span>`,
  inactive: html`<span class="badge off">not subscribed</span>`,
  'not-served': html`<span class="badge off">not offered in this region</span>`,
}

/** subscriptionBadge: a subscription's status, as every page shows it. */
export const subscriptionBadge = (status: SubscriptionStatus): Html => BADGE[status]

/** What a developer may do with a cell, and what the status becomes: `subscribe` depends on SUBSCRIPTION_APPROVAL. */
const ACTIONS: Readonly<Record<SubscriptionStatus, { readonly action: string; readonly words: (g: string, r: string) => string; readonly style: string }>> = {
  inactive: { action: 'subscribe', words: (g, r) => `Subscribe to ${g} in ${r}`, style: '' },
  active: { action: 'cancel', words: (g, r) => `Cancel ${g} in ${r}`, style: 'danger' },
  pending: { action: 'withdraw', words: (g, r) => `Withdraw the request for ${g} in ${r}`, style: 'secondary' },
}

/** The status each action starts from: an action on a cell that changed meanwhile changes nothing. */
const FROM: Readonly<Record<string, SubscriptionStatus>> = { subscribe: 'inactive', cancel: 'active', withdraw: 'pending' }

/** statusOf: a group's status in a region among an account's subscriptions. */
export function statusOf(subs: readonly Subscription[], region: Region, group: Group): Cell {
  if (!groupServedIn(group, region)) return 'not-served'
  return subs.find((s) => s.region === region && s.group === group)?.status ?? 'inactive'
}

export default async function subscriptionsPages(app: FastifyInstance, kit: Kit): Promise<void> {
  const { accounts, config } = kit
  const operator = config.subscriptionApproval === 'operator'

  function cell(who: InAccount, csrf: Html | null, subs: readonly Subscription[], region: Region, group: Group): Html {
    const status = statusOf(subs, region, group)
    if (status === 'not-served' || csrf === null) return html`<td>${BADGE[status]}</td>`
    const { action, words, style } = ACTIONS[status]
    return html`<td>${BADGE[status]}<form method="post" action="${accountPath(who.account.id, 'subscriptions')}">${csrf}
<input type="hidden" name="region" value="${region}"><input type="hidden" name="group" value="${group}"><input type="hidden" name="action" value="${action}">
<button type="submit"${style === '' ? '' : html` class="${style}"`}>${words(GROUP_NAMES[group], region)}</button></form></td>`
  }

  function regionHeader(region: Region): Html {
    const base = regionBase(kit, region)
    return html`<th scope="col">${region}<span class="base">${base === null ? 'not configured' : base}</span></th>`
  }

  async function subscriptionsPage(reply: FastifyReply, who: InAccount, opts: { status?: number; message?: Html | null } = {}): Promise<FastifyReply> {
    const subs = await accounts.listSubscriptions(who.account.id)
    const csrf = atLeast(who.role, 'developer') ? csrfField(kit, who) : null
    return sendPage(kit, reply, {
      title: 'Subscriptions',
      current: who,
      status: opts.status ?? 200,
      account: { id: who.account.id, name: who.account.name, here: 'subscriptions' },
      body: html`${opts.message ?? ''}
<p>A subscription lets this account's keys call an API group in a region, at that region's base URL. The service runs in each region on its own; a key works in every region the account is subscribed in (within the key's scope).</p>
<p>${
        operator
          ? 'On this service an operator approves each subscription: one you ask for shows as pending approval, and calls are refused until it is active. Cancelling takes effect at once.'
          : 'A subscription starts at once, and cancelling takes effect at once.'
      }</p>
${wide(
  `Subscriptions of ${who.account.name}`,
  html`<table class="subscriptions">
<caption>Subscriptions of ${who.account.name}, by API group and region</caption>
<thead><tr><th scope="col">API group</th>${REGIONS.map(regionHeader)}</tr></thead>
<tbody>${GROUPS.map((g) => html`<tr><th scope="row">${GROUP_NAMES[g]}</th>${REGIONS.map((r) => cell(who, csrf, subs, r, g))}</tr>`)}</tbody>
</table>`,
)}
${csrf === null ? html`<p>Your role (${who.role}) lets you see the subscriptions; a developer, admin or owner of the account changes them.</p>` : ''}
<p>Next: <a href="${accountPath(who.account.id, 'keys')}">create a key</a>, then <a href="${accountPath(who.account.id, 'start')}">make a first call</a>.</p>`,
    })
  }

  app.get<{ Params: { accountId: string }; Querystring: { changed?: string } }>(
    '/accounts/:accountId/subscriptions',
    pageRoute(kit, 'viewer'),
    async (request, reply) => {
      const who = whoIn(request)
      const [region, group] = typeof request.query.changed === 'string' ? request.query.changed.split('.') : []
      if (region === undefined || group === undefined || !isRegion(region) || !isGroup(group)) return subscriptionsPage(reply, who)
      const now = statusOf(await accounts.listSubscriptions(who.account.id), region, group)
      const words = now === 'active' ? 'active' : now === 'pending' ? 'pending an operator’s approval' : 'not subscribed'
      return subscriptionsPage(reply, who, { message: html`<p class="notice" role="status">${GROUP_NAMES[group]} in ${region} is now ${words}.</p>` })
    },
  )

  app.post<{ Params: { accountId: string } }>('/accounts/:accountId/subscriptions', pageRoute(kit, 'developer'), async (request, reply) => {
    const who = whoIn(request)
    if (!formOk(kit, request, who)) return formExpired(kit, reply, who, accountPath(who.account.id, 'subscriptions'))
    const region = formField(request, 'region')
    const group = formField(request, 'group')
    const from = FROM[formField(request, 'action')]
    const problem = (text: string) =>
      subscriptionsPage(reply, who, { status: 422, message: html`<p class="error" role="alert">Nothing was changed: ${text}</p>` })
    if (!isRegion(region) || !isGroup(group) || from === undefined) return problem('that request named no region, API group and action this page offers.')
    const current = statusOf(await accounts.listSubscriptions(who.account.id), region, group)
    if (current === 'not-served') return problem(`${GROUP_NAMES[group]} is not offered in ${region}.`)
    const back = `${accountPath(who.account.id, 'subscriptions')}?changed=${region}.${group}`
    // Someone else changed it meanwhile (an operator's approval, another tab): say how it is now, change nothing.
    if (current !== from) return reply.redirect(back, 303)
    const next = from === 'inactive' ? (operator ? 'pending' : 'active') : 'inactive'
    const set = await accounts.setSubscription(actorOf(who, request), who.account.id, region, group, next)
    if (isFailure(set)) return problem(`${set.message}.`)
    return reply.redirect(back, 303)
  })
}
