/**
 * GrantCache keeps key lookups, found or not, for a bounded time and count, keyed by the
 * presented key, so that the hot path of the gateway is one map lookup. It is emptied
 * whenever the store reports a change (at once for this process, within the poll interval
 * for others).
 */
import type { KeyGrant } from '../domain/accounts.ts'
import { BoundedCache } from '../cache/bounded.ts'

export class GrantCache {
  readonly #entries: BoundedCache<KeyGrant | null>
  #generation = 0

  constructor(ttlSeconds: number, maxEntries: number) {
    this.#entries = new BoundedCache(ttlSeconds, maxEntries)
  }

  /** get returns the cached grant (null for a cached miss), or undefined when not cached. */
  get(hash: string, now: number): KeyGrant | null | undefined {
    return this.#entries.get(hash, now)
  }

  /** generation changes at every clear: a lookup that began before a clear must not be cached after it. */
  get generation(): number {
    return this.#generation
  }

  set(hash: string, grant: KeyGrant | null, now: number, generation: number): void {
    if (generation === this.#generation) this.#entries.set(hash, grant, now)
  }

  clear(): void {
    this.#generation++
    this.#entries.clear()
  }

  get size(): number {
    return this.#entries.size
  }
}
