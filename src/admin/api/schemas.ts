/**
 * Route schemas of the admin API: they validate requests (every bad field at once), drive
 * the response serialisers (so that nothing but the documented fields, never a key's hash,
 * leaves) and generate the admin OpenAPI document, with an operationId, response schemas and
 * examples on every route.
 */
import { IDEMPOTENCY_HEADERS, IDEMPOTENCY_REPLAY_CODES } from '../../http/idempotency.ts'
import { Type, type TSchema } from 'typebox'
import type { ErrorCode } from '../../errors/catalogue.ts'
import { errorResponses } from '../../openapi/responses.ts'
import { ACCOUNT_STATUSES, DEFAULT_ROLL_GRACE_SECONDS, GROUPS, REGIONS } from '../../domain/accounts.ts'
import { MAX_GRACE_SECONDS, MAX_NAME_LENGTH } from '../../services/accounts.ts'

/** Largest page of a list, and the page when `limit` is not given. */
export const MAX_LIMIT = 200
export const DEFAULT_LIMIT = 50
/** Days a usage report covers when `from` is not given. */
export const DEFAULT_USAGE_DAYS = 30

/** Codes every admin route can answer, besides its own. */
const COMMON: readonly ErrorCode[] = ['ADMIN_TOKEN_REQUIRED', 'ADMIN_TOKEN_INVALID', 'FIELD_INVALID', 'INTERNAL_ERROR', 'SERVICE_UNAVAILABLE']
/** Codes of routes that take a JSON body. */
const BODY: readonly ErrorCode[] = ['MALFORMED_BODY', 'BODY_TOO_LARGE', 'JSON_REQUIRED']

const WWW_AUTHENTICATE = {
  type: 'string',
  description: 'Bearer realm="tessera-admin", with error="invalid_token" (401, a token was given) or error="insufficient_scope" (403).',
}

/** errors builds a route's error answers: its own codes, the body codes for `write` routes with a body, and the common ones. */
export function errors(codes: readonly ErrorCode[], opts: { write?: boolean; body?: boolean } = {}) {
  const all = [...codes, ...(opts.write ? ['ADMIN_READ_ONLY' as const] : []), ...(opts.body ? BODY : [])]
  const out = errorResponses(all, { body: false, common: COMMON }) as Record<number, Record<string, unknown>>
  // The 401 and 403 carry WWW-Authenticate (RFC 6750 §3); @fastify/swagger moves `headers` into the response object.
  for (const status of [401, 403]) if (out[status]) out[status] = { ...out[status], headers: { 'WWW-Authenticate': WWW_AUTHENTICATE } }
  return out
}

export const id = (what: string, example: string) => Type.String({ minLength: 1, maxLength: 100, description: `The ${what}'s id.`, examples: [example] })
export const time = (description?: string) => Type.String(description === undefined ? { format: 'date-time' } : { format: 'date-time', description })
export const nullable = <T extends TSchema>(schema: T, description: string) => Type.Union([schema, Type.Null()], { description })
const name = (what: string) =>
  Type.String({
    minLength: 1,
    maxLength: MAX_NAME_LENGTH,
    description: `The ${what}'s name: 1 to ${MAX_NAME_LENGTH} characters of text, no control characters.`,
  })

const accountStatus = Type.String({ enum: [...ACCOUNT_STATUSES], description: '`active`: its keys work; `suspended`: every call of the account is refused.' })

export const account = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    status: accountStatus,
    createdAt: time('When the account was created.'),
  },
  { examples: [{ id: 'acc_01JD3Q5Z8X', name: 'Acme Ltd', status: 'active', createdAt: '2026-11-23T09:12:44.120Z' }] },
)

const scope = Type.Object(
  {
    groups: nullable(Type.Array(Type.String({ enum: [...GROUPS] })), 'The API groups the key may call; null: all.'),
    regions: nullable(Type.Array(Type.String({ enum: [...REGIONS] })), 'The regions the key may call; null: all.'),
  },
  { description: "What the key may call, within its account's subscriptions." },
)

const KEY_EXAMPLE = {
  id: 'key_01JD3Q7B2M',
  accountId: 'acc_01JD3Q5Z8X',
  name: 'production',
  hint: '9f3a',
  createdAt: '2026-11-23T09:13:02.551Z',
  revokedAt: null,
  expiresAt: null,
  scope: { groups: null, regions: null },
  rolledTo: null,
  lastUsedAt: null,
  lastUsedRegion: null,
}

