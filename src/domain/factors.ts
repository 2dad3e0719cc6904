/**
 * Managed TOTP factors, their users and the onboarding records of the Renda-compatible routes.
 */
import type { Algorithm } from './accounts.ts'

export interface OnboardingRecord {
  readonly accountId: string
  readonly applicationId: string
  readonly userId: string
  readonly algorithm: Algorithm
  readonly digits: number
  readonly period: number
  /** A keyed fingerprint of the secret (HMAC with the server pepper), never the secret. */
  readonly secretFingerprint: string
  readonly createdAt: string
  readonly updatedAt: string
}

export type FactorStatus = 'pending' | 'active'

export type FactorType = 'totp' | 'passkey'

/** What every factor of a user has, whatever its type. */
interface FactorBase {
  /** `fct_…` */
  readonly id: string
  readonly accountId: string
  /** The account's own identifier of its user. */
  readonly userId: string
  /** TOTP: the issuer the authenticator app shows. A passkey: the relying party's ID it was registered for. */
  readonly applicationId: string
  readonly label: string | null
  readonly status: FactorStatus
  /**
   * TOTP: the secret. A passkey: its credential ID, public key and transports (PasskeyCredential, as JSON). Sealed by the keyring
   * (bound to account, user and factor); never in the clear.
   */
  readonly sealed: string
  /** The key version `sealed` is sealed under (to find what a rotation must re-seal). */
  readonly keyVersion: number
  readonly createdAt: string
  /** A pending factor is gone after this; null once active. */
  readonly expiresAt: string | null
  readonly activatedAt: string | null
}

/** TotpFactor: a TOTP authenticator the service keeps for one user of an account. */
export interface TotpFactor extends FactorBase {
  readonly type: 'totp'
  /** The compatibility profile it was created under. */
  readonly profile: string
  readonly algorithm: Algorithm
  readonly digits: number
  readonly period: number
  /** The device's clock drift in time steps, as the last resync found it. */
  readonly drift: number
}

/** What a passkey told of itself at registration: nothing that identifies its user. */
export interface PasskeyMeta {
  /** `singleDevice` or `multiDevice` (synced, as a password manager's). */
  readonly deviceType: string
  readonly backedUp: boolean
  /** How the browser reaches it (`internal`, `usb`, `hybrid`…), as it said. */
  readonly transports: readonly string[]
  /** The COSE algorithm of its key (ES256, RS256, EdDSA…). */
  readonly algorithm: string
}

/** PasskeyFactor: a WebAuthn credential of one user of an account; active from its registration. */
export interface PasskeyFactor extends FactorBase {
  readonly type: 'passkey'
  /** The authenticator's signature counter as last seen (0: it keeps none). */
  readonly signCount: number
  readonly meta: PasskeyMeta
  /** A keyed digest of the credential ID (never the ID): how an answer finds its passkey, and why one credential is one factor. */
  readonly credentialDigest: string
}

/** Factor: a user's TOTP authenticator or passkey. */
export type Factor = TotpFactor | PasskeyFactor

/** The sealed part of a passkey (base64url): what identifies the user, never stored in the clear. */
export interface PasskeyCredential {
  readonly id: string
  readonly publicKey: string
}

/**
 * FactorSettings: what an account sets for its managed factors. Passkeys need a relying party
 * (its ID: the domain, and the origins the browser may answer from); the attempt limits are
 * per user and per caller-supplied key in a window. null: not set (a limit takes the server's default).
 */
export interface FactorSettings {
  readonly rpId: string | null
  readonly rpName: string | null
  readonly origins: readonly string[]
  readonly userLimit: number | null
  readonly keyLimit: number | null
  readonly limitWindowSeconds: number | null
  readonly updatedAt: string | null
}

export const NO_FACTOR_SETTINGS: FactorSettings = Object.freeze({
  rpId: null,
  rpName: null,
  origins: [],
  userLimit: null,
  keyLimit: null,
  limitWindowSeconds: null,
  updatedAt: null,
})

/** A passkey ceremony's purpose: what its single-use challenge may be answered for. */
export type ChallengePurpose = 'registration' | 'authentication'

