/**
 * Route schemas of the managed factors (/totp/users/{userID}/…): they validate requests, drive
 * the serialisers (no field leaves that is not listed: the secret only in the creation answer)
 * and generate the OpenAPI document.
 */
import { Type } from 'typebox'
import type { FieldRules } from '../../errors/plugin.ts'
import { errorResponses } from '../../openapi/responses.ts'
import { IDEMPOTENCY_CODES, IDEMPOTENCY_HEADERS } from '../../http/idempotency.ts'
import { ALGORITHMS } from '../otp.ts'
import { profileRule } from '../schemas.ts'
import { MAX_USER_ID_INPUT, USER_ID_RULE } from '../../domain/user-ids.ts'

/** Text of at most 256 characters, not blank, without ':' (the otpauth label's separator) or control characters (PostgreSQL refuses NUL). */
export const TEXT_ID = '^[^:\\u0000-\\u001f\\u007f]*[^:\\s\\u0000-\\u001f\\u007f][^:\\u0000-\\u001f\\u007f]*$'
// The rule is the domain's (canonicalUserId, applied before validation): here only a bound on the work.
const userParam = Type.String({
  maxLength: MAX_USER_ID_INPUT,
  description: `Your own identifier of the user, percent-encoded in the path: ${USER_ID_RULE}. Users are the calling account's own: another account never sees them.`,
})
const factorParam = Type.String({ maxLength: 64, description: "The factor's id, `fct_…`." })
const userParams = Type.Object({ userID: userParam })
const factorParams = Type.Object({ userID: userParam, factorID: factorParam })
const token = Type.String({ pattern: '^[0-9]{6,10}$', description: 'The code the authenticator app shows.' })
/** An optional key the caller's attempts are limited by across the account's users (the end user's IP, say), besides the user's own limit. */
export const rateLimitKey = Type.Optional(
  Type.String({
    minLength: 1,
    maxLength: 256,
    pattern: '^[^\\u0000-\\u001f\\u007f]*$',
    description:
      "Optional: what else to limit attempts by, across the account's users (the end user's IP address, say): at most the account's key limit per window (FACTOR_KEY_LIMIT), besides the user's own (FACTOR_USER_LIMIT). Kept only as a keyed digest.",
  }),
)
const rateRule = { rateLimitKey: { invalid: 'RATE_LIMIT_KEY_INVALID' } } as const
const FORMS = ['application/x-www-form-urlencoded', 'application/json', 'multipart/form-data']

export const userFields: FieldRules = { userID: { invalid: 'USER_ID_INVALID' } }
const withUser = (rules: FieldRules): FieldRules => ({ ...userFields, ...rules })

/** A factor as the lists show it: the example of the public and the admin references. */
export const FACTOR_EXAMPLE = {
  factorID: 'fct_5b0c9e2a7d41f386',
  type: 'totp',
  status: 'active',
  label: 'Work phone',
  applicationID: 'Acme',
  profile: 'universal',
  algorithm: 'SHA1',
  tokenLength: 6,
  tokenValidity: 30,
  driftSteps: 0,
  createdAt: '2026-11-23T09:20:01.000Z',
  activatedAt: '2026-11-23T09:20:40.000Z',
  expiresAt: null,
}

/** A factor in a list: a TOTP authenticator's parameters, or a passkey's own fields (never its credential ID or public key). */
export const factorView = Type.Object({
  factorID: Type.String(),
  type: Type.String({ enum: ['totp', 'passkey'] }),
  status: Type.String({ enum: ['pending', 'active'] }),
  label: Type.Union([Type.String(), Type.Null()]),
  applicationID: Type.String({ description: "TOTP: the issuer the app shows. A passkey: the relying party's ID it was registered for." }),
  profile: Type.Optional(Type.String({ description: 'TOTP only.' })),
  algorithm: Type.String({ description: 'TOTP: the HMAC hash. A passkey: the COSE algorithm of its key (ES256, EdDSA, RS256).' }),
  tokenLength: Type.Optional(Type.Integer({ description: 'TOTP only.' })),
  tokenValidity: Type.Optional(Type.Integer({ description: 'TOTP only.' })),
  driftSteps: Type.Optional(Type.Integer({ description: "TOTP only: the device's clock drift in time steps, as the last resync found it." })),
  passkey: Type.Optional(
    Type.Object(
      {
        deviceType: Type.String({ description: '`singleDevice`, or `multiDevice` (synced by a password manager or platform account).' }),
        backedUp: Type.Boolean(),
        transports: Type.Array(Type.String()),
        signCount: Type.Integer({ description: "The authenticator's signature counter as last seen (0: it keeps none)." }),
      },
      { description: 'Passkeys only.' },
    ),
  ),
  createdAt: Type.String({ format: 'date-time' }),
  activatedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  expiresAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description: 'When a pending factor is gone; null once active.' }),
})

