/**
 * The developer portal at /portal: server-rendered pages, usable without JavaScript, in an
 * encapsulated plugin with its own headers, body parser, HTML error pages and assets. The
 * API-key guard never runs here. Work in progress (issue 13): sign-in and sign-out with
 * server-side sessions; sign-up and the rest come next.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { parse as parseForm } from 'fast-querystring'
import { html, page, type Html } from './html.ts'
import { HTMX, PORTAL_CSS } from './assets.ts'
import type { Config } from '../config/config.ts'
import type { Pepper } from '../crypto/keyed.ts'
import type { Store } from '../storage/ports.ts'
import type { Session, User } from '../domain/portal.ts'
import { emailKey } from '../domain/portal.ts'
import { actorName } from '../domain/accounts.ts'
import { Passwords, PasswordsBusy } from './passwords.ts'
import {
  checkCsrf, cookieName, csrfToken, isToken, newSessionToken, PRESESSION_COOKIE, readCookie, sameOrigin, SESSION_COOKIE,
  sessionIdHash, setCookie,
} from './session.ts'

export interface PortalOptions {
  readonly config: Config
  readonly store: Store
  readonly pepper: Pepper
  readonly passwords: Passwords
  readonly now: () => number
}

/** Nothing but the node's own scripts, styles and images; forms post only here; no framing. */
export const PORTAL_CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

function headers(reply: FastifyReply): FastifyReply {
  return reply.headers({
    'content-security-policy': PORTAL_CSP,
    'x-content-type-options': 'nosniff',
    'x-frame-options': 'DENY',
    'referrer-policy': 'same-origin',
    'cross-origin-opener-policy': 'same-origin',
    'cache-control': 'no-store',
  })
}

const signInForm = (csrf: string, email = '', error: string | null = null) => html`
${error === null ? '' : html`<p class="error" role="alert">${error}</p>`}
<form method="post" action="/portal/sign-in">
<input type="hidden" name="_csrf" value="${csrf}">
<label for="email">Email</label>
<input id="email" name="email" type="email" autocomplete="username" required value="${email}">
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required>
<button type="submit">Sign in</button>
</form>
<p>No account yet? <a href="/portal/sign-up">Sign up</a>. <a href="/portal/reset">Forgot your password?</a></p>`

const signUpForm = () => html`
<form method="post" action="/portal/sign-up">
<label for="email">Email</label>
<input id="email" name="email" type="email" autocomplete="email" required>
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="new-password" minlength="12" required aria-describedby="password-rule">
<p id="password-rule">At least 12 characters.</p>
<button type="submit">Create account</button>
</form>
<p>Already have an account? <a href="/portal/sign-in">Sign in</a>.</p>`

/** The longest form the portal takes: a sign-in with a 1 024-character password, escaped, fits. */
const FORM_LIMIT = 16_384

