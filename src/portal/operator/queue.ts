/**
 * The operators' queues: sign-ups waiting for approval (SIGNUP_MODE=approval) and
 * subscriptions waiting for approval (SUBSCRIPTION_APPROVAL=operator), across accounts,
 * oldest first, each with its approve and refuse buttons.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { html, wide } from '../web/html.ts'
import type { Current, Kit } from '../web/kit.ts'
import { actorOf, caller, csrfField, formField, notFound } from '../web/kit.ts'
import { isFailure } from '../../services/outcome.ts'
import type { User } from '../../domain/portal.ts'
import * as mail from '../../mail/templates.ts'
import { decisionForms } from './accounts.ts'
import { alert, GROUP_NAMES, listed, nextLink, notice, operatorForm, PAGE_SIZE, query, sendOperatorPage, when } from './common.ts'

/** decideUser approves (active) or refuses (disabled) a pending sign-up; a user no longer pending is left as they are. */
async function decideUser(kit: Kit, request: FastifyRequest, current: Current, verb: 'approve' | 'refuse'): Promise<'done' | 'gone' | 'decided'> {
  const decided = await kit.users.admin.decideSignUp(actorOf(current, request), { id: (request.params as { userId: string }).userId }, verb)
  if (isFailure(decided)) return decided.failure === 'not_found' ? 'gone' : 'decided'
  if (!decided.changed) return 'decided'
  if (verb === 'approve') {
    // In the background: the answer must not wait for the SMTP server.
    kit.mailer
      .send({ to: decided.user.email, ...mail.signupApproved({ signInUrl: `${kit.config.publicBaseUrl}/portal/sign-in` }) })
      .catch((error: Error) => request.log.error({ err: error }, 'email not sent'))
  }
  return 'done'
}

/** GET: the sign-ups waiting for approval, oldest first, each with its buttons. */
async function signUpsPage(kit: Kit, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const current = caller(request)
  const after = query(request, 'after', 1000)
  const found = await listed(kit, reply, current, 'sign-ups', 'Sign-ups', () =>
    kit.users.admin.pendingSignUps({ limit: PAGE_SIZE, ...(after === '' ? {} : { cursor: after }) }),
  )
  if (found === null) return reply
  const decide = (
    user: User,
    verb: 'approve' | 'refuse',
  ) => html`<form method="post" action="/portal/operator/sign-ups/${encodeURIComponent(user.id)}/${verb}" class="inline">
${csrfField(kit, current)}<button type="submit"${verb === 'refuse' ? html` class="secondary"` : ''}>${verb === 'approve' ? 'Approve' : 'Refuse'} ${user.email}</button></form>`
  return sendOperatorPage(
    kit,
    reply,
    current,
    'sign-ups',
    'Sign-ups',
    html`
${notice(request)}
${kit.config.signupMode === 'approval' ? '' : html`<p>Sign-ups do not wait for approval on this service (SIGNUP_MODE=${kit.config.signupMode}); users listed here signed up while they did.</p>`}
${
  found.items.length === 0
    ? html`<p>No sign-up is waiting for approval.</p>`
    : wide(
        `Sign-ups waiting for approval, oldest first`,
        html`<table>
<caption>Sign-ups waiting for approval, oldest first</caption>
<thead><tr><th scope="col">Email</th><th scope="col">Address confirmed</th><th scope="col">Signed up</th><th scope="col">Account</th><th scope="col">Decision</th></tr></thead>
<tbody>${found.items.map(({ user: u, account }) => {
          return html`<tr><td>${u.email}</td><td>${u.emailVerifiedAt === null ? 'not yet' : 'yes'}</td><td>${when(u.createdAt)}</td>
<td>${account === null ? 'none' : html`<a href="/portal/operator/accounts/${encodeURIComponent(account.accountId)}">${account.accountName}</a>`}</td>
<td>${decide(u, 'approve')} ${decide(u, 'refuse')}</td></tr>`
        })}</tbody>
</table>`,
      )
}
${nextLink('/portal/operator/sign-ups', found.next, {}, 'Next sign-ups')}`,
  )
}

