/**
 * Stamps: the times a store writes of its own accord (an update's `updated_at`, a revocation,
 * a session's start, an audit event's time and id), all read from one clock: the service's
 * `now`, given to the store when it is opened (Date.now when none is). Times a port method is
 * given (`nowIso`, `atMs`) are the caller's, read from the same clock; PostgreSQL's own now()
 * is never used for a stored time, so that a test that moves the clock moves every stamp.
 */
import type { AuditDraft, AuditEvent } from '../domain/accounts.ts'
import { randomBytes } from 'node:crypto'
import { traceparent } from '../tracing/tracing.ts'

/** The clock a store is opened with: epoch ms. */
export type Clock = () => number

export class Stamps {
  readonly #clock: Clock
  #lastEventMs = 0
  #eventSeq = 0

  constructor(clock: Clock = Date.now) {
    this.#clock = clock
  }

  /** ms: the clock's time, epoch ms. */
  ms(): number {
    return this.#clock()
  }

  /** iso: the clock's time as an ISO 8601 string (the stored form of every timestamp column). */
  iso(): string {
    return new Date(this.#clock()).toISOString()
  }

  /**
   * eventId: time-ordered ids for audit events (`evt_`, 12 hex digits of epoch ms, a sequence
   * within the ms, 6 random hex digits): a later event of this store sorts after an earlier
   * one, also when the clock stands still or steps back; events of other processes interleave
   * by their millisecond. The sequence is the store's own: two stores on two clocks (tests)
   * do not push each other's ids ahead.
   */
  eventId(ms: number): string {
    if (ms > this.#lastEventMs) {
      this.#lastEventMs = ms
      this.#eventSeq = 0
    } else this.#eventSeq++
    return `evt_${this.#lastEventMs.toString(16).padStart(12, '0')}${this.#eventSeq.toString(16).padStart(4, '0')}${randomBytes(3).toString('hex')}`
  }

  /**
   * audit: an event stamped by the clock, and its columns in table order (id, at, actor,
   * action, target_type, target_id, account_id, ip, outcome, detail).
   */
  audit(draft: AuditDraft): { event: AuditEvent; values: (string | null)[] } {
    const atMs = this.#clock()
    const event: AuditEvent = { ...draft, id: this.eventId(atMs), at: new Date(atMs).toISOString() }
    return {
      event,
      values: [
        event.id,
        event.at,
        draft.actor,
        draft.action,
        draft.target.type,
        draft.target.id,
        draft.accountId,
        draft.ip,
        draft.outcome,
        detailText(draft.detail),
      ],
    }
  }
}

/**
 * TRACE_KEY: the key under which an audit event's detail carries, on its way to the store only, the traceparent of the
 * span it was written in. The insert (sqlite/part.ts INSERT_EVENT, postgres/part.ts auditInsert) takes it out of the
 * detail into the event's trace_parent column, in the same statement: the number and order of an event's values stay
 * what every statement's placeholders count on, and the detail stored (and sent in webhooks) is the one given.
 */
export const TRACE_KEY = '__traceparent'

/**
 * detailText: the detail as stored, with the current span's traceparent under TRACE_KEY while tracing. A TRACE_KEY the
 * detail itself holds is dropped: no caller's value can pose as the event's trace.
 */
function detailText(detail: AuditDraft['detail']): string {
  const trace = traceparent()
  if (trace === undefined && !Object.hasOwn(detail, TRACE_KEY)) return JSON.stringify(detail)
  const { [TRACE_KEY]: _given, ...rest } = detail
  return JSON.stringify(trace === undefined ? rest : { ...rest, [TRACE_KEY]: trace })
}

/** eventIdBefore: a bound below every id of an event at or after `iso` (ids sort by time). */
export function eventIdBefore(iso: string): string {
  return `evt_${Date.parse(iso).toString(16).padStart(12, '0')}`
}
