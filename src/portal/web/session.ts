/**
 * Portal sessions and CSRF, after The Copenhagen Book and OWASP's cheat sheets:
 * - a session token is 160 random bits, sent only in a cookie (HttpOnly, SameSite=Lax, and
 *   Secure with the `__Host-` prefix behind HTTPS); the store keeps its SHA-256, so a leaked
 *   table holds no usable session;
 * - a form carries a CSRF token bound to its session (an HMAC of the session's hash under the
 *   pepper: nothing more to store), checked in constant time; before sign-in, forms are bound
 *   to a pre-session cookie the same way;
 * - every state-changing request must also come from this origin (`Origin`, else
 *   `Sec-Fetch-Site`): a cross-site form post fails even where SameSite is not enforced.
 */
import { timingSafeEqual } from 'node:crypto'
import type { IncomingHttpHeaders } from 'node:http'
import { keyedDigest, type Pepper } from '../../crypto/keyed.ts'

export { isToken, newSessionToken, sessionIdHash, type SessionToken } from '../../services/users/tokens.ts'

export const SESSION_COOKIE = 'tessera_session'
export const PRESESSION_COOKIE = 'tessera_form'

/** cookieName: with Secure, the `__Host-` prefix (no Domain, Path=/, Secure: no subdomain can set it). */
export function cookieName(base: string, secure: boolean): string {
  return secure ? `__Host-${base}` : base
}

/** setCookie is a Set-Cookie value; `maxAgeSeconds` 0 deletes the cookie. */
export function setCookie(base: string, value: string, secure: boolean, maxAgeSeconds: number): string {
  return [`${cookieName(base, secure)}=${value}`, 'Path=/', `Max-Age=${maxAgeSeconds}`, 'HttpOnly', 'SameSite=Lax', ...(secure ? ['Secure'] : [])].join('; ')
}

/** readCookie gives a cookie's value from a Cookie header, or null (the first one of that name). */
export function readCookie(header: string | undefined, name: string): string | null {
  if (header === undefined || header.length > 8192) return null
  for (const part of header.split(';')) {
    const eq = part.indexOf('=')
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim()
  }
  return null
}

/** csrfToken is the token the forms of a session (or pre-session) carry. */
export function csrfToken(pepper: Pepper, idHash: string): string {
  return keyedDigest(pepper, 'portal-csrf', idHash)
}

/** checkCsrf compares a presented token with the session's, in constant time. */
export function checkCsrf(pepper: Pepper, idHash: string, presented: unknown): boolean {
  if (typeof presented !== 'string') return false
  const expected = Buffer.from(csrfToken(pepper, idHash))
  const given = Buffer.from(presented)
  return given.length === expected.length && timingSafeEqual(given, expected)
}

/**
 * sameOrigin: a state-changing request comes from this site (one of `origins`: the public
 * base URL's, and the one the request was sent to). `Origin` when the browser sends one
 * (every current browser does on POST), else `Sec-Fetch-Site`; a request with neither (an
 * old browser, a script) is let through to the CSRF token, which it cannot have.
 */
export function sameOrigin(headers: IncomingHttpHeaders, origins: readonly string[]): boolean {
  const origin = headers.origin
  if (typeof origin === 'string') return origin !== 'null' && origins.includes(origin)
  const site = headers['sec-fetch-site']
  if (typeof site === 'string') return site === 'same-origin' || site === 'none'
  return true
}
