/**
 * What the portal's pages show of two-factor sign-in: the enrolment URL and its QR code, a
 * secret in groups, and waits in words. The rules (codes, recovery codes, the lock) are the
 * users service's (services/users/codes.ts). Nothing here writes a secret or a code to a log.
 */
import type { User } from '../../domain/portal.ts'
import { otpauthUrl, parseSecret, totpParams } from '../../totp/otp.ts'
import { buildMatrix } from '../../totp/qr/matrix.ts'
import { renderPng } from '../../totp/qr/render.ts'

export { RECOVERY_CODE_COUNT } from '../../services/users/codes.ts'

/** The issuer authenticator apps show beside the user's email. */
export const ISSUER = 'Tessera'

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

/** waitWords: how long to wait, in words ("45 seconds", "2 minutes"). */
export function waitWords(seconds: number): string {
  if (seconds < 90) return `${seconds} second${seconds === 1 ? '' : 's'}`
  const minutes = Math.ceil(seconds / 60)
  return minutes < 120 ? `${minutes} minutes` : `${Math.ceil(minutes / 60)} hours`
}
