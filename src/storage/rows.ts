/**
 * What both relational adapters share: ids, row mappers and cursors. Rows come as SQLite
 * gives them (text dates, text lists) or as pg does (Date objects, jsonb parsed): the
 * mappers take either.
 */
import type { Account, AccountStatus, AdminToken, ApiKeyInfo, AuditEvent, Plan, Subscription, Algorithm } from '../domain/accounts.ts'
import type { Page } from '../domain/lists.ts'
import type {
  EmailToken,
  Member,
  Membership,
  NewUser,
  Role,
  Session,
  SsoIdentity,
  SsoMfa,
  SsoProvider,
  SsoRequest,
  TokenPurpose,
  User,
  UserStatus,
} from '../domain/portal.ts'
import { emailKey } from '../domain/portal.ts'
import {
  NO_FACTOR_SETTINGS,
  type ChallengePurpose,
  type Factor,
  type FactorSettings,
  type FactorStatus,
  type OnboardingRecord,
  type PasskeyChallenge,
  type PasskeyMeta,
  type TotpUser,
} from '../domain/factors.ts'
import { CursorError } from '../domain/errors.ts'
import { MAX_USER_CURSOR } from '../domain/user-ids.ts'
import type { KeyScope, SubscriptionStatus } from '../domain/accounts.ts'
import type { Group, Region } from '../domain/regions.ts'

export type Row = Record<string, unknown>

export const iso = (value: unknown): string => (value instanceof Date ? value.toISOString() : String(value))
const isoOrNull = (value: unknown): string | null => (value === null || value === undefined ? null : iso(value))
const list = <T extends string>(value: unknown): readonly T[] | null =>
  value === null || value === undefined ? null : String(value) === '' ? [] : (String(value).split(',') as T[])

/** scopeColumns: a scope as two nullable comma lists. */
export const scopeColumns = (scope: KeyScope): [string | null, string | null] => [
  scope.groups === null ? null : scope.groups.join(','),
  scope.regions === null ? null : scope.regions.join(','),
]

/** toScope: the two nullable comma lists back as a scope. */
export const toScope = (r: Row): KeyScope => ({ groups: list<Group>(r.scope_groups), regions: list<Region>(r.scope_regions) })

export const toAccount = (r: Row): Account => ({ id: String(r.id), name: String(r.name), status: r.status as AccountStatus, createdAt: iso(r.created_at) })

export const toKey = (r: Row): ApiKeyInfo => ({
  id: String(r.id),
  accountId: String(r.account_id),
  name: String(r.name),
  hint: String(r.hint),
  createdAt: iso(r.created_at),
  revokedAt: isoOrNull(r.revoked_at),
  expiresAt: isoOrNull(r.expires_at),
  scope: toScope(r),
  rolledTo: r.rolled_to === null || r.rolled_to === undefined ? null : String(r.rolled_to),
  lastUsedAt: isoOrNull(r.last_used_at),
  lastUsedRegion: r.last_used_region === null || r.last_used_region === undefined ? null : (String(r.last_used_region) as Region),
})

export const toPlan = (r: Row): Plan => ({
  rate: Number(r.rate),
  burst: Number(r.burst),
  quota: Number(r.quota),
  period: r.period as Plan['period'],
  weights: { totp: Number(r.weight_totp ?? 1), converter: Number(r.weight_converter ?? 1) },
})

export const toSubscription = (r: Row): Subscription => ({
  accountId: String(r.account_id),
  region: r.region as Region,
  group: r.api_group as Group,
  status: r.status as SubscriptionStatus,
  updatedAt: iso(r.updated_at),
})

export const toOnboarding = (r: Row): OnboardingRecord => ({
  accountId: String(r.account_id),
  applicationId: String(r.application_id),
  userId: String(r.user_id),
  algorithm: r.algorithm as OnboardingRecord['algorithm'],
  digits: Number(r.digits),
  period: Number(r.period),
  secretFingerprint: String(r.secret_fingerprint),
  createdAt: iso(r.created_at),
  updatedAt: iso(r.updated_at),
})

export const toAuditEvent = (r: Row): AuditEvent => ({
  id: String(r.id),
  at: iso(r.at),
  actor: String(r.actor),
  action: String(r.action),
  target: { type: r.target_type as AuditEvent['target']['type'], id: String(r.target_id) },
  accountId: r.account_id === null || r.account_id === undefined ? null : String(r.account_id),
  ip: r.ip === null || r.ip === undefined ? null : String(r.ip),
  outcome: r.outcome as AuditEvent['outcome'],
  detail: (typeof r.detail === 'string' ? JSON.parse(r.detail) : r.detail) as AuditEvent['detail'],
})

