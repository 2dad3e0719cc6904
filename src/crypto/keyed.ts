/** Keyed digests under the server pepper (API key hashes, fingerprints of secrets). */
import { hmac } from './hmac.ts'

/** Pepper is the server secret as bytes, read once at start-up. */
export type Pepper = Buffer

export function pepperKey(pepper: string): Pepper {
  return Buffer.from(pepper, 'utf8')
}

/** keyedDigest is HMAC-SHA-256 under the pepper over length-prefixed parts (no ambiguity between parts). */
export function keyedDigest(pepper: Pepper, ...parts: readonly string[]): string {
  const message = Buffer.from(parts.map((part) => `${Buffer.byteLength(part)}:${part}`).join(''), 'utf8')
  return hmac('sha256', pepper, message).toString('base64url')
}
