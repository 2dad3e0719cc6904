/**
 * The keys of an account: listed to its viewers, a page per key; created, rolled and revoked
 * (each change after a confirmation page) by its developers (and up) through the accounts
 * layer, which writes the audit events. A new key
 * is shown once, in the answer to the post that made it (a `no-store` page): never in a
 * URL, a redirect, a cookie or the log, as unkey's portal does.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { html } from '../web/html.ts'
import type { InAccount, Kit } from '../web/kit.ts'
import { actorOf, atLeast, csrfField, formExpired, formField, formOk, notFound, pageRoute, refusedPage, sendPage, whoIn } from '../web/kit.ts'
import { MAX_NAME_LENGTH } from '../../services/accounts.ts'
import { isFailure, type Failure } from '../../services/outcome.ts'
import type { ApiKeyInfo } from '../../domain/accounts.ts'
import { accountPath } from '../web/labels.ts'
import {
  confirmRevoke,
  confirmRoll,
  createForm,
  EMPTY_FORM,
  EXPIRIES,
  fullLabel,
  GRACES,
  inGraceTo,
  keyLabel,
  keyDetails,
  keyList,
  keyState,
  liveKeys,
  sharedNames,
  shownOnce,
  type CreateValues,
  type Problem,
  type ListView,
} from './keys-view.ts'

/** Styles of these pages, added to the portal's one stylesheet. */
export const css = `
table.keys td.actions { white-space: nowrap; }
table.keys td.actions a + a { margin-left: .75rem; }
a.danger { color: var(--danger); }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .4rem 1.5rem; }
dl.facts dt { font-weight: 600; }
dl.facts dd { margin: 0; }
div.row { display: flex; flex-wrap: wrap; gap: 1rem; align-items: center; }
fieldset .choices { display: flex; flex-wrap: wrap; gap: .5rem 1.5rem; }
fieldset .choices label { font-weight: 400; margin-left: .3rem; }
details > summary { cursor: pointer; font-weight: 700; margin: 1rem 0 .5rem; }
`

type KeyParams = { accountId: string; keyId: string }

const DAY_MS = 86_400_000

/** listOf: a form field that may come once or several times (checkboxes), as strings. */
function listOf(request: FastifyRequest, name: string): string[] {
  const value = ((request.body ?? {}) as Record<string, unknown>)[name]
  const all = Array.isArray(value) ? value : value === undefined ? [] : [value]
  return all.filter((v): v is string => typeof v === 'string').slice(0, 10)
}

/** The keys page's navigation entry, the same on each of its answers. */
const keysNav = (who: InAccount) => ({ id: who.account.id, name: who.account.name, here: 'keys' as const })

/** A day, as the create form's date field reads it, this many days from now. */
const dayFrom = (kit: Kit, days: number) => new Date(kit.now() + days * DAY_MS).toISOString().slice(0, 10)

type ListOptions = { status?: number; values?: CreateValues; problem?: Problem | null; revokedId?: string; list?: Pick<ListView, 'show' | 'page' | 'filter'> }

/** keysPage sends the list, with the create form for developers (filled again after a problem). */
async function keysPage(kit: Kit, reply: FastifyReply, who: InAccount, opts: ListOptions = {}): Promise<FastifyReply> {
  const { accounts } = kit
  const base = accountPath(who.account.id, 'keys')
  const keys = await accounts.listKeys(who.account.id)
  const revoked = opts.revokedId === undefined ? undefined : keys.find((k) => k.id === opts.revokedId && k.revokedAt !== null)
  const active = keys.filter((k) => keyState(k, kit.now()) === 'active').length
  const developer = atLeast(who.role, 'developer')
  const csrf = developer ? csrfField(kit, who) : null
  const problem = opts.problem ?? null
  return sendPage(kit, reply, {
    title: 'Keys',
    current: who,
    status: opts.status ?? 200,
    account: keysNav(who),
    body: html`${revoked === undefined ? '' : html`<p class="notice" role="status">Key ${fullLabel(revoked)} is revoked: calls with it get 403.</p>`}${problem === null ? '' : html`<p class="error" role="alert">The key was not created: ${problem.text}</p>`}
<p>A key lets your code call the API: send it in the <code>x-api-key</code> header. It works in the regions this account is <a href="${accountPath(who.account.id, 'subscriptions')}">subscribed</a> in, within its scope.</p>
<p id="key-count">${active} of ${accounts.keyLimit} active keys: the most this account may have${active >= accounts.keyLimit ? html`, so no key can be created until one is revoked` : ''}.</p>
${keyList({ base, keys, nowMs: kit.now(), csrf, ...(opts.list ?? { show: 'live', page: 1, filter: '' }) })}
${csrf === null ? html`<p>Your role (${who.role}) lets you see the keys; a developer, admin or owner of the account creates, rolls and revokes them.</p>` : createForm(base, csrf, opts.values ?? EMPTY_FORM, problem, dayFrom(kit, 1))}`,
  })
}

