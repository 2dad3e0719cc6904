/**
 * An account's factor settings, for its owners and admins: the relying party its users'
 * passkeys are registered for (its ID, its name, the origins a browser may answer from) and
 * the attempt limits of its managed factors. The portal's door onto what the admin API
 * (`PATCH /admin/v1/accounts/{id}/factor-settings`) and the CLI (`factor-settings set`)
 * change: the factors service checks the values for every door alike and writes the
 * `factor-settings.update` event. One plain form: nothing here needs a script.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { html, type Html } from '../web/html.ts'
import type { InAccount, Kit } from '../web/kit.ts'
import { actorOf, csrfField, formExpired, formField, formOk, pageRoute, refusedPage, sendPage, whoIn } from '../web/kit.ts'
import { isFailure } from '../../services/outcome.ts'
import { FACTOR_SETTINGS_BOUNDS, type FactorSettings, type FactorSettingsPatch } from '../../domain/factors.ts'
import { accountPath, when } from '../web/labels.ts'

/** Styles of this page, added to the portal's one stylesheet. */
export const css = `
form.factor-settings { max-width: 36rem; }
form.factor-settings fieldset { display: grid; gap: .75rem; padding: .75rem 1rem 1rem; }
form.factor-settings legend { font-weight: 700; padding: 0 .25rem; }
form.factor-settings .field { display: grid; gap: .25rem; }
form.factor-settings .field p.error { margin: 0; }
form.factor-settings textarea { font: inherit; width: 100%; padding: .45rem .5rem; border: 1px solid var(--line); border-radius: 4px; color: var(--ink); background: #fff; }
form.factor-settings input.number { width: 10rem; }
`

/** The form's fields, named as the service names them (its refusals name one of these). */
const FIELDS = ['rpId', 'rpName', 'origins', 'userLimit', 'keyLimit', 'limitWindowSeconds'] as const
type Field = (typeof FIELDS)[number]

/** Values: the form's fields as typed, to fill it again after a refusal. */
type Values = Readonly<Record<Field, string>>

/** Problem: what is wrong, at which field (null: none of the form's). */
interface Problem {
  readonly field: Field | null
  readonly text: string
}

type LimitField = 'userLimit' | 'keyLimit' | 'limitWindowSeconds'

/** The limits, each with its words and the server setting an empty field falls back to. */
const LIMITS: readonly {
  field: LimitField
  label: string
  hint: string
  setting: string
  bounds: { min: number; max: number }
  serverDefault: (c: Kit['config']) => number
}[] = [
  {
    field: 'userLimit',
    label: 'Attempts per user',
    hint: 'Codes, recovery codes and passkey sign-ins one user may try in the window.',
    setting: 'FACTOR_USER_LIMIT',
    bounds: FACTOR_SETTINGS_BOUNDS.userLimit,
    serverDefault: (c) => c.factorUserLimit,
  },
  {
    field: 'keyLimit',
    label: 'Attempts per rate key',
    hint: "Attempts per rate key (which your backend sends with an attempt: the end user's IP address, say), across the account's users, in the window.",
    setting: 'FACTOR_KEY_LIMIT',
    bounds: FACTOR_SETTINGS_BOUNDS.keyLimit,
    serverDefault: (c) => c.factorKeyLimit,
  },
  {
    field: 'limitWindowSeconds',
    label: 'Window in seconds',
    hint: 'How long the window the attempts are counted in lasts.',
    setting: 'FACTOR_LIMIT_WINDOW_SECONDS',
    bounds: FACTOR_SETTINGS_BOUNDS.windowSeconds,
    serverDefault: (c) => c.factorLimitWindowSeconds,
  },
]

const number = (n: number) => n.toLocaleString('en-US')

/** here: the page's entry in the account's navigation. */
const here = (who: InAccount) => ({ id: who.account.id, name: who.account.name, here: 'factor-settings' as const })

/** valuesOf: the settings in force as the form shows them (an unset value: an empty field). */
function valuesOf(s: FactorSettings): Values {
  const text = (v: string | number | null) => (v === null ? '' : String(v))
  return {
    rpId: text(s.rpId),
    rpName: text(s.rpName),
    origins: s.origins.join('\n'),
    userLimit: text(s.userLimit),
    keyLimit: text(s.keyLimit),
    limitWindowSeconds: text(s.limitWindowSeconds),
  }
}