export const toAdminToken = (r: Row): AdminToken => ({
  id: String(r.id),
  name: String(r.name),
  scope: r.scope as AdminToken['scope'],
  createdAt: iso(r.created_at),
  revokedAt: isoOrNull(r.revoked_at),
})

const textOrNull = (value: unknown): string | null => (value === null || value === undefined ? null : String(value))
/** SQLite gives booleans as 0 or 1, pg as booleans. */
const bool = (value: unknown): boolean => value === true || Number(value) === 1

export const toUser = (r: Row): User => ({
  id: String(r.id),
  email: String(r.email),
  passwordHash: textOrNull(r.password_hash),
  emailVerifiedAt: isoOrNull(r.email_verified_at),
  status: r.status as UserStatus,
  operator: bool(r.operator),
  totpSecret: textOrNull(r.totp_secret),
  totpEnabledAt: isoOrNull(r.totp_enabled_at),
  createdAt: iso(r.created_at),
  updatedAt: iso(r.updated_at),
})

export const toMember = (r: Row): Member => ({
  accountId: String(r.account_id),
  userId: String(r.user_id),
  email: String(r.email),
  role: r.role as Role,
  createdAt: iso(r.created_at),
})

export const toMembership = (r: Row): Membership => ({
  accountId: String(r.account_id),
  accountName: String(r.account_name),
  accountStatus: r.account_status as AccountStatus,
  role: r.role as Role,
  createdAt: iso(r.created_at),
})

/** toSession reads a session's own columns (`s_` prefixed beside a user's, as findSession joins them). */
export const toSession = (r: Row, prefix = ''): Session => ({
  idHash: String(r[`${prefix}id_hash`]),
  userId: String(r[`${prefix}user_id`]),
  createdAt: iso(r[`${prefix}created_at`]),
  expiresAt: iso(r[`${prefix}expires_at`]),
  lastSeenAt: iso(r[`${prefix}last_seen_at`]),
  twoFactorPending: bool(r[`${prefix}two_factor_pending`]),
  ip: textOrNull(r[`${prefix}ip`]),
  userAgent: textOrNull(r[`${prefix}user_agent`]),
  ssoProviderId: textOrNull(r[`${prefix}sso_provider_id`]),
})

/**
 * newUserValues: a new user's values as both stores insert them (id, email, email_key, password_hash,
 * email_verified_at, status, operator, totp_secret, totp_enabled_at, created_at), the operator flag as the store keeps a boolean.
 */
export const newUserValues = <B>(user: NewUser, flag: (value: boolean) => B) =>
  [
    user.id,
    user.email,
    emailKey(user.email),
    user.passwordHash,
    user.emailVerifiedAt,
    user.status,
    flag(user.operator),
    user.totpSecret,
    user.totpEnabledAt,
    user.createdAt,
  ] as const

export const toSsoProvider = (r: Row): SsoProvider => ({
  id: String(r.id),
  name: String(r.name),
  issuer: String(r.issuer),
  clientId: String(r.client_id),
  clientSecret: textOrNull(r.client_secret),
  domains: String(r.domains) === '' ? [] : String(r.domains).split(','),
  joinAccountId: textOrNull(r.join_account_id),
  joinRole: textOrNull(r.join_role) as Role | null,
  mfa: r.mfa as SsoMfa,
  passwordAllowed: bool(r.password_allowed),
  createdAt: iso(r.created_at),
  updatedAt: iso(r.updated_at),
})

export const toSsoIdentity = (r: Row): SsoIdentity => ({
  providerId: String(r.provider_id),
  subject: String(r.subject),
  userId: String(r.user_id),
  email: String(r.email),
  createdAt: iso(r.created_at),
  lastUsedAt: iso(r.last_used_at),
})

export const toSsoRequest = (r: Row): SsoRequest => ({
  stateHash: String(r.state_hash),
  providerId: String(r.provider_id),
  browserHash: String(r.browser_hash),
  nonce: String(r.nonce),
  verifier: String(r.verifier),
  next: String(r.next),
  linkUserId: textOrNull(r.link_user_id),
  ip: String(r.ip),
  createdAt: iso(r.created_at),
  expiresAt: iso(r.expires_at),
})

