/**
 * What both relational adapters share: ids, row mappers and cursors. Rows come as SQLite
 * gives them (text dates, text lists) or as pg does (Date objects, jsonb parsed): the
 * mappers take either.
 */
import { randomBytes } from 'node:crypto'
import type { Account, AccountStatus, AdminToken, ApiKeyInfo, AuditEvent, OnboardingRecord, Plan, Subscription } from './ports.ts'
import { CursorError } from './ports.ts'
import type { AuditDraft, KeyScope, SubscriptionStatus } from '../domain/accounts.ts'
import type { Group, Region } from '../domain/regions.ts'

export type Row = Record<string, unknown>

/** newId: a prefix and 64 random bits (accounts, keys, tokens). */
export const newId = (prefix: string): string => `${prefix}_${randomBytes(8).toString('hex')}`

let lastEventMs = 0
let eventSeq = 0
/**
 * eventId: time-ordered ids for audit events (`evt_`, 12 hex digits of epoch ms, a sequence
 * within the ms, 6 random hex digits): a later event of this process sorts after an earlier
 * one, and events of other processes interleave by their millisecond.
 */
export function eventId(ms: number): string {
  if (ms > lastEventMs) {
    lastEventMs = ms
    eventSeq = 0
  } else eventSeq++
  return `evt_${lastEventMs.toString(16).padStart(12, '0')}${eventSeq.toString(16).padStart(4, '0')}${randomBytes(3).toString('hex')}`
}

/** eventIdBefore: a bound below every id of an event at or after `iso` (ids sort by time). */
export function eventIdBefore(iso: string): string {
  return `evt_${Date.parse(iso).toString(16).padStart(12, '0')}`
}

export const iso = (value: unknown): string => (value instanceof Date ? value.toISOString() : String(value))
const isoOrNull = (value: unknown): string | null => (value === null || value === undefined ? null : iso(value))
const list = <T extends string>(value: unknown): readonly T[] | null => (value === null || value === undefined ? null : (String(value) === '' ? [] : String(value).split(',') as T[]))

/** scopeColumns: a scope as two nullable comma lists. */
export const scopeColumns = (scope: KeyScope): [string | null, string | null] =>
  [scope.groups === null ? null : scope.groups.join(','), scope.regions === null ? null : scope.regions.join(',')]

export const toAccount = (r: Row): Account => ({ id: String(r.id), name: String(r.name), status: r.status as AccountStatus, createdAt: iso(r.created_at) })

export const toKey = (r: Row): ApiKeyInfo => ({
  id: String(r.id), accountId: String(r.account_id), name: String(r.name), hint: String(r.hint),
  createdAt: iso(r.created_at), revokedAt: isoOrNull(r.revoked_at), expiresAt: isoOrNull(r.expires_at),
  scope: { groups: list<Group>(r.scope_groups), regions: list<Region>(r.scope_regions) },
  rolledTo: r.rolled_to === null || r.rolled_to === undefined ? null : String(r.rolled_to),
  lastUsedAt: isoOrNull(r.last_used_at),
  lastUsedRegion: r.last_used_region === null || r.last_used_region === undefined ? null : (String(r.last_used_region) as Region),
})

export const toPlan = (r: Row): Plan => ({
  rate: Number(r.rate), burst: Number(r.burst), quota: Number(r.quota), period: r.period as Plan['period'],
  weights: { totp: Number(r.weight_totp ?? 1), converter: Number(r.weight_converter ?? 1) },
})

export const toSubscription = (r: Row): Subscription => ({
  accountId: String(r.account_id), region: r.region as Region, group: r.api_group as Group,
  status: r.status as SubscriptionStatus, updatedAt: iso(r.updated_at),
})

export const toOnboarding = (r: Row): OnboardingRecord => ({
  accountId: String(r.account_id), applicationId: String(r.application_id), userId: String(r.user_id),
  algorithm: r.algorithm as OnboardingRecord['algorithm'], digits: Number(r.digits), period: Number(r.period),
  secretFingerprint: String(r.secret_fingerprint), createdAt: iso(r.created_at), updatedAt: iso(r.updated_at),
})