/**
 * patchOf: the settings the form asks for, every field (an empty one clears), or what is wrong
 * with a limit. The service takes numbers, so a limit that is not a whole number is told here.
 */
function patchOf(values: Values): FactorSettingsPatch | Problem {
  const limits: Partial<Record<LimitField, number | null>> = {}
  for (const { field, label, bounds } of LIMITS) {
    const text = values[field]
    const n = /^\d{1,9}$/.test(text) ? Number(text) : Number.NaN
    if (text !== '' && !(n >= bounds.min && n <= bounds.max)) {
      return { field, text: `${label} must be a whole number from ${number(bounds.min)} to ${number(bounds.max)}, or empty for the server's default.` }
    }
    limits[field] = text === '' ? null : n
  }
  return {
    rpId: values.rpId === '' ? null : values.rpId,
    rpName: values.rpName === '' ? null : values.rpName,
    origins: values.origins
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line !== ''),
    ...limits,
  }
}

/** inWords: the service's message with its field names as this page labels them ("origins need rpId"). */
function inWords(message: string, field: string | undefined): Problem {
  const named = (FIELDS as readonly string[]).includes(field ?? '') ? (field as Field) : null
  const text = message
    .replace(/^rpId\b/, 'The relying party ID')
    .replace(/\brpId$/, 'a relying party ID')
    .replace(/^rpName\b/, 'The relying party name')
    .replace(/^origins\b/, 'Origins')
  return { field: named, text: `${text}.` }
}

/** described: the control's hint, and its problem when the problem is its own. */
const described = (field: Field, problem: Problem | null): Html =>
  problem?.field === field ? html` aria-describedby="${field}-hint ${field}-error" aria-invalid="true"` : html` aria-describedby="${field}-hint"`

/** labelled: a field's label, hint, problem (when its own) and control, in that order. */
function labelled(field: Field, label: string, hint: Html | string, problem: Problem | null, control: Html): Html {
  return html`<div class="field"><label for="${field}">${label}</label>
<p class="hint" id="${field}-hint">${hint}</p>
${problem?.field === field ? html`<p class="error" id="${field}-error">${problem.text}</p>` : ''}
${control}</div>`
}