export const apiKey = Type.Object(
  {
    id: Type.String(),
    accountId: Type.String(),
    name: Type.String(),
    hint: Type.String({ description: "The key's last four characters, to tell keys apart; the key itself is shown once, at creation." }),
    createdAt: time('When the key was created.'),
    revokedAt: nullable(time(), 'When the key was revoked; null: it was not.'),
    expiresAt: nullable(time(), "When the key stops working (set at creation, or by a roll's grace); null: never."),
    scope,
    rolledTo: nullable(Type.String(), 'The key that replaced this one in a roll (it may have been deleted since, once ended: `KEY_ENDED_KEPT_PER_ACCOUNT`).'),
    lastUsedAt: nullable(time(), 'Its last admitted call (recorded at most once a minute).'),
    lastUsedRegion: nullable(Type.String({ enum: [...REGIONS] }), 'The region of that call.'),
  },
  { examples: [KEY_EXAMPLE] },
)

const subscription = Type.Object(
  {
    accountId: Type.String(),
    region: Type.String({ enum: [...REGIONS] }),
    group: Type.String({ enum: [...GROUPS] }),
    status: Type.String({ enum: ['active', 'inactive', 'pending'], description: "`pending`: asked for, waiting for an operator's approval." }),
    updatedAt: time('When the status last changed.'),
  },
  { examples: [{ accountId: 'acc_01JD3Q5Z8X', region: 'eu', group: 'totp', status: 'active', updatedAt: '2026-11-23T09:14:10.004Z' }] },
)

const PLAN_EXAMPLE = { rate: 100, burst: 200, quota: 0, period: 'month', weights: { totp: 2, converter: 1 } }

const plan = Type.Object(
  {
    rate: Type.Number({ minimum: 0, maximum: 1e6, description: 'Calls per second refilled (token bucket); 0: no throttle.' }),
    burst: Type.Integer({ minimum: 1, maximum: 1e9, description: 'Calls at once (bucket size).' }),
    quota: Type.Integer({ minimum: 0, maximum: 1e12, description: 'Units per period; 0: no quota.' }),
    period: Type.String({ enum: ['day', 'month'], description: 'The quota window, a UTC calendar day or month.' }),
    weights: Type.Object({
      totp: Type.Integer({ minimum: 0, maximum: 1e6, description: 'Units a TOTP call costs.' }),
      converter: Type.Integer({ minimum: 0, maximum: 1e6, description: 'Units a conversion costs.' }),
    }),
  },
  { examples: [PLAN_EXAMPLE] },
)

const planAnswer = Type.Object(
  {
    plan,
    own: Type.Boolean({ description: "true: the account's own plan; false: the default plan (PLAN_* settings)." }),
  },
  { examples: [{ plan: PLAN_EXAMPLE, own: false }] },
)

const auditEvent = Type.Object(
  {
    id: Type.String({ description: 'Time-ordered: a later event has a greater id.' }),
    at: time('When it happened.'),
    actor: Type.String({ description: '`admin-token:ID`, `portal-user:ID`, `cli` or `system`.' }),
    action: Type.String({ description: 'Dotted verb: `account.create`, `key.roll`, `subscription.set`, …' }),
    target: Type.Object({ type: Type.String(), id: Type.String() }),
    accountId: nullable(Type.String(), 'The account concerned, when there is one.'),
    ip: nullable(Type.String(), 'The source address of the request, when the change came over HTTP.'),
    outcome: Type.String({ enum: ['success', 'failure'], description: '`failure`: a refused change (the detail says why).' }),
    detail: Type.Record(Type.String(), Type.Unknown(), { description: 'What changed (new values) or why it failed; never a secret.' }),
  },
  {
    examples: [
      {
        id: 'aud_01JD3Q9K4T',
        at: '2026-11-23T09:13:02.551Z',
        actor: 'admin-token:adm_01JD3Q1C7Y',
        action: 'key.create',
        target: { type: 'key', id: 'key_01JD3Q7B2M' },
        accountId: 'acc_01JD3Q5Z8X',
        ip: '10.0.0.7',
        outcome: 'success',
        detail: { name: 'production', expiresAt: null, scope: { groups: null, regions: null }, hint: '9f3a' },
      },
    ],
  },
)

