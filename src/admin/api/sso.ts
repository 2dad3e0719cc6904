/**
 * The admin API's single sign-on providers (docs/portal.md): listed, created or replaced by
 * their id (PUT: every setting as given, as the CLI's `sso add`), deleted with their links and
 * the sessions signed in through them, through the users service with the token as actor. A
 * client secret goes in and is kept sealed; no answer ever holds it (`clientSecret` says `set`
 * or `none`).
 */
import type { FastifyInstance } from 'fastify'
import { Type } from 'typebox'
import { ROLES, SSO_MFA, type Role, type SsoMfa, type SsoProvider } from '../../domain/portal.ts'
import type { SingleSignOn } from '../../services/users/sso.ts'
import { MAX_PROVIDERS } from '../../services/users/sso.ts'
import { context, ok } from './routes.ts'
import { errors, nullable, strict, time } from './schemas.ts'

export const SSO_TAG = { name: 'sso', description: "Single sign-on providers of the developer portal (OpenID Connect): the portal's sign-in page offers each" }

const EXAMPLE = {
  id: 'keycloak',
  name: 'Keycloak',
  issuer: 'https://id.example.com/realms/acme',
  clientId: 'tessera-portal',
  clientSecret: 'set',
  domains: ['acme.example'],
  joinAccountId: 'acc_5b0c9e2a7d41f386',
  joinRole: 'developer',
  mfa: 'amr',
  passwordAllowed: false,
  redirectUri: 'https://api.example.com/portal/sso/keycloak/callback',
  createdAt: '2026-11-30T08:00:00.000Z',
  updatedAt: '2026-11-30T08:00:00.000Z',
}

const providerId = Type.String({
  minLength: 1,
  maxLength: 32,
  pattern: '^[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?$',
  description: "The provider's id: in its redirect URI and the portal's paths.",
})

export const ssoProvider = Type.Object(
  {
    id: Type.String(),
    name: Type.String({ description: "Shown on the sign-in page's button: 'Sign in with …'." }),
    issuer: Type.String({ description: "The provider's issuer URL, as its discovery document names it." }),
    clientId: Type.String(),
    clientSecret: Type.String({ enum: ['set', 'none'], description: '`set` (kept sealed, never shown) or `none` (a public client: PKCE alone).' }),
    domains: Type.Array(Type.String(), { description: 'The e-mail domains it may sign in for the first time or link; empty: any.' }),
    joinAccountId: nullable(Type.String(), 'The account a first sign-in joins; null: a first sign-in is a sign-up.'),
    joinRole: nullable(Type.String({ enum: [...ROLES] }), 'The role it joins with.'),
    mfa: Type.String({
      enum: [...SSO_MFA],
      description: "What the provider's sign-in counts for: `portal` nothing, `amr` its token's word (`mfa`), `provider` always.",
    }),
    passwordAllowed: Type.Boolean({ description: 'false: users linked to it sign in through it only.' }),
    redirectUri: Type.String({ description: 'The redirect URI to register with the provider.' }),
    createdAt: time(),
    updatedAt: time(),
  },
  { examples: [EXAMPLE] },
)

export const listSsoProvidersSchema = {
  operationId: 'listSsoProviders',
  summary: 'List the single sign-on providers',
  description: `Every provider (at most ${MAX_PROVIDERS}), by id. No secret is in the answer.`,
  tags: ['sso'],
  response: {
    200: Type.Object(
      { items: Type.Array(ssoProvider), next: Type.Null() },
      { description: 'The providers, by id.', examples: [{ items: [EXAMPLE], next: null }] },
    ),
    ...errors([]),
  },
}

