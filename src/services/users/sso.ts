/**
 * Single sign-on to the portal with OpenID Connect: the authorization code flow with PKCE
 * (RFC 7636) through `openid-client` (certified by the OpenID Foundation), which checks the
 * provider's issuer at discovery and in the ID token, the token's audience, expiry, nonce and
 * (turned on here: `enableNonRepudiationChecks`) its signature against the provider's keys.
 *
 * What is ours, after OpenID Connect Core and the OAuth 2.0 Security BCP (RFC 9700):
 * - a request's state, nonce and PKCE verifier stay on the server, kept by the state's hash,
 *   tied to the browser that started it (the pre-session cookie's hash: a callback carried to
 *   another browser is refused, so nobody can sign a victim into the attacker's account),
 *   taken once, for 10 minutes, at most SSO_PENDING_PER_IP at once per source;
 * - each provider has its own redirect path, and the callback must come back on the path of
 *   the provider its request went to (a code is never redeemed at another provider: mix-up);
 * - a user is found by (provider, subject) only, the one name a provider keeps for a person
 *   (Core 5.7). A first sign-in makes a new user from a verified address of an allowed domain;
 *   an address that already has a user is refused, never bound: its owner signs in with their
 *   password and links the provider from their security page (an address changed at the
 *   provider, or an unverified one, must not open someone else's account);
 * - the provider's sign-in stands for the portal's second factor only as the operator says
 *   (SsoMfa); otherwise a user with the portal's own second factor gives it after, as after a password.
 */
import { createHash } from 'node:crypto'
import { isIP } from 'node:net'
import * as oidc from 'openid-client'
import type { NewSsoProvider, SsoProvider, User } from '../../domain/portal.ts'
import { emailKey, ROLES, SSO_MFA } from '../../domain/portal.ts'
import { newId } from '../../domain/ids.ts'
import { draft, fail, type Context, type Failure } from '../outcome.ts'
import { own, SECOND_FACTOR_TTL_MS, type UsersCore } from './core.ts'
import type { Found } from './sessions.ts'
import { sourceOf } from './throttle.ts'
import { checkTotp } from './codes.ts'
import type { ProofRefusal } from './security.ts'
import { newSessionToken } from './tokens.ts'
import { SealError } from '../../crypto/keyring.ts'