/** keyOf: the key of the path when it belongs to the account of the path; otherwise a 404 is sent and null returned. */
async function keyOf(kit: Kit, request: FastifyRequest<{ Params: KeyParams }>, reply: FastifyReply, who: InAccount): Promise<ApiKeyInfo | null> {
  const key = await kit.accounts.getKey(request.params.keyId)
  if (key === null || key.accountId !== who.account.id) {
    await notFound(kit, reply, who)
    return null
  }
  return key
}

/** refused: a change the accounts layer turned down, told on a page of its own with the way back. */
function refused(kit: Kit, reply: FastifyReply, who: InAccount, title: string, failure: Failure): FastifyReply {
  return refusedPage(kit, reply, who, { title, failure, here: 'keys', back: 'the keys' })
}

/** shown: the page that shows a new key, once. */
function shown(kit: Kit, reply: FastifyReply, who: InAccount, title: string, made: { key: ApiKeyInfo; apiKey: string; old?: ApiKeyInfo }): FastifyReply {
  return sendPage(kit, reply, {
    title,
    current: who,
    status: 201,
    account: keysNav(who),
    body: shownOnce(accountPath(who.account.id, 'keys'), made.key, made.apiKey, made.old ?? null),
  })
}

/** expiryOf: the expiry chosen on the create form, as an ISO time (null: never), or what is wrong with it. */
function expiryOf(kit: Kit, values: CreateValues): string | null | Problem {
  if (values.expires === 'never') return null
  if (values.expires === 'date') {
    if (!/^\d{4}-\d\d-\d\d$/.test(values.date) || Number.isNaN(Date.parse(values.date)))
      return { field: 'expires', text: 'choose the expiry date (such as 2027-01-31), or another expiry.' }
    if (values.date <= dayFrom(kit, 0)) return { field: 'expires', text: 'choose an expiry date after today.' }
    if (values.date > '9999-12-31') return { field: 'expires', text: 'choose an earlier expiry date.' }
    return `${values.date}T00:00:00.000Z`
  }
  const days = EXPIRIES.find(([v]) => v === values.expires && /^\d+$/.test(v))
  if (days === undefined) return { field: 'expires', text: 'choose one of the expiries offered.' }
  return new Date(kit.now() + Number(days[0]) * DAY_MS).toISOString()
}

/** askToRevoke: the confirmation, naming the key as the list's buttons do (told apart from live keys of the same name). */
async function askToRevoke(kit: Kit, reply: FastifyReply, who: InAccount, key: ApiKeyInfo): Promise<FastifyReply> {
  const keysPath = accountPath(who.account.id, 'keys')
  const path = `${keysPath}/${encodeURIComponent(key.id)}/revoke`
  if (key.revokedAt !== null) return refused(kit, reply, who, 'Revoke a key', { failure: 'conflict', message: `key ${fullLabel(key)} is revoked already` })
  const keys = await kit.accounts.listKeys(who.account.id)
  const shared = sharedNames(liveKeys(keys, kit.now()))
  const ending = inGraceTo(keys, key, kit.now())
  return sendPage(kit, reply, {
    title: 'Revoke a key',
    current: who,
    account: keysNav(who),
    body: confirmRevoke(path, csrfField(kit, who), keyLabel(key, shared), keysPath, ending === null ? null : keyLabel(ending, shared)),
  })
}

type ListQuery = { Params: { accountId: string }; Querystring: { revoked?: unknown; show?: unknown; page?: unknown; filter?: unknown } }

