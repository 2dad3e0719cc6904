/**
 * The portal's kit: what every page module of the portal is given (the services it calls,
 * and the few request helpers every page needs: who is signed in, may they see this
 * account, is this form genuine, send a page). Page modules are plain Fastify plugins
 * registered by plugin.ts with `(scope, kit)`: they never open anything themselves.
 *
 * Each route says what it needs of its caller in its options (`pageRoute(kit, 'developer')`:
 * a route hook), and its handler reads the caller the hook let through (`caller`, `whoIn`);
 * no handler checks a role itself.
 *
 * Roles, from least to most: viewer (reads), developer (keys, subscriptions), admin (the
 * team, but not its owners), owner. Operators (a user flag set with the CLI) act as owners
 * of every account.
 */
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Config } from '../../config/config.ts'
import type { Pepper } from '../../crypto/keyed.ts'
import type { Accounts } from '../../services/accounts.ts'
import type { Factors } from '../../services/factors.ts'
import type { Context, Failure } from '../../services/outcome.ts'
import type { Team } from '../../services/team.ts'
import type { Webhooks } from '../../services/webhooks.ts'
import type { Jobs } from '../../services/jobs.ts'
import type { Mailer } from '../../mail/mailer.ts'
import type { Membership, Role, Session, User } from '../../domain/portal.ts'
import type { Account } from '../../domain/accounts.ts'
import { groupServedIn, type Region } from '../../domain/regions.ts'
import type { Passwords } from '../../services/users/passwords.ts'
import type { SignInThrottle } from '../../services/users/throttle.ts'
import type { Users } from '../../services/users.ts'
import { html, page, type Html } from './html.ts'
import { checkCsrf, cookieName, csrfToken, isToken, newSessionToken, PRESESSION_COOKIE, readCookie, sameOrigin, sessionIdHash, setCookie } from './session.ts'
import type { Metrics } from '../../metrics/metrics.ts'
import { accountPath } from './labels.ts'

export interface Kit {
  readonly config: Config
  readonly accounts: Accounts
  readonly factors: Factors
  readonly webhooks: Webhooks
  /** Conversion jobs: the account's jobs, their results, cancelling (there are none where the conversion group is not served). */
  readonly jobs: Jobs
  /** Members and invitations (built by plugin.ts, over the portal's store). */
  readonly team: Team
  readonly mailer: Mailer
  readonly passwords: Passwords
  readonly throttle: SignInThrottle
  /** The users service: sign-up, sign-in, sessions, two-factor, approvals. */
  readonly users: Users
  readonly pepper: Pepper
  readonly now: () => number
  /** The session cookie's name (with `__Host-` behind HTTPS). */
  readonly sessionCookie: string
  readonly sessionTtlMs: number
  /** Sign-ins by outcome and sign-ups, for the metrics. */
  readonly metrics: Pick<Metrics, 'signIn' | 'signUp'>
}

/**
 * LANDING: where a sign-in leads when it was not sent from a page: the account's overview for
 * a user with one account, the list of accounts otherwise (home.ts decides).
 */
export const LANDING = '/portal/'

/** Current: the signed-in user of a request, their session and its token. */
export interface Current {
  readonly session: Session
  readonly user: User
  readonly token: string
  /**
   * An operator signed in with a password while SSO_OPERATORS_REQUIRED is set: `user.operator`
   * reads false for this session (a member's view everywhere), and the operator pages say why.
   */
  readonly operatorNeedsSso?: true
}

/** An account page's subject: the account, and the role the signed-in user has in it. */
export interface InAccount extends Current {
  readonly account: Account
  readonly role: Role
  /** Every account the user belongs to (oldest membership first): the account switcher's entries. */
  readonly memberships: readonly Membership[]
}

const RANK: Readonly<Record<Role, number>> = { viewer: 0, developer: 1, admin: 2, owner: 3 }

/** atLeast: `role` may do what `needed` may. */
export function atLeast(role: Role, needed: Role): boolean {
  return RANK[role] >= RANK[needed]
}

/** The accounts layer's context for a portal user's change. */
export function actorOf(current: Current, request: FastifyRequest): Context {
  return { actor: { type: 'portal-user', id: current.user.id }, ip: request.ip }
}

/** sessionOf: the signed-in user of a request, or null (no cookie, unknown, expired, disabled, or a second factor still due). */
export async function sessionOf(kit: Kit, request: FastifyRequest, options: { pendingToo?: boolean } = {}): Promise<Current | null> {
  const token = readCookie(request.headers.cookie, kit.sessionCookie)
  if (token === null || !isToken(token)) return null
  const found = await kit.users.sessions.find(token, options)
  if (found === null) return null
  if (found.user.operator && kit.config.ssoOperatorsRequired && !(await kit.users.sso.operatorSession(found)))
    return { ...found, user: { ...found.user, operator: false }, token, operatorNeedsSso: true }
  return { ...found, token }
}

