/**
 * What the managed-factor tests share: creating and enrolling factors over HTTP, and codes
 * computed by the `otpauth` package (an independent implementation) from the secret the
 * creation answer showed.
 */
import assert from 'node:assert/strict'
import { Secret, TOTP } from 'otpauth'
import { post, type Running } from './helper.ts'

export interface Created {
  factorID: string
  secretKey: string
  otpURL: string
  QRCode: string
  expiresAt: string
  algorithm: string
  tokenLength: number
  tokenValidity: number
}

export const codeOf = (f: Pick<Created, 'secretKey' | 'algorithm' | 'tokenLength' | 'tokenValidity'>, at: number) =>
  new TOTP({ secret: Secret.fromBase32(f.secretKey), algorithm: f.algorithm, digits: f.tokenLength, period: f.tokenValidity }).generate({ timestamp: at })

export const path = (userId: string, rest = '') => `/totp/users/${encodeURIComponent(userId)}${rest}`

export async function createFactor(app: Running, userId: string, fields: Record<string, string> = {}, key = app.key): Promise<Created> {
  const res = await post(app.url, path(userId, '/factors'), key, { applicationID: 'Acme', ...fields })
  assert.equal(res.status, 201, await res.clone().text())
  return (await res.json()) as Created
}

export async function enroll(app: Running, userId: string, fields: Record<string, string> = {}): Promise<Created> {
  const f = await createFactor(app, userId, fields)
  const res = await post(app.url, path(userId, `/factors/${f.factorID}/activate`), app.key, { token: codeOf(f, app.clock.now()) })
  assert.equal(res.status, 200, await res.clone().text())
  return f
}

/** wrong gives a code of `digits` that matches none of `f`'s codes near `at`. */
export function wrong(f: Created, at: number): string {
  const taken = new Set([-2, -1, 0, 1, 2].map((d) => codeOf(f, at + d * f.tokenValidity * 1000)))
  for (let i = 0; ; i++) {
    const c = String(i).padStart(f.tokenLength, '0')
    if (!taken.has(c)) return c
  }
}
