/**
 * Route schemas of the TOTP group: they validate requests (all problems at once), drive the
 * response serialisers and generate the OpenAPI document. `fields` maps each body field to
 * its catalogue codes, in the order problems are reported.
 */
import { Type } from 'typebox'
import type { FieldRules } from '../errors/plugin.ts'
import { errorResponses } from '../openapi/responses.ts'
import { ALGORITHMS } from './otp.ts'
import { PROFILE_NAMES, profileSummary } from './profiles.ts'

const algorithm = Type.Optional(
  Type.String({
    enum: [...ALGORITHMS, ...ALGORITHMS.map((a) => a.toLowerCase())],
    default: 'SHA1',
    description: 'HMAC hash of the TOTP: SHA1 (default, what every authenticator app supports), SHA256 or SHA512.',
  }),
)
const tokenValidity = Type.Optional(Type.Integer({ minimum: 15, maximum: 3600, default: 30, description: 'Time step in seconds (TOTP period).' }))
const tokenLength = Type.Optional(Type.Integer({ minimum: 6, maximum: 10, default: 6, description: 'Digits in a code.' }))
/**
 * profile is shared with the factor routes. No schema default: on onboardUser, leaving it
 * out keeps Renda.io's behaviour (no check); the factor routes apply `universal` themselves.
 */
export const profile = Type.Optional(
  Type.String({
    enum: PROFILE_NAMES,
    description: `Compatibility profile: the authenticator app the secret must work in. Parameters outside it are refused (PROFILE_UNSUPPORTED) rather than issued to an app that would show wrong codes; parameters left out take the profile's defaults (SHA1, 6 digits, 30 s for each). ${profileSummary()}.`,
  }),
)
/** profileRule maps the field's schema errors to PROFILE_INVALID, naming the known profiles. */
export const profileRule = { invalid: 'PROFILE_INVALID', params: { profiles: PROFILE_NAMES.join(', ') } } as const

const label = (what: string) =>
  Type.String({
    // No control characters: nothing an app could show, and PostgreSQL refuses NUL in text (a 500 before).
    minLength: 1,
    maxLength: 256,
    pattern: '^[^:\\u0000-\\u001f\\u007f]*[^:\\s\\u0000-\\u001f\\u007f][^:\\u0000-\\u001f\\u007f]*$',
    description: `${what}; at most 256 characters, no ':' (it separates issuer and account in the otpauth label), no control characters.`,
  })
const secret = Type.String({
  maxLength: 1024,
  pattern: '^[\\s=]*(?:[A-Za-z2-7][\\s=]*){16,}$',
  description:
    'Base32 secret (RFC 4648), at least 80 bits (16 characters, what Renda.io issued; `MIN_SECRET_BITS` may ask for more); any case, spaces and padding ignored.',
})
/**
 * getOTP and verifyOTP take the parameters a request leaves out from the onboarding record
 * of its secret, so these fields have no schema default (ajv would fill it in).
 */
const fromRecord = (fallback: string) => ` Default: the value the secret was onboarded with here, else ${fallback}.`
const secretParams = {
  tokenValidity: Type.Optional(Type.Integer({ minimum: 15, maximum: 3600, description: `Time step in seconds (TOTP period).${fromRecord('30')}` })),
  algorithm: Type.Optional(
    Type.String({
      enum: [...ALGORITHMS, ...ALGORITHMS.map((a) => a.toLowerCase())],
      description: `HMAC hash of the TOTP: SHA1, SHA256 or SHA512.${fromRecord('SHA1')}`,
    }),
  ),
}
const hexColor = (what: string, def: string) =>
  Type.Optional(
    Type.String({
      pattern: '^#?([0-9a-fA-F]{6}|[0-9a-fA-F]{8})$',
      default: def,
      description: `${what} as #rrggbb or #rrggbbaa.`,
    }),
  )

/** success: a Renda-style answer (`type: 'Success'` and the fields), with what it is (`description`) and an example for the reference. */
const success = (fields: Record<string, ReturnType<typeof Type.String>>, options: { description?: string; examples?: unknown[] } = {}) =>
  Type.Object({ type: Type.Literal('Success'), ...fields }, options)

export const pingSchema = {
  operationId: 'ping',
  summary: 'Check the API and your key',
  tags: ['totp'],
  response: {
    200: success(
      { message: Type.String() },
      {
        description: 'Your key is let in here: valid, its account active, the group subscribed in this region.',
        examples: [{ type: 'Success', message: 'Ping successful' }],
      },
    ),
    ...errorResponses([]),
  },
}

export const qrFields = (maxSize: number): FieldRules => ({
  data: { required: 'DATA_REQUIRED', invalid: 'DATA_INVALID' },
  format: { invalid: 'FORMAT_INVALID' },
  size: { invalid: 'SIZE_INVALID', params: { max: maxSize } },
  ecc: { invalid: 'ECC_INVALID' },
  margin: { invalid: 'MARGIN_INVALID' },
  color: { invalid: 'COLOR_INVALID' },
  bgcolor: { invalid: 'BGCOLOR_INVALID' },
})

