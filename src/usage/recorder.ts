/**
 * UsageRecorder counts admitted calls per key (and so per account), UTC day and API group,
 * in calls and in units, in memory, and adds them to the store every USAGE_FLUSH_MS and at
 * shutdown: one write per flush, not one per call. A flush that fails (store away) keeps its
 * counts for the next one, so nothing is lost while the process lives; a process killed
 * outright loses at most one interval.
 *
 * It also keeps each key's last use, and writes it with a flush at most once a minute per
 * key: the hot path only sets a number.
 *
 * Calls refused with a known key (by the gateway or the plan) are counted the same way, per
 * key, day, group and reason, and written with the same flush: what the portal's overview
 * tells the account. A flood of refusals costs a map increment each, and the map holds at most
 * a line per key, group and reason of the day.
 */
import type { KeyUse, UsageStore, AccessStore } from '../storage/ports.ts'
import type { RefusalReason, RefusalRow, UsageRow } from '../domain/usage.ts'
import type { Group, Region } from '../domain/regions.ts'
import { utcDay } from './windows.ts'

const DAY = 86_400_000
/** A key's last use is written at most this often. */
export const LAST_USE_WRITE_MS = 60_000

/** One key's counts of one day: a fixed shape, so that counting allocates nothing. */
interface Tally {
  readonly accountId: string
  count: Record<Group, number>
  units: Record<Group, number>
}

interface LastUse {
  /** The latest use seen, and when it was last written (0: never). */
  atMs: number
  writtenMs: number
}

export class UsageRecorder {
  /** day → key id → tally */
  #pending = new Map<string, Map<string, Tally>>()
  readonly #lastUse = new Map<string, LastUse>()
  /** `day key group reason` (NUL-separated) → the refused calls not yet in the store */
  #refused = new Map<string, { readonly row: Omit<RefusalRow, 'count'>; count: number }>()
  readonly #usage: UsageStore
  readonly #access: Pick<AccessStore, 'touchKeys'>
  readonly #region: Region
  readonly #now: () => number
  #flushing: Promise<number> | null = null
  /** When the oldest pending count was taken (0: none pending): the metrics' flush lag. */
  #oldestMs = 0
  // The current day's name and bounds: a call costs no date formatting.
  #day = ''
  #dayStart = 0
  #dayEnd = 0

  constructor(usage: UsageStore, access: Pick<AccessStore, 'touchKeys'>, region: Region, now: () => number) {
    this.#usage = usage
    this.#access = access
    this.#region = region
    this.#now = now
  }

