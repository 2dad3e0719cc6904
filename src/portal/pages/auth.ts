/**
 * Signing up, in and out, confirming an address and resetting a password, after The
 * Copenhagen Book and OWASP's authentication cheat sheet:
 * - the same words, and the same work, whether an email is known or not (sign-in verifies
 *   against a dummy hash; sign-up and reset answer "check your inbox" and mail in the
 *   background);
 * - links sent by email are single-use, short-lived, kept as hashes, and consumed by a form
 *   post, never by opening them (mail scanners open links);
 * - a new session id at every sign-in; a reset signs the user out everywhere;
 * - `next` only ever leads to a portal page (no open redirect);
 * - an address is never confirmed for a password its owner did not choose. Anyone can sign
 *   up any address; while it is unconfirmed, the last sign-up's password is the pending one,
 *   and confirming asks for it with the link: only the person who holds both the inbox and
 *   the password they chose confirms. (Letting the first sign-up keep the address would let
 *   an attacker who signs up first hand the owner's confirmation their own password; letting
 *   the link alone confirm the last sign-up would let them sign up again just before the
 *   owner opens it.) A reset of a never-confirmed account ends its sessions and second
 *   factor, and unconfirmed sign-ups are deleted after the link's lifetime (maintenance.ts);
 * - sign-ups are counted per source and in total before any work, and emails an address did
 *   not ask for (resets, new links, notices) go at most once per window (limits.ts), with the
 *   same pages either way.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { html, type Html } from '../web/html.ts'
import type { Kit } from '../web/kit.ts'
import { actorOf, formField, LANDING, originsOf, preSessionCsrf, sendPage, sessionOf, signedOutFormOk } from '../web/kit.ts'
import { isFailure } from '../../services/outcome.ts'
import type { User } from '../../domain/portal.ts'
import { checkPassword, MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH } from '../../services/users/passwords.ts'
import { checkEmail } from '../../services/users/sign-up.ts'
import { MAX_EMAIL } from '../../services/users/sessions.ts'
import { sendToProvider } from './sso.ts'
import * as mail from '../../mail/templates.ts'
import {
  checkCsrf,
  csrfToken,
  isToken,
  PRESESSION_COOKIE,
  readCookie,
  sameOrigin,
  SESSION_COOKIE,
  sessionIdHash,
  setCookie,
  cookieName,
} from '../web/session.ts'

export { checkEmail }

const HOME = LANDING
/** Where `next` is resolved: any origin will do, only that it stays this one is checked. */
const PLACE = 'http://portal.invalid'

/**
 * safeNext: a portal page to go to after sign-in, or the home page (never another site, nor
 * a page outside the portal). `next` is judged as a browser will read it: resolved by the
 * WHATWG URL parser (which takes `.%2e` and `%2e%2e` for `..`, and `\` for `/`), and what is
 * given back is that resolved path, so the Location sent is the page that opens. Backslashes,
 * control characters, spaces and encoded slashes are refused outright (a parser or a proxy on
 * the way may read them otherwise).
 */
