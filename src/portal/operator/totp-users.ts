/**
 * An account's users of managed TOTP factors, for operators: the users in cursor pages, one
 * user's factor states (never a secret), recovery codes left and lock; clearing the lock, and
 * deleting the user's factors and recovery codes behind a confirmation. Changes go through the
 * factors service, which audits them as the operator's.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { html, wide, type Html } from '../web/html.ts'
import type { Current, Kit } from '../web/kit.ts'
import { actorOf, caller, csrfField, formField, notFound } from '../web/kit.ts'
import type { FactorUserState } from '../../services/factors.ts'
import { isFailure } from '../../services/outcome.ts'
import { MAX_USER_CURSOR } from '../../domain/user-ids.ts'
import type { Account } from '../../domain/accounts.ts'
import { alert, listed, nextLink, notice, operatorForm, PAGE_SIZE, query, sendOperatorPage, when } from './common.ts'

type Params = { accountId: string; userID: string }

const accountPath = (account: Pick<Account, 'id'>) => `/portal/operator/accounts/${encodeURIComponent(account.id)}`
const usersPath = (account: Pick<Account, 'id'>) => `${accountPath(account)}/totp-users`
const userPath = (account: Pick<Account, 'id'>, userId: string) => `${usersPath(account)}/${encodeURIComponent(userId)}`

/**
 * userLink: a user's page. `.` and `..` (IDs refused since; a user made before keeps working)
 * cannot be a URL's path segment, escaped or not: a browser resolves them, so they get no link.
 */
const userLink = (account: Pick<Account, 'id'>, userId: string): Html =>
  userId === '.' || userId === '..'
    ? html`${userId} <span class="hint">(no page: an ID a URL cannot hold; <code>npm run admin -- totp-user</code> shows, unlocks or deletes it)</span>`
    : html`<a href="${userPath(account, userId)}">${userId}</a>`

const lockBadge = (lockedUntil: string | null) =>
  lockedUntil === null ? html`<span class="badge ok">not locked</span>` : html`<span class="badge bad">locked</span> until ${when(lockedUntil)}`

function factorTable(user: FactorUserState): Html {
  if (user.factors.length === 0) return html`<p>No factor: every one was deleted, or the pending ones expired.</p>`
  return wide(
    `Factors of ${user.userId}, oldest first`,
    html`<table>
<caption>Factors of ${user.userId}, oldest first</caption>
<thead><tr><th scope="col">Factor</th><th scope="col">Status</th><th scope="col">Label</th><th scope="col">Application</th><th scope="col">Profile</th><th scope="col">Codes</th><th scope="col">Drift (steps)</th><th scope="col">Created</th><th scope="col">Activated or expires</th></tr></thead>
<tbody>${user.factors.map(
      (
        f,
      ) => html`<tr><td><code>${f.id}</code></td><td><span class="badge ${f.status === 'active' ? 'ok' : 'warn'}">${f.status}</span></td><td>${f.label ?? ''}</td>
<td>${f.applicationId}</td>${
        f.type === 'totp'
          ? html`<td>${f.profile}</td><td>${f.algorithm}, ${f.digits} digits, ${f.period} s</td><td>${f.drift}</td>`
          : html`<td>passkey</td><td>${f.meta.algorithm}${f.meta.backedUp ? ', synced' : ''}</td><td></td>`
      }<td>${when(f.createdAt)}</td>
<td>${f.activatedAt === null ? html`expires ${when(f.expiresAt)}` : when(f.activatedAt)}</td></tr>`,
    )}</tbody>
</table>`,
  )
}

/** The account of the path for an operator, or null once a 404 is sent. */
async function accountOf(kit: Kit, request: FastifyRequest, reply: FastifyReply, current: Current): Promise<Account | null> {
  const account = await kit.accounts.getAccount((request.params as { accountId: string }).accountId)
  if (account === null) await notFound(kit, reply, current)
  return account
}

/** The user of the path, or null once a 404 is sent (an unknown account or user, or an ID no user can have). */
async function userOf(kit: Kit, request: FastifyRequest, reply: FastifyReply, current: Current): Promise<{ account: Account; user: FactorUserState } | null> {
  const account = await accountOf(kit, request, reply, current)
  if (account === null) return null
  const user = await kit.factors.user(account.id, (request.params as Params).userID)
  if (isFailure(user)) {
    await notFound(kit, reply, current)
    return null
  }
  return { account, user }
}

/** GET: an account's TOTP users, in cursor pages. */
async function usersPage(kit: Kit, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const current = caller(request)
  const account = await accountOf(kit, request, reply, current)
  if (account === null) return reply
  const after = query(request, 'after', MAX_USER_CURSOR)
  const title = `TOTP users of ${account.name}`
  const page = { limit: PAGE_SIZE, ...(after === '' ? {} : { cursor: after }) }
  const found = await listed(kit, reply, current, 'accounts', title, () => kit.factors.listUsers(account.id, page))
  if (found === null) return reply
  if (isFailure(found)) return notFound(kit, reply, current)
  return sendOperatorPage(
    kit,
    reply,
    current,
    null,
    title,
    html`
${notice(request)}
<p><a href="${accountPath(account)}">Back to ${account.name}</a></p>
<p>The users of the account's managed TOTP factors (<code>/totp/users/{userID}</code>), by user ID.</p>
${
  found.items.length === 0
    ? html`<p>${after === '' ? 'No user yet.' : 'No more users.'}</p>`
    : wide(
        `TOTP users of ${account.name}${after === '' ? '' : ', continued'}`,
        html`<table>
<caption>TOTP users of ${account.name}${after === '' ? '' : ', continued'}</caption>
<thead><tr><th scope="col">User ID</th><th scope="col">Active factors</th><th scope="col">Pending factors</th><th scope="col">Recovery codes left</th><th scope="col">Lock</th><th scope="col">Since</th></tr></thead>
<tbody>${found.items.map(
          (u) => html`<tr><td>${userLink(account, u.userId)}</td><td>${u.active}</td><td>${u.pending}</td><td>${u.recoveryCodesLeft}</td>
<td>${lockBadge(u.lockedUntil)}</td><td>${when(u.createdAt)}</td></tr>`,
        )}</tbody>
</table>`,
      )
}
${nextLink(usersPath(account), found.next, {}, 'Next users')}`,
  )
}

