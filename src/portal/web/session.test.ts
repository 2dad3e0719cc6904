import { test } from 'node:test'
import assert from 'node:assert/strict'
import { pepperKey } from '../../crypto/keyed.ts'
import { checkCsrf, cookieName, csrfToken, isToken, newSessionToken, readCookie, sameOrigin, sessionIdHash, setCookie } from './session.ts'

const pepper = pepperKey('a test pepper of at least thirty-two characters')

test('session tokens: 160 random bits in the cookie, only their SHA-256 in the store', () => {
  const a = newSessionToken()
  const b = newSessionToken()
  assert.notEqual(a.token, b.token)
  assert.ok(isToken(a.token))
  assert.equal(Buffer.from(a.token, 'base64url').length, 20)
  assert.equal(a.idHash, sessionIdHash(a.token))
  assert.match(a.idHash, /^[0-9a-f]{64}$/)
  assert.ok(!a.idHash.includes(a.token))
  for (const bad of ['', 'x'.repeat(26), 'x'.repeat(28), `${a.token.slice(0, 26)}=`]) assert.equal(isToken(bad), false, bad)
})

test('cookies: HttpOnly and SameSite=Lax always; behind HTTPS Secure with the __Host- prefix; read back from a Cookie header', () => {
  assert.equal(setCookie('tessera_session', 'abc', true, 3600), '__Host-tessera_session=abc; Path=/; Max-Age=3600; HttpOnly; SameSite=Lax; Secure')
  assert.equal(setCookie('tessera_session', 'abc', false, 3600), 'tessera_session=abc; Path=/; Max-Age=3600; HttpOnly; SameSite=Lax')
  assert.equal(setCookie('tessera_session', '', false, 0), 'tessera_session=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax')
  assert.equal(cookieName('tessera_form', true), '__Host-tessera_form')
  assert.equal(readCookie('a=1; __Host-tessera_session=tok; b=2', '__Host-tessera_session'), 'tok')
  assert.equal(readCookie('tessera_session_x=1', 'tessera_session'), null, 'a name is matched whole')
  assert.equal(readCookie('tessera_session=first; tessera_session=second', 'tessera_session'), 'first')
  assert.equal(readCookie(undefined, 'tessera_session'), null)
  assert.equal(readCookie(`x=${'y'.repeat(9000)}`, 'x'), null, 'an oversized header is not parsed')
})

test("CSRF: a token bound to its session, compared in constant time; another session's or none is refused", () => {
  const session = newSessionToken()
  const other = newSessionToken()
  const token = csrfToken(pepper, session.idHash)
  assert.equal(checkCsrf(pepper, session.idHash, token), true)
  assert.equal(checkCsrf(pepper, other.idHash, token), false)
  assert.equal(checkCsrf(pepper, session.idHash, token.slice(0, -1)), false)
  assert.equal(checkCsrf(pepper, session.idHash, undefined), false)
  assert.equal(checkCsrf(pepper, session.idHash, ['a']), false)
  assert.equal(checkCsrf(pepperKey('another pepper, also thirty-two characters long'), session.idHash, token), false)
})

test('same origin: Origin when sent, else Sec-Fetch-Site; a cross-site post is refused', () => {
  const base = ['https://api.example.net', 'http://10.0.0.5:3000']
  assert.equal(sameOrigin({ origin: 'https://api.example.net' }, base), true)
  assert.equal(sameOrigin({ origin: 'https://evil.example' }, base), false)
  assert.equal(sameOrigin({ origin: 'http://api.example.net' }, base), false, 'scheme counts')
  assert.equal(sameOrigin({ origin: 'http://10.0.0.5:3000' }, base), true, 'the address the request was sent to')
  assert.equal(sameOrigin({ origin: 'null' }, base), false, 'a sandboxed or privacy-sensitive context')
  assert.equal(sameOrigin({ 'sec-fetch-site': 'same-origin' }, base), true)
  assert.equal(sameOrigin({ 'sec-fetch-site': 'cross-site' }, base), false)
  assert.equal(sameOrigin({ 'sec-fetch-site': 'same-site' }, base), false, 'a sibling subdomain is another origin')
  assert.equal(sameOrigin({}, base), true, 'left to the CSRF token')
})
