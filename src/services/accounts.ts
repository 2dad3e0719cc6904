/**
 * The accounts layer: every change to accounts, keys, subscriptions, plans and admin tokens
 * goes through here, whichever door it comes from (the CLI, the admin API, the portal, the
 * demo account, tests). Each method checks the rule, hands the store the change together
 * with its audit event (one transaction), and returns expected outcomes as data: `Failure`
 * for what a caller may well get wrong (no such account, a key rolled already), which each
 * door turns into its own answer. A refused change leaves a `failure` event of its own.
 *
 * Reads (lists, usage, the trail) are here too, so that the doors need nothing else.
 */
import { randomBytes } from 'node:crypto'
import type { Config } from '../config/config.ts'
import type { Pepper } from '../crypto/keyed.ts'
import { keyedDigest } from '../crypto/keyed.ts'
import type { Account, AdminScope, AdminToken, ApiKeyInfo, AuditEvent, NewKey, PendingSubscription, Subscription } from '../domain/accounts.ts'
import type { AccountQuery, AuditQuery, Store } from '../storage/ports.ts'
import type { Page } from '../domain/lists.ts'
import type { RefusalLine, UsageBy, UsageLine } from '../domain/usage.ts'
import { newId } from '../domain/ids.ts'
import {
  DEFAULT_ROLL_GRACE_SECONDS,
  GROUPS,
  REGIONS,
  UNSCOPED,
  type AccountStatus,
  type AuditTarget,
  type KeyScope,
  type Plan,
  type QuotaPeriod,
  type SubscriptionStatus,
} from '../domain/accounts.ts'
import { groupServedIn, isGroup, isRegion, type Group, type Region } from '../domain/regions.ts'
import { generateApiKey, hashApiKey } from '../gateway/keys.ts'
import { draft, refused, fail, isFailure, type Context, type Failure } from './outcome.ts'

/** The longest grace a roll may give the old key: 7 days. */
export const MAX_GRACE_SECONDS = 7 * 86_400
/** Longest name of an account, key or token. */
export const MAX_NAME_LENGTH = 200
/** Longest usage report: about 13 months. */
export const MAX_USAGE_DAYS = 400

const ADMIN_TOKEN_PREFIX = 'tsa_'

/** defaultPlan is the plan of accounts without one of their own (PLAN_* settings). */
export function defaultPlan(config: Config): Plan {
  return Object.freeze({
    rate: config.planRate,
    burst: config.planBurst,
    quota: config.planQuota,
    period: config.planPeriod,
    weights: Object.freeze({ totp: config.planWeightTotp, converter: config.planWeightConverter }),
  })
}

/** checkName: 1 to MAX_NAME_LENGTH characters of text, no control characters, no lone surrogates. */
function checkName(name: unknown, field: string, optional = false): Failure | null {
  if (optional && (name === undefined || name === '')) return null
  if (typeof name !== 'string' || name.trim() === '') return fail('invalid', `${field} is required`, field)
  if (name.length > MAX_NAME_LENGTH) return fail('invalid', `${field} must be at most ${MAX_NAME_LENGTH} characters`, field)
  if (/[\p{Cc}\p{Cs}]/u.test(name)) return fail('invalid', `${field} must be text without control characters`, field)
  return null
}

export interface KeyInput {
  readonly name?: string
  /** ISO 8601 time, in the future; absent: the key does not expire. */
  readonly expiresAt?: string | null
  readonly scope?: { readonly groups?: readonly string[] | null; readonly regions?: readonly string[] | null } | null
}

export interface PlanInput {
  readonly rate?: number
  readonly burst?: number
  readonly quota?: number
  readonly period?: string
  readonly weights?: { readonly totp?: number; readonly converter?: number }
}

export interface AccountsOptions {
  readonly store: Store
  readonly pepper: Pepper
  readonly config: Config
  /** The clock (epoch ms); tests move it. */
  readonly now?: () => number
}

export class Accounts {
  readonly #store: Store
  readonly #pepper: Pepper
  readonly #config: Config
  readonly #now: () => number
  readonly defaultPlan: Plan

  constructor(opts: AccountsOptions) {
    this.#store = opts.store
    this.#pepper = opts.pepper
    this.#config = opts.config
    this.#now = opts.now ?? Date.now
    this.defaultPlan = defaultPlan(opts.config)
  }