/** GET: one user's lock, factors and recovery codes, with the forms that clear and delete. */
async function userPage(kit: Kit, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const current = caller(request)
  const found = await userOf(kit, request, reply, current)
  if (found === null) return reply
  const { account, user } = found
  const path = userPath(account, user.userId)
  return sendOperatorPage(
    kit,
    reply,
    current,
    null,
    `TOTP user ${user.userId}`,
    html`
${notice(request)}
<p><a href="${usersPath(account)}">Back to the TOTP users of ${account.name}</a></p>
<section aria-labelledby="lock-heading">
<h2 id="lock-heading">Lock</h2>
<p>${user.userId} is ${lockBadge(user.lockedUntil)}. Clearing forgets their failed codes too: their next right code is taken at once.</p>
<form method="post" action="${path}/unlock" class="inline">${csrfField(kit, current)}<button type="submit"${user.lockedUntil === null ? html` class="secondary"` : ''}>Clear the lockout of ${user.userId}</button></form>
</section>
<section aria-labelledby="factors-heading">
<h2 id="factors-heading">Factors</h2>
${factorTable(user)}
<p>${user.recoveryCodesLeft} recovery ${user.recoveryCodesLeft === 1 ? 'code' : 'codes'} left.</p>
</section>
<section aria-labelledby="delete-heading">
<h2 id="delete-heading">Delete</h2>
<p>For a user who lost their authenticator and their recovery codes: check who asks first. Their codes stop working at once; they may enrol again.</p>
<form method="post" action="${path}/delete" class="inline">${csrfField(kit, current)}<button type="submit" class="danger">Delete the factors of ${user.userId}</button></form>
</section>`,
  )
}

/** POST unlock: clear the user's lockout. */
async function unlockUser(kit: Kit, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const current = operatorForm(kit, request, reply, '/portal/operator/accounts')
  if (current === null) return reply
  const found = await userOf(kit, request, reply, current)
  if (found === null) return reply
  const cleared = await kit.factors.clearLockout(actorOf(current, request), found.account.id, found.user.userId)
  if (isFailure(cleared))
    return sendOperatorPage(
      kit,
      reply,
      current,
      null,
      'Lockout not cleared',
      html`${alert(`${cleared.message}.`)}<p><a href="${usersPath(found.account)}">Back to the TOTP users</a></p>`,
      422,
    )
  return reply.redirect(`${userPath(found.account, found.user.userId)}?done=unlocked`, 303)
}

/** POST delete: delete the user's factors and recovery codes, when the post is the confirmation's (asked first). */
async function deleteUser(kit: Kit, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const current = operatorForm(kit, request, reply, '/portal/operator/accounts')
  if (current === null) return reply
  const found = await userOf(kit, request, reply, current)
  if (found === null) return reply
  const { account, user } = found
  const path = userPath(account, user.userId)
  // Only the confirmation's button deletes; any other post asks first.
  if (formField(request, 'confirm') !== '1') {
    return sendOperatorPage(
      kit,
      reply,
      current,
      null,
      "Delete a user's factors",
      html`
<p>Delete the ${user.factors.length === 1 ? 'factor' : `${user.factors.length} factors`} and ${user.recoveryCodesLeft} recovery ${user.recoveryCodesLeft === 1 ? 'code' : 'codes'} of ${user.userId} in ${account.name}? Their codes stop working at once. This cannot be undone.</p>
<form method="post" action="${path}/delete" class="row">
${csrfField(kit, current)}
<input type="hidden" name="confirm" value="1">
<button type="submit" class="danger">Delete the factors of ${user.userId} for good</button>
<a href="${path}">Keep them: back to ${user.userId}</a>
</form>`,
    )
  }
  const deleted = await kit.factors.deleteUser(actorOf(current, request), account.id, user.userId)
  if (isFailure(deleted))
    return sendOperatorPage(
      kit,
      reply,
      current,
      null,
      'Factors not deleted',
      html`${alert(`${deleted.message}.`)}<p><a href="${usersPath(account)}">Back to the TOTP users</a></p>`,
      422,
    )
  return reply.redirect(`${usersPath(account)}?done=factors-deleted`, 303)
}

export default async function operatorTotpUsers(app: FastifyInstance, kit: Kit): Promise<void> {
  app.get('/operator/accounts/:accountId/totp-users', { schema: { hide: true } }, (request, reply) => usersPage(kit, request, reply))

  app.get('/operator/accounts/:accountId/totp-users/:userID', { schema: { hide: true } }, (request, reply) => userPage(kit, request, reply))

  app.post('/operator/accounts/:accountId/totp-users/:userID/unlock', { schema: { hide: true } }, (request, reply) => unlockUser(kit, request, reply))

  app.post('/operator/accounts/:accountId/totp-users/:userID/delete', { schema: { hide: true } }, (request, reply) => deleteUser(kit, request, reply))
}
