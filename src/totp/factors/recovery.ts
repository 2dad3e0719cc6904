/**
 * Recovery codes of a user whose authenticator is lost: ten at a time, each 60 random bits
 * as twelve base32 letters and digits in three groups (`k7qm-2xda-9fpe`), shown once and kept
 * as keyed hashes (HMAC under the pepper, bound to account and user): a code read from the
 * store is worth nothing, and a code of one user is nothing to another. Typed back, case,
 * spaces and dashes do not matter.
 */
import { randomBytes } from 'node:crypto'
import { keyedDigest, type Pepper } from '../../crypto/keyed.ts'

export const RECOVERY_CODES = 10
const ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567'
const LETTERS = 12

/** newRecoveryCodes draws `count` distinct codes. */
export function newRecoveryCodes(count = RECOVERY_CODES): string[] {
  const codes = new Set<string>()
  while (codes.size < count) {
    const bytes = randomBytes(LETTERS)
    // 32 letters: the low five bits of each byte are uniform.
    let text = ''
    for (let i = 0; i < LETTERS; i++) text += ALPHABET[bytes[i]! & 31]
    codes.add(`${text.slice(0, 4)}-${text.slice(4, 8)}-${text.slice(8)}`)
  }
  return [...codes]
}

/** normalizeCode gives a typed code as it was issued, or null when it cannot be one. */
export function normalizeCode(input: string): string | null {
  const text = input.toLowerCase().replace(/[\s-]/g, '')
  return /^[a-z2-7]{12}$/.test(text) ? text : null
}

/** codeHash is what the store keeps of a code. */
export function codeHash(pepper: Pepper, accountId: string, userId: string, code: string): string {
  return keyedDigest(pepper, 'recovery-code', accountId, userId, code.replace(/-/g, ''))
}
