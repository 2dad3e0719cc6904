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
import { html, type Html } from './html.ts'
import type { Kit } from './kit.ts'
import { formField, originsOf, preSessionCsrf, sendPage, sessionOf, signedOutFormOk } from './kit.ts'
import { emailKey, type User } from '../domain/portal.ts'
import { checkPassword, MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH } from '../services/users/passwords.ts'
import * as mail from '../mail/templates.ts'
import { auditUser, userDraft } from './two-factor.ts'
import {
  checkCsrf, csrfToken, isToken, newSessionToken, PRESESSION_COOKIE, readCookie, sameOrigin, SESSION_COOKIE, sessionIdHash, setCookie, cookieName,
} from './session.ts'

/** How long a password-reset link works (a confirmation link: SIGNUP_CONFIRM_HOURS). */
export const RESET_TTL_MS = 30 * 60_000

const EMAIL = /^[^\s@<>()",;:]{1,64}@[^\s@<>()",;:]+\.[^\s@<>()",;:]+$/
/** The longest email address (RFC 5321's path limit). */
const MAX_EMAIL = 254

/** checkEmail says what is wrong with an address, or null. */
export function checkEmail(email: string): string | null {
  return email.length <= MAX_EMAIL && EMAIL.test(email) ? null : 'an email address like jane@example.com'
}

const HOME = '/portal/home'
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

const iso = (ms: number) => new Date(ms).toISOString()

const notice = (text: string | null) => (text === null ? '' : html`<p class="notice" role="status">${text}</p>`)
const alert = (text: string | null) => (text === null ? '' : html`<p class="error" role="alert">${text}</p>`)

interface Problem { readonly field: string; readonly text: string }

/** field writes one labelled input, with its error (if any) tied to it for screen readers. */
function field(opts: { id: string; label: string; type: string; autocomplete: string; value?: string; problems?: readonly Problem[]; hint?: string; required?: boolean; extra?: Html }): Html {
  const problem = opts.problems?.find((p) => p.field === opts.id)
  const described = [opts.hint ? `${opts.id}-hint` : '', problem ? `${opts.id}-error` : ''].filter(Boolean).join(' ')
  return html`<label for="${opts.id}">${opts.label}</label>
${opts.hint ? html`<p class="hint" id="${opts.id}-hint">${opts.hint}</p>` : ''}
${problem ? html`<p class="error" id="${opts.id}-error">${problem.text}</p>` : ''}
<input id="${opts.id}" name="${opts.id}" type="${opts.type}" autocomplete="${opts.autocomplete}"${opts.required === false ? '' : html` required`}${opts.value === undefined ? '' : html` value="${opts.value}"`}${described ? html` aria-describedby="${described}"` : ''}${problem ? html` aria-invalid="true"` : ''}${opts.extra ?? ''}>`
}

const passwordRule = `At least ${MIN_PASSWORD_LENGTH} characters; a passphrase of several words is best.`

export default async function authPages(app: FastifyInstance, kit: Kit): Promise<void> {
  const { config, store, pepper, passwords, mailer, now } = kit
  const VERIFY_TTL_MS = config.signupConfirmHours * 3_600_000
  const mailWindow = mail.duration(config.portalMailWindowSeconds * 1000)
  const secure = config.portalSecureCookies
  const formCookie = cookieName(PRESESSION_COOKIE, secure)
  const base = config.publicBaseUrl

  const formCsrf = (request: FastifyRequest, reply: FastifyReply) => preSessionCsrf(kit, request, reply)
  const csrfInput = (csrf: string) => html`<input type="hidden" name="_csrf" value="${csrf}">`
  const formOkSignedOut = (request: FastifyRequest) => signedOutFormOk(kit, request)

  /** send mails in the background: the answer must not wait for (or tell anything by) the SMTP server. */
  function sendMail(request: FastifyRequest, to: string, email: mail.Email): void {
    mailer.send({ to, ...email }).catch((error: Error) => request.log.error({ err: error }, 'email not sent'))
  }

  /** An email link: a fresh single-use token of this purpose, replacing the earlier ones. */
  async function link(user: User, purpose: 'verify-email' | 'reset-password', path: string, ttlMs: number): Promise<string> {
    const { token, idHash } = newSessionToken()
    await store.portal.createToken({ tokenHash: idHash, purpose, email: user.email, userId: user.id, expiresAt: iso(now() + ttlMs) })
    return `${base}/portal/${path}?token=${token}`
  }

  /** audit records a user's event in each of their accounts (auditUser), or an unknown email's attempt once, as anonymous. */
  async function audit(request: FastifyRequest, user: User | null, action: string, outcome: 'success' | 'failure', detail: Record<string, unknown>, target?: string): Promise<void> {
    if (user !== null) return auditUser(kit, request, user, action, outcome, detail)
    await store.audit.append({ actor: 'anonymous', action, target: { type: 'user', id: (target ?? '').slice(0, 320) }, accountId: null, ip: request.ip, outcome, detail })
  }

  // Sign in

  const signInForm = (csrf: string, opts: { email?: string; error?: string | null; notice?: string | null; next?: string } = {}) => html`
${notice(opts.notice ?? null)}${alert(opts.error ?? null)}
<form method="post" action="/portal/sign-in">
${csrfInput(csrf)}
${opts.next && opts.next !== '/portal/home' ? html`<input type="hidden" name="next" value="${opts.next}">` : ''}
${field({ id: 'email', label: 'Email', type: 'email', autocomplete: 'username', value: opts.email ?? '' })}
${field({ id: 'password', label: 'Password', type: 'password', autocomplete: 'current-password', extra: html` maxlength="${MAX_PASSWORD_LENGTH}"` })}
<button type="submit">Sign in</button>
</form>
<p>${config.signupMode === 'closed' ? 'New here? Ask an account owner for an invitation.' : html`No account yet? <a href="/portal/sign-up">Sign up</a>.`} <a href="/portal/reset">Forgot your password?</a></p>`

  const NOTICES: Record<string, string> = {
    confirmed: 'Your email address is confirmed. Sign in to continue.',
    reset: 'Your password is changed, and every other session is signed out. Sign in with the new one.',
    'signed-out': 'You are signed out.',
  }

  app.get<{ Querystring: { next?: string; notice?: string } }>('/sign-in', { schema: { hide: true } }, async (request, reply) => {
    const next = safeNext(request.query.next)
    if ((await sessionOf(kit, request)) !== null) return reply.redirect(next, 303)
    const said = typeof request.query.notice === 'string' ? NOTICES[request.query.notice] ?? null : null
    return sendPage(kit, reply, { title: 'Sign in', body: signInForm(formCsrf(request, reply), { next, notice: said }) })
  })

  app.post('/sign-in', { schema: { hide: true } }, async (request, reply) => {
    const next = safeNext(formField(request, 'next'))
    if (!formOkSignedOut(request)) {
      return sendPage(kit, reply, { title: 'Sign in', status: 403, body: signInForm(formCsrf(request, reply), { next, error: 'This form has expired. Please sign in again.' }) })
    }
    const pre = readCookie(request.headers.cookie, formCookie)!
    const again = (status: number, error: string, email: string) =>
      sendPage(kit, reply, { title: 'Sign in', status, body: signInForm(csrfToken(pepper, sessionIdHash(pre)), { email, error, next }) })
    const email = formField(request, 'email').slice(0, MAX_EMAIL + 1)
    const body = request.body as Record<string, unknown>
    const password = typeof body.password === 'string' ? body.password : ''

    const wait = await kit.throttle.blocked(emailKey(email), request.ip)
    if (wait > 0) {
      reply.header('retry-after', String(wait))
      kit.metrics.signIn('throttled')
      return again(429, `Too many attempts. Try again in ${mail.duration(wait * 1000)}.`, email)
    }
    const user = email === '' || email.length > MAX_EMAIL ? null : await store.portal.findUserByEmail(email)
    // An unknown email takes as long as a wrong password (a dummy hash), and gets the same words.
    let ok: boolean
    try {
      ok = await passwords.verify(password, user?.passwordHash ?? null)
    } catch (error) {
      // Never checked (the hash queue was full: 503): not counted either.
      await kit.throttle.release(emailKey(email), request.ip)
      throw error
    }
    const lockedFor = await kit.throttle.settle(emailKey(email), request.ip, ok && user !== null)
    if (!ok || user === null) {
      kit.metrics.signIn('wrong')
      await audit(request, user, 'user.sign-in', 'failure', { reason: 'wrong email or password' }, emailKey(email))
      if (lockedFor > 0) reply.header('retry-after', String(lockedFor))
      return again(401, 'The email or the password is wrong.', email)
    }
    if (user.emailVerifiedAt === null) {
      kit.metrics.signIn('unconfirmed')
      await audit(request, user, 'user.sign-in', 'failure', { reason: 'email not confirmed' })
      if (await kit.limits.mail('sign-up', user.email)) sendMail(request, user.email, mail.verifyEmail({ link: await link(user, 'verify-email', 'verify-email', VERIFY_TTL_MS), validForMs: VERIFY_TTL_MS }))
      return again(403, `Please confirm your email address first: open the link we have sent you (a new one at most every ${mailWindow}).`, email)
    }
    if (user.status !== 'active') {
      kit.metrics.signIn(user.status === 'pending' ? 'pending' : 'disabled')
      await audit(request, user, 'user.sign-in', 'failure', { reason: `user ${user.status}` })
      return again(403, user.status === 'pending' ? 'Your sign-up is waiting for an operator\'s approval; we will email you when it is approved.' : 'This sign-in is disabled. Ask your operator.', email)
    }
    if (passwords.needsRehash(user.passwordHash!)) await store.portal.updateUser(user.id, { passwordHash: await passwords.hash(password) }, null)
    // A new session id at every sign-in (no fixation); the pre-session ends.
    const twoFactor = user.totpEnabledAt !== null
    const session = newSessionToken()
    await store.portal.createSession({
      idHash: session.idHash, userId: user.id, expiresAt: iso(now() + (twoFactor ? 10 * 60_000 : kit.sessionTtlMs)), twoFactorPending: twoFactor,
      ip: request.ip, userAgent: typeof request.headers['user-agent'] === 'string' ? request.headers['user-agent'].slice(0, 256) : null,
    })
    kit.metrics.signIn(twoFactor ? 'second factor' : 'ok')
    if (!twoFactor) await audit(request, user, 'user.sign-in', 'success', {})
    reply.header('set-cookie', [setCookie(SESSION_COOKIE, session.token, secure, Math.floor(kit.sessionTtlMs / 1000)), setCookie(PRESESSION_COOKIE, '', secure, 0)])
    return reply.redirect(twoFactor ? `/portal/two-factor${next === '/portal/home' ? '' : `?next=${encodeURIComponent(next)}`}` : next, 303)
  })

  app.post('/sign-out', { schema: { hide: true } }, async (request, reply) => {
    const current = await sessionOf(kit, request, { pendingToo: true })
    if (current === null) return reply.redirect('/portal/sign-in', 303)
    const body = (request.body ?? {}) as Record<string, unknown>
    if (!sameOrigin(request.headers, originsOf(kit, request)) || !checkCsrf(pepper, current.session.idHash, body._csrf)) {
      return sendPage(kit, reply, { title: 'Sign out', status: 403, current, body: html`<p class="error" role="alert">This form has expired. <a href="/portal/home">Back</a>.</p>` })
    }
    if (body.everywhere === '1') await store.portal.deleteSessionsOf(current.user.id)
    else await store.portal.deleteSession(current.session.idHash)
    await audit(request, current.user, 'user.sign-out', 'success', { everywhere: body.everywhere === '1' })
    reply.header('set-cookie', setCookie(SESSION_COOKIE, '', secure, 0))
    return reply.redirect('/portal/sign-in?notice=signed-out', 303)
  })

  // Sign up

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

  const closed = (reply: FastifyReply) => sendPage(kit, reply, { title: 'Sign up', status: 403, body: html`<p role="alert">Sign-ups are closed on this service: ask an account owner to invite you, or your operator. <a href="/portal/sign-in">Sign in</a></p>` })

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
      return sendPage(kit, reply, { title: 'Sign up', status: 403, body: html`${alert('This form has expired. Please try again.')}${signUpForm(formCsrf(request, reply), { email, account: accountName })}` })
    }
    const problems: Problem[] = []
    const badEmail = checkEmail(email)
    if (badEmail) problems.push({ field: 'email', text: `Enter ${badEmail}.` })
    const badPassword = checkPassword(password)
    if (badPassword) problems.push({ field: 'password', text: `Choose a password of ${badPassword}.` })
    if ([...accountName].length > 200 || /[\u0000-\u001f\u007f]/.test(accountName)) problems.push({ field: 'account', text: 'Use at most 200 characters, on one line.' })
    if (problems.length > 0) {
      return sendPage(kit, reply, { title: 'Sign up', status: 422, body: html`${alert('Please correct the fields below.')}${signUpForm(formCsrf(request, reply), { email, account: accountName, problems })}` })
    }
    // Counted before any work: a refused sign-up costs no hash, writes nothing and sends nothing.
    const wait = await kit.limits.signUp(request.ip)
    if (wait > 0) {
      reply.header('retry-after', String(wait))
      return sendPage(kit, reply, { title: 'Sign up', status: 429, body: html`${alert(`Too many sign-ups from your network, or on this service, just now. Try again in ${mail.duration(wait * 1000)}.`)}${signUpForm(formCsrf(request, reply), { email, account: accountName })}` })
    }
    // Hashed before anything is looked up: a known email costs the same time as a new one. In
    // the sign-up lane: a flood of sign-ups never takes the hashes sign-ins need.
    const hash = await passwords.hash(password, 'sign-up')
    const user: User = {
      id: `usr_${newSessionToken().token.slice(0, 22)}`, email, passwordHash: hash, emailVerifiedAt: null,
      status: config.signupMode === 'approval' ? 'pending' : 'active', operator: false, totpSecret: null, totpEnabledAt: null,
      createdAt: iso(now()), updatedAt: iso(now()),
    }
    const draft = userDraft(request, user, 'user.sign-up', { mode: config.signupMode })
    if (await store.portal.createUser(user, draft)) {
      kit.metrics.signUp()
      const ctx = { actor: { type: 'portal-user' as const, id: user.id }, ip: request.ip }
      // The account and its owner in one write (a user left without one, by a crash between the
      // two writes, creates one from the home page).
      await kit.accounts.createOwnedAccount(ctx, user.id, { name: accountName === '' ? email.slice(0, 200) : accountName })
      if (await kit.limits.mail('sign-up', user.email)) sendMail(request, user.email, mail.verifyEmail({ link: await link(user, 'verify-email', 'verify-email', VERIFY_TTL_MS), validForMs: VERIFY_TTL_MS }))
    } else {
      const known = await store.portal.findUserByEmail(email)
      if (known !== null && known.emailVerifiedAt === null && known.status !== 'disabled') {
        // Never confirmed: this sign-up's password becomes the pending one (unless a
        // confirmation has just won), and confirming will ask for it.
        const replaced = await store.portal.setPendingPassword(known.id, hash, userDraft(request, known, 'user.sign-up', { mode: config.signupMode, again: true }))
        // With no new email, the last link sent stays live and confirms this password.
        if (replaced && (await kit.limits.mail('sign-up', known.email))) {
          sendMail(request, known.email, mail.verifyEmail({ link: await link(known, 'verify-email', 'verify-email', VERIFY_TTL_MS), validForMs: VERIFY_TTL_MS }))
        }
      } else if (known !== null && (await kit.limits.mail('sign-up', known.email))) {
        sendMail(request, known.email, mail.alreadyRegistered({ signInUrl: `${base}/portal/sign-in`, resetUrl: `${base}/portal/reset` }))
      }
    }
    return sendPage(kit, reply, { title: 'Check your inbox', body: html`<p role="status">We have sent a link to ${email}. Open it to confirm your address; it works once, for ${mail.duration(VERIFY_TTL_MS)}, and asks for the password you have just chosen.</p><p>No email? Look in your spam folder. We send at most one every ${mailWindow}: if you signed up twice, the link in the earlier email works too, with the password you chose last.</p>` })
  })

  // Confirming an address: the link shows a button; the post consumes the token.

  const tokenOf = (request: FastifyRequest): string => {
    const t = (request.query as { token?: unknown }).token ?? ((request.body ?? {}) as Record<string, unknown>).token
    return typeof t === 'string' && isToken(t) ? t : ''
  }
  const deadLink = (reply: FastifyReply, what: string, again: Html) =>
    sendPage(kit, reply, { title: 'Link expired', status: 400, body: html`<p role="alert">This ${what} link has expired, was already used, or was replaced by a newer one.</p><p>${again}</p>` })

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
    sendPage(kit, reply, { title: 'Confirm your email address', body: confirmForm(formCsrf(request, reply), tokenOf(request)) }))

  app.post('/verify-email', { schema: { hide: true } }, async (request, reply) => {
    const again = html`<a href="/portal/sign-up">Sign up again</a> to get a new one.`
    if (!formOkSignedOut(request)) return deadLink(reply, 'confirmation', html`Open the link from the email again.`)
    const token = tokenOf(request)
    const body = request.body as Record<string, unknown>
    const password = typeof body.password === 'string' ? body.password : ''
    // Read, not used: a wrong password leaves the link as it was.
    const found = token === '' ? null : await store.portal.findToken(sessionIdHash(token), 'verify-email', iso(now()))
    const user = found?.userId ? await store.portal.getUser(found.userId) : null
    if (found === null || user === null) return deadLink(reply, 'confirmation', again)
    // The link proves the inbox; the password proves the sign-up: only both confirm.
    const pending = user.passwordHash
    if (user.emailVerifiedAt === null && !(await passwords.verify(password, pending))) {
      await audit(request, user, 'user.verify-email', 'failure', { reason: 'not the pending password' })
      return sendPage(kit, reply, { title: 'Confirm your email address', status: 422, body: confirmForm(formCsrf(request, reply), token,
        'That is not the password of the last sign-up for this address. Enter the password you chose when you last signed up, or sign up again to choose one.') })
    }
    if ((await store.portal.consumeToken(sessionIdHash(token), 'verify-email', iso(now()))) === null) return deadLink(reply, 'confirmation', again)
    if (user.emailVerifiedAt === null) {
      // The password checked is the one kept, whatever a sign-up did meanwhile.
      await store.portal.updateUser(user.id, { emailVerifiedAt: iso(now()), passwordHash: pending }, userDraft(request, user, 'user.verify-email'))
    }
    if (user.status === 'pending') {
      await notifyOperators(request, user)
      sendMail(request, user.email, mail.signupAwaitingApproval({ portalUrl: `${base}/portal/sign-in` }))
      return sendPage(kit, reply, { title: 'Address confirmed', body: html`<p role="status">Thank you: your address is confirmed. An operator approves each new account; we will email you when yours is ready.</p>` })
    }
    return reply.redirect('/portal/sign-in?notice=confirmed', 303)
  })

  /** notifyOperators tells every operator that a confirmed sign-up waits for them. */
  async function notifyOperators(request: FastifyRequest, user: User): Promise<void> {
    const account = (await store.portal.membershipsOf(user.id))[0]
    let cursor: string | undefined
    for (let pages = 0; pages < 10; pages++) {
      const page = await store.portal.listUsers({ status: 'active', limit: 500, ...(cursor === undefined ? {} : { cursor }) })
      for (const op of page.items) {
        if (op.operator) sendMail(request, op.email, mail.signupToApprove({ email: user.email, accountName: account?.accountName ?? '', link: `${base}/portal/operator/sign-ups` }))
      }
      if (page.next === null) break
      cursor = page.next
    }
  }

  // Password reset

  const resetForm = (csrf: string) => html`
<form method="post" action="/portal/reset">
${csrfInput(csrf)}
${field({ id: 'email', label: 'Email', type: 'email', autocomplete: 'username' })}
<button type="submit">Send me a reset link</button>
</form>
<p><a href="/portal/sign-in">Back to sign-in</a></p>`

  app.get('/reset', { schema: { hide: true } }, async (request, reply) =>
    sendPage(kit, reply, { title: 'Reset your password', body: resetForm(formCsrf(request, reply)) }))

  app.post('/reset', { schema: { hide: true } }, async (request, reply) => {
    if (!formOkSignedOut(request)) return sendPage(kit, reply, { title: 'Reset your password', status: 403, body: html`${alert('This form has expired. Please try again.')}${resetForm(formCsrf(request, reply))}` })
    const email = formField(request, 'email')
    // The same answer whatever the address; the lookup and the email happen after it is sent.
    setImmediate(() => {
      void (async () => {
        // Counted whether or not the address has an account: once per address per window, and per source.
        if (checkEmail(email) !== null || !(await kit.limits.mail('reset', email, request.ip))) return
        const user = await store.portal.findUserByEmail(email)
        if (user === null || user.status === 'disabled') return
        sendMail(request, user.email, mail.resetPassword({ link: await link(user, 'reset-password', 'reset/confirm', RESET_TTL_MS), validForMs: RESET_TTL_MS }))
        await audit(request, user, 'user.reset-request', 'success', {})
      })().catch((error: Error) => request.log.error({ err: error }, 'password reset not sent'))
    })
    return sendPage(kit, reply, { title: 'Check your inbox', body: html`<p role="status">If an account uses ${email}, we have sent it a link to choose a new password. It works once, for ${mail.duration(RESET_TTL_MS)}.</p><p><a href="/portal/sign-in">Back to sign-in</a></p>` })
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
    sendPage(kit, reply, { title: 'Choose a new password', body: newPasswordForm(formCsrf(request, reply), tokenOf(request)) }))

  app.post('/reset/confirm', { schema: { hide: true } }, async (request, reply) => {
    const again = html`<a href="/portal/reset">Ask for a new link</a>.`
    if (!formOkSignedOut(request)) return deadLink(reply, 'reset', again)
    const token = tokenOf(request)
    const body = request.body as Record<string, unknown>
    const password = typeof body.password === 'string' ? body.password : ''
    // The rule first: a password refused does not use the link up.
    const bad = checkPassword(password)
    if (bad) return sendPage(kit, reply, { title: 'Choose a new password', status: 422, body: newPasswordForm(formCsrf(request, reply), token, `Choose a password of ${bad}.`) })
    const used = token === '' ? null : await store.portal.consumeToken(sessionIdHash(token), 'reset-password', iso(now()))
    const user = used?.userId ? await store.portal.getUser(used.userId) : null
    if (used === null || user === null) return deadLink(reply, 'reset', again)
    // The link proves the address. Never confirmed before, whatever was set up on the account
    // (a second factor, sessions) was set up by someone who had not proved it: it goes.
    const neverConfirmed = user.emailVerifiedAt === null
    await store.portal.updateUser(user.id, {
      passwordHash: await passwords.hash(password), ...(neverConfirmed ? { emailVerifiedAt: iso(now()), totpSecret: null, totpEnabledAt: null } : {}),
    }, userDraft(request, user, 'user.reset-password', neverConfirmed ? { confirmed: true } : {}))
    if (neverConfirmed) await store.portal.setRecoveryCodes(user.id, [])
    await store.portal.deleteSessionsOf(user.id)
    // The link proved the address: the guesses that locked it are no reason to keep its owner out.
    await kit.throttle.forget(emailKey(user.email))
    return reply.redirect('/portal/sign-in?notice=reset', 303)
  })
}