export const toEmailToken = (r: Row): EmailToken => ({
  tokenHash: String(r.token_hash),
  purpose: r.purpose as TokenPurpose,
  email: String(r.email),
  userId: textOrNull(r.user_id),
  accountId: textOrNull(r.account_id),
  role: textOrNull(r.role) as Role | null,
  createdAt: iso(r.created_at),
  expiresAt: iso(r.expires_at),
  usedAt: isoOrNull(r.used_at),
})

/** The user columns an update may set, by UserPatch field. */
export const USER_COLUMNS = {
  passwordHash: 'password_hash',
  emailVerifiedAt: 'email_verified_at',
  status: 'status',
  operator: 'operator',
  totpSecret: 'totp_secret',
  totpEnabledAt: 'totp_enabled_at',
} as const

/** Account (and user) cursors carry the last item's creation time and id (the list's order). */
export function accountCursor(item: { readonly createdAt: string; readonly id: string }): string {
  return Buffer.from(JSON.stringify([item.createdAt, item.id])).toString('base64url')
}

export function readAccountCursor(cursor: string): { createdAt: string; id: string } {
  try {
    const value: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'))
    if (Array.isArray(value) && value.length === 2 && typeof value[0] === 'string' && typeof value[1] === 'string' && !Number.isNaN(Date.parse(value[0])))
      return { createdAt: new Date(value[0]).toISOString(), id: value[1] }
  } catch {
    /* below */
  }
  throw new CursorError()
}

/**
 * createdOrderPage is the SELECT of one page of `table` in creation order (created_at, id):
 * after the cursor's row (a row comparison, so that the (created_at, id) index serves it),
 * with the filters `where` gives, one row more than `limit` (which tells whether there is a
 * next page: see pageOf). `param` places a value and gives its placeholder (`?`, or `$n`
 * with `cast` for PostgreSQL's typed comparison); the filters are asked for after the
 * cursor, so that positional placeholders stay in order. A malformed cursor throws CursorError.
 */
export function createdOrderPage(
  table: string,
  query: { readonly cursor?: string | undefined; readonly limit: number },
  param: (value: unknown) => string,
  cast: boolean,
  where: () => readonly (string | null)[],
): string {
  const conditions: string[] = []
  if (query.cursor !== undefined) {
    const after = readAccountCursor(query.cursor)
    conditions.push(
      cast
        ? `(created_at, id) > (${param(after.createdAt)}::timestamptz, ${param(after.id)}::text)`
        : `(created_at, id) > (${param(after.createdAt)}, ${param(after.id)})`,
    )
  }
  for (const condition of where()) if (condition !== null) conditions.push(condition)
  return `SELECT * FROM ${table} ${conditions.length > 0 ? `WHERE ${conditions.join(' AND ')}` : ''} ORDER BY created_at, id LIMIT ${param(query.limit + 1)}`
}

/** pageOf turns the rows of a createdOrderPage query into a page and its next cursor. */
export function pageOf<T extends { readonly createdAt: string; readonly id: string }>(rows: readonly Row[], limit: number, map: (r: Row) => T): Page<T> {
  const items = rows.slice(0, limit).map(map)
  return { items, next: rows.length > limit && items.length > 0 ? accountCursor(items.at(-1)!) : null }
}

/**
 * Pending-subscription cursors carry the last item's request time, account, region and group
 * (the queue's order). The time is kept as the store wrote it (`exactAt`: PostgreSQL's has
 * microseconds), so that the next page starts exactly after it.
 */
export function subscriptionCursor(item: Subscription, exactAt: string = item.updatedAt): string {
  return Buffer.from(JSON.stringify([exactAt, item.accountId, item.region, item.group])).toString('base64url')
}

const EXACT_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?Z$/

export function readSubscriptionCursor(cursor: string): { updatedAt: string; accountId: string; region: string; group: string } {
  try {
    const value: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'))
    if (Array.isArray(value) && value.length === 4 && value.every((v) => typeof v === 'string')) {
      const [updatedAt, accountId, region, group] = value as [string, string, string, string]
      if (EXACT_TIME.test(updatedAt) && !Number.isNaN(Date.parse(updatedAt))) return { updatedAt, accountId, region, group }
    }
  } catch {
    /* below */
  }
  throw new CursorError()
}

/** Audit cursors are the last event's id (the list goes by id, newest first). */
export function readEventCursor(cursor: string): string {
  if (!/^evt_[0-9a-f]{22}$/.test(cursor)) throw new CursorError()
  return cursor
}

/** likePattern: `text` as a LIKE pattern that matches it anywhere, with `\` as the escape. */
export function likePattern(text: string): string {
  return `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`
}

