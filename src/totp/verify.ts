/**
 * verifyCode is the verification policy of RFC 6238 §5.2: the window of one step either
 * side, no second acceptance of a step, and a doubling delay after repeated failures. The
 * outcome is data; the route turns it into HTTP.
 *
 * The code is matched first (pure computation, no effect), then the store decides the
 * outcome in one atomic step with the lock and the count: a check and a count in two round
 * trips let parallel guesses through the lockout. While the secret is locked the match is
 * not used, so a guess gets an answer only within the policy. A replay counts as a failure.
 */
import type { Algorithm } from '../domain/accounts.ts'
import type { LockPolicy, VerifyOutcome } from '../domain/lockout.ts'
export type { VerifyOutcome }
import type { VerificationStore } from '../storage/ports.ts'
import { keyedDigest, type Pepper } from '../crypto/keyed.ts'
import { ALGORITHMS, canonicalKey } from './otp.ts'

/**
 * verificationKey names the lockout and replay record of a secret: one per secret as HMAC
 * sees it (any spelling) and time grid, not per digit count (which only truncates the same
 * HMAC). It is a keyed fingerprint (HMAC under the pepper), safe to log and to show.
 */
export function verificationKey(pepper: Pepper, accountId: string, secret: Buffer, algorithm: Algorithm, period: number): string {
  return keyedDigest(pepper, 'verify', accountId, canonicalKey(secret, algorithm).toString('hex'), algorithm, String(period))
}

/** verificationKeys: the records a secret may have at `period`, one per algorithm (an operator's unlock clears all). */
export function verificationKeys(pepper: Pepper, accountId: string, secret: Buffer, period: number): string[] {
  return ALGORITHMS.map((algorithm) => verificationKey(pepper, accountId, secret, algorithm, period))
}

/** `match` gives the time step whose code matches, or null. */
export async function verifyCode(store: VerificationStore, policy: LockPolicy, key: string, match: number | null, nowMs: number): Promise<VerifyOutcome> {
  const verdict = await store.settle(key, match, nowMs, policy)
  if (verdict.kind !== 'locked') return verdict
  return { kind: 'locked', retryAfterSeconds: Math.max(1, Math.ceil((verdict.lockedUntil - nowMs) / 1000)) }
}