  /** #refuse records a refused change and returns its failure. */
  #refuse(ctx: Context, action: string, target: AuditTarget, accountId: string | null, failure: Failure): Promise<Failure> {
    return refused(this.#store.audit, ctx, action, target, accountId, failure)
  }

  #iso(): string {
    return new Date(this.#now()).toISOString()
  }

  // Accounts

  async createAccount(ctx: Context, input: { readonly name: string }): Promise<Account | Failure> {
    const bad = checkName(input.name, 'name')
    if (bad) return bad
    const account: Account = { id: newId('acc'), name: input.name, status: 'active', createdAt: this.#iso() }
    await this.#store.access.createAccount(account, draft(ctx, 'account.create', { type: 'account', id: account.id }, account.id, { name: account.name }))
    return account
  }

  /**
   * createOwnedAccount creates an account owned by a portal user, with both events, unless
   * they own PORTAL_ACCOUNT_MAX_PER_USER accounts already (decided in the same atomic step).
   */
  async createOwnedAccount(ctx: Context, userId: string, input: { readonly name: string }): Promise<Account | Failure> {
    const bad = checkName(input.name, 'name')
    if (bad) return bad
    const account: Account = { id: newId('acc'), name: input.name, status: 'active', createdAt: this.#iso() }
    const max = this.#config.portalAccountMaxPerUser
    const made = await this.#store.access.createAccount(
      account,
      draft(ctx, 'account.create', { type: 'account', id: account.id }, account.id, { name: account.name }),
      { userId, max, audit: draft(ctx, 'member.add', { type: 'member', id: userId }, account.id, { role: 'owner' }) },
    )
    if (!made)
      return this.#refuse(ctx, 'account.create', { type: 'account', id: account.id }, null, fail('limit', `you own ${max} accounts, the most a user may own`))
    return account
  }

  /** accountLimit: the most accounts a portal user may own. */
  get accountLimit(): number {
    return this.#config.portalAccountMaxPerUser
  }

  getAccount(id: string): Promise<Account | null> {
    return this.#store.access.getAccount(id)
  }

  listAccounts(query: AccountQuery): Promise<Page<Account>> {
    return this.#store.access.listAccounts(query)
  }

  countAccounts(): Promise<number> {
    return this.#store.access.countAccounts()
  }

  async updateAccount(ctx: Context, id: string, patch: { readonly name?: string; readonly status?: string }): Promise<Account | Failure> {
    const target: AuditTarget = { type: 'account', id }
    if (patch.name === undefined && patch.status === undefined) return fail('invalid', 'give a name or a status to change', 'name')
    if (patch.name !== undefined) {
      const bad = checkName(patch.name, 'name')
      if (bad) return bad
    }
    if (patch.status !== undefined && patch.status !== 'active' && patch.status !== 'suspended') {
      return fail('invalid', 'status must be active or suspended', 'status')
    }
    const change = {
      ...(patch.name === undefined ? {} : { name: patch.name }),
      ...(patch.status === undefined ? {} : { status: patch.status as AccountStatus }),
    }
    const action = patch.status === undefined ? 'account.update' : patch.status === 'suspended' ? 'account.suspend' : 'account.activate'
    const account = await this.#store.access.updateAccount(id, change, draft(ctx, action, target, id, change))
    return account ?? this.#refuse(ctx, action, target, null, fail('not_found', `no account ${id}`))
  }

  // Keys

  #scope(input: KeyInput['scope']): KeyScope | Failure {
    if (input === undefined || input === null) return UNSCOPED
    const groups = input.groups ?? null
    const regions = input.regions ?? null
    if (groups !== null) {
      const bad = groups.find((g) => !isGroup(g))
      if (bad !== undefined) return fail('invalid', `scope.groups: "${bad}" is not one of ${GROUPS.join(', ')}`, 'scope.groups')
    }
    if (regions !== null) {
      const bad = regions.find((r) => !isRegion(r))
      if (bad !== undefined) return fail('invalid', `scope.regions: "${bad}" is not one of ${REGIONS.join(', ')}`, 'scope.regions')
    }
    // Kept sorted and once each, so that equal scopes read alike.
    const tidy = <T extends string>(list: readonly string[] | null) => (list === null ? null : ([...new Set(list)].sort() as T[]))
    return { groups: tidy<Group>(groups), regions: tidy<Region>(regions) }
  }