/** portal: register with `{ prefix: '/portal' }` (its not-found page covers that prefix only). */
export default async function portal(app: FastifyInstance, opts: PortalOptions): Promise<void> {
  const { config, store, pepper, passwords, now } = opts
  const secure = config.portalSecureCookies
  const ttlMs = config.sessionTtlHours * 3_600_000
  const sessionCookie = cookieName(SESSION_COOKIE, secure)
  const formCookie = cookieName(PRESESSION_COOKIE, secure)

  app.addHook('onRequest', async (_request, reply) => { headers(reply) })
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: FORM_LIMIT }, (_request, body, done) => {
    done(null, parseForm(body as string))
  })
  const html404 = (reply: FastifyReply) =>
    reply.code(404).type('text/html; charset=utf-8').send(page({ title: 'Page not found', body: html`<p>There is no such page. <a href="/portal">Back to the portal</a>.</p>` }))
  app.setNotFoundHandler(async (_request, reply) => html404(reply))
  app.setErrorHandler(async (error: Error & { statusCode?: number }, request, reply) => {
    const status = error instanceof PasswordsBusy ? 503 : (error.statusCode ?? 500) < 500 ? error.statusCode! : 500
    if (status >= 500) request.log.error({ err: error }, 'portal page failed')
    if (status === 503) reply.header('retry-after', '5')
    const message = status === 503 ? 'Too many sign-ins at once. Try again in a few seconds.' : status >= 500 ? `Something went wrong on our side (request ${request.id}).` : 'That request could not be read.'
    return reply.code(status).type('text/html; charset=utf-8').send(page({ title: status >= 500 ? 'Sorry' : 'Bad request', body: html`<p>${message}</p>` }))
  })

  const publicOrigin = new URL(config.publicBaseUrl).origin
  /** The origins a form may come from: the public URL's, and the one this request was sent to. */
  const originsOf = (request: FastifyRequest) => [publicOrigin, `${request.protocol}://${request.host}`]

  /** The session of a request's cookie, or null (unknown, expired, or not a token at all). */
  async function sessionOf(request: FastifyRequest): Promise<{ session: Session; user: User; token: string } | null> {
    const token = readCookie(request.headers.cookie, sessionCookie)
    if (token === null || !isToken(token)) return null
    const found = await store.portal.findSession(sessionIdHash(token), new Date(now()).toISOString())
    if (found === null || found.user.status !== 'active' || found.session.twoFactorPending) return null
    // Sliding expiry, written at most once a minute per session.
    if (now() - Date.parse(found.session.lastSeenAt) > 60_000) {
      await store.portal.touchSession(found.session.idHash, new Date(now()).toISOString(), new Date(now() + ttlMs).toISOString())
    }
    return { ...found, token }
  }

  /** The pre-session of the sign-in form (made when missing): what its CSRF token is bound to. */
  function formToken(request: FastifyRequest, reply: FastifyReply): string {
    const existing = readCookie(request.headers.cookie, formCookie)
    if (existing !== null && isToken(existing)) return existing
    const { token } = newSessionToken()
    reply.header('set-cookie', setCookie(PRESESSION_COOKIE, token, secure, 3600))
    return token
  }

  const send = (reply: FastifyReply, title: string, body: Html, status = 200, user: string | null = null) =>
    reply.code(status).type('text/html; charset=utf-8').send(page({ title, body, user }))

  app.get('/', { schema: { hide: true } }, async (request, reply) =>
    reply.redirect((await sessionOf(request)) === null ? '/portal/sign-in' : '/portal/home', 303))

  app.get('/sign-in', { schema: { hide: true } }, async (request, reply) => {
    if ((await sessionOf(request)) !== null) return reply.redirect('/portal/home', 303)
    return send(reply, 'Sign in', signInForm(csrfToken(pepper, sessionIdHash(formToken(request, reply)))))
  })

  app.post<{ Body: Record<string, unknown> }>('/sign-in', { schema: { hide: true } }, async (request, reply) => {
    const body = request.body ?? {}
    const pre = readCookie(request.headers.cookie, formCookie)
    if (!sameOrigin(request.headers, originsOf(request)) || pre === null || !isToken(pre) || !checkCsrf(pepper, sessionIdHash(pre), body._csrf)) {
      return send(reply, 'Sign in', signInForm(csrfToken(pepper, sessionIdHash(formToken(request, reply))), '', 'This form has expired. Please sign in again.'), 403)
    }
    const email = typeof body.email === 'string' ? body.email.trim() : ''
    const password = typeof body.password === 'string' ? body.password : ''
    const user = email === '' || email.length > 320 ? null : await store.portal.findUserByEmail(email)
    // An unknown email takes as long as a wrong password (a dummy hash), and gets the same words.
    const ok = await passwords.verify(password, user?.passwordHash ?? null)
    const target = { type: 'user' as const, id: user?.id ?? emailKey(email).slice(0, 320) }
    const draft = { actor: user === null ? 'anonymous' : actorName({ type: 'portal-user', id: user.id }), action: 'user.sign-in', target, accountId: null, ip: request.ip }
    if (!ok || user === null || user.status !== 'active' || user.emailVerifiedAt === null) {
      await store.audit.append({ ...draft, outcome: 'failure', detail: { reason: !ok || user === null ? 'wrong email or password' : user.status !== 'active' ? `user ${user.status}` : 'email not confirmed' } })
      const words = ok && user !== null && user.emailVerifiedAt === null ? 'Please confirm your email first: follow the link we sent you.' : 'The email or the password is wrong.'
      return send(reply, 'Sign in', signInForm(csrfToken(pepper, sessionIdHash(pre)), email, words), 401)
    }
    if (passwords.needsRehash(user.passwordHash!)) await store.portal.updateUser(user.id, { passwordHash: await passwords.hash(password) }, null)
    // A new session id at every sign-in (no fixation); the pre-session ends.
    const session = newSessionToken()
    await store.portal.createSession({
      idHash: session.idHash, userId: user.id, expiresAt: new Date(now() + ttlMs).toISOString(), twoFactorPending: false,
      ip: request.ip, userAgent: typeof request.headers['user-agent'] === 'string' ? request.headers['user-agent'].slice(0, 256) : null,
    })
    await store.audit.append({ ...draft, outcome: 'success', detail: {} })
    reply.header('set-cookie', [setCookie(SESSION_COOKIE, session.token, secure, Math.floor(ttlMs / 1000)), setCookie(PRESESSION_COOKIE, '', secure, 0)])
    return reply.redirect('/portal/home', 303)
  })

  app.get('/home', { schema: { hide: true } }, async (request, reply) => {
    const current = await sessionOf(request)
    if (current === null) return reply.redirect('/portal/sign-in', 303)
    const csrf = csrfToken(pepper, current.session.idHash)
    return send(reply, 'Your accounts', html`
<p>You are signed in. Keys, subscriptions and usage come here next.</p>
<form method="post" action="/portal/sign-out">
<input type="hidden" name="_csrf" value="${csrf}">
<button type="submit">Sign out</button>
</form>
<form method="post" action="/portal/sign-out">
<input type="hidden" name="_csrf" value="${csrf}">
<input type="hidden" name="everywhere" value="1">
<button type="submit">Sign out everywhere</button>
</form>`, 200, current.user.email)
  })

  app.post<{ Body: Record<string, unknown> }>('/sign-out', { schema: { hide: true } }, async (request, reply) => {
    const current = await sessionOf(request)
    if (current === null) return reply.redirect('/portal/sign-in', 303)
    if (!sameOrigin(request.headers, originsOf(request)) || !checkCsrf(pepper, current.session.idHash, request.body?._csrf)) {
      return send(reply, 'Sign out', html`<p class="error" role="alert">This form has expired. <a href="/portal/home">Back</a>.</p>`, 403, current.user.email)
    }
    if (request.body?.everywhere === '1') await store.portal.deleteSessionsOf(current.user.id)
    else await store.portal.deleteSession(current.session.idHash)
    reply.header('set-cookie', setCookie(SESSION_COOKIE, '', secure, 0))
    return reply.redirect('/portal/sign-in', 303)
  })

  app.get('/sign-up', { schema: { hide: true } }, async (_request, reply) => send(reply, 'Sign up', signUpForm()))
  app.get('/assets/portal.css', { schema: { hide: true } }, async (_request, reply) =>
    reply.type('text/css; charset=utf-8').header('cache-control', 'public, max-age=3600').send(PORTAL_CSS))
  app.get('/assets/htmx.min.js', { schema: { hide: true } }, async (_request, reply) =>
    reply.type('text/javascript; charset=utf-8').header('cache-control', 'public, max-age=3600').send(HTMX))
}