/** GET keys: the list, live or old keys, a page of it, filtered by name. */
async function listKeys(kit: Kit, request: FastifyRequest<ListQuery>, reply: FastifyReply): Promise<FastifyReply> {
  const who = whoIn(request)
  const { revoked, show, page, filter } = request.query
  const list = {
    show: show === 'old' ? ('old' as const) : ('live' as const),
    // A page past the last shows the last; anything but a small whole number, the first.
    page: typeof page === 'string' && /^[1-9]\d{0,5}$/.test(page) ? Number(page) : 1,
    filter: typeof filter === 'string' ? filter.trim().slice(0, 200) : '',
  }
  return keysPage(kit, reply, who, { list, ...(typeof revoked === 'string' ? { revokedId: revoked } : {}) })
}

/** POST keys: create a key from the form, and show it once (or the form again, with what is wrong). */
async function createKey(kit: Kit, request: FastifyRequest<{ Params: { accountId: string } }>, reply: FastifyReply): Promise<FastifyReply> {
  const who = whoIn(request)
  if (!formOk(kit, request, who)) return formExpired(kit, reply, who, accountPath(who.account.id, 'keys'))
  const values: CreateValues = {
    name: formField(request, 'name'),
    expires: formField(request, 'expires') || 'never',
    date: formField(request, 'date'),
    groups: listOf(request, 'groups'),
    regions: listOf(request, 'regions'),
  }
  const again = (problem: Problem) => keysPage(kit, reply, who, { status: 422, values, problem })
  if (values.name === '') return again({ field: 'name', text: 'give the key a name.' })
  if (values.name.length > MAX_NAME_LENGTH) return again({ field: 'name', text: `use at most ${MAX_NAME_LENGTH} characters for the name.` })
  const expiresAt = expiryOf(kit, values)
  if (typeof expiresAt === 'object' && expiresAt !== null) return again(expiresAt)
  const made = await kit.accounts.issueKey(actorOf(who, request), who.account.id, {
    name: values.name,
    expiresAt,
    scope: { groups: values.groups.length === 0 ? null : values.groups, regions: values.regions.length === 0 ? null : values.regions },
  })
  if (isFailure(made)) {
    if (made.failure !== 'invalid') return refused(kit, reply, who, 'Key not created', made)
    return again({ field: made.field === 'name' ? 'name' : made.field === 'expiresAt' ? 'expires' : 'scope', text: `${made.message}.` })
  }
  return shown(kit, reply, who, 'Key created', made)
}

/** GET key: one key, all that is known of it, and its actions. */
async function keyPage(kit: Kit, request: FastifyRequest<{ Params: KeyParams }>, reply: FastifyReply): Promise<FastifyReply> {
  const who = whoIn(request)
  const key = await keyOf(kit, request, reply, who)
  if (key === null) return reply
  // The keys it was rolled to and from, among the account's keys: one read, as the list page does.
  const keys = await kit.accounts.listKeys(who.account.id)
  const to = key.rolledTo === null ? null : (keys.find((k) => k.id === key.rolledTo) ?? null)
  const from = keys.find((k) => k.rolledTo === key.id) ?? null
  return sendPage(kit, reply, {
    title: `Key ${fullLabel(key)}`,
    current: who,
    account: keysNav(who),
    body: keyDetails(accountPath(who.account.id, 'keys'), key, kit.now(), atLeast(who.role, 'developer'), { from, to }),
  })
}

/** askToRoll: the confirmation, with the grace chosen (the default one first). */
async function askToRoll(kit: Kit, reply: FastifyReply, who: InAccount, key: ApiKeyInfo, grace?: number): Promise<FastifyReply> {
  const keysPath = accountPath(who.account.id, 'keys')
  if (keyState(key, kit.now()) !== 'active')
    return refused(kit, reply, who, 'Roll a key', { failure: 'conflict', message: `key ${fullLabel(key)} is revoked, expired or rolled already` })
  const keys = await kit.accounts.listKeys(who.account.id)
  const shared = sharedNames(liveKeys(keys, kit.now()))
  const ending = inGraceTo(keys, key, kit.now())
  return sendPage(kit, reply, {
    title: 'Roll a key',
    current: who,
    account: keysNav(who),
    body: confirmRoll(
      `${keysPath}/${encodeURIComponent(key.id)}/roll`,
      csrfField(kit, who),
      keyLabel(key, shared),
      keysPath,
      grace,
      ending === null ? null : keyLabel(ending, shared),
    ),
  })
}

