/**
 * Compatibility profiles: the TOTP parameters each authenticator app really reads from an
 * otpauth URL, so that a secret is never issued with parameters the user's app would
 * silently replace by SHA1/6/30 (most apps accept the QR code and then show wrong codes).
 * Where sources disagree, a profile keeps the set every source agrees on; docs/guide.md,
 * "Compatibility profiles", gives the table with its sources. Pure: no HTTP, no storage.
 */
import type { Algorithm } from '../domain/accounts.ts'
import type { Problem } from '../errors/errors.ts'

/** Allowed: the values of one parameter an app reads, as a list or an inclusive range. */
export type Allowed = readonly number[] | { readonly min: number; readonly max: number }

export interface Profile {
  /** app is the name the client's users know, used in refusals. */
  readonly app: string
  readonly algorithms: readonly Algorithm[]
  readonly digits: Allowed
  readonly periods: Allowed
  readonly defaults: { readonly algorithm: Algorithm; readonly digits: number; readonly period: number }
  readonly notes: string
  readonly sources: readonly string[]
}

/** What every app does with a parameter the URL leaves out (Key Uri Format), and so every profile's default. */
const DEFAULTS = { algorithm: 'SHA1', digits: 6, period: 30 } as const
const ALL: readonly Algorithm[] = ['SHA1', 'SHA256', 'SHA512']
/** The service's own limits (the onboardUser schema; a unit test keeps them equal). */
const SERVICE_DIGITS = { min: 6, max: 10 } as const
const SERVICE_PERIODS = { min: 15, max: 3600 } as const

const KEY_URI = 'https://github.com/google/google-authenticator/wiki/Key-Uri-Format'
const MARIER_2025 = 'http://referrer.fmarier.org/posts/totp-in-2025'
const KEYCLOAK_OTP = 'https://github.com/keycloak/keycloak/blob/main/services/src/main/java/org/keycloak/authentication/otp'
const GIST_2022 = 'https://gist.github.com/gwelch-contegix/afa52c7b45693a19c198ab0bfb886fe2'

