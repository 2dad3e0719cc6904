/**
 * The team page of an account: its members with their roles, its pending invitations, and
 * (for admins and owners) the forms that invite, change roles, remove and cancel. The rules
 * (an admin manages the team but not its owners, nor makes any; an account keeps at least
 * one owner; anyone may leave, but its last owner) are the team service's: this page shows
 * them and words its refusals. Accepting an invitation is in invitations.ts.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { html, wide, type Html } from '../web/html.ts'
import type { InAccount, Kit } from '../web/kit.ts'
import { actorOf, atLeast, csrfField, formExpired, formField, formOk, pageRoute, sendPage, whoIn } from '../web/kit.ts'
import type { Member, Role } from '../../domain/portal.ts'
import { isFailure } from '../../services/outcome.ts'
import { INVITE_TTL_MS, mayManage, rolesOffered, type TeamFailure } from '../../services/team.ts'
import { checkEmail } from './auth.ts'
import * as mail from '../../mail/templates.ts'
import invitationPages, { invitationLink } from './invitations.ts'

export { INVITE_TTL_MS, mayManage, rolesOffered }

/** Styles of these pages, added to the portal's one stylesheet. */
export const css = `
.team-actions { display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; }
.team-actions form.row { gap: .5rem; align-items: center; }
`

/** The longest email address (RFC 5321's path limit), as auth.ts. */
const MAX_EMAIL = 254

const day = (iso: string) => html`<time datetime="${iso}">${iso.slice(0, 10)}</time>`
const minute = (iso: string) => html`<time datetime="${iso}">${iso.slice(0, 16).replace('T', ' ')} UTC</time>`
const vh = (text: string) => html`<span class="visually-hidden">${text}</span>`

/** What the page says after a change (post/redirect/get): fixed words, nothing taken from the query. */
const DONE: Readonly<Record<string, string>> = {
  invited: `The invitation is sent. It works once, for ${mail.duration(INVITE_TTL_MS)}.`,
  role: 'The role is changed.',
  removed: 'The member is removed.',
  cancelled: 'The invitation is cancelled: its link no longer works.',
}

interface Said {
  readonly status?: number
  readonly error?: string
  readonly notice?: string
  /** The invite form's values, kept after a refusal. */
  readonly email?: string
  readonly role?: string
}

const teamPath = (ctx: InAccount) => `/portal/accounts/${encodeURIComponent(ctx.account.id)}/team`

const roleSelect = (id: string, offered: readonly Role[], selected: string) =>
  html`<select id="${id}" name="role">${offered.map((r) => html`<option value="${r}"${r === selected ? html` selected` : ''}>${r}</option>`)}</select>`

/** memberRow: one member, with the forms the signed-in user may use on them. */
function memberRow(kit: Kit, ctx: InAccount, m: Member, index: number): Html {
  const action = (what: string) => `${teamPath(ctx)}/${what}`
  const self = m.userId === ctx.user.id
  const manage = mayManage(ctx.role, m.role)
  const forms = !manage
    ? ''
    : html`<div class="team-actions">
<form method="post" action="${action('role')}" class="row">${csrfField(kit, ctx)}<input type="hidden" name="user" value="${m.userId}">
<label for="role-${index}" class="visually-hidden">Role of ${m.email}</label>${roleSelect(`role-${index}`, rolesOffered(ctx.role), m.role)}
<button type="submit" class="secondary">Change role${vh(` of ${m.email}`)}</button></form>
${
  self
    ? ''
    : html`<form method="post" action="${action('remove')}" class="inline">${csrfField(kit, ctx)}<input type="hidden" name="user" value="${m.userId}">
<button type="submit" class="danger">Remove${vh(` ${m.email}`)}</button></form>`
}</div>`
  return html`<tr><th scope="row">${m.email}${self ? ' (you)' : ''}</th><td>${m.role}</td><td>${day(m.createdAt)}</td>${atLeast(ctx.role, 'admin') ? html`<td>${forms}</td>` : ''}</tr>`
}

function inviteForm(kit: Kit, ctx: InAccount, said: Said): Html {
  return html`<h2>Invite someone</h2>
<form method="post" action="${teamPath(ctx)}/invite" class="row">${csrfField(kit, ctx)}
<div><label for="invite-email">Email</label><input id="invite-email" name="email" type="email" required maxlength="${MAX_EMAIL}" autocomplete="off" value="${said.email ?? ''}"></div>
<div><label for="invite-role">Role</label>${roleSelect('invite-role', rolesOffered(ctx.role), said.role ?? 'developer')}</div>
<button type="submit">Send the invitation</button>
</form>
<p class="hint">Viewers read; developers also manage keys and subscriptions; admins also the team; owners everything.</p>`
}

