/**
 * BoundedCache keeps values, found-nothing (null) included, for a bounded time and count:
 * past `maxEntries` the oldest entry goes. A TTL of 0 keeps nothing. Shared by the key
 * cache of the gateway and the onboarding-record cache of the TOTP group.
 */
interface Cached<T> {
  readonly value: T
  readonly expires: number
}

export class BoundedCache<T> {
  readonly #entries = new Map<string, Cached<T>>()
  readonly #ttlMs: number
  readonly #max: number

  constructor(ttlSeconds: number, maxEntries: number) {
    this.#ttlMs = ttlSeconds * 1000
    this.#max = maxEntries
  }

  /** get returns the cached value, or undefined when there is none or it has expired. */
  get(key: string, now: number): T | undefined {
    const hit = this.#entries.get(key)
    if (hit === undefined) return undefined
    if (hit.expires <= now) {
      this.#entries.delete(key)
      return undefined
    }
    return hit.value
  }

  set(key: string, value: T, now: number): void {
    if (this.#ttlMs === 0) return
    this.#entries.delete(key)
    if (this.#entries.size >= this.#max) {
      // Maps iterate in insertion order: drop the oldest entry.
      const oldest = this.#entries.keys().next().value
      if (oldest !== undefined) this.#entries.delete(oldest)
    }
    this.#entries.set(key, { value, expires: now + this.#ttlMs })
  }

  clear(): void {
    this.#entries.clear()
  }

  get size(): number {
    return this.#entries.size
  }
}