export const toAuditEvent = (r: Row): AuditEvent => ({
  id: String(r.id), at: iso(r.at), actor: String(r.actor), action: String(r.action),
  target: { type: r.target_type as AuditEvent['target']['type'], id: String(r.target_id) },
  accountId: r.account_id === null || r.account_id === undefined ? null : String(r.account_id),
  ip: r.ip === null || r.ip === undefined ? null : String(r.ip),
  outcome: r.outcome as AuditEvent['outcome'],
  detail: (typeof r.detail === 'string' ? JSON.parse(r.detail) : r.detail) as AuditEvent['detail'],
})

export const toAdminToken = (r: Row): AdminToken => ({
  id: String(r.id), name: String(r.name), scope: r.scope as AdminToken['scope'], createdAt: iso(r.created_at), revokedAt: isoOrNull(r.revoked_at),
})

/** auditValues: an event's columns in table order (id, at, actor, action, target_type, target_id, account_id, ip, outcome, detail). */
export function auditValues(draft: AuditDraft, atMs: number): { event: AuditEvent; values: (string | null)[] } {
  const event: AuditEvent = { ...draft, id: eventId(atMs), at: new Date(atMs).toISOString() }
  return {
    event,
    values: [event.id, event.at, draft.actor, draft.action, draft.target.type, draft.target.id, draft.accountId, draft.ip, draft.outcome, JSON.stringify(draft.detail)],
  }
}

/** Account cursors carry the last item's creation time and id (the list's order). */
export function accountCursor(account: Account): string {
  return Buffer.from(JSON.stringify([account.createdAt, account.id])).toString('base64url')
}

export function readAccountCursor(cursor: string): { createdAt: string; id: string } {
  try {
    const value: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'))
    if (Array.isArray(value) && value.length === 2 && typeof value[0] === 'string' && typeof value[1] === 'string'
      && !Number.isNaN(Date.parse(value[0]))) return { createdAt: new Date(value[0]).toISOString(), id: value[1] }
  } catch { /* below */ }
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
 * usageSpans splits a range of days for the per-key report: whole calendar months come from
 * the monthly rollup, the days before the first and after the last whole month from the
 * daily rows. A 90-day report then reads about 2 000 monthly rows and at most 60 days of
 * daily ones per 1 000 keys, instead of 90 days' worth.
 */
export function usageSpans(fromDay: string, toDay: string): { days: [string, string][]; months: [string, string] | null } {
  const from = new Date(`${fromDay}T00:00:00Z`)
  const to = new Date(`${toDay}T00:00:00Z`)
  // The first whole month starts at fromDay if it is the 1st, else on the next 1st; the last ends at toDay if it is a month's last day.
  const firstMonth = from.getUTCDate() === 1 ? from : new Date(Date.UTC(from.getUTCFullYear(), from.getUTCMonth() + 1, 1))
  const dayAfter = new Date(to.getTime() + 86_400_000)
  const endMonth = dayAfter.getUTCDate() === 1 ? dayAfter : new Date(Date.UTC(to.getUTCFullYear(), to.getUTCMonth(), 1))
  if (firstMonth >= endMonth) return { days: [[fromDay, toDay]], months: null }
  const day = (d: Date) => d.toISOString().slice(0, 10)
  const days: [string, string][] = []
  if (firstMonth > from) days.push([fromDay, day(new Date(firstMonth.getTime() - 86_400_000))])
  if (endMonth <= to) days.push([day(endMonth), toDay])
  const lastMonth = new Date(Date.UTC(endMonth.getUTCFullYear(), endMonth.getUTCMonth() - 1, 1))
  return { days, months: [day(firstMonth).slice(0, 7), day(lastMonth).slice(0, 7)] }
}
