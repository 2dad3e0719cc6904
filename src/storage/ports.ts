/**
 * Storage ports: what the service needs from a store, with no word of how it is kept.
 * Adapters (SQLite, PostgreSQL, Redis) implement them, and one contract suite
 * (storage/contract.ts) runs against each.
 */
import type { Group, Region } from '../gateway/regions.ts'

export type AccountStatus = 'active' | 'suspended'
export type SubscriptionStatus = 'active' | 'inactive'
export type Algorithm = 'SHA1' | 'SHA256' | 'SHA512'

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
}

export interface Subscription {
  readonly accountId: string
  readonly region: Region
  readonly group: Group
  readonly status: SubscriptionStatus
  readonly updatedAt: string
}

export type QuotaPeriod = 'day' | 'month'

/**
 * Plan: an account's throttle (token bucket: `rate` requests per second refilled, up to
 * `burst` at once; rate 0 = no throttle) and quota (`quota` requests per UTC calendar day
 * or month; 0 = no quota).
 */
export interface Plan {
  readonly rate: number
  readonly burst: number
  readonly quota: number
  readonly period: QuotaPeriod
}

/** KeyGrant is everything the gateway needs to decide on a key, in one lookup. */
export interface KeyGrant {
  readonly keyId: string
  readonly accountId: string
  readonly revoked: boolean
  readonly accountActive: boolean
  /** Active subscriptions as `region:group`. */
  readonly subscriptions: ReadonlySet<string>
  /** The account's own plan; null means the configured default plan. */
  readonly plan: Plan | null
}

export interface AccessStore {
  createAccount(name: string): Promise<Account>
  getAccount(id: string): Promise<Account | null>
  listAccounts(): Promise<Account[]>
  countAccounts(): Promise<number>
  /** setAccountStatus returns false when there is no such account. */
  setAccountStatus(id: string, status: AccountStatus): Promise<boolean>
  /** createKey stores a key by its hash; the key itself never reaches the store. */
  createKey(input: { accountId: string; name: string; hash: string; hint: string }): Promise<ApiKeyInfo>
  /** revokeKey returns false when there is no such key or it was revoked already. */
  revokeKey(keyId: string): Promise<boolean>
  listKeys(accountId?: string): Promise<ApiKeyInfo[]>
  setSubscription(accountId: string, region: Region, group: Group, status: SubscriptionStatus): Promise<void>
  listSubscriptions(accountId: string): Promise<Subscription[]>
  findGrant(keyHash: string): Promise<KeyGrant | null>
  /** setPlan gives an account its own plan (null: back to the default); false when there is no such account. */
  setPlan(accountId: string, plan: Plan | null): Promise<boolean>
  getPlan(accountId: string): Promise<Plan | null>
  /**
   * onChange calls `listener` after accounts, keys or subscriptions change: at once for
   * changes made through this store, and as soon as the adapter can tell for changes made
   * by other processes. Returns the unsubscribe function.
   */
  onChange(listener: () => void): () => void
}

export interface OnboardingRecord {
  readonly accountId: string
  readonly applicationId: string
  readonly userId: string
  readonly algorithm: Algorithm
  readonly digits: number
  readonly period: number
  /** A keyed fingerprint of the secret (HMAC with the server pepper), never the secret. */
  readonly secretFingerprint: string
  readonly createdAt: string
  readonly updatedAt: string
}

export interface OnboardingStore {
  /** upsert replaces the record of the same account, application and user; createdAt stays the first one. */
  upsert(record: Omit<OnboardingRecord, 'createdAt' | 'updatedAt'>, now: Date): Promise<OnboardingRecord>
  get(accountId: string, applicationId: string, userId: string): Promise<OnboardingRecord | null>
  /** findBySecret gives the account's most recently updated record with one of `fingerprints`, or null. */
  findBySecret(accountId: string, fingerprints: readonly string[]): Promise<OnboardingRecord | null>
}

/** LockPolicy: after `maxFailures` consecutive failures, wait base·2^(n−max) seconds, capped. */
export interface LockPolicy {
  readonly maxFailures: number
  readonly baseSeconds: number
  readonly maxSeconds: number
}

/** Verdict: what one verification came to, as its store decided it. */
export type Verdict =
  | { readonly kind: 'accepted' }
  | { readonly kind: 'invalid' }
  | { readonly kind: 'reused' }
  | { readonly kind: 'locked'; readonly lockedUntil: number }

