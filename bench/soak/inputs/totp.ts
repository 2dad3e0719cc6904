/** The soak's inputs for the health checks and the stateless TOTP routes (ping, QR codes, onboarding, codes, verification). */
import type { Case, Table } from '../types.ts'
import { code, form, hostileText, json, multipart, newSecret, raw, stepNow } from './common.ts'

const OTPAUTH = 'otpauth://totp/Acme:jane%40example.com?secret=JBSWY3DPEHPK3PXP&issuer=Acme'

/** Hostile cases every POST /totp/* route of form fields gets besides its own. */
function bodyAbuse(fields: Record<string, string>): Case[] {
  return [
    { name: 'body over BODY_LIMIT_BYTES', kind: 'hostile', expect: [413], make: () => form({ ...fields, pad: 'p'.repeat(20_000) }) },
    { name: 'broken JSON', kind: 'hostile', expect: [400], make: () => json('{"secret": "AAAA", ') },
    { name: 'JSON of the wrong shape', kind: 'hostile', expect: [400], make: () => json({ ...fields, data: { $gt: '' }, userID: ['a', 'b'], secret: 7 }) },
    { name: 'JSON with a lone surrogate', kind: 'hostile', make: () => json(JSON.stringify(fields).replace(/"([^"]*)"}$/, '"\\ud800$1"}')) },
    {
      name: 'form with a lone surrogate',
      kind: 'hostile',
      make: () => form({ ...fields, ...Object.fromEntries(Object.keys(fields).map((k) => [k, raw('%ED%A0%80')])) }),
    },
    { name: 'fields given twice', kind: 'hostile', make: () => ({ ...form(fields), body: `${form(fields).body as string}&${form(fields).body as string}` }) },
    { name: 'an unknown content type', kind: 'hostile', expect: [415], make: () => ({ body: 'x', headers: { 'content-type': 'text/x-soak' } }) },
    { name: 'multipart of fields', kind: 'boundary', make: () => multipart(Object.entries(fields).map(([name, value]) => ({ name, value }))) },
    { name: 'no key', kind: 'hostile', expect: [403], make: () => ({ ...form(fields), headers: { ...form(fields).headers, 'x-api-key': '' } }) },
    {
      name: 'a key of another shape',
      kind: 'hostile',
      expect: [403],
      make: () => ({ ...form(fields), headers: { ...form(fields).headers, 'x-api-key': `tsr_${'z'.repeat(300)}` } }),
    },
    { name: 'slow upload', kind: 'boundary', make: () => ({ ...form(fields), mode: 'slow-upload' }) },
    { name: 'hang up mid-upload', kind: 'hostile', make: () => ({ ...form({ ...fields, pad: 'p'.repeat(8000) }), mode: 'abort-upload' }) },
  ]
}

const health = (): Case[] => [
  { name: 'plain', kind: 'valid', expect: [200], make: () => ({}) },
  { name: 'a long odd query', kind: 'hostile', expect: [200], make: () => ({ query: `x=${'%2e'.repeat(2000)}&%ED%A0%80=1&y` }) },
  { name: 'a header of 12 KB', kind: 'boundary', expect: [200], make: () => ({ headers: { 'x-soak-padding': 'h'.repeat(12_000) } }) },
  { name: 'hang up before the answer is read', kind: 'hostile', make: () => ({ mode: 'abort-download' }) },
]

export const TOTP: Table = {
  checkLiveness: health(),
  checkReadiness: [...health(), { name: 'slow reader', kind: 'boundary', expect: [200], make: () => ({ mode: 'slow-read' }) }],
  ping: [
    { name: 'plain', kind: 'valid', expect: [200], make: () => ({}) },
    { name: 'no key', kind: 'hostile', expect: [403], make: () => ({ headers: { 'x-api-key': '' } }) },
    { name: 'an unknown key', kind: 'hostile', expect: [403], make: () => ({ headers: { 'x-api-key': `tsr_${'0'.repeat(40)}` } }) },
    {
      name: 'a key of 8 KB with a bidi override',
      kind: 'hostile',
      expect: [403],
      make: () => ({ headers: { 'x-api-key': `tsr_\xe2\x80\xae${'k'.repeat(8000)}` } }),
    },
    { name: 'a query of junk', kind: 'hostile', expect: [200], make: () => ({ query: '__proto__[x]=1&constructor=2&%00=%ED%A0%80' }) },
    { name: 'slow reader', kind: 'boundary', expect: [200], make: () => ({ mode: 'slow-read' }) },
  ],
  generateQRCode: [
    { name: 'an otpauth URL as PNG', kind: 'valid', expect: [200], make: () => form({ data: OTPAUTH }) },
    {
      name: 'SVG, colours, margin',
      kind: 'valid',
      expect: [200],
      make: () => form({ data: OTPAUTH, format: 'svg', color: '#112233', bgcolor: '#ffffff', margin: '4' }),
    },
    { name: 'the largest size (a QR worker draws it)', kind: 'boundary', expect: [200], make: () => form({ data: 'Q'.repeat(1500), size: '2048', ecc: 'H' }) },
    { name: 'the smallest size', kind: 'boundary', make: () => form({ data: 'x', size: '21', margin: '0' }) },
    { name: 'as much data as a symbol holds', kind: 'boundary', make: () => form({ data: '7'.repeat(7089), ecc: 'L' }) },
    { name: 'past a symbol', kind: 'hostile', expect: [400], make: () => form({ data: 'z'.repeat(3000), ecc: 'H' }) },
    { name: 'size past the largest', kind: 'hostile', expect: [400], make: () => form({ data: 'x', size: '2049' }) },
    { name: 'size negative and huge', kind: 'hostile', expect: [400], make: () => form({ data: 'x', size: '-99999999999999999999' }) },
    { name: 'odd colours', kind: 'hostile', expect: [400], make: () => form({ data: 'x', color: 'url(javascript:alert(1))', bgcolor: '#gggggg' }) },
    { name: 'data of hostile text', kind: 'hostile', make: (c) => form({ data: hostileText(c.next()) }) },
    { name: 'slow reader', kind: 'boundary', expect: [200], make: () => ({ ...form({ data: 'Q'.repeat(1500), size: '2048' }), mode: 'slow-read' }) },
    { name: 'hang up mid-download', kind: 'hostile', make: () => ({ ...form({ data: 'Q'.repeat(1500), size: '2048' }), mode: 'abort-download' }) },
    ...bodyAbuse({ data: OTPAUTH }),
  ],
  onboardUser: [
    { name: 'a new user', kind: 'valid', expect: [200], make: (c) => form({ userID: `user-${c.next()}@example.com`, applicationID: 'Soak' }) },
    {
      name: 'the longest IDs, 10 digits, SHA512, an hour',
      kind: 'boundary',
      expect: [200],
      make: (c) =>
        form({ userID: `${c.next()}-`.padEnd(256, 'u'), applicationID: 'a'.repeat(256), tokenLength: '10', tokenValidity: '3600', algorithm: 'sha512' }),
    },
    {
      name: 'a profile that narrows',
      kind: 'boundary',
      make: (c) => form({ userID: `p-${c.next()}`, applicationID: 'Soak', profile: 'google', tokenLength: '8' }),
    },
    { name: 'IDs one past the longest', kind: 'hostile', expect: [400], make: () => form({ userID: 'u'.repeat(257), applicationID: 'a'.repeat(257) }) },
    { name: 'IDs of hostile text', kind: 'hostile', make: (c) => form({ userID: hostileText(c.next()), applicationID: hostileText(c.next()) }) },
    {
      name: 'numbers out of range',
      kind: 'hostile',
      expect: [400],
      make: () => form({ userID: 'x', applicationID: 'y', tokenLength: '11', tokenValidity: '1e9' }),
    },
    ...bodyAbuse({ userID: 'u', applicationID: 'a' }),
  ],
  getOTP: [
    { name: 'a secret', kind: 'valid', expect: [200], make: () => form({ secret: newSecret() }) },
    { name: 'the longest secret, 15 s, 10 digits', kind: 'boundary', make: () => form({ secret: 'A'.repeat(1024), tokenValidity: '15', tokenLength: '10' }) },
    { name: 'a secret of 1025', kind: 'hostile', expect: [400], make: () => form({ secret: 'A'.repeat(1025) }) },
    { name: 'not base32', kind: 'hostile', expect: [400], make: () => form({ secret: '!!!!0189' }) },
    { name: 'secret of hostile text', kind: 'hostile', make: (c) => form({ secret: hostileText(c.next()) }) },
    ...bodyAbuse({ secret: 'JBSWY3DPEHPK3PXP' }),
  ],
  verifyOTP: [
    {
      name: 'the right code',
      kind: 'valid',
      expect: [200],
      make: () => {
        const secret = newSecret()
        return form({ secret, token: code(secret) })
      },
    },
    {
      name: "the previous step's code",
      kind: 'boundary',
      expect: [200],
      make: () => {
        const secret = newSecret()
        return form({ secret, token: code(secret, stepNow() - 1) })
      },
    },
    {
      name: 'a wrong code, again and again (lockout)',
      kind: 'hostile',
      make: (c) => form({ secret: c.account.index % 2 === 0 ? 'JBSWY3DPEHPK3PXP' : newSecret(), token: '000000' }),
    },
    { name: 'a token of 5000 digits', kind: 'hostile', expect: [400], make: () => form({ secret: newSecret(), token: '1'.repeat(5000) }) },
    { name: 'a token of hostile text', kind: 'hostile', make: (c) => form({ secret: newSecret(), token: hostileText(c.next()) }) },
    ...bodyAbuse({ secret: 'JBSWY3DPEHPK3PXP', token: '123456' }),
  ],
}