/** A factor's label and parameters, as creation and import take them. */
const parameterFields: FieldRules = {
  label: { invalid: 'LABEL_INVALID' },
  profile: profileRule,
  tokenValidity: { invalid: 'TOKEN_VALIDITY_INVALID' },
  tokenLength: { invalid: 'TOKEN_LENGTH_INVALID' },
  algorithm: { invalid: 'ALGORITHM_INVALID' },
}

export const createFields: FieldRules = withUser({
  applicationID: { required: 'APPLICATION_ID_REQUIRED', invalid: 'APPLICATION_ID_INVALID' },
  ...parameterFields,
})

export function createSchema(profiles: readonly string[]) {
  return {
    operationId: 'createFactor',
    summary: 'Create a factor (an authenticator) for a user',
    description:
      'The service keeps the secret, encrypted; it is shown in this answer only. The factor is pending until `activate` receives its first code, within `FACTOR_PENDING_SECONDS`. The user comes into being with their first factor. With an `Idempotency-Key`, a retry within 24 hours (after a timeout, say) answers the same factor and secret (kept sealed until then) instead of making a second one.',
    tags: ['factors'],
    consumes: FORMS,
    params: userParams,
    headers: IDEMPOTENCY_HEADERS,
    body: Type.Object(
      {
        applicationID: Type.String({
          minLength: 1,
          maxLength: 256,
          pattern: TEXT_ID,
          description: 'Application ID (the app name), the issuer in authenticator apps.',
        }),
        label: Type.Optional(
          Type.String({
            minLength: 1,
            maxLength: 64,
            pattern: '^[^\\u0000-\\u001f\\u007f]*$',
            description: 'A name for the factor in listings ("Work phone").',
          }),
        ),
        profile: Type.Optional(
          Type.String({
            enum: [...profiles],
            default: 'universal',
            description:
              "The authenticator app the parameters must suit (as onboardUser's `profile`, which lists what each allows); a parameter outside it is refused.",
          }),
        ),
        algorithm: Type.Optional(
          Type.String({ enum: [...ALGORITHMS, ...ALGORITHMS.map((a) => a.toLowerCase())], description: "HMAC hash. Default: the profile's." }),
        ),
        tokenLength: Type.Optional(Type.Integer({ minimum: 6, maximum: 10, description: "Digits in a code. Default: the profile's." })),
        tokenValidity: Type.Optional(Type.Integer({ minimum: 15, maximum: 3600, description: "Time step in seconds. Default: the profile's." })),
      },
      { examples: [{ applicationID: 'Acme', label: 'Work phone' }] },
    ),
    response: {
      201: Type.Object(
        {
          type: Type.Literal('Success'),
          factorID: Type.String(),
          status: Type.Literal('pending'),
          secretKey: Type.String({ description: 'Base32, 160 random bits. Shown here only: the service keeps it encrypted and never shows it again.' }),
          otpURL: Type.String(),
          QRCode: Type.String({ description: 'data:image/png;base64,… of exactly otpURL.' }),
          expiresAt: Type.String({ format: 'date-time', description: 'Activate before this, or the factor is gone.' }),
          profile: Type.String(),
          algorithm: Type.String(),
          tokenLength: Type.Integer(),
          tokenValidity: Type.Integer(),
        },
        {
          description: 'The pending factor with its secret (shown this once), its otpauth URL and a QR code of it.',
          examples: [
            {
              type: 'Success',
              factorID: 'fct_5b0c9e2a7d41f386',
              status: 'pending',
              secretKey: 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP',
              otpURL: 'otpauth://totp/Acme:alice%40example.com?secret=JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP&issuer=Acme&algorithm=SHA1&digits=6&period=30',
              QRCode: 'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAPQAAAD0CAYAAACsLwv+…',
              expiresAt: '2026-11-27T15:40:00.000Z',
              profile: 'universal',
              algorithm: 'SHA1',
              tokenLength: 6,
              tokenValidity: 30,
            },
          ],
        },
      ),
      ...errorResponses([
        'PATH_INVALID',
        'USER_ID_INVALID',
        'APPLICATION_ID_REQUIRED',
        'APPLICATION_ID_INVALID',
        'LABEL_INVALID',
        'PROFILE_INVALID',
        'PROFILE_UNSUPPORTED',
        'TOKEN_VALIDITY_INVALID',
        'TOKEN_LENGTH_INVALID',
        'ALGORITHM_INVALID',
        'FACTOR_LIMIT',
        'FACTORS_PER_ACCOUNT',
        'DATA_TOO_LONG',
        'QR_BUSY',
        ...IDEMPOTENCY_CODES,
      ]),
    },
  }
}

