/**
 * Single sign-on's doors (services/users/sso.ts holds the rules): the sign-in page's buttons
 * post to `/portal/sso/:provider/start` (a signed-out form: its CSRF token and origin checked,
 * the request bound to the browser's pre-session), the security page's to `…/link` and
 * `…/unlink` (a signed-in form); the provider sends the browser back to
 * `/portal/sso/:provider/callback`, the redirect URI registered with it. A callback ends as a
 * password sign-in does: a new session cookie, the pre-session ended, the second factor asked
 * when it is due, `next` only ever a portal page.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { html, type Html } from '../web/html.ts'
import type { Kit } from '../web/kit.ts'
import { LANDING, sendPage, sessionOf, signedOutFormOk, formField } from '../web/kit.ts'
import type { SsoRefusal, SsoStart } from '../../services/users.ts'
import { cookieName, PRESESSION_COOKIE, readCookie, SESSION_COOKIE, sessionIdHash, setCookie, isToken } from '../web/session.ts'
import { safeNext } from './auth.ts'
import * as mail from '../../mail/templates.ts'

/** Styles of the providers' buttons (sign-in and Security pages), added to the portal's one stylesheet. */
export const css = `
form.sso, form.sso-link { margin: 0 0 .75rem; }
section.sso { margin-bottom: 1.5rem; }
section.sso p.hint { margin: 1rem 0 0; }
`

/** What each refusal tells the person, and its status. */
const REFUSALS: Readonly<Record<SsoRefusal, { status: number; text: (provider: string) => string }>> = {
  expired: { status: 400, text: () => 'This sign-in has expired, was used already, or was started in another browser. Start again from the sign-in page.' },
  denied: { status: 403, text: (p) => `${p} did not sign you in (it was cancelled or refused there).` },
  invalid: { status: 400, text: (p) => `${p}'s answer did not pass our checks, so nothing was signed in. If it happens again, tell your operator.` },
  unreachable: { status: 503, text: (p) => `${p} did not answer in time. Try again in a minute.` },
  unverified: { status: 403, text: (p) => `${p} did not give us an email address it has verified, which a first sign-in needs.` },
  domain: { status: 403, text: (p) => `${p} does not sign in addresses of your domain here. Ask your operator.` },
  taken: {
    status: 409,
    text: (p) =>
      `A portal user with your address exists already. Sign in with your password, then link ${p} on your Security page: we never join them by the address alone.`,
  },
  closed: { status: 403, text: () => 'Sign-ups are closed on this service: ask an account owner to invite you, or your operator.' },
  inactive: { status: 403, text: () => "This sign-in is disabled or waiting for an operator's approval. Ask your operator." },
  bound: { status: 409, text: (p) => `That ${p} identity is linked to another portal user, or you have one linked there already.` },
  throttled: { status: 429, text: () => 'Too many new sign-ups from your network, or on this service, this hour. Try again later.' },
  mismatch: {
    status: 403,
    text: (p) => `Operators link only the ${p} account of their own address here, since the operator pages need a single sign-on session.`,
  },
}

const say = (kit: Kit, reply: FastifyReply, status: number, text: string, back = html`<a href="/portal/sign-in">Back to sign-in</a>`) =>
  sendPage(kit, reply, { title: 'Single sign-on', status, body: html`<p role="alert">${text}</p><p>${back}</p>` })

/** sendToProvider: a started request's way to the provider (a sign-in's, or the Security page's link), or the page of why not. */
export function sendToProvider(kit: Kit, reply: FastifyReply, started: SsoStart): FastifyReply {
  switch (started.kind) {
    case 'redirect':
      // Not a 303: the portal's CSP (form-action 'self') rightly stops a form post redirected to another site. The page
      // the post answers with goes on by itself (Refresh) or by its link, a navigation of its own.
      return sendPage(kit, reply.header('cache-control', 'no-store').header('refresh', `0;url=${started.url}`).header('referrer-policy', 'no-referrer'), {
        title: 'Single sign-on',
        body: html`<p role="status">Taking you to your sign-in provider… <a href="${started.url}" rel="noreferrer">Continue</a></p>`,
      })
    case 'unknown':
      return say(kit, reply, 404, 'There is no such sign-in provider here.')
    case 'busy':
      reply.header('retry-after', '600')
      return say(kit, reply, 429, 'Too many sign-ins started from your network at once. Finish one, or try again in ten minutes.')
    case 'unreachable':
      reply.header('retry-after', '60')
      return say(kit, reply, 503, 'The sign-in provider did not answer in time. Try again in a minute.')
    case 'unreadable':
      reply.log.error("a single sign-on provider's client secret does not open under ENCRYPTION_KEYS: add its key version back, or add the provider again")
      return say(kit, reply, 503, "This sign-in provider's settings cannot be read on this service now. Tell your operator; sign in another way meanwhile.")
  }
}

