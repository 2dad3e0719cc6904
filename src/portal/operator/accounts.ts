/**
 * The operators' accounts: every account in cursor pages, searched by name and filtered by
 * status; and one account's operator page: suspend or reactivate it, set or reset its plan,
 * decide its pending subscriptions, see its members. Changes go through the Accounts service,
 * which audits them as the operator's.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { html, wide, type Html } from '../web/html.ts'
import type { Current, Kit } from '../web/kit.ts'
import { actorOf, caller, csrfField, formField, notFound } from '../web/kit.ts'
import type { PlanInput } from '../../services/accounts.ts'
import { isFailure, type Failure } from '../../services/outcome.ts'
import { ACCOUNT_STATUSES, type AccountStatus, type Plan } from '../../domain/accounts.ts'
import type { Account, Subscription } from '../../domain/accounts.ts'
import { alert, GROUP_NAMES, listed, nextLink, notice, operatorForm, PAGE_SIZE, query, sendOperatorPage, when } from './common.ts'

const path = (account: Pick<Account, 'id'>) => `/portal/operator/accounts/${encodeURIComponent(account.id)}`

const statusBadge = (status: string) =>
  html`<span class="badge ${status === 'active' ? 'ok' : status === 'pending' ? 'warn' : status === 'suspended' ? 'bad' : 'off'}">${status}</span>`

/** decisionForms: approve and refuse buttons for a pending subscription, named for what and whose they decide. */
export function decisionForms(
  kit: Kit,
  current: Current,
  sub: Pick<Subscription, 'accountId' | 'region' | 'group'>,
  accountName: string,
  back: 'account' | 'queue',
): Html {
  const what = `${GROUP_NAMES[sub.group]} in ${sub.region} for ${accountName}`
  const fields = html`${csrfField(kit, current)}<input type="hidden" name="accountId" value="${sub.accountId}"><input type="hidden" name="region" value="${sub.region}"><input type="hidden" name="group" value="${sub.group}"><input type="hidden" name="back" value="${back}">`
  return html`<form method="post" action="/portal/operator/subscriptions/decide" class="inline">${fields}<input type="hidden" name="decision" value="approve"><button type="submit">Approve ${what}</button></form>
<form method="post" action="/portal/operator/subscriptions/decide" class="inline">${fields}<input type="hidden" name="decision" value="refuse"><button type="submit" class="secondary">Refuse ${what}</button></form>`
}

interface PlanForm {
  readonly values: Record<string, string>
  readonly failure: Failure | null
}

const PLAN_FIELDS: readonly (readonly [string, string, string])[] = [
  ['rate', 'rate', 'Rate: calls per second (0: no throttle)'],
  ['burst', 'burst', 'Burst: calls at once'],
  ['quota', 'quota', 'Quota: units per period (0: no quota)'],
  ['weight-totp', 'weights.totp', 'Units per TOTP call'],
  ['weight-converter', 'weights.converter', 'Units per converter call'],
]

const planValues = (plan: Plan): Record<string, string> => ({
  rate: String(plan.rate),
  burst: String(plan.burst),
  quota: String(plan.quota),
  period: plan.period,
  'weight-totp': String(plan.weights.totp),
  'weight-converter': String(plan.weights.converter),
})

function planSection(kit: Kit, current: Current, account: Account, plan: { plan: Plan; own: boolean }, form: PlanForm | null): Html {
  const values = form?.values ?? planValues(plan.plan)
  const fault = form?.failure ?? null
  const input = ([name, field, label]: readonly [string, string, string]) => {
    const bad = fault?.field === field
    return html`<div><label for="plan-${name}">${label}</label>
<input id="plan-${name}" name="${name}" type="text" inputmode="decimal" required value="${values[name] ?? ''}"${bad ? html` aria-invalid="true" aria-describedby="plan-error"` : ''}></div>`
  }
  return html`<section aria-labelledby="plan-heading">
<h2 id="plan-heading">Plan</h2>
<p>${plan.own ? 'This account has its own plan.' : 'This account is on the default plan (PLAN_* settings).'}</p>
${fault === null ? '' : html`<p class="error" role="alert" id="plan-error">The plan was not saved: ${fault.message}.</p>`}
<form method="post" action="${path(account)}/plan" class="row">
${csrfField(kit, current)}
${PLAN_FIELDS.slice(0, 3).map(input)}
<div><label for="plan-period">Quota period</label>
<select id="plan-period" name="period"${fault?.field === 'period' ? html` aria-invalid="true" aria-describedby="plan-error"` : ''}>${['day', 'month'].map((p) => html`<option value="${p}"${values.period === p ? html` selected` : ''}>${p}</option>`)}</select></div>
${PLAN_FIELDS.slice(3).map(input)}
<button type="submit">Save the plan of ${account.name}</button>
</form>
${plan.own ? html`<form method="post" action="${path(account)}/plan/reset" class="inline">${csrfField(kit, current)}<button type="submit" class="secondary">Put ${account.name} back on the default plan</button></form>` : ''}
</section>`
}