export const listSchema = {
  operationId: 'listFactors',
  summary: "List a user's factors",
  tags: ['factors'],
  params: userParams,
  response: {
    200: Type.Object(
      {
        type: Type.Literal('Success'),
        userID: Type.String(),
        factors: Type.Array(factorView),
        recoveryCodesLeft: Type.Integer({ description: 'Unused recovery codes.' }),
      },
      {
        description: "The user's factors (never a secret) and how many recovery codes they have left.",
        examples: [
          {
            type: 'Success',
            userID: 'alice@example.com',
            recoveryCodesLeft: 10,
            factors: [FACTOR_EXAMPLE],
          },
        ],
      },
    ),
    ...errorResponses(['PATH_INVALID', 'USER_ID_INVALID', 'USER_NOT_FOUND']),
  },
}

export const deleteFactorSchema = {
  operationId: 'deleteFactor',
  summary: 'Delete a factor',
  tags: ['factors'],
  params: factorParams,
  response: {
    204: Type.Null({ description: 'Deleted.' }),
    ...errorResponses(['PATH_INVALID', 'USER_ID_INVALID', 'FACTOR_NOT_FOUND']),
  },
}

export const deleteUserSchema = {
  operationId: 'deleteUser',
  summary: 'Delete a user with all their factors and recovery codes',
  tags: ['factors'],
  params: userParams,
  response: {
    204: Type.Null({ description: 'Deleted.' }),
    ...errorResponses(['PATH_INVALID', 'USER_ID_INVALID', 'USER_NOT_FOUND']),
  },
}

export const tokenFields: FieldRules = withUser({ token: { required: 'TOKEN_REQUIRED', invalid: 'TOKEN_INVALID' }, ...rateRule })

export const activateSchema = {
  operationId: 'activateFactor',
  summary: 'Activate a pending factor with its first code',
  description: "Proves the user's app holds the secret. Counts against the user's lockout like verify; the code is then used.",
  tags: ['factors'],
  consumes: FORMS,
  params: factorParams,
  body: Type.Object({ token, rateLimitKey }, { examples: [{ token: '681916' }] }),
  response: {
    200: Type.Object(
      {
        type: Type.Literal('Success'),
        factorID: Type.String(),
        status: Type.Literal('active'),
        activatedAt: Type.String({ format: 'date-time' }),
      },
      {
        description: 'The factor is active: its codes verify the user from now on.',
        examples: [{ type: 'Success', factorID: 'fct_5b0c9e2a7d41f386', status: 'active', activatedAt: '2026-11-27T15:31:12.000Z' }],
      },
    ),
    ...errorResponses([
      'PATH_INVALID',
      'USER_ID_INVALID',
      'TOKEN_REQUIRED',
      'TOKEN_INVALID',
      'FACTOR_NOT_FOUND',
      'FACTOR_NOT_TOTP',
      'FACTOR_ACTIVE',
      'OTP_INVALID',
      'OTP_REUSED',
      'OTP_LOCKED',
      'ATTEMPTS_LIMITED',
      'RATE_LIMIT_KEY_INVALID',
      'FACTOR_UNREADABLE',
    ]),
  },
}

export const verifySchema = {
  operationId: 'verifyUser',
  summary: "Verify a user's code against their active factors",
  description:
    'As verifyOTP, without the secret: the code of the current time step (at the factor\'s drift) or one either side, once per user; repeated failures lock the user for a doubling delay (429 with Retry-After). Answers which factor matched. Any answer but 200 means "not verified".',
  tags: ['factors'],
  consumes: FORMS,
  params: userParams,
  body: Type.Object({ token, rateLimitKey }, { examples: [{ token: '681916' }] }),
  response: {
    200: Type.Object(
      { type: Type.Literal('Success'), valid: Type.Literal(true), message: Type.String(), factorID: Type.String() },
      {
        description: "The code is right for one of the user's active factors (named), and now used.",
        examples: [{ type: 'Success', valid: true, message: 'OTP verified', factorID: 'fct_5b0c9e2a7d41f386' }],
      },
    ),
    ...errorResponses([
      'PATH_INVALID',
      'USER_ID_INVALID',
      'TOKEN_REQUIRED',
      'TOKEN_INVALID',
      'USER_NOT_FOUND',
      'NO_ACTIVE_FACTOR',
      'OTP_INVALID',
      'OTP_REUSED',
      'OTP_LOCKED',
      'ATTEMPTS_LIMITED',
      'RATE_LIMIT_KEY_INVALID',
      'FACTOR_UNREADABLE',
    ]),
  },
}

