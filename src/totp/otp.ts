/**
 * TOTP (RFC 6238) over HOTP (RFC 4226), computed by the `otpauth` package. Pure functions
 * of their inputs and the time: no HTTP, no storage.
 */
import { createHmac, createSecretKey, timingSafeEqual, type KeyObject } from 'node:crypto'
import { HOTP, Secret } from 'otpauth'
import type { Algorithm } from '../storage/ports.ts'

export const ALGORITHMS = ['SHA1', 'SHA256', 'SHA512'] as const satisfies readonly Algorithm[]
export const SECRET_BYTES = 20
export const MIN_SECRET_BYTES = 16
/** The steps either side of the current one that verification accepts (RFC 6238 §5.2). */
export const WINDOW = 1

export interface TotpParams {
  readonly secret: Secret
  /** The secret as a KeyObject: Node 24 computes HMACs far faster with one (see crypto/keyed.ts). */
  readonly key: KeyObject
  readonly algorithm: Algorithm
  readonly digits: number
  readonly period: number
}

export function totpParams(secret: Secret, algorithm: Algorithm = 'SHA1', digits = 6, period = 30): TotpParams {
  return { secret, key: createSecretKey(secret.bytes), algorithm, digits, period }
}

/** newSecret draws 160 random bits (RFC 4226 §4 recommends 160). */
export function newSecret(): Secret {
  return new Secret({ size: SECRET_BYTES })
}

/** parseSecret accepts base32 in any case, with spaces and padding; null when invalid or under 128 bits. */
export function parseSecret(input: string): Secret | null {
  const cleaned = input.replace(/[\s=]+/g, '').toUpperCase()
  if (!/^[A-Z2-7]+$/.test(cleaned)) return null
  const secret = Secret.fromBase32(cleaned)
  return secret.bytes.byteLength >= MIN_SECRET_BYTES ? secret : null
}

export function stepAt(nowMs: number, period: number): number {
  return Math.floor(nowMs / 1000 / period)
}

/** secondsLeft is how long the code of the current step stays current. */
export function secondsLeft(nowMs: number, period: number): number {
  return period - (Math.floor(nowMs / 1000) % period)
}

export function codeAt(params: TotpParams, step: number): string {
  return HOTP.generate({
    secret: params.secret, algorithm: params.algorithm, digits: params.digits, counter: step,
    hmac: (algorithm, _key, message) => createHmac(algorithm, params.key).update(message).digest(),
  })
}

export function currentCode(params: TotpParams, nowMs: number): { otp: string; expiresIn: number } {
  return { otp: codeAt(params, stepAt(nowMs, params.period)), expiresIn: secondsLeft(nowMs, params.period) }
}

/**
 * matchStep returns the time step whose code equals `token` within the window, or null.
 * Every candidate is computed and compared in constant time, with no early exit, so the
 * time taken does not depend on which step (if any) matched.
 */
export function matchStep(params: TotpParams, token: string, nowMs: number): number | null {
  const given = Buffer.from(token)
  const current = stepAt(nowMs, params.period)
  let matched: number | null = null
  for (let step = current - WINDOW; step <= current + WINDOW; step++) {
    const expected = Buffer.from(codeAt(params, step))
    if (expected.length === given.length && timingSafeEqual(expected, given) && matched === null) matched = step
  }
  return matched
}

/**
 * otpauthUrl is the Key URI (Google Authenticator format) that authenticator apps scan:
 * issuer and account in the label, issuer again as a parameter, `%20` for spaces.
 */
export function otpauthUrl(issuer: string, account: string, params: TotpParams): string {
  const e = encodeURIComponent
  return `otpauth://totp/${e(issuer)}:${e(account)}?secret=${params.secret.base32}&issuer=${e(issuer)}` +
    `&algorithm=${params.algorithm}&digits=${params.digits}&period=${params.period}`
}
