/**
 * Part: what the builders of one SQLite store part share (accounts.ts, portal.ts, factors.ts,
 * webhooks.ts). Each part is a plain object assembled from a few builders, one per concern,
 * that close over one Part: the statements it prepares once when the store opens, the group
 * commit every write goes through, the store's clock and the audit event writer.
 *
 * Why plain objects and not a class per port: the parts are spread by those who wrap them
 * (`{ ...portal, getUser }` in the sealed portal view, `{ ...access, onChange }` in the Redis
 * signal), and a spread keeps own properties only; a class's methods would be left behind.
 *
 * SQLite's atomic step stays a synchronous turn inside the group commit: a builder's method
 * hands `batch.atomic` (or `batch.run`) one synchronous function that checks, writes and
 * inserts its event, and nothing awaits between them. No builder may break that function up.
 */
import type { DatabaseSync } from 'node:sqlite'
import type { AuditDraft } from '../../domain/accounts.ts'
import { TRACE_KEY, type Stamps } from '../stamps.ts'
import type { GroupCommit } from './batch.ts'

/** INSERT_EVENT inserts one audit event, its values in Stamps.audit's order; the detail's TRACE_KEY, when there, goes to trace_parent. */
export const INSERT_EVENT = `INSERT INTO audit_events (id, at, actor, action, target_type, target_id, account_id, ip, outcome, detail, trace_parent)
  VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9,
    CASE WHEN instr(?10, '"${TRACE_KEY}"') = 0 THEN ?10 ELSE json_remove(?10, '$.${TRACE_KEY}') END,
    CASE WHEN instr(?10, '"${TRACE_KEY}"') = 0 THEN NULL ELSE json_extract(?10, '$.${TRACE_KEY}') END)`

export interface Part<Q> {
  readonly db: DatabaseSync
  readonly batch: GroupCommit
  readonly stamps: Stamps
  /** The part's statements, prepared once. */
  readonly q: Q
  /** audit inserts an event stamped by the store's clock: call it inside the atomic step of its change. */
  readonly audit: (draft: AuditDraft) => void
}

/** part gathers what a part's builders share; `q` is its prepared statements. */
export function part<Q>(db: DatabaseSync, batch: GroupCommit, stamps: Stamps, q: Q): Part<Q> {
  const insertEvent = db.prepare(INSERT_EVENT)
  return { db, batch, stamps, q, audit: (draft) => insertEvent.run(...stamps.audit(draft).values) }
}
