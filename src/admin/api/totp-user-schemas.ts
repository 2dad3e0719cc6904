/**
 * Route schemas of the admin API's users of managed TOTP factors: what an operator reads of
 * a user (their factors' states, never a secret; recovery codes left; their lock) and the two
 * things an operator may do (clear the lock, delete the user's factors). Factors are shown
 * under the public API's field names (GET /totp/users/{userID}/factors), so that both read alike.
 */
import { Type } from 'typebox'
import { FACTOR_EXAMPLE, factorView } from '../../totp/factors/schemas.ts'
import { MAX_USER_CURSOR, MAX_USER_ID_INPUT, USER_ID_RULE } from '../../domain/user-ids.ts'
import { errors, id, nullable, page, paging, strict, time } from './schemas.ts'
import { MAX_LINE } from '../../services/factor-import.ts'

const params = Type.Object({
  id: id('account', 'acc_01JD3Q5Z8X'),
  userID: Type.String({
    maxLength: MAX_USER_ID_INPUT,
    examples: ['user-42'],
    description: `The account's own identifier of its user, as the factor routes take it (${USER_ID_RULE}), percent-encoded.`,
  }),
})

const locked = {
  locked: Type.Boolean({ description: 'true: verifications of the user are refused (429) until `lockedUntil`.' }),
  lockedUntil: nullable(time(), "When the user's lock ends; null: not locked."),
}

const totpUser = Type.Object(
  {
    userID: Type.String(),
    createdAt: time("When the user's first factor was created."),
    activeFactors: Type.Integer({ minimum: 0 }),
    pendingFactors: Type.Integer({ minimum: 0, description: 'Created, not yet activated (gone after FACTOR_PENDING_SECONDS).' }),
    recoveryCodesLeft: Type.Integer({ minimum: 0 }),
    ...locked,
  },
  {
    examples: [
      { userID: 'user-42', createdAt: '2026-11-23T09:20:01.000Z', activeFactors: 1, pendingFactors: 0, recoveryCodesLeft: 9, locked: false, lockedUntil: null },
    ],
  },
)

/** A factor as the public API lists it (the same fields, the same names). */
const factor = Type.Object(factorView.properties, { examples: [FACTOR_EXAMPLE] })

const userState = Type.Object(
  {
    accountId: Type.String(),
    userID: Type.String(),
    factors: Type.Array(factor, { description: "The user's live factors, oldest first (never their secrets)." }),
    recoveryCodesLeft: Type.Integer({ minimum: 0 }),
    ...locked,
  },
  {
    examples: [
      {
        accountId: 'acc_01JD3Q5Z8X',
        userID: 'user-42',
        factors: [FACTOR_EXAMPLE],
        recoveryCodesLeft: 9,
        locked: true,
        lockedUntil: '2026-11-23T10:05:00.000Z',
      },
    ],
  },
)

export const listTotpUsersSchema = {
  operationId: 'listTotpUsers',
  summary: "List an account's users of managed TOTP factors, by user ID",
  tags: ['totp-users'],
  params: Type.Object({ id: params.properties.id }),
  // The cursor names the last user of the page: longer than other cursors for the longest user IDs.
  querystring: Type.Object(
    { ...paging, after: Type.Optional(Type.String({ minLength: 1, maxLength: MAX_USER_CURSOR, description: 'The `next` cursor of the previous page.' })) },
    strict,
  ),
  response: { 200: page(totpUser, 'A page of users.'), ...errors(['NOT_FOUND', 'BAD_CURSOR']) },
}

export const getTotpUserSchema = {
  operationId: 'getTotpUser',
  summary: "A user's factor states, recovery codes left and lock",
  description: "No secret, sealed or not, is ever shown. Another account's user, like a user that does not exist, is 404.",
  tags: ['totp-users'],
  params,
  response: { 200: { ...userState, description: 'The user.' }, ...errors(['NOT_FOUND']) },
}

