/**
 * The portal's second factor: the user's own TOTP secret (RFC 6238 with SHA-1, 6 digits and
 * 30 s steps, what Google Authenticator, 1Password and the rest scan) and single-use recovery
 * codes. The codes are checked by the same core and the same verification store as the API's
 * verifyOTP (src/totp): one step of drift either side, a step accepted once, and a lock after
 * repeated failures that holds across nodes. Nothing here writes a secret or a code to a log.
 */
import { randomBytes } from 'node:crypto'
import type { Config } from '../../config/config.ts'
import type { LockPolicy } from '../../domain/lockout.ts'
import type { User } from '../../domain/portal.ts'
import type { Store } from '../../storage/ports.ts'
import { keyedDigest, type Pepper } from '../../crypto/keyed.ts'
import { matchStep, newSecret, parseSecret, toBase32, totpParams } from '../../totp/otp.ts'
import { verifyCode, type VerifyOutcome } from '../../totp/verify.ts'

export const RECOVERY_CODE_COUNT = 10

/** What checking and keeping codes needs: the verification and portal stores, the pepper, the lockout settings, the clock. */
export interface CodeDeps {
  readonly store: Pick<Store, 'verification' | 'portal'>
  readonly pepper: Pepper
  readonly config: Pick<Config, 'otpMaxFailures' | 'otpLockBaseSeconds' | 'otpLockMaxSeconds'>
  readonly now: () => number
}

/** policyOf: the API's lockout settings (OTP_MAX_FAILURES, OTP_LOCK_*), for sign-in codes as well. */
export function policyOf(config: CodeDeps['config']): LockPolicy {
  return { maxFailures: config.otpMaxFailures, baseSeconds: config.otpLockBaseSeconds, maxSeconds: config.otpLockMaxSeconds }
}

/** newTotpSecret: 160 random bits in base32, as kept in `user.totpSecret` and typed into an app. */
export function newTotpSecret(): string {
  return toBase32(newSecret())
}

/**
 * lockKey names the verification record (replay and lockout) of a user's secret: sign-in,
 * enrolment and recovery codes share it, so a code works once whatever form it is typed
 * into, and one lock covers every guess. The secret is part of it so that a new secret
 * (two-factor turned off and on again) does not inherit the old one's last accepted step.
 */
function lockKey(pepper: Pepper, userId: string, secret: string): string {
  return keyedDigest(pepper, 'portal-2fa', userId, secret)
}

/** checkTotp checks a code from the user's app against `secret`, once per step, under the lock. */
export async function checkTotp(deps: CodeDeps, userId: string, secret: string, input: string): Promise<VerifyOutcome> {
  const code = input.replace(/\s+/g, '')
  const t = deps.now()
  const params = totpParams(parseSecret(secret, 0)!)
  const match = /^\d{6}$/.test(code) ? matchStep(params, code, t) : null
  return verifyCode(deps.store.verification, policyOf(deps.config), lockKey(deps.pepper, userId, secret), match, t)
}

/**
 * checkRecoveryCode uses one of the user's recovery codes, under the same lock as their
 * TOTP codes. A recovery code has no time step to settle with, so each attempt is counted
 * as a failure before the code is looked at (a locked user's code is never tried, so never
 * spent), and a right code then ends the run of failures.
 */
export async function checkRecoveryCode(deps: CodeDeps, user: User, input: string): Promise<VerifyOutcome> {
  const key = lockKey(deps.pepper, user.id, user.totpSecret ?? '')
  const counted = await verifyCode(deps.store.verification, policyOf(deps.config), key, null, deps.now())
  if (counted.kind === 'locked') return counted
  const code = normalRecoveryCode(input)
  if (code === null || !(await deps.store.portal.useRecoveryCode(user.id, recoveryCodeHash(deps.pepper, user.id, code)))) return { kind: 'invalid' }
  await deps.store.verification.clear(key)
  return { kind: 'accepted' }
}

/** newRecoveryCodes: 10 codes of 40 random bits each, written `xxxx-xxxx` in lower-case base32. */
export function newRecoveryCodes(): string[] {
  return Array.from({ length: RECOVERY_CODE_COUNT }, () => {
    const code = toBase32(randomBytes(5)).toLowerCase()
    return `${code.slice(0, 4)}-${code.slice(4)}`
  })
}

/** normalRecoveryCode: a typed recovery code in one spelling (any case, with or without the dash and spaces), or null. */
function normalRecoveryCode(input: string): string | null {
  const code = input.replace(/[\s-]+/g, '').toUpperCase()
  return /^[A-Z2-7]{8}$/.test(code) ? code : null
}

/**
 * recoveryCodeHash is what the store keeps of a recovery code: a SHA-256 HMAC under the
 * pepper (40 bits would not resist a search through a plain hash of a leaked table).
 */
export function recoveryCodeHash(pepper: Pepper, userId: string, code: string): string {
  return keyedDigest(pepper, 'portal-recovery-code', userId, normalRecoveryCode(code) ?? '')
}

/** recoveryCodeSet: a user's new recovery codes, to show once, and their hashes, for the store (in the step of the change they belong to). */
export function recoveryCodeSet(pepper: Pepper, userId: string): { codes: string[]; hashes: string[] } {
  const codes = newRecoveryCodes()
  return { codes, hashes: codes.map((c) => recoveryCodeHash(pepper, userId, c)) }
}

/** storeRecoveryCodes makes a user's new recovery codes, replacing the old ones, with no event (the tests' set-up); gives them. */
export async function storeRecoveryCodes(deps: { readonly store: Pick<Store, 'portal'>; readonly pepper: Pepper }, userId: string): Promise<string[]> {
  const { codes, hashes } = recoveryCodeSet(deps.pepper, userId)
  await deps.store.portal.setRecoveryCodes(userId, hashes)
  return codes
}
