/**
 * Storage ports: what the service needs from a store, with no word of how it is kept.
 * Adapters (SQLite now; PostgreSQL and Redis later) implement them, and one contract
 * test suite (storage/contract.test.ts) runs against each.
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

/** KeyGrant is everything the gateway needs to decide on a key, in one lookup. */
export interface KeyGrant {
  readonly keyId: string
  readonly accountId: string
  readonly revoked: boolean
  readonly accountActive: boolean
  /** Active subscriptions as `region:group`. */
  readonly subscriptions: ReadonlySet<string>
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
}

/** LockPolicy: after `maxFailures` consecutive failures, wait base·2^(n−max) seconds, capped. */
export interface LockPolicy {
  readonly maxFailures: number
  readonly baseSeconds: number
  readonly maxSeconds: number
}

export interface FailureOutcome {
  readonly failures: number
  /** Epoch ms until which the secret is locked; 0 when it is not. */
  readonly lockedUntil: number
}

/**
 * VerificationStore keeps, per verification key (a fingerprint of account + secret), the
 * last accepted time step and the run of failures. Each method is atomic on its own.
 */
export interface VerificationStore {
  /** lockedUntil returns the epoch ms until which the key is locked, or 0. */
  lockedUntil(key: string, nowMs: number): Promise<number>
  /** accept records `step` as used unless it is at or before the last accepted step; resets failures. */
  accept(key: string, step: number, nowMs: number): Promise<'accepted' | 'reused'>
  /** fail counts one more consecutive failure and sets the lock the policy calls for. */
  fail(key: string, nowMs: number, policy: LockPolicy): Promise<FailureOutcome>
}

export interface Store {
  readonly kind: string
  readonly access: AccessStore
  readonly onboarding: OnboardingStore
  readonly verification: VerificationStore
  /** ping throws when the store cannot be reached. */
  ping(): Promise<void>
  close(): Promise<void>
}

/** lockDelaySeconds is the policy's delay after `failures` consecutive failures (0 below the threshold). */
export function lockDelaySeconds(failures: number, policy: LockPolicy): number {
  if (failures < policy.maxFailures) return 0
  const doublings = failures - policy.maxFailures
  return doublings >= 31 ? policy.maxSeconds : Math.min(policy.baseSeconds * 2 ** doublings, policy.maxSeconds)
}