export const clearTotpUserLockoutSchema = {
  operationId: 'clearTotpUserLockout',
  summary: "Clear a user's lockout",
  description:
    "The user's run of failed codes and their lock are forgotten: their next right code is taken at once. Recorded in the audit trail as `factor-lockout.clear`.",
  tags: ['totp-users'],
  params,
  response: {
    200: {
      ...Type.Object({ cleared: Type.Boolean({ description: 'false: the user had no failures to clear.' }) }, { examples: [{ cleared: true }] }),
      description: 'Done.',
    },
    ...errors(['NOT_FOUND'], { write: true }),
  },
}

export const deleteTotpUserSchema = {
  operationId: 'deleteTotpUser',
  summary: "Delete a user's factors and recovery codes",
  description:
    'For a user who lost their authenticator and their recovery codes (check who asks first): their codes stop working at once, and they may enrol again. The `factor.deleted` event (with `by: "operator"`) goes to the account\'s audit trail and webhooks.',
  tags: ['totp-users'],
  params,
  response: {
    200: {
      ...Type.Object({ deleted: Type.Literal(true), userID: Type.String() }, { examples: [{ deleted: true, userID: 'user-42' }] }),
      description: 'Deleted.',
    },
    ...errors(['NOT_FOUND'], { write: true }),
  },
}

const settingsView = Type.Object(
  {
    accountId: Type.String(),
    rpId: nullable(Type.String(), "The relying party's ID passkeys are registered for: the site's host name (example.com). null: passkeys off."),
    rpName: nullable(Type.String(), 'The name authenticators show for it (default: rpId).'),
    origins: Type.Array(Type.String(), { description: 'The origins (https://app.example.com) the browser may answer from: on rpId or a subdomain of it.' }),
    userLimit: nullable(
      Type.Integer(),
      "Attempts (verify, activate, resync, recover, passkey sign-in) per user in the window; null: the server's FACTOR_USER_LIMIT.",
    ),
    keyLimit: nullable(
      Type.Integer(),
      "Attempts per caller-supplied rate key (the end user's IP, say) in the window, across the account's users; null: the server's FACTOR_KEY_LIMIT.",
    ),
    limitWindowSeconds: nullable(Type.Integer(), "The limits' window in seconds; null: the server's FACTOR_LIMIT_WINDOW_SECONDS."),
    updatedAt: nullable(time(), 'null: never set.'),
  },
  {
    examples: [
      {
        accountId: 'acc_01JD3Q5Z8X',
        rpId: 'acme.example',
        rpName: 'Acme',
        origins: ['https://acme.example', 'https://app.acme.example'],
        userLimit: 10,
        keyLimit: null,
        limitWindowSeconds: 60,
        updatedAt: '2026-11-28T09:00:00.000Z',
      },
    ],
  },
)

export const getFactorSettingsSchema = {
  operationId: 'getFactorSettings',
  summary: "An account's factor settings: its passkeys' relying party and its attempt limits",
  tags: ['totp-users'],
  params: Type.Object({ id: params.properties.id }),
  response: { 200: { ...settingsView, description: 'The settings.' }, ...errors(['NOT_FOUND']) },
}

/** A limit or null, as one type list: with a union, the validator's type coercion would take 0 for null (a cleared limit). */
const limit = (description: string, max: number) =>
  Type.Optional(Type.Unsafe<number | null>({ type: ['integer', 'null'], minimum: 1, maximum: max, description: `${description} null: the server's default.` }))

