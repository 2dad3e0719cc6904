/**
 * The access rule, free of HTTP: a call is allowed when its key is known and not revoked,
 * its account is active, and the account holds an active subscription for the group in
 * the region of this instance. The reason is for the log only; clients get one answer.
 */
import type { KeyGrant } from '../storage/ports.ts'
import type { Group, Region } from './regions.ts'

export type Verdict =
  | { readonly allowed: true; readonly grant: KeyGrant }
  | { readonly allowed: false; readonly reason: DenialReason; readonly grant: KeyGrant | null }

export type DenialReason = 'unknown key' | 'revoked key' | 'account suspended' | 'not subscribed'

/** identify checks the key and the account only (for routes that need a caller, not a subscription). */
export function identify(grant: KeyGrant | null): Verdict {
  if (grant === null) return { allowed: false, reason: 'unknown key', grant }
  if (grant.revoked) return { allowed: false, reason: 'revoked key', grant }
  if (!grant.accountActive) return { allowed: false, reason: 'account suspended', grant }
  return { allowed: true, grant }
}

export function authorize(grant: KeyGrant | null, region: Region, group: Group): Verdict {
  const identity = identify(grant)
  if (!identity.allowed) return identity
  if (!identity.grant.subscriptions.has(`${region}:${group}`)) return { allowed: false, reason: 'not subscribed', grant }
  return identity
}
