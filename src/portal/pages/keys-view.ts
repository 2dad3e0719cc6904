/**
 * The markup of the keys pages: the list (live keys first, then expired and revoked ones),
 * the create form, the page that shows a new key once, and the revoke confirmation. Built
 * from one list of keys and no further lookups, so that an account with a thousand keys
 * costs one query.
 */
import { DEFAULT_ROLL_GRACE_SECONDS, type ApiKeyInfo } from '../../domain/accounts.ts'
import { GROUPS, REGIONS } from '../../domain/regions.ts'
import { html, wide, type Html } from '../web/html.ts'
import { GROUP_NAMES, when } from '../web/labels.ts'

export type KeyState = 'active' | 'expiring' | 'expired' | 'revoked'

/** keyState: what a key is at `nowMs` (expiring: rolled, the old key in its grace period). */
export function keyState(key: ApiKeyInfo, nowMs: number): KeyState {
  if (key.revokedAt !== null) return 'revoked'
  if (key.expiresAt !== null && Date.parse(key.expiresAt) <= nowMs) return 'expired'
  return key.rolledTo === null ? 'active' : 'expiring'
}

const BADGE: Readonly<Record<KeyState, Html>> = {
  active: html`<span class="badge ok">active</span>`,
  expiring: html`<span class="badge warn">expiring (rolled)</span>`,
  expired: html`<span class="badge off">expired</span>`,
  revoked: html`<span class="badge bad">revoked</span>`,
}

/** The grace a roll may give the old key, in seconds, with its words. */
export const GRACES: readonly (readonly [number, string])[] = [
  [0, 'none (stops at once)'],
  [3600, '1 hour'],
  [86_400, '24 hours'],
  [604_800, '7 days'],
]

/** The expiries the create form offers, in days (`date`: the date field). */
export const EXPIRIES: readonly (readonly [string, string])[] = [
  ['never', 'Never'],
  ['30', 'In 30 days'],
  ['90', 'In 90 days'],
  ['365', 'In 365 days'],
  ['date', 'On the date below'],
]

/**
 * keyLabel: how controls name a key: its name, told apart by its last characters when the
 * name is empty or shared with another key of the list.
 */
export function keyLabel(key: ApiKeyInfo, shared: ReadonlySet<string> = new Set()): string {
  if (key.name === '') return `ending in ${key.hint}`
  return shared.has(key.name) ? `${key.name} (ending in ${key.hint})` : key.name
}

/** fullLabel: a key's name and its last characters, whatever the other keys are called. */
export function fullLabel(key: ApiKeyInfo): string {
  return keyLabel(key, new Set([key.name]))
}

/** liveKeys: the keys that still work at `nowMs` (active, or rolled and in their grace). */
export function liveKeys(keys: readonly ApiKeyInfo[], nowMs: number): ApiKeyInfo[] {
  return keys.filter((k) => {
    const s = keyState(k, nowMs)
    return s === 'active' || s === 'expiring'
  })
}

/**
 * inGraceTo: the key rolled to `key` and still in its grace, or null. Rolling or revoking
 * `key` ends that grace at once (a chain of rolls keeps at most two working keys).
 */
export function inGraceTo(keys: readonly ApiKeyInfo[], key: ApiKeyInfo, nowMs: number): ApiKeyInfo | null {
  return keys.find((k) => k.rolledTo === key.id && keyState(k, nowMs) === 'expiring') ?? null
}

/** graceEnds: the warning that the key rolled to this one, in its grace, stops too (`label`), or nothing. */
function graceEnds(label: string | null): Html | string {
  return label === null ? '' : html`<p>Key ${label}, rolled to this one, is still in its grace: it stops now too.</p>`
}

/** sharedNames: the names more than one of `keys` has. */
export function sharedNames(keys: readonly ApiKeyInfo[]): Set<string> {
  const seen = new Set<string>()
  const shared = new Set<string>()
  for (const k of keys) (seen.has(k.name) ? shared : seen).add(k.name)
  return shared
}

