/**
 * Accepting an invitation. Opening the link only shows it (mail scanners open links); a
 * form post consumes it, once, atomically, whoever else tries at the same time. What the
 * page offers depends on who opens it:
 * - signed in as the invited address: a button that joins;
 * - signed in as someone else: an explanation and a way to sign out;
 * - signed out, with a sign-in for that address: a link to sign in and come back;
 * - signed out, with none: a password to create the sign-in, which joins and signs in at
 *   once. The link proves the address, and invitations are the way in whatever SIGNUP_MODE.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { html, type Html } from './html.ts'
import type { Current, Kit } from './kit.ts'
import { csrfField, formExpired, formOk, preSessionCsrf, sendPage, sessionOf, signedOutFormOk } from './kit.ts'
import { emailKey, type EmailToken, type User } from '../domain/portal.ts'
import { actorName, type AuditDraft } from '../domain/accounts.ts'
import type { Account } from '../domain/accounts.ts'
import { checkPassword, MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH } from '../services/users/passwords.ts'
import { isToken, newSessionToken, PRESESSION_COOKIE, SESSION_COOKIE, sessionIdHash, setCookie } from './session.ts'

const ACCEPT = '/invitations/accept'

/** invitationLink: the link an invitation's email carries (the account names where to look the token up). */
export function invitationLink(kit: Kit, token: string, accountId: string): string {
  return `${kit.config.publicBaseUrl}/portal${ACCEPT}?token=${token}&account=${encodeURIComponent(accountId)}`
}

/** An invitation found by its link: still pending, with its account. */
interface Found {
  readonly token: string
  readonly invite: EmailToken
  readonly account: Account
}

const passwordRule = `At least ${MIN_PASSWORD_LENGTH} characters; a passphrase of several words is best.`