async function accountPage(
  kit: Kit,
  request: FastifyRequest,
  reply: FastifyReply,
  current: Current,
  account: Account,
  form: PlanForm | null = null,
  status = 200,
): Promise<FastifyReply> {
  const [plan, subs, members] = await Promise.all([kit.accounts.getPlan(account.id), kit.accounts.listSubscriptions(account.id), kit.team.members(account.id)])
  if (plan === null) return notFound(kit, reply, current)
  const suspend = account.status === 'active'
  return sendOperatorPage(
    kit,
    reply,
    current,
    null,
    account.name,
    html`
${notice(request)}
<p><a href="/portal/accounts/${encodeURIComponent(account.id)}/start">Open the pages of ${account.name}</a> (as an owner) · <a href="/portal/operator/audit?account=${encodeURIComponent(account.id)}">Audit of ${account.name}</a> · <a href="${path(account)}/totp-users">TOTP users of ${account.name}</a> (managed factors: their state, lockouts)</p>
<section aria-labelledby="status-heading">
<h2 id="status-heading">Status</h2>
<p>${account.name} (<code>${account.id}</code>) is ${statusBadge(account.status)}, created ${when(account.createdAt)}.</p>
<form method="post" action="${path(account)}/status" class="inline">
${csrfField(kit, current)}<input type="hidden" name="status" value="${suspend ? 'suspended' : 'active'}">
<button type="submit"${suspend ? html` class="danger"` : ''}>${suspend ? 'Suspend' : 'Reactivate'} ${account.name}</button>
</form>
</section>
${planSection(kit, current, account, plan, form)}
<section aria-labelledby="subscriptions-heading" id="subscriptions">
<h2 id="subscriptions-heading">Subscriptions</h2>
${
  subs.length === 0
    ? html`<p>No subscriptions.</p>`
    : wide(
        `Subscriptions of ${account.name}`,
        html`<table>
<caption>Subscriptions of ${account.name}</caption>
<thead><tr><th scope="col">API group</th><th scope="col">Region</th><th scope="col">Status</th><th scope="col">Since</th><th scope="col">Decision</th></tr></thead>
<tbody>${subs.map(
          (s) => html`<tr><td>${GROUP_NAMES[s.group]}</td><td>${s.region}</td><td>${statusBadge(s.status)}</td><td>${when(s.updatedAt)}</td>
<td>${s.status === 'pending' ? decisionForms(kit, current, s, account.name, 'account') : ''}</td></tr>`,
        )}</tbody>
</table>`,
      )
}
</section>
<section aria-labelledby="members-heading">
<h2 id="members-heading">Members</h2>
${
  members.length === 0
    ? html`<p>No members.</p>`
    : wide(
        `Members of ${account.name}`,
        html`<table>
<caption>Members of ${account.name}</caption>
<thead><tr><th scope="col">Email</th><th scope="col">Role</th><th scope="col">Member since</th></tr></thead>
<tbody>${members.map((m) => html`<tr><td>${m.email}</td><td>${m.role}</td><td>${when(m.createdAt)}</td></tr>`)}</tbody>
</table>`,
      )
}
</section>`,
    status,
  )
}

/** planInput reads the plan form: a field left empty keeps its value; text that is not a number is left for the service to refuse. */
function planInput(request: FastifyRequest): PlanInput {
  const num = (name: string) => {
    const text = formField(request, name)
    return text === '' ? undefined : Number(text)
  }
  const period = formField(request, 'period')
  const weights = {
    ...(num('weight-totp') === undefined ? {} : { totp: num('weight-totp')! }),
    ...(num('weight-converter') === undefined ? {} : { converter: num('weight-converter')! }),
  }
  return {
    ...(num('rate') === undefined ? {} : { rate: num('rate')! }),
    ...(num('burst') === undefined ? {} : { burst: num('burst')! }),
    ...(num('quota') === undefined ? {} : { quota: num('quota')! }),
    ...(period === '' ? {} : { period }),
    weights,
  }
}

/** The account of the path for an operator, or null once a 404 is sent. */
async function accountOf(kit: Kit, request: FastifyRequest, reply: FastifyReply, current: Current): Promise<Account | null> {
  const account = await kit.accounts.getAccount((request.params as { accountId: string }).accountId)
  if (account === null) await notFound(kit, reply, current)
  return account
}

