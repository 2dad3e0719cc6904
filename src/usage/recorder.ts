/**
 * UsageRecorder counts admitted calls per account, UTC day and API group in memory and adds
 * them to the store every USAGE_FLUSH_MS and at shutdown: one write per flush, not one per
 * call. A flush that fails (store away) keeps its counts for the next one, so nothing is
 * lost while the process lives; a process killed outright loses at most one interval.
 */
import type { UsageRow, UsageStore } from '../storage/ports.ts'
import { utcDay } from './windows.ts'

export class UsageRecorder {
  #pending = new Map<string, UsageRow>()
  readonly #store: UsageStore
  readonly #now: () => number
  #flushing: Promise<void> | null = null

  constructor(store: UsageStore, now: () => number) {
    this.#store = store
    this.#now = now
  }

  count(accountId: string, group: string): void {
    const day = utcDay(this.#now())
    const id = `${accountId}\u0000${day}\u0000${group}`
    const row = this.#pending.get(id)
    this.#pending.set(id, { accountId, day, group, count: (row?.count ?? 0) + 1 })
  }

  /** pending sums the counts not yet in the store for an account from `fromDay` to `toDay`. */
  pending(accountId: string, fromDay: string, toDay: string): number {
    let n = 0
    for (const r of this.#pending.values()) if (r.accountId === accountId && r.day >= fromDay && r.day <= toDay) n += r.count
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
    try {
      await this.#store.add([...batch.values()])
    } catch (error) {
      for (const [id, row] of batch) {
        const later = this.#pending.get(id)
        this.#pending.set(id, later ? { ...row, count: row.count + later.count } : row)
      }
      throw error
    }
  }
}
