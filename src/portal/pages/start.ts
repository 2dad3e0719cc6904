/**
 * Getting started with an account: where it may call (its active subscriptions and each
 * region's base URL), a first `curl` for each, and what to do first when it has no
 * subscription or no key yet.
 */
import type { FastifyInstance } from 'fastify'
import { html, type Html } from '../web/html.ts'
import type { InAccount, Kit } from '../web/kit.ts'
import { atLeast, pageRoute, sendPage, whoIn } from '../web/kit.ts'
import type { Group } from '../../domain/regions.ts'
import type { Subscription } from '../../domain/accounts.ts'
import { accountPath, GROUP_NAMES, regionBase } from '../web/labels.ts'
import { liveKeys } from './keys-view.ts'

/** Styles of these pages, added to the portal's one stylesheet. */
export const css = `
.first-call pre { margin-bottom: .25rem; }
`

/** firstCall: a command that calls `group` at `base` with a key, as a reader can paste it. */
export function firstCall(group: Group, base: string): string {
  return group === 'totp'
    ? `curl -H 'x-api-key: YOUR_KEY' ${base}/totp/ping`
    : `curl -H 'x-api-key: YOUR_KEY' -F pdfDocument=@document.pdf ${base}/converter/generateImage -o page.png`
}

/** What each first call does, for the reader. */
const EXPECT: Readonly<Record<Group, string>> = {
  totp: 'It answers 200 when the key works here.',
  converter: 'It turns the first page of document.pdf into page.png (a document of several pages comes back as a zip of PNGs).',
}

export default async function startPages(app: FastifyInstance, kit: Kit): Promise<void> {
  const { accounts } = kit

  function call(sub: Subscription): Html {
    const base = regionBase(kit, sub.region)
    const id = `call-${sub.region}-${sub.group}`
    const what = `${GROUP_NAMES[sub.group]} in ${sub.region}`
    return html`<section class="first-call" aria-labelledby="${id}-title">
<h3 id="${id}-title">${what}</h3>
${
  base === null
    ? html`<p>The base URL of ${sub.region} is not configured on this service (REGION_URLS): ask your operator where ${sub.region} is served, and put it in place of <code>BASE_URL</code>.</p>`
    : html`<p>Base URL: <code>${base}</code></p>`
}
<pre id="${id}">${firstCall(sub.group, base ?? 'BASE_URL')}</pre>
<p><button type="button" class="secondary" data-copy="${id}" hidden>Copy command<span class="visually-hidden"> for ${what}</span></button> <span role="status" id="${id}-status"></span></p>
<p class="hint">${EXPECT[sub.group]}</p>
</section>`
  }

  /** firstSteps: what to do before a first call, or null when nothing is missing. */
  function firstSteps(who: InAccount, active: readonly Subscription[], pending: number, live: number): Html | null {
    const steps: Html[] = []
    const developer = atLeast(who.role, 'developer')
    if (who.account.status !== 'active')
      steps.push(html`<li>This account is ${who.account.status}: calls with its keys are refused until an operator activates it.</li>`)
    if (active.length === 0) {
      steps.push(
        pending > 0
          ? html`<li>Your <a href="${accountPath(who.account.id, 'subscriptions')}">subscriptions</a> wait for an operator’s approval (${pending} pending).</li>`
          : html`<li><a href="${accountPath(who.account.id, 'subscriptions')}">Subscribe</a> to an API group in a region${developer ? '' : ' (ask a developer of the account)'}.</li>`,
      )
    }
    if (live === 0)
      steps.push(
        html`<li><a href="${accountPath(who.account.id, 'keys')}#create">Create a key</a>${developer ? '' : ' (ask a developer of the account)'}: it is shown once, so keep it somewhere safe.</li>`,
      )
    return steps.length === 0 ? null : html`<h2>First</h2><ol>${steps}</ol>`
  }

  app.get<{ Params: { accountId: string } }>('/accounts/:accountId/start', pageRoute(kit, 'viewer'), async (request, reply) => {
    const who = whoIn(request)
    const [subs, keys] = await Promise.all([accounts.listSubscriptions(who.account.id), accounts.listKeys(who.account.id)])
    const live = liveKeys(keys, kit.now()).length
    const active = subs.filter((s) => s.status === 'active')
    const pending = subs.filter((s) => s.status === 'pending').length
    const first = firstSteps(who, active, pending, live)
    return sendPage(kit, reply, {
      title: 'Getting started',
      current: who,
      account: { id: who.account.id, name: who.account.name, here: 'start' },
      body: html`<p>Each call to the API carries one of this account’s keys in the <code>x-api-key</code> header, and goes to the base URL of a region the account is subscribed in.</p>
${first ?? ''}
<h2>Your first call</h2>
${
  active.length === 0
    ? html`<p>Once the account has an active subscription, a command to try it appears here.</p>`
    : html`<p>Replace <code>YOUR_KEY</code> with a key of this account (${live} in use).</p>${active.map(call)}`
}
<h2>More</h2>
<ul>
<li><a href="${accountPath(who.account.id, 'keys')}">Keys</a>: create, roll and revoke them.</li>
<li><a href="${accountPath(who.account.id, 'subscriptions')}">Subscriptions</a>: the API groups and regions this account may call.</li>
<li><a href="/docs">API reference</a>: every route, its fields and its answers.</li>
</ul>`,
    })
  })
}
