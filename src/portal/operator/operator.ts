/**
 * The portal's operator pages, under /portal/operator: a summary, every account (with its
 * status, plan, subscriptions, members and the users of its managed TOTP factors), the
 * sign-ups and subscription requests waiting for approval, and the whole audit trail. Only
 * operators (a user flag the CLI sets: `admin operator grant`) see them; to anyone else each
 * of them is a page that does not exist.
 */
import type { FastifyInstance } from 'fastify'
import { html } from '../web/html.ts'
import type { Kit } from '../web/kit.ts'
import { caller, needs } from '../web/kit.ts'
import { sendOperatorPage } from './common.ts'
import operatorAccounts from './accounts.ts'
import operatorQueues from './queue.ts'
import operatorAudit from './audit.ts'
import operatorTotpUsers from './totp-users.ts'
import operatorSso from './sso.ts'

/** Styles of these pages, added to the portal's one stylesheet. */
export const css = `
td form.inline + form.inline { margin-left: .5rem; }
code.detail { display: inline-block; max-width: 24rem; overflow-wrap: anywhere; }
ul.counts { line-height: 2; }
`

/** The summary counts up to this many of each queue (a page of the store), then says "more than". */
const COUNT_CAP = 100

export default async function operatorPages(app: FastifyInstance, kit: Kit): Promise<void> {
  // Every route here and in the plugins below: a signed-in operator, or a 404 that does not tell the pages exist.
  app.addHook('preHandler', needs(kit, 'operator'))

  app.get('/operator', { schema: { hide: true } }, async (request, reply) => {
    const current = caller(request)
    const [accounts, suspended, signUps, requests] = await Promise.all([
      kit.accounts.countAccounts(),
      kit.accounts.listAccounts({ status: 'suspended', limit: COUNT_CAP }),
      kit.users.admin.list({ status: 'pending', limit: COUNT_CAP }),
      kit.accounts.listPendingSubscriptions({ limit: COUNT_CAP }),
    ])
    const count = (page: { items: unknown[]; next: string | null }, one: string, many: string) =>
      page.next === null ? `${page.items.length} ${page.items.length === 1 ? one : many}` : `More than ${COUNT_CAP} ${many}`
    const signUpMode = kit.config.signupMode === 'approval' ? '' : html` (SIGNUP_MODE=${kit.config.signupMode}: new sign-ups do not wait)`
    const requestMode = kit.config.subscriptionApproval === 'operator' ? '' : ' (SUBSCRIPTION_APPROVAL=auto: new requests do not wait)'
    return sendOperatorPage(
      kit,
      reply,
      current,
      'summary',
      'Operator',
      html`
<ul class="counts">
<li><a href="/portal/operator/accounts">${accounts} ${accounts === 1 ? 'account' : 'accounts'}</a>, of which <a href="/portal/operator/accounts?status=suspended">${count(suspended, 'suspended', 'suspended').toLowerCase()}</a></li>
<li><a href="/portal/operator/sign-ups">${count(signUps, 'sign-up waiting for approval', 'sign-ups waiting for approval')}</a>${signUpMode}</li>
<li><a href="/portal/operator/subscriptions">${count(requests, 'subscription request waiting', 'subscription requests waiting')}</a>${requestMode}</li>
<li><a href="/portal/operator/audit">The audit trail</a>: every event, newest first</li>
</ul>`,
    )
  })

  await app.register(operatorAccounts, kit)
  await app.register(operatorQueues, kit)
  await app.register(operatorAudit, kit)
  await app.register(operatorTotpUsers, kit)
  await app.register(operatorSso, kit)
}
