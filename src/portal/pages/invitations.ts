/**
 * Accepting an invitation. Opening the link only shows it (mail scanners open links); a
 * form post consumes it, once, atomically, whoever else tries at the same time. What the
 * page offers depends on who opens it:
 * - signed in as the invited address: a button that joins;
 * - signed in as someone else: an explanation and a way to sign out;
 * - signed out, with a sign-in for that address: a link to sign in and come back;
 * - signed out, with none: a password to create the sign-in, which joins and signs in at
 *   once. The link proves the address, and invitations are the way in whatever SIGNUP_MODE.
 * An operator invitation (a link without an account) goes the same way, and makes its
 * accepter an operator; a user who never confirmed the address does not count as a sign-in
 * there (services/operators.ts).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { html, type Html } from '../web/html.ts'
import type { Current, Kit } from '../web/kit.ts'
import { actorOf, csrfField, formExpired, formOk, preSessionCsrf, sendPage, sessionOf, signedOutFormOk } from '../web/kit.ts'
import { emailKey } from '../../domain/portal.ts'
import { isFailure } from '../../services/outcome.ts'
import type { FoundInvitation } from '../../services/team.ts'
import { checkPassword, MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH } from '../../services/users/passwords.ts'
import { newSessionToken, PRESESSION_COOKIE, SESSION_COOKIE, setCookie } from '../web/session.ts'

const ACCEPT = '/invitations/accept'

/** invitationLink: the link an invitation's email carries (the account names where to look the token up; none: an operator invitation). */
export function invitationLink(kit: Pick<Kit, 'config'>, token: string, accountId: string | null): string {
  return `${kit.config.publicBaseUrl}${acceptPath(token, accountId)}`
}

const acceptPath = (token: string, accountId: string | null) =>
  `/portal${ACCEPT}?token=${token}${accountId === null ? '' : `&account=${encodeURIComponent(accountId)}`}`

/** An invitation found by its link (still pending, with its account), and the link's token for the forms. */
interface Found extends FoundInvitation {
  readonly token: string
}

const passwordRule = `At least ${MIN_PASSWORD_LENGTH} characters; a passphrase of several words is best.`

const param = (request: FastifyRequest, name: string): string => {
  const value = (request.query as Record<string, unknown>)[name] ?? ((request.body ?? {}) as Record<string, unknown>)[name]
  return typeof value === 'string' ? value : ''
}

/** find: the pending invitation of the request's link, or null (malformed, unknown, used, expired or replaced). */
async function find(kit: Kit, request: FastifyRequest): Promise<Found | null> {
  const token = param(request, 'token')
  const found = await kit.team.findInvitation(token, param(request, 'account'))
  return found === null ? null : { ...found, token }
}

const deadLink = (kit: Kit, reply: FastifyReply, current: Current | null) =>
  sendPage(kit, reply, {
    title: 'Invitation not valid',
    status: 400,
    current,
    body: html`<p role="alert">This invitation link was already used, has expired, or was replaced by a newer invitation or cancelled.</p><p>Ask the person who invited you for a new invitation.</p>`,
  })

const hidden = (found: Found) =>
  html`<input type="hidden" name="token" value="${found.token}">${found.account === null ? '' : html`<input type="hidden" name="account" value="${found.account.id}">`}`
const selfPath = (found: Found) => acceptPath(found.token, found.account?.id ?? null)
const titleOf = (found: Found) => (found.account === null ? 'Invitation to operate Tessera' : `Invitation to ${found.account.name}`)
const what = (found: Found) =>
  found.account === null
    ? html`<p>You are invited to be an <strong>operator</strong> of this Tessera node: you will see and act in every account from the portal. The invitation was sent to ${found.invitation.email}.</p>`
    : html`<p>You are invited to join the team <strong>${found.account.name}</strong> as <strong>${found.invitation.role ?? ''}</strong>. The invitation was sent to ${found.invitation.email}.</p>`
const join = (found: Found) => (found.account === null ? 'Accept and become an operator' : `Join ${found.account.name} as ${found.invitation.role ?? ''}`)
const createLabel = (found: Found) => (found.account === null ? 'Create my sign-in and become an operator' : `Create my sign-in and join ${found.account.name}`)

function newUserForm(found: Found, csrf: string, problem: string | null = null): Html {
  return html`${what(found)}
<p>You have no sign-in here yet: choose a password to create it.</p>
<form method="post" action="/portal${ACCEPT}" novalidate>
<input type="hidden" name="_csrf" value="${csrf}">${hidden(found)}
<label for="username">Email</label>
<input id="username" name="username" type="email" autocomplete="username" value="${found.invitation.email}" readonly>
<label for="password">Password</label>
<p class="hint" id="password-hint">${passwordRule}</p>
${problem === null ? '' : html`<p class="error" id="password-error" role="alert">${problem}</p>`}
<input id="password" name="password" type="password" autocomplete="new-password" required minlength="${MIN_PASSWORD_LENGTH}" maxlength="${MAX_PASSWORD_LENGTH}" aria-describedby="password-hint${problem === null ? '' : ' password-error'}"${problem === null ? '' : html` aria-invalid="true"`}>
<button type="submit">${createLabel(found)}</button>
</form>`
}

const startPage = (found: Found) => (found.account === null ? '/portal/operator' : `/portal/accounts/${encodeURIComponent(found.account.id)}/start`)