export const PROFILES = {
  universal: {
    app: 'The universal profile',
    algorithms: ['SHA1'],
    digits: [6],
    periods: [30],
    defaults: DEFAULTS,
    notes: 'What every app reads, old or new; the default for managed factors.',
    sources: [KEY_URI, `${KEYCLOAK_OTP}/MicrosoftAuthenticatorOTPProvider.java`, MARIER_2025],
  },
  google: {
    app: 'Google Authenticator',
    algorithms: ALL,
    digits: [6, 8],
    periods: [30],
    defaults: DEFAULTS,
    notes:
      'Current versions (Android 6.x and later, iOS) read algorithm and digits; Android versions before 2023 silently used SHA1/6/30. No source shows a period other than 30 working. iOS needs the algorithm in upper case (we always send it so).',
    sources: [
      'https://github.com/keycloak/keycloak/pull/27351',
      `${KEYCLOAK_OTP}/GoogleAuthenticatorProvider.java`,
      'https://github.com/privacyidea/privacyidea/issues/2079',
      'https://github.com/eduMFA/eduMFA/issues/234',
      KEY_URI,
      MARIER_2025,
    ],
  },
  microsoft: {
    app: 'Microsoft Authenticator',
    algorithms: ['SHA1'],
    digits: [6],
    periods: [30],
    defaults: DEFAULTS,
    notes: "For accounts other than Microsoft's it ignores algorithm and period (it shows SHA1, 30 s codes).",
    sources: [
      `${KEYCLOAK_OTP}/MicrosoftAuthenticatorOTPProvider.java`,
      'https://github.com/keycloak/keycloak/pull/27351',
      'https://github.com/privacyidea/privacyidea/issues/2079',
      MARIER_2025,
    ],
  },
  authy: {
    app: 'Twilio Authy',
    algorithms: ['SHA1'],
    digits: [6, 8],
    periods: [30],
    defaults: DEFAULTS,
    notes: 'Treats SHA256 as SHA1; 8 digits work; a 60 s period does not. Its own 7-digit, 10 s tokens are not otpauth URLs.',
    sources: [
      MARIER_2025,
      'https://github.com/BrandonPotter/GoogleAuthenticator/pull/198',
      'https://github.com/privacyidea/privacyidea/issues/1156',
      GIST_2022,
    ],
  },
  duo: {
    app: 'Duo Mobile',
    algorithms: ['SHA1'],
    digits: [6],
    periods: [30],
    defaults: DEFAULTS,
    notes: 'Treats SHA256 as SHA1. No source confirms other digits or periods, so only the defaults are promised.',
    sources: [MARIER_2025, 'https://github.com/sec51/twofactor/issues/11'],
  },
  '2fas': {
    app: '2FAS Auth',
    algorithms: ALL,
    digits: [6, 8],
    periods: [30],
    defaults: DEFAULTS,
    notes: 'SHA1, SHA256 and SHA512 with 6 or 8 digits tested on Android and iOS; other periods are not confirmed.',
    sources: [
      GIST_2022,
      'https://github.com/privacyidea/privacyidea/issues/3812',
      'https://github.com/twofas/2fas-android/blob/main/services/domain/src/main/java/com/twofasapp/services/domain/otp/OtpData.kt',
    ],
  },
  freeotp: {
    app: 'FreeOTP',
    algorithms: ALL,
    digits: [6, 8],
    periods: SERVICE_PERIODS,
    defaults: DEFAULTS,
    notes: "Refuses a URL with digits other than 6 or 8 (the 2.0 rewrite's URI.md says 6 to 9; we keep 6 or 8). Any period.",
    sources: [
      'https://github.com/freeotp/freeotp-android/blob/master/app/src/main/java/org/fedorahosted/freeotp/Token.java',
      'https://github.com/freeotp/freeotp-android/blob/master/URI.md',
      `${KEYCLOAK_OTP}/FreeOTPProvider.java`,
    ],
  },
  aegis: {
    app: 'Aegis Authenticator',
    algorithms: ALL,
    digits: SERVICE_DIGITS,
    periods: SERVICE_PERIODS,
    defaults: DEFAULTS,
    notes: 'SHA1, SHA256, SHA512; 1 to 10 digits; any period.',
    sources: [
      'https://github.com/beemdevelopment/Aegis/blob/master/app/src/main/java/com/beemdevelopment/aegis/otp/OtpInfo.java',
      'https://github.com/beemdevelopment/Aegis/blob/master/app/src/main/java/com/beemdevelopment/aegis/otp/TotpInfo.java',
      `${KEYCLOAK_OTP}/AegisProvider.java`,
    ],
  },
  bitwarden: {
    app: 'Bitwarden',
    algorithms: ALL,
    digits: SERVICE_DIGITS,
    periods: SERVICE_PERIODS,
    defaults: DEFAULTS,
    notes:
      'Password manager and Bitwarden Authenticator: SHA1, SHA256, SHA512; 1 to 10 digits; any period. The password manager shows codes only to Premium users.',
    sources: ['https://github.com/bitwarden/clients/blob/main/libs/common/src/vault/services/totp.service.ts', MARIER_2025],
  },
  keepassxc: {
    app: 'KeePassXC',
    algorithms: ALL,
    digits: { min: 6, max: 9 },
    periods: { min: 15, max: 60 },
    defaults: DEFAULTS,
    notes: 'Clamps the period to 60 s at most, and computes 10-digit codes in a 32-bit number (wrong codes), so 6 to 9 digits.',
    sources: ['https://github.com/keepassxreboot/keepassxc/blob/develop/src/totp/totp.cpp'],
  },
  any: {
    app: 'This service',
    algorithms: ALL,
    digits: SERVICE_DIGITS,
    periods: SERVICE_PERIODS,
    defaults: DEFAULTS,
    notes: 'No app promise: every parameter the service accepts.',
    sources: [],
  },
} as const satisfies Record<string, Profile>

