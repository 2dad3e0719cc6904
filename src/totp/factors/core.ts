/**
 * The managed factors' core: no HTTP, no store. Secrets are opened from their sealed form
 * only to compute codes, matched in constant time, and never leave this module but in the
 * creation answer.
 */
import type { Algorithm } from '../../domain/accounts.ts'
import type { TotpFactor as Factor } from '../../domain/factors.ts'
import { SealError, type Keyring } from '../../crypto/keyring.ts'
import { keyedDigest, type Pepper } from '../../crypto/keyed.ts'
import { codeAt, matchStep, stepAt, totpParams, type TotpParams } from '../otp.ts'

/** sealContext binds a sealed secret to its row: moved to another, it does not open. */
export const sealContext = (accountId: string, userId: string, factorId: string): string[] => ['totp-factor', accountId, userId, factorId]

/** userLockKey names a user's lockout and replay record (a keyed fingerprint, safe to log). */
export function userLockKey(pepper: Pepper, accountId: string, userId: string): string {
  return keyedDigest(pepper, 'factor-user', accountId, userId)
}

/** paramsOf opens a factor's secret; SealError when it cannot. */
export function paramsOf(keyring: Keyring, f: Factor): TotpParams {
  return totpParams(keyring.open(f.sealed, sealContext(f.accountId, f.userId, f.id)), f.algorithm, f.digits, f.period)
}

/**
 * mark turns a matched step of a factor into the user's replay mark: the end, in server
 * seconds, of the step the code belongs to. One scale for factors of any period and drift,
 * so the user's one record orders them all: after a code is accepted, no code of a step
 * ending no later is (replay protection is the user's, as the lockout is).
 */
export function mark(f: Pick<Factor, 'period' | 'drift'>, step: number): number {
  return (step - f.drift + 1) * f.period
}

export interface Match {
  readonly factor: Factor
  readonly mark: number
}

/**
 * matchFactor finds the active factor whose code (at its drift, one step either side) is
 * `token`. Factors that do not open are reported to `unreadable` and never matched.
 */
export function matchFactor(
  keyring: Keyring,
  factors: readonly Factor[],
  token: string,
  nowMs: number,
  unreadable: (f: Factor, error: SealError) => void,
): Match | null {
  for (const f of factors) {
    if (f.status !== 'active' || f.digits !== token.length) continue
    let p: TotpParams
    try {
      p = paramsOf(keyring, f)
    } catch (error) {
      if (!(error instanceof SealError)) throw error
      unreadable(f, error)
      continue
    }
    const step = matchStep(p, token, nowMs + f.drift * f.period * 1000)
    if (step !== null) return { factor: f, mark: mark(f, step) }
  }
  return null
}

/**
 * findDrift looks for two consecutive codes, the second within `range` steps either side of
 * now: the drift (in steps) of the device that showed them, and the step of the second, or null.
 */
export function findDrift(p: TotpParams, token: string, nextToken: string, nowMs: number, range: number): { drift: number; step: number } | null {
  const now = stepAt(nowMs, p.period)
  // Nearest first: a device a little off is the common case.
  for (let d = 0; d <= range; d++) {
    for (const drift of d === 0 ? [0] : [d, -d]) {
      // The second code is the device's current one: its step is the device's now.
      const step = now + drift
      if (equal(codeAt(p, step), nextToken) && equal(codeAt(p, step - 1), token)) return { drift, step }
    }
  }
  return null
}

function equal(a: string, b: string): boolean {
  // Codes are short digits of a known length; compare all of it whatever differs first.
  if (a.length !== b.length) return false
  let diff = 0
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i)
  return diff === 0
}

export type { Algorithm }
