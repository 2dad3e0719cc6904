/**
 * An account's webhook endpoints, for its owners and admins: added (the signing secret shown
 * once, in the answer to the post that made it), listed, deleted after a confirmation, and
 * each one's delivery log with a re-send per delivery. Every change goes through the webhooks
 * service, which writes the audit events. Plain forms: nothing here needs a script.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { html, wide, type Html } from '../web/html.ts'
import type { InAccount, Kit } from '../web/kit.ts'
import { actorOf, csrfField, formExpired, formField, formOk, notFound, pageRoute, refusedPage, sendPage, whoIn } from '../web/kit.ts'
import { isFailure, type Failure } from '../../services/outcome.ts'
import { EVENT_TYPES } from '../../domain/events.ts'
import type { WebhookDelivery, WebhookEndpoint } from '../../domain/webhooks.ts'
import { accountPath } from '../web/labels.ts'
import { webhooksGuide } from './webhooks-guide.ts'

export const css = `
table.webhooks td { overflow-wrap: anywhere; }
fieldset.types .choices { display: flex; flex-wrap: wrap; gap: .5rem 1.5rem; }
fieldset.types label { font-weight: 400; margin-left: .3rem; }
pre.secret { white-space: pre-wrap; word-break: break-all; }
`

type Params = { accountId: string; webhookId: string }
const PAGE = 20

const typesOf = (e: WebhookEndpoint): string => (e.eventTypes === null ? 'every event' : e.eventTypes.join(', '))

function endpointList(base: string, endpoints: readonly WebhookEndpoint[]): Html {
  if (endpoints.length === 0) return html`<p>No endpoint yet: events are recorded in the audit trail only.</p>`
  return wide(
    'Endpoints',
    html`<table class="webhooks"><caption>Endpoints</caption>
<thead><tr><th scope="col">URL</th><th scope="col">Events</th><th scope="col">Added</th><th scope="col">Actions</th></tr></thead>
<tbody>${endpoints.map(
      (e) => html`<tr><td>${e.url}</td><td>${typesOf(e)}</td><td>${e.createdAt.slice(0, 16).replace('T', ' ')} UTC</td>
<td><a href="${base}/${encodeURIComponent(e.id)}/deliveries">Deliveries<span class="visually-hidden"> to ${e.url}</span></a>
· <a href="${base}/${encodeURIComponent(e.id)}/delete">Delete<span class="visually-hidden"> ${e.url}</span></a></td></tr>`,
    )}</tbody></table>`,
  )
}

function createForm(base: string, csrf: Html, url: string, types: readonly string[], problem: string | null): Html {
  return html`<h2 id="add">Add an endpoint</h2>
<form method="post" action="${base}" novalidate>${csrf}
<p><label for="url">URL</label><br><input id="url" name="url" type="url" required size="60" maxlength="2000" value="${url}"
 aria-describedby="url-help${problem === null ? '' : ' url-error'}"${problem === null ? '' : html` aria-invalid="true"`}>
<br><span id="url-help">An <code>https</code> address on a public host. Events are POSTed there, signed as Standard Webhooks says.</span>
${problem === null ? '' : html`<br><span id="url-error" class="error">${problem}</span>`}</p>
<fieldset class="types"><legend>Events (none ticked: every event, present and future)</legend><div class="choices">
${EVENT_TYPES.map((t, i) => html`<span><input type="checkbox" id="type-${i}" name="eventTypes" value="${t}"${types.includes(t) ? ' checked' : ''}><label for="type-${i}">${t}</label></span>`)}
</div></fieldset>
<p><button type="submit">Add the endpoint</button></p></form>`
}

function deliveryTable(deliveries: readonly WebhookDelivery[], resendBase: string, csrf: Html): Html {
  if (deliveries.length === 0) return html`<p>No delivery yet.</p>`
  return wide(
    'Deliveries',
    html`<table class="webhooks"><caption>Deliveries, newest event first</caption>
<thead><tr><th scope="col">Event</th><th scope="col">Status</th><th scope="col">Latest attempts</th><th scope="col">Action</th></tr></thead>
<tbody>${deliveries.map(
      (d) => html`<tr><td>${d.eventType}<br><code class="id">${d.id}</code><br>${d.createdAt.replace('T', ' ').slice(0, 19)} UTC</td>
<td>${d.status}${d.nextAttemptAt === null ? '' : html`<br>next try ${d.nextAttemptAt.replace('T', ' ').slice(0, 19)} UTC`}</td>
<td>${d.attempts.length === 0 ? 'none yet' : html`<ul>${d.attempts.slice(0, 5).map((a) => html`<li>${a.at.replace('T', ' ').slice(0, 19)}: ${a.error ?? `HTTP ${a.statusCode}`} (${a.durationMs} ms)</li>`)}</ul>`}</td>
<td><form method="post" action="${resendBase}/${encodeURIComponent(d.id)}/resend">${csrf}<button type="submit">Send again<span class="visually-hidden"> ${d.id}</span></button></form></td></tr>`,
    )}</tbody></table>`,
  )
}

/** listOf: the ticked checkboxes of a field, as strings. */
function listOf(request: FastifyRequest, name: string): string[] {
  const value = ((request.body ?? {}) as Record<string, unknown>)[name]
  const all = Array.isArray(value) ? value : value === undefined ? [] : [value]
  return all.filter((v): v is string => typeof v === 'string').slice(0, EVENT_TYPES.length + 1)
}

