/**
 * verifyCode is the verification policy of RFC 6238 §5.2: the window of one step either
 * side, no second acceptance of a step, and a doubling delay after repeated failures. The
 * outcome is data; the route turns it into HTTP.
 */
import type { LockPolicy, VerificationStore } from '../storage/ports.ts'
import { matchStep, type TotpParams } from './otp.ts'

export type VerifyOutcome =
  | { readonly kind: 'accepted' }
  | { readonly kind: 'invalid' }
  | { readonly kind: 'reused' }
  | { readonly kind: 'locked'; readonly retryAfterSeconds: number }

export async function verifyCode(
  store: VerificationStore, policy: LockPolicy, key: string, params: TotpParams, token: string, nowMs: number,
): Promise<VerifyOutcome> {
  const lockedUntil = await store.lockedUntil(key, nowMs)
  if (lockedUntil > nowMs) return { kind: 'locked', retryAfterSeconds: Math.ceil((lockedUntil - nowMs) / 1000) }
  const step = matchStep(params, token, nowMs)
  if (step === null) {
    await store.fail(key, nowMs, policy)
    return { kind: 'invalid' }
  }
  return (await store.accept(key, step, nowMs)) === 'accepted' ? { kind: 'accepted' } : { kind: 'reused' }
}
