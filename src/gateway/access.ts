/**
 * The access rule, free of HTTP: a call is allowed when its key is known and not revoked,
 * its account is active, and the account holds an active subscription for the group in
 * the region of this instance. The reason is for the log only; clients get one answer.
 */
import type { KeyGrant } from '../storage/ports.ts'
import type { Group, Region } from '../domain/regions.ts'

export type DenialReason = 'unknown key' | 'revoked key' | 'account suspended' | 'not subscribed'

/**
 * denial checks the key and the account only (for routes that need a caller, not a
 * subscription): why this grant may not call at all, or null when it may.
 */
export function denial(grant: KeyGrant | null): DenialReason | null {
  if (grant === null) return 'unknown key'
  if (grant.revoked) return 'revoked key'
  if (!grant.accountActive) return 'account suspended'
  return null
}

/** subscriptionKey is how a grant's subscriptions name `group` in `region`. */
export function subscriptionKey(region: Region, group: Group): string {
  return `${region}:${group}`
}

/** authorize is why this grant may not call the subscription `key` (see subscriptionKey), or null when it may. */
export function authorize(grant: KeyGrant | null, key: string): DenialReason | null {
  return denial(grant) ?? (grant!.subscriptions.has(key) ? null : 'not subscribed')
}