export type ProfileName = keyof typeof PROFILES
/** PROFILE_NAMES, for a schema enum. */
export const PROFILE_NAMES = Object.keys(PROFILES) as ProfileName[]

export function isProfileName(name: string): name is ProfileName {
  return Object.hasOwn(PROFILES, name)
}

export interface Requested {
  readonly algorithm?: Algorithm
  readonly digits?: number
  readonly period?: number
}

/** Unsupported names one parameter outside a profile, in the API's field names. */
export interface Unsupported {
  readonly field: 'algorithm' | 'tokenLength' | 'tokenValidity'
  readonly value: string
  readonly supported: string
}

export type Resolution =
  | { readonly kind: 'ok'; readonly algorithm: Algorithm; readonly digits: number; readonly period: number }
  | { readonly kind: 'unsupported'; readonly app: string; readonly problems: readonly Unsupported[] }

function allows(allowed: Allowed, value: number): boolean {
  return 'min' in allowed ? value >= allowed.min && value <= allowed.max : allowed.includes(value)
}

/** describe says which values are read: "SHA1 only", "6 or 8 digits", "15 to 60 seconds". */
function describe(allowed: Allowed | readonly string[], unit: string): string {
  const suffix = unit === '' ? '' : ` ${unit}`
  if ('min' in allowed) return `${allowed.min} to ${allowed.max}${suffix}`
  const values: readonly (string | number)[] = allowed
  if (values.length === 1) return `${values[0]}${suffix} only`
  return `${values.slice(0, -1).join(', ')} or ${values.at(-1)}${suffix}`
}

/**
 * profileSummary: what each profile allows, in one line, for the API's own reference: its
 * readers have the server, not the guide's table (which adds the notes and sources).
 */
export function profileSummary(): string {
  return Object.entries(PROFILES)
    .map(([name, p]) => {
      const who = name === 'universal' ? 'every app' : name === 'any' ? 'no app promised' : p.app
      return `\`${name}\` (${who}): ${describe(p.algorithms, '')}; ${describe(p.digits, 'digits')}; ${describe(p.periods, 's')}`
    })
    .join('. ')
}

/**
 * resolveProfile gives the parameters to issue under a profile: each requested one when
 * the app reads it, the profile's default where the request leaves it out. A parameter
 * outside the profile is an expected outcome (data), one entry per parameter.
 */
export function resolveProfile(profile: Profile, requested: Requested): Resolution {
  const algorithm = requested.algorithm ?? profile.defaults.algorithm
  const digits = requested.digits ?? profile.defaults.digits
  const period = requested.period ?? profile.defaults.period
  const problems: Unsupported[] = []
  if (!profile.algorithms.includes(algorithm)) {
    problems.push({ field: 'algorithm', value: algorithm, supported: describe(profile.algorithms, '') })
  }
  if (!allows(profile.digits, digits)) {
    problems.push({ field: 'tokenLength', value: String(digits), supported: describe(profile.digits, 'digits') })
  }
  if (!allows(profile.periods, period)) {
    problems.push({ field: 'tokenValidity', value: String(period), supported: describe(profile.periods, 'seconds') })
  }
  return problems.length === 0 ? { kind: 'ok', algorithm, digits, period } : { kind: 'unsupported', app: profile.app, problems }
}

/** profileProblems turns a refusal into catalogue problems, one per parameter (PROFILE_UNSUPPORTED). */
export function profileProblems(refusal: Extract<Resolution, { kind: 'unsupported' }>): Problem[] {
  return refusal.problems.map((p) => ({
    code: 'PROFILE_UNSUPPORTED',
    params: { app: refusal.app, field: p.field, value: p.value, supported: p.supported },
  }))
}
