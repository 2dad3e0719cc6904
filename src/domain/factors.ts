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

/** Factor: a TOTP authenticator the service keeps for one user of an account. */
export interface Factor {
  /** `fct_…` */
  readonly id: string
  readonly accountId: string
  /** The account's own identifier of its user. */
  readonly userId: string
  readonly applicationId: string
  readonly label: string | null
  /** The compatibility profile it was created under. */
  readonly profile: string
  readonly status: FactorStatus
  readonly algorithm: Algorithm
  readonly digits: number
  readonly period: number
  /** The device's clock drift in time steps, as the last resync found it. */
  readonly drift: number
  /** The secret, sealed by the keyring (bound to account, user and factor); never the secret itself. */
  readonly sealed: string
  /** The key version `sealed` is sealed under (to find what a rotation must re-seal). */
  readonly keyVersion: number
  readonly createdAt: string
  /** A pending factor is gone after this; null once active. */
  readonly expiresAt: string | null
  readonly activatedAt: string | null
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