function scopeText(key: ApiKeyInfo): string {
  const { groups, regions } = key.scope
  if (groups === null && regions === null) return 'all'
  return `${groups === null ? 'all groups' : groups.map((g) => GROUP_NAMES[g]).join(', ')}; ${regions === null ? 'all regions' : regions.join(', ')}`
}

export interface ListView {
  readonly base: string
  readonly keys: readonly ApiKeyInfo[]
  readonly nowMs: number
  /** The form fields of every form on the page (the CSRF token), or null: no changes offered (viewers). */
  readonly csrf: Html | null
  /** Which keys: those in use, or the expired and revoked ones. */
  readonly show: 'live' | 'old'
  /** The page of that list (1-based), KEYS_PER_PAGE keys a page. */
  readonly page: number
  /** Only keys whose name or last characters contain this (any case); '' for all. */
  readonly filter: string
}

/**
 * KEYS_PER_PAGE: an account may hold a thousand keys; a page of them all, each row with its
 * roll and revoke forms, was a megabyte of HTML and 180 ms at p95 (bench/portal.ts).
 */
export const KEYS_PER_PAGE = 50

function expiryCell(key: ApiKeyInfo, state: KeyState): Html | string {
  if (state === 'revoked') return html`revoked ${when(key.revokedAt)}`
  if (state === 'expiring') return html`grace ends ${when(key.expiresAt)}`
  return when(key.expiresAt)
}

/**
 * actions: a key's actions in the list, as links to their confirmation pages (a form per row,
 * each with its grace drop-down, did not scale to a page of fifty keys, and rolled unasked).
 */
function actions(view: ListView, key: ApiKeyInfo, state: KeyState, label: string): Html {
  const path = `${view.base}/${encodeURIComponent(key.id)}`
  return html`<td class="actions">${state === 'active' ? html`<a href="${path}/roll">Roll<span class="visually-hidden"> key ${label}</span></a> ` : ''}<a href="${path}/revoke" class="danger">Revoke<span class="visually-hidden"> key ${label}</span></a></td>`
}

function row(view: ListView, key: ApiKeyInfo, state: KeyState, shared: ReadonlySet<string>, live: boolean): Html {
  const label = keyLabel(key, shared)
  const used = key.lastUsedAt === null ? 'never' : html`${when(key.lastUsedAt)}${key.lastUsedRegion === null ? '' : ` in ${key.lastUsedRegion}`}`
  const name = key.name === '' ? html`<span class="hint">(no name)</span>` : key.name
  return html`<tr><th scope="row"><a href="${view.base}/${encodeURIComponent(key.id)}">${name}<span class="visually-hidden">, key ending in ${key.hint}</span></a></th><td><code class="id">…${key.hint}</code></td><td>${when(key.createdAt)}</td><td>${used}</td><td>${expiryCell(key, state)}</td><td>${scopeText(key)}</td><td>${BADGE[state]}</td>${live && view.csrf !== null ? actions(view, key, state, label) : ''}</tr>`
}

function table(view: ListView, caption: string, keys: readonly (readonly [ApiKeyInfo, KeyState])[], shared: ReadonlySet<string>, live: boolean): Html {
  const acting = live && view.csrf !== null
  return wide(
    caption,
    html`<table class="keys">
<caption>${caption}</caption>
<thead><tr><th scope="col">Name</th><th scope="col">Key</th><th scope="col">Created</th><th scope="col">Last used</th><th scope="col">Expires</th><th scope="col">Scope</th><th scope="col">State</th>${acting ? html`<th scope="col">Actions</th>` : ''}</tr></thead>
<tbody>${keys.map(([k, state]) => row(view, k, state, shared, live))}</tbody>
</table>`,
  )
}

