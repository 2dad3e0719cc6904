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
