/**
 * The one shape of a service's answer to a door: a value, or a `Failure` (an expected refusal
 * that the door turns into its own answer: 404, 400, 409 or a page's message), and the
 * `Context` every change is made in (who asks, from where) for its audit event.
 */
import { actorName, type Actor, type AuditDraft, type AuditTarget } from '../domain/accounts.ts'
import type { AuditStore } from '../storage/ports.ts'

/** Who asks, and from where (the source address of an HTTP door). */
export interface Context {
  readonly actor: Actor
  readonly ip?: string | null
}

/** `limit`: a cap of the service's settings (keys per account, accounts per portal user, webhook endpoints) is reached. */
export type FailureKind = 'not_found' | 'invalid' | 'conflict' | 'limit'

/** Failure: an expected refusal, with a message for people (never a secret). */
export interface Failure {
  readonly failure: FailureKind
  readonly message: string
  /** The input field at fault, for `invalid`. */
  readonly field?: string
}

export function isFailure(value: unknown): value is Failure {
  return typeof value === 'object' && value !== null && 'failure' in value
}

export const fail = (failure: FailureKind, message: string, field?: string): Failure =>
  field === undefined ? { failure, message } : { failure, message, field }

/**
 * draft: the audit event of a change made in `ctx`, which the store writes in the change's own
 * step (a refused change records its own, with outcome `failure`). Every service drafts here.
 */
export function draft(ctx: Context, action: string, target: AuditTarget, accountId: string | null, detail: Record<string, unknown> = {}): AuditDraft {
  return { actor: actorName(ctx.actor), action, target, accountId, ip: ctx.ip ?? null, outcome: 'success', detail }
}

/** refused records a refused change (its event, outcome `failure`, with the reason) and answers its failure. */
export async function refused(
  audit: Pick<AuditStore, 'append'>,
  ctx: Context,
  action: string,
  target: AuditTarget,
  accountId: string | null,
  failure: Failure,
): Promise<Failure> {
  await audit.append({ ...draft(ctx, action, target, accountId, { reason: failure.message }), outcome: 'failure' })
  return failure
}
