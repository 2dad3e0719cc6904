/**
 * API keys: a recognisable prefix and 160 random bits. Only HMAC-SHA-256(pepper, key) is
 * stored; the key is shown once, at creation.
 */
import { randomBytes } from 'node:crypto'
import { keyedDigest, type Pepper } from '../crypto/keyed.ts'

export const KEY_PREFIX = 'tsr_'

export function generateApiKey(): string {
  return KEY_PREFIX + randomBytes(20).toString('hex')
}

export function hashApiKey(pepper: Pepper, key: string): string {
  return keyedDigest(pepper, 'api-key', key)
}