/** PasskeyChallenge: a challenge handed out, kept (as a keyed digest) until answered once or expired. */
export interface PasskeyChallenge {
  readonly digest: string
  readonly accountId: string
  /** The user it was issued to; null for a sign-in that names none (discoverable credentials: the passkey tells whose it is). */
  readonly userId: string | null
  readonly purpose: ChallengePurpose
  /** `required`, `preferred` or `discouraged`: what the ceremony asked, so the answer is held to it. */
  readonly userVerification: string
  readonly createdAt: string
  readonly expiresAt: string
}

/** TotpUser: a user of an account as the operators see it (no secret). */
export interface TotpUser {
  readonly accountId: string
  readonly userId: string
  readonly createdAt: string
  readonly active: number
  readonly pending: number
  readonly recoveryCodesLeft: number
}

/** The bounds of an account's factor settings (docs/guide.md, "Passkeys" and "Attempt limits"). */
export const FACTOR_SETTINGS_BOUNDS = Object.freeze({
  origins: 16,
  userLimit: { min: 1, max: 10_000 },
  keyLimit: { min: 1, max: 1_000_000 },
  windowSeconds: { min: 1, max: 86_400 },
})

/** What an operator or customer may change of the settings: a field left out stays, null clears it. */
export type FactorSettingsPatch = Partial<Omit<FactorSettings, 'updatedAt'>>

const HOST = /^(?=.{1,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/

/**
 * settingsProblem: why settings cannot be kept, or null. The relying party's ID is a host name
 * (lower case, no scheme or port); each origin is a scheme, host and port only, https (http
 * only for localhost), on the ID's host or a subdomain of it: the browser refuses any other
 * (WebAuthn §5.1.4.1), so a passkey registered under settings it would refuse could never be used.
 */
export function settingsProblem(s: Omit<FactorSettings, 'updatedAt'>): { field: string; message: string } | null {
  if (s.rpId !== null && !HOST.test(s.rpId)) {
    return { field: 'rpId', message: 'rpId must be a host name in lower case (example.com), without scheme, port or path' }
  }
  if (s.rpName !== null && (s.rpName.length === 0 || s.rpName.length > 64 || /[\u0000-\u001f\u007f]/.test(s.rpName))) {
    return { field: 'rpName', message: 'rpName must be 1 to 64 characters without control characters' }
  }
  if (s.origins.length > FACTOR_SETTINGS_BOUNDS.origins) return { field: 'origins', message: `at most ${FACTOR_SETTINGS_BOUNDS.origins} origins` }
  for (const origin of s.origins) {
    const problem = originProblem(origin, s.rpId)
    if (problem !== null) return { field: 'origins', message: problem }
  }
  if (s.origins.length > 0 && s.rpId === null) return { field: 'rpId', message: 'origins need rpId' }
  for (const [field, value, bounds] of [
    ['userLimit', s.userLimit, FACTOR_SETTINGS_BOUNDS.userLimit],
    ['keyLimit', s.keyLimit, FACTOR_SETTINGS_BOUNDS.keyLimit],
    ['limitWindowSeconds', s.limitWindowSeconds, FACTOR_SETTINGS_BOUNDS.windowSeconds],
  ] as const) {
    if (value !== null && (!Number.isInteger(value) || value < bounds.min || value > bounds.max)) {
      return { field, message: `${field} must be an integer from ${bounds.min} to ${bounds.max}, or null for the server's default` }
    }
  }
  return null
}

function originProblem(origin: string, rpId: string | null): string | null {
  let url: URL
  try {
    url = new URL(origin)
  } catch {
    return `${JSON.stringify(origin)} is not an origin (https://example.com)`
  }
  if (url.origin !== origin)
    return `${JSON.stringify(origin)} must be an origin exactly as a browser sends it: ${url.origin} (scheme, host, port; no path or slash)`
  const local = url.hostname === 'localhost'
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && local)) return `${origin} must be https (http only for localhost)`
  if (rpId !== null && url.hostname !== rpId && !url.hostname.endsWith(`.${rpId}`)) return `${origin} is not on ${rpId} or a subdomain of it`
  return null
}