/** here: the webhooks page's entry in the account's navigation. */
const here = (who: InAccount) => ({ id: who.account.id, name: who.account.name, here: 'webhooks' as const })

/** listPage sends the endpoints and the form that adds one (filled again after a problem). */
async function listPage(
  kit: Kit,
  reply: FastifyReply,
  who: InAccount,
  opts: { status?: number; url?: string; types?: readonly string[]; problem?: string | null; notice?: Html | null } = {},
): Promise<FastifyReply> {
  const base = accountPath(who.account.id, 'webhooks')
  const endpoints = await kit.webhooks.list(who.account.id)
  const csrf = csrfField(kit, who)
  return sendPage(kit, reply, {
    title: 'Webhooks',
    current: who,
    status: opts.status ?? 200,
    account: here(who),
    body: html`${opts.notice ?? ''}<p>The account's events (factors created, activated, deleted; failed verifications; lockouts; recovery codes used or made again; conversion jobs that succeeded or failed) are sent to these endpoints, signed. <a href="#receiving">Receiving events</a>, below, shows what arrives and how to verify it.</p>
${
  isFailure(endpoints)
    ? ''
    : html`${endpointList(base, endpoints)}
<p id="endpoint-count">${endpoints.length} of ${kit.webhooks.limit} endpoints: the most this account may have${endpoints.length >= kit.webhooks.limit ? html`, so none can be added until one is deleted` : ''}.</p>`
}
${createForm(base, csrf, opts.url ?? '', opts.types ?? [], opts.problem ?? null)}
${webhooksGuide({ timeoutMs: kit.config.webhookTimeoutMs, retrySeconds: kit.config.webhookRetrySeconds })}`,
  })
}

/** refused: a change the webhooks service turned down, told on a page of its own with the way back. */
function refused(kit: Kit, reply: FastifyReply, who: InAccount, title: string, failure: Failure): FastifyReply {
  return refusedPage(kit, reply, who, { title, failure, here: 'webhooks', back: 'the webhooks' })
}

/** endpointOf: the endpoint of the path, in the account of the path; otherwise a 404 is sent and null returned. */
async function endpointOf(kit: Kit, request: FastifyRequest<{ Params: Params }>, reply: FastifyReply, who: InAccount): Promise<WebhookEndpoint | null> {
  const found = await kit.webhooks.endpoint(who.account.id, request.params.webhookId)
  if (found === null) await notFound(kit, reply, who)
  return found
}