export function safeNext(next: unknown): string {
  if (typeof next !== 'string' || next.length > 2048 || !next.startsWith('/portal/') || next.includes('//')) return HOME
  if (/[\\\u0000-\u0020\u007f-\u009f<>"'`]/.test(next) || /%(2f|5c|[01][0-9a-f]|7f)/i.test(next)) return HOME
  let url: URL
  try {
    url = new URL(next, PLACE)
  } catch {
    return HOME
  }
  if (url.origin !== PLACE || !url.pathname.startsWith('/portal/') || url.pathname.includes('//') || /%2e/i.test(url.pathname)) return HOME
  return `${url.pathname}${url.search}`
}

const notice = (text: string | null) => (text === null ? '' : html`<p class="notice" role="status">${text}</p>`)
const alert = (text: string | null) => (text === null ? '' : html`<p class="error" role="alert">${text}</p>`)

interface Problem {
  readonly field: string
  readonly text: string
}

/** field writes one labelled input, with its error (if any) tied to it for screen readers. */
function field(opts: {
  id: string
  label: string
  type: string
  autocomplete: string
  value?: string
  problems?: readonly Problem[]
  hint?: string
  required?: boolean
  extra?: Html
}): Html {
  const problem = opts.problems?.find((p) => p.field === opts.id)
  const described = [opts.hint ? `${opts.id}-hint` : '', problem ? `${opts.id}-error` : ''].filter(Boolean).join(' ')
  return html`<label for="${opts.id}">${opts.label}</label>
${opts.hint ? html`<p class="hint" id="${opts.id}-hint">${opts.hint}</p>` : ''}
${problem ? html`<p class="error" id="${opts.id}-error">${problem.text}</p>` : ''}
<input id="${opts.id}" name="${opts.id}" type="${opts.type}" autocomplete="${opts.autocomplete}"${opts.required === false ? '' : html` required`}${opts.value === undefined ? '' : html` value="${opts.value}"`}${described ? html` aria-describedby="${described}"` : ''}${problem ? html` aria-invalid="true"` : ''}${opts.extra ?? ''}>`
}

const passwordRule = `At least ${MIN_PASSWORD_LENGTH} characters; a passphrase of several words is best.`

/** The pieces the signed-out pages share: settings, the pre-session's CSRF, emails in the background, email links' tokens. */
function shared(kit: Kit) {
  const { config, pepper, mailer, users } = kit
  const VERIFY_TTL_MS = users.signUps.verifyTtlMs
  const RESET_TTL_MS = users.signUps.resetTtlMs
  const mailWindow = mail.duration(config.portalMailWindowSeconds * 1000)
  const secure = config.portalSecureCookies
  const formCookie = cookieName(PRESESSION_COOKIE, secure)
  const base = config.publicBaseUrl

  const formCsrf = (request: FastifyRequest, reply: FastifyReply) => preSessionCsrf(kit, request, reply)
  const csrfInput = (csrf: string) => html`<input type="hidden" name="_csrf" value="${csrf}">`
  const formOkSignedOut = (request: FastifyRequest) => signedOutFormOk(kit, request)

  /** sendMail sends in the background: the answer must not wait for (or tell anything by) the SMTP server. */
  function sendMail(request: FastifyRequest, to: string, email: mail.Email): void {
    mailer.send({ to, ...email }).catch((error: Error) => request.log.error({ err: error }, 'email not sent'))
  }

  /** mailVerify sends a confirmation link. */
  const mailVerify = (request: FastifyRequest, to: string, link: string) => sendMail(request, to, mail.verifyEmail({ link, validForMs: VERIFY_TTL_MS }))

  const tokenOf = (request: FastifyRequest): string => {
    const t = (request.query as { token?: unknown }).token ?? ((request.body ?? {}) as Record<string, unknown>).token
    return typeof t === 'string' && isToken(t) ? t : ''
  }
  const deadLink = (reply: FastifyReply, what: string, again: Html) =>
    sendPage(kit, reply, {
      title: 'Link expired',
      status: 400,
      body: html`<p role="alert">This ${what} link has expired, was already used, or was replaced by a newer one.</p><p>${again}</p>`,
    })

  return {
    kit,
    config,
    pepper,
    users,
    VERIFY_TTL_MS,
    RESET_TTL_MS,
    mailWindow,
    secure,
    formCookie,
    base,
    formCsrf,
    csrfInput,
    formOkSignedOut,
    sendMail,
    mailVerify,
    tokenOf,
    deadLink,
  }
}

type Shared = ReturnType<typeof shared>

export default async function authPages(app: FastifyInstance, kit: Kit): Promise<void> {
  const s = shared(kit)
  for (const pages of [signInPages, signUpPages, confirmPages, resetPages]) pages(app, s)
}

/** signInForm: the sign-in form, with what was typed and what went wrong or is to be said. */
function signInForm(
  s: Shared,
  csrf: string,
  opts: { email?: string; error?: string | null; notice?: string | null; next?: string; focusPassword?: boolean; sso?: readonly SsoButton[] } = {},
): Html {
  const { config, csrfInput } = s
  const next = opts.next && opts.next !== HOME ? html`<input type="hidden" name="next" value="${opts.next}">` : ''
  const sso = (opts.sso ?? []).map(
    (p) =>
      html`<form method="post" action="/portal/sso/${p.id}/start" class="sso">${csrfInput(csrf)}${next}<button type="submit">Sign in with ${p.name}</button></form>`,
  )
  return html`
${notice(opts.notice ?? null)}${alert(opts.error ?? null)}
${sso.length === 0 ? '' : html`<section class="sso" aria-label="Single sign-on">${sso}<p class="hint">Or with your email and password:</p></section>`}
<form method="post" action="/portal/sign-in">
${csrfInput(csrf)}
${next}
${field({ id: 'email', label: 'Email', type: 'email', autocomplete: 'username', value: opts.email ?? '' })}
${field({ id: 'password', label: 'Password', type: 'password', autocomplete: 'current-password', extra: html` maxlength="${MAX_PASSWORD_LENGTH}"${opts.focusPassword === true ? html` autofocus` : ''}` })}
<button type="submit">Sign in</button>
</form>
<p>${config.signupMode === 'closed' ? 'New here? Ask an account owner for an invitation.' : html`No account yet? <a href="/portal/sign-up">Sign up</a>.`} <a href="/portal/reset">Forgot your password?</a></p>`
}

/** A provider the sign-in page offers. */
interface SsoButton {
  readonly id: string
  readonly name: string
}

/** The notices the sign-in page shows, by its `notice` parameter (never text from the address). */
const SIGN_IN_NOTICES: Record<string, string> = {
  confirmed: 'Your email address is confirmed. Sign in to continue.',
  reset: 'Your password is changed, and every other session is signed out. Sign in with the new one.',
  'signed-out': 'You are signed out.',
}

/** POST sign-in: a genuine form's email and password, to a session (or to the second factor), or the form again with why not. */
async function signIn(s: Shared, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const { kit, pepper, users, mailWindow, secure, formCookie, formCsrf, formOkSignedOut, mailVerify } = s
  const next = safeNext(formField(request, 'next'))
  if (!formOkSignedOut(request)) {
    return sendPage(kit, reply, {
      title: 'Sign in',
      status: 403,
      body: signInForm(s, formCsrf(request, reply), { next, error: 'This form has expired. Please sign in again.', sso: await users.sso.buttons() }),
    })
  }
  const pre = readCookie(request.headers.cookie, formCookie)!
  const again = async (status: number, error: string, email: string) =>
    sendPage(kit, reply, {
      title: 'Sign in',
      status,
      body: signInForm(s, csrfToken(pepper, sessionIdHash(pre)), { email, error, next, sso: await users.sso.buttons() }),
    })
  const email = formField(request, 'email').slice(0, MAX_EMAIL + 1)
  const body = request.body as Record<string, unknown>
  const password = typeof body.password === 'string' ? body.password : ''

  const userAgent = request.headers['user-agent']
  const outcome = await users.sessions.signIn({ email, password, ip: request.ip, userAgent: typeof userAgent === 'string' ? userAgent : null })
  switch (outcome.kind) {
    case 'throttled':
      reply.header('retry-after', String(outcome.wait))
      kit.metrics.signIn('throttled')
      return again(429, `Too many attempts. Try again in ${mail.duration(outcome.wait * 1000)}.`, email)
    case 'wrong':
      kit.metrics.signIn('wrong')
      if (outcome.lockedFor > 0) reply.header('retry-after', String(outcome.lockedFor))
      return again(401, 'The email or the password is wrong.', email)
    case 'unconfirmed':
      kit.metrics.signIn('unconfirmed')
      if (outcome.link !== null) mailVerify(request, outcome.user.email, outcome.link)
      return again(403, `Please confirm your email address first: open the link we have sent you (a new one at most every ${mailWindow}).`, email)
    case 'inactive':
      kit.metrics.signIn(outcome.status)
      return again(
        403,
        outcome.status === 'pending'
          ? "Your sign-up is waiting for an operator's approval; we will email you when it is approved."
          : 'This sign-in is disabled. Ask your operator.',
        email,
      )
    case 'sso-only':
      kit.metrics.signIn('sso only')
      return again(403, `Sign in with ${outcome.providers.join(' or ')}: your operator has turned password sign-in off for you.`, email)
    case 'link-first': {
      // The right password of a user whose domain signs in through a provider they have not linked: it opens no session, only
      // the way to link it, through the provider, in this browser (the request is bound to this pre-session).
      kit.metrics.signIn('sso only')
      const started = await users.sso.start({
        providerId: outcome.providerId,
        next,
        ip: request.ip,
        browserHash: sessionIdHash(pre),
        linkUserId: outcome.user.id,
      })
      return sendToProvider(kit, reply, started)
    }
  }
  const { twoFactor } = outcome
  kit.metrics.signIn(twoFactor ? 'second factor' : 'ok')
  // The pre-session ends.
  reply.header('set-cookie', [
    setCookie(SESSION_COOKIE, outcome.token, secure, Math.floor(kit.sessionTtlMs / 1000)),
    setCookie(PRESESSION_COOKIE, '', secure, 0),
  ])
  return reply.redirect(twoFactor ? `/portal/two-factor${next === HOME ? '' : `?next=${encodeURIComponent(next)}`}` : next, 303)
}

/** signInPages: signing in and out. */
function signInPages(app: FastifyInstance, s: Shared): void {
  const { kit, pepper, users, secure, formCsrf } = s

  app.get<{ Querystring: { next?: string; notice?: string } }>('/sign-in', { schema: { hide: true } }, async (request, reply) => {
    const next = safeNext(request.query.next)
    if ((await sessionOf(kit, request)) !== null) return reply.redirect(next, 303)
    const said = typeof request.query.notice === 'string' ? (SIGN_IN_NOTICES[request.query.notice] ?? null) : null
    return sendPage(kit, reply, { title: 'Sign in', body: signInForm(s, formCsrf(request, reply), { next, notice: said, sso: await users.sso.buttons() }) })
  })

  app.post('/sign-in', { schema: { hide: true } }, (request, reply) => signIn(s, request, reply))

  app.post('/sign-out', { schema: { hide: true } }, async (request, reply) => {
    const current = await sessionOf(kit, request, { pendingToo: true })
    if (current === null) return reply.redirect('/portal/sign-in', 303)
    const body = (request.body ?? {}) as Record<string, unknown>
    if (!sameOrigin(request.headers, originsOf(kit, request)) || !checkCsrf(pepper, current.session.idHash, body._csrf)) {
      return sendPage(kit, reply, {
        title: 'Sign out',
        status: 403,
        current,
        body: html`<p class="error" role="alert">This form has expired. <a href="/portal/home">Back</a>.</p>`,
      })
    }
    await users.sessions.signOut(actorOf(current, request), current, body.everywhere === '1')
    reply.header('set-cookie', setCookie(SESSION_COOKIE, '', secure, 0))
    return reply.redirect('/portal/sign-in?notice=signed-out', 303)
  })
}

/** signUpPages: the sign-up form. */
function signUpPages(app: FastifyInstance, s: Shared): void {
  const { kit, config, users, VERIFY_TTL_MS, mailWindow, base, formCsrf, csrfInput, formOkSignedOut, sendMail, mailVerify } = s

  const signUpForm = (csrf: string, opts: { email?: string; account?: string; problems?: readonly Problem[] } = {}) => html`
<form method="post" action="/portal/sign-up" novalidate>
${csrfInput(csrf)}
${field({ id: 'email', label: 'Email', type: 'email', autocomplete: 'email', value: opts.email ?? '', problems: opts.problems ?? [] })}
${field({ id: 'password', label: 'Password', type: 'password', autocomplete: 'new-password', hint: passwordRule, problems: opts.problems ?? [], extra: html` minlength="${MIN_PASSWORD_LENGTH}" maxlength="${MAX_PASSWORD_LENGTH}"` })}
${field({ id: 'account', label: 'Account name', type: 'text', autocomplete: 'organization', value: opts.account ?? '', hint: 'Your company or project; you can change it later.', problems: opts.problems ?? [], required: false, extra: html` maxlength="200"` })}
<button type="submit">Create account</button>
</form>
${config.signupMode === 'approval' ? html`<p>An operator approves each new account before it can be used.</p>` : ''}
<p>Already have an account? <a href="/portal/sign-in">Sign in</a>.</p>`

  const closed = (reply: FastifyReply) =>
    sendPage(kit, reply, {
      title: 'Sign up',
      status: 403,
      body: html`<p role="alert">Sign-ups are closed on this service: ask an account owner to invite you, or your operator. <a href="/portal/sign-in">Sign in</a></p>`,
    })

  app.get('/sign-up', { schema: { hide: true } }, async (request, reply) => {
    if (config.signupMode === 'closed') return closed(reply)
    return sendPage(kit, reply, { title: 'Sign up', body: signUpForm(formCsrf(request, reply)) })
  })

  app.post('/sign-up', { schema: { hide: true } }, async (request, reply) => {
    if (config.signupMode === 'closed') return closed(reply)
    const email = formField(request, 'email')
    const accountName = formField(request, 'account')
    const body = request.body as Record<string, unknown>
    const password = typeof body.password === 'string' ? body.password : ''
    if (!formOkSignedOut(request)) {
      return sendPage(kit, reply, {
        title: 'Sign up',
        status: 403,
        body: html`${alert('This form has expired. Please try again.')}${signUpForm(formCsrf(request, reply), { email, account: accountName })}`,
      })
    }
    const problems: Problem[] = []
    const badEmail = checkEmail(email)
    if (badEmail) problems.push({ field: 'email', text: `Enter ${badEmail}.` })
    const badPassword = checkPassword(password)
    if (badPassword) problems.push({ field: 'password', text: `Choose a password of ${badPassword}.` })
    if ([...accountName].length > 200 || /[\u0000-\u001f\u007f]/.test(accountName))
      problems.push({ field: 'account', text: 'Use at most 200 characters, on one line.' })
    if (problems.length > 0) {
      return sendPage(kit, reply, {
        title: 'Sign up',
        status: 422,
        body: html`${alert('Please correct the fields below.')}${signUpForm(formCsrf(request, reply), { email, account: accountName, problems })}`,
      })
    }
    const outcome = await users.signUps.signUp({ email, password, accountName, ip: request.ip })
    if (outcome.kind === 'throttled') {
      reply.header('retry-after', String(outcome.wait))
      return sendPage(kit, reply, {
        title: 'Sign up',
        status: 429,
        body: html`${alert(`Too many sign-ups from your network, or on this service, just now. Try again in ${mail.duration(outcome.wait * 1000)}.`)}${signUpForm(formCsrf(request, reply), { email, account: accountName })}`,
      })
    }
    if (outcome.created) kit.metrics.signUp()
    if (outcome.mail?.kind === 'verify') mailVerify(request, outcome.mail.to, outcome.mail.link)
    else if (outcome.mail?.kind === 'registered')
      sendMail(request, outcome.mail.to, mail.alreadyRegistered({ signInUrl: `${base}/portal/sign-in`, resetUrl: `${base}/portal/reset` }))
    return sendPage(kit, reply, {
      title: 'Check your inbox',
      body: html`<p role="status">We have sent a link to ${email}. Open it to confirm your address; it works once, for ${mail.duration(VERIFY_TTL_MS)}, and asks for the password you have just chosen.</p><p>No email? Look in your spam folder. We send at most one every ${mailWindow}: if you signed up twice, the link in the earlier email works too, with the password you chose last.</p>`,
    })
  })
}

/** confirmPages: confirming an address (the link shows a button; the post consumes the token). */
function confirmPages(app: FastifyInstance, s: Shared): void {
  const { kit, users, base, formCsrf, csrfInput, formOkSignedOut, sendMail, tokenOf, deadLink } = s

  const confirmForm = (csrf: string, token: string, problem: string | null = null) => html`
<form method="post" action="/portal/verify-email" novalidate>
${csrfInput(csrf)}
<input type="hidden" name="token" value="${token}">
<input type="text" name="username" autocomplete="username" hidden>
<p>Confirm that this address is yours to finish signing up.</p>
${field({ id: 'password', label: 'Your password', type: 'password', autocomplete: 'current-password', hint: 'The one you chose when you signed up (the last time, if you signed up more than once).', problems: problem === null ? [] : [{ field: 'password', text: problem }], extra: html` maxlength="${MAX_PASSWORD_LENGTH}"` })}
<button type="submit">Confirm my email address</button>
</form>`

  app.get('/verify-email', { schema: { hide: true } }, async (request, reply) =>
    sendPage(kit, reply, { title: 'Confirm your email address', body: confirmForm(formCsrf(request, reply), tokenOf(request)) }),
  )

  app.post('/verify-email', { schema: { hide: true } }, async (request, reply) => {
    const again = html`<a href="/portal/sign-up">Sign up again</a> to get a new one.`
    if (!formOkSignedOut(request)) return deadLink(reply, 'confirmation', html`Open the link from the email again.`)
    const token = tokenOf(request)
    const body = request.body as Record<string, unknown>
    const password = typeof body.password === 'string' ? body.password : ''
    const confirmed = await users.signUps.confirm(token, password, request.ip)
    if (confirmed.kind === 'dead') return deadLink(reply, 'confirmation', again)
    if (confirmed.kind === 'wrong-password') {
      return sendPage(kit, reply, {
        title: 'Confirm your email address',
        status: 422,
        body: confirmForm(
          formCsrf(request, reply),
          token,
          'That is not the password of the last sign-up for this address. Enter the password you chose when you last signed up, or sign up again to choose one.',
        ),
      })
    }
    if (confirmed.pending) {
      await notifyOperators(request, confirmed.user)
      sendMail(request, confirmed.user.email, mail.signupAwaitingApproval({ portalUrl: `${base}/portal/sign-in` }))
      return sendPage(kit, reply, {
        title: 'Address confirmed',
        body: html`<p role="status">Thank you: your address is confirmed. An operator approves each new account; we will email you when yours is ready.</p>`,
      })
    }
    // The sign-in form itself, with the address just confirmed filled in (not in a URL, where logs
    // and history would keep it), the password next: the user types it a second time, nothing more.
    return sendPage(kit, reply, {
      title: 'Sign in',
      body: signInForm(s, formCsrf(request, reply), { email: confirmed.user.email, notice: SIGN_IN_NOTICES.confirmed!, focusPassword: true }),
    })
  })

  /** notifyOperators tells every operator that a confirmed sign-up waits for them. */
  async function notifyOperators(request: FastifyRequest, user: User): Promise<void> {
    const { emails, accountName } = await users.signUps.operatorsToTell(user)
    for (const to of emails) sendMail(request, to, mail.signupToApprove({ email: user.email, accountName, link: `${base}/portal/operator/sign-ups` }))
  }
}

/** resetPages: asking for a reset link, and choosing a new password with it. */
function resetPages(app: FastifyInstance, s: Shared): void {
  const { kit, users, RESET_TTL_MS, formCsrf, csrfInput, formOkSignedOut, sendMail, tokenOf, deadLink } = s

  const resetForm = (csrf: string) => html`
<form method="post" action="/portal/reset">
${csrfInput(csrf)}
${field({ id: 'email', label: 'Email', type: 'email', autocomplete: 'username' })}
<button type="submit">Send me a reset link</button>
</form>
<p><a href="/portal/sign-in">Back to sign-in</a></p>`

  app.get('/reset', { schema: { hide: true } }, async (request, reply) =>
    sendPage(kit, reply, { title: 'Reset your password', body: resetForm(formCsrf(request, reply)) }),
  )

  app.post('/reset', { schema: { hide: true } }, async (request, reply) => {
    if (!formOkSignedOut(request))
      return sendPage(kit, reply, {
        title: 'Reset your password',
        status: 403,
        body: html`${alert('This form has expired. Please try again.')}${resetForm(formCsrf(request, reply))}`,
      })
    const email = formField(request, 'email')
    // The same answer whatever the address; the lookup and the email happen after it is sent.
    setImmediate(() => {
      void (async () => {
        const reset = await users.signUps.requestReset(email, request.ip)
        if (reset !== null) sendMail(request, reset.to, mail.resetPassword({ link: reset.link, validForMs: RESET_TTL_MS }))
      })().catch((error: Error) => request.log.error({ err: error }, 'password reset not sent'))
    })
    return sendPage(kit, reply, {
      title: 'Check your inbox',
      body: html`<p role="status">If an account uses ${email}, we have sent it a link to choose a new password. It works once, for ${mail.duration(RESET_TTL_MS)}.</p><p><a href="/portal/sign-in">Back to sign-in</a></p>`,
    })
  })

  const newPasswordForm = (csrf: string, token: string, problem: string | null = null) => html`
<form method="post" action="/portal/reset/confirm" novalidate>
${csrfInput(csrf)}
<input type="hidden" name="token" value="${token}">
<input type="text" name="username" autocomplete="username" hidden>
${field({ id: 'password', label: 'New password', type: 'password', autocomplete: 'new-password', hint: passwordRule, problems: problem === null ? [] : [{ field: 'password', text: problem }], extra: html` minlength="${MIN_PASSWORD_LENGTH}" maxlength="${MAX_PASSWORD_LENGTH}"` })}
<button type="submit">Set the new password</button>
</form>`

  app.get('/reset/confirm', { schema: { hide: true } }, async (request, reply) =>
    sendPage(kit, reply, { title: 'Choose a new password', body: newPasswordForm(formCsrf(request, reply), tokenOf(request)) }),
  )

  app.post('/reset/confirm', { schema: { hide: true } }, async (request, reply) => {
    const again = html`<a href="/portal/reset">Ask for a new link</a>.`
    if (!formOkSignedOut(request)) return deadLink(reply, 'reset', again)
    const token = tokenOf(request)
    const body = request.body as Record<string, unknown>
    const password = typeof body.password === 'string' ? body.password : ''
    // The rule first: a password refused does not use the link up.
    const reset = await users.signUps.resetPassword(token, password, request.ip)
    if (isFailure(reset))
      return sendPage(kit, reply, {
        title: 'Choose a new password',
        status: 422,
        body: newPasswordForm(formCsrf(request, reply), token, `Choose a password of ${reset.message}.`),
      })
    if ('dead' in reset) return deadLink(reply, 'reset', again)
    return reply.redirect('/portal/sign-in?notice=reset', 303)
  })
}
