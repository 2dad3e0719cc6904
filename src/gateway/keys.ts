/**
 * API keys: a recognisable prefix and 160 random bits. Only HMAC-SHA-256(pepper, key) is
 * stored; the key is shown once, at creation.
 */
import { randomBytes } from 'node:crypto'
import { keyedDigest, type Pepper } from '../crypto/keyed.ts'
import type { AccessStore, ApiKeyInfo } from '../storage/ports.ts'

export const KEY_PREFIX = 'tsr_'

export function generateApiKey(): string {
  return KEY_PREFIX + randomBytes(20).toString('hex')
}

export function hashApiKey(pepper: Pepper, key: string): string {
  return keyedDigest(pepper, 'api-key', key)
}

/** issueKey creates a key for an account and returns its one and only plaintext copy. */
export async function issueKey(access: AccessStore, pepper: Pepper, accountId: string, name: string): Promise<{ info: ApiKeyInfo; apiKey: string }> {
  const apiKey = generateApiKey()
  const info = await access.createKey({ accountId, name, hash: hashApiKey(pepper, apiKey), hint: apiKey.slice(-4) })
  return { info, apiKey }
}