export const putSsoProviderSchema = {
  operationId: 'putSsoProvider',
  summary: 'Create or replace a single sign-on provider',
  description: [
    `Creates the provider of that id (201), or replaces it (200) with every setting as given: a setting left out takes its default (no secret, any domain, no account to join, \`mfa\` \`portal\`, passwords allowed). Changing the issuer drops the identities bound under the old one and the sessions signed in through it. The issuer is not called now: register \`redirectUri\` with the provider, then sign in from the portal to try it. At most ${MAX_PROVIDERS} providers.`,
    '',
    'Audited as `sso.provider-create` or `sso.provider-update` (the token as actor; whether a secret is set, never its value). 400 names the field at fault (`joinAccountId` needs `domains`; an issuer must be https, http only on a loopback address); 404 for an unknown `joinAccountId`; 409 `LIMIT_REACHED` past the number of providers.',
  ].join('\n'),
  tags: ['sso'],
  params: Type.Object({ providerID: providerId }),
  body: Type.Object(
    {
      name: Type.String({ minLength: 1, maxLength: 100 }),
      issuer: Type.String({ minLength: 1, maxLength: 500 }),
      clientId: Type.String({ minLength: 1, maxLength: 255 }),
      clientSecret: Type.Optional(
        nullable(Type.String({ minLength: 1, maxLength: 1000 }), 'The client secret (kept sealed); null or absent: a public client.'),
      ),
      domains: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 253 }), { maxItems: 50 })),
      joinAccountId: Type.Optional(nullable(Type.String({ minLength: 1, maxLength: 100 }), 'The account a first sign-in joins.')),
      joinRole: Type.Optional(nullable(Type.String({ enum: [...ROLES] }), 'The role it joins with (default `viewer`).')),
      mfa: Type.Optional(Type.String({ enum: [...SSO_MFA] })),
      passwordAllowed: Type.Optional(Type.Boolean()),
    },
    {
      ...strict,
      examples: [
        {
          name: 'Keycloak',
          issuer: 'https://id.example.com/realms/acme',
          clientId: 'tessera-portal',
          clientSecret: 'the secret the provider gave',
          domains: ['acme.example'],
          joinAccountId: 'acc_5b0c9e2a7d41f386',
          joinRole: 'developer',
          mfa: 'amr',
          passwordAllowed: false,
        },
      ],
    },
  ),
  response: {
    200: { ...ssoProvider, description: 'Replaced.' },
    201: { ...ssoProvider, description: 'Created.' },
    ...errors(['NOT_FOUND', 'LIMIT_REACHED'], { write: true, body: true }),
  },
}

export const deleteSsoProviderSchema = {
  operationId: 'deleteSsoProvider',
  summary: 'Delete a single sign-on provider',
  description:
    'Deletes the provider, the identities bound to it and its sign-ins in flight, and ends the sessions signed in through it. Audited as `sso.provider-delete`.',
  tags: ['sso'],
  params: Type.Object({ providerID: Type.String({ minLength: 1, maxLength: 100 }) }),
  response: {
    200: Type.Object({ id: Type.String(), deleted: Type.Literal(true) }, { description: 'Deleted.', examples: [{ id: 'keycloak', deleted: true }] }),
    ...errors(['NOT_FOUND'], { write: true }),
  },
}

interface PutBody {
  readonly name: string
  readonly issuer: string
  readonly clientId: string
  readonly clientSecret?: string | null
  readonly domains?: string[]
  readonly joinAccountId?: string | null
  readonly joinRole?: Role | null
  readonly mfa?: SsoMfa
  readonly passwordAllowed?: boolean
}

export default async function ssoRoutes(app: FastifyInstance, opts: { readonly sso: SingleSignOn }): Promise<void> {
  const { sso } = opts
  const view = (p: SsoProvider) => ({ ...p, clientSecret: p.clientSecret === null ? 'none' : 'set', redirectUri: sso.redirectUri(p.id) })

  app.get('/admin/v1/sso-providers', { schema: listSsoProvidersSchema }, async () => ({ items: (await sso.listProviders()).map(view), next: null }))

  app.put('/admin/v1/sso-providers/:providerID', { schema: putSsoProviderSchema }, async (request, reply) => {
    const { providerID } = request.params as { providerID: string }
    const body = request.body as PutBody
    const { provider, created } = ok(
      await sso.saveProvider(context(request), {
        id: providerID,
        name: body.name,
        issuer: body.issuer,
        clientId: body.clientId,
        clientSecret: body.clientSecret ?? null,
        domains: body.domains ?? [],
        joinAccountId: body.joinAccountId ?? null,
        joinRole: body.joinRole ?? null,
        mfa: body.mfa ?? 'portal',
        passwordAllowed: body.passwordAllowed ?? true,
      }),
    )
    return reply.code(created ? 201 : 200).send(view(provider))
  })

  app.delete('/admin/v1/sso-providers/:providerID', { schema: deleteSsoProviderSchema }, async (request) => {
    const { providerID } = request.params as { providerID: string }
    ok(await sso.deleteProvider(context(request), providerID))
    return { id: providerID, deleted: true as const }
  })
}
