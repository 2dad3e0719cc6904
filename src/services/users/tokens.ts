/**
 * The random tokens of the portal's users: session ids (the cookie carries the token, the
 * store its SHA-256, so a leaked table holds no usable session), email links and user ids
 * come from the same 160 random bits.
 */
import { createHash, randomBytes } from 'node:crypto'

export interface SessionToken {
  /** What the cookie carries. */
  readonly token: string
  /** What the store keeps. */
  readonly idHash: string
}

export function newSessionToken(): SessionToken {
  const token = randomBytes(20).toString('base64url')
  return { token, idHash: sessionIdHash(token) }
}

export function sessionIdHash(token: string): string {
  return createHash('sha256').update(token).digest('hex')
}

/** A token as newSessionToken writes it: 27 base64url characters; anything else is not looked up. */
export function isToken(value: string): boolean {
  return /^[A-Za-z0-9_-]{27}$/.test(value)
}
