/**
 * Route schemas of passkeys (/totp/users/{userID}/passkeys/…, and /totp/passkeys/… for a sign-in that names no user): the options a browser passes to
 * navigator.credentials.create or .get as they are (PublicKeyCredential.parseCreationOptionsFromJSON
 * and parseRequestOptionsFromJSON take them, as does @simplewebauthn/browser), and the browser's
 * answer as PublicKeyCredential.toJSON() gives it. Every string of an answer is bounded.
 */
import { Type } from 'typebox'
import type { FieldRules } from '../../errors/plugin.ts'
import { errorResponses } from '../../openapi/responses.ts'
import { IDEMPOTENCY_CODES, IDEMPOTENCY_HEADERS } from '../../http/idempotency.ts'
import { MAX_USER_ID_INPUT, USER_ID_RULE } from '../../domain/user-ids.ts'
import { ATTACHMENT, RESIDENT_KEY, USER_VERIFICATION } from './passkey.ts'
import { factorView, rateLimitKey, userFields } from './schemas.ts'

const userParams = Type.Object({
  userID: Type.String({ maxLength: MAX_USER_ID_INPUT, description: `Your own identifier of the user, percent-encoded in the path: ${USER_ID_RULE}.` }),
})
const JSON_ONLY = ['application/json']
const OPTIONS_FORMS = ['application/json', 'application/x-www-form-urlencoded', 'multipart/form-data']

/** base64url text (padding tolerated) of at most `max` characters. */
const b64 = (max: number, description?: string) =>
  Type.String({ maxLength: max, pattern: '^[A-Za-z0-9_-]*={0,2}$', ...(description === undefined ? {} : { description }) })

const userVerification = Type.Optional(
  Type.String({
    enum: [...USER_VERIFICATION],
    default: 'preferred',
    description: '`required`: the authenticator must verify the user (PIN, biometrics) and the answer must say it did; `preferred` or `discouraged` otherwise.',
  }),
)

const credentialCommon = {
  id: b64(1400, 'The credential ID, base64url.'),
  rawId: b64(1400),
  type: Type.Literal('public-key'),
  authenticatorAttachment: Type.Optional(Type.String({ maxLength: 32 })),
  clientExtensionResults: Type.Optional(Type.Object({}, { additionalProperties: true, maxProperties: 16 })),
}

