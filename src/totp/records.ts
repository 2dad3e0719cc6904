/**
 * Onboarding records by secret. A record keeps a secret's parameters (digits, algorithm,
 * period) under an HMAC fingerprint of the secret, never the secret itself. getOTP and
 * verifyOTP read the parameters a request leaves out from the record of its secret, so
 * that a secret onboarded with 8 digits does not verify with its last 6.
 */
import type { Pepper } from '../crypto/keyed.ts'
import { keyedDigest } from '../crypto/keyed.ts'
import type { Algorithm, OnboardingRecord, OnboardingStore } from '../storage/ports.ts'
import { ALGORITHMS, canonicalKey, SECRET_BYTES, toBase32 } from './otp.ts'

const LABEL = 'onboarding-secret'

/** secretFingerprint is made from the key as HMAC uses it (canonicalKey), so every spelling of one secret has one fingerprint. */
export function secretFingerprint(pepper: Pepper, secret: Buffer, algorithm: Algorithm): string {
  return keyedDigest(pepper, LABEL, toBase32(canonicalKey(secret, algorithm)))
}

/**
 * findRecord finds the record of `secret` in the account, trying each algorithm the request
 * leaves open (the canonical key differs between them only for keys longer than 64 bytes).
 * Records written before fingerprints were canonical hold the fingerprint of the secret as
 * issued; it is tried too where it differs.
 */
export async function findRecord(
  store: OnboardingStore, pepper: Pepper, accountId: string, secret: Buffer, algorithm: Algorithm | undefined,
): Promise<OnboardingRecord | null> {
  // Keyed by the text that is fingerprinted: for keys of 64 bytes or less without trailing
  // zeros (all that we issue), every candidate is the same text, and one HMAC is made.
  const texts = new Map<string, Set<Algorithm>>()
  const add = (text: string, algorithms: readonly Algorithm[]) => {
    const set = texts.get(text) ?? new Set()
    for (const a of algorithms) set.add(a)
    texts.set(text, set)
  }
  for (const a of algorithm ? [algorithm] : ALGORITHMS) add(toBase32(canonicalKey(secret, a)), [a])
  add(toBase32(secret), ALGORITHMS)
  const matches = new Map<string, Set<Algorithm>>()
  for (const [text, algorithms] of texts) matches.set(keyedDigest(pepper, LABEL, text), algorithms)
  const record = await store.findBySecret(accountId, [...matches.keys()])
  // A fingerprint made for one algorithm says nothing of a record kept for another.
  return record !== null && matches.get(record.secretFingerprint)?.has(record.algorithm) ? record : null
}

interface Cached {
  readonly record: OnboardingRecord | null
  readonly expires: number
}

/**
 * RecordCache keeps record lookups, found or not, for a bounded time and count, so that
 * getOTP and verifyOTP do not read the store on every call (a read cost them more than
 * the rest of the call). It cannot go stale in a way that matters: a record's parameters
 * never change for its secret (onboarding again issues a new secret), and a secret that
 * has no record when it is looked up cannot get one (onboarding draws a fresh random one).
 * Entries are keyed by account and secret in memory only (as the key cache is keyed by
 * the presented key): an HMAC here cost as much as the rest of a cached getOTP, and would
 * hide nothing from whoever can read the process's memory, where the pepper is too.
 */
export class RecordCache {
  readonly #entries = new Map<string, Cached>()
  readonly #store: OnboardingStore
  readonly #pepper: Pepper
  readonly #ttlMs: number
  readonly #max: number

  constructor(store: OnboardingStore, pepper: Pepper, ttlSeconds: number, maxEntries: number) {
    this.#store = store
    this.#pepper = pepper
    this.#ttlMs = ttlSeconds * 1000
    this.#max = maxEntries
  }

  #key(accountId: string, secret: Buffer, algorithm: Algorithm | undefined): string {
    return `${accountId}\0${algorithm ?? ''}\0${secret.toString('latin1')}`
  }

  /**
   * find is findRecord through the cache: the record (or null) at once when cached, else a
   * promise of it. Callers answer a hit synchronously (on getOTP a promise per call is a
   * measurable share of the work).
   */
  find(accountId: string, secret: Buffer, algorithm: Algorithm | undefined, now: number): OnboardingRecord | null | Promise<OnboardingRecord | null> {
    // Only onboardUser makes records, and the secrets it issues are SECRET_BYTES long: any
    // other (Renda.io's 80-bit ones) has none, and costs no lookup.
    if (secret.length !== SECRET_BYTES) return null
    if (this.#ttlMs === 0) return findRecord(this.#store, this.#pepper, accountId, secret, algorithm)
    const key = this.#key(accountId, secret, algorithm)
    const hit = this.#entries.get(key)
    if (hit !== undefined && hit.expires > now) return hit.record
    return findRecord(this.#store, this.#pepper, accountId, secret, algorithm).then((record) => {
      this.#remember(key, record, now)
      return record
    })
  }

  #remember(key: string, record: OnboardingRecord | null, now: number): void {
    this.#entries.delete(key)
    if (this.#entries.size >= this.#max) {
      // Maps iterate in insertion order: drop the oldest entry.
      const oldest = this.#entries.keys().next().value
      if (oldest !== undefined) this.#entries.delete(oldest)
    }
    this.#entries.set(key, { record, expires: now + this.#ttlMs })
  }
}