/**
 * usageSpans splits a range of days for the per-key report between the daily rows and the
 * monthly rollup. Whole months come from the rollup. A month the range cuts comes either from
 * its daily rows within the range, or from its monthly row less its daily rows outside the
 * range (`minus`), whichever reads fewer days: a cut month then costs at most half its days.
 * A 90-day report over 1 000 keys reads at most about 30 days of daily rows and three months
 * of monthly ones, where reading the cut months' days inside the range took up to 60 (from
 * the 2nd of a month to the 29th of the month after next: 105 ms on SQLite, bench/admin.ts).
 */
export function usageSpans(fromDay: string, toDay: string): { days: [string, string][]; minus: [string, string][]; months: [string, string] | null } {
  const DAY_MS = 86_400_000
  const day = (ms: number) => new Date(ms).toISOString().slice(0, 10)
  const from = Date.parse(`${fromDay}T00:00:00Z`)
  const to = Date.parse(`${toDay}T00:00:00Z`)
  const monthStart = (ms: number) => {
    const d = new Date(ms)
    return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1)
  }
  const monthEnd = (ms: number) => {
    const d = new Date(ms)
    return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1) - DAY_MS
  }
  const days: [string, string][] = []
  const minus: [string, string][] = []
  // A month's row counts as one day's rows: a cut month is taken whole when its days outside the range, plus one, are fewer than those inside.
  const wholeIsCheaper = (inside: number, outside: number) => outside + 1 < inside
  if (monthStart(from) === monthStart(to)) {
    const start = monthStart(from)
    const end = monthEnd(from)
    const outside = (from - start + end - to) / DAY_MS
    if (!wholeIsCheaper((to - from) / DAY_MS + 1, outside)) return { days: [[fromDay, toDay]], minus, months: null }
    if (from > start) minus.push([day(start), day(from - DAY_MS)])
    if (to < end) minus.push([day(to + DAY_MS), day(end)])
    return { days, minus, months: [fromDay.slice(0, 7), fromDay.slice(0, 7)] }
  }
  // The months the rollup gives: every whole month between the cut ones, and the cut ones it is cheaper to take whole.
  let first = from === monthStart(from) ? from : monthEnd(from) + DAY_MS
  let last = to === monthEnd(to) ? to : monthStart(to) - DAY_MS
  if (from !== monthStart(from)) {
    if (wholeIsCheaper((monthEnd(from) - from) / DAY_MS + 1, (from - monthStart(from)) / DAY_MS)) {
      first = monthStart(from)
      minus.push([day(first), day(from - DAY_MS)])
    } else days.push([fromDay, day(monthEnd(from))])
  }
  if (to !== monthEnd(to)) {
    if (wholeIsCheaper((to - monthStart(to)) / DAY_MS + 1, (monthEnd(to) - to) / DAY_MS)) {
      last = monthEnd(to)
      minus.push([day(to + DAY_MS), day(last)])
    } else days.push([day(monthStart(to)), toDay])
  }
  if (first > last) return { days: [[fromDay, toDay]], minus: [], months: null }
  return { days, minus, months: [day(first).slice(0, 7), day(last).slice(0, 7)] }
}

export function toFactor(r: Row): Factor {
  const base = {
    id: String(r.id),
    accountId: String(r.account_id),
    userId: String(r.user_id),
    applicationId: String(r.application_id),
    label: textOrNull(r.label),
    status: r.status as FactorStatus,
    sealed: String(r.sealed),
    keyVersion: Number(r.key_version),
    createdAt: iso(r.created_at),
    expiresAt: isoOrNull(r.expires_at),
    activatedAt: isoOrNull(r.activated_at),
  }
  if (r.type === 'passkey') {
    const meta = (typeof r.passkey_meta === 'string' ? JSON.parse(r.passkey_meta) : r.passkey_meta) as Omit<PasskeyMeta, 'algorithm'>
    return {
      ...base,
      type: 'passkey',
      signCount: Number(r.sign_count),
      meta: { ...meta, algorithm: String(r.algorithm) },
      credentialDigest: String(r.credential_digest),
    }
  }
  return {
    ...base,
    type: 'totp',
    profile: String(r.profile),
    algorithm: r.algorithm as Algorithm,
    digits: Number(r.digits),
    period: Number(r.period),
    drift: Number(r.drift),
  }
}

/** The profile column of a passkey (TOTP's columns hold nothing of it: digits, period and drift 0). */
const PASSKEY_PROFILE = 'passkey'

