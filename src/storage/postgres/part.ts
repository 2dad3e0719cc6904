/**
 * Part: what the builders of one PostgreSQL store part share (accounts.ts, portal.ts,
 * factors.ts, webhooks.ts). Each part is a plain object assembled from a few builders, one
 * per concern, that close over one Part: the pool's query, a transaction on one connection,
 * the store's clock and the values of an audit event stamped by it.
 *
 * Why plain objects and not a class per port: the parts are spread by those who wrap them
 * (`{ ...portal, getUser }` in the sealed portal view, `{ ...access, onChange }` in the Redis
 * signal), and a spread keeps own properties only; a class's methods would be left behind.
 * The SQLite adapter has the same shape (sqlite/part.ts).
 *
 * PostgreSQL writes a change and its event in one statement: the change in a data-modifying
 * CTE and its event inserted from the CTE's rows (auditInsert), so both commit together, a
 * change that finds nothing writes no event, and a change that fails takes its event with it.
 * A builder keeps each such statement whole; only a change that must first lock and count
 * runs in a transaction.
 */
import type pg from 'pg'
import type { AuditDraft } from '../../domain/accounts.ts'
import type { Row } from '../rows.ts'
import { TRACE_KEY, type Stamps } from '../stamps.ts'

export type Query = (name: string | null, text: string, values?: unknown[]) => Promise<pg.QueryResult<Row>>

/** Transaction runs `work` in one transaction on one connection (committed when it returns, rolled back when it throws). */
export type Transaction = <T>(work: (query: Query) => Promise<T>) => Promise<T>

/**
 * auditInsert inserts one event per row of `source` (none: no event; null: one event), its
 * values the parameters from `$first` on, in auditValues' order.
 */
export function auditInsert(first: number, source: string | null): string {
  const types = ['text', 'timestamptz', 'text', 'text', 'text', 'text', 'text', 'text', 'text']
  // The detail's TRACE_KEY, when there, goes to trace_parent (stamps.ts): the event's values stay ten.
  const detail = `$${first + types.length}::jsonb`
  return `INSERT INTO audit_events (id, at, actor, action, target_type, target_id, account_id, ip, outcome, detail, trace_parent)
    SELECT ${types.map((type, i) => `$${first + i}::${type}`).join(', ')}, ${detail} - '${TRACE_KEY}', ${detail} ->> '${TRACE_KEY}'${source === null ? '' : ` FROM ${source}`}`
}

/** auditor: the values of auditInsert for an event stamped by the store's clock. */
export const auditor =
  (stamps: Stamps) =>
  (draft: AuditDraft): (string | null)[] =>
    stamps.audit(draft).values

export interface Part {
  readonly query: Query
  readonly transaction: Transaction
  /** The store's clock: times it stamps itself (updated_at, revoked_at) are parameters from it, never now(). */
  readonly stamps: Stamps
  /** audited: the values of auditInsert for an event stamped now, by the store's clock. */
  readonly audited: (draft: AuditDraft) => (string | null)[]
}

/** part gathers what every part's builders share. */
export function part(query: Query, transaction: Transaction, stamps: Stamps): Part {
  return { query, transaction, stamps, audited: auditor(stamps) }
}
