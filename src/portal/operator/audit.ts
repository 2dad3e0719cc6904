/**
 * The whole audit trail for operators: every account's events and those of no account
 * (sign-ins, admin tokens), newest first, filtered by account, actor and action, in cursor pages.
 */
import type { FastifyInstance } from 'fastify'
import { html, wide } from '../web/html.ts'
import type { Kit } from '../web/kit.ts'
import { caller } from '../web/kit.ts'
import { listed, nextLink, PAGE_SIZE, query, sendOperatorPage, when } from './common.ts'

export default async function operatorAudit(app: FastifyInstance, kit: Kit): Promise<void> {
  app.get('/operator/audit', { schema: { hide: true } }, async (request, reply) => {
    const current = caller(request)
    const filters = { account: query(request, 'account'), actor: query(request, 'actor'), action: query(request, 'action') }
    const after = query(request, 'after', 1000)
    const found = await listed(kit, reply, current, 'audit', 'Audit', () =>
      kit.accounts.auditEvents({
        limit: PAGE_SIZE,
        ...(filters.account === '' ? {} : { accountId: filters.account }),
        ...(filters.actor === '' ? {} : { actor: filters.actor }),
        ...(filters.action === '' ? {} : { action: filters.action }),
        ...(after === '' ? {} : { cursor: after }),
      }),
    )
    if (found === null) return reply
    const filtered = filters.account !== '' || filters.actor !== '' || filters.action !== ''
    return sendOperatorPage(
      kit,
      reply,
      current,
      'audit',
      'Audit',
      html`
<form method="get" action="/portal/operator/audit" class="row" role="search" aria-label="Audit events">
<div><label for="account">Account id</label><input id="account" name="account" type="search" maxlength="200" value="${filters.account}"></div>
<div><label for="actor">Actor</label><input id="actor" name="actor" type="search" maxlength="200" value="${filters.actor}" aria-describedby="actor-hint"></div>
<div><label for="action">Action</label><input id="action" name="action" type="search" maxlength="200" value="${filters.action}" aria-describedby="action-hint"></div>
<button type="submit">Filter events</button>
</form>
<p class="hint" id="actor-hint">Actors read <code>cli</code>, <code>admin-token:ID</code>, <code>portal-user:ID</code>, <code>system</code> or <code>anonymous</code>.</p>
<p class="hint" id="action-hint">Actions read like <code>account.suspend</code>, <code>subscription.approve</code>, <code>user.sign-in</code>; the whole name.</p>
${
  found.items.length === 0
    ? html`<p role="status">No event${filtered ? ' matches' : ' yet'}.</p>`
    : wide(
        `Audit events${filtered ? ' that match' : ''}, newest first${after === '' ? '' : ', continued'}`,
        html`<table>
<caption>Audit events${filtered ? ' that match' : ''}, newest first${after === '' ? '' : ', continued'}</caption>
<thead><tr><th scope="col">When</th><th scope="col">Actor</th><th scope="col">Action</th><th scope="col">Target</th><th scope="col">Account</th><th scope="col">Source</th><th scope="col">Outcome</th><th scope="col">Detail</th></tr></thead>
<tbody>${found.items.map(
          (e) => html`<tr><td>${when(e.at)}</td><td>${e.actor}</td><td>${e.action}</td><td>${e.target.type} <code>${e.target.id}</code></td>
<td>${e.accountId === null ? '' : html`<a href="/portal/operator/accounts/${encodeURIComponent(e.accountId)}">${e.accountId}</a>`}</td><td>${e.ip ?? ''}</td>
<td><span class="badge ${e.outcome === 'success' ? 'ok' : 'bad'}">${e.outcome}</span></td><td><code class="detail">${JSON.stringify(e.detail)}</code></td></tr>`,
        )}</tbody>
</table>`,
      )
}
${nextLink('/portal/operator/audit', found.next, filters, 'Older events')}`,
    )
  })
}
