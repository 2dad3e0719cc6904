/**
 * The accounts domain, below the gateway, storage and every door (CLI, admin API, portal):
 * states, plans, key scopes, actors and audit events. Nothing here imports anything of ours
 * but regions.ts.
 */
import { GROUPS, REGIONS, type Group, type Region } from './regions.ts'

export type AccountStatus = 'active' | 'suspended'
export const ACCOUNT_STATUSES: readonly AccountStatus[] = ['active', 'suspended']

/**
 * A subscription is `active` (calls allowed), `inactive`, or `pending`: asked for (by the
 * portal) and waiting for an operator, who approves it (→ active) or refuses it (→ inactive).
 */
export type SubscriptionStatus = 'active' | 'inactive' | 'pending'
export const SUBSCRIPTION_STATUSES: readonly SubscriptionStatus[] = ['active', 'inactive', 'pending']

export type Algorithm = 'SHA1' | 'SHA256' | 'SHA512'

export type QuotaPeriod = 'day' | 'month'

/** Units one call of each group costs against a plan's quota. */
export type Weights = Readonly<Record<Group, number>>

/**
 * Plan: an account's throttle (token bucket: `rate` calls per second refilled, up to `burst`
 * at once; rate 0 = no throttle) and quota (`quota` units per UTC calendar day or month;
 * 0 = no quota), where a call of group g costs `weights[g]` units (0: free).
 */
export interface Plan {
  readonly rate: number
  readonly burst: number
  readonly quota: number
  readonly period: QuotaPeriod
  readonly weights: Weights
}

/** A key's scope: the groups and regions it may call, within its account's subscriptions; null = all. */
export interface KeyScope {
  readonly groups: readonly Group[] | null
  readonly regions: readonly Region[] | null
}

/**
 * How long a rolled key keeps working by default, in seconds (24 hours): the same in the portal,
 * the admin API and the CLI, so that a roll left at its default never cuts off a deployment that
 * has not picked up the new key yet. Pass 0 to stop the old key at once.
 */
export const DEFAULT_ROLL_GRACE_SECONDS = 86_400

export const UNSCOPED: KeyScope = Object.freeze({ groups: null, regions: null })

/** subscriptionKey is how a grant names `group` in `region`. */
export function subscriptionKey(region: Region, group: Group): string {
  return `${region}:${group}`
}

/** inScope tells whether a key of `scope` may call `group` in `region`. */
export function inScope(scope: KeyScope, region: Region, group: Group): boolean {
  return (scope.groups === null || scope.groups.includes(group)) && (scope.regions === null || scope.regions.includes(region))
}

/** Who made a change: an operator's admin token, a portal user, the CLI on the server, or the service itself. */
export type Actor =
  | { readonly type: 'admin-token'; readonly id: string }
  | { readonly type: 'portal-user'; readonly id: string }
  | { readonly type: 'cli' }
  | { readonly type: 'system' }

export const CLI: Actor = Object.freeze({ type: 'cli' })
export const SYSTEM: Actor = Object.freeze({ type: 'system' })

/** actorName is an actor as one string: `admin-token:ID`, `portal-user:ID`, `cli`, `system`. */
export function actorName(actor: Actor): string {
  return 'id' in actor ? `${actor.type}:${actor.id}` : actor.type
}

export type AuditOutcome = 'success' | 'failure'

/** What an audit event is about. */
export interface AuditTarget {
  readonly type:
    | 'account'
    | 'key'
    | 'subscription'
    | 'plan'
    | 'admin-token'
    | 'totp-lockout'
    | 'user'
    | 'member'
    | 'totp-user'
    | 'factor'
    | 'webhook'
    | 'job'
    | 'sso-provider'
  readonly id: string
}

/** AuditDraft: an audit event before the store dates and numbers it. */
export interface AuditDraft {
  readonly actor: string
  /** Dotted verb: `account.create`, `key.roll`, `subscription.set`, … */
  readonly action: string
  readonly target: AuditTarget
  /** The account concerned, when there is one (so that an account's trail can be listed). */
  readonly accountId: string | null
  /** The source address of the request, when the change came over HTTP. */
  readonly ip: string | null
  readonly outcome: AuditOutcome
  /** What changed (new values) or why it failed; never a secret. */
  readonly detail: Readonly<Record<string, unknown>>
}

export interface AuditEvent extends AuditDraft {
  /** Time-ordered: a later event has a greater id. */
  readonly id: string
  readonly at: string
}

export { GROUPS, REGIONS }

export interface Account {
  readonly id: string
  readonly name: string
  readonly status: AccountStatus
  readonly createdAt: string
}

export interface ApiKeyInfo {
  readonly id: string
  readonly accountId: string
  readonly name: string
  /** The key's last four characters, to tell keys apart in listings. */
  readonly hint: string
  readonly createdAt: string
  readonly revokedAt: string | null
  /** When the key stops working (set at creation, or by a roll's grace period); null: never. */
  readonly expiresAt: string | null
  readonly scope: KeyScope
  /** The key that replaced this one in a roll. */
  readonly rolledTo: string | null
  /** Last admitted call (written at most once a minute per key) and the region it was made in. */
  readonly lastUsedAt: string | null
  readonly lastUsedRegion: Region | null
}

/** NewKey: a key as the accounts layer made it; only its hash reaches the store. */
export interface NewKey {
  readonly id: string
  readonly accountId: string
  readonly name: string
  readonly hash: string
  readonly hint: string
  readonly createdAt: string
  readonly expiresAt: string | null
  readonly scope: KeyScope
}

export interface Subscription {
  readonly accountId: string
  readonly region: Region
  readonly group: Group
  readonly status: SubscriptionStatus
  readonly updatedAt: string
}

/** KeyGrant is everything the gateway needs to decide on a key, in one lookup. */
export interface KeyGrant {
  readonly keyId: string
  readonly accountId: string
  readonly revoked: boolean
  readonly accountActive: boolean
  /** When the key stops working (epoch ms); Infinity: never. */
  readonly expiresAt: number
  /** Active subscriptions within the key's scope, as `region:group` (see subscriptionKey). */
  readonly subscriptions: ReadonlySet<string>
  /** The key's scope (for the metrics' refusal cause: a subscription outside it is `out of scope`). */
  readonly scope: KeyScope
  /** The account's own plan; null means the configured default plan. */
  readonly plan: Plan | null
  /**
   * Whether the account holds an onboarding record written before the parameters mark with
   * parameters other than SHA1/6/30 (totp/records.ts ParamsMark): getOTP and verifyOTP then
   * read the record of every secret. Absent: false.
   */
  readonly unmarkedParams?: boolean
}

/** A subscription asked for and waiting for an operator, with its account's name (the operators' queue). */
export interface PendingSubscription extends Subscription {
  readonly accountName: string
}

export type AdminScope = 'read' | 'write'

export interface AdminToken {
  readonly id: string
  readonly name: string
  readonly scope: AdminScope
  readonly createdAt: string
  readonly revokedAt: string | null
}