export const resyncFields: FieldRules = withUser({
  token: { required: 'TOKEN_REQUIRED', invalid: 'TOKEN_INVALID' },
  nextToken: { required: 'NEXT_TOKEN_REQUIRED', invalid: 'NEXT_TOKEN_INVALID' },
  ...rateRule,
})

export const resyncSchema = {
  operationId: 'resyncFactor',
  summary: 'Resynchronise a factor with a device whose clock is off',
  description:
    "Takes two consecutive codes of the device (`token`, then `nextToken`, the one it shows now) and stores how many time steps its clock is off, looked for within `FACTOR_RESYNC_STEPS` either side. Counts against the user's lockout; the codes are then used.",
  tags: ['factors'],
  consumes: FORMS,
  params: factorParams,
  body: Type.Object(
    { token, nextToken: Type.String({ pattern: '^[0-9]{6,10}$', description: 'The code the device shows after `token`.' }), rateLimitKey },
    { examples: [{ token: '681916', nextToken: '204518' }] },
  ),
  response: {
    200: Type.Object(
      { type: Type.Literal('Success'), factorID: Type.String(), driftSteps: Type.Integer(), driftSeconds: Type.Integer() },
      {
        description: "The device's clock drift, stored: its codes are checked at that offset from now on.",
        examples: [{ type: 'Success', factorID: 'fct_5b0c9e2a7d41f386', driftSteps: -3, driftSeconds: -90 }],
      },
    ),
    ...errorResponses([
      'PATH_INVALID',
      'USER_ID_INVALID',
      'TOKEN_REQUIRED',
      'TOKEN_INVALID',
      'NEXT_TOKEN_REQUIRED',
      'NEXT_TOKEN_INVALID',
      'FACTOR_NOT_FOUND',
      'FACTOR_NOT_TOTP',
      'FACTOR_PENDING',
      'RESYNC_FAILED',
      'OTP_REUSED',
      'OTP_LOCKED',
      'ATTEMPTS_LIMITED',
      'RATE_LIMIT_KEY_INVALID',
      'FACTOR_UNREADABLE',
    ]),
  },
}

export const recoveryCodesSchema = {
  operationId: 'createRecoveryCodes',
  summary: "Issue a user's recovery codes (replacing any earlier set)",
  description:
    'Ten single-use codes, shown in this answer only (the service keeps keyed hashes). With an `Idempotency-Key`, a retry within 24 hours gets the same codes (kept sealed until then) instead of replacing them.',
  tags: ['factors'],
  params: userParams,
  headers: IDEMPOTENCY_HEADERS,
  response: {
    201: Type.Object(
      { type: Type.Literal('Success'), recoveryCodes: Type.Array(Type.String(), { description: 'Ten codes like `k7qm-2xda-9fpe`.' }) },
      {
        description: 'Ten new recovery codes, shown this once; the earlier ones no longer work.',
        examples: [{ type: 'Success', recoveryCodes: ['k7qm-2xda-9fpe', 'w3rt-8hbn-c2zq', 'p9fd-4kxe-m7ua', '…'] }],
      },
    ),
    ...errorResponses(['PATH_INVALID', 'USER_ID_INVALID', 'USER_NOT_FOUND', ...IDEMPOTENCY_CODES]),
  },
}

export const recoverFields: FieldRules = withUser({ code: { required: 'RECOVERY_CODE_REQUIRED', invalid: 'RECOVERY_CODE_INVALID' }, ...rateRule })

export const recoverSchema = {
  operationId: 'recoverUser',
  summary: "Use one of a user's recovery codes",
  description: "Accepts each code once, however many use it at once. Counts against the user's lockout like verify.",
  tags: ['factors'],
  consumes: FORMS,
  params: userParams,
  body: Type.Object(
    { code: Type.String({ minLength: 1, maxLength: 64, description: 'A recovery code; case, spaces and dashes do not matter.' }), rateLimitKey },
    { examples: [{ code: 'k7qm-2xda-9fpe' }] },
  ),
  response: {
    200: Type.Object(
      { type: Type.Literal('Success'), valid: Type.Literal(true), recoveryCodesLeft: Type.Integer() },
      {
        description: 'The recovery code is right, and used up.',
        examples: [{ type: 'Success', valid: true, recoveryCodesLeft: 9 }],
      },
    ),
    ...errorResponses([
      'PATH_INVALID',
      'USER_ID_INVALID',
      'RECOVERY_CODE_REQUIRED',
      'RECOVERY_CODE_INVALID',
      'RATE_LIMIT_KEY_INVALID',
      'USER_NOT_FOUND',
      'OTP_LOCKED',
      'ATTEMPTS_LIMITED',
    ]),
  },
}