function leaveSection(kit: Kit, ctx: InAccount, members: readonly Member[]): Html {
  const me = members.find((m) => m.userId === ctx.user.id)
  if (me === undefined) return html``
  const lastOwner = me.role === 'owner' && members.filter((m) => m.role === 'owner').length === 1
  return html`<h2>Leave the account</h2>${
    lastOwner
      ? html`<p>You are the only owner of ${ctx.account.name}: make another member owner before you leave.</p>`
      : html`<form method="post" action="${teamPath(ctx)}/leave">${csrfField(kit, ctx)}<button type="submit" class="danger">Leave ${ctx.account.name}</button></form>`
  }`
}

/** render sends the team page: a fixed number of queries however large the team. */
async function render(kit: Kit, reply: FastifyReply, ctx: InAccount, said: Said = {}): Promise<FastifyReply> {
  const [members, invites] = await Promise.all([kit.team.members(ctx.account.id), kit.team.pendingInvitations(ctx.account.id)])
  const admin = atLeast(ctx.role, 'admin')
  const cancel = (
    email: string,
  ) => html`<form method="post" action="${teamPath(ctx)}/cancel" class="inline">${csrfField(kit, ctx)}<input type="hidden" name="email" value="${email}">
<button type="submit" class="secondary">Cancel the invitation${vh(` of ${email}`)}</button></form>`
  return sendPage(kit, reply, {
    title: 'Team',
    current: ctx,
    status: said.status ?? 200,
    account: { id: ctx.account.id, name: ctx.account.name, here: 'team' },
    body: html`
${said.notice ? html`<p class="notice" role="status">${said.notice}</p>` : ''}${said.error ? html`<p class="error" role="alert">${said.error}</p>` : ''}
${wide(
  `Members of ${ctx.account.name}`,
  html`<table>
<caption>Members of ${ctx.account.name}</caption>
<thead><tr><th scope="col">Email</th><th scope="col">Role</th><th scope="col">Member since</th>${admin ? html`<th scope="col">Actions</th>` : ''}</tr></thead>
<tbody>${members.map((m, i) => memberRow(kit, ctx, m, i))}</tbody>
</table>`,
)}
${
  invites.length === 0
    ? html`<p>No invitation is pending.</p>`
    : wide(
        'Pending invitations',
        html`<table>
<caption>Pending invitations</caption>
<thead><tr><th scope="col">Email</th><th scope="col">Role</th><th scope="col">Expires</th>${admin ? html`<th scope="col">Actions</th>` : ''}</tr></thead>
<tbody>${invites.map((t) => html`<tr><th scope="row">${t.email}</th><td>${t.role ?? ''}</td><td>${minute(t.expiresAt)}</td>${admin ? html`<td>${cancel(t.email)}</td>` : ''}</tr>`)}</tbody>
</table>`,
      )
}
${admin ? inviteForm(kit, ctx, said) : html`<p>Admins and owners of ${ctx.account.name} invite members and change their roles.</p>`}
${leaveSection(kit, ctx, members)}`,
  })
}

/** form: the caller (let through by the route's role hook) behind a genuine form, or null with the answer sent. */
function form(kit: Kit, request: FastifyRequest, reply: FastifyReply): InAccount | null {
  const ctx = whoIn(request)
  if (!formOk(kit, request, ctx)) {
    formExpired(kit, reply, ctx, teamPath(ctx))
    return null
  }
  return ctx
}

const done = (reply: FastifyReply, ctx: InAccount, what: keyof typeof DONE) => reply.redirect(`${teamPath(ctx)}?done=${what}`, 303)
/** lastOwner: why a change was refused, about a member (`email`) or oneself (null). */
const lastOwner = (ctx: InAccount, email: string | null) =>
  `${email === null ? 'You are' : `${email} is`} the last owner of ${ctx.account.name}, and an account keeps at least one owner: make another member owner first.`

/** refusedChange answers a refused change of a member (its role, or their removal) in the page's words. */
function refusedChange(kit: Kit, reply: FastifyReply, ctx: InAccount, refused: TeamFailure): Promise<FastifyReply> {
  const email = refused.member?.email ?? ''
  switch (refused.refusal) {
    case 'bad-role':
      return render(kit, reply, ctx, { status: 422, error: 'Choose a role: owner, admin, developer or viewer.' })
    case 'owner-only':
      return render(
        kit,
        reply,
        ctx,
        refused.member === undefined
          ? { status: 403, error: 'Only an owner can make owners.' }
          : { status: 403, error: `Only an owner can change or remove an owner (${email}).` },
      )
    case 'last-owner':
      return render(kit, reply, ctx, { status: 409, error: lastOwner(ctx, email) })
    default:
      return render(
        kit,
        reply,
        ctx,
        refused.member === undefined
          ? { status: 409, error: 'That person is not a member of this account (any more).' }
          : { status: 409, error: `${email} is not a member of this account any more.` },
      )
  }
}

