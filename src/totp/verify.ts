/**
 * verifyCode is the verification policy of RFC 6238 §5.2: the window of one step either
 * side, no second acceptance of a step, and a doubling delay after repeated failures. The
 * outcome is data; the route turns it into HTTP.
 *
 * The attempt is taken (and counted as a failure) before the code is evaluated, in one
 * atomic step of the store: a check and a count in two round trips let parallel guesses
 * through the lockout. A replayed code stays counted as a failed attempt.
 */
import type { LockPolicy, VerificationStore } from '../storage/ports.ts'

export type VerifyOutcome =
  | { readonly kind: 'accepted' }
  | { readonly kind: 'invalid' }
  | { readonly kind: 'reused' }
  | { readonly kind: 'locked'; readonly retryAfterSeconds: number }

/** `evaluate` gives the time step whose code matches, or null; it runs only once an attempt is granted. */
export async function verifyCode(
  store: VerificationStore, policy: LockPolicy, key: string, evaluate: () => number | null, nowMs: number,
): Promise<VerifyOutcome> {
  const attempt = await store.attempt(key, nowMs, policy)
  if (!attempt.allowed) return { kind: 'locked', retryAfterSeconds: Math.max(1, Math.ceil((attempt.lockedUntil - nowMs) / 1000)) }
  const step = evaluate()
  if (step === null) return { kind: 'invalid' }
  return (await store.accept(key, step, nowMs)) === 'accepted' ? { kind: 'accepted' } : { kind: 'reused' }
}
