/**
 * UsageRecorder counts admitted calls per account, UTC day and API group in memory and adds
 * them to the store every USAGE_FLUSH_MS and at shutdown: one write per flush, not one per
 * call. A flush that fails (store away) keeps its counts for the next one, so nothing is
 * lost while the process lives; a process killed outright loses at most one interval.
 */
import type { UsageRow, UsageStore } from '../storage/ports.ts'
import { utcDay } from './windows.ts'

const DAY = 86_400_000

/** day → account → group → count */
type Counts = Map<string, Map<string, Map<string, number>>>

export class UsageRecorder {
  #pending: Counts = new Map()
  readonly #store: UsageStore
  readonly #now: () => number
  #flushing: Promise<void> | null = null
  // The current day's name and bounds: a call costs no date formatting.
  #day = ''
  #dayStart = 0
  #dayEnd = 0

  constructor(store: UsageStore, now: () => number) {
    this.#store = store
    this.#now = now
  }

  count(accountId: string, group: string): void {
    const now = this.#now()
    if (now >= this.#dayEnd || now < this.#dayStart) {
      this.#dayStart = Math.floor(now / DAY) * DAY
      this.#dayEnd = this.#dayStart + DAY
      this.#day = utcDay(now)
    }
    add(this.#pending, this.#day, accountId, group, 1)
  }

  /** pending sums the counts not yet in the store for an account from `fromDay` to `toDay`. */
  pending(accountId: string, fromDay: string, toDay: string): number {
    let n = 0
    for (const [day, accounts] of this.#pending) {
      if (day < fromDay || day > toDay) continue
      for (const count of accounts.get(accountId)?.values() ?? []) n += count
    }
    return n
  }

  /** flush adds the pending counts to the store; on failure they stay pending and it throws. */
  flush(): Promise<void> {
    this.#flushing ??= this.#flush().finally(() => { this.#flushing = null })
    return this.#flushing
  }

  async #flush(): Promise<void> {
    if (this.#pending.size === 0) return
    const batch = this.#pending
    this.#pending = new Map()
    const rows: UsageRow[] = []
    for (const [day, accounts] of batch) {
      for (const [accountId, groups] of accounts) for (const [group, count] of groups) rows.push({ accountId, day, group, count })
    }
    try {
      await this.#store.add(rows)
    } catch (error) {
      for (const r of rows) add(this.#pending, r.day, r.accountId, r.group, r.count)
      throw error
    }
  }
}

function add(counts: Counts, day: string, accountId: string, group: string, n: number): void {
  let accounts = counts.get(day)
  if (accounts === undefined) counts.set(day, accounts = new Map())
  let groups = accounts.get(accountId)
  if (groups === undefined) accounts.set(accountId, groups = new Map())
  groups.set(group, (groups.get(group) ?? 0) + n)
}