export default async function teamPages(app: FastifyInstance, kit: Kit): Promise<void> {
  const { team } = kit

  type Params = { Params: { accountId: string }; Querystring: { done?: string } }

  app.get<Params>('/accounts/:accountId/team', pageRoute(kit, 'viewer'), async (request, reply) => {
    const ctx = whoIn(request)
    const notice = typeof request.query.done === 'string' ? DONE[request.query.done] : undefined
    return render(kit, reply, ctx, notice === undefined ? {} : { notice })
  })

  app.post<Params>('/accounts/:accountId/team/invite', pageRoute(kit, 'admin'), async (request, reply) => {
    const ctx = form(kit, request, reply)
    if (ctx === null) return reply
    const email = formField(request, 'email').slice(0, MAX_EMAIL + 1)
    const role = formField(request, 'role')
    const again = (status: number, error: string) => render(kit, reply, ctx, { status, error, email, role })
    if (checkEmail(email) !== null) return again(422, `Enter ${checkEmail(email)}.`)
    const invited = await team.invite(actorOf(ctx, request), ctx.account.id, ctx.role, { email, role })
    if (isFailure(invited)) {
      return invited.refusal === 'bad-role'
        ? again(422, 'Choose a role: admin, developer or viewer.')
        : invited.refusal === 'owner-only'
          ? again(403, 'Only an owner can invite owners.')
          : again(409, `${email} is already a member of ${ctx.account.name}.`)
    }
    const link = invitationLink(kit, invited.token, ctx.account.id)
    const message = mail.invitation({ accountName: ctx.account.name, role: invited.role, inviter: ctx.user.email, link, validForMs: INVITE_TTL_MS })
    // In the background: the page does not wait for SMTP. The log names the account, never the link.
    kit.mailer
      .send({ to: invited.email, ...message })
      .catch((error: Error) => request.log.error({ accountId: ctx.account.id, reason: error.name }, 'invitation email not sent'))
    return done(reply, ctx, 'invited')
  })

  app.post<Params>('/accounts/:accountId/team/role', pageRoute(kit, 'admin'), async (request, reply) => {
    const ctx = form(kit, request, reply)
    if (ctx === null) return reply
    const changed = await team.changeRole(actorOf(ctx, request), ctx.account.id, ctx.role, formField(request, 'user'), formField(request, 'role'))
    return isFailure(changed) ? refusedChange(kit, reply, ctx, changed) : done(reply, ctx, 'role')
  })

  app.post<Params>('/accounts/:accountId/team/remove', pageRoute(kit, 'admin'), async (request, reply) => {
    const ctx = form(kit, request, reply)
    if (ctx === null) return reply
    const removed = await team.remove(actorOf(ctx, request), ctx.account.id, ctx.role, formField(request, 'user'))
    return isFailure(removed) ? refusedChange(kit, reply, ctx, removed) : done(reply, ctx, 'removed')
  })

  app.post<Params>('/accounts/:accountId/team/cancel', pageRoute(kit, 'admin'), async (request, reply) => {
    const ctx = form(kit, request, reply)
    if (ctx === null) return reply
    const cancelled = await team.cancelInvitation(actorOf(ctx, request), ctx.account.id, formField(request, 'email'))
    if (isFailure(cancelled)) return render(kit, reply, ctx, { status: 409, error: 'That invitation was used, has expired or was cancelled already.' })
    return done(reply, ctx, 'cancelled')
  })

  app.post<Params>('/accounts/:accountId/team/leave', pageRoute(kit, 'viewer'), async (request, reply) => {
    const ctx = form(kit, request, reply)
    if (ctx === null) return reply
    const left = await team.leave(actorOf(ctx, request), ctx.account.id, ctx.user, ctx.role)
    if (isFailure(left)) {
      return render(
        kit,
        reply,
        ctx,
        left.refusal === 'last-owner'
          ? { status: 409, error: lastOwner(ctx, null) }
          : { status: 409, error: `You are not a member of ${ctx.account.name}: there is nothing to leave.` },
      )
    }
    return reply.redirect('/portal/home', 303)
  })

  await invitationPages(app, kit)
}
