/**
 * Onboarding records by secret. A record keeps a secret's parameters (digits, algorithm,
 * period) under an HMAC fingerprint of the secret, never the secret itself. getOTP and
 * verifyOTP read the parameters a request leaves out from the record of its secret, so
 * that a secret onboarded with 8 digits does not verify with its last 6.
 */
import type { Pepper } from '../crypto/keyed.ts'
import { keyedDigest } from '../crypto/keyed.ts'
import type { Algorithm, OnboardingRecord, OnboardingStore } from '../storage/ports.ts'
import { ALGORITHMS, canonicalKey, toBase32 } from './otp.ts'

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