export const importFields: FieldRules = withUser({
  secret: { invalid: 'SECRET_INVALID', params: { bits: 80, chars: 16 } },
  otpURL: { invalid: 'OTP_URL_INVALID', params: { reason: 'it is not text of at most 4096 characters' } },
  applicationID: { invalid: 'APPLICATION_ID_INVALID' },
  ...parameterFields,
  status: { invalid: 'IMPORT_STATUS_INVALID' },
})

export function importSchema(profiles: readonly string[]) {
  return {
    operationId: 'importFactor',
    summary: 'Import a factor: a TOTP secret the user already has in their app',
    description:
      "For users who enrolled elsewhere (Renda.io's verifyOTP, your own TOTP): give the secret in base32 with its parameters, or its otpauth:// URI (its algorithm, digits, period and issuer are taken from it). The secret is sealed on arrival and never shown again, not in this answer either. Active at once by default; `status: pending` waits for the user's first code (`activate`) within `FACTOR_IMPORT_PENDING_DAYS`. The profile (default `any`: every parameter the service takes) holds the parameters to an app's. The same secret imported again for the user is 409 `FACTOR_EXISTS`. Writes `factor.created` (imported).",
    tags: ['factors'],
    consumes: FORMS,
    params: userParams,
    headers: IDEMPOTENCY_HEADERS,
    body: Type.Object(
      {
        secret: Type.Optional(Type.String({ minLength: 1, maxLength: 1024, description: 'The secret in base32 (spaces and padding ignored). Or otpURL.' })),
        otpURL: Type.Optional(Type.String({ minLength: 1, maxLength: 4096, description: 'The otpauth://totp/ URI the user scanned. Or secret.' })),
        applicationID: Type.Optional(
          Type.String({ minLength: 1, maxLength: 256, pattern: TEXT_ID, description: "The issuer; default: the URI's issuer. Required with secret." }),
        ),
        label: Type.Optional(
          Type.String({ minLength: 1, maxLength: 64, pattern: '^[^\\u0000-\\u001f\\u007f]*$', description: 'A name for the factor in listings.' }),
        ),
        profile: Type.Optional(Type.String({ enum: [...profiles], default: 'any', description: "The app whose parameters the secret's must be within." })),
        algorithm: Type.Optional(
          Type.String({
            enum: [...ALGORITHMS, ...ALGORITHMS.map((a) => a.toLowerCase())],
            description: "With secret: the HMAC hash (default SHA1). With otpURL: must agree with the URI's.",
          }),
        ),
        tokenLength: Type.Optional(Type.Integer({ minimum: 6, maximum: 10, description: 'With secret: digits (default 6).' })),
        tokenValidity: Type.Optional(Type.Integer({ minimum: 15, maximum: 3600, description: 'With secret: time step in seconds (default 30).' })),
        status: Type.Optional(
          Type.String({ enum: ['active', 'pending'], default: 'active', description: '`active` at once, or `pending` until the first code.' }),
        ),
      },
      {
        examples: [
          { otpURL: 'otpauth://totp/Acme:alice%40example.com?secret=JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP&issuer=Acme', label: 'Phone' },
          { secret: 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP', applicationID: 'Acme', tokenLength: 6, tokenValidity: 30 },
        ],
      },
    ),
    response: {
      201: Type.Object(
        { type: Type.Literal('Success'), factor: factorView },
        {
          description: 'The factor, as the lists show it (never its secret).',
          examples: [{ type: 'Success', factor: { ...FACTOR_EXAMPLE, profile: 'any', label: 'Phone' } }],
        },
      ),
      ...errorResponses([
        'PATH_INVALID',
        'USER_ID_INVALID',
        'IMPORT_SOURCE_REQUIRED',
        'SECRET_INVALID',
        'OTP_URL_INVALID',
        'APPLICATION_ID_REQUIRED',
        'APPLICATION_ID_INVALID',
        'LABEL_INVALID',
        'PROFILE_INVALID',
        'PROFILE_UNSUPPORTED',
        'TOKEN_VALIDITY_INVALID',
        'TOKEN_LENGTH_INVALID',
        'ALGORITHM_INVALID',
        'IMPORT_STATUS_INVALID',
        'FACTOR_EXISTS',
        'FACTOR_LIMIT',
        'FACTORS_PER_ACCOUNT',
        ...IDEMPOTENCY_CODES,
      ]),
    },
  }
}
