/**
 * What an imported secret is read from: a base32 secret with the parameters given beside it,
 * or an otpauth:// Key URI (the format authenticator apps scan), whose algorithm, digits,
 * period and issuer it carries. No HTTP, no store; the secret never leaves but in `params`.
 * Read with the WHATWG URL parser: a Key URI is a URL, and its label and parameters are
 * percent-encoded as any URL's.
 */
import type { Algorithm } from '../../domain/accounts.ts'
import type { Problem } from '../../errors/errors.ts'
import { ALGORITHMS, parseSecret } from '../otp.ts'
import { PROFILES, profileProblems, resolveProfile, type ProfileName } from '../profiles.ts'
import { totpParams, type TotpParams } from '../otp.ts'

/** What the caller gives for one imported factor. */
export interface ImportSource {
  /** base32 */
  readonly secret?: string
  readonly otpURL?: string
  /** The issuer; taken from the URI when left out. */
  readonly applicationId?: string
  /** The issuer when neither applicationId nor the URI gives one (a bulk import's default). */
  readonly fallbackApplicationId?: string
  readonly algorithm?: Algorithm
  readonly digits?: number
  readonly period?: number
  readonly profile: ProfileName
}

export interface ReadSecret {
  readonly params: TotpParams
  readonly applicationId: string
}

const DIGITS = { min: 6, max: 10 }
const PERIOD = { min: 15, max: 3600 }
/** What an issuer may be (the factors' applicationID rule: no ':' or control character, not blank). */
const ISSUER = /^[^:\u0000-\u001f\u007f]*[^:\s\u0000-\u001f\u007f][^:\u0000-\u001f\u007f]*$/

const invalidUrl = (reason: string): Problem[] => [{ code: 'OTP_URL_INVALID', params: { reason } }]

/** readSecret: the secret and parameters of an import, or the problems that refuse it. */
export function readSecret(source: ImportSource, minBits: number): ReadSecret | Problem[] {
  if ((source.secret === undefined) === (source.otpURL === undefined)) return [{ code: 'IMPORT_SOURCE_REQUIRED' }]
  let secret: Buffer | null
  let issuer = source.applicationId
  let requested = { algorithm: source.algorithm, digits: source.digits, period: source.period }
  if (source.secret !== undefined) {
    secret = parseSecret(source.secret, minBits)
    if (secret === null) return [{ code: 'SECRET_INVALID', params: { bits: minBits, chars: Math.ceil(minBits / 5) } }]
  } else {
    const read = readKeyUri(source.otpURL!, minBits)
    if (!('secret' in read)) return read
    secret = read.secret
    issuer ??= read.issuer
    // What the URI says wins over nothing; a parameter given beside it must agree with it.
    for (const field of ['algorithm', 'digits', 'period'] as const) {
      const given = source[field]
      if (given !== undefined && read[field] !== undefined && given !== read[field]) {
        return invalidUrl(`its ${field} (${read[field]}) is not the ${field} given beside it (${given})`)
      }
    }
    requested = { algorithm: read.algorithm ?? source.algorithm, digits: read.digits ?? source.digits, period: read.period ?? source.period }
  }
  issuer ??= source.fallbackApplicationId
  if (issuer === undefined) return [{ code: 'APPLICATION_ID_REQUIRED' }]
  if (!ISSUER.test(issuer) || [...issuer].length > 256) return [{ code: 'APPLICATION_ID_INVALID' }]
  // A URI without parameters means what apps take it to mean: SHA1, 6 digits, 30 s (not the profile's defaults).
  const resolved = resolveProfile(PROFILES[source.profile], {
    algorithm: requested.algorithm ?? 'SHA1',
    digits: requested.digits ?? 6,
    period: requested.period ?? 30,
  })
  if (resolved.kind === 'unsupported') return profileProblems(resolved)
  return { params: totpParams(secret, resolved.algorithm, resolved.digits, resolved.period), applicationId: issuer }
}

interface KeyUri {
  readonly secret: Buffer
  readonly issuer?: string
  readonly algorithm?: Algorithm
  readonly digits?: number
  readonly period?: number
}

/** readKeyUri reads an otpauth://totp/ URI (Google Authenticator's Key URI Format). */
function readKeyUri(text: string, minBits: number): KeyUri | Problem[] {
  if (text.length > 4096) return invalidUrl('it is longer than 4096 characters')
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return invalidUrl('it is not a URI')
  }
  if (url.protocol !== 'otpauth:') return invalidUrl('its scheme is not otpauth')
  if (url.host === 'hotp') return invalidUrl('it is an HOTP (counter) secret: only TOTP is taken')
  if (url.host !== 'totp') return invalidUrl('its type is not totp')
  const q = url.searchParams
  for (const name of ['secret', 'issuer', 'algorithm', 'digits', 'period']) {
    if (q.getAll(name).length > 1) return invalidUrl(`it has ${name} twice`)
  }
  const secret = parseSecret(q.get('secret') ?? '', minBits)
  if (secret === null) return invalidUrl(`its secret is missing or not base32 of at least ${minBits} bits`)
  let label: string
  try {
    label = decodeURIComponent(url.pathname.replace(/^\//, ''))
  } catch {
    return invalidUrl('its label is not percent-encoded UTF-8')
  }
  // "Issuer:account": the issuer parameter, else the label's prefix.
  const colon = label.indexOf(':')
  const issuer = q.get('issuer') ?? (colon > 0 ? label.slice(0, colon).trim() : undefined)
  const algorithm = q.get('algorithm')?.toUpperCase()
  if (algorithm !== undefined && !(ALGORITHMS as readonly string[]).includes(algorithm))
    return invalidUrl(`its algorithm ${algorithm} is not SHA1, SHA256 or SHA512`)
  const digits = whole(q.get('digits'))
  if (digits === null || (digits !== undefined && (digits < DIGITS.min || digits > DIGITS.max))) return invalidUrl('its digits are not 6 to 10')
  const period = whole(q.get('period'))
  if (period === null || (period !== undefined && (period < PERIOD.min || period > PERIOD.max))) return invalidUrl('its period is not 15 to 3600 seconds')
  return {
    secret,
    ...(issuer === undefined || issuer === '' ? {} : { issuer }),
    ...(algorithm === undefined ? {} : { algorithm: algorithm as Algorithm }),
    ...(digits === undefined ? {} : { digits }),
    ...(period === undefined ? {} : { period }),
  }
}

/** whole: a parameter's whole number; undefined when absent, null when it is not one. */
function whole(value: string | null): number | undefined | null {
  if (value === null) return undefined
  return /^[0-9]{1,6}$/.test(value) ? Number(value) : null
}
