/**
 * BoundedCache keeps values, found-nothing (null) included, for a bounded time and count.
 * Shared by the key cache of the gateway and the onboarding-record cache of the TOTP group,
 * both on the hot path. A TTL of 0 keeps nothing.
 *
 * It keeps two generations of at most half the entries each: new entries go to the young
 * one; when it is full it becomes the old one and the old one is dropped whole. A hit in the
 * old generation moves to the young one, so an entry in use stays (a key called all day is
 * not looked up again because a flood of unknown keys went by), and the rest goes in
 * insertion order, as before. Evicting the oldest entry of one Map at each insert, as this
 * cache used to, costs more with every deletion: V8's Map keeps deleted slots until it is
 * rehashed, and finding the first live key walks past them (3 to 12 µs a miss at 10 000
 * entries under the verifyOTP bench, bench/ab.ts).
 */
interface Cached<T> {
  readonly value: T
  readonly expires: number
}

export class BoundedCache<T> {
  #young = new Map<string, Cached<T>>()
  #old = new Map<string, Cached<T>>()
  readonly #ttlMs: number
  /** The most entries in each generation; with a bound of 1 there is no old generation. */
  readonly #half: number
  readonly #keepOld: boolean

  constructor(ttlSeconds: number, maxEntries: number) {
    this.#ttlMs = ttlSeconds * 1000
    this.#keepOld = maxEntries >= 2
    this.#half = this.#keepOld ? Math.floor(maxEntries / 2) : 1
  }

  /** get returns the cached value, or undefined when there is none or it has expired. */
  get(key: string, now: number): T | undefined {
    let hit = this.#young.get(key)
    if (hit === undefined) {
      hit = this.#old.get(key)
      if (hit === undefined || hit.expires <= now) return undefined
      this.#old.delete(key)
      this.#add(key, hit)
      return hit.value
    }
    return hit.expires <= now ? undefined : hit.value
  }

  set(key: string, value: T, now: number): void {
    if (this.#ttlMs === 0) return
    this.#old.delete(key)
    this.#add(key, { value, expires: now + this.#ttlMs })
  }

  #add(key: string, entry: Cached<T>): void {
    if (this.#young.size >= this.#half && !this.#young.has(key)) {
      this.#old = this.#keepOld ? this.#young : new Map()
      this.#young = new Map()
    }
    this.#young.set(key, entry)
  }

  clear(): void {
    this.#young = new Map()
    this.#old = new Map()
  }

  /** The entries kept, expired ones included until their generation goes. */
  get size(): number {
    return this.#young.size + this.#old.size
  }
}