/** keyList: a page of the keys in use (active, then in their grace) or of the expired and revoked ones, newest first, with the filter and the pages. */
export function keyList(view: ListView): Html {
  const rank: Readonly<Record<KeyState, number>> = { active: 0, expiring: 1, expired: 2, revoked: 2 }
  const needle = view.filter.toLowerCase()
  const sorted = view.keys
    .map((k) => [k, keyState(k, view.nowMs)] as const)
    .sort(([a, sa], [b, sb]) => rank[sa] - rank[sb] || (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0))
  const live = sorted.filter(([, s]) => s === 'active' || s === 'expiring')
  const old = sorted.filter(([, s]) => s === 'expired' || s === 'revoked')
  // Names told apart among every live key, not only this page's: a label names one key wherever it is shown.
  const shared = sharedNames(live.map(([k]) => k))
  const chosen = (view.show === 'live' ? live : old).filter(
    ([k]) => needle === '' || k.name.toLowerCase().includes(needle) || k.hint.toLowerCase().includes(needle),
  )
  const pages = Math.max(1, Math.ceil(chosen.length / KEYS_PER_PAGE))
  const page = Math.min(view.page, pages)
  const shown = chosen.slice((page - 1) * KEYS_PER_PAGE, page * KEYS_PER_PAGE)
  const link = (show: 'live' | 'old', p: number, words: string, rel = '') => {
    const query = new URLSearchParams({
      ...(show === 'old' ? { show } : {}),
      ...(p > 1 ? { page: String(p) } : {}),
      ...(view.filter === '' ? {} : { filter: view.filter }),
    }).toString()
    return html`<a href="${view.base}${query === '' ? '' : `?${query}`}"${rel === '' ? '' : html` rel="${rel}"`}>${words}</a>`
  }
  const range = pages === 1 ? '' : `, ${(page - 1) * KEYS_PER_PAGE + 1} to ${(page - 1) * KEYS_PER_PAGE + shown.length}`
  const caption = `${view.show === 'live' ? 'Keys in use' : 'Expired and revoked keys'}${view.filter === '' ? '' : ` matching “${view.filter}”`} (${chosen.length})${range}`
  return html`<form method="get" action="${view.base}" class="row" role="search">
${view.show === 'old' ? html`<input type="hidden" name="show" value="old">` : ''}
<div><label for="key-filter">Find keys by name</label><input id="key-filter" name="filter" type="search" value="${view.filter}" maxlength="200"></div>
<button type="submit" class="secondary">Find keys</button>
</form>
${view.show === 'old' ? html`<p>${link('live', 1, 'Back to the keys in use')}</p>` : ''}
${
  shown.length === 0
    ? html`<p>${view.filter !== '' ? 'No key matches.' : view.show === 'live' ? 'This account has no key in use.' : 'No key has expired or been revoked.'}</p>`
    : table(view, caption, shown, shared, view.show === 'live')
}
${
  view.show === 'live' && view.filter === '' && page === 1 && old.length > 0
    ? html`<details${live.length === 0 ? html` open` : ''}><summary>Expired and revoked keys (${old.length})</summary>
${table(view, `Expired and revoked keys${old.length > KEYS_PER_PAGE ? `, the ${KEYS_PER_PAGE} newest` : ''}`, old.slice(0, KEYS_PER_PAGE), shared, false)}
${old.length > KEYS_PER_PAGE ? html`<p>${link('old', 1, `All ${old.length} expired and revoked keys`)}</p>` : ''}
</details>`
    : ''
}
${
  pages > 1
    ? html`<nav aria-label="Pages of keys"><ul class="menu">
${page > 1 ? html`<li>${link(view.show, page - 1, 'Newer keys', 'prev')}</li>` : ''}
<li>Page ${page} of ${pages}</li>
${page < pages ? html`<li>${link(view.show, page + 1, 'Older keys', 'next')}</li>` : ''}
</ul></nav>`
    : ''
}`
}

export interface CreateValues {
  readonly name: string
  readonly expires: string
  readonly date: string
  readonly groups: readonly string[]
  readonly regions: readonly string[]
}

export const EMPTY_FORM: CreateValues = { name: '', expires: 'never', date: '', groups: [], regions: [] }

/** Problem: what is wrong with a field of the create form ('name', 'expires' or 'scope'). */
export interface Problem {
  readonly field: string
  readonly text: string
}