/** signedIn: the signed-in user, or null after redirecting to sign-in (which brings them back here). */
async function signedIn(kit: Kit, request: FastifyRequest, reply: FastifyReply): Promise<Current | null> {
  const current = await sessionOf(kit, request)
  if (current === null) {
    const back = request.method === 'GET' ? `?next=${encodeURIComponent(request.url.split('?')[0]!)}` : ''
    await reply.redirect(`/portal/sign-in${back}`, 303)
  }
  return current
}

/**
 * inAccount: the signed-in user and the account of the `:accountId` in the path, when they
 * may act in it with at least `needed`; otherwise the answer is sent (sign-in, or a 404 that
 * does not tell an account someone else's from one that does not exist, or 403 for a member
 * whose role is short) and null returned.
 */
async function inAccount(kit: Kit, request: FastifyRequest, reply: FastifyReply, needed: Role): Promise<InAccount | null> {
  const current = await signedIn(kit, request, reply)
  if (current === null) return null
  const accountId = (request.params as { accountId?: string }).accountId ?? ''
  const memberships = await kit.users.sessions.membershipsOf(current.user.id)
  const membership = await membershipIn(kit, current.user, accountId, memberships)
  const account = membership === null ? null : await kit.accounts.getAccount(accountId)
  if (membership === null || account === null) {
    await notFound(kit, reply, current)
    return null
  }
  if (!atLeast(membership.role, needed)) {
    await sendPage(kit, reply, {
      title: 'Not allowed',
      current,
      status: 403,
      body: html`<p role="alert">Your role in ${account.name} (${membership.role}) does not allow this. An owner or admin of the account can change it.</p>`,
    })
    return null
  }
  return { ...current, account, role: membership.role, memberships }
}

/** What a route asks of its caller: to be signed in, to be an operator, or a role (at least) in the account of the path. */
export type Requirement = 'signed-in' | 'operator' | Role

/**
 * The caller each route hook let through, for its handler. A WeakMap rather than a request
 * decoration: no Fastify type is widened for every plugin, and the entry goes with the request.
 */
const CALLERS = new WeakMap<FastifyRequest, Current>()

/**
 * needs: the route hook (a preHandler, run after the body is parsed, as the inline checks were)
 * that checks a route's requirement and answers when it fails, exactly as the page would have:
 * sign-in (which brings a GET back), a 404 for an account not one's own or an operator page to
 * anyone else, a 403 for a member whose role is short. The handler reads the caller with
 * `caller` or `whoIn`. Form checks (CSRF, origin) stay in the handlers, after this one.
 */
