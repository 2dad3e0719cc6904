/**
 * factorView: a factor under the public API's names (GET /totp/users/{userID}/factors), the
 * one spelling the public API, the admin API and the CLI all answer with. A TOTP factor keeps
 * the fields it always had; a passkey has its own (never its credential ID or public key).
 */
import type { FactorState } from '../../services/factors.ts'

export function factorView(f: FactorState) {
  const common = {
    factorID: f.id,
    status: f.status,
    label: f.label,
    applicationID: f.applicationId,
  }
  const times = { createdAt: f.createdAt, activatedAt: f.activatedAt, expiresAt: f.expiresAt }
  if (f.type === 'passkey') {
    const { deviceType, backedUp, transports, algorithm } = f.meta
    return { ...common, type: 'passkey' as const, algorithm, passkey: { deviceType, backedUp, transports: [...transports], signCount: f.signCount }, ...times }
  }
  return {
    ...common,
    type: 'totp' as const,
    profile: f.profile,
    algorithm: f.algorithm,
    tokenLength: f.digits,
    tokenValidity: f.period,
    driftSteps: f.drift,
    ...times,
  }
}