export const updateFactorSettingsSchema = {
  operationId: 'updateFactorSettings',
  summary: "Change an account's factor settings",
  description:
    "A field left out stays; null clears it (a limit then takes the server's default). The origins must be https (http only for localhost) on rpId or a subdomain of it: a browser refuses any other. Recorded as `factor-settings.update`.",
  tags: ['totp-users'],
  params: Type.Object({ id: params.properties.id }),
  body: Type.Object(
    {
      rpId: Type.Optional(nullable(Type.String({ minLength: 1, maxLength: 253 }), 'The host name passkeys are registered for.')),
      rpName: Type.Optional(nullable(Type.String({ minLength: 1, maxLength: 64 }), 'The name authenticators show.')),
      origins: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 300 }), { maxItems: 16, description: 'The allowed origins, all of them.' })),
      userLimit: limit('Attempts per user in the window.', 10_000),
      keyLimit: limit('Attempts per caller-supplied rate key in the window.', 1_000_000),
      limitWindowSeconds: limit('The window, in seconds.', 86_400),
    },
    { ...strict, examples: [{ rpId: 'acme.example', rpName: 'Acme', origins: ['https://acme.example'], userLimit: 10, limitWindowSeconds: 60 }] },
  ),
  response: { 200: { ...settingsView, description: 'The settings now.' }, ...errors(['NOT_FOUND'], { write: true, body: true }) },
}

export const importFactorsSchema = {
  operationId: 'importFactors',
  summary: "Import an account's users' TOTP secrets from a CSV, reporting each line",
  description: `The body is a CSV (\`text/csv\`, RFC 4180, UTF-8; a first line \`userID,secret,label\` is taken as a header): one line per factor, \`userID, secret, label\` where the secret is base32 or the otpauth:// URI the user scanned (its algorithm, digits, period and issuer are taken from it; a bare secret is SHA1, 6 digits, 30 s under the \`applicationID\` given here). Each line is imported as \`importFactor\` does: sealed on arrival, never shown again, one \`factor.created\` event per factor (imported, by the operator). The answer streams as the file is read: one JSON line per line of the file, in order, each line once (\`imported\`, \`exists\`: imported before, \`refused\` with the catalogue code and why, or \`skipped\` before \`from\`; blank lines and the header are not reported), then a summary line whose \`lines\` is \`imported + exists + refused + skipped\`. A line that cannot be read is refused alone and the others go in: \`CSV_LINE_TOO_LONG\` past ${MAX_LINE} bytes, \`CSV_LINE_INVALID\` when it is not UTF-8, holds a NUL, a byte order mark past the file's start or a CR that does not end it, is not RFC 4180 CSV, or has other than 2 or 3 fields. Run it again after an interruption: what went in is \`exists\`, the rest goes in; or pass \`from\` with the line after the last reported. At most \`IMPORT_MAX_BYTES\` are read.`,
  tags: ['totp-users'],
  params: Type.Object({ id: params.properties.id }),
  querystring: Type.Object(
    {
      applicationID: Type.Optional(Type.String({ minLength: 1, maxLength: 256, description: "The issuer of bare secrets (a URI's own issuer wins)." })),
      profile: Type.Optional(
        Type.String({ minLength: 1, maxLength: 32, default: 'any', description: "The app whose parameters each secret's must be within." }),
      ),
      status: Type.Optional(
        Type.String({ enum: ['active', 'pending'], default: 'active', description: "`active` at once, or `pending` until each user's first code." }),
      ),
      from: Type.Optional(
        Type.Integer({ minimum: 1, maximum: 100_000_000, default: 1, description: 'The first line of the file to import; earlier ones are skipped.' }),
      ),
    },
    strict,
  ),
  response: {
    200: {
      description: 'One JSON object per line of the file, as each is known, then `{"done":true,…}` with the counts.',
      content: {
        'application/x-ndjson': {
          schema: Type.String({
            examples: [
              '{"line":2,"userID":"alice@example.com","outcome":"imported","factorID":"fct_5b0c9e2a7d41f386"}\n{"line":3,"userID":"bob","outcome":"refused","code":"SECRET_INVALID","message":"Secret must be base32…"}\n{"done":true,"lines":2,"imported":1,"exists":0,"refused":1,"skipped":0,"stopped":null}\n',
            ],
          }),
        },
      },
    },
    ...errors(['NOT_FOUND', 'CSV_REQUIRED'], { write: true }),
  },
}