export function qrSchema(maxSize: number) {
  return {
    operationId: 'generateQRCode',
    summary: 'Encode any text as a QR code',
    description: 'PNG by default; SVG with `format=svg` or `Accept: image/svg+xml`; JSON with a data URL with `Accept: application/json`.',
    tags: ['totp'],
    consumes: ['application/x-www-form-urlencoded', 'application/json', 'multipart/form-data'],
    body: Type.Object(
      {
        data: Type.String({ minLength: 1, description: 'Text to encode (UTF-8).' }),
        format: Type.Optional(Type.String({ enum: ['png', 'svg'], description: 'Image format; overrides Accept.' })),
        size: Type.Optional(
          Type.Integer({
            minimum: 21,
            maximum: maxSize,
            description: 'Width and height in pixels (default: 4 pixels per module); never less than one pixel per module.',
          }),
        ),
        ecc: Type.Optional(Type.String({ pattern: '^[LMQHlmqh]$', default: 'M', description: 'Error correction level: L (7%), M (15%), Q (25%), H (30%).' })),
        margin: Type.Optional(Type.Integer({ minimum: 0, maximum: 16, default: 4, description: 'Quiet zone in modules (the standard asks for 4).' })),
        color: hexColor('Dark modules', '#000000'),
        bgcolor: hexColor('Light modules and quiet zone', '#ffffff'),
      },
      { examples: [{ data: 'https://example.com/welcome', format: 'png', size: 256, ecc: 'M' }] },
    ),
    response: {
      200: {
        description: 'The QR code.',
        content: {
          'image/png': { schema: Type.String({ format: 'binary' }) },
          'image/svg+xml': { schema: Type.String() },
          'application/json': {
            schema: success(
              { QRCode: Type.String({ description: 'data:image/png;base64,… (or image/svg+xml)' }) },
              { examples: [{ type: 'Success', QRCode: 'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAPQAAAD0CAYAAACsLwv+…' }] },
            ),
          },
        },
      },
      ...errorResponses([
        'DATA_REQUIRED',
        'DATA_INVALID',
        'DATA_TOO_LONG',
        'FORMAT_INVALID',
        'SIZE_INVALID',
        'ECC_INVALID',
        'MARGIN_INVALID',
        'COLOR_INVALID',
        'BGCOLOR_INVALID',
        'QR_BUSY',
      ]),
    },
  }
}

export const onboardFields: FieldRules = {
  userID: { required: 'USER_ID_REQUIRED', invalid: 'USER_ID_INVALID' },
  applicationID: { required: 'APPLICATION_ID_REQUIRED', invalid: 'APPLICATION_ID_INVALID' },
  tokenValidity: { invalid: 'TOKEN_VALIDITY_INVALID' },
  tokenLength: { invalid: 'TOKEN_LENGTH_INVALID' },
  algorithm: { invalid: 'ALGORITHM_INVALID' },
  profile: profileRule,
}

export const onboardSchema = {
  operationId: 'onboardUser',
  summary: 'Create a TOTP secret for a user of an application',
  description:
    'Returns the secret, its otpauth URL, a QR code of that URL for authenticator apps and the current code. Onboarding the same user of the same application again issues a new secret.',
  tags: ['totp'],
  consumes: ['application/x-www-form-urlencoded', 'application/json', 'multipart/form-data'],
  body: Type.Object(
    {
      userID: label('User ID (email address, employee ID…), the account name in authenticator apps'),
      applicationID: label('Application ID (the app name), the issuer in authenticator apps'),
      tokenValidity,
      tokenLength,
      algorithm,
      profile,
    },
    { examples: [{ userID: 'alice@example.com', applicationID: 'Acme' }] },
  ),
  response: {
    200: Type.Object(
      {
        secretKey: Type.String({ description: 'Base32, upper case, no padding, 160 random bits.' }),
        otpURL: Type.String({ description: 'otpauth://totp/<applicationID>:<userID>?secret=…&issuer=…&algorithm=…&digits=…&period=…' }),
        QRCode: Type.String({ description: 'data:image/png;base64,… of exactly otpURL.' }),
        otp: Type.String({ description: 'The current code.' }),
        token: Type.String({ description: "The current code again, under Renda.io's name." }),
        tokenValidity: Type.Integer({ description: 'The time step in seconds, as issued.' }),
        tokenLength: Type.Integer({ description: 'Digits in a code, as issued.' }),
        algorithm: Type.String({ description: 'The HMAC hash, as issued: SHA1, SHA256 or SHA512.' }),
        expiresIn: Type.Integer({ description: 'Seconds for which `otp` stays current.' }),
      },
      {
        description: 'The new secret, its otpauth URL, a QR code of that URL for authenticator apps, and the current code.',
        examples: [
          {
            secretKey: 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP',
            otpURL: 'otpauth://totp/Acme:alice%40example.com?secret=JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP&issuer=Acme&algorithm=SHA1&digits=6&period=30',
            QRCode: 'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAPQAAAD0CAYAAACsLwv+…',
            otp: '681916',
            token: '681916',
            tokenValidity: 30,
            tokenLength: 6,
            algorithm: 'SHA1',
            expiresIn: 17,
          },
        ],
      },
    ),
    ...errorResponses([
      'USER_ID_REQUIRED',
      'USER_ID_INVALID',
      'APPLICATION_ID_REQUIRED',
      'APPLICATION_ID_INVALID',
      'TOKEN_VALIDITY_INVALID',
      'TOKEN_LENGTH_INVALID',
      'ALGORITHM_INVALID',
      'PROFILE_INVALID',
      'PROFILE_UNSUPPORTED',
      'DATA_TOO_LONG',
      'QR_BUSY',
    ]),
  },
}