/** factorValues: a factor's columns in the order both adapters insert them (FACTOR_COLUMNS). */
export function factorValues(f: Factor): (string | number | null)[] {
  const totp = f.type === 'totp'
  const { deviceType, backedUp, transports } = totp ? { deviceType: '', backedUp: false, transports: [] } : f.meta
  return [
    f.id,
    f.accountId,
    f.userId,
    f.applicationId,
    f.label,
    totp ? f.profile : PASSKEY_PROFILE,
    f.status,
    totp ? f.algorithm : f.meta.algorithm,
    totp ? f.digits : 0,
    totp ? f.period : 0,
    totp ? f.drift : 0,
    f.sealed,
    f.keyVersion,
    f.createdAt,
    f.expiresAt,
    f.activatedAt,
    f.type,
    totp ? null : f.signCount,
    totp ? null : JSON.stringify({ deviceType, backedUp, transports }),
    totp ? null : f.credentialDigest,
  ]
}

/** FACTOR_COLUMNS: the columns factorValues fills, in its order. */
export const FACTOR_COLUMNS =
  'id, account_id, user_id, application_id, label, profile, status, algorithm, digits, period, drift, sealed, key_version, created_at, expires_at, activated_at, type, sign_count, passkey_meta, credential_digest'

export const toFactorSettings = (r: Row | undefined): FactorSettings =>
  r === undefined
    ? NO_FACTOR_SETTINGS
    : {
        rpId: textOrNull(r.rp_id),
        rpName: textOrNull(r.rp_name),
        origins: (typeof r.origins === 'string' ? JSON.parse(r.origins) : r.origins) as string[],
        userLimit: r.user_limit === null ? null : Number(r.user_limit),
        keyLimit: r.key_limit === null ? null : Number(r.key_limit),
        limitWindowSeconds: r.limit_window_seconds === null ? null : Number(r.limit_window_seconds),
        updatedAt: iso(r.updated_at),
      }

/**
 * NO_USER: the user_id column of a challenge issued to no user (a discoverable sign-in's). Never a user ID: the rule refuses a
 * blank one (domain/user-ids.ts), and the column stays NOT NULL, as in every store made before.
 */
export const NO_USER = ''

export const toChallenge = (r: Row): PasskeyChallenge => ({
  digest: String(r.digest),
  accountId: String(r.account_id),
  userId: r.user_id === NO_USER ? null : String(r.user_id),
  purpose: r.purpose as ChallengePurpose,
  userVerification: String(r.user_verification),
  createdAt: iso(r.created_at),
  expiresAt: iso(r.expires_at),
})

export const toTotpUser = (r: Row): TotpUser => ({
  accountId: String(r.account_id),
  userId: String(r.user_id),
  createdAt: iso(r.created_at),
  active: Number(r.active ?? 0),
  pending: Number(r.pending ?? 0),
  recoveryCodesLeft: Number(r.codes_left ?? 0),
})

/** userCursor: the cursor after a user of an account's user list (their id, opaque to clients). */
export const userCursor = (userId: string): string => Buffer.from(userId, 'utf8').toString('base64url')

/**
 * readUserCursor gives the user ID a cursor is after; CursorError for any cursor userCursor
 * did not make (text that decodes to other bytes, or to a control character, which
 * PostgreSQL's NUL refusal would have turned into a 500).
 */
export function readUserCursor(cursor: string): string {
  if (!/^[A-Za-z0-9_-]+$/.test(cursor) || cursor.length > MAX_USER_CURSOR) throw new CursorError()
  const userId = Buffer.from(cursor, 'base64url').toString('utf8')
  if (userCursor(userId) !== cursor || /[\u0000-\u001f\u007f]/.test(userId)) throw new CursorError()
  return userId
}

/**
 * HOLDS_NOTHING: SQL conditions (`AND …`) that the account `m.account_id` holds nothing but
 * its members and email links: what a sign-up made, and no more (purgeUnconfirmed keeps an
 * account an operator has given a key, a subscription, a plan or anything else).
 */
export const HOLDS_NOTHING = [
  ...['api_keys', 'subscriptions', 'plans', 'onboarding', 'totp_users', 'webhook_endpoints'].map(
    (table) => `AND NOT EXISTS (SELECT 1 FROM ${table} x WHERE x.account_id = m.account_id)`,
  ),
  // An account a single sign-on provider's users join is the operator's.
  'AND NOT EXISTS (SELECT 1 FROM sso_providers x WHERE x.join_account_id = m.account_id)',
].join(' ')
