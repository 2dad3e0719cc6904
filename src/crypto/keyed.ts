/** keyedDigest is HMAC-SHA-256 under the server pepper over length-prefixed parts (no ambiguity between parts). */
import { createHmac } from 'node:crypto'

export function keyedDigest(pepper: string, ...parts: readonly string[]): string {
  const hmac = createHmac('sha256', pepper)
  for (const part of parts) hmac.update(`${Buffer.byteLength(part)}:`).update(part)
  return hmac.digest('base64url')
}
