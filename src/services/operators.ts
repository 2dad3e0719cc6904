/**
 * The rules of an operator invitation (the team service runs its link, services/team.ts):
 * who may be invited, what accepting it writes. An invitation grants nothing: the operator
 * flag is set when the invited address accepts, signed in as its user or, for an address
 * with no proved user, by choosing a password on the link's page.
 *
 * What an address's user decides:
 * - none: accepting creates the user, active, address confirmed (the link proves it), operator;
 * - one who never confirmed the address (someone signed it up, maybe not its owner): accepting
 *   claims that user as a password reset does (services/users/sign-up.ts): the password chosen
 *   on the link's page, the address confirmed, any second factor and recovery codes set up
 *   without that proof dropped, every session ended; so a sign-up made first by someone else
 *   takes nothing over, and does not keep the address's owner out;
 * - an active user with a confirmed address: accepting takes signing in as them (password and
 *   their second factor, as any sign-in), then the page's button;
 * - an operator already, a disabled user, or one waiting for approval: refused when inviting.
 */
import type { AuditDraft } from '../domain/accounts.ts'
import type { User } from '../domain/portal.ts'
import type { UserChange } from '../storage/ports.ts'
import { newId } from '../domain/ids.ts'
import { draft } from './outcome.ts'

/** Why an address may not be invited to be an operator (the team service's refusals of the same names). */
export interface NotInvitable {
  readonly refusal: 'operator-already' | 'not-invitable'
  readonly message: string
}

/** operatorInvitable: null when the address's user (or none) may be invited to be an operator; else the refusal. */
export function operatorInvitable(user: User | null): NotInvitable | null {
  if (user === null || unclaimed(user)) return null
  if (user.operator) return { refusal: 'operator-already', message: `${user.email} is an operator already` }
  if (user.status === 'disabled') return { refusal: 'not-invitable', message: `${user.email} is disabled: a disabled user cannot accept an invitation` }
  if (user.status === 'pending') return { refusal: 'not-invitable', message: `${user.email} waits for approval: approve the sign-up first (user approve)` }
  return null
}

/** unclaimed: a user whose address was never confirmed, and whom no operator disabled: the link's holder claims them. */
export function unclaimed(user: User): boolean {
  return user.emailVerifiedAt === null && user.status !== 'disabled'
}

/** grantDraft: the `user.operator-grant` event of an acceptance, the user as its actor. */
export function grantDraft(ip: string | null, user: Pick<User, 'id' | 'email'>, detail: Record<string, unknown>): AuditDraft {
  return draft({ actor: { type: 'portal-user', id: user.id }, ip }, 'user.operator-grant', { type: 'user', id: user.id }, null, {
    email: user.email,
    via: 'invitation',
    ...detail,
  })
}

/** operatorSignUp: the user an operator invitation's acceptance creates. */
export function operatorSignUp(email: string, passwordHash: string, at: string): User {
  return {
    id: newId('usr'),
    email,
    passwordHash,
    emailVerifiedAt: at,
    status: 'active',
    operator: true,
    totpSecret: null,
    totpEnabledAt: null,
    createdAt: at,
    updatedAt: at,
  }
}

/** claimDraft: the change that claims an unconfirmed user for the link's holder (the event is the caller's). */
export function claimDraft(passwordHash: string, at: string): Omit<UserChange, 'audits'> {
  return {
    patch: { passwordHash, emailVerifiedAt: at, status: 'active', operator: true, totpSecret: null, totpEnabledAt: null },
    recoveryCodes: [],
    sessions: 'all',
  }
}