export const ACCEPTED: Verdict = Object.freeze({ kind: 'accepted' })
export const INVALID: Verdict = Object.freeze({ kind: 'invalid' })
export const REUSED: Verdict = Object.freeze({ kind: 'reused' })

/**
 * VerificationStore keeps, per verification key (a fingerprint of account + secret), the
 * last accepted time step and the run of failed attempts.
 */
export interface VerificationStore {
  /**
   * settle decides one verification in one atomic step, across processes and nodes (a
   * check and a write in two round trips let parallel guesses through the lockout): while
   * the key is locked, `locked`, and the code's match is not used; else a matching `step`
   * later than the last accepted one is `accepted` (ending the run of failures); else the
   * attempt counts as a failure (`invalid` with no match, `reused` for a step at or before
   * the last accepted one), with the lock the policy calls for. However many arrive at once,
   * at most `policy.maxFailures` failures are answered before the lock.
   */
  settle(key: string, step: number | null, nowMs: number, policy: LockPolicy): Promise<Verdict>
}

/** One day's count of admitted calls of an account to an API group. */
export interface UsageRow {
  readonly accountId: string
  /** UTC day, YYYY-MM-DD. */
  readonly day: string
  readonly group: string
  readonly count: number
}

/** UsageStore keeps the durable counts of admitted calls, per account, UTC day and API group. */
export interface UsageStore {
  /** add adds the counts (summing with what is there), all or nothing. */
  add(rows: readonly UsageRow[]): Promise<void>
  /** list gives an account's rows from `fromDay` on (inclusive), by day then group. */
  list(accountId: string, fromDay: string): Promise<UsageRow[]>
  /** total sums an account's counts over all groups from `fromDay` to `toDay` (inclusive). */
  total(accountId: string, fromDay: string, toDay: string): Promise<number>
}

/** The outcome of asking a limiter to admit one call. Times are milliseconds from now. */
export type LimitDecision =
  | {
    readonly admitted: true
    /** Whole tokens left in the bucket, and when the bucket is full again. */
    readonly tokens: number
    readonly refillMs: number
    /** Calls left in the quota window, and when the window ends. */
    readonly left: number
    readonly windowEndsMs: number
  }
  | { readonly admitted: false; readonly reason: 'throttle' | 'quota'; readonly retryAfterMs: number }

/**
 * Limiter applies a plan to one call of an account: atomically, it refills the bucket,
 * checks the quota window and the bucket, and takes one token and one unit of quota only
 * when both allow it (a refused call consumes nothing). `seed` gives the quota already used
 * in the window from the durable usage counts, for a window the limiter has no count of.
 */
export interface Limiter {
  take(accountId: string, plan: Plan, seed: (windowStartMs: number, windowEndMs: number) => Promise<number>): Promise<LimitDecision>
}

/** UnavailableError: a dependency (named) cannot be reached; the caller gets 503, not 500. */
export class UnavailableError extends Error {
  readonly dependency: string
  constructor(dependency: string, cause: unknown) {
    super(`${dependency} is unreachable: ${cause instanceof Error ? cause.message : String(cause)}`, { cause })
    this.name = 'UnavailableError'
    this.dependency = dependency
  }
}

/** Health of each dependency a store is made of, by name: 'ok' or why not. */
export type Health = Record<string, { readonly ok: boolean; readonly detail: string; readonly essential: boolean }>

export interface Store {
  readonly kind: string
  readonly access: AccessStore
  readonly onboarding: OnboardingStore
  readonly verification: VerificationStore
  readonly usage: UsageStore
  /** A limiter shared by every node (Redis), when there is one; otherwise each node limits in process. */
  readonly sharedLimiter: Limiter | null
  /** health asks each dependency; `essential` ones make the node unready when down. */
  health(): Promise<Health>
  close(): Promise<void>
}

/** lockDelaySeconds is the policy's delay after `failures` consecutive failures (0 below the threshold). */
export function lockDelaySeconds(failures: number, policy: LockPolicy): number {
  if (failures < policy.maxFailures) return 0
  const doublings = failures - policy.maxFailures
  return doublings >= 31 ? policy.maxSeconds : Math.min(policy.baseSeconds * 2 ** doublings, policy.maxSeconds)
}
