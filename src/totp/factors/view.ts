/**
 * factorView: a factor under the public API's names (GET /totp/users/{userID}/factors), the
 * one spelling the public API, the admin API and the CLI all answer with.
 */
import type { FactorState } from '../../services/factors.ts'

export const factorView = (f: FactorState) => ({
  factorID: f.id,
  status: f.status,
  label: f.label,
  applicationID: f.applicationId,
  profile: f.profile,
  algorithm: f.algorithm,
  tokenLength: f.digits,
  tokenValidity: f.period,
  driftSteps: f.drift,
  createdAt: f.createdAt,
  activatedAt: f.activatedAt,
  expiresAt: f.expiresAt,
})