  #expiry(value: string | null | undefined): string | null | Failure {
    if (value === undefined || value === null) return null
    const ms = Date.parse(value)
    if (typeof value !== 'string' || Number.isNaN(ms) || !/^\d{4}-\d\d-\d\dT/.test(value)) {
      return fail('invalid', 'expiresAt must be an ISO 8601 time such as 2027-01-31T00:00:00Z', 'expiresAt')
    }
    if (ms <= this.#now()) return fail('invalid', 'expiresAt must be in the future', 'expiresAt')
    return new Date(ms).toISOString()
  }

  #newKey(accountId: string, name: string, expiresAt: string | null, scope: KeyScope): { key: NewKey; apiKey: string } {
    const apiKey = generateApiKey()
    return {
      apiKey,
      key: { id: newId('key'), accountId, name, hash: hashApiKey(this.#pepper, apiKey), hint: apiKey.slice(-4), createdAt: this.#iso(), expiresAt, scope },
    }
  }

  /**
   * issueKey creates a key and returns its one and only plaintext copy. It and rollKey delete the
   * account's ended keys past KEY_ENDED_KEPT_PER_ACCOUNT in the same step (their events stay), so
   * an account's key rows stay within twice KEY_MAX_PER_ACCOUNT plus that.
   */
  async issueKey(ctx: Context, accountId: string, input: KeyInput = {}): Promise<{ key: ApiKeyInfo; apiKey: string } | Failure> {
    const bad = checkName(input.name, 'name', true)
    if (bad) return bad
    const scope = this.#scope(input.scope)
    if (isFailure(scope)) return scope
    const expiresAt = this.#expiry(input.expiresAt)
    if (isFailure(expiresAt)) return expiresAt
    const { key, apiKey } = this.#newKey(accountId, input.name ?? '', expiresAt, scope)
    const target: AuditTarget = { type: 'key', id: key.id }
    if ((await this.#store.access.getAccount(accountId)) === null) {
      return this.#refuse(ctx, 'key.create', target, null, fail('not_found', `no account ${accountId}`))
    }
    const max = this.#config.keyMaxPerAccount
    const made = await this.#store.access.createKey(key, draft(ctx, 'key.create', target, accountId, { name: key.name, expiresAt, scope, hint: key.hint }), {
      max,
      nowIso: this.#iso(),
      endedKept: this.#config.keyEndedKeptPerAccount,
    })
    if (!made)
      return this.#refuse(ctx, 'key.create', target, accountId, fail('limit', `the account has ${max} active keys, the most it may have: revoke one first`))
    return { key: keyInfo(key), apiKey }
  }

  /** keyLimit: the most active keys an account may have. */
  get keyLimit(): number {
    return this.#config.keyMaxPerAccount
  }

  getKey(id: string): Promise<ApiKeyInfo | null> {
    return this.#store.access.getKey(id)
  }

  listKeys(accountId?: string): Promise<ApiKeyInfo[]> {
    return this.#store.access.listKeys(accountId)
  }

