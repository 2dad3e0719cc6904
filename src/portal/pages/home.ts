/**
 * The portal's home: the landing (a user with one account lands in its overview, as in the
 * consoles people know; anyone else on the list), the list of the accounts the signed-in user
 * belongs to, and a form to create another, of which the user is the owner.
 */
import type { FastifyInstance } from 'fastify'
import { html } from '../web/html.ts'
import type { Kit } from '../web/kit.ts'
import { accountBadge, actorOf, caller, csrfField, formExpired, formField, formOk, pageRoute, sendPage, sessionOf } from '../web/kit.ts'
import { isFailure } from '../../services/outcome.ts'
import { accountPath } from '../web/labels.ts'

export default async function homePages(app: FastifyInstance, kit: Kit): Promise<void> {
  const { team, accounts } = kit

  app.get('/', { schema: { hide: true } }, async (request, reply) => {
    const current = await sessionOf(kit, request)
    if (current === null) return reply.redirect('/portal/sign-in', 303)
    const memberships = await team.memberships(current.user.id)
    return reply.redirect(memberships.length === 1 ? accountPath(memberships[0]!.accountId, 'overview') : '/portal/home', 303)
  })

  app.get('/home', pageRoute(kit, 'signed-in'), async (request, reply) => {
    const current = caller(request)
    const memberships = await team.memberships(current.user.id)
    const owned = memberships.filter((m) => m.role === 'owner').length
    return sendPage(kit, reply, {
      title: 'Your accounts',
      current,
      body: html`
${
  memberships.length === 0
    ? html`<p>You do not belong to any account yet. Create one below, or ask an account owner to invite you.</p>`
    : html`
<table>
<caption>Accounts you belong to</caption>
<thead><tr><th scope="col">Account</th><th scope="col">Your role</th><th scope="col">Status</th></tr></thead>
<tbody>${memberships.map((m) => html`<tr><td><a href="${accountPath(m.accountId, 'overview')}">${m.accountName}</a></td><td>${m.role}</td><td>${accountBadge(m.accountStatus)}</td></tr>`)}</tbody>
</table>`
}
<h2>Create an account</h2>
<p id="account-count">You own ${owned} of the ${accounts.accountLimit} accounts a user may own${owned >= accounts.accountLimit ? html`: you cannot create another` : ''}.</p>
<form method="post" action="/portal/accounts">
${csrfField(kit, current)}
<label for="name">Account name</label>
<input id="name" name="name" type="text" required maxlength="200" autocomplete="organization">
<button type="submit">Create account</button>
</form>`,
    })
  })

  app.post('/accounts', pageRoute(kit, 'signed-in'), async (request, reply) => {
    const current = caller(request)
    if (!formOk(kit, request, current)) return formExpired(kit, reply, current, '/portal/home')
    const ctx = actorOf(current, request)
    // The account and its owner in one step, refused past PORTAL_ACCOUNT_MAX_PER_USER.
    const account = await accounts.createOwnedAccount(ctx, current.user.id, { name: formField(request, 'name') })
    if (isFailure(account)) {
      return sendPage(kit, reply, {
        title: 'Your accounts',
        status: account.failure === 'limit' ? 409 : 422,
        current,
        body: html`<p class="error" role="alert">No account was created: ${account.message}. <a href="/portal/home">Back</a></p>`,
      })
    }
    return reply.redirect(`/portal/accounts/${encodeURIComponent(account.id)}/start`, 303)
  })

  app.get<{ Params: { accountId: string } }>('/accounts/:accountId', { schema: { hide: true } }, async (request, reply) =>
    reply.redirect(accountPath(request.params.accountId, 'overview'), 303),
  )
}
