/**
 * GrantCache keeps key lookups, found or not, for a bounded time and count, keyed by the
 * presented key, so that the hot path of the gateway is one map lookup. It is emptied
 * whenever the store reports a change (at once for this process, within the poll interval
 * for others).
 */
import type { KeyGrant } from '../storage/ports.ts'

interface Cached {
  readonly grant: KeyGrant | null
  readonly expires: number
}

export class GrantCache {
  readonly #entries = new Map<string, Cached>()
  readonly #ttlMs: number
  readonly #max: number
  #generation = 0

  constructor(ttlSeconds: number, maxEntries: number) {
    this.#ttlMs = ttlSeconds * 1000
    this.#max = maxEntries
  }

  /** get returns the cached grant (null for a cached miss), or undefined when not cached. */
  get(hash: string, now: number): KeyGrant | null | undefined {
    const hit = this.#entries.get(hash)
    if (hit === undefined) return undefined
    if (hit.expires <= now) {
      this.#entries.delete(hash)
      return undefined
    }
    return hit.grant
  }

  /** generation changes at every clear: a lookup that began before a clear must not be cached after it. */
  get generation(): number {
    return this.#generation
  }

  set(hash: string, grant: KeyGrant | null, now: number, generation: number): void {
    if (this.#ttlMs === 0 || generation !== this.#generation) return
    if (this.#entries.size >= this.#max) {
      // Maps iterate in insertion order: drop the oldest entry.
      const oldest = this.#entries.keys().next().value
      if (oldest !== undefined) this.#entries.delete(oldest)
    }
    this.#entries.set(hash, { grant, expires: now + this.#ttlMs })
  }

  clear(): void {
    this.#generation++
    this.#entries.clear()
  }

  get size(): number {
    return this.#entries.size
  }
}