const usageLine = Type.Object({
  day: Type.Optional(Type.String({ description: 'UTC day (by=day).' })),
  keyId: Type.Optional(Type.String({ description: 'The key (by=key).' })),
  region: Type.Optional(Type.String({ enum: [...REGIONS], description: 'The region (by=region).' })),
  group: Type.String({ enum: [...GROUPS] }),
  count: Type.Integer({ description: 'Admitted calls.' }),
  units: Type.Integer({ description: 'Units they cost against the quota.' }),
})

/** listExample: a list of the item's own example, for the reference (none when the item has none). */
const listExample = (item: TSchema, next: string | null) => {
  const examples = (item as { examples?: unknown }).examples
  return Array.isArray(examples) && examples.length > 0 ? { examples: [{ items: [examples[0]], next }] } : {}
}

/** page: one page of a list and the cursor of the next one. */
export const page = <T extends TSchema>(item: T, description: string) =>
  Type.Object(
    {
      items: Type.Array(item),
      next: nullable(Type.String(), 'Pass as `after` for the next page; null on the last page.'),
    },
    { description, ...listExample(item, 'eyJhZnRlciI6ImFjY18wMUpEM1E1WjhYIn0') },
  )

/** Lists of what an account has few of come whole, in the same shape as a page (`next` is null). */
export const whole = <T extends TSchema>(item: T, description: string) =>
  Type.Object(
    {
      items: Type.Array(item),
      next: Type.Null({ description: 'Always null: the list comes whole.' }),
    },
    { description, ...listExample(item, null) },
  )

export const paging = {
  after: Type.Optional(Type.String({ minLength: 1, maxLength: 512, description: 'The `next` cursor of the previous page.' })),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_LIMIT, default: DEFAULT_LIMIT, description: `Items per page, 1 to ${MAX_LIMIT}.` })),
}

const accountParams = Type.Object({ id: id('account', 'acc_01JD3Q5Z8X') })
const keyParams = Type.Object({ id: id('key', 'key_01JD3Q7B2M') })

export const strict = { additionalProperties: false }

/** created: a 201 answer, with the Location of what was made. */
export const created = (schema: TSchema, description: string) => ({
  ...schema,
  description,
  headers: { Location: { type: 'string', description: 'The path of what was created.' } },
})

// Accounts

export const createAccountSchema = {
  operationId: 'createAccount',
  summary: 'Create an account',
  description: 'The account starts `active`, with no key, no subscription and the default plan.',
  tags: ['accounts'],
  headers: IDEMPOTENCY_HEADERS,
  body: Type.Object({ name: name('account') }, { ...strict, examples: [{ name: 'Acme Ltd' }] }),
  response: { 201: created(account, 'The account.'), ...errors(['LIMIT_REACHED', ...IDEMPOTENCY_REPLAY_CODES], { write: true, body: true }) },
}

export const listAccountsSchema = {
  operationId: 'listAccounts',
  summary: 'List accounts, oldest first',
  tags: ['accounts'],
  querystring: Type.Object(
    {
      status: Type.Optional(accountStatus),
      name: Type.Optional(Type.String({ minLength: 1, maxLength: MAX_NAME_LENGTH, description: 'Accounts whose name contains this (any case).' })),
      ...paging,
    },
    strict,
  ),
  response: { 200: page(account, 'A page of accounts.'), ...errors(['BAD_CURSOR']) },
}

export const getAccountSchema = {
  operationId: 'getAccount',
  summary: 'Get an account',
  tags: ['accounts'],
  params: accountParams,
  response: { 200: { ...account, description: 'The account.' }, ...errors(['NOT_FOUND']) },
}

export const updateAccountSchema = {
  operationId: 'updateAccount',
  summary: 'Rename, suspend or reactivate an account',
  description: "A suspended account's keys are refused at once (the same 403 as an unknown key); reactivating it lets them work again.",
  tags: ['accounts'],
  params: accountParams,
  body: Type.Object(
    { name: Type.Optional(name('account')), status: Type.Optional(accountStatus) },
    { ...strict, minProperties: 1, examples: [{ status: 'suspended' }] },
  ),
  response: { 200: { ...account, description: 'The account as changed.' }, ...errors(['NOT_FOUND'], { write: true, body: true }) },
}

// Keys