const invalid = (problem: Problem | null, field: string, hint?: string) => {
  const ids = [hint ?? '', problem?.field === field ? `key-${field}-error` : ''].filter(Boolean).join(' ')
  return html`${ids === '' ? '' : html` aria-describedby="${ids}"`}${problem?.field === field ? html` aria-invalid="true"` : ''}`
}
const fieldError = (problem: Problem | null, field: string) =>
  problem?.field === field ? html`<p class="error" id="key-${field}-error">${problem.text}</p>` : ''

function checkboxes(legend: string, name: string, values: readonly (readonly [string, string])[], checked: readonly string[], problem: Problem | null): Html {
  return html`<fieldset${problem?.field === 'scope' ? html` aria-describedby="key-scope-error"` : ''}><legend>${legend}</legend><div class="choices">${values.map(
    ([value, words]) =>
      html`<div><input type="checkbox" id="key-${name}-${value}" name="${name}" value="${value}"${checked.includes(value) ? html` checked` : ''}><label for="key-${name}-${value}">${words}</label></div>`,
  )}</div></fieldset>`
}

/** createForm: the form that creates a key, filled with `values`, with `problem` shown at its field. */
export function createForm(base: string, csrf: Html, values: CreateValues, problem: Problem | null, minDate: string): Html {
  return html`<h2 id="create">Create a key</h2>
<form method="post" action="${base}" novalidate>
${csrf}
<label for="key-name">Key name</label>
<p class="hint" id="key-name-hint">To tell your keys apart, such as ci-deploy; at most 200 characters.</p>
${fieldError(problem, 'name')}
<input id="key-name" name="name" type="text" required maxlength="200" autocomplete="off" value="${values.name}"${invalid(problem, 'name', 'key-name-hint')}>
<label for="key-expires">Expires</label>
${fieldError(problem, 'expires')}
<select id="key-expires" name="expires"${invalid(problem, 'expires')}>${EXPIRIES.map(([v, words]) => html`<option value="${v}"${v === values.expires ? html` selected` : ''}>${words}</option>`)}</select>
<label for="key-date">Expiry date (with “On the date below”)</label>
<p class="hint" id="key-date-hint">The key stops working at the start of that day (00:00 UTC).</p>
<input id="key-date" name="date" type="date" min="${minDate}" value="${values.date}"${invalid(problem, 'expires', 'key-date-hint')}>
${fieldError(problem, 'scope')}
${checkboxes(
  'API groups it may call (none checked: all)',
  'groups',
  GROUPS.map((g) => [g, GROUP_NAMES[g]] as const),
  values.groups,
  problem,
)}
${checkboxes(
  'Regions it may call (none checked: all)',
  'regions',
  REGIONS.map((r) => [r, r] as const),
  values.regions,
  problem,
)}
<button type="submit">Create key</button>
</form>`
}

/** shownOnce: the body of the page that shows a new key, the only time it is ever shown. */
export function shownOnce(keysPath: string, key: ApiKeyInfo, apiKey: string, old: ApiKeyInfo | null): Html {
  const oldWords =
    old === null
      ? ''
      : old.revokedAt !== null
        ? html`<p>The old key (ending in ${old.hint}) stopped working at once.</p>`
        : html`<p>The old key (ending in ${old.hint}) keeps working until ${when(old.expiresAt)}, then stops: move your clients to the new key before then.</p>`
  return html`<p role="status" class="notice">${old === null ? 'Key' : 'The new key'} ${keyLabel(key)} is ready.</p>
${oldWords}
<p><strong>Copy it now: it will not be shown again.</strong> We keep only a fingerprint of it; if it is lost, roll the key to get a new one.</p>
<p class="secret" id="new-key">${apiKey}</p>
<p><button type="button" data-copy="new-key" hidden>Copy key</button> <span role="status" id="new-key-status"></span></p>
<p>Send it in the <code>x-api-key</code> header of each call.</p>
<p><a href="${keysPath}">Back to the keys</a></p>`
}

