import { test } from 'node:test'
import assert from 'node:assert/strict'
import { HOTP, Secret, URI } from 'otpauth'
import { createHash } from 'node:crypto'
import { canonicalKey, codeAt, currentCode, matchStep, newSecret, otpauthUrl, parseSecret, secondsLeft, toBase32, totpParams } from './otp.ts'
import type { Algorithm } from '../domain/accounts.ts'
import { RFC4226_CODES, RFC6238_SEEDS, RFC6238_VECTORS } from './rfc-vectors.ts'

const params = (algorithm: Algorithm, digits = 8, period = 30) => totpParams(Buffer.from(RFC6238_SEEDS[algorithm], 'latin1'), algorithm, digits, period)

test('RFC 6238 Appendix B vectors', () => {
  for (const [seconds, expected] of RFC6238_VECTORS) {
    for (const algorithm of ['SHA1', 'SHA256', 'SHA512'] as const) {
      assert.equal(currentCode(params(algorithm), seconds * 1000).otp, expected[algorithm], `${algorithm} at ${seconds}`)
    }
  }
})

test('RFC 4226 Appendix D vectors', () => {
  for (const [counter, code] of RFC4226_CODES.entries()) assert.equal(codeAt(params('SHA1', 6), counter), code, `counter ${counter}`)
})

test('codeAt gives what otpauth gives, for every algorithm, 6 to 10 digits, secrets of any length and counters past 32 bits', () => {
  for (let i = 0; i < 300; i++) {
    const algorithm = (['SHA1', 'SHA256', 'SHA512'] as const)[i % 3]!
    const digits = 6 + (i % 5)
    const secret = new Secret({ size: 1 + ((i * 7) % 150) })
    const counter = i % 2 === 0 ? i * 1_000_003 : 2 ** 32 + i * 987_654_321
    const expected = HOTP.generate({ secret, algorithm, digits, counter })
    assert.equal(codeAt(totpParams(Buffer.from(secret.bytes), algorithm, digits), counter), expected, `${algorithm}/${digits} at ${counter}`)
  }
})

test('matchStep accepts one step either side and no further', () => {
  const p = params('SHA1', 6)
  const now = 1_700_000_000_000
  const step = Math.floor(now / 30000)
  for (const delta of [-1, 0, 1]) assert.equal(matchStep(p, codeAt(p, step + delta), now), step + delta)
  for (const delta of [-3, -2, 2, 3]) {
    const code = codeAt(p, step + delta)
    // A code can collide with a neighbour's by chance (1 in 10^6); the vector here does not.
    assert.equal(matchStep(p, code, now), null, `delta ${delta}`)
  }
  assert.equal(matchStep(p, '12345', now), null)
})

test('secondsLeft counts down within the step', () => {
  assert.equal(secondsLeft(0, 30), 30)
  assert.equal(secondsLeft(29_999, 30), 1)
  assert.equal(secondsLeft(30_000, 30), 30)
})

test('toBase32 is RFC 4648 base32 without padding, as otpauth encodes it, and parseSecret reads it back', () => {
  // RFC 4648 §10's vectors, padding removed.
  for (const [text, expected] of [
    ['', ''],
    ['f', 'MY'],
    ['fo', 'MZXQ'],
    ['foo', 'MZXW6'],
    ['foob', 'MZXW6YQ'],
    ['fooba', 'MZXW6YTB'],
    ['foobar', 'MZXW6YTBOI'],
  ] as const)
    assert.equal(toBase32(Buffer.from(text)), expected, text)
  for (let size = 1; size <= 64; size++) {
    const random = new Secret({ size })
    const bytes = Buffer.from(random.bytes)
    assert.equal(toBase32(bytes), random.base32.replace(/=+$/, ''), `${size} bytes`)
    assert.deepEqual(parseSecret(toBase32(bytes), 0), bytes, `${size} bytes round trip`)
  }
  assert.equal(toBase32(Buffer.alloc(20, 0xff)), '7'.repeat(32))
  assert.equal(toBase32(Buffer.alloc(20)), 'A'.repeat(32))
})

test('parseSecret takes any case, spaces and padding, and refuses short or non-base32 input', () => {
  const s = newSecret()
  assert.equal(s.byteLength, 20)
  assert.match(toBase32(s), /^[A-Z2-7]{32}$/)
  const spaced = `${toBase32(s)
    .toLowerCase()
    .replace(/(.{4})/g, '$1 ')}====`
  assert.deepEqual(parseSecret(spaced), s)
  for (let size = 10; size <= 64; size++) {
    const random = new Secret({ size })
    assert.deepEqual(parseSecret(random.base32), Buffer.from(random.bytes), `${size} bytes decode as otpauth encodes them`)
  }
  assert.equal(parseSecret('JBSWY3DPEHPK3PXPJBSWY3DPEHé'), null, 'non-ASCII')
  assert.deepEqual(parseSecret('LVJFKZI5AJZXIZKG'), Buffer.from('5d5255651d0273746546', 'hex'), "Renda.io's 80-bit secrets are taken by default")
  assert.equal(parseSecret('LVJFKZI5AJZXIZK'), null, '75 bits is too short')
  assert.equal(parseSecret('LVJFKZI5AJZXIZKG', 128), null, 'MIN_SECRET_BITS=128 refuses them')
  assert.equal(parseSecret('JBSWY3DPEHPK3PXPJBSWY3DPE1'), null, '1 is not base32')
  assert.notEqual(parseSecret('JBSWY3DPEHPK3PXPJBSWY3DPEH', 128), null, '26 characters = 130 bits')
})

test('canonicalKey is the key as HMAC uses it: trailing zero bytes dropped, long keys hashed first', () => {
  const s = Buffer.from('0102030405060708090a', 'hex')
  const padded = Buffer.concat([s, Buffer.alloc(3)])
  assert.deepEqual(canonicalKey(padded, 'SHA1'), s)
  assert.equal(codeAt(totpParams(padded), 1234), codeAt(totpParams(s), 1234), 'the same codes: the reason for the rule')
  assert.deepEqual(canonicalKey(Buffer.from('00ff00', 'hex'), 'SHA256'), Buffer.from('00ff', 'hex'), 'leading and inner zeros stay')
  const long = Buffer.alloc(100, 7)
  assert.deepEqual(canonicalKey(long, 'SHA1'), createHash('sha1').update(long).digest())
  assert.deepEqual(canonicalKey(long, 'SHA512'), long, "SHA-512's block is 128 bytes")
  assert.equal(codeAt(totpParams(long), 9), codeAt(totpParams(canonicalKey(long, 'SHA1')), 9))
})

test('otpauthUrl is a Key URI that otpauth parses back to the same parameters', () => {
  const p = totpParams(newSecret(), 'SHA256', 8, 60)
  const url = otpauthUrl('My App', 'jane doe@example.com', p)
  assert.ok(url.startsWith('otpauth://totp/My%20App:jane%20doe%40example.com?secret='), url)
  const parsed = URI.parse(url)
  assert.equal(parsed.issuer, 'My App')
  assert.equal(parsed.label, 'jane doe@example.com')
  assert.equal(parsed.secret.base32, toBase32(p.secret))
  assert.equal(parsed.algorithm, 'SHA256')
  assert.equal(parsed.digits, 8)
  assert.equal((parsed as { period?: number }).period, 60)
})
