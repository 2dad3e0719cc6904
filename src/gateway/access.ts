/**
 * The access rule, free of HTTP: a call is allowed when its key is known, not revoked and
 * not expired, its account is active, and the account holds an active subscription for the
 * group in the region of this instance, within the key's scope (the grant carries only the
 * subscriptions in scope). The reason is for the log only; clients get one answer.
 */
import type { KeyGrant } from '../storage/ports.ts'

export { subscriptionKey } from '../domain/accounts.ts'

export type DenialReason = 'unknown key' | 'revoked key' | 'expired key' | 'account suspended' | 'not subscribed'

/**
 * denial checks the key and the account only (for routes that need a caller, not a
 * subscription): why this grant may not call at all, or null when it may.
 */
export function denial(grant: KeyGrant | null, nowMs: number): DenialReason | null {
  if (grant === null) return 'unknown key'
  if (grant.revoked) return 'revoked key'
  if (grant.expiresAt <= nowMs) return 'expired key'
  if (!grant.accountActive) return 'account suspended'
  return null
}

/** authorize is why this grant may not call the subscription `key` (see subscriptionKey), or null when it may. */
export function authorize(grant: KeyGrant | null, key: string, nowMs: number): DenialReason | null {
  return denial(grant, nowMs) ?? (grant!.subscriptions.has(key) ? null : 'not subscribed')
}