/** settingsForm: the one form, each field labelled and described by its hint (and its problem, when it has one). */
function settingsForm(config: Kit['config'], base: string, csrf: Html, values: Values, problem: Problem | null): Html {
  const text = (field: Field, extra: Html) =>
    html`<input id="${field}" name="${field}" type="text" autocomplete="off" value="${values[field]}"${extra}${described(field, problem)}>`
  return html`<form method="post" action="${base}" class="factor-settings" novalidate>${csrf}
<fieldset><legend>Passkeys</legend>
${labelled('rpId', 'Relying party ID', html`Your site's host name, such as <code>example.com</code>: lower case, no scheme, port or path. Empty: passkeys off.`, problem, text('rpId', html` maxlength="253" spellcheck="false"`))}
${labelled('rpName', 'Relying party name', 'The name authenticators show the user, such as your product; at most 64 characters. Empty: the ID.', problem, text('rpName', html` maxlength="64"`))}
${labelled(
  'origins',
  'Allowed origins',
  html`One origin per line, as a browser sends it: <code>https://example.com</code>, <code>https://app.example.com</code> (no path, no slash at the end); at most ${FACTOR_SETTINGS_BOUNDS.origins}.`,
  problem,
  html`<textarea id="origins" name="origins" rows="4" cols="40" spellcheck="false" autocomplete="off"${described('origins', problem)}>${values.origins}</textarea>`,
)}
</fieldset>
<fieldset><legend>Attempt limits</legend>
<p class="hint">Every attempt counts, right or wrong; past a limit, one more is refused until the window moves on. An empty field takes the server's default: its <code>FACTOR_USER_LIMIT</code>, <code>FACTOR_KEY_LIMIT</code> and <code>FACTOR_LIMIT_WINDOW_SECONDS</code> settings.</p>
${LIMITS.map(({ field, label, hint, setting, bounds, serverDefault }) =>
  labelled(
    field,
    label,
    html`${hint} From ${number(bounds.min)} to ${number(bounds.max)}; empty: the server's ${serverDefault(config) === 0 && field !== 'limitWindowSeconds' ? 'default, no limit' : number(serverDefault(config))} (<code>${setting}</code>).`,
    problem,
    text(field, html` class="number" inputmode="numeric" maxlength="9"`),
  ),
)}
</fieldset>
<p><button type="submit">Save the settings</button></p></form>`
}

/** passkeysState: whether passkeys work with the settings in force, and why not. */
function passkeysState(s: FactorSettings): Html {
  if (s.rpId !== null && s.origins.length > 0) {
    return html`<span class="badge ok">on</span> for ${s.rpId}, answered from ${s.origins.length === 1 ? 'one origin' : `${s.origins.length} origins`}.`
  }
  return html`<span class="badge off">off</span> until a relying party ID and an origin are set: until then the passkey routes answer 409 <code>PASSKEYS_NOT_CONFIGURED</code>.`
}

/** settingsPage sends the settings in force and the form that changes them (filled as typed after a problem). */
async function settingsPage(
  kit: Kit,
  reply: FastifyReply,
  who: InAccount,
  opts: { status?: number; values?: Values; problem?: Problem | null; notice?: Html | null } = {},
): Promise<FastifyReply> {
  const settings = await kit.factors.settings(who.account.id)
  if (isFailure(settings))
    return refusedPage(kit, reply, who, { title: 'Factor settings', failure: settings, here: 'factor-settings', back: 'the factor settings' })
  const problem = opts.problem ?? null
  return sendPage(kit, reply, {
    title: 'Factor settings',
    current: who,
    status: opts.status ?? 200,
    account: here(who),
    body: html`${opts.notice ?? ''}${problem === null ? '' : html`<p class="error" role="alert">The settings were not saved: ${problem.text}</p>`}
<p>Passkeys are registered for a relying party: your site, named by its host name. A browser offers a passkey only to pages served over <code>https</code> from that host or a subdomain of it (<code>http://localhost:PORT</code> while developing), and the service takes answers only from the origins listed here. The <a href="/docs#passkeyRegistrationOptions">API reference</a> shows the passkey routes.</p>
<p id="passkeys-state">Passkeys: ${passkeysState(settings)} Last changed: ${when(settings.updatedAt)}. Each change is in the <a href="${accountPath(who.account.id, 'audit')}">audit trail</a> as <code>factor-settings.update</code>.</p>
${settingsForm(kit.config, accountPath(who.account.id, 'factor-settings'), csrfField(kit, who), opts.values ?? valuesOf(settings), problem)}`,
  })
}

/** GET factor-settings: the settings in force and the form. */
async function showSettings(kit: Kit, request: FastifyRequest<{ Params: { accountId: string } }>, reply: FastifyReply): Promise<FastifyReply> {
  const saved = (request.query as { saved?: unknown }).saved === '1'
  return settingsPage(kit, reply, whoIn(request), saved ? { notice: html`<p class="notice" role="status">The settings are saved.</p>` } : {})
}

/** POST factor-settings: save the form's settings, every field; a refusal shows the form again at its field. */
async function saveSettings(kit: Kit, request: FastifyRequest<{ Params: { accountId: string } }>, reply: FastifyReply): Promise<FastifyReply> {
  const who = whoIn(request)
  const base = accountPath(who.account.id, 'factor-settings')
  if (!formOk(kit, request, who)) return formExpired(kit, reply, who, base)
  const values = Object.fromEntries(FIELDS.map((f) => [f, formField(request, f)])) as Values
  const patch = patchOf(values)
  if ('text' in patch) return settingsPage(kit, reply, who, { status: 422, values, problem: patch })
  const saved = await kit.factors.updateSettings(actorOf(who, request), who.account.id, patch)
  if (isFailure(saved)) {
    if (saved.failure !== 'invalid')
      return refusedPage(kit, reply, who, { title: 'Settings not saved', failure: saved, here: 'factor-settings', back: 'the factor settings' })
    return settingsPage(kit, reply, who, { status: 422, values, problem: inWords(saved.message, saved.field) })
  }
  return reply.redirect(`${base}?saved=1`, 303)
}

export default async function factorSettingsPages(app: FastifyInstance, kit: Kit): Promise<void> {
  app.get<{ Params: { accountId: string } }>('/accounts/:accountId/factor-settings', pageRoute(kit, 'admin'), (request, reply) =>
    showSettings(kit, request, reply),
  )

  app.post<{ Params: { accountId: string } }>('/accounts/:accountId/factor-settings', pageRoute(kit, 'admin'), (request, reply) =>
    saveSettings(kit, request, reply),
  )
}