/** GET webhooks: the account's endpoints and the form that adds one. */
async function listEndpoints(kit: Kit, request: FastifyRequest<{ Params: { accountId: string } }>, reply: FastifyReply): Promise<FastifyReply> {
  const who = whoIn(request)
  return listPage(
    kit,
    reply,
    who,
    (request.query as { deleted?: unknown }).deleted === '1'
      ? { notice: html`<p class="notice" role="status">The endpoint is deleted: it receives nothing more.</p>` }
      : {},
  )
}

/** POST webhooks: add an endpoint, and show its signing secret once. */
async function addEndpoint(kit: Kit, request: FastifyRequest<{ Params: { accountId: string } }>, reply: FastifyReply): Promise<FastifyReply> {
  const who = whoIn(request)
  const base = accountPath(who.account.id, 'webhooks')
  if (!formOk(kit, request, who)) return formExpired(kit, reply, who, base)
  const url = formField(request, 'url')
  const types = listOf(request, 'eventTypes')
  const made = await kit.webhooks.create(actorOf(who, request), who.account.id, { url, eventTypes: types.length === 0 ? null : types })
  if (isFailure(made)) {
    if (made.failure !== 'invalid') return refused(kit, reply, who, 'Endpoint not added', made)
    return listPage(kit, reply, who, { status: 422, url, types, problem: `${made.message}.` })
  }
  return sendPage(kit, reply, {
    title: 'Endpoint added',
    current: who,
    status: 201,
    account: here(who),
    body: html`<p class="notice" role="status">Events will be sent to ${made.endpoint.url} (${typesOf(made.endpoint)}).</p>
<p><strong>Its signing secret is shown this once.</strong> Keep it with the receiving code, which verifies each delivery with it (<a href="${base}#verify">how</a>):</p>
<pre class="secret" id="secret">${made.secret}</pre>
<p><button type="button" data-copy="secret" hidden>Copy the secret</button> <span role="status" id="secret-status"></span></p>
<p><a href="${base}">Back to the webhooks</a></p>`,
  })
}

/** GET delete: the confirmation of an endpoint's deletion. */
async function deletePage(kit: Kit, request: FastifyRequest<{ Params: Params }>, reply: FastifyReply): Promise<FastifyReply> {
  const who = whoIn(request)
  const endpoint = await endpointOf(kit, request, reply, who)
  if (endpoint === null) return reply
  const base = accountPath(who.account.id, 'webhooks')
  return sendPage(kit, reply, {
    title: 'Delete an endpoint',
    current: who,
    account: here(who),
    body: html`<p>Delete the endpoint ${endpoint.url}? It receives no further event, and deliveries still pending are cancelled.</p>
<form method="post" action="${base}/${encodeURIComponent(endpoint.id)}/delete">${csrfField(kit, who)}<input type="hidden" name="confirm" value="1">
<button type="submit">Delete the endpoint</button> <a href="${base}">Keep it</a></form>`,
  })
}

/** POST delete: delete the endpoint, when the post is the confirmation's. */
async function deleteEndpoint(kit: Kit, request: FastifyRequest<{ Params: Params }>, reply: FastifyReply): Promise<FastifyReply> {
  const who = whoIn(request)
  const base = accountPath(who.account.id, 'webhooks')
  if (!formOk(kit, request, who)) return formExpired(kit, reply, who, base)
  if (formField(request, 'confirm') !== '1') return reply.redirect(`${base}/${encodeURIComponent(request.params.webhookId)}/delete`, 303)
  const deleted = await kit.webhooks.remove(actorOf(who, request), who.account.id, request.params.webhookId)
  if (isFailure(deleted)) return refused(kit, reply, who, 'Endpoint not deleted', deleted)
  return reply.redirect(`${base}?deleted=1`, 303)
}