/** acceptSignedIn: a signed-in user joins the account of the invitation, when it was sent to their address. */
async function acceptSignedIn(kit: Kit, request: FastifyRequest, reply: FastifyReply, current: Current): Promise<FastifyReply> {
  if (!formOk(kit, request, current)) return formExpired(kit, reply, current, '/portal/home')
  const found = await find(kit, request)
  if (found === null) return deadLink(kit, reply, current)
  // The address is checked before the invitation is used up: someone else's click must not spend it.
  const joined = await kit.team.join(actorOf(current, request), current.user, found)
  if (isFailure(joined) && joined.refusal === 'wrong-address') {
    return sendPage(kit, reply, {
      title: titleOf(found),
      status: 403,
      current,
      body: html`<p role="alert">This invitation was sent to another address than yours (${current.user.email}).</p>`,
    })
  }
  if (isFailure(joined)) return deadLink(kit, reply, current)
  return reply.redirect(startPage(found), 303)
}

/** GET: the invitation of the link, with what its reader can do: join (signed in as its address), sign out (signed in as another), sign in, or choose a password. */
async function invitationPage(kit: Kit, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const current = await sessionOf(kit, request)
  const found = await find(kit, request)
  if (found === null) return deadLink(kit, reply, current)
  const title = titleOf(found)
  if (current !== null && emailKey(current.user.email) === emailKey(found.invitation.email)) {
    return sendPage(kit, reply, {
      title,
      current,
      body: html`${what(found)}
<form method="post" action="/portal${ACCEPT}">${csrfField(kit, current)}${hidden(found)}<button type="submit">${join(found)}</button></form>`,
    })
  }
  if (current !== null) {
    return sendPage(kit, reply, {
      title,
      current,
      body: html`${what(found)}
<p role="alert">You are signed in as ${current.user.email}, but this invitation was sent to another address. Sign out, then open the link again and sign in as ${found.invitation.email}.</p>
<form method="post" action="/portal/sign-out">${csrfField(kit, current)}<button type="submit" class="secondary">Sign out ${current.user.email}</button></form>`,
    })
  }
  if (await kit.team.signInNeeded(found)) {
    return sendPage(kit, reply, {
      title,
      body: html`${what(found)}
<p><a href="/portal/sign-in?next=${encodeURIComponent(selfPath(found))}">Sign in to accept</a> as ${found.invitation.email}.</p>`,
    })
  }
  return sendPage(kit, reply, { title, body: newUserForm(found, preSessionCsrf(kit, request, reply)) })
}

/** POST: join the account, signed in; or, signed out, make the invited address's sign-in and join. */
async function acceptInvitation(kit: Kit, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const current = await sessionOf(kit, request)
  if (current !== null) return acceptSignedIn(kit, request, reply, current)
  if (!signedOutFormOk(kit, request)) {
    return sendPage(kit, reply, {
      title: 'Form expired',
      status: 403,
      body: html`<p class="error" role="alert">This form has expired or did not come from this site; nothing was changed. Open the link from the email again.</p>`,
    })
  }
  const found = await find(kit, request)
  if (found === null) return deadLink(kit, reply, null)
  if (await kit.team.signInNeeded(found)) {
    return sendPage(kit, reply, {
      title: titleOf(found),
      status: 409,
      body: html`<p role="alert">${found.invitation.email} has a sign-in already.</p>
<p><a href="/portal/sign-in?next=${encodeURIComponent(selfPath(found))}">Sign in to accept</a>.</p>`,
    })
  }
  const password = param(request, 'password')
  // The rule first: a password refused does not use the invitation up; nor does a hash refused when too many run.
  const bad = checkPassword(password)
  if (bad !== null)
    return sendPage(kit, reply, {
      title: titleOf(found),
      status: 422,
      body: newUserForm(found, preSessionCsrf(kit, request, reply), `Choose a password of ${bad}.`),
    })
  const passwordHash = await kit.passwords.hash(password)
  const session = newSessionToken()
  const userAgent = typeof request.headers['user-agent'] === 'string' ? request.headers['user-agent'].slice(0, 256) : null
  const user = await kit.team.signUpAndJoin(found, { passwordHash, sessionIdHash: session.idHash, ip: request.ip, userAgent })
  if (isFailure(user)) {
    if (user.refusal === 'no-invitation') return deadLink(kit, reply, null)
    // Someone created a sign-in for this address since the page was shown.
    return sendPage(kit, reply, {
      title: titleOf(found),
      status: 409,
      body: html`<p role="alert">${found.invitation.email} has a sign-in already, and this invitation is used up. Sign in, and ask for a new invitation.</p>`,
    })
  }
  // A new session for a user who just proved their address and chose a password; the pre-session ends.
  const cookie = setCookie(SESSION_COOKIE, session.token, kit.config.portalSecureCookies, Math.floor(kit.sessionTtlMs / 1000))
  reply.header('set-cookie', [cookie, setCookie(PRESESSION_COOKIE, '', kit.config.portalSecureCookies, 0)])
  return reply.redirect(startPage(found), 303)
}

export default async function invitationPages(app: FastifyInstance, kit: Kit): Promise<void> {
  app.get('/invitations/accept', { schema: { hide: true } }, (request, reply) => invitationPage(kit, request, reply))

  app.post('/invitations/accept', { schema: { hide: true } }, (request, reply) => acceptInvitation(kit, request, reply))
}