/** A key as created or rolled: its fields and, this once, the key itself. */
const theKey = Type.String({ description: 'The API key itself, shown this once: only its HMAC is stored.' })
const keyCreated = Type.Object(
  { ...apiKey.properties, apiKey: theKey },
  { examples: [{ ...KEY_EXAMPLE, apiKey: 'tsr_0c1d9a4e5b7f2e8c3a6d1b0f4e7a2c5d8b9f3a' }] },
)

export const createKeySchema = {
  operationId: 'createKey',
  summary: 'Create an API key for an account (shown once)',
  tags: ['keys'],
  params: accountParams,
  headers: IDEMPOTENCY_HEADERS,
  body: Type.Object(
    {
      name: Type.Optional(Type.String({ maxLength: MAX_NAME_LENGTH, description: 'A label for people; empty by default.' })),
      expiresAt: Type.Optional(nullable(Type.String({ format: 'date-time' }), 'When the key stops working, in the future; absent or null: never.')),
      scope: Type.Optional(
        nullable(
          Type.Object(
            {
              groups: Type.Optional(nullable(Type.Array(Type.String({ enum: [...GROUPS] }), { maxItems: 10 }), 'Groups it may call; null: all.')),
              regions: Type.Optional(nullable(Type.Array(Type.String({ enum: [...REGIONS] }), { maxItems: 10 }), 'Regions it may call; null: all.')),
            },
            strict,
          ),
          "What the key may call, within the account's subscriptions; absent or null: all.",
        ),
      ),
    },
    { ...strict, examples: [{ name: 'production', scope: { groups: ['totp'] } }] },
  ),
  response: {
    201: created(keyCreated, 'The key, with the key itself (once).'),
    ...errors(['NOT_FOUND', 'LIMIT_REACHED', ...IDEMPOTENCY_REPLAY_CODES], { write: true, body: true }),
  },
}

export const listKeysSchema = {
  operationId: 'listKeys',
  summary: "List an account's keys (revoked and expired ones included)",
  description:
    'Ended keys (revoked, expired, or rolled with their grace over) are listed until a creation or roll deletes them: an account keeps the `KEY_ENDED_KEPT_PER_ACCOUNT` (1000) that ended last; their audit events stay. A `rolledTo` may name a key deleted so.',
  tags: ['keys'],
  params: accountParams,
  response: { 200: whole(apiKey, "The account's keys, oldest first."), ...errors(['NOT_FOUND']) },
}

export const getKeySchema = {
  operationId: 'getKey',
  summary: 'Get a key',
  tags: ['keys'],
  params: keyParams,
  response: { 200: { ...apiKey, description: 'The key (never the key itself).' }, ...errors(['NOT_FOUND']) },
}

export const rollKeySchema = {
  operationId: 'rollKey',
  summary: 'Replace a key by a new one (shown once)',
  description:
    "The new key has the old one's name, scope and expiry. The old key keeps working for `graceSeconds` (default 86400, 24 hours, as in the portal and the CLI; 0: it stops at once). A key rolled to the old one and still in its grace stops now: a chain of rolls keeps at most two working keys.",
  tags: ['keys'],
  params: keyParams,
  headers: IDEMPOTENCY_HEADERS,
  body: Type.Object(
    {
      graceSeconds: Type.Optional(
        Type.Integer({
          minimum: 0,
          maximum: MAX_GRACE_SECONDS,
          default: DEFAULT_ROLL_GRACE_SECONDS,
          description: `Seconds the old key keeps working, 0 to ${MAX_GRACE_SECONDS} (7 days); default ${DEFAULT_ROLL_GRACE_SECONDS} (24 hours).`,
        }),
      ),
      name: Type.Optional(Type.String({ maxLength: MAX_NAME_LENGTH, description: "A name for the new key; default: the old key's." })),
    },
    { ...strict, examples: [{ graceSeconds: 3600 }] },
  ),
  response: {
    201: created(
      Type.Object(
        { ...apiKey.properties, apiKey: theKey, old: { ...apiKey, description: 'The old key as it now stands (its grace is its expiresAt).' } },
        {
          examples: [
            {
              ...KEY_EXAMPLE,
              id: 'key_01JD4K2W9T',
              hint: '7c1e',
              createdAt: '2026-11-24T08:00:00.000Z',
              apiKey: 'tsr_5e2b8d1f4a7c0e3b6d9f2a5c8e1b4d7f0a3c7c1e',
              old: { ...KEY_EXAMPLE, expiresAt: '2026-11-25T08:00:00.000Z', rolledTo: 'key_01JD4K2W9T' },
            },
          ],
        },
      ),
      'The new key with the key itself (once), and the old key.',
    ),
    ...errors(['NOT_FOUND', 'CONFLICT', 'LIMIT_REACHED', ...IDEMPOTENCY_REPLAY_CODES], { write: true, body: true }),
  },
}

