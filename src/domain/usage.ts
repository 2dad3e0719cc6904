/**
 * Usage counts (per key, region, day and group) and the limiter's decisions.
 */
import type { Group, Region } from './regions.ts'

/** One day's count of a key's admitted calls to an API group in a region, and their units. */
export interface UsageRow {
  readonly accountId: string
  readonly keyId: string
  readonly region: Region
  /** UTC day, YYYY-MM-DD. */
  readonly day: string
  readonly group: Group
  readonly count: number
  readonly units: number
}

export type UsageBy = 'day' | 'key' | 'region'

/**
 * Why a call with a known key was refused: the key (revoked, expired), the account
 * (suspended), the subscription or the key's scope (403), or the plan (429). A call with no key
 * or an unknown one belongs to no account and is counted only in the metrics.
 */
export const REFUSAL_REASONS = ['revoked', 'expired', 'suspended', 'not subscribed', 'out of scope', 'throttled', 'over quota'] as const
export type RefusalReason = (typeof REFUSAL_REASONS)[number]

/** One day's count of a key's refused calls to an API group in a region, for one reason. */
export interface RefusalRow {
  readonly accountId: string
  readonly keyId: string
  readonly region: Region
  /** UTC day, YYYY-MM-DD. */
  readonly day: string
  readonly group: Group
  readonly reason: RefusalReason
  readonly count: number
}

/** The most lines a refusals report holds (a key, region, group and reason each): the most refused first. */
export const REFUSAL_LINES = 500

/** A refusals report line: the calls of a key to a group in a region refused for a reason over the days asked, and the last of those days. */
export interface RefusalLine {
  readonly keyId: string
  readonly region: Region
  readonly group: Group
  readonly reason: RefusalReason
  readonly count: number
  readonly lastDay: string
}

/** A usage report line: calls and units of a group, for one day, key or region (per `by`). */
export interface UsageLine {
  readonly day?: string
  readonly keyId?: string
  readonly region?: Region
  readonly group: Group
  readonly count: number
  readonly units: number
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
