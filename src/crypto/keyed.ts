/** Keyed digests under the server pepper (API key hashes, fingerprints of secrets). */
import { hmacText } from './hmac.ts'

/** Pepper is the server secret as bytes, read once at start-up. */
export type Pepper = Buffer

export function pepperKey(pepper: string): Pepper {
  return Buffer.from(pepper, 'utf8')
}

/** keyedDigest is HMAC-SHA-256 under the pepper over length-prefixed parts (no ambiguity between parts). */
export function keyedDigest(pepper: Pepper, ...parts: readonly string[]): string {
  let message = ''
  for (const part of parts) message += `${Buffer.byteLength(part, 'utf8')}:${part}`
  return hmacText('sha256', pepper, message, 'base64url')
}
