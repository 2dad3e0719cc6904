/**
 * Onboarding records by secret. A record keeps a secret's parameters (digits, algorithm,
 * period) under an HMAC fingerprint of the secret, never the secret itself. getOTP and
 * verifyOTP read the parameters a request leaves out from the record of its secret, so
 * that a secret onboarded with 8 digits does not verify with its last 6.
 *
 * Only onboardUser makes records, and the secrets it issues are SECRET_BYTES (20) long,
 * under every hash's block: their canonical form (canonicalKey) is the same whatever the
 * algorithm, and a secret of any other length has no record here.
 */
import type { Pepper } from '../crypto/keyed.ts'
import { keyedDigest } from '../crypto/keyed.ts'
import { hmacBytes } from '../crypto/hmac.ts'
import type { OnboardingRecord } from '../domain/factors.ts'
import type { OnboardingStore } from '../storage/ports.ts'
import { BoundedCache } from '../cache/bounded.ts'
import { canonicalKey, newSecret, SECRET_BYTES, toBase32 } from './otp.ts'

const LABEL = 'onboarding-secret'

/** fingerprintOf is made from the key as HMAC uses it, so every spelling of one secret has one fingerprint. */
function fingerprintOf(pepper: Pepper, secret: Buffer): string {
  return keyedDigest(pepper, LABEL, toBase32(canonicalKey(secret, 'SHA1')))
}

/** secretFingerprint is the fingerprint onboardUser keeps for a secret it issues. */
export function secretFingerprint(pepper: Pepper, secret: Buffer): string {
  return fingerprintOf(pepper, secret)
}

/**
 * findRecord finds the record of `secret` in the account. Records written before
 * fingerprints were canonical hold the fingerprint of the secret as issued: it is tried
 * too where it differs (a secret ending in a zero byte).
 */
export function findRecord(store: OnboardingStore, pepper: Pepper, accountId: string, secret: Buffer): Promise<OnboardingRecord | null> {
  const fingerprints = [fingerprintOf(pepper, secret)]
  if (secret.at(-1) === 0) fingerprints.push(keyedDigest(pepper, LABEL, toBase32(secret)))
  return store.findBySecret(accountId, fingerprints)
}

/**
 * ParamsMark spares getOTP and verifyOTP the record lookup of almost every secret: a record
 * changes their answer only when its secret was onboarded with parameters other than SHA1, 6
 * digits and 30 s (for the default ones, the record says what the defaults say, and a longer
 * token than the record's digits is only harder to guess). onboardUser draws such secrets
 * until they carry the mark, a keyed tag (the first byte of an HMAC of the secret is zero);
 * any other secret carries it by chance once in 256. So a secret without the mark cannot
 * have such a record, and needs no lookup: without it, a verification with a new secret
 * cost one store round trip more than before records existed (on PostgreSQL ~90 µs of the
 * client's CPU, bench/ab.ts). The mark costs those secrets 8 of their 160 bits, which leaves
 * 152 (RFC 4226 asks for 128); a default secret keeps all 160.
 *
 * Records written before the mark existed do not follow it: an account that still has one
 * with other parameters (KeyGrant.unmarkedParams, read with the key) looks every secret up,
 * as before. New records never make an account so, and replacing the old ones ends it.
 */
export class ParamsMark {
  readonly #key: Buffer

  constructor(pepper: Pepper) {
    this.#key = Buffer.from(keyedDigest(pepper, 'params-mark'), 'base64url')
  }

  /** has: whether the secret (as HMAC uses it, so every spelling of one secret alike) carries the mark. */
  has(secret: Buffer): boolean {
    return hmacBytes('sha256', this.#key, canonicalKey(secret, 'SHA1'))[0] === 0
  }

  /** draw: a new secret that carries the mark (256 draws on average, well under a millisecond). */
  draw(): Buffer {
    for (;;) {
      const secret = newSecret()
      if (this.has(secret)) return secret
    }
  }
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
  readonly #entries: BoundedCache<OnboardingRecord | null>
  readonly #store: OnboardingStore
  readonly #pepper: Pepper

  constructor(store: OnboardingStore, pepper: Pepper, ttlSeconds: number, maxEntries: number) {
    this.#store = store
    this.#pepper = pepper
    this.#entries = new BoundedCache(ttlSeconds, maxEntries)
  }

  /**
   * find is findRecord through the cache: the record (or null) at once when cached or when
   * the secret cannot have one (its length, or `mayHaveRecord` says so), else a promise of it. Callers answer a hit synchronously
   * (on getOTP a promise per call is a measurable share of the work).
   */
  find(
    accountId: string,
    secret: Buffer,
    now: number,
    mayHaveRecord?: (secret: Buffer) => boolean,
  ): OnboardingRecord | null | Promise<OnboardingRecord | null> {
    if (secret.length !== SECRET_BYTES) return null
    const key = `${accountId}\0${secret.toString('latin1')}`
    const hit = this.#entries.get(key, now)
    if (hit !== undefined) return hit
    // A secret that cannot have a record that matters (ParamsMark) is answered as having none, and remembered so.
    if (mayHaveRecord !== undefined && !mayHaveRecord(secret)) {
      this.#entries.set(key, null, now)
      return null
    }
    return findRecord(this.#store, this.#pepper, accountId, secret).then((record) => {
      this.#entries.set(key, record, now)
      return record
    })
  }
}