/** How long a request may take through the provider. */
export const SSO_REQUEST_TTL_MS = 10 * 60_000
/** Most providers a service has. */
export const MAX_PROVIDERS = 20
/** How long a provider's discovery document is kept (a failure forgets it at once). */
const DISCOVERY_TTL_MS = 60 * 60_000
const ID = /^[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?$/
const DOMAIN = /^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/
const MAX_STATE = 512

/** SsoProviderInput: what an operator gives for a provider (its client secret in clear, sealed by the store's view). */
export type SsoProviderInput = NewSsoProvider

export type SsoStart =
  | { readonly kind: 'redirect'; readonly url: string }
  | { readonly kind: 'unknown' }
  | { readonly kind: 'busy' }
  | { readonly kind: 'unreachable' }
  /** The provider's client secret does not open under the configured keys (ENCRYPTION_KEYS lost the version it was sealed with). */
  | { readonly kind: 'unreadable' }

/**
 * Why a callback was refused: `expired` (no live request of that state in this browser for
 * this provider), `denied` (the provider said no, or the user cancelled), `invalid` (the code
 * or the ID token did not pass a check), `unreachable`, `unverified` (no verified address for
 * a first sign-in), `domain` (not one of the provider's), `taken` (the address has a user, not
 * bound to this identity), `closed` (no account to join and sign-ups closed), `inactive` (the
 * user waits for approval or is disabled), `bound` (linking: the identity is someone else's,
 * or the user has one there already), `throttled` (a first sign-in over the sign-up limits),
 * `mismatch` (an operator who must use SSO linking an account of another address).
 */
export type SsoRefusal =
  | 'expired'
  | 'denied'
  | 'invalid'
  | 'unreachable'
  | 'unverified'
  | 'domain'
  | 'taken'
  | 'closed'
  | 'inactive'
  | 'bound'
  | 'throttled'
  | 'mismatch'

export type SsoFinish =
  | { readonly kind: 'signed-in'; readonly token: string; readonly twoFactor: boolean; readonly next: string }
  | { readonly kind: 'linked'; readonly next: string; readonly provider: string }
  /** A first sign-in made a user who waits for an operator's approval (SIGNUP_MODE=approval, no account to join): operators are to be told. */
  | { readonly kind: 'pending'; readonly user: User }
  | { readonly kind: 'refused'; readonly reason: SsoRefusal; readonly provider: string | null }

export interface FinishInput {
  /** The provider of the path the browser came back on. */
  readonly providerId: string
  /** The callback's query string, as sent. */
  readonly query: string
  readonly ip: string
  readonly userAgent: string | null
  /** The hash of the browser's pre-session cookie ('' without one): a sign-in's request is bound to it. */
  readonly browserHash: string
  /** The browser's signed-in session, if any (a link must come back to it). */
  readonly signedIn: Found | null
}

const hashOf = (value: string): string => createHash('sha256').update(value).digest('hex')

/** loopback: an http issuer is taken only on this machine (a provider in a test, or beside the node). */
function loopback(url: URL): boolean {
  const host = url.hostname.replace(/^\[|\]$/g, '')
  return host === 'localhost' || (isIP(host) === 4 && host.startsWith('127.')) || host === '::1'
}

/** checkIssuer: an issuer URL as OpenID Connect Discovery takes it (https, no query or fragment), or why not. */
export function checkIssuer(issuer: string): string | null {
  let url: URL
  try {
    url = new URL(issuer)
  } catch {
    return 'issuer must be a URL'
  }
  if (issuer.length > 500) return 'issuer is longer than 500 characters'
  if (url.search !== '' || url.hash !== '' || url.username !== '' || url.password !== '') return 'issuer must have no query, fragment or credentials'
  if (url.protocol === 'https:') return null
  if (url.protocol === 'http:' && loopback(url)) return null
  return 'issuer must be https (http only on a loopback address)'
}

/** Control, bidi and invisible format characters: never in an address we make a user of. */
const UNSHOWABLE = /[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]/

/** Google's issuer: any Google account may have a verified address of any domain; its Workspace domain is the `hd` claim. */
const GOOGLE = 'https://accounts.google.com'

/**
 * domainRefusal: why an identity's address may not be signed in by this provider (null: it may).
 * The address's domain must be one of the provider's; where the token names the organisation's
 * domain (`hd`: Google Workspace), that too, and Google's tokens must name it (a personal Google
 * account can hold a verified address of a company's domain, a former employee's for one).
 */
export function domainRefusal(provider: SsoProvider, email: string, claims: oidc.IDToken): string | null {
  if (provider.domains.length === 0) return null
  const domain = emailKey(email).split('@').pop()!
  if (!provider.domains.includes(domain)) return `domain ${domain.slice(0, 100)} not allowed`
  const hd = typeof claims.hd === 'string' ? claims.hd.toLowerCase() : null
  if (hd !== null && !provider.domains.includes(hd)) return DOMAIN.test(hd) ? `organisation domain ${hd} not allowed` : 'organisation domain not allowed'
  // The token's issuer is the one discovery checked, exactly: not the operator's spelling of it.
  if (hd === null && (claims.iss === GOOGLE || provider.issuer === GOOGLE)) return 'not an account of an allowed Google Workspace domain (no hd claim)'
  return null
}

/** shownEmail: the address the ID token gives, verified or not, when it is one to keep beside an identity ('' otherwise). */
function shownEmail(claims: oidc.IDToken): string {
  const email = typeof claims.email === 'string' ? claims.email.trim() : ''
  return email.length <= 254 && email.isWellFormed() && !UNSHOWABLE.test(email) ? email : ''
}

/** verifiedEmail: the ID token's address when the provider vouches for it (email_verified, or Entra ID's xms_edov), else null. */
export function verifiedEmail(claims: oidc.IDToken): string | null {
  const email = typeof claims.email === 'string' ? claims.email.trim() : ''
  if (email === '' || email.length > 254 || !/^[^\s@]+@[^\s@]+$/.test(email) || !email.isWellFormed() || UNSHOWABLE.test(email)) return null
  return claims.email_verified === true || claims.xms_edov === true ? email : null
}

/**
 * passwordPolicy: for a right password, the providers that allow no password and know the user
 * (`refused`: the password opens nothing, they sign in through one of those), or else the first
 * (by id) that allows none and holds the user's address's domain but does not know them yet
 * (`linkFirst`: the password opens no session either, only the way to link that provider, through
 * it, in this browser; refusing them outright would leave them no way in, since a first sign-in
 * through the provider never takes over an address that has a user).
 */
export async function passwordPolicy(c: Pick<UsersCore, 'store'>, user: User): Promise<{ refused: string[]; linkFirst: SsoProvider | null }> {
  const providers = (await c.store.portal.listSsoProviders()).filter((p) => !p.passwordAllowed)
  if (providers.length === 0) return { refused: [], linkFirst: null }
  const domain = emailKey(user.email).split('@').pop() ?? ''
  const bound = new Set((await c.store.portal.ssoIdentitiesOf(user.id)).map((i) => i.providerId))
  return {
    refused: providers.filter((p) => bound.has(p.id)).map((p) => p.name),
    linkFirst: providers.find((p) => !bound.has(p.id) && p.domains.includes(domain)) ?? null,
  }
}

export class SingleSignOn {
  readonly #c: UsersCore
  readonly #discovered = new Map<string, { readonly key: string; readonly at: number; readonly config: Promise<oidc.Configuration> }>()

  constructor(core: UsersCore) {
    this.#c = core
  }

  /** redirectUri: where a provider sends the browser back (registered with the provider). */
  redirectUri(providerId: string): string {
    return `${this.#c.config.publicBaseUrl}/portal/sso/${providerId}/callback`
  }

  // ---- The operator's side.

  /** saveProvider creates a provider, or replaces the one of its id; audited (`sso.provider-create`/`-update`), never with its secret. */
  async saveProvider(ctx: Context, input: SsoProviderInput): Promise<{ provider: SsoProvider; created: boolean } | Failure> {
    const c = this.#c
    const bad = await this.#check(input)
    if (bad !== null) return bad
    const domains = [...new Set(input.domains.map((d) => d.trim().toLowerCase()))].sort()
    const provider = {
      ...input,
      issuer: input.issuer.replace(/\/+$/, ''),
      domains,
      joinRole: input.joinAccountId === null ? null : (input.joinRole ?? 'viewer'),
    }
    const existing = await c.store.portal.listSsoProviders()
    if (existing.length >= MAX_PROVIDERS && !existing.some((p) => p.id === input.id)) return fail('limit', `a service has at most ${MAX_PROVIDERS} providers`)
    const detail = {
      name: provider.name,
      issuer: provider.issuer,
      clientId: provider.clientId,
      domains: provider.domains,
      joinAccountId: provider.joinAccountId,
      joinRole: provider.joinRole,
      mfa: provider.mfa,
      passwordAllowed: provider.passwordAllowed,
      clientSecret: provider.clientSecret === null ? 'none' : 'set',
    }
    const exists = existing.some((p) => p.id === input.id)
    const created = await c.store.portal.saveSsoProvider(
      provider,
      draft(ctx, exists ? 'sso.provider-update' : 'sso.provider-create', { type: 'sso-provider', id: provider.id }, provider.joinAccountId, detail),
    )
    this.#discovered.delete(provider.id)
    return { provider: (await this.#listed(provider.id))!, created }
  }

  async #check(input: SsoProviderInput): Promise<Failure | null> {
    if (!ID.test(input.id)) return fail('invalid', 'id must be 1 to 32 lowercase letters, digits and inner hyphens', 'id')
    if (input.name.trim() === '' || input.name.length > 100 || /[\u0000-\u001f\u007f\u202a-\u202e\u2066-\u2069]/.test(input.name))
      return fail('invalid', 'name must be 1 to 100 characters, without control or bidi characters', 'name')
    const issuer = checkIssuer(input.issuer)
    if (issuer !== null) return fail('invalid', issuer, 'issuer')
    if (input.clientId === '' || input.clientId.length > 255 || /[\u0000-\u0020\u007f]/.test(input.clientId))
      return fail('invalid', 'clientId must be 1 to 255 visible characters', 'clientId')
    if (input.clientSecret !== null && (input.clientSecret === '' || input.clientSecret.length > 1000))
      return fail('invalid', 'clientSecret must be 1 to 1000 characters', 'clientSecret')
    if (input.domains.length > 50) return fail('invalid', 'at most 50 domains', 'domains')
    const wrong = input.domains.find((d) => !DOMAIN.test(d.trim().toLowerCase()))
    if (wrong !== undefined) return fail('invalid', `"${wrong.slice(0, 80)}" is not a domain name`, 'domains')
    if (!SSO_MFA.includes(input.mfa)) return fail('invalid', `mfa must be one of ${SSO_MFA.join(', ')}`, 'mfa')
    if (input.joinRole !== null && !ROLES.includes(input.joinRole)) return fail('invalid', `joinRole must be one of ${ROLES.join(', ')}`, 'joinRole')
    if (input.joinRole !== null && input.joinAccountId === null) return fail('invalid', 'joinRole needs joinAccountId', 'joinRole')
    if (input.joinAccountId !== null && input.domains.length === 0)
      return fail('invalid', 'joinAccountId needs domains: otherwise everyone the provider signs in (any Google account, say) joins the account', 'domains')
    if (input.joinAccountId !== null && (await this.#c.store.access.getAccount(input.joinAccountId)) === null)
      return fail('not_found', `no account ${input.joinAccountId.slice(0, 40)}`, 'joinAccountId')
    return null
  }

  listProviders(): Promise<SsoProvider[]> {
    return this.#c.store.portal.listSsoProviders()
  }

  /** deleteProvider deletes a provider, its identities and requests in flight, and ends the sessions signed in through it. */
  async deleteProvider(ctx: Context, id: string): Promise<true | Failure> {
    // Listed, not opened: a provider whose secret no longer opens (its key removed) can still be deleted.
    const provider = await this.#listed(id)
    if (provider === null) return fail('not_found', `no provider ${id.slice(0, 40)}`)
    const gone = await this.#c.store.portal.deleteSsoProvider(
      id,
      draft(ctx, 'sso.provider-delete', { type: 'sso-provider', id }, provider.joinAccountId, { issuer: provider.issuer }),
    )
    this.#discovered.delete(id)
    return gone ? true : fail('not_found', `no provider ${id.slice(0, 40)}`)
  }

  // ---- The portal's side.

  /** buttons: the providers the sign-in page offers, by name. */
  async buttons(): Promise<{ id: string; name: string }[]> {
    return (await this.#c.store.portal.listSsoProviders()).map((p) => ({ id: p.id, name: p.name }))
  }

  /** identitiesOf: a user's linked providers, with each one's name (the security page). */
  async identitiesOf(userId: string): Promise<{ providerId: string; name: string; email: string; lastUsedAt: string }[]> {
    const [identities, providers] = await Promise.all([this.#c.store.portal.ssoIdentitiesOf(userId), this.#c.store.portal.listSsoProviders()])
    return identities.map((i) => ({
      providerId: i.providerId,
      name: providers.find((p) => p.id === i.providerId)?.name ?? i.providerId,
      email: i.email,
      lastUsedAt: i.lastUsedAt,
    }))
  }

  /** start: a new request and the provider's authorization URL to send the browser to. */
  async start(input: { providerId: string; next: string; ip: string; browserHash: string; linkUserId: string | null }): Promise<SsoStart> {
    const c = this.#c
    const provider = ID.test(input.providerId) ? await this.#forFlow(input.providerId) : null
    if (provider === null) return { kind: 'unknown' }
    if (provider === 'unreadable') return { kind: 'unreadable' }
    const config = await this.#configOf(provider)
    if (config === null) return { kind: 'unreachable' }
    const state = oidc.randomState()
    const nonce = oidc.randomNonce()
    const verifier = oidc.randomPKCECodeVerifier()
    const made = await c.store.portal.createSsoRequest(
      {
        stateHash: hashOf(state),
        providerId: provider.id,
        browserHash: input.browserHash,
        nonce,
        verifier,
        next: input.next,
        linkUserId: input.linkUserId,
        ip: sourceOf(input.ip),
        expiresAt: c.iso(c.now() + SSO_REQUEST_TTL_MS),
      },
      { perIp: c.config.ssoPendingPerIp, total: c.config.ssoPendingMax },
      c.iso(),
    )
    if (!made) return { kind: 'busy' }
    const url = oidc.buildAuthorizationUrl(config, {
      redirect_uri: this.redirectUri(provider.id),
      scope: 'openid email profile',
      state,
      nonce,
      code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
    })
    return { kind: 'redirect', url: url.href }
  }

  /** finish: a callback's code, redeemed and checked, to a session, a link, or why not (each audited). */
  async finish(input: FinishInput): Promise<SsoFinish> {
    const c = this.#c
    const query = new URLSearchParams(input.query)
    const state = query.get('state') ?? ''
    const request = state === '' || state.length > MAX_STATE ? null : await c.store.portal.takeSsoRequest(hashOf(state), c.iso())
    // Unknown, used, expired, another provider's path, or another browser: one answer.
    // A sign-in is bound to the browser's pre-session; a link to the session that asked for it, or (a password that must link
    // its provider first) to the pre-session the password was given in.
    const browsers = [input.browserHash, ...(request?.linkUserId == null ? [] : [input.signedIn?.session.idHash ?? ''])].filter((b) => b !== '')
    if (request === null || request.providerId !== input.providerId || !browsers.includes(request.browserHash)) {
      const why = request === null ? 'unknown or expired state' : request.providerId !== input.providerId ? 'another provider' : 'another browser'
      return this.#refuse(input, null, 'expired', why)
    }
    const provider = await this.#forFlow(request.providerId)
    if (provider === null) return this.#refuse(input, null, 'expired', 'provider deleted')
    if (provider === 'unreadable') return this.#refuse(input, null, 'unreachable', 'its client secret does not open under the configured keys')
    const error = query.get('error')
    if (error !== null) return this.#refuse(input, provider, 'denied', `provider error ${error.replace(/[^a-z_]/gi, '').slice(0, 40)}`)
    const config = await this.#configOf(provider)
    if (config === null) return this.#refuse(input, provider, 'unreachable', 'provider unreachable')
    const current = new URL(this.redirectUri(provider.id))
    current.search = query.toString()
    let claims: oidc.IDToken
    try {
      const tokens = await oidc.authorizationCodeGrant(config, current, {
        pkceCodeVerifier: request.verifier,
        expectedState: state,
        expectedNonce: request.nonce,
        idTokenExpected: true,
      })
      claims = tokens.claims()!
      // A provider that keeps the scopes' claims for UserInfo (OpenID Connect Core 5.4): asked there, for this subject only.
      if (claims.email === undefined && tokens.access_token !== undefined && config.serverMetadata().userinfo_endpoint !== undefined) {
        const info = await oidc.fetchUserInfo(config, tokens.access_token, claims.sub)
        claims = { ...claims, email: info.email, email_verified: info.email_verified }
      }
    } catch (error) {
      const e = error as Error & { code?: string; cause?: unknown }
      const network =
        e.code === 'OAUTH_TIMEOUT' ||
        e.code === 'OAUTH_ABORT' ||
        e.name === 'TimeoutError' ||
        e.name === 'AbortError' ||
        (e instanceof TypeError && e.message === 'fetch failed')
      if (network) this.#discovered.delete(provider.id)
      // The library's words (a check that failed), never a token or a code.
      // The library's cause names the claim a comparison failed on; its values (a nonce, an audience) are not in it.
      const claim = e.cause instanceof Error ? ` (${e.cause.message})` : ''
      return this.#refuse(input, provider, network ? 'unreachable' : 'invalid', `${e.code ?? e.name}: ${e.message}${claim}`.slice(0, 200))
    }
    // The provider's issuer changed while the browser was away (its subjects are another's now): nothing is bound under it.
    if ((await this.#listed(provider.id))?.issuer !== provider.issuer) return this.#refuse(input, null, 'expired', 'provider changed meanwhile')
    const subject = claims.sub
    const email = verifiedEmail(claims)
    if (request.linkUserId !== null) {
      const signedInLink = input.signedIn !== null && input.signedIn.session.idHash === request.browserHash
      return this.#link(input, provider, request.linkUserId, subject, claims, request.next, signedInLink)
    }
    const found = await c.store.portal.findSsoIdentity(provider.id, subject)
    let user: User
    if (found !== null) {
      user = found.user
      await c.store.portal.touchSsoIdentity(provider.id, subject, email ?? shownEmail(claims), c.iso())
    } else {
      const made = await this.#firstSignIn(input, provider, subject, email, claims)
      if ('kind' in made) return made
      if (made.status === 'pending') return { kind: 'pending', user: made }
      user = made
    }
    return this.#session(input, provider, user, claims, request.next)
  }

  /** session: a new session through the provider, as a password sign-in makes one (the second factor due unless the provider's MFA stands for it). */
  async #session(input: FinishInput, provider: SsoProvider, user: User, claims: oidc.IDToken, next: string): Promise<SsoFinish> {
    const c = this.#c
    if (user.status !== 'active') return this.#refuse(input, provider, 'inactive', `user ${user.status}`, user)
    const providerMfa = provider.mfa === 'provider' || (provider.mfa === 'amr' && Array.isArray(claims.amr) && claims.amr.includes('mfa'))
    const twoFactor = user.totpEnabledAt !== null && !providerMfa
    const session = newSessionToken()
    const detail = { method: 'sso', provider: provider.id, providerMfa }
    const events = twoFactor ? [] : (await c.ownEvents(input.ip, user, 'user.sign-in', 'success'))(detail)
    const userAgent = input.userAgent === null ? null : input.userAgent.slice(0, 256)
    const expiresAt = c.iso(c.now() + (twoFactor ? SECOND_FACTOR_TTL_MS : c.sessionTtlMs))
    await c.store.portal.createSession(
      { idHash: session.idHash, userId: user.id, expiresAt, twoFactorPending: twoFactor, ip: input.ip, userAgent, ssoProviderId: provider.id },
      events,
    )
    return { kind: 'signed-in', token: session.token, twoFactor, next }
  }

  /** firstSignIn: a new user for an identity never seen, from its verified address in an allowed domain, joined to the provider's account or given their own; or why not. */
  async #firstSignIn(input: FinishInput, provider: SsoProvider, subject: string, email: string | null, claims: oidc.IDToken): Promise<User | SsoFinish> {
    const c = this.#c
    if (email === null) return this.#refuse(input, provider, 'unverified', 'no verified email address')
    const outside = domainRefusal(provider, email, claims)
    if (outside !== null) return this.#refuse(input, provider, 'domain', outside)
    if (provider.joinAccountId === null && c.config.signupMode === 'closed')
      return this.#refuse(input, provider, 'closed', 'no account to join, sign-ups closed')
    // A new user is a sign-up: counted against its source and the hour's total as a password sign-up is.
    if ((await c.limits.signUp(input.ip)) > 0) return this.#refuse(input, provider, 'throttled', 'sign-ups from this source or in all over the limit')
    const now = c.iso()
    const user: User = {
      id: newId('usr'),
      email,
      passwordHash: null,
      emailVerifiedAt: now,
      status: provider.joinAccountId === null && c.config.signupMode === 'approval' ? 'pending' : 'active',
      operator: false,
      totpSecret: null,
      totpEnabledAt: null,
      createdAt: now,
      updatedAt: now,
    }
    const ctx = own(user, input.ip)
    const event = c.draft(ctx, user, 'user.sign-up', { method: 'sso', provider: provider.id })
    if (!(await c.store.portal.createSsoUser(user, { providerId: provider.id, subject, email }, event))) {
      // Made meanwhile by a callback of the same identity: that user. Otherwise the address is someone's.
      const raced = await c.store.portal.findSsoIdentity(provider.id, subject)
      if (raced !== null) return raced.user
      if ((await this.#listed(provider.id)) === null) return this.#refuse(input, null, 'expired', 'provider deleted meanwhile')
      return this.#refuse(input, provider, 'taken', 'address has a user not bound to this identity', await c.store.portal.findUserByEmail(email))
    }
    if (provider.joinAccountId !== null) {
      const role = provider.joinRole ?? 'viewer'
      await c.store.portal.addMember(
        provider.joinAccountId,
        user.id,
        role,
        draft(ctx, 'member.add', { type: 'member', id: user.id }, provider.joinAccountId, { role, via: provider.id }),
      )
    } else {
      // As a password sign-up: a user left without one (a refusal here, or a crash between the steps) makes one from the home page.
      await c.accounts.createOwnedAccount(ctx, user.id, { name: email.slice(0, 200) })
    }
    return user
  }

  /** link binds the identity to the signed-in user who asked (their security page), once. */
  async #link(
    input: FinishInput,
    provider: SsoProvider,
    userId: string,
    subject: string,
    claims: oidc.IDToken,
    next: string,
    signedInLink: boolean,
  ): Promise<SsoFinish> {
    const c = this.#c
    // The user as stored (an operator whose password session reads as a member's is still an operator here): the signed-in
    // session's, or the one whose password began this in this browser's pre-session (a password that must link first).
    const user = signedInLink && input.signedIn?.user.id !== userId ? null : await c.store.portal.getUser(userId)
    if (user === null) return this.#refuse(input, provider, 'expired', 'link came back to another session')
    // The rules of a first sign-in hold for a link too: a verified address of the provider's domains.
    const email = verifiedEmail(claims)
    if (email === null) return this.#refuse(input, provider, 'unverified', 'no verified email address', user)
    const outside = domainRefusal(provider, email, claims)
    if (outside !== null) return this.#refuse(input, provider, 'domain', outside, user)
    // Operators who must sign in through a provider link only their own address there: their password alone must not make an SSO session.
    if (user.operator && c.config.ssoOperatorsRequired && emailKey(email) !== emailKey(user.email))
      return this.#refuse(input, provider, 'mismatch', "an operator links only the provider's account of their own address", user)
    const bound = await c.store.portal.bindSsoIdentity(
      { providerId: provider.id, subject, userId, email: email.slice(0, 254) },
      { ...c.draft(own(user, input.ip), user, 'user.sso-link', { provider: provider.id }) },
    )
    if (!bound) {
      const gone = (await this.#listed(provider.id)) === null
      return this.#refuse(input, provider, gone ? 'expired' : 'bound', gone ? 'provider deleted meanwhile' : 'identity bound already', user)
    }
    // Linked from a password sign-in that could open no session: the provider's sign-in is this one's.
    if (!signedInLink) return this.#session(input, provider, user, claims, next)
    return { kind: 'linked', next, provider: provider.name }
  }

  /**
   * operatorSession: whether a session may open the operator pages when SSO_OPERATORS_REQUIRED
   * is set: signed in through a provider that knows the operator by their own address (a link
   * made before the setting, or before they were an operator, to another address does not count).
   */
  async operatorSession(found: Found): Promise<boolean> {
    const { session, user } = found
    if (session.ssoProviderId === null) return false
    const identities = await this.#c.store.portal.ssoIdentitiesOf(user.id)
    return identities.some((i) => i.providerId === session.ssoProviderId && emailKey(i.email) === emailKey(user.email))
  }

  /**
   * proveForLink: linking adds a way into the account, so a session left open is not enough (as
   * for the security page's other changes): the password, or a code from the user's app; a user
   * with neither (made by a provider, no second factor) proves it by a sign-in through a provider
   * within the last 10 minutes. Null: proven.
   */
  async proveForLink(found: Found, proof: string, ip: string): Promise<ProofRefusal | { readonly kind: 'stale' } | null> {
    const c = this.#c
    const { user, session } = found
    const twoFactor = user.totpSecret !== null && user.totpEnabledAt !== null
    if (twoFactor && /^\s*\d{3}\s?\d{3}\s*$/.test(proof)) {
      const outcome = await checkTotp(c, user.id, user.totpSecret!, proof)
      return outcome.kind === 'accepted' ? null : { kind: 'code', outcome }
    }
    if (user.passwordHash !== null) {
      const refusal = await c.passwordAgain(user, proof, ip, 'sso-proof')
      return refusal === null ? null : { kind: 'password', refusal }
    }
    if (twoFactor) return { kind: 'code', outcome: { kind: 'invalid' } }
    return session.ssoProviderId !== null && c.now() - Date.parse(session.createdAt) <= SSO_REQUEST_TTL_MS ? null : { kind: 'stale' }
  }

  /**
   * unlink removes a user's identity at a provider, given who they are (as a link), unless it is their only way in (no password,
   * no other identity; decided again in the store's step) or the provider allows no password; their other sessions through it end.
   */
  async unlink(found: Found, providerId: string, proof: string, ip: string): Promise<true | Failure | ProofRefusal | { readonly kind: 'stale' }> {
    const c = this.#c
    const { user } = found
    const refused = await this.proveForLink(found, proof, ip)
    if (refused !== null) return refused
    const identities = await c.store.portal.ssoIdentitiesOf(user.id)
    if (!identities.some((i) => i.providerId === providerId)) return fail('not_found', 'no such linked provider')
    if (user.passwordHash === null && identities.length === 1) return fail('conflict', 'this is your only way to sign in: set a password first')
    const provider = await this.#listed(providerId)
    if (provider !== null && !provider.passwordAllowed) return fail('conflict', `your operator signs you in through ${provider.name}: it stays linked`)
    const done = await c.store.portal.unbindSsoIdentity(
      user.id,
      providerId,
      found.session.idHash,
      c.draft(own(user, ip), user, 'user.sso-unlink', { provider: providerId }),
    )
    if (done === 'last') return fail('conflict', 'this is your only way to sign in: set a password first')
    return done === 'unbound' ? true : fail('not_found', 'no such linked provider')
  }

  /** refuse audits a refused callback (as the user when known, else anonymous) and says why. */
  async #refuse(input: FinishInput, provider: SsoProvider | null, reason: SsoRefusal, why: string, user: User | null = null): Promise<SsoFinish> {
    const detail = { method: 'sso', provider: provider?.id ?? input.providerId.slice(0, 40), reason: why }
    await this.#c.audit(input.ip, user, 'user.sign-in', 'failure', detail, `sso:${provider?.id ?? ''}`)
    return { kind: 'refused', reason, provider: provider?.name ?? null }
  }

  /** listed: a provider as listed, its client secret left sealed (for what does not call it), or null. */
  async #listed(id: string): Promise<SsoProvider | null> {
    return (await this.#c.store.portal.listSsoProviders()).find((p) => p.id === id) ?? null
  }

  /** forFlow: a provider with its client secret opened, for a sign-in's calls to it; `unreadable` when the secret does not open. */
  async #forFlow(id: string): Promise<SsoProvider | 'unreadable' | null> {
    try {
      return await this.#c.store.portal.getSsoProvider(id)
    } catch (error) {
      if (error instanceof SealError) return 'unreadable'
      throw error
    }
  }

  /** configOf: the provider's discovered configuration (kept an hour, forgotten on a failure), or null when it cannot be had now. */
  async #configOf(provider: SsoProvider): Promise<oidc.Configuration | null> {
    const key = hashOf(JSON.stringify([provider.issuer, provider.clientId, provider.clientSecret]))
    const kept = this.#discovered.get(provider.id)
    const now = this.#c.now()
    let entry = kept
    if (kept === undefined || kept.key !== key || now - kept.at > DISCOVERY_TTL_MS) {
      const http = new URL(provider.issuer).protocol === 'http:'
      const config = oidc.discovery(
        new URL(provider.issuer),
        provider.clientId,
        undefined,
        provider.clientSecret === null ? oidc.None() : oidc.ClientSecretBasic(provider.clientSecret),
        {
          execute: http ? [oidc.allowInsecureRequests, oidc.enableNonRepudiationChecks] : [oidc.enableNonRepudiationChecks],
          timeout: Math.ceil(this.#c.config.ssoTimeoutMs / 1000),
        },
      )
      entry = { key, at: now, config }
      this.#discovered.set(provider.id, entry)
    }
    try {
      return await entry!.config
    } catch {
      if (this.#discovered.get(provider.id) === entry) this.#discovered.delete(provider.id)
      return null
    }
  }
}