export const revokeKeySchema = {
  operationId: 'revokeKey',
  summary: 'Revoke a key',
  description:
    'The key is refused at once, on every node (the same 403 as an unknown key); so is a key rolled to it that is still in its grace, which has no key left to lead to.',
  tags: ['keys'],
  params: keyParams,
  response: { 200: { ...apiKey, description: 'The key as revoked.' }, ...errors(['NOT_FOUND', 'CONFLICT'], { write: true }) },
}

// Subscriptions

export const listSubscriptionsSchema = {
  operationId: 'listSubscriptions',
  summary: "List an account's subscriptions",
  tags: ['subscriptions'],
  params: accountParams,
  response: { 200: whole(subscription, "The account's subscriptions, per region and group."), ...errors(['NOT_FOUND']) },
}

export const setSubscriptionSchema = {
  operationId: 'setSubscription',
  summary: 'Turn a group on or off in a region for an account, or approve a request',
  description: '`approved` makes a `pending` subscription (asked for) `active`, and is refused (409) for any other.',
  tags: ['subscriptions'],
  params: Type.Object({
    id: id('account', 'acc_01JD3Q5Z8X'),
    region: Type.String({ enum: [...REGIONS], description: 'The region.' }),
    group: Type.String({ enum: [...GROUPS], description: 'The API group.' }),
  }),
  body: Type.Object(
    {
      status: Type.String({
        enum: ['active', 'inactive', 'pending', 'approved', 'refused'],
        description:
          '`active`, `inactive`, `pending` (asked for), or, for a pending request only, `approved` (it becomes active) or `refused` (inactive): of two decisions at once, one applies, the other gets 409.',
      }),
    },
    { ...strict, examples: [{ status: 'active' }] },
  ),
  response: { 200: { ...subscription, description: 'The subscription as set.' }, ...errors(['NOT_FOUND', 'CONFLICT'], { write: true, body: true }) },
}

// Plans

export const getPlanSchema = {
  operationId: 'getPlan',
  summary: "Get an account's plan (its own, or the default)",
  tags: ['plans'],
  params: accountParams,
  response: { 200: { ...planAnswer, description: 'The plan that applies to the account.' }, ...errors(['NOT_FOUND']) },
}

export const setPlanSchema = {
  operationId: 'setPlan',
  summary: 'Give an account its own plan',
  description: "Fields left out keep their current value (the account's own plan, or the default).",
  tags: ['plans'],
  params: accountParams,
  body: Type.Object(
    {
      rate: Type.Optional(plan.properties.rate),
      burst: Type.Optional(plan.properties.burst),
      quota: Type.Optional(plan.properties.quota),
      period: Type.Optional(plan.properties.period),
      weights: Type.Optional(
        Type.Object(
          {
            totp: Type.Optional(plan.properties.weights.properties.totp),
            converter: Type.Optional(plan.properties.weights.properties.converter),
          },
          strict,
        ),
      ),
    },
    { ...strict, examples: [{ rate: 10, burst: 20, quota: 5000, period: 'month' }] },
  ),
  response: { 200: { ...planAnswer, description: "The account's plan." }, ...errors(['NOT_FOUND'], { write: true, body: true }) },
}

export const resetPlanSchema = {
  operationId: 'resetPlan',
  summary: 'Put an account back on the default plan',
  tags: ['plans'],
  params: accountParams,
  response: { 200: { ...planAnswer, description: 'The default plan, which now applies.' }, ...errors(['NOT_FOUND'], { write: true }) },
}

// Usage

const day = (what: string) => Type.String({ pattern: '^\\d{4}-\\d\\d-\\d\\d$', description: what, examples: ['2026-11-01'] })