/** GET roll: the confirmation page. */
async function rollPage(kit: Kit, request: FastifyRequest<{ Params: KeyParams }>, reply: FastifyReply): Promise<FastifyReply> {
  const who = whoIn(request)
  const key = await keyOf(kit, request, reply, who)
  if (key === null) return reply
  return askToRoll(kit, reply, who, key)
}

/** POST roll: a new key in place of this one, which keeps working for the grace chosen; only the confirmation's post rolls. */
async function rollKey(kit: Kit, request: FastifyRequest<{ Params: KeyParams }>, reply: FastifyReply): Promise<FastifyReply> {
  const who = whoIn(request)
  if (!formOk(kit, request, who)) return formExpired(kit, reply, who, accountPath(who.account.id, 'keys'))
  const key = await keyOf(kit, request, reply, who)
  if (key === null) return reply
  const grace = GRACES.find(([s]) => String(s) === formField(request, 'grace'))
  if (grace === undefined)
    return refused(kit, reply, who, 'Key not rolled', { failure: 'invalid', message: `choose a grace of ${GRACES.map(([, w]) => w).join(', ')}` })
  if (formField(request, 'confirm') !== '1') return askToRoll(kit, reply, who, key, grace[0])
  const rolled = await kit.accounts.rollKey(actorOf(who, request), key.id, { graceSeconds: grace[0] })
  if (isFailure(rolled)) return refused(kit, reply, who, 'Key not rolled', rolled)
  return shown(kit, reply, who, 'Key rolled', rolled)
}

/** GET revoke: the confirmation page. */
async function revokePage(kit: Kit, request: FastifyRequest<{ Params: KeyParams }>, reply: FastifyReply): Promise<FastifyReply> {
  const who = whoIn(request)
  const key = await keyOf(kit, request, reply, who)
  if (key === null) return reply
  return askToRevoke(kit, reply, who, key)
}

/** POST revoke: revoke the key, when the post is the confirmation's. */
async function revokeKey(kit: Kit, request: FastifyRequest<{ Params: KeyParams }>, reply: FastifyReply): Promise<FastifyReply> {
  const who = whoIn(request)
  if (!formOk(kit, request, who)) return formExpired(kit, reply, who, accountPath(who.account.id, 'keys'))
  const key = await keyOf(kit, request, reply, who)
  if (key === null) return reply
  // Only the confirmation page's button revokes; any other post asks first.
  if (formField(request, 'confirm') !== '1') return askToRevoke(kit, reply, who, key)
  const revoked = await kit.accounts.revokeKey(actorOf(who, request), key.id)
  if (isFailure(revoked)) return refused(kit, reply, who, 'Key not revoked', revoked)
  return reply.redirect(`${accountPath(who.account.id, 'keys')}?revoked=${encodeURIComponent(key.id)}`, 303)
}

export default async function keysPages(app: FastifyInstance, kit: Kit): Promise<void> {
  app.get<ListQuery>('/accounts/:accountId/keys', pageRoute(kit, 'viewer'), (request, reply) => listKeys(kit, request, reply))
  app.post<{ Params: { accountId: string } }>('/accounts/:accountId/keys', pageRoute(kit, 'developer'), (request, reply) => createKey(kit, request, reply))
  app.get<{ Params: KeyParams }>('/accounts/:accountId/keys/:keyId', pageRoute(kit, 'viewer'), (request, reply) => keyPage(kit, request, reply))
  app.get<{ Params: KeyParams }>('/accounts/:accountId/keys/:keyId/roll', pageRoute(kit, 'developer'), (request, reply) => rollPage(kit, request, reply))
  app.post<{ Params: KeyParams }>('/accounts/:accountId/keys/:keyId/roll', pageRoute(kit, 'developer'), (request, reply) => rollKey(kit, request, reply))
  app.get<{ Params: KeyParams }>('/accounts/:accountId/keys/:keyId/revoke', pageRoute(kit, 'developer'), (request, reply) => revokePage(kit, request, reply))
  app.post<{ Params: KeyParams }>('/accounts/:accountId/keys/:keyId/revoke', pageRoute(kit, 'developer'), (request, reply) => revokeKey(kit, request, reply))
}
