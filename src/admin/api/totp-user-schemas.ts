/**
 * Route schemas of the admin API's users of managed TOTP factors: what an operator reads of
 * a user (their factors' states, never a secret; recovery codes left; their lock) and the two
 * things an operator may do (clear the lock, delete the user's factors). Factors are shown
 * under the public API's field names (GET /totp/users/{userID}/factors), so that both read alike.
 */
import { Type } from 'typebox'
import { ALGORITHMS } from '../../totp/otp.ts'
import { FACTOR_EXAMPLE } from '../../totp/factors/schemas.ts'
import { MAX_USER_CURSOR, MAX_USER_ID_LENGTH, USER_ID_RULE } from '../../domain/user-ids.ts'
import { errors, id, nullable, page, paging, strict, time } from './schemas.ts'

const params = Type.Object({
  id: id('account', 'acc_01JD3Q5Z8X'),
  userID: Type.String({
    maxLength: 4 * MAX_USER_ID_LENGTH,
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

const factor = Type.Object(
  {
    factorID: Type.String(),
    status: Type.String({ enum: ['pending', 'active'] }),
    label: nullable(Type.String(), 'The name given at creation ("Work phone").'),
    applicationID: Type.String({ description: 'The issuer shown in the authenticator app.' }),
    profile: Type.String({ description: 'The compatibility profile it was created under.' }),
    algorithm: Type.String({ enum: [...ALGORITHMS] }),
    tokenLength: Type.Integer({ description: 'Digits in a code.' }),
    tokenValidity: Type.Integer({ description: 'Time step in seconds.' }),
    driftSteps: Type.Integer({ description: "The device's clock drift in time steps, as the last resync found it." }),
    createdAt: time(),
    activatedAt: nullable(time(), 'null: pending.'),
    expiresAt: nullable(time(), 'When a pending factor is gone; null once active.'),
  },
  { examples: [FACTOR_EXAMPLE] },
)

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