  /**
   * rollKey replaces a live key by a new one with the same name, scope and expiry, shown once;
   * the old key keeps working for `graceSeconds` (default DEFAULT_ROLL_GRACE_SECONDS; 0: it stops at once).
   * A key rolled to the old one and still in its grace stops now (the store's step says so): a
   * chain of rolls keeps at most two working keys, so an account's working keys stay within
   * twice KEY_MAX_PER_ACCOUNT however often its keys are rolled.
   */
  async rollKey(
    ctx: Context,
    keyId: string,
    input: { readonly graceSeconds?: number; readonly name?: string } = {},
  ): Promise<{ key: ApiKeyInfo; apiKey: string; old: ApiKeyInfo } | Failure> {
    const grace = input.graceSeconds ?? DEFAULT_ROLL_GRACE_SECONDS
    if (!Number.isInteger(grace) || grace < 0 || grace > MAX_GRACE_SECONDS) {
      return fail('invalid', `graceSeconds must be a whole number from 0 to ${MAX_GRACE_SECONDS} (7 days)`, 'graceSeconds')
    }
    const bad = checkName(input.name, 'name', true)
    if (bad) return bad
    const target: AuditTarget = { type: 'key', id: keyId }
    const old = await this.#store.access.getKey(keyId)
    if (old === null) return this.#refuse(ctx, 'key.roll', target, null, fail('not_found', `no key ${keyId}`))
    const now = this.#now()
    const { key, apiKey } = this.#newKey(old.accountId, input.name ?? old.name, old.expiresAt, old.scope)
    const graceEndsAt = grace === 0 ? null : new Date(now + grace * 1000).toISOString()
    const rolled = await this.#store.access.rollKey(
      keyId,
      key,
      new Date(now).toISOString(),
      graceEndsAt,
      draft(ctx, 'key.roll', target, old.accountId, { newKeyId: key.id, graceSeconds: grace, hint: key.hint }),
      this.#config.keyEndedKeptPerAccount,
    )
    if (!rolled) return this.#refuse(ctx, 'key.roll', target, old.accountId, fail('conflict', `key ${keyId} is revoked, expired or rolled already`))
    return { key: keyInfo(key), apiKey, old: (await this.#store.access.getKey(keyId)) ?? old }
  }

  /** revokeKey stops a key at once, and a key rolled to it that is still in its grace with it. */
  async revokeKey(ctx: Context, keyId: string): Promise<ApiKeyInfo | Failure> {
    const target: AuditTarget = { type: 'key', id: keyId }
    const key = await this.#store.access.getKey(keyId)
    if (key === null) return this.#refuse(ctx, 'key.revoke', target, null, fail('not_found', `no key ${keyId}`))
    if (!(await this.#store.access.revokeKey(keyId, draft(ctx, 'key.revoke', target, key.accountId)))) {
      return this.#refuse(ctx, 'key.revoke', target, key.accountId, fail('conflict', `key ${keyId} is revoked already`))
    }
    return (await this.#store.access.getKey(keyId)) ?? key
  }

  // Subscriptions

  listSubscriptions(accountId: string): Promise<Subscription[]> {
    return this.#store.access.listSubscriptions(accountId)
  }

  /** listPendingSubscriptions: every account's subscriptions waiting for an operator, oldest first (the operators' queue). */
  listPendingSubscriptions(query: { readonly cursor?: string; readonly limit: number }): Promise<Page<PendingSubscription>> {
    return this.#store.access.listPendingSubscriptions(query)
  }

  /**
   * setSubscription sets a group in a region to `active`, `inactive` or `pending` (asked for);
   * `approved` makes a pending one active and `refused` makes it inactive, each refused for
   * any other (atomically: of an approval and a refusal at once, one wins).
   */
  async setSubscription(ctx: Context, accountId: string, region: string, group: string, status: string): Promise<Subscription | Failure> {
    if (!isRegion(region)) return fail('invalid', `region must be one of ${REGIONS.join(', ')}`, 'region')
    if (!isGroup(group)) return fail('invalid', `group must be one of ${GROUPS.join(', ')}`, 'group')
    if (!['active', 'inactive', 'pending', 'approved', 'refused'].includes(status))
      return fail('invalid', 'status must be active, inactive, pending, approved or refused', 'status')
    const target: AuditTarget = { type: 'subscription', id: `${accountId}/${region}/${group}` }
    const decision = status === 'approved' || status === 'refused'
    const action = `subscription.${status === 'approved' ? 'approve' : status === 'refused' ? 'refuse' : 'set'}`
    if (!groupServedIn(group, region) && status !== 'inactive' && status !== 'refused') {
      return this.#refuse(ctx, action, target, accountId, fail('invalid', `the ${group} group is not served in ${region}`, 'group'))
    }
    if ((await this.#store.access.getAccount(accountId)) === null) return this.#refuse(ctx, action, target, null, fail('not_found', `no account ${accountId}`))
    const current = (await this.#store.access.listSubscriptions(accountId)).find((s) => s.region === region && s.group === group)
    const next: SubscriptionStatus = status === 'approved' ? 'active' : status === 'refused' ? 'inactive' : (status as SubscriptionStatus)
    const notPending = fail('conflict', `${region}/${group} is not pending for account ${accountId}`)
    if (decision && current?.status !== 'pending') return this.#refuse(ctx, action, target, accountId, notPending)
    // A decision applies only if the request is still pending when written: of two at once, one wins.
    const set = await this.#store.access.setSubscription(
      accountId,
      region,
      group,
      next,
      draft(ctx, action, target, accountId, { region, group, status: next, was: current?.status ?? null }),
      decision ? 'pending' : undefined,
    )
    if (!set) return this.#refuse(ctx, action, target, accountId, notPending)
    return { accountId, region, group, status: next, updatedAt: this.#iso() }
  }

  // Plans

  /** getPlan: the account's own plan, or the default one (`own: false`); null when there is no such account. */
  async getPlan(accountId: string): Promise<{ plan: Plan; own: boolean } | null> {
    if ((await this.#store.access.getAccount(accountId)) === null) return null
    const own = await this.#store.access.getPlan(accountId)
    return { plan: own ?? this.defaultPlan, own: own !== null }
  }

  /** setPlan gives an account its own plan: fields not given keep their current value (own or default). */
  async setPlan(ctx: Context, accountId: string, input: PlanInput): Promise<Plan | Failure> {
    const target: AuditTarget = { type: 'plan', id: accountId }
    const current = await this.getPlan(accountId)
    if (current === null) return this.#refuse(ctx, 'plan.set', target, null, fail('not_found', `no account ${accountId}`))
    const plan = mergePlan(current.plan, input)
    if (isFailure(plan)) return plan
    if (!(await this.#store.access.setPlan(accountId, plan, draft(ctx, 'plan.set', target, accountId, { ...plan })))) {
      return this.#refuse(ctx, 'plan.set', target, null, fail('not_found', `no account ${accountId}`))
    }
    return plan
  }

  /** resetPlan puts the account back on the default plan. */
  async resetPlan(ctx: Context, accountId: string): Promise<Plan | Failure> {
    const target: AuditTarget = { type: 'plan', id: accountId }
    if (!(await this.#store.access.setPlan(accountId, null, draft(ctx, 'plan.reset', target, accountId)))) {
      return this.#refuse(ctx, 'plan.reset', target, null, fail('not_found', `no account ${accountId}`))
    }
    return this.defaultPlan
  }

  // Usage and the trail

  /** usage reports an account's calls and units from `from` to `to` (UTC days, inclusive). */
  async usage(accountId: string, from: string, to: string, by: UsageBy): Promise<UsageLine[] | Failure> {
    const wrong = await this.#reportRange(accountId, from, to)
    return wrong ?? this.#store.usage.report(accountId, from, to, by)
  }

  /** refusals reports an account's calls refused with its keys from `from` to `to` (UTC days, inclusive), the most first. */
  async refusals(accountId: string, from: string, to: string): Promise<RefusalLine[] | Failure> {
    const wrong = await this.#reportRange(accountId, from, to)
    return wrong ?? this.#store.usage.refusals(accountId, from, to)
  }

  /** reportRange: what is wrong with a report's account or days, or null. */
  async #reportRange(accountId: string, from: string, to: string): Promise<Failure | null> {
    if (!calendarDay(from)) return fail('invalid', 'from must be a date, YYYY-MM-DD', 'from')
    if (!calendarDay(to)) return fail('invalid', 'to must be a date, YYYY-MM-DD', 'to')
    if (to < from) return fail('invalid', 'to must not be before from', 'to')
    if ((Date.parse(to) - Date.parse(from)) / 86_400_000 >= MAX_USAGE_DAYS) return fail('invalid', `a report covers at most ${MAX_USAGE_DAYS} days`, 'to')
    if ((await this.#store.access.getAccount(accountId)) === null) return fail('not_found', `no account ${accountId}`)
    return null
  }

  auditEvents(query: AuditQuery): Promise<Page<AuditEvent>> {
    return this.#store.audit.list(query)
  }

  /** pruneAudit deletes the events older than the retention (AUDIT_RETENTION_DAYS). */
  pruneAudit(): Promise<number> {
    return this.#store.audit.prune(new Date(this.#now() - this.#config.auditRetentionDays * 86_400_000).toISOString())
  }

  /**
   * keepAuditRetention prunes the trail now and then every 6 hours (every node may: pruning
   * is idempotent); failures go to `report`. Returns the stop function.
   */
  keepAuditRetention(report: (error: Error) => void): () => void {
    const prune = () => {
      this.pruneAudit().catch(report)
    }
    prune()
    const timer = setInterval(prune, 6 * 3_600_000).unref()
    return () => clearInterval(timer)
  }

  // Admin tokens

  async createAdminToken(ctx: Context, input: { readonly name: string; readonly scope: string }): Promise<{ token: AdminToken; secret: string } | Failure> {
    const bad = checkName(input.name, 'name')
    if (bad) return bad
    if (input.scope !== 'read' && input.scope !== 'write') return fail('invalid', 'scope must be read or write', 'scope')
    const secret = ADMIN_TOKEN_PREFIX + randomBytes(24).toString('base64url')
    const token: AdminToken = { id: newId('adm'), name: input.name, scope: input.scope as AdminScope, createdAt: this.#iso(), revokedAt: null }
    await this.#store.adminTokens.create(
      { ...token, hash: this.#adminHash(secret) },
      draft(ctx, 'admin-token.create', { type: 'admin-token', id: token.id }, null, { name: token.name, scope: token.scope }),
    )
    return { token, secret }
  }

  listAdminTokens(): Promise<AdminToken[]> {
    return this.#store.adminTokens.list()
  }

  async revokeAdminToken(ctx: Context, id: string): Promise<{ revoked: true } | Failure> {
    const target: AuditTarget = { type: 'admin-token', id }
    if (await this.#store.adminTokens.revoke(id, draft(ctx, 'admin-token.revoke', target, null))) return { revoked: true }
    return this.#refuse(ctx, 'admin-token.revoke', target, null, fail('not_found', `no live admin token ${id}`))
  }

  /** authenticateAdmin gives the live token a presented secret belongs to, or null. */
  authenticateAdmin(secret: string): Promise<AdminToken | null> {
    if (!secret.startsWith(ADMIN_TOKEN_PREFIX) || secret.length > 100) return Promise.resolve(null)
    return this.#store.adminTokens.find(this.#adminHash(secret))
  }

  #adminHash(secret: string): string {
    return keyedDigest(this.#pepper, 'admin-token', secret)
  }

  // Reads for the portal

  /** usageTotal: an account's units over all groups from `fromDay` to `toDay` (UTC days, inclusive): what a quota counts. */
  usageTotal(accountId: string, fromDay: string, toDay: string): Promise<number> {
    return this.#store.usage.total(accountId, fromDay, toDay)
  }
}

function keyInfo(key: NewKey): ApiKeyInfo {
  return {
    id: key.id,
    accountId: key.accountId,
    name: key.name,
    hint: key.hint,
    createdAt: key.createdAt,
    revokedAt: null,
    expiresAt: key.expiresAt,
    scope: key.scope,
    rolledTo: null,
    lastUsedAt: null,
    lastUsedRegion: null,
  }
}

function wholeIn(value: unknown, min: number, max: number): boolean {
  return typeof value === 'number' && Number.isInteger(value) && value >= min && value <= max
}

/** mergePlan applies the given fields to a plan and checks the result. */
export function mergePlan(current: Plan, input: PlanInput): Plan | Failure {
  const rate = input.rate ?? current.rate
  if (typeof rate !== 'number' || !Number.isFinite(rate) || rate < 0 || rate > 1e6)
    return fail('invalid', 'rate must be a number of calls per second from 0 to 1000000 (0: no throttle)', 'rate')
  const burst = input.burst ?? current.burst
  if (!wholeIn(burst, 1, 1e9)) return fail('invalid', 'burst must be a whole number from 1 to 1000000000', 'burst')
  const quota = input.quota ?? current.quota
  if (!wholeIn(quota, 0, 1e12)) return fail('invalid', 'quota must be a whole number of units from 0 to 1000000000000 (0: no quota)', 'quota')
  const period = input.period ?? current.period
  if (period !== 'day' && period !== 'month') return fail('invalid', 'period must be day or month', 'period')
  const weights = { totp: input.weights?.totp ?? current.weights.totp, converter: input.weights?.converter ?? current.weights.converter }
  for (const group of GROUPS) {
    if (!wholeIn(weights[group], 0, 1e6)) return fail('invalid', `weights.${group} must be a whole number of units from 0 to 1000000`, `weights.${group}`)
  }
  return { rate, burst, quota, period: period as QuotaPeriod, weights }
}

/** calendarDay: `YYYY-MM-DD` of a day the calendar has (Date.parse takes 2026-02-30 as 2 March, so the day must read back the same). */
function calendarDay(text: string): boolean {
  if (!/^\d{4}-\d\d-\d\d$/.test(text)) return false
  const ms = Date.parse(text)
  return !Number.isNaN(ms) && new Date(ms).toISOString().slice(0, 10) === text
}
