/**
 * The developer portal's domain: its users, their memberships of accounts (with a role),
 * their sessions, the single-use links sent by email, and two-factor recovery codes.
 * Nothing here imports anything of ours but domain/. Passwords, session ids, email tokens
 * and recovery codes appear only as hashes (the TOTP secret, which must be read back to
 * verify codes, as it is: see migration 5).
 */

import type { AccountStatus } from './accounts.ts'

/**
 * A member's role in an account: `owner` (everything, including the team and its owners),
 * `admin` (the team but not its owners), `developer` (keys and subscriptions), `viewer`
 * (read only). An account keeps at least one owner.
 */
export type Role = 'owner' | 'admin' | 'developer' | 'viewer'
export const ROLES: readonly Role[] = ['owner', 'admin', 'developer', 'viewer']

/**
 * A portal user is `active`, `pending` (signed up while SIGNUP_MODE=approval, waiting for an
 * operator) or `disabled` (by an operator: no sign-in).
 */
export type UserStatus = 'active' | 'pending' | 'disabled'
export const USER_STATUSES: readonly UserStatus[] = ['active', 'pending', 'disabled']

/** What a link sent by email is for. */
export type TokenPurpose = 'verify-email' | 'reset-password' | 'invite'
export const TOKEN_PURPOSES: readonly TokenPurpose[] = ['verify-email', 'reset-password', 'invite']

/**
 * emailKey is the form an email address is unique in: `Jane@Example.com` and
 * `jane@example.com` are one user. Lowercased here, not by the database, so that both stores
 * fold every letter alike (SQLite's lower() folds ASCII only).
 */
export function emailKey(email: string): string {
  return email.normalize('NFC').toLowerCase()
}

export interface User {
  readonly id: string
  /** As the user gave it (shown, and mailed to); unique by emailKey. */
  readonly email: string
  /** The encoded hash, with its algorithm and parameters; null for an invited user who has not set a password. */
  readonly passwordHash: string | null
  readonly emailVerifiedAt: string | null
  readonly status: UserStatus
  /** Operators manage every account from the portal, as the admin API does. */
  readonly operator: boolean
  /** The user's own TOTP secret for two-factor sign-in (set while enrolling; in use once totpEnabledAt is set). */
  readonly totpSecret: string | null
  readonly totpEnabledAt: string | null
  readonly createdAt: string
  readonly updatedAt: string
}

export type NewUser = Omit<User, 'updatedAt'>

/** What updateUser may change: a field left out stays; null clears a nullable one. */
export interface UserPatch {
  readonly passwordHash?: string | null
  readonly emailVerifiedAt?: string | null
  readonly status?: UserStatus
  readonly operator?: boolean
  readonly totpSecret?: string | null
  readonly totpEnabledAt?: string | null
}

/** A member of an account, as the account's team page lists them. */
export interface Member {
  readonly accountId: string
  readonly userId: string
  readonly email: string
  readonly role: Role
  readonly createdAt: string
}

/** An account a user belongs to, as the user's own pages list them. */
export interface Membership {
  readonly accountId: string
  readonly accountName: string
  readonly accountStatus: AccountStatus
  readonly role: Role
  readonly createdAt: string
}

/**
 * A signed-in session. Only a hash of its id is kept: a copy of the database gives no
 * session away. `twoFactorPending`: the password was right, the second factor is still due,
 * and the session allows nothing else.
 */
export interface Session {
  readonly idHash: string
  readonly userId: string
  readonly createdAt: string
  readonly expiresAt: string
  readonly lastSeenAt: string
  readonly twoFactorPending: boolean
  readonly ip: string | null
  readonly userAgent: string | null
  /** The provider the session was signed in through (null: a password). */
  readonly ssoProviderId: string | null
}

export type NewSession = Pick<Session, 'idHash' | 'userId' | 'expiresAt' | 'twoFactorPending' | 'ip' | 'userAgent'> & { readonly ssoProviderId?: string | null }

/** A single-use link sent by email, kept by the hash of its token. */
export interface EmailToken {
  readonly tokenHash: string
  readonly purpose: TokenPurpose
  /** The address it was sent to (an invitation's invitee, who may have no user yet). */
  readonly email: string
  readonly userId: string | null
  /** An invitation's account and the role it gives. */
  readonly accountId: string | null
  readonly role: Role | null
  readonly createdAt: string
  readonly expiresAt: string
  readonly usedAt: string | null
}

export type NewEmailToken = Pick<EmailToken, 'tokenHash' | 'purpose' | 'email' | 'expiresAt'> & {
  readonly userId?: string | null
  readonly accountId?: string | null
  readonly role?: Role | null
}

/**
 * What a single sign-on counts for: `portal`, nothing (a user with the portal's own second
 * factor gives it after, as after a password); `amr`, the provider's word that it checked more
 * than one factor (`mfa` among the ID token's `amr` values, RFC 8176: Entra ID, Okta, Keycloak
 * with its AMR mapper say so), or else the portal's; `provider`, every sign-in through it (the
 * operator enforces MFA at the provider, which may not say so: Google Workspace does not).
 */
export type SsoMfa = 'portal' | 'amr' | 'provider'
export const SSO_MFA: readonly SsoMfa[] = ['portal', 'amr', 'provider']

/**
 * An OpenID Connect provider operators let users sign in with. `id` is the operator's short
 * name for it (in URLs and the CLI); `domains` are the e-mail domains (lowercased) whose users
 * it may sign in, empty for any; a first sign-in of an address in them joins `joinAccountId`
 * with `joinRole` when set. `mfa` says what stands for the portal's second factor (SsoMfa).
 * `passwordAllowed` false: users bound
 * to it, and users of its domains, sign in through it only. The client secret is kept sealed
 * (services/users/sso.ts opens it); null for a public client (PKCE alone).
 */
export interface SsoProvider {
  readonly id: string
  readonly name: string
  readonly issuer: string
  readonly clientId: string
  readonly clientSecret: string | null
  readonly domains: readonly string[]
  readonly joinAccountId: string | null
  readonly joinRole: Role | null
  readonly mfa: SsoMfa
  readonly passwordAllowed: boolean
  readonly createdAt: string
  readonly updatedAt: string
}

export type NewSsoProvider = Omit<SsoProvider, 'createdAt' | 'updatedAt'>

/** A provider's subject bound to a portal user: the binding is (provider, subject), never an address. */
export interface SsoIdentity {
  readonly providerId: string
  readonly subject: string
  readonly userId: string
  /** The address the provider last gave (shown; never used to find the user). */
  readonly email: string
  readonly createdAt: string
  readonly lastUsedAt: string
}

export type NewSsoIdentity = Pick<SsoIdentity, 'providerId' | 'subject' | 'userId' | 'email'>

/**
 * An authorization request on its way through the provider, kept by the hash of its `state`
 * until the browser comes back (once, within its lifetime): its nonce and PKCE verifier, the
 * browser it was started in (the pre-session cookie's hash: a callback from another browser is
 * refused), where to go after, and the signed-in user who asked to link the provider (null for a sign-in).
 */
export interface SsoRequest {
  readonly stateHash: string
  readonly providerId: string
  readonly browserHash: string
  readonly nonce: string
  readonly verifier: string
  readonly next: string
  readonly linkUserId: string | null
  readonly ip: string
  readonly createdAt: string
  readonly expiresAt: string
}

export type NewSsoRequest = Omit<SsoRequest, 'createdAt'>