/** GET deliveries: an endpoint's deliveries, newest first, in cursor pages. */
async function deliveriesPage(
  kit: Kit,
  request: FastifyRequest<{ Params: Params; Querystring: { after?: unknown } }>,
  reply: FastifyReply,
): Promise<FastifyReply> {
  const who = whoIn(request)
  const endpoint = await endpointOf(kit, request, reply, who)
  if (endpoint === null) return reply
  const after = typeof request.query.after === 'string' && /^evt_[0-9a-f]{22}$/.test(request.query.after) ? request.query.after : undefined
  const page = await kit.webhooks.deliveries(who.account.id, endpoint.id, { limit: PAGE, ...(after === undefined ? {} : { cursor: after }) })
  if (isFailure(page)) return refused(kit, reply, who, 'Deliveries', page)
  const path = `${accountPath(who.account.id, 'webhooks')}/${encodeURIComponent(endpoint.id)}/deliveries`
  const resent = (request.query as { resent?: unknown }).resent
  return sendPage(kit, reply, {
    title: 'Deliveries',
    current: who,
    account: here(who),
    body: html`${typeof resent === 'string' ? html`<p class="notice" role="status">Delivery ${resent} will be sent again within seconds.</p>` : ''}
<p>Deliveries to ${endpoint.url} (${typesOf(endpoint)}). A receiver drops what it has seen by the event's id, which every attempt repeats.</p>
${deliveryTable(page.items, path, csrfField(kit, who))}
${page.next === null ? '' : html`<p><a href="${path}?after=${encodeURIComponent(page.next)}">Older deliveries</a></p>`}
<p><a href="${accountPath(who.account.id, 'webhooks')}">Back to the webhooks</a></p>`,
  })
}

/** POST resend: send a delivery again. */
async function resendDelivery(kit: Kit, request: FastifyRequest<{ Params: Params & { deliveryId: string } }>, reply: FastifyReply): Promise<FastifyReply> {
  const who = whoIn(request)
  const path = `${accountPath(who.account.id, 'webhooks')}/${encodeURIComponent(request.params.webhookId)}/deliveries`
  if (!formOk(kit, request, who)) return formExpired(kit, reply, who, path)
  const resent = await kit.webhooks.resend(actorOf(who, request), who.account.id, request.params.webhookId, request.params.deliveryId)
  if (isFailure(resent)) return refused(kit, reply, who, 'Not sent again', resent)
  return reply.redirect(`${path}?resent=${encodeURIComponent(request.params.deliveryId)}`, 303)
}

export default async function webhookPages(app: FastifyInstance, kit: Kit): Promise<void> {
  app.get<{ Params: { accountId: string } }>('/accounts/:accountId/webhooks', pageRoute(kit, 'admin'), (request, reply) => listEndpoints(kit, request, reply))

  app.post<{ Params: { accountId: string } }>('/accounts/:accountId/webhooks', pageRoute(kit, 'admin'), (request, reply) => addEndpoint(kit, request, reply))

  app.get<{ Params: Params }>('/accounts/:accountId/webhooks/:webhookId/delete', pageRoute(kit, 'admin'), (request, reply) => deletePage(kit, request, reply))

  app.post<{ Params: Params }>('/accounts/:accountId/webhooks/:webhookId/delete', pageRoute(kit, 'admin'), (request, reply) =>
    deleteEndpoint(kit, request, reply),
  )

  app.get<{ Params: Params; Querystring: { after?: unknown } }>(
    '/accounts/:accountId/webhooks/:webhookId/deliveries',
    pageRoute(kit, 'admin'),
    (request, reply) => deliveriesPage(kit, request, reply),
  )

  app.post<{ Params: Params & { deliveryId: string } }>(
    '/accounts/:accountId/webhooks/:webhookId/deliveries/:deliveryId/resend',
    pageRoute(kit, 'admin'),
    (request, reply) => resendDelivery(kit, request, reply),
  )
}
