/**
 * The access rule, free of HTTP: a call is allowed when its key is known, not revoked and
 * not expired, its account is active, and the account holds an active subscription for the
 * group in the region of this instance, within the key's scope (the grant carries only the
 * subscriptions in scope). The reason is for the log only; clients get one answer.
 */
import type { KeyGrant } from '../domain/accounts.ts'
import { inScope } from '../domain/accounts.ts'
import type { Group, Region } from '../domain/regions.ts'

export { subscriptionKey } from '../domain/accounts.ts'

export type DenialReason = 'unknown key' | 'revoked key' | 'expired key' | 'account suspended' | 'not subscribed' | 'out of scope'

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

/**
 * authorize is why this grant may not call `group` in `region` (its subscription `key`, see
 * subscriptionKey), or null when it may. A key whose scope leaves the group or region out is
 * `out of scope`, whether or not the account subscribes (the key could not call either way).
 */
export function authorize(grant: KeyGrant | null, key: string, region: Region, group: Group, nowMs: number): DenialReason | null {
  const denied = denial(grant, nowMs)
  if (denied !== null || grant!.subscriptions.has(key)) return denied
  return inScope(grant!.scope, region, group) ? 'not subscribed' : 'out of scope'
}