/** SecretLimits: the weakest secret taken, for SECRET_INVALID's message. */
export interface SecretLimits {
  readonly bits: number
  readonly chars: number
}

export const getOtpFields = (limits: SecretLimits): FieldRules => ({
  secret: { required: 'SECRET_REQUIRED', invalid: 'SECRET_INVALID', params: { ...limits } },
  tokenValidity: { invalid: 'TOKEN_VALIDITY_INVALID' },
  tokenLength: { invalid: 'TOKEN_LENGTH_INVALID' },
  algorithm: { invalid: 'ALGORITHM_INVALID' },
})

export const getOtpSchema = {
  operationId: 'getOTP',
  summary: 'Get the current code for a secret',
  tags: ['totp'],
  consumes: ['application/x-www-form-urlencoded', 'application/json', 'multipart/form-data'],
  body: Type.Object(
    {
      secret,
      tokenLength: Type.Optional(Type.Integer({ minimum: 6, maximum: 10, description: `Digits in a code.${fromRecord('6')}` })),
      ...secretParams,
    },
    { examples: [{ secret: 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP' }] },
  ),
  response: {
    200: Type.Object(
      {
        type: Type.Literal('Success'),
        otp: Type.String({ description: 'The current code.' }),
        expiresIn: Type.Integer({ description: 'Seconds for which `otp` stays current.' }),
        currentToken: Type.String({ description: "The current code again, under Renda.io's name." }),
        timeUsed: Type.Integer({ description: "Seconds elapsed in the current time step (Renda.io's field): `timeUsed` + `expiresIn` = the period." }),
      },
      {
        description: "The secret's current code and how long it stays current.",
        examples: [{ type: 'Success', otp: '681916', expiresIn: 17, currentToken: '681916', timeUsed: 13 }],
      },
    ),
    ...errorResponses(['SECRET_REQUIRED', 'SECRET_INVALID', 'TOKEN_VALIDITY_INVALID', 'TOKEN_LENGTH_INVALID', 'ALGORITHM_INVALID']),
  },
}

export const verifyFields = (limits: SecretLimits): FieldRules => ({
  secret: { required: 'SECRET_REQUIRED', invalid: 'SECRET_INVALID', params: { ...limits } },
  token: { required: 'TOKEN_REQUIRED', invalid: 'TOKEN_INVALID' },
  tokenLength: { invalid: 'TOKEN_LENGTH_INVALID' },
  tokenValidity: { invalid: 'TOKEN_VALIDITY_INVALID' },
  algorithm: { invalid: 'ALGORITHM_INVALID' },
})

export const verifySchema = {
  operationId: 'verifyOTP',
  summary: 'Verify a code against a secret',
  description:
    'Accepts the code of the current time step or of one step either side (RFC 6238 §5.2), once: a code for a step at or before the last accepted one is refused as reused. After repeated failures the secret is locked for a doubling delay (429 with Retry-After). Any answer but 200 means "not verified".',
  tags: ['totp'],
  consumes: ['application/x-www-form-urlencoded', 'application/json', 'multipart/form-data'],
  body: Type.Object(
    {
      secret,
      token: Type.String({ pattern: '^[0-9]{6,10}$', description: 'The code to check.' }),
      tokenLength: Type.Optional(
        Type.Integer({
          minimum: 6,
          maximum: 10,
          description:
            'Digits in a code. Default: the value the secret was onboarded with here, else the length of `token` (a secret issued elsewhere, such as by Renda.io). A token of another length is a failed attempt.',
        }),
      ),
      ...secretParams,
    },
    { examples: [{ secret: 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP', token: '681916' }] },
  ),
  response: {
    200: Type.Object(
      { type: Type.Literal('Success'), valid: Type.Literal(true), message: Type.String() },
      {
        description: 'The code is right, and now used: the same step is refused from here on.',
        examples: [{ type: 'Success', valid: true, message: 'OTP verified' }],
      },
    ),
    ...errorResponses([
      'SECRET_REQUIRED',
      'SECRET_INVALID',
      'TOKEN_REQUIRED',
      'TOKEN_INVALID',
      'TOKEN_LENGTH_INVALID',
      'TOKEN_VALIDITY_INVALID',
      'ALGORITHM_INVALID',
      'OTP_INVALID',
      'OTP_REUSED',
      'OTP_LOCKED',
    ]),
  },
}
