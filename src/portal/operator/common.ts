/**
 * What the operator pages share: the form check of their posts, their navigation, notices,
 * cursor links and dates. (Their role check is the route hook operator.ts puts on every one of them.)
 */
import type { FastifyReply, FastifyRequest } from 'fastify'
import { html, type Html } from '../web/html.ts'
import type { Current, Kit } from '../web/kit.ts'
import { caller, formExpired, formOk, sendPage } from '../web/kit.ts'
import { CursorError } from '../../domain/errors.ts'
import type { Group } from '../../domain/regions.ts'

/**
 * operatorForm: the operator (let through by the operator pages' route hook) of a form post that
 * must also be genuine, or null once a 403 is sent (nothing done).
 */
export function operatorForm(kit: Kit, request: FastifyRequest, reply: FastifyReply, back: string): Current | null {
  const current = caller(request)
  if (!formOk(kit, request, current)) {
    formExpired(kit, reply, current, back)
    return null
  }
  return current
}

export type OperatorPage = 'summary' | 'accounts' | 'sign-ups' | 'subscriptions' | 'audit' | 'sso'

const PAGES: readonly (readonly [OperatorPage, string, string])[] = [
  ['summary', '/portal/operator', 'Summary'],
  ['accounts', '/portal/operator/accounts', 'Accounts'],
  ['sign-ups', '/portal/operator/sign-ups', 'Sign-ups'],
  ['subscriptions', '/portal/operator/subscriptions', 'Subscription requests'],
  ['audit', '/portal/operator/audit', 'Audit'],
  ['sso', '/portal/operator/sso', 'Single sign-on'],
]

/** operatorNav: the links between the operator pages, this one marked. */
export function operatorNav(here: OperatorPage | null): Html {
  return html`<nav aria-label="Operator pages"><ul class="tabs">${PAGES.map(
    ([slug, href, label]) => html`<li><a href="${href}"${slug === here ? html` aria-current="page"` : ''}>${label}</a></li>`,
  )}</ul></nav>`
}

/** sendOperatorPage sends an operator page, with the operator navigation above its body. */
export function sendOperatorPage(
  kit: Kit,
  reply: FastifyReply,
  current: Current,
  here: OperatorPage | null,
  title: string,
  body: Html,
  status = 200,
): FastifyReply {
  return sendPage(kit, reply, { title, current, status, body: html`${operatorNav(here)}${body}` })
}

/** The words of each change's notice, by the `done` the post redirects with (never text from the address). */
const NOTICES: Readonly<Record<string, string>> = {
  suspended: 'The account is suspended: its keys are refused until it is reactivated.',
  reactivated: 'The account is active again.',
  'plan-set': "The account's plan is saved.",
  'plan-reset': 'The account is back on the default plan.',
  approved: 'The subscription is approved and active.',
  refused: 'The subscription request is refused.',
  'user-approved': 'The sign-up is approved; we are emailing them that they can sign in.',
  'user-refused': 'The sign-up is refused; that user cannot sign in.',
  unlocked: "The user's lockout is cleared: their next right code is taken.",
  'factors-deleted': "The user's factors and recovery codes are deleted: their codes no longer work.",
}

/** notice: the status line of a page reached after a change (nothing for an unknown `done`). */
export function notice(request: FastifyRequest): Html | '' {
  const done = (request.query as { done?: unknown }).done
  const text = typeof done === 'string' ? NOTICES[done] : undefined
  return text === undefined ? '' : html`<p class="notice" role="status">${text}</p>`
}

/** alert: a problem, announced. */
export const alert = (text: string): Html => html`<p class="error" role="alert">${text}</p>`

/** query: a query string's text parameter, trimmed and bounded ('' when missing). */
export function query(request: FastifyRequest, name: string, max = 200): string {
  const value = (request.query as Record<string, unknown>)[name]
  return typeof value === 'string' ? value.trim().slice(0, max) : ''
}

/** nextLink: the link to a list's next page, keeping its filters. */
export function nextLink(path: string, next: string | null, filters: Record<string, string>, label: string): Html | '' {
  if (next === null) return ''
  const params = new URLSearchParams({ ...Object.fromEntries(Object.entries(filters).filter(([, v]) => v !== '')), after: next })
  return html`<p><a href="${path}?${params.toString()}" rel="next">${label}</a></p>`
}

/** listed runs a list query, or answers 400 for a cursor the store did not give out (null then). */
export async function listed<T>(kit: Kit, reply: FastifyReply, current: Current, here: OperatorPage, title: string, read: () => Promise<T>): Promise<T | null> {
  try {
    return await read()
  } catch (error) {
    if (!(error instanceof CursorError)) throw error
    await sendOperatorPage(
      kit,
      reply,
      current,
      here,
      title,
      html`${alert('That page link is not valid (a malformed cursor).')}<p><a href="/portal/operator/${here === 'summary' ? '' : here}">Start from the first page</a></p>`,
      400,
    )
    return null
  }
}

export const GROUP_NAMES: Readonly<Record<Group, string>> = { totp: 'TOTP', converter: 'Converter' }

/** when: a stored time as people read it, in UTC, in a <time> element. */
export function when(isoTime: string | null): Html | string {
  if (isoTime === null) return ''
  return html`<time datetime="${isoTime}">${isoTime.slice(0, 16).replace('T', ' ')} UTC</time>`
}

/** Rows per page of the operator lists. */
export const PAGE_SIZE = 50
