/**
 * The developer portal at /portal: server-rendered pages, usable without JavaScript, in an
 * encapsulated plugin with its own headers, body parser, HTML error pages and assets. The
 * API-key guard never runs here. Each page module (pages/: auth, overview, keys, subscriptions, usage, audit,
 * team, security, start, webhooks, factor-settings, jobs; operator/: the operator pages) is a plugin given the same kit (kit.ts);
 * this file only wires.
 */
import type { FastifyInstance, FastifyReply } from 'fastify'
import { parse as parseForm } from 'fast-querystring'
import { html } from './html.ts'
import { HTMX, PORTAL_CSS, PORTAL_JS } from './assets.ts'
import { ICON_SVG } from '../../http/icon.ts'
import type { Kit } from './kit.ts'
import { notFound, sendPage } from './kit.ts'
import { PasswordsBusy } from '../../services/users/passwords.ts'
import { UnavailableError } from '../../domain/errors.ts'
import { cookieName, SESSION_COOKIE } from './session.ts'
import authPages from '../pages/auth.ts'
import ssoPages, { css as ssoCss } from '../pages/sso.ts'
import homePages from '../pages/home.ts'
import overviewPages, { css as overviewCss } from '../pages/overview.ts'
import keysPages, { css as keysCss } from '../pages/keys.ts'
import subscriptionPages, { css as subscriptionsCss } from '../pages/subscriptions.ts'
import startPages, { css as startCss } from '../pages/start.ts'
import usagePages, { css as usageCss } from '../pages/usage.ts'
import auditPages, { css as auditCss } from '../pages/audit.ts'
import teamPages, { css as teamCss } from '../pages/team.ts'
import securityPages, { css as securityCss } from '../pages/security.ts'
import operatorPages, { css as operatorCss } from '../operator/operator.ts'
import webhookPages, { css as webhooksCss } from '../pages/webhooks.ts'
import jobPages, { css as jobsCss } from '../pages/jobs.ts'
import factorSettingsPages, { css as factorSettingsCss } from '../pages/factor-settings.ts'

export type PortalOptions = Omit<Kit, 'sessionCookie' | 'sessionTtlMs'>

/** Nothing but the node's own scripts, styles and images; forms post only here; no framing. */
export const PORTAL_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

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

/** The longest form the portal takes: a sign-in with a 1 024-character password, escaped, fits. */
export const FORM_LIMIT = 16_384

const STYLESHEET = [
  PORTAL_CSS,
  overviewCss,
  keysCss,
  subscriptionsCss,
  startCss,
  usageCss,
  auditCss,
  teamCss,
  securityCss,
  ssoCss,
  operatorCss,
  webhooksCss,
  jobsCss,
  factorSettingsCss,
].join('\n')

/** portal: register with `{ prefix: '/portal' }` (its not-found page covers that prefix only). */
export default async function portal(app: FastifyInstance, opts: PortalOptions): Promise<void> {
  // Not `...opts`: Fastify's own options (the prefix) must not reach the page modules' registration.
  const { config, accounts, factors, webhooks, jobs, mailer, passwords, throttle, pepper, now, metrics, users, team } = opts
  const kit: Kit = {
    config,
    accounts,
    factors,
    webhooks,
    jobs,
    mailer,
    passwords,
    throttle,
    pepper,
    now,
    metrics,
    users,
    team,
    sessionCookie: cookieName(SESSION_COOKIE, config.portalSecureCookies),
    sessionTtlMs: users.sessions.ttlMs,
  }

  app.addHook('onRequest', async (_request, reply) => {
    headers(reply)
  })
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: FORM_LIMIT }, (_request, body, done) => {
    done(null, parseForm(body as string))
  })
  app.setNotFoundHandler(async (_request, reply) => notFound(kit, reply))
  app.setErrorHandler(async (error: Error & { statusCode?: number }, request, reply) => {
    // A store out of reach (PostgreSQL or Redis away, a timeout) is a 503 to try again, as on the API: not a 500 of ours.
    const unavailable = error instanceof UnavailableError
    const status = error instanceof PasswordsBusy || unavailable ? 503 : (error.statusCode ?? 500) < 500 ? error.statusCode! : 500
    if (unavailable) request.log.warn({ dependency: error.dependency }, 'portal page: a dependency is unreachable')
    else if (status >= 500) request.log.error({ err: error }, 'portal page failed')
    if (status === 503) reply.header('retry-after', '5')
    const message = unavailable
      ? 'The service cannot reach its data just now. Try again in a few seconds.'
      : status === 503
        ? 'Too many sign-ins or sign-ups at once. Try again in a few seconds.'
        : status >= 500
          ? `Something went wrong on our side (request ${request.id}).`
          : status === 413
            ? 'That form was too large.'
            : status === 415
              ? 'That request was not a form.'
              : 'That request could not be read.'
    return sendPage(kit, reply, { title: status >= 500 ? 'Sorry' : 'Bad request', status, body: html`<p role="alert">${message}</p>` })
  })

  for (const pages of [
    authPages,
    ssoPages,
    homePages,
    overviewPages,
    keysPages,
    subscriptionPages,
    startPages,
    usagePages,
    auditPages,
    teamPages,
    securityPages,
    operatorPages,
    webhookPages,
    jobPages,
    factorSettingsPages,
  ]) {
    await app.register(pages, kit)
  }

  app.get('/assets/portal.css', { schema: { hide: true } }, async (_request, reply) =>
    reply.type('text/css; charset=utf-8').header('cache-control', 'public, max-age=3600').send(STYLESHEET),
  )
  app.get('/assets/portal.js', { schema: { hide: true } }, async (_request, reply) =>
    reply.type('text/javascript; charset=utf-8').header('cache-control', 'public, max-age=3600').send(PORTAL_JS),
  )
  app.get('/assets/icon.svg', { schema: { hide: true } }, async (_request, reply) =>
    reply.type('image/svg+xml').header('cache-control', 'public, max-age=86400').send(ICON_SVG),
  )
  app.get('/assets/htmx.min.js', { schema: { hide: true } }, async (_request, reply) =>
    reply.type('text/javascript; charset=utf-8').header('cache-control', 'public, max-age=3600').send(HTMX),
  )
}