/** keyDetails: everything known of one key, and what may be done with it (`acting`: the caller may roll and revoke). */
export function keyDetails(
  keysPath: string,
  key: ApiKeyInfo,
  nowMs: number,
  acting: boolean,
  related: { from: ApiKeyInfo | null; to: ApiKeyInfo | null },
): Html {
  const state = keyState(key, nowMs)
  const path = `${keysPath}/${encodeURIComponent(key.id)}`
  const link = (k: ApiKeyInfo) => html`<a href="${keysPath}/${encodeURIComponent(k.id)}">${fullLabel(k)}</a>`
  const used = key.lastUsedAt === null ? 'never' : html`${when(key.lastUsedAt)}${key.lastUsedRegion === null ? '' : ` in ${key.lastUsedRegion}`}`
  return html`<dl class="facts">
<dt>State</dt><dd>${BADGE[state]}</dd>
<dt>Name</dt><dd>${key.name === '' ? html`<span class="hint">(no name)</span>` : key.name}</dd>
<dt>Key</dt><dd><code class="id">…${key.hint}</code> <span class="hint">(its last characters: the key itself was shown once)</span></dd>
<dt>ID</dt><dd><code class="id">${key.id}</code></dd>
<dt>Created</dt><dd>${when(key.createdAt)}</dd>
<dt>Last used</dt><dd>${used}</dd>
<dt>${state === 'revoked' ? 'Revoked' : state === 'expiring' ? 'Grace ends' : 'Expires'}</dt><dd>${state === 'revoked' ? when(key.revokedAt) : when(key.expiresAt)}</dd>
<dt>Scope</dt><dd>${scopeText(key)}</dd>
${
  related.to !== null
    ? html`<dt>Rolled to</dt><dd>${link(related.to)}</dd>`
    : key.rolledTo === null
      ? ''
      : html`<dt>Rolled to</dt><dd><code class="id">${key.rolledTo}</code> <span class="hint">(ended, and no longer kept: an account keeps its most recently ended keys)</span></dd>`
}
${related.from === null ? '' : html`<dt>Rolled from</dt><dd>${link(related.from)}</dd>`}
</dl>
${
  !acting || state === 'revoked' || state === 'expired'
    ? ''
    : html`<h2>Actions</h2><ul class="menu">
${state === 'active' ? html`<li><a href="${path}/roll">Roll key ${fullLabel(key)}</a></li>` : ''}
<li><a href="${path}/revoke" class="danger">Revoke key ${fullLabel(key)}</a></li>
</ul>`
}
<p><a href="${keysPath}">Back to the keys</a></p>`
}

/**
 * confirmRoll: the question asked before a key is rolled, with the grace its old key keeps (`grace`: the one chosen;
 * `ending`: the key in its grace that stops now).
 */
export function confirmRoll(
  path: string,
  csrf: Html,
  label: string,
  keysPath: string,
  grace: number = DEFAULT_ROLL_GRACE_SECONDS,
  ending: string | null = null,
): Html {
  return html`<p>Roll key ${label}? A new key is made and shown once; the old key keeps working for the grace you choose, then stops, so that your clients can move to the new one.</p>
${graceEnds(ending)}
<form method="post" action="${path}">
${csrf}
<input type="hidden" name="confirm" value="1">
<label for="grace">Grace for the old key</label>
<select id="grace" name="grace">${GRACES.map(([s, words]) => html`<option value="${s}"${s === grace ? html` selected` : ''}>${words}</option>`)}</select>
<div class="row"><button type="submit">Roll key ${label}</button> <a href="${keysPath}">Keep it: back to the keys</a></div>
</form>`
}

/** confirmRevoke: the question asked before a key is revoked (`ending`: the key in its grace that stops with it). */
export function confirmRevoke(path: string, csrf: Html, label: string, keysPath: string, ending: string | null = null): Html {
  return html`<p>Revoke key ${label}? Calls with it will get 403 at once. This cannot be undone.</p>
${graceEnds(ending)}
<form method="post" action="${path}" class="row">
${csrf}
<input type="hidden" name="confirm" value="1">
<button type="submit" class="danger">Revoke key ${label}</button>
<a href="${keysPath}">Keep it: back to the keys</a>
</form>`
}