export const usageSchema = {
  operationId: 'getUsage',
  summary: "An account's admitted calls and units, per day, key or region",
  description: `JSON by default; CSV (a header row, RFC 4180) with \`Accept: text/csv\`. Counts reach the store every \`USAGE_FLUSH_MS\`. Without \`from\`, the ${DEFAULT_USAGE_DAYS} days up to \`to\` (default: today, UTC).`,
  tags: ['usage'],
  params: accountParams,
  querystring: Type.Object(
    {
      from: Type.Optional(day('First UTC day, YYYY-MM-DD.')),
      to: Type.Optional(day('Last UTC day (included), YYYY-MM-DD; at most 400 days after `from`.')),
      by: Type.Optional(Type.String({ enum: ['day', 'key', 'region'], default: 'day', description: 'One line per day, key or region, and API group.' })),
    },
    strict,
  ),
  response: {
    200: {
      description: 'The report.',
      content: {
        'application/json': {
          schema: Type.Object(
            {
              accountId: Type.String(),
              from: Type.String(),
              to: Type.String(),
              by: Type.String({ enum: ['day', 'key', 'region'] }),
              items: Type.Array(usageLine),
            },
            {
              examples: [
                {
                  accountId: 'acc_01JD3Q5Z8X',
                  from: '2026-11-01',
                  to: '2026-11-23',
                  by: 'day',
                  items: [{ day: '2026-11-22', group: 'totp', count: 1520, units: 3040 }],
                },
              ],
            },
          ),
        },
        'text/csv': {
          schema: Type.String({
            description: 'A header row with the JSON field names (day, keyId or region; then group, count, units), then one row per line; CRLF line ends.',
            examples: ['day,group,count,units\r\n2026-11-22,totp,1520,3040\r\n'],
          }),
        },
      },
    },
    ...errors(['NOT_FOUND']),
  },
}

// The trail

export const auditEventsSchema = {
  operationId: 'listAuditEvents',
  summary: 'The audit trail, newest first',
  description:
    'Every change and refused change, by any door (admin API, CLI, portal). No route changes or deletes an event; only retention (`AUDIT_RETENTION_DAYS`) removes them, oldest first.',
  tags: ['audit'],
  querystring: Type.Object(
    {
      account: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'Only events about this account.' })),
      actor: Type.Optional(
        Type.String({ minLength: 1, maxLength: 200, description: 'Only events of this actor: `admin-token:ID`, `portal-user:ID`, `cli`, `system`.' }),
      ),
      action: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'Only events of this action, such as `key.revoke`.' })),
      ...paging,
    },
    strict,
  ),
  response: { 200: page(auditEvent, 'A page of events, newest first.'), ...errors(['BAD_CURSOR']) },
}

// TOTP lockouts

export const clearLockoutSchema = {
  operationId: 'clearTotpLockout',
  summary: "Clear one secret's verifyOTP lockout for an account",
  description: "Give the secret, or the fingerprint the lockout's log line names. Its failures are forgotten and verifyOTP takes its codes again at once.",
  tags: ['totp'],
  params: accountParams,
  body: Type.Object(
    {
      secret: Type.Optional(Type.String({ maxLength: 1024, description: 'The base32 secret.' })),
      fingerprint: Type.Optional(Type.String({ maxLength: 43, description: "The fingerprint from the lockout's log line (43 characters)." })),
      period: Type.Optional(Type.Integer({ minimum: 15, maximum: 3600, default: 30, description: "The secret's time step (tokenValidity), with `secret`." })),
    },
    { ...strict, examples: [{ secret: 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP' }] },
  ),
  response: {
    200: {
      ...Type.Object({ cleared: Type.Boolean({ description: 'false: the secret had no failures to clear.' }) }, { examples: [{ cleared: true }] }),
      description: 'Done.',
    },
    ...errors(['NOT_FOUND'], { write: true, body: true }),
  },
}

/** The tags of the document, in order. */
export const TAGS = [
  { name: 'accounts', description: 'Customer accounts' },
  { name: 'keys', description: 'API keys: created and rolled keys are shown once' },
  { name: 'subscriptions', description: 'Which API groups an account may call in which region' },
  { name: 'plans', description: 'Throttle and quota' },
  { name: 'usage', description: 'Admitted calls and units' },
  { name: 'audit', description: 'The trail of every change' },
  { name: 'totp-users', description: 'Users of managed TOTP factors: their factor states and lock; clear the lock, delete their factors' },
  { name: 'totp', description: 'verifyOTP lockouts' },
  { name: 'webhooks', description: "An account's webhook endpoints (Standard Webhooks) and their delivery logs" },
]