const registrationCredential = Type.Object(
  {
    ...credentialCommon,
    response: Type.Object(
      {
        clientDataJSON: b64(8192),
        attestationObject: b64(65536),
        transports: Type.Optional(Type.Array(Type.String({ pattern: '^[a-z0-9-]{1,32}$' }), { maxItems: 8 })),
        authenticatorData: Type.Optional(b64(65536)),
        publicKey: Type.Optional(b64(8192)),
        publicKeyAlgorithm: Type.Optional(Type.Integer()),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false, description: "The browser's answer to navigator.credentials.create, as PublicKeyCredential.toJSON() gives it." },
)

const authenticationCredential = Type.Object(
  {
    ...credentialCommon,
    response: Type.Object(
      {
        clientDataJSON: b64(8192),
        authenticatorData: b64(65536),
        signature: b64(2048),
        userHandle: Type.Optional(Type.Union([b64(128), Type.Null()])),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false, description: "The browser's answer to navigator.credentials.get, as PublicKeyCredential.toJSON() gives it." },
)

const expiresAt = Type.String({ format: 'date-time', description: 'Answer before this (PASSKEY_CHALLENGE_SECONDS); the challenge is good for one answer.' })
const options = Type.Object({}, { additionalProperties: true, description: 'PublicKeyCredentialCreationOptionsJSON / RequestOptionsJSON (WebAuthn Level 3).' })

export const registrationOptionsFields: FieldRules = {
  ...userFields,
  userName: { invalid: 'USER_NAME_INVALID' },
  displayName: { invalid: 'USER_NAME_INVALID' },
  userVerification: { invalid: 'USER_VERIFICATION_INVALID' },
  residentKey: { invalid: 'RESIDENT_KEY_INVALID' },
  authenticatorAttachment: { invalid: 'ATTACHMENT_INVALID' },
}

const displayText = (description: string) => Type.Optional(Type.String({ minLength: 1, maxLength: 64, pattern: '^[^\\u0000-\\u001f\\u007f]*$', description }))

export const registrationOptionsSchema = {
  operationId: 'passkeyRegistrationOptions',
  summary: 'Start registering a passkey for a user',
  description:
    "Answers the options to pass to `navigator.credentials.create()` (parse them with `PublicKeyCredential.parseCreationOptionsFromJSON`), for the account's relying party (its factor settings), excluding the user's passkeys. Then send the browser's answer to `registerPasskey`. The challenge is good for one answer within `PASSKEY_CHALLENGE_SECONDS`.",
  tags: ['passkeys'],
  consumes: OPTIONS_FORMS,
  params: userParams,
  body: Type.Optional(
    Type.Object(
      {
        userName: displayText('The name the authenticator lists the passkey under (an email address, say). Default: the user ID.'),
        displayName: displayText('A friendlier name. Default: userName.'),
        userVerification,
        residentKey: Type.Optional(
          Type.String({
            enum: [...RESIDENT_KEY],
            default: 'preferred',
            description: '`required`: a discoverable credential (a passkey proper), kept on the authenticator.',
          }),
        ),
        authenticatorAttachment: Type.Optional(
          Type.String({ enum: [...ATTACHMENT], description: '`platform` (this device) or `cross-platform` (a security key, a phone). Default: either.' }),
        ),
      },
      { examples: [{ userName: 'alice@example.com', userVerification: 'required', residentKey: 'required' }] },
    ),
  ),
  response: {
    200: Type.Object(
      { type: Type.Literal('Success'), options, expiresAt },
      {
        description: 'The options for navigator.credentials.create().',
        examples: [
          {
            type: 'Success',
            options: {
              challenge: 'm8r0Ck2v3qvE6x9b1pW4Qy7Zt0aLJfK2nHs5dG8uR1o',
              rp: { name: 'Acme', id: 'acme.example' },
              user: { id: 'Qm9vS0xVX3VzZXJfaGFuZGxlX2tleWVkX2RpZ2VzdA', name: 'alice@example.com', displayName: 'alice@example.com' },
              pubKeyCredParams: [
                { alg: -7, type: 'public-key' },
                { alg: -8, type: 'public-key' },
                { alg: -257, type: 'public-key' },
              ],
              timeout: 300000,
              attestation: 'none',
              excludeCredentials: [],
              authenticatorSelection: { residentKey: 'required', userVerification: 'required', requireResidentKey: true },
              extensions: { credProps: true },
              hints: [],
            },
            expiresAt: '2026-11-28T09:05:00.000Z',
          },
        ],
      },
    ),
    ...errorResponses([
      'PATH_INVALID',
      'USER_ID_INVALID',
      'USER_NAME_INVALID',
      'USER_VERIFICATION_INVALID',
      'RESIDENT_KEY_INVALID',
      'ATTACHMENT_INVALID',
      'PASSKEYS_NOT_CONFIGURED',
      'FACTOR_LIMIT',
      'PASSKEY_CHALLENGES_PER_ACCOUNT',
    ]),
  },
}

const credentialRule: FieldRules = { credential: { required: 'CREDENTIAL_REQUIRED', invalid: 'CREDENTIAL_INVALID' } }

export const registerFields: FieldRules = { ...userFields, ...credentialRule, label: { invalid: 'LABEL_INVALID' } }

export const registerSchema = {
  operationId: 'registerPasskey',
  summary: "Register a passkey: verify the browser's answer and keep it",
  description:
    "Verifies the answer to `passkeyRegistrationOptions` (its challenge, the account's origins and relying party ID, user verification when it was required) and keeps the passkey as a factor of the user, active at once: listed, labelled and deleted like a TOTP factor, under the same limit. Its credential ID and public key are kept encrypted. Writes `factor.created` (type passkey).",
  tags: ['passkeys'],
  consumes: JSON_ONLY,
  params: userParams,
  headers: IDEMPOTENCY_HEADERS,
  body: Type.Object(
    {
      credential: registrationCredential,
      label: Type.Optional(
        Type.String({ minLength: 1, maxLength: 64, pattern: '^[^\\u0000-\\u001f\\u007f]*$', description: 'A name for the passkey in listings ("MacBook").' }),
      ),
    },
    {
      examples: [
        {
          label: 'MacBook',
          credential: {
            id: 'BwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyAhIiMkJSY',
            rawId: 'BwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyAhIiMkJSY',
            type: 'public-key',
            response: {
              clientDataJSON:
                'eyJ0eXBlIjoid2ViYXV0aG4uY3JlYXRlIiwiY2hhbGxlbmdlIjoibThyMENrMnYzcXZFNng5YjFwVzRReTdadDBhTEpmSzJuSHM1ZEc4dVIxbyIsIm9yaWdpbiI6Imh0dHBzOi8vYWNtZS5leGFtcGxlIiwiY3Jvc3NPcmlnaW4iOmZhbHNlfQ',
              attestationObject: 'o2NmbXRkbm9uZWdhdHRTdG10oGhhdXRoRGF0YVjF',
              transports: ['internal', 'hybrid'],
            },
            clientExtensionResults: {},
          },
        },
      ],
    },
  ),
  response: {
    201: Type.Object(
      { type: Type.Literal('Success'), factor: factorView },
      {
        description: 'The passkey, as the factor lists show it.',
        examples: [
          {
            type: 'Success',
            factor: {
              factorID: 'fct_3e8d1c0b9a7f6254',
              type: 'passkey',
              status: 'active',
              label: 'MacBook',
              applicationID: 'acme.example',
              algorithm: 'ES256',
              passkey: { deviceType: 'multiDevice', backedUp: true, transports: ['internal', 'hybrid'], signCount: 0 },
              createdAt: '2026-11-28T09:01:12.000Z',
              activatedAt: '2026-11-28T09:01:12.000Z',
              expiresAt: null,
            },
          },
        ],
      },
    ),
    ...errorResponses([
      'PATH_INVALID',
      'USER_ID_INVALID',
      'CREDENTIAL_REQUIRED',
      'CREDENTIAL_INVALID',
      'LABEL_INVALID',
      'PASSKEYS_NOT_CONFIGURED',
      'PASSKEY_CHALLENGE_INVALID',
      'PASSKEY_INVALID',
      'PASSKEY_REGISTERED',
      'FACTOR_LIMIT',
      'FACTORS_PER_ACCOUNT',
      ...IDEMPOTENCY_CODES,
    ]),
  },
}

export const authenticationOptionsFields: FieldRules = { ...userFields, userVerification: { invalid: 'USER_VERIFICATION_INVALID' } }

export const authenticationOptionsSchema = {
  operationId: 'passkeyAuthenticationOptions',
  summary: 'Start a sign-in with one of the user’s passkeys',
  description:
    "Answers the options to pass to `navigator.credentials.get()` (parse them with `PublicKeyCredential.parseRequestOptionsFromJSON`), allowing the user's passkeys. Then send the browser's answer to `authenticatePasskey`.",
  tags: ['passkeys'],
  consumes: OPTIONS_FORMS,
  params: userParams,
  body: Type.Optional(Type.Object({ userVerification }, { examples: [{ userVerification: 'required' }] })),
  response: {
    200: Type.Object(
      { type: Type.Literal('Success'), options, expiresAt },
      {
        description: 'The options for navigator.credentials.get().',
        examples: [
          {
            type: 'Success',
            options: {
              rpId: 'acme.example',
              challenge: 'Zk3v9Qw0pX2mB7tR4yL1cN8aH5sD6fJ0gK3eU2iO9qw',
              allowCredentials: [{ id: 'BwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyAhIiMkJSY', type: 'public-key', transports: ['internal', 'hybrid'] }],
              timeout: 300000,
              userVerification: 'required',
            },
            expiresAt: '2026-11-28T09:10:00.000Z',
          },
        ],
      },
    ),
    ...errorResponses([
      'PATH_INVALID',
      'USER_ID_INVALID',
      'USER_VERIFICATION_INVALID',
      'PASSKEYS_NOT_CONFIGURED',
      'USER_NOT_FOUND',
      'NO_PASSKEY',
      'PASSKEY_CHALLENGES_PER_ACCOUNT',
    ]),
  },
}

export const authenticateFields: FieldRules = { ...userFields, ...credentialRule, rateLimitKey: { invalid: 'RATE_LIMIT_KEY_INVALID' } }

export const authenticateSchema = {
  operationId: 'authenticatePasskey',
  summary: "Verify a passkey sign-in: the browser's answer",
  description:
    "Verifies the answer to `passkeyAuthenticationOptions`: its challenge (once), the signature with the passkey's public key, the origin and relying party ID, user verification when it was required, a signature counter above the last one seen, and the user handle when the authenticator gives one back (it must be the user's). An attempt under the user's lockout, shared with their TOTP factors and recovery codes: a failure counts, and repeated failures lock the user (429 with Retry-After). Any answer but 200 means \"not verified\".",
  tags: ['passkeys'],
  consumes: JSON_ONLY,
  params: userParams,
  body: Type.Object(
    { credential: authenticationCredential, rateLimitKey },
    {
      examples: [
        {
          credential: {
            id: 'BwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyAhIiMkJSY',
            rawId: 'BwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyAhIiMkJSY',
            type: 'public-key',
            response: {
              clientDataJSON:
                'eyJ0eXBlIjoid2ViYXV0aG4uZ2V0IiwiY2hhbGxlbmdlIjoiWmszdjlRdzBwWDJtQjd0UjR5TDFjTjhhSDVzRDZmSjBnSzNlVTJpTzlxdyIsIm9yaWdpbiI6Imh0dHBzOi8vYWNtZS5leGFtcGxlIiwiY3Jvc3NPcmlnaW4iOmZhbHNlfQ',
              authenticatorData: 'SZYN5YgOjGh0NBcPZHZgW4_krrmihjLHmVzzuoMdl2MFAAAABQ',
              signature: 'MEUCIQDkJ3X7Ow9Xq8Jm5v2cVg1wQeS3hP0bLx4tYk6aRzN2AgIgVf8n1Qm7Rk2x',
              userHandle: 'Qm9vS0xVX3VzZXJfaGFuZGxlX2tleWVkX2RpZ2VzdA',
            },
            clientExtensionResults: {},
          },
        },
      ],
    },
  ),
  response: {
    200: Type.Object(
      {
        type: Type.Literal('Success'),
        valid: Type.Literal(true),
        factorID: Type.String({ description: 'The passkey that signed.' }),
        userVerified: Type.Boolean({ description: 'Whether the authenticator verified the user (PIN, biometrics).' }),
      },
      {
        description: 'The user signed in with the passkey named.',
        examples: [{ type: 'Success', valid: true, factorID: 'fct_3e8d1c0b9a7f6254', userVerified: true }],
      },
    ),
    ...errorResponses([
      'PATH_INVALID',
      'USER_ID_INVALID',
      'CREDENTIAL_REQUIRED',
      'CREDENTIAL_INVALID',
      'PASSKEYS_NOT_CONFIGURED',
      'USER_NOT_FOUND',
      'PASSKEY_CHALLENGE_INVALID',
      'PASSKEY_INVALID',
      'PASSKEY_REPLAYED',
      'RATE_LIMIT_KEY_INVALID',
      'OTP_LOCKED',
      'ATTEMPTS_LIMITED',
      'FACTOR_UNREADABLE',
    ]),
  },
}

export const discoverableOptionsFields: FieldRules = { userVerification: { invalid: 'USER_VERIFICATION_INVALID' } }

export const discoverableOptionsSchema = {
  operationId: 'passkeyDiscoverableOptions',
  summary: 'Start a sign-in with a passkey, no user ID given',
  description:
    "Answers the options to pass to `navigator.credentials.get()` with an empty `allowCredentials`: the browser offers the passkeys it holds for the account's relying party (discoverable credentials, registered with `residentKey: required`), and the answer tells whose it is. Then send the browser's answer to `authenticateDiscoverablePasskey`. The challenge counts towards `PASSKEY_CHALLENGES_PER_ACCOUNT` (there is no user to hold to `PASSKEY_CHALLENGES_PER_USER`).",
  tags: ['passkeys'],
  consumes: OPTIONS_FORMS,
  body: Type.Optional(Type.Object({ userVerification }, { examples: [{ userVerification: 'required' }] })),
  response: {
    200: Type.Object(
      { type: Type.Literal('Success'), options, expiresAt },
      {
        description: 'The options for navigator.credentials.get(), allowing any passkey of the relying party.',
        examples: [
          {
            type: 'Success',
            options: {
              rpId: 'acme.example',
              challenge: 'Wq2n8Kd5Lr0pT7xV3cB9mF1hJ6sA4gE2yU8iO0zN5kw',
              allowCredentials: [],
              timeout: 300000,
              userVerification: 'required',
            },
            expiresAt: '2026-11-28T09:10:00.000Z',
          },
        ],
      },
    ),
    ...errorResponses(['USER_VERIFICATION_INVALID', 'PASSKEYS_NOT_CONFIGURED', 'PASSKEY_CHALLENGES_PER_ACCOUNT']),
  },
}

export const discoverableAuthenticateFields: FieldRules = { ...credentialRule, rateLimitKey: { invalid: 'RATE_LIMIT_KEY_INVALID' } }

export const discoverableAuthenticateSchema = {
  operationId: 'authenticateDiscoverablePasskey',
  summary: "Verify a passkey sign-in without a user ID: the browser's answer, and whose it is",
  description:
    "Verifies the answer to `passkeyDiscoverableOptions` and names the user. The passkey is found by the credential ID the answer carries, among the calling account's passkeys only; the user handle the authenticator gives back must be that user's. From there it is the user's sign-in, as `authenticatePasskey`: its challenge (once), the signature, the origin and relying party ID, user verification when it was required, a signature counter above the last one seen, and an attempt under the user's lockout (a failure counts, repeated failures lock the user: 429 with Retry-After). Any answer but 200 means \"not signed in\".",
  tags: ['passkeys'],
  consumes: JSON_ONLY,
  body: Type.Object(
    { credential: authenticationCredential, rateLimitKey },
    {
      examples: [
        {
          credential: {
            id: 'BwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyAhIiMkJSY',
            rawId: 'BwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyAhIiMkJSY',
            type: 'public-key',
            response: {
              clientDataJSON:
                'eyJ0eXBlIjoid2ViYXV0aG4uZ2V0IiwiY2hhbGxlbmdlIjoiV3EybjhLZDVMcjBwVDd4VjNjQjltRjFoSjZzQTRnRTJ5VThpTzB6TjVrdyIsIm9yaWdpbiI6Imh0dHBzOi8vYWNtZS5leGFtcGxlIiwiY3Jvc3NPcmlnaW4iOmZhbHNlfQ',
              authenticatorData: 'SZYN5YgOjGh0NBcPZHZgW4_krrmihjLHmVzzuoMdl2MFAAAABg',
              signature: 'MEUCIQCx3bq8Y2n0Vw5Jr1K9tQeL4mZp7dA6sF2hG0uN8cE1vAIgR3kT5wP9yX2zB7nM4qL0jH6fD8sA1gV3cU5eI7oK9',
              userHandle: 'Qm9vS0xVX3VzZXJfaGFuZGxlX2tleWVkX2RpZ2VzdA',
            },
            clientExtensionResults: {},
          },
          rateLimitKey: '203.0.113.7',
        },
      ],
    },
  ),
  response: {
    200: Type.Object(
      {
        type: Type.Literal('Success'),
        valid: Type.Literal(true),
        userID: Type.String({ description: 'The user the passkey is of: your own identifier, as you registered it.' }),
        factorID: Type.String({ description: 'The passkey that signed.' }),
        userVerified: Type.Boolean({ description: 'Whether the authenticator verified the user (PIN, biometrics).' }),
      },
      {
        description: 'The user named signed in with the passkey named.',
        examples: [{ type: 'Success', valid: true, userID: '42', factorID: 'fct_3e8d1c0b9a7f6254', userVerified: true }],
      },
    ),
    ...errorResponses([
      'CREDENTIAL_REQUIRED',
      'CREDENTIAL_INVALID',
      'PASSKEYS_NOT_CONFIGURED',
      'PASSKEY_UNKNOWN',
      'PASSKEY_CHALLENGE_INVALID',
      'PASSKEY_INVALID',
      'PASSKEY_REPLAYED',
      'RATE_LIMIT_KEY_INVALID',
      'OTP_LOCKED',
      'ATTEMPTS_LIMITED',
      'FACTOR_UNREADABLE',
    ]),
  },
}