  /** today: the current UTC day's name (kept with its bounds: a call costs no date formatting). */
  #today(now: number): string {
    if (now >= this.#dayEnd || now < this.#dayStart) {
      this.#dayStart = Math.floor(now / DAY) * DAY
      this.#dayEnd = this.#dayStart + DAY
      this.#day = utcDay(now)
    }
    return this.#day
  }

  /** refuse counts a call of a known key refused for `reason`. */
  refuse(accountId: string, keyId: string, group: Group, reason: RefusalReason): void {
    const now = this.#now()
    const day = this.#today(now)
    // Not the flush lag's: that one tells how late the usage counts (and so the quota) are.
    addRefused(this.#refused, { accountId, keyId, region: this.#region, day, group, reason }, 1)
  }

  count(accountId: string, keyId: string, group: Group, units: number): void {
    const now = this.#now()
    this.#today(now)
    if (this.#oldestMs === 0) this.#oldestMs = now
    const tally = tallyOf(this.#pending, this.#day, accountId, keyId)
    tally.count[group]++
    tally.units[group] += units
    const last = this.#lastUse.get(keyId)
    if (last === undefined) this.#lastUse.set(keyId, { atMs: now, writtenMs: 0 })
    else if (now > last.atMs) last.atMs = now
  }

  /** pending sums the units not yet in the store for an account from `fromDay` to `toDay`. */
  pending(accountId: string, fromDay: string, toDay: string): number {
    let n = 0
    for (const [day, keys] of this.#pending) {
      if (day < fromDay || day > toDay) continue
      for (const tally of keys.values()) if (tally.accountId === accountId) n += tally.units.totp + tally.units.converter
    }
    return n
  }

  /** lagMs: how long the oldest count not yet in the store has waited (0 when none waits). */
  lagMs(): number {
    return this.#oldestMs === 0 ? 0 : Math.max(0, this.#now() - this.#oldestMs)
  }

  /**
   * flush adds the pending counts (and last uses due) to the store, and resolves to the rows
   * written (0: nothing was pending); on failure the counts stay pending and it throws.
   */
  flush(): Promise<number> {
    this.#flushing ??= this.#flush().finally(() => {
      this.#flushing = null
    })
    return this.#flushing
  }

  async #flush(): Promise<number> {
    await this.#flushLastUse()
    const refusals = await this.#flushRefusals()
    if (this.#pending.size === 0) return refusals
    const batch = this.#pending
    const oldest = this.#oldestMs
    this.#pending = new Map()
    this.#oldestMs = 0
    const rows: UsageRow[] = []
    for (const [day, keys] of batch) {
      for (const [keyId, tally] of keys) {
        for (const group of ['totp', 'converter'] as const) {
          if (tally.count[group] === 0) continue
          rows.push({ accountId: tally.accountId, keyId, region: this.#region, day, group, count: tally.count[group], units: tally.units[group] })
        }
      }
    }
    try {
      await this.#usage.add(rows)
    } catch (error) {
      // Still pending, and as old as they were (counts taken meanwhile are younger).
      this.#oldestMs = oldest
      for (const r of rows) {
        const tally = tallyOf(this.#pending, r.day, r.accountId, r.keyId)
        tally.count[r.group] += r.count
        tally.units[r.group] += r.units
      }
      throw error
    }
    return rows.length + refusals
  }

  /** flushRefusals writes the refusals counted; on failure they stay pending, and it throws. */
  async #flushRefusals(): Promise<number> {
    if (this.#refused.size === 0) return 0
    const batch = this.#refused
    this.#refused = new Map()
    const rows = [...batch.values()].map(({ row, count }): RefusalRow => ({ ...row, count }))
    try {
      await this.#usage.addRefusals(rows)
    } catch (error) {
      for (const r of rows) addRefused(this.#refused, r, r.count)
      throw error
    }
    return rows.length
  }

  async #flushLastUse(): Promise<void> {
    const now = this.#now()
    const due: KeyUse[] = []
    for (const [keyId, last] of this.#lastUse) {
      if (last.atMs > last.writtenMs && now - last.writtenMs >= LAST_USE_WRITE_MS) due.push({ keyId, atMs: last.atMs, region: this.#region })
      // A key unused for an hour is forgotten here (its last use is in the store): the map stays bounded by the keys in use.
      else if (now - last.atMs > 3_600_000 && last.writtenMs >= last.atMs) this.#lastUse.delete(keyId)
    }
    if (due.length === 0) return
    // Last use is a convenience: a failure waits for the next flush, and never holds the counts back.
    try {
      await this.#access.touchKeys(due)
      for (const u of due) {
        const last = this.#lastUse.get(u.keyId)
        if (last !== undefined) last.writtenMs = now
      }
    } catch {
      /* retried at the next flush */
    }
  }
}

function addRefused(into: Map<string, { readonly row: Omit<RefusalRow, 'count'>; count: number }>, row: Omit<RefusalRow, 'count'>, count: number): void {
  const key = `${row.day}\0${row.keyId}\0${row.group}\0${row.reason}`
  const found = into.get(key)
  if (found === undefined)
    into.set(key, { row: { accountId: row.accountId, keyId: row.keyId, region: row.region, day: row.day, group: row.group, reason: row.reason }, count })
  else found.count += count
}

function tallyOf(pending: Map<string, Map<string, Tally>>, day: string, accountId: string, keyId: string): Tally {
  let keys = pending.get(day)
  if (keys === undefined) {
    keys = new Map()
    pending.set(day, keys)
  }
  let tally = keys.get(keyId)
  if (tally === undefined) {
    tally = { accountId, count: { totp: 0, converter: 0 }, units: { totp: 0, converter: 0 } }
    keys.set(keyId, tally)
  }
  return tally
}