export function needs(kit: Kit, requirement: Requirement): (request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply | undefined> {
  return async function roleCheck(request, reply) {
    const who =
      requirement === 'signed-in'
        ? await signedIn(kit, request, reply)
        : requirement === 'operator'
          ? await asOperator(kit, request, reply)
          : await inAccount(kit, request, reply, requirement)
    if (who === null) return reply
    CALLERS.set(request, who)
    return undefined
  }
}

/** pageRoute: a portal page's route options: hidden from the API documents, behind the route hook of its requirement. */
export function pageRoute(kit: Kit, requirement: Requirement): { schema: { hide: true }; preHandler: ReturnType<typeof needs> } {
  return { schema: { hide: true }, preHandler: needs(kit, requirement) }
}

/** caller: the signed-in user a route hook (`needs`) let through; a route without one is a programming error. */
export function caller(request: FastifyRequest): Current {
  const who = CALLERS.get(request)
  if (who === undefined) throw new Error(`portal route ${request.routeOptions.url} reads its caller without a role check`)
  return who
}

/** whoIn: the caller and their account and role, on a route whose hook asked for a role in the account of the path. */
export function whoIn(request: FastifyRequest): InAccount {
  const who = caller(request)
  if (!isInAccount(who)) throw new Error(`portal route ${request.routeOptions.url} reads an account without an account role check`)
  return who
}

const isInAccount = (who: Current): who is InAccount => 'account' in who && 'role' in who

/** asOperator: the signed-in operator, or null once the answer is sent (sign-in, or a 404 for everyone else). */
async function asOperator(kit: Kit, request: FastifyRequest, reply: FastifyReply): Promise<Current | null> {
  const current = await signedIn(kit, request, reply)
  if (current === null) return null
  if (current.operatorNeedsSso === true) {
    await sendPage(kit, reply, {
      title: 'Single sign-on needed',
      current,
      status: 403,
      body: html`<p role="alert">The operator pages open only in a session signed in through single sign-on (SSO_OPERATORS_REQUIRED). Sign out, then sign in with your provider.</p>`,
    })
    return null
  }
  if (!current.user.operator) {
    await notFound(kit, reply, current)
    return null
  }
  return current
}

/** membershipIn: the user's membership of an account, from their memberships; operators are owners of every account. */
async function membershipIn(
  kit: Kit,
  user: User,
  accountId: string,
  memberships: readonly Membership[],
): Promise<Pick<Membership, 'accountId' | 'role'> | null> {
  const own = memberships.find((m) => m.accountId === accountId)
  if (own !== undefined) return user.operator ? { accountId, role: 'owner' } : own
  if (user.operator && (await kit.accounts.getAccount(accountId)) !== null) return { accountId, role: 'owner' }
  return null
}

/** csrfField: the hidden field every form of a signed-in page carries. */
export function csrfField(kit: Kit, current: Current): Html {
  return html`<input type="hidden" name="_csrf" value="${csrfToken(kit.pepper, current.session.idHash)}">`
}

/** formOk: a form post came from this site and carries its session's CSRF token. */
export function formOk(kit: Kit, request: FastifyRequest, current: Current): boolean {
  const body = (request.body ?? {}) as Record<string, unknown>
  return sameOrigin(request.headers, originsOf(kit, request)) && checkCsrf(kit.pepper, current.session.idHash, body._csrf)
}

/**
 * preSession: the pre-session of the signed-out forms (sign-in, sign-up, links from emails),
 * made when missing: what their CSRF token is bound to.
 */
export function preSession(kit: Kit, request: FastifyRequest, reply: FastifyReply): string {
  const secure = kit.config.portalSecureCookies
  const existing = readCookie(request.headers.cookie, cookieName(PRESESSION_COOKIE, secure))
  if (existing !== null && isToken(existing)) return existing
  const { token } = newSessionToken()
  reply.header('set-cookie', setCookie(PRESESSION_COOKIE, token, secure, 3600))
  return token
}

/** preSessionCsrf: the CSRF token of a signed-out form (making the pre-session when missing). */
export function preSessionCsrf(kit: Kit, request: FastifyRequest, reply: FastifyReply): string {
  return csrfToken(kit.pepper, sessionIdHash(preSession(kit, request, reply)))
}

/** signedOutFormOk: a signed-out form came from this site with the CSRF token of its pre-session. */
export function signedOutFormOk(kit: Kit, request: FastifyRequest): boolean {
  const pre = readCookie(request.headers.cookie, cookieName(PRESESSION_COOKIE, kit.config.portalSecureCookies))
  const body = (request.body ?? {}) as Record<string, unknown>
  return sameOrigin(request.headers, originsOf(kit, request)) && pre !== null && isToken(pre) && checkCsrf(kit.pepper, sessionIdHash(pre), body._csrf)
}

/** The origins a form may come from: the public URL's, and the one this request was sent to. */
export function originsOf(kit: Kit, request: FastifyRequest): string[] {
  return [new URL(kit.config.publicBaseUrl).origin, `${request.protocol}://${request.host}`]
}

/** formField: a form's text field, trimmed ('' when missing or not text). */
export function formField(request: FastifyRequest, name: string): string {
  const value = ((request.body ?? {}) as Record<string, unknown>)[name]
  return typeof value === 'string' ? value.trim() : ''
}

export interface SendOptions {
  readonly title: string
  readonly body: Html
  readonly status?: number
  readonly current?: Current | null
  /** An account page: the account's navigation is shown, with this page marked. */
  readonly account?: { readonly id: string; readonly name: string; readonly here: AccountPage } | null
}

export type AccountPage = 'overview' | 'start' | 'keys' | 'subscriptions' | 'usage' | 'jobs' | 'audit' | 'team' | 'webhooks' | 'factor-settings'

/** servesJobs: whether a node of `region` has conversion jobs (and so the jobs page): where the conversion group is served. */
export const servesJobs = (region: Region): boolean => groupServedIn('converter', region)

const ACCOUNT_PAGES: readonly (readonly [AccountPage, string])[] = [
  ['overview', 'Overview'],
  ['start', 'Getting started'],
  ['keys', 'Keys'],
  ['subscriptions', 'Subscriptions'],
  ['usage', 'Usage'],
  ['jobs', 'Jobs'],
  ['team', 'Team'],
  ['webhooks', 'Webhooks'],
  ['factor-settings', 'Factor settings'],
  ['audit', 'Audit'],
]

/** accountBadge: the badge of an account's status, in the colours every state has on every page. */
export const accountBadge = (status: Account['status']): Html => STATUS_BADGE[status]

const STATUS_BADGE: Readonly<Record<Account['status'], Html>> = {
  active: html`<span class="badge ok">active</span>`,
  suspended: html`<span class="badge bad">suspended</span>`,
}

/**
 * accountNav: the account's bar (its name, its status when not active, the user's role, and a
 * switcher to the user's other accounts) and the links between its pages. The switcher is a
 * `<details>`: it opens without a script, and leads to each account's overview (a page the
 * user's role there always allows).
 */
function accountNav(account: NonNullable<SendOptions['account']>, current: Current | null, region: Region): Html {
  const id = encodeURIComponent(account.id)
  const pages = servesJobs(region) ? ACCOUNT_PAGES : ACCOUNT_PAGES.filter(([slug]) => slug !== 'jobs')
  const who = current !== null && isInAccount(current) && current.account.id === account.id ? current : null
  const others = who === null ? [] : who.memberships.filter((m) => m.accountId !== account.id)
  return html`<div class="account-bar">
<p class="account-name"><span class="eyebrow">Account</span> <strong>${account.name}</strong>${who === null || who.account.status === 'active' ? '' : html` ${accountBadge(who.account.status)}`}${who === null ? '' : html` <span class="hint">your role: ${who.role}</span>`}</p>
${
  others.length === 0
    ? ''
    : html`<details class="switcher"><summary>Switch account</summary><ul>${others.map(
        (m) => html`<li><a href="${accountPath(m.accountId, 'overview')}">${m.accountName}</a></li>`,
      )}<li><a href="/portal/home">All your accounts</a></li></ul></details>`
}
</div>
<nav aria-label="${account.name}"><ul class="tabs">${pages.map(
    ([slug, label]) => html`<li><a href="/portal/accounts/${id}/${slug}"${slug === account.here ? html` aria-current="page"` : ''}>${label}</a></li>`,
  )}</ul></nav>`
}

/** sendPage sends a portal page (with the user's menu when signed in, the account's navigation on account pages). */
export function sendPage(kit: Kit, reply: FastifyReply, options: SendOptions): FastifyReply {
  const { title, body, status = 200, current = null, account = null } = options
  return reply
    .code(status)
    .type('text/html; charset=utf-8')
    .send(
      page({
        title,
        user: current === null ? null : { email: current.user.email, operator: current.user.operator, csrf: csrfToken(kit.pepper, current.session.idHash) },
        nav: account === null ? null : accountNav(account, current, kit.config.region),
        body,
      }),
    )
}

export function notFound(kit: Kit, reply: FastifyReply, current: Current | null = null): FastifyReply {
  return sendPage(kit, reply, {
    title: 'Page not found',
    status: 404,
    current,
    body: html`<p>There is no such page, or it is not yours to see. <a href="/portal">Back to the portal</a>.</p>`,
  })
}

/** formExpired: the answer to a form without its CSRF token or from another site (nothing done). */
export function formExpired(kit: Kit, reply: FastifyReply, current: Current | null, back: string): FastifyReply {
  return sendPage(kit, reply, {
    title: 'Form expired',
    status: 403,
    current,
    body: html`<p class="error" role="alert">This form has expired or did not come from this site; nothing was changed. <a href="${back}">Go back</a> and try again.</p>`,
  })
}

/**
 * refusedPage: a change a service turned down, told on a page of its own with the way back to
 * the account's page it came from (`back`: how that page is named, "the keys"). The status
 * says which refusal it was: no such thing 404, a conflict or a limit 409, bad input 422.
 */
export function refusedPage(
  kit: Kit,
  reply: FastifyReply,
  who: InAccount,
  options: { title: string; failure: Failure; here: AccountPage; back: string },
): FastifyReply {
  const { failure } = options
  const status = failure.failure === 'not_found' ? 404 : failure.failure === 'conflict' || failure.failure === 'limit' ? 409 : 422
  const path = accountPath(who.account.id, options.here)
  return sendPage(kit, reply, {
    title: options.title,
    current: who,
    status,
    account: { id: who.account.id, name: who.account.name, here: options.here },
    body: html`<p class="error" role="alert">Nothing was changed: ${failure.message}.</p><p><a href="${path}">Back to ${options.back}</a></p>`,
  })
}
