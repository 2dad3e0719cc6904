/**
 * The single sign-on providers, as operators see them: each one's issuer, client, domains, the
 * account and role a first sign-in joins, what counts as the second factor, whether passwords
 * stay allowed, and the redirect URI to register with it; and whether the operator pages need a
 * single sign-on session. Read only: providers are changed with the CLI on a node (`sso add`),
 * where the client secret is read from a file, never typed into a page.
 */
import type { FastifyInstance } from 'fastify'
import { html, wide } from '../web/html.ts'
import type { Kit } from '../web/kit.ts'
import { caller } from '../web/kit.ts'
import { sendOperatorPage, when } from './common.ts'

const MFA_WORDS = { portal: "the portal's own", amr: "the provider's, when its token says MFA", provider: "the provider's, always" } as const

export default async function operatorSso(app: FastifyInstance, kit: Kit): Promise<void> {
  app.get('/operator/sso', { schema: { hide: true } }, async (request, reply) => {
    const current = caller(request)
    const providers = await kit.users.sso.listProviders()
    const required = kit.config.ssoOperatorsRequired
    return sendOperatorPage(
      kit,
      reply,
      current,
      'sso',
      'Single sign-on',
      html`
<p>${required ? html`<span class="badge ok">Required</span> The operator pages open only in a session signed in through a provider (SSO_OPERATORS_REQUIRED=true).` : html`<span class="badge off">Not required</span> Operators may use the operator pages in a password session too (SSO_OPERATORS_REQUIRED=false).`}</p>
<p>Providers are added, changed and removed on a node with <code>npm run admin -- sso add|remove</code> (docs/portal.md): the client secret is read from a file there, never typed into a page.</p>
${
  providers.length === 0
    ? html`<p role="status">No provider yet: everyone signs in with a password.</p>`
    : wide(
        'Single sign-on providers',
        html`<table>
<caption>Single sign-on providers</caption>
<thead><tr><th scope="col">Provider</th><th scope="col">Issuer and client</th><th scope="col">Domains</th><th scope="col">First sign-in joins</th><th scope="col">Second factor</th><th scope="col">Passwords</th><th scope="col">Redirect URI</th><th scope="col">Changed</th></tr></thead>
<tbody>${providers.map(
          (
            p,
          ) => html`<tr><th scope="row">${p.name} <code>${p.id}</code></th><td><code>${p.issuer}</code><br><code>${p.clientId}</code> (${p.clientSecret === null ? 'public' : 'secret set'})</td>
<td>${p.domains.length === 0 ? 'any' : p.domains.join(', ')}</td>
<td>${p.joinAccountId === null ? 'an account of their own' : html`<a href="/portal/operator/accounts/${encodeURIComponent(p.joinAccountId)}">${p.joinAccountId}</a> as ${p.joinRole ?? 'viewer'}`}</td>
<td>${MFA_WORDS[p.mfa]}</td><td>${p.passwordAllowed ? 'allowed' : html`<span class="badge warn">off</span> for its users and domains`}</td>
<td><code>${kit.users.sso.redirectUri(p.id)}</code></td><td>${when(p.updatedAt)}</td></tr>`,
        )}</tbody>
</table>`,
      )
}`,
    )
  })
}