/** GET: every account in cursor pages, searched by name, filtered by status. */
async function accountsPage(kit: Kit, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const current = caller(request)
  const name = query(request, 'name')
  const wanted = query(request, 'status')
  const status = ACCOUNT_STATUSES.includes(wanted as AccountStatus) ? (wanted as AccountStatus) : undefined
  const after = query(request, 'after', 1000)
  const found = await listed(kit, reply, current, 'accounts', 'Accounts', () =>
    kit.accounts.listAccounts({
      limit: PAGE_SIZE,
      ...(name === '' ? {} : { name }),
      ...(status === undefined ? {} : { status }),
      ...(after === '' ? {} : { cursor: after }),
    }),
  )
  if (found === null) return reply
  const total = await kit.accounts.countAccounts()
  return sendOperatorPage(
    kit,
    reply,
    current,
    'accounts',
    'Accounts',
    html`
<form method="get" action="/portal/operator/accounts" class="row" role="search" aria-label="Accounts">
<div><label for="name">Account name contains</label><input id="name" name="name" type="search" maxlength="200" value="${name}"></div>
<div><label for="status">Status</label><select id="status" name="status"><option value="">any</option>${ACCOUNT_STATUSES.map((s) => html`<option value="${s}"${s === status ? html` selected` : ''}>${s}</option>`)}</select></div>
<button type="submit">Search accounts</button>
</form>
${
  found.items.length === 0
    ? html`<p role="status">No account matches.</p>`
    : wide(
        `Accounts${name !== '' || status !== undefined ? ' that match' : ''} (${total} in all)${after === '' ? '' : ', continued'}`,
        html`<table>
<caption>Accounts${name !== '' || status !== undefined ? ' that match' : ''} (${total} in all)${after === '' ? '' : ', continued'}</caption>
<thead><tr><th scope="col">Account</th><th scope="col">Status</th><th scope="col">Created</th><th scope="col">Operator page</th></tr></thead>
<tbody>${found.items.map(
          (
            a,
          ) => html`<tr><td><a href="/portal/accounts/${encodeURIComponent(a.id)}/start">${a.name}</a></td><td>${statusBadge(a.status)}</td><td>${when(a.createdAt)}</td>
<td><a href="${path(a)}">Manage ${a.name}</a></td></tr>`,
        )}</tbody>
</table>`,
      )
}
${nextLink('/portal/operator/accounts', found.next, { name, status: status ?? '' }, 'Next accounts')}`,
  )
}

/** GET: one account's operator page. */
async function oneAccount(kit: Kit, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const current = caller(request)
  const account = await accountOf(kit, request, reply, current)
  return account === null ? reply : accountPage(kit, request, reply, current, account)
}

/** POST status: suspend or reactivate the account. */
async function setStatus(kit: Kit, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const current = operatorForm(kit, request, reply, '/portal/operator/accounts')
  if (current === null) return reply
  const account = await accountOf(kit, request, reply, current)
  if (account === null) return reply
  const status = formField(request, 'status')
  const changed = await kit.accounts.updateAccount(actorOf(current, request), account.id, { status })
  if (isFailure(changed))
    return sendOperatorPage(
      kit,
      reply,
      current,
      null,
      account.name,
      html`${alert(`${changed.message}.`)}<p><a href="${path(account)}">Back to ${account.name}</a></p>`,
      422,
    )
  return reply.redirect(`${path(account)}?done=${changed.status === 'suspended' ? 'suspended' : 'reactivated'}`, 303)
}

/** POST plan: set the account's own plan (the form again with what is wrong). */
async function setPlan(kit: Kit, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const current = operatorForm(kit, request, reply, '/portal/operator/accounts')
  if (current === null) return reply
  const account = await accountOf(kit, request, reply, current)
  if (account === null) return reply
  const plan = await kit.accounts.setPlan(actorOf(current, request), account.id, planInput(request))
  if (isFailure(plan)) {
    const values = Object.fromEntries(
      ['rate', 'burst', 'quota', 'period', 'weight-totp', 'weight-converter'].map((n) => [n, formField(request, n).slice(0, 50)]),
    )
    return accountPage(kit, request, reply, current, account, { values, failure: plan }, 422)
  }
  return reply.redirect(`${path(account)}?done=plan-set`, 303)
}

/** POST plan/reset: put the account back on the default plan. */
async function resetPlan(kit: Kit, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const current = operatorForm(kit, request, reply, '/portal/operator/accounts')
  if (current === null) return reply
  const account = await accountOf(kit, request, reply, current)
  if (account === null) return reply
  const reset = await kit.accounts.resetPlan(actorOf(current, request), account.id)
  if (isFailure(reset))
    return sendOperatorPage(
      kit,
      reply,
      current,
      null,
      account.name,
      html`${alert(`${reset.message}.`)}<p><a href="${path(account)}">Back to ${account.name}</a></p>`,
      422,
    )
  return reply.redirect(`${path(account)}?done=plan-reset`, 303)
}

export default async function operatorAccounts(app: FastifyInstance, kit: Kit): Promise<void> {
  app.get('/operator/accounts', { schema: { hide: true } }, (request, reply) => accountsPage(kit, request, reply))

  app.get('/operator/accounts/:accountId', { schema: { hide: true } }, (request, reply) => oneAccount(kit, request, reply))

  app.post('/operator/accounts/:accountId/status', { schema: { hide: true } }, (request, reply) => setStatus(kit, request, reply))

  app.post('/operator/accounts/:accountId/plan', { schema: { hide: true } }, (request, reply) => setPlan(kit, request, reply))

  app.post('/operator/accounts/:accountId/plan/reset', { schema: { hide: true } }, (request, reply) => resetPlan(kit, request, reply))
}
