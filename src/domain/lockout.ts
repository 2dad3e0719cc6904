/**
 * The TOTP lockout policy: what a verification settles to, and how long repeated failures lock a key out. Nothing here imports anything of ours.
 */

/** LockPolicy: after `maxFailures` consecutive failures, wait base·2^(n−max) seconds, capped. */
export interface LockPolicy {
  readonly maxFailures: number
  readonly baseSeconds: number
  readonly maxSeconds: number
}

/** Verdict: what one verification came to, as its store decided it. */
export type Verdict =
  | { readonly kind: 'accepted' }
  /** `locks`: this failure started a lock (the run of failures reached the policy's threshold). */
  | { readonly kind: 'invalid'; readonly locks?: boolean }
  | { readonly kind: 'reused'; readonly locks?: boolean }
  | { readonly kind: 'locked'; readonly lockedUntil: number }

/** VerifyOutcome: a verdict as a caller answers it, the lock's end as seconds to wait (the metrics count `locks`). */
export type VerifyOutcome = Exclude<Verdict, { readonly kind: 'locked' }> | { readonly kind: 'locked'; readonly retryAfterSeconds: number }

export const ACCEPTED: Verdict = Object.freeze({ kind: 'accepted' })

export const INVALID: Verdict = Object.freeze({ kind: 'invalid' })

export const REUSED: Verdict = Object.freeze({ kind: 'reused' })

const INVALID_LOCKS: Verdict = Object.freeze({ kind: 'invalid', locks: true })

const REUSED_LOCKS: Verdict = Object.freeze({ kind: 'reused', locks: true })

/** failure: the verdict of a failed verification (`step` null: no code matched; else a replay), and whether it started a lock. */
export function failure(step: number | null, failures: number, policy: LockPolicy): Verdict {
  const locks = failures >= policy.maxFailures
  return step === null ? (locks ? INVALID_LOCKS : INVALID) : locks ? REUSED_LOCKS : REUSED
}

/** lockDelaySeconds is the policy's delay after `failures` consecutive failures (0 below the threshold). */
export function lockDelaySeconds(failures: number, policy: LockPolicy): number {
  if (failures < policy.maxFailures) return 0
  const doublings = failures - policy.maxFailures
  return doublings >= 31 ? policy.maxSeconds : Math.min(policy.baseSeconds * 2 ** doublings, policy.maxSeconds)
}
