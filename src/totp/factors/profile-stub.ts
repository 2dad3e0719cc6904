/** Temporary: the compatibility profiles land from totp/profiles.ts. */
import type { Algorithm } from '../../storage/ports.ts'

export const PROFILE_NAMES = ['universal', 'any'] as const

export function resolveProfile(profile: string, asked: { algorithm?: string | undefined; digits?: number | undefined; period?: number | undefined }):
  { profile: string; algorithm: Algorithm; digits: number; period: number } | { app: string; failure: string } {
  const algorithm = (asked.algorithm ?? 'SHA1') as Algorithm
  const digits = asked.digits ?? 6
  const period = asked.period ?? 30
  if (profile === 'universal' && (algorithm !== 'SHA1' || digits !== 6 || period !== 30)) return { app: 'Every authenticator app', failure: 'parameters other than SHA1, 6 digits, 30 s' }
  return { profile, algorithm, digits, period }
}
