/**
 * The portal's second factor: the user's own TOTP secret (RFC 6238 with SHA-1, 6 digits and
 * 30 s steps, what Google Authenticator, 1Password and the rest scan) and single-use recovery
 * codes. The codes are checked by the same core and the same verification store as the API's
 * verifyOTP (src/totp): one step of drift either side, a step accepted once, and a lock after
 * repeated failures that holds across nodes. Nothing here writes a secret or a code to a log.
 */
import { randomBytes } from 'node:crypto'
import type { FastifyRequest } from 'fastify'
import type { Kit } from './kit.ts'
import type { LockPolicy } from '../domain/lockout.ts'
import type { User } from '../domain/portal.ts'
import { actorName, type AuditDraft } from '../domain/accounts.ts'
import { keyedDigest, type Pepper } from '../crypto/keyed.ts'
import { matchStep, newSecret, otpauthUrl, parseSecret, toBase32, totpParams } from '../totp/otp.ts'
import { verifyCode, type VerifyOutcome } from '../totp/verify.ts'
import { buildMatrix } from '../totp/qr/matrix.ts'
import { renderPng } from '../totp/qr/render.ts'

/** The issuer authenticator apps show beside the user's email. */
export const ISSUER = 'Tessera'
export const RECOVERY_CODE_COUNT = 10

/** policyOf: the API's lockout settings (OTP_MAX_FAILURES, OTP_LOCK_*), for sign-in codes as well. */
export function policyOf(kit: Kit): LockPolicy {
  const { config } = kit
  return { maxFailures: config.otpMaxFailures, baseSeconds: config.otpLockBaseSeconds, maxSeconds: config.otpLockMaxSeconds }
}

/** newTotpSecret: 160 random bits in base32, as kept in `user.totpSecret` and typed into an app. */
export function newTotpSecret(): string {
  return toBase32(newSecret())
}

/** grouped writes a secret in groups of four characters, easier to type from the screen. */
export function grouped(secret: string): string {
  return secret.replace(/(.{4})(?=.)/g, '$1 ')
}

/** enrolmentUrl: the otpauth:// URL an authenticator app scans (issuer Tessera, the user's email as label). */
export function enrolmentUrl(user: User, secret: string): string {
  return otpauthUrl(ISSUER, user.email, totpParams(parseSecret(secret, 0)!))
}

/** qrDataUrl: the QR code of a text as a data: PNG (the portal's CSP allows `img-src data:`), or null when it does not fit. */
export function qrDataUrl(text: string): string | null {
  const matrix = buildMatrix(text, 'M')
  if (matrix === null) return null
  const margin = 4
  const png = renderPng(matrix, { size: (matrix.size + 2 * margin) * 5, margin, color: [0, 0, 0, 255], background: [255, 255, 255, 255] })
  return `data:image/png;base64,${png.toString('base64')}`
}

/**
 * lockKey names the verification record (replay and lockout) of a user's secret: sign-in,
 * enrolment and recovery codes share it, so a code works once whatever form it is typed
 * into, and one lock covers every guess. The secret is part of it so that a new secret
 * (two-factor turned off and on again) does not inherit the old one's last accepted step.
 */
function lockKey(kit: Kit, userId: string, secret: string): string {
  return keyedDigest(kit.pepper, 'portal-2fa', userId, secret)
}

/** checkTotp checks a code from the user's app against `secret`, once per step, under the lock. */
export async function checkTotp(kit: Kit, userId: string, secret: string, input: string): Promise<VerifyOutcome> {
  const code = input.replace(/\s+/g, '')
  const t = kit.now()
  const params = totpParams(parseSecret(secret, 0)!)
  const match = /^\d{6}$/.test(code) ? matchStep(params, code, t) : null
  return verifyCode(kit.store.verification, policyOf(kit), lockKey(kit, userId, secret), match, t)
}

/**
 * checkRecoveryCode uses one of the user's recovery codes, under the same lock as their
 * TOTP codes. A recovery code has no time step to settle with, so each attempt is counted
 * as a failure before the code is looked at (a locked user's code is never tried, so never
 * spent), and a right code then ends the run of failures.
 */
export async function checkRecoveryCode(kit: Kit, user: User, input: string): Promise<VerifyOutcome> {
  const key = lockKey(kit, user.id, user.totpSecret ?? '')
  const counted = await verifyCode(kit.store.verification, policyOf(kit), key, null, kit.now())
  if (counted.kind === 'locked') return counted
  const code = normalRecoveryCode(input)
  if (code === null || !(await kit.store.portal.useRecoveryCode(user.id, recoveryCodeHash(kit.pepper, user.id, code)))) return { kind: 'invalid' }
  await kit.store.verification.clear(key)
  return { kind: 'accepted' }
}

/** newRecoveryCodes: 10 codes of 40 random bits each, written `xxxx-xxxx` in lower-case base32. */
export function newRecoveryCodes(): string[] {
  return Array.from({ length: RECOVERY_CODE_COUNT }, () => {
    const code = toBase32(randomBytes(5)).toLowerCase()
    return `${code.slice(0, 4)}-${code.slice(4)}`
  })
}

/** normalRecoveryCode: a typed recovery code in one spelling (any case, with or without the dash and spaces), or null. */
function normalRecoveryCode(input: string): string | null {
  const code = input.replace(/[\s-]+/g, '').toUpperCase()
  return /^[A-Z2-7]{8}$/.test(code) ? code : null
}

/**
 * recoveryCodeHash is what the store keeps of a recovery code: a SHA-256 HMAC under the
 * pepper (40 bits would not resist a search through a plain hash of a leaked table).
 */
export function recoveryCodeHash(pepper: Pepper, userId: string, code: string): string {
  return keyedDigest(pepper, 'portal-recovery-code', userId, normalRecoveryCode(code) ?? '')
}

/** storeRecoveryCodes makes a user's new recovery codes, replacing the old ones; gives them, to show once. */
export async function storeRecoveryCodes(kit: Kit, userId: string): Promise<string[]> {
  const codes = newRecoveryCodes()
  await kit.store.portal.setRecoveryCodes(userId, codes.map((c) => recoveryCodeHash(kit.pepper, userId, c)))
  return codes
}

/** userDraft: an audit event of a user's own change (no account: the user's, as updateUser records it). */
export function userDraft(request: FastifyRequest, user: User, action: string, detail: Record<string, unknown> = {}): AuditDraft {
  return { actor: actorName({ type: 'portal-user', id: user.id }), action, target: { type: 'user', id: user.id }, accountId: null, ip: request.ip, outcome: 'success', detail }
}

/** auditUser records a user's event in each of their accounts (so each account's audit page shows it), or once with none (auth.ts's sign-ins and sign-outs too). */
export async function auditUser(kit: Kit, request: FastifyRequest, user: User, action: string, outcome: 'success' | 'failure', detail: Record<string, unknown>): Promise<void> {
  const draft: AuditDraft = { ...userDraft(request, user, action, detail), outcome }
  const accounts = (await kit.store.portal.membershipsOf(user.id)).slice(0, 20)
  if (accounts.length === 0) await kit.store.audit.append(draft)
  for (const m of accounts) await kit.store.audit.append({ ...draft, accountId: m.accountId })
}

/** waitWords: how long to wait, in words ("45 seconds", "2 minutes"). */
export function waitWords(seconds: number): string {
  if (seconds < 90) return `${seconds} second${seconds === 1 ? '' : 's'}`
  const minutes = Math.ceil(seconds / 60)
  return minutes < 120 ? `${minutes} minutes` : `${Math.ceil(minutes / 60)} hours`
}