export default async function ssoPages(app: FastifyInstance, kit: Kit): Promise<void> {
  const { users, config } = kit
  const secure = config.portalSecureCookies

  const page = (reply: FastifyReply, status: number, text: string, back?: Html) => say(kit, reply, status, text, back)

  const redirectTo = (reply: FastifyReply, started: SsoStart) => sendToProvider(kit, reply, started)

  const provider = (request: FastifyRequest) => String((request.params as { provider?: string }).provider ?? '').slice(0, 64)

  app.post('/sso/:provider/start', { schema: { hide: true } }, async (request, reply) => {
    const pre = readCookie(request.headers.cookie, cookieName(PRESESSION_COOKIE, secure))
    if (!signedOutFormOk(kit, request) || pre === null || !isToken(pre)) return page(reply, 403, 'This form has expired. Please sign in again.')
    const next = safeNext(formField(request, 'next'))
    return redirectTo(reply, await users.sso.start({ providerId: provider(request), next, ip: request.ip, browserHash: sessionIdHash(pre), linkUserId: null }))
  })

  callbackPage(app, kit, page, provider)
}

type Say = (reply: FastifyReply, status: number, text: string) => FastifyReply

/** callbackPage: where the provider sends the browser back; it ends as a password sign-in does. */
function callbackPage(app: FastifyInstance, kit: Kit, page: Say, provider: (request: FastifyRequest) => string): void {
  const { users, config } = kit
  const secure = config.portalSecureCookies
  app.get('/sso/:provider/callback', { schema: { hide: true } }, async (request, reply) => {
    reply.header('cache-control', 'no-store')
    const pre = readCookie(request.headers.cookie, cookieName(PRESESSION_COOKIE, secure))
    const rawQuery = request.url.includes('?') ? request.url.slice(request.url.indexOf('?') + 1) : ''
    const userAgent = request.headers['user-agent']
    const finished = await users.sso.finish({
      providerId: provider(request),
      query: rawQuery.slice(0, 8192),
      ip: request.ip,
      userAgent: typeof userAgent === 'string' ? userAgent : null,
      browserHash: pre !== null && isToken(pre) ? sessionIdHash(pre) : '',
      signedIn: await sessionOf(kit, request),
    })
    switch (finished.kind) {
      case 'refused': {
        kit.metrics.signIn('sso refused')
        const refusal = REFUSALS[finished.reason]
        if (finished.reason === 'unreachable') reply.header('retry-after', '60')
        if (finished.reason === 'throttled') reply.header('retry-after', '3600')
        return page(reply, refusal.status, refusal.text(finished.provider ?? 'The provider'))
      }
      case 'linked':
        return reply.redirect(finished.next, 303)
      case 'pending': {
        kit.metrics.signIn('pending')
        // As a confirmed sign-up under SIGNUP_MODE=approval: the operators are told, the user is told they will be emailed.
        const { emails, accountName } = await users.signUps.operatorsToTell(finished.user)
        const base = config.publicBaseUrl
        const send = (to: string, email: mail.Email) =>
          kit.mailer.send({ to, ...email }).catch((error: Error) => request.log.error({ err: error }, 'email not sent'))
        for (const to of emails) send(to, mail.signupToApprove({ email: finished.user.email, accountName, link: `${base}/portal/operator/sign-ups` }))
        send(finished.user.email, mail.signupAwaitingApproval({ portalUrl: `${base}/portal/sign-in` }))
        return sendPage(kit, reply, {
          title: 'Single sign-on',
          body: html`<p role="status">Thank you: an operator approves each new account; we will email you when yours is ready.</p>`,
        })
      }
      case 'signed-in': {
        kit.metrics.signIn(finished.twoFactor ? 'second factor' : 'ok')
        reply.header('set-cookie', [
          setCookie(SESSION_COOKIE, finished.token, secure, Math.floor(kit.sessionTtlMs / 1000)),
          setCookie(PRESESSION_COOKIE, '', secure, 0),
        ])
        const next = safeNext(finished.next)
        return reply.redirect(finished.twoFactor ? `/portal/two-factor${next === LANDING ? '' : `?next=${encodeURIComponent(next)}`}` : next, 303)
      }
    }
  })
}