/** GET: the subscription requests waiting, oldest first, each with its buttons. */
async function subscriptionsPage(kit: Kit, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const current = caller(request)
  const after = query(request, 'after', 1000)
  const found = await listed(kit, reply, current, 'subscriptions', 'Subscription requests', () =>
    kit.accounts.listPendingSubscriptions({ limit: PAGE_SIZE, ...(after === '' ? {} : { cursor: after }) }),
  )
  if (found === null) return reply
  return sendOperatorPage(
    kit,
    reply,
    current,
    'subscriptions',
    'Subscription requests',
    html`
${notice(request)}
${kit.config.subscriptionApproval === 'operator' ? '' : html`<p>Subscriptions start at once on this service (SUBSCRIPTION_APPROVAL=auto); requests listed here were made while they waited.</p>`}
${
  found.items.length === 0
    ? html`<p>No subscription request is waiting.</p>`
    : wide(
        `Subscription requests waiting for approval, oldest first`,
        html`<table>
<caption>Subscription requests waiting for approval, oldest first</caption>
<thead><tr><th scope="col">Account</th><th scope="col">API group</th><th scope="col">Region</th><th scope="col">Asked</th><th scope="col">Decision</th></tr></thead>
<tbody>${found.items.map(
          (s) => html`<tr><td><a href="/portal/operator/accounts/${encodeURIComponent(s.accountId)}">${s.accountName}</a></td>
<td>${GROUP_NAMES[s.group]}</td><td>${s.region}</td><td>${when(s.updatedAt)}</td><td>${decisionForms(kit, current, s, s.accountName, 'queue')}</td></tr>`,
        )}</tbody>
</table>`,
      )
}
${nextLink('/portal/operator/subscriptions', found.next, {}, 'Next requests')}`,
  )
}

/** POST: approve or refuse a subscription request (a request decided meanwhile is a conflict). */
async function decideSubscription(kit: Kit, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const current = operatorForm(kit, request, reply, '/portal/operator/subscriptions')
  if (current === null) return reply
  const accountId = formField(request, 'accountId')
  const decision = formField(request, 'decision')
  const back =
    formField(request, 'back') === 'account' && accountId !== ''
      ? `/portal/operator/accounts/${encodeURIComponent(accountId)}`
      : '/portal/operator/subscriptions'
  if (decision !== 'approve' && decision !== 'refuse') {
    return sendOperatorPage(
      kit,
      reply,
      current,
      'subscriptions',
      'Subscription requests',
      html`${alert('Choose to approve or to refuse the request.')}<p><a href="${back}">Back</a></p>`,
      400,
    )
  }
  const ctx = actorOf(current, request)
  const region = formField(request, 'region')
  const group = formField(request, 'group')
  const set = await kit.accounts.setSubscription(ctx, accountId, region, group, decision === 'approve' ? 'approved' : 'refused')
  if (isFailure(set)) {
    const status = set.failure === 'not_found' ? 404 : set.failure === 'conflict' ? 409 : 400
    const words = set.failure === 'conflict' ? 'This request is no longer pending (another operator decided it); nothing was changed.' : `${set.message}.`
    return sendOperatorPage(kit, reply, current, 'subscriptions', 'Subscription requests', html`${alert(words)}<p><a href="${back}">Back</a></p>`, status)
  }
  return reply.redirect(`${back}?done=${decision === 'approve' ? 'approved' : 'refused'}${back.includes('/accounts/') ? '#subscriptions' : ''}`, 303)
}

/** POST approve or refuse: decide a pending sign-up (one decided meanwhile is a conflict, an unknown user a 404). */
async function decideSignUp(kit: Kit, request: FastifyRequest, reply: FastifyReply, verb: 'approve' | 'refuse'): Promise<FastifyReply> {
  const current = operatorForm(kit, request, reply, '/portal/operator/sign-ups')
  if (current === null) return reply
  const outcome = await decideUser(kit, request, current, verb)
  if (outcome === 'gone') return notFound(kit, reply, current)
  if (outcome === 'decided') {
    return sendOperatorPage(
      kit,
      reply,
      current,
      'sign-ups',
      'Sign-ups',
      html`${alert('This sign-up was decided already (by another operator, or in another tab); nothing was changed.')}<p><a href="/portal/operator/sign-ups">Back to the sign-ups</a></p>`,
      409,
    )
  }
  return reply.redirect(`/portal/operator/sign-ups?done=user-${verb === 'approve' ? 'approved' : 'refused'}`, 303)
}

export default async function operatorQueues(app: FastifyInstance, kit: Kit): Promise<void> {
  app.get('/operator/sign-ups', { schema: { hide: true } }, (request, reply) => signUpsPage(kit, request, reply))

  for (const verb of ['approve', 'refuse'] as const) {
    app.post(`/operator/sign-ups/:userId/${verb}`, { schema: { hide: true } }, (request, reply) => decideSignUp(kit, request, reply, verb))
  }

  app.get('/operator/subscriptions', { schema: { hide: true } }, (request, reply) => subscriptionsPage(kit, request, reply))

  app.post('/operator/subscriptions/decide', { schema: { hide: true } }, (request, reply) => decideSubscription(kit, request, reply))
}
