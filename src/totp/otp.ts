/**
 * TOTP (RFC 6238) over HOTP (RFC 4226), on Node's hash functions (crypto/hmac.ts). Pure
 * functions of their inputs and the time: no HTTP, no storage.
 */
import { hash, randomBytes } from 'node:crypto'
import { hmacBytes } from '../crypto/hmac.ts'
import type { Algorithm } from '../domain/accounts.ts'

export const ALGORITHMS = ['SHA1', 'SHA256', 'SHA512'] as const satisfies readonly Algorithm[]
export const SECRET_BYTES = 20
/**
 * The weakest secret getOTP and verifyOTP take by default: 80 bits (16 base32 characters),
 * what Renda.io issued and many authenticator set-ups of its time did. RFC 4226 asks for
 * 128; MIN_SECRET_BITS lets an operator refuse weaker secrets. We issue 160.
 */
export const MIN_SECRET_BITS = 80

export interface TotpParams {
  readonly secret: Buffer
  readonly algorithm: Algorithm
  readonly digits: number
  readonly period: number
}

export function totpParams(secret: Buffer, algorithm: Algorithm = 'SHA1', digits = 6, period = 30): TotpParams {
  return { secret, algorithm, digits, period }
}

/** newSecret draws 160 random bits (RFC 4226 §4 recommends 160). */
export function newSecret(): Buffer {
  return randomBytes(SECRET_BYTES)
}

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567'

/**
 * toBase32 is RFC 4648 base32, upper case, without padding (what authenticator apps expect).
 * One pass over the bytes: it runs for every fingerprint of a secret (getOTP and verifyOTP
 * when a record is not cached), where building an otpauth Secret cost 3.5 µs.
 */
export function toBase32(secret: Uint8Array): string {
  let out = ''
  let value = 0
  let bits = 0
  for (let i = 0; i < secret.length; i++) {
    value = ((value << 8) | secret[i]!) & 0xfff
    bits += 8
    while (bits >= 5) {
      bits -= 5
      out += ALPHABET[(value >>> bits) & 31]
    }
  }
  return bits > 0 ? out + ALPHABET[(value << (5 - bits)) & 31] : out
}

/** Base32 value of each ASCII code, -1 for letters outside the alphabet, -2 for the ignored ones. */
const BASE32 = new Int8Array(128).fill(-1)
for (const [i, c] of [...'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567'].entries()) {
  BASE32[c.charCodeAt(0)] = i
  BASE32[c.toLowerCase().charCodeAt(0)] = i
}
for (const c of ' \t\r\n=') BASE32[c.charCodeAt(0)] = -2

/**
 * parseSecret decodes base32 in any case, ignoring spaces and padding; null when a
 * character is not base32 or the secret has fewer than `minBits` bits. One pass, no regular
 * expression and no exception: it runs on every getOTP and verifyOTP.
 */
export function parseSecret(input: string, minBits = MIN_SECRET_BITS): Buffer | null {
  const out = Buffer.allocUnsafe(Math.floor((input.length * 5) / 8))
  let bits = 0
  let value = 0
  let n = 0
  for (let i = 0; i < input.length; i++) {
    const code = input.charCodeAt(i)
    const v = code < 128 ? BASE32[code]! : -1
    if (v === -2) continue
    if (v === -1) return null
    value = ((value << 5) | v) & 0xfff
    bits += 5
    if (bits >= 8) {
      bits -= 8
      out[n++] = value >>> bits
    }
  }
  return n * 8 >= minBits ? out.subarray(0, n) : null
}

const BLOCK_BYTES = { SHA1: 64, SHA256: 64, SHA512: 128 } as const
const HASH = { SHA1: 'sha1', SHA256: 'sha256', SHA512: 'sha512' } as const

/**
 * canonicalKey is the secret as HMAC (RFC 2104) uses it: hashed when longer than the hash's
 * block, then without trailing zero bytes (HMAC pads the key with zeros, so `S` and `S` plus
 * zero bytes give the same codes). Verification state and fingerprints are made from it, so
 * that such spellings of one secret share one lockout and one replay record.
 */
export function canonicalKey(secret: Buffer, algorithm: Algorithm): Buffer {
  const key = secret.length > BLOCK_BYTES[algorithm] ? hash(HASH[algorithm], secret, 'buffer') : secret
  let end = key.length
  while (end > 0 && key[end - 1] === 0) end--
  return key.subarray(0, end)
}

export function stepAt(nowMs: number, period: number): number {
  return Math.floor(nowMs / 1000 / period)
}

/** secondsLeft is how long the code of the current step stays current. */
export function secondsLeft(nowMs: number, period: number): number {
  return period - (Math.floor(nowMs / 1000) % period)
}

/** The counter of codeAt, big-endian (RFC 4226 §5.2), rewritten by every call. */
const COUNTER = new Uint8Array(8)

/**
 * codeAt is HOTP (RFC 4226 §5.3) of the secret at a time step: HMAC of the 8-byte counter,
 * dynamic truncation, the last `digits` decimal digits. Written out rather than through
 * otpauth's HOTP.generate, which makes an ArrayBuffer for the counter on every call (about
 * 1 µs on its own here, see crypto/hmac.ts) and a closure to hand it our HMAC: getOTP makes
 * one code, verifyOTP up to three. The RFC vectors and otpauth itself check it (otp.test.ts).
 */
export function codeAt(params: TotpParams, step: number): string {
  let high = Math.floor(step / 2 ** 32)
  let low = step >>> 0
  for (let i = 3; i >= 0; i--) {
    COUNTER[i] = high & 0xff
    high = Math.floor(high / 256)
    COUNTER[i + 4] = low & 0xff
    low >>>= 8
  }
  const mac = hmacBytes(HASH[params.algorithm], params.secret, COUNTER)
  const offset = mac[mac.length - 1]! & 0xf
  const binary = ((mac[offset]! & 0x7f) << 24) | (mac[offset + 1]! << 16) | (mac[offset + 2]! << 8) | mac[offset + 3]!
  return String(binary % 10 ** params.digits).padStart(params.digits, '0')
}

export function currentCode(params: TotpParams, nowMs: number): { otp: string; expiresIn: number } {
  return { otp: codeAt(params, stepAt(nowMs, params.period)), expiresIn: secondsLeft(nowMs, params.period) }
}

/** sameCode compares two codes of the same length in time that does not depend on where they differ. */
function sameCode(a: string, b: string): boolean {
  let diff = 0
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i)
  return diff === 0
}

/**
 * matchStep returns the time step whose code equals `token` within the window, or null.
 * Each comparison is constant-time. The current step is tried first and the search stops
 * at a match: a wrong code always costs all three candidates, so timing tells an attacker
 * nothing that the answer does not.
 */
export function matchStep(params: TotpParams, token: string, nowMs: number): number | null {
  if (token.length !== params.digits) return null
  const current = stepAt(nowMs, params.period)
  if (sameCode(codeAt(params, current), token)) return current
  if (sameCode(codeAt(params, current - 1), token)) return current - 1
  if (sameCode(codeAt(params, current + 1), token)) return current + 1
  return null
}

/**
 * otpauthUrl is the Key URI (Google Authenticator format) that authenticator apps scan:
 * issuer and account in the label, issuer again as a parameter, `%20` for spaces.
 */
export function otpauthUrl(issuer: string, account: string, params: TotpParams): string {
  const e = encodeURIComponent
  return (
    `otpauth://totp/${e(issuer)}:${e(account)}?secret=${toBase32(params.secret)}&issuer=${e(issuer)}` +
    `&algorithm=${params.algorithm}&digits=${params.digits}&period=${params.period}`
  )
}
