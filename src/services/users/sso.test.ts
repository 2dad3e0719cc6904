/** The single sign-on rules that need no provider: issuers, addresses a provider vouches for, and the domains a provider may sign in. */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { IDToken } from 'openid-client'
import type { SsoProvider } from '../../domain/portal.ts'
import { checkIssuer, domainRefusal, verifiedEmail } from './sso.ts'

const token = (claims: Record<string, unknown>): IDToken => ({ iss: 'https://id.example.com', sub: 's', aud: 'c', exp: 0, iat: 0, ...claims }) as IDToken

const provider = (extra: Partial<SsoProvider> = {}): SsoProvider => ({
  id: 'p',
  name: 'P',
  issuer: 'https://id.example.com',
  clientId: 'c',
  clientSecret: null,
  domains: ['acme.example'],
  joinAccountId: null,
  joinRole: null,
  mfa: 'portal',
  passwordAllowed: true,
  createdAt: '',
  updatedAt: '',
  ...extra,
})

test('issuers: https, or http on a loopback address only; no query, fragment or credentials', () => {
  for (const ok of [
    'https://id.example.com',
    'https://login.microsoftonline.com/tenant/v2.0',
    'http://127.0.0.1:8080',
    'http://[::1]:9000',
    'http://localhost',
  ])
    assert.equal(checkIssuer(ok), null, ok)
  for (const [bad, words] of [
    ['http://id.example.com', /https/],
    ['http://10.0.0.1', /https/],
    ['ftp://id.example.com', /https/],
    ['https://id.example.com?x=1', /query/],
    ['https://id.example.com#f', /fragment/],
    ['https://u:p@id.example.com', /credentials/],
    ['not a url', /URL/],
    [`https://${'a'.repeat(500)}.example.com`, /500/],
  ] as const)
    assert.match(checkIssuer(bad) ?? '', words, bad)
})

test('an address counts only when the provider vouches for it and it is one to show', () => {
  assert.equal(verifiedEmail(token({ email: 'ann@acme.example', email_verified: true })), 'ann@acme.example')
  assert.equal(verifiedEmail(token({ email: 'ann@acme.example', xms_edov: true })), 'ann@acme.example', "Entra ID's domain-owner flag")
  for (const claims of [
    { email: 'ann@acme.example' },
    { email: 'ann@acme.example', email_verified: 'true' },
    { email: 'ann@acme.example', email_verified: false },
    { email: 42, email_verified: true },
    { email: 'no-at-sign', email_verified: true },
    { email: 'a\u0000b@acme.example', email_verified: true },
    { email: 'a\u202eb@acme.example', email_verified: true },
    { email: 'a\u200bb@acme.example', email_verified: true },
    { email: 'a\ud800b@acme.example', email_verified: true },
    { email: `${'a'.repeat(250)}@acme.example`, email_verified: true },
  ])
    assert.equal(verifiedEmail(token(claims)), null, JSON.stringify(claims))
})

test("domains: the address's, and the organisation's the token names; Google's tokens must name it", () => {
  assert.equal(domainRefusal(provider(), 'ann@Acme.Example', token({})), null)
  assert.match(domainRefusal(provider(), 'ann@other.example', token({})) ?? '', /domain other\.example not allowed/)
  assert.match(domainRefusal(provider(), 'ann@acme.example', token({ hd: 'gmail.com' })) ?? '', /organisation domain gmail\.com/)
  assert.equal(domainRefusal(provider(), 'ann@acme.example', token({ hd: 'ACME.example' })), null)
  const google = provider({ issuer: 'https://accounts.google.com' })
  assert.match(domainRefusal(google, 'ann@acme.example', token({})) ?? '', /no hd claim/, 'a personal Google account with a company address')
  assert.equal(domainRefusal(google, 'ann@acme.example', token({ hd: 'acme.example' })), null)
  // However the operator spelled Google's issuer, the token's is the one discovery checked.
  const spelled = provider({ issuer: 'https://accounts.google.com:443' })
  assert.match(domainRefusal(spelled, 'ann@acme.example', token({ iss: 'https://accounts.google.com' })) ?? '', /no hd claim/)
  assert.equal(domainRefusal(provider(), 'ann@acme.example', token({ hd: 'x\u0000y' })), 'organisation domain not allowed', 'an odd hd is not echoed')
  assert.equal(domainRefusal(provider({ domains: [] }), 'anyone@anywhere.example', token({})), null, 'no domains: any')
})