export default async function invitationPages(app: FastifyInstance, kit: Kit): Promise<void> {
  const { store, config, now } = kit
  const secure = config.portalSecureCookies
  const iso = (ms: number) => new Date(ms).toISOString()

  const param = (request: FastifyRequest, name: string): string => {
    const value = (request.query as Record<string, unknown>)[name] ?? ((request.body ?? {}) as Record<string, unknown>)[name]
    return typeof value === 'string' ? value : ''
  }

  /** find: the pending invitation of the request's link, or null (malformed, unknown, used, expired or replaced). */
  async function find(request: FastifyRequest): Promise<Found | null> {
    const token = param(request, 'token')
    const accountId = param(request, 'account')
    if (!isToken(token) || accountId === '' || accountId.length > 64) return null
    const hash = sessionIdHash(token)
    const invite = (await store.portal.pendingInvites(accountId, iso(now()))).find((t) => t.tokenHash === hash)
    const account = invite === undefined ? null : await store.access.getAccount(accountId)
    return invite === undefined || account === null ? null : { token, invite, account }
  }

  const deadLink = (reply: FastifyReply, current: Current | null) => sendPage(kit, reply, {
    title: 'Invitation not valid', status: 400, current,
    body: html`<p role="alert">This invitation link was already used, has expired, or was replaced by a newer invitation or cancelled.</p><p>Ask the person who invited you for a new invitation.</p>`,
  })

  const hidden = (found: Found) => html`<input type="hidden" name="token" value="${found.token}"><input type="hidden" name="account" value="${found.account.id}">`
  const selfPath = (found: Found) => `/portal${ACCEPT}?token=${found.token}&account=${encodeURIComponent(found.account.id)}`
  const what = (found: Found) => html`<p>You are invited to join the team <strong>${found.account.name}</strong> as <strong>${found.invite.role ?? ''}</strong>. The invitation was sent to ${found.invite.email}.</p>`
  const join = (found: Found) => `Join ${found.account.name} as ${found.invite.role ?? ''}`

  function newUserForm(found: Found, csrf: string, problem: string | null = null): Html {
    return html`${what(found)}
<p>You have no sign-in here yet: choose a password to create it.</p>
<form method="post" action="/portal${ACCEPT}" novalidate>
<input type="hidden" name="_csrf" value="${csrf}">${hidden(found)}
<label for="username">Email</label>
<input id="username" name="username" type="email" autocomplete="username" value="${found.invite.email}" readonly>
<label for="password">Password</label>
<p class="hint" id="password-hint">${passwordRule}</p>
${problem === null ? '' : html`<p class="error" id="password-error" role="alert">${problem}</p>`}
<input id="password" name="password" type="password" autocomplete="new-password" required minlength="${MIN_PASSWORD_LENGTH}" maxlength="${MAX_PASSWORD_LENGTH}" aria-describedby="password-hint${problem === null ? '' : ' password-error'}"${problem === null ? '' : html` aria-invalid="true"`}>
<button type="submit">Create my sign-in and join ${found.account.name}</button>
</form>`
  }

  app.get('/invitations/accept', { schema: { hide: true } }, async (request, reply) => {
    const current = await sessionOf(kit, request)
    const found = await find(request)
    if (found === null) return deadLink(reply, current)
    const title = `Invitation to ${found.account.name}`
    if (current !== null && emailKey(current.user.email) === emailKey(found.invite.email)) {
      return sendPage(kit, reply, { title, current, body: html`${what(found)}
<form method="post" action="/portal${ACCEPT}">${csrfField(kit, current)}${hidden(found)}<button type="submit">${join(found)}</button></form>` })
    }
    if (current !== null) {
      return sendPage(kit, reply, { title, current, body: html`${what(found)}
<p role="alert">You are signed in as ${current.user.email}, but this invitation was sent to another address. Sign out, then open the link again and sign in as ${found.invite.email}.</p>
<form method="post" action="/portal/sign-out">${csrfField(kit, current)}<button type="submit" class="secondary">Sign out ${current.user.email}</button></form>` })
    }
    if ((await store.portal.findUserByEmail(found.invite.email)) !== null) {
      return sendPage(kit, reply, { title, body: html`${what(found)}
<p><a href="/portal/sign-in?next=${encodeURIComponent(selfPath(found))}">Sign in to accept</a> as ${found.invite.email}.</p>` })
    }
    return sendPage(kit, reply, { title, body: newUserForm(found, preSessionCsrf(kit, request, reply)) })
  })

  const joinDraft = (found: Found, user: User, request: FastifyRequest): AuditDraft => ({
    actor: actorName({ type: 'portal-user', id: user.id }), action: 'member.join', target: { type: 'member', id: user.id },
    accountId: found.account.id, ip: request.ip, outcome: 'success', detail: { email: user.email, role: found.invite.role },
  })
  const startPage = (found: Found) => `/portal/accounts/${encodeURIComponent(found.account.id)}/start`
  /** consume uses the invitation up: true for one request only, however many arrive at once. */
  const consume = async (found: Found) => (await store.portal.consumeToken(found.invite.tokenHash, 'invite', iso(now()))) !== null

  app.post('/invitations/accept', { schema: { hide: true } }, async (request, reply) => {
    const current = await sessionOf(kit, request)
    if (current !== null) return acceptSignedIn(request, reply, current)
    if (!signedOutFormOk(kit, request)) {
      return sendPage(kit, reply, { title: 'Form expired', status: 403, body: html`<p class="error" role="alert">This form has expired or did not come from this site; nothing was changed. Open the link from the email again.</p>` })
    }
    const found = await find(request)
    if (found === null) return deadLink(reply, null)
    if ((await store.portal.findUserByEmail(found.invite.email)) !== null) {
      return sendPage(kit, reply, { title: `Invitation to ${found.account.name}`, status: 409, body: html`<p role="alert">${found.invite.email} has a sign-in already.</p>
<p><a href="/portal/sign-in?next=${encodeURIComponent(selfPath(found))}">Sign in to accept</a>.</p>` })
    }
    const password = param(request, 'password')
    // The rule first: a password refused does not use the invitation up; nor does a hash refused when too many run.
    const bad = checkPassword(password)
    if (bad !== null) return sendPage(kit, reply, { title: `Invitation to ${found.account.name}`, status: 422, body: newUserForm(found, preSessionCsrf(kit, request, reply), `Choose a password of ${bad}.`) })
    const passwordHash = await kit.passwords.hash(password)
    if (!(await consume(found))) return deadLink(reply, null)
    const user: User = {
      id: `usr_${newSessionToken().token.slice(0, 22)}`, email: found.invite.email, passwordHash, emailVerifiedAt: iso(now()),
      status: 'active', operator: false, totpSecret: null, totpEnabledAt: null, createdAt: iso(now()), updatedAt: iso(now()),
    }
    const signUp: AuditDraft = { ...joinDraft(found, user, request), action: 'user.sign-up', target: { type: 'user', id: user.id }, accountId: null, detail: { via: 'invitation' } }
    if (!(await store.portal.createUser(user, signUp))) {
      // Someone created a sign-in for this address since the page was shown.
      return sendPage(kit, reply, { title: `Invitation to ${found.account.name}`, status: 409, body: html`<p role="alert">${found.invite.email} has a sign-in already, and this invitation is used up. Sign in, and ask for a new invitation.</p>` })
    }
    await store.portal.addMember(found.account.id, user.id, found.invite.role ?? 'viewer', joinDraft(found, user, request))
    await signIn(request, reply, user)
    return reply.redirect(startPage(found), 303)
  })

  async function acceptSignedIn(request: FastifyRequest, reply: FastifyReply, current: Current): Promise<FastifyReply> {
    if (!formOk(kit, request, current)) return formExpired(kit, reply, current, '/portal/home')
    const found = await find(request)
    if (found === null) return deadLink(reply, current)
    // Checked before it is used up: someone else's click must not spend the invitation.
    if (emailKey(current.user.email) !== emailKey(found.invite.email)) {
      return sendPage(kit, reply, { title: `Invitation to ${found.account.name}`, status: 403, current, body: html`<p role="alert">This invitation was sent to another address than yours (${current.user.email}).</p>` })
    }
    if (!(await consume(found))) return deadLink(reply, current)
    // False when they are a member already: they are where the invitation would take them.
    await store.portal.addMember(found.account.id, current.user.id, found.invite.role ?? 'viewer', joinDraft(found, current.user, request))
    return reply.redirect(startPage(found), 303)
  }

  /** signIn starts a session for a user who just proved their address and chose a password (a new id; the pre-session ends). */
  async function signIn(request: FastifyRequest, reply: FastifyReply, user: User): Promise<void> {
    const session = newSessionToken()
    await store.portal.createSession({
      idHash: session.idHash, userId: user.id, expiresAt: iso(now() + kit.sessionTtlMs), twoFactorPending: false,
      ip: request.ip, userAgent: typeof request.headers['user-agent'] === 'string' ? request.headers['user-agent'].slice(0, 256) : null,
    })
    reply.header('set-cookie', [setCookie(SESSION_COOKIE, session.token, secure, Math.floor(kit.sessionTtlMs / 1000)), setCookie(PRESESSION_COOKIE, '', secure, 0)])
  }
}
