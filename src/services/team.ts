/**
 * The team service: an account's members and its invitations, whichever door asks (today the
 * portal's team and invitation pages). The rules live here:
 * - an admin manages the team but not its owners, and makes no owners (rolesOffered, mayManage);
 * - an account keeps at least one owner: the store decides it in the same step as the change
 *   (LastOwnerError), so two owners demoting each other at once leave one of them owner;
 * - an invitation is a single-use link kept as the hash of its token: a new one to the same
 *   address replaces the earlier (in the store's createToken), reading one uses nothing up, and
 *   using it is one atomic step (consumeToken) that one request wins however many try at once;
 * - a member is not invited again; an invitation is accepted by its address only.
 * An operator invitation (the CLI's `operator invite`, the admin API's inviteOperator) is the
 * same link without an account or a role: accepting it grants the operator flag, and nothing is
 * granted before (operators.ts holds its rules).
 * Each change writes its audit event (`member.*`, `operator.invite`, `user.operator-grant`, and
 * `user.sign-up` for the sign-in an invitation may create) with the actor of the context.
 * Refusals are `TeamFailure`s, which name the rule refused (the page words its own answer);
 * they leave no event, as before.
 */
import type { Account } from '../domain/accounts.ts'
import type { AuditDraft, AuditTarget } from '../domain/accounts.ts'
import { LastOwnerError } from '../domain/errors.ts'
import { emailKey, ROLES, type EmailToken, type Member, type Membership, type Role, type User } from '../domain/portal.ts'
import type { Store } from '../storage/ports.ts'
import { isToken, newSessionToken, sessionIdHash } from './users/tokens.ts'
import { draft, isFailure, type Context, type Failure, type FailureKind } from './outcome.ts'
import { claimDraft, grantDraft, operatorInvitable, operatorSignUp, unclaimed } from './operators.ts'

/** How long an invitation works. */
export const INVITE_TTL_MS = 7 * 24 * 3_600_000

/** The longest account id an invitation link may name (longer ones are not looked up). */
const MAX_ACCOUNT_ID = 64

export function isRole(value: string): value is Role {
  return (ROLES as readonly string[]).includes(value)
}

/** rolesOffered: the roles a member of `role` may give (an admin makes no owners). */
export function rolesOffered(role: Role): readonly Role[] {
  return role === 'owner' ? ROLES : ROLES.filter((r) => r !== 'owner')
}

/** mayManage: a member of role `actor` may change or remove a member of role `target` (owners: anyone; admins: all but owners). */
export function mayManage(actor: Role, target: Role): boolean {
  return actor === 'owner' || (actor === 'admin' && target !== 'owner')
}

/**
 * The rule a team change was refused by:
 * `bad-role` not a role; `owner-only` only an owner gives the owner role, or changes or removes
 * an owner; `member-already` the address is a member; `not-member` no such member (any more);
 * `last-owner` the account would have no owner; `no-invitation` the link was used, has expired,
 * was replaced or cancelled; `wrong-address` the invitation is someone else's; `has-sign-in`
 * the invited address has a sign-in already (made since the page was shown);
 * `operator-already` the address's user is an operator; `not-invitable` its user is disabled
 * or waits for approval (operators.ts).
 */
export type TeamRefusal =
  | 'bad-role'
  | 'owner-only'
  | 'member-already'
  | 'not-member'
  | 'last-owner'
  | 'no-invitation'
  | 'wrong-address'
  | 'has-sign-in'
  | 'operator-already'
  | 'not-invitable'

export interface TeamFailure extends Failure {
  readonly refusal: TeamRefusal
  /** The member the refused change was about, when it was found. */
  readonly member?: Member
}

const refused = (refusal: TeamRefusal, failure: FailureKind, message: string, member?: Member): TeamFailure =>
  member === undefined ? { failure, message, refusal } : { failure, message, refusal, member }

/** A pending invitation found by its link, with its account (null: an operator invitation). */
export interface FoundInvitation {
  readonly invitation: EmailToken
  readonly account: Account | null
}

/** An invitation made: its token goes into the link emailed, and nowhere else (never a log). */
export interface Invited {
  readonly token: string
  /** The invitee's address, as kept (emailKey). */
  readonly email: string
  readonly role: Role
  readonly expiresAt: string
}

/** What accepting an invitation with a new sign-in needs from the door: the password's hash, and the session it signs in with. */
export interface NewSignIn {
  readonly passwordHash: string
  /** The hash of the new session's token (the door keeps the token, for the cookie). */
  readonly sessionIdHash: string
  readonly ip: string | null
  readonly userAgent: string | null
}

/** An operator invitation made: its token goes into the link, and nowhere else (never a log). */
export interface OperatorInvited {
  /** The invitee's address, as kept (emailKey). */
  readonly email: string
  readonly token: string
  readonly expiresAt: string
}

export interface TeamOptions {
  readonly store: Store
  /** The clock (epoch ms); tests move it. */
  readonly now: () => number
  /** How long a session lasts (SESSION_TTL_HOURS): the one an invitation's new sign-in starts. */
  readonly sessionTtlMs: number
}

export class Team {
  readonly #store: Store
  readonly #now: () => number
  readonly #sessionTtlMs: number

  constructor(opts: TeamOptions) {
    this.#store = opts.store
    this.#now = opts.now
    this.#sessionTtlMs = opts.sessionTtlMs
  }

  #iso(afterMs = 0): string {
    return new Date(this.#now() + afterMs).toISOString()
  }

  #draft(ctx: Context, action: string, target: AuditTarget, accountId: string | null, detail: Record<string, unknown>): AuditDraft {
    return draft(ctx, action, target, accountId, detail)
  }

  // Reads

  /** members: an account's members, oldest first. */
  members(accountId: string): Promise<Member[]> {
    return this.#store.portal.listMembers(accountId)
  }

  /** pendingInvitations: an account's invitations neither used nor expired, oldest first. */
  pendingInvitations(accountId: string): Promise<EmailToken[]> {
    return this.#store.portal.pendingInvites(accountId, this.#iso())
  }

  /** memberships: the accounts a user belongs to, oldest membership first. */
  memberships(userId: string): Promise<Membership[]> {
    return this.#store.portal.membershipsOf(userId)
  }

  /**
   * emailsOf: the addresses of portal users by id, to show who did what in an account: its
   * members in one read, anyone else (a former member, an operator) one read each. An id
   * with no user is left out.
   */
  async emailsOf(accountId: string, userIds: readonly string[]): Promise<Map<string, string>> {
    const emails = new Map((await this.#store.portal.listMembers(accountId)).map((m) => [m.userId, m.email]))
    const others = userIds.filter((id) => !emails.has(id))
    const found = await Promise.all(others.map((id) => this.#store.portal.getUser(id)))
    others.forEach((id, i) => {
      const user = found[i]
      if (user) emails.set(id, user.email)
    })
    return emails
  }

  // Members

  /**
   * invite makes an invitation of `accountId` to `email` with `role`, given by a member of
   * role `by`, and its `member.invite` event. The address is kept by its emailKey: a second
   * invitation to it, in any case, replaces the first. The door checks the address's form.
   */
  async invite(ctx: Context, accountId: string, by: Role, input: { readonly email: string; readonly role: string }): Promise<Invited | TeamFailure> {
    const { role } = input
    if (!isRole(role)) return refused('bad-role', 'invalid', `role must be one of ${ROLES.join(', ')}`)
    if (!rolesOffered(by).includes(role)) return refused('owner-only', 'invalid', 'only an owner can invite owners')
    const invitee = emailKey(input.email)
    const members = await this.#store.portal.listMembers(accountId)
    if (members.some((m) => emailKey(m.email) === invitee)) return refused('member-already', 'conflict', `${input.email} is already a member`)
    const { token, idHash } = newSessionToken()
    const expiresAt = this.#iso(INVITE_TTL_MS)
    const event = this.#draft(ctx, 'member.invite', { type: 'member', id: invitee }, accountId, { email: invitee, role })
    await this.#store.portal.createToken({ tokenHash: idHash, purpose: 'invite', email: invitee, accountId, role, expiresAt }, [event])
    return { token, email: invitee, role, expiresAt }
  }

  /** #manageable: the member `userId` of the account, when a member of role `by` may change or remove them. */
  async #manageable(accountId: string, by: Role, userId: string): Promise<Member | TeamFailure> {
    const member = (await this.#store.portal.listMembers(accountId)).find((m) => m.userId === userId)
    if (member === undefined) return refused('not-member', 'not_found', 'no such member')
    if (!mayManage(by, member.role)) return refused('owner-only', 'invalid', 'only an owner can change or remove an owner', member)
    return member
  }

  /** changeRole gives a member another role (the same role: nothing is written); returns the member as changed. */
  async changeRole(ctx: Context, accountId: string, by: Role, userId: string, role: string): Promise<Member | TeamFailure> {
    if (!isRole(role)) return refused('bad-role', 'invalid', `role must be one of ${ROLES.join(', ')}`)
    if (!rolesOffered(by).includes(role)) return refused('owner-only', 'invalid', 'only an owner can make owners')
    const member = await this.#manageable(accountId, by, userId)
    if (isFailure(member)) return member
    if (member.role === role) return member
    const draft = this.#draft(ctx, 'member.role', { type: 'member', id: member.userId }, accountId, { email: member.email, from: member.role, to: role })
    const changed = await lastOwnerKept(() => this.#store.portal.setRole(accountId, member.userId, role, draft))
    if (changed === null) return refused('last-owner', 'conflict', 'an account keeps at least one owner', member)
    if (!changed) return refused('not-member', 'conflict', `${member.email} is not a member any more`, member)
    return { ...member, role }
  }

  /** remove removes a member from the account (by someone else: leaving is `leave`); returns who was removed. */
  async remove(ctx: Context, accountId: string, by: Role, userId: string): Promise<Member | TeamFailure> {
    const member = await this.#manageable(accountId, by, userId)
    if (isFailure(member)) return member
    const draft = this.#draft(ctx, 'member.remove', { type: 'member', id: member.userId }, accountId, { email: member.email, role: member.role })
    // False when they went at the same time: they are gone either way.
    const removed = await lastOwnerKept(() => this.#store.portal.removeMember(accountId, member.userId, draft))
    if (removed === null) return refused('last-owner', 'conflict', 'an account keeps at least one owner', member)
    return member
  }

  /** leave takes the user of the context out of the account; `role` is the one they act with there (the event's detail). */
  async leave(ctx: Context, accountId: string, user: Pick<User, 'id' | 'email'>, role: Role): Promise<{ left: true } | TeamFailure> {
    const draft = this.#draft(ctx, 'member.remove', { type: 'member', id: user.id }, accountId, { email: user.email, role, left: true })
    const left = await lastOwnerKept(() => this.#store.portal.removeMember(accountId, user.id, draft))
    if (left === null) return refused('last-owner', 'conflict', 'an account keeps at least one owner')
    if (!left) return refused('not-member', 'conflict', 'not a member: there is nothing to leave')
    return { left: true }
  }

  // Invitations

  /** cancelInvitation withdraws the account's pending invitations of an address (by emailKey); their links die at once. */
  async cancelInvitation(ctx: Context, accountId: string, email: string): Promise<{ email: string; role: Role | null } | TeamFailure> {
    const invitee = emailKey(email)
    // Only this account's invitations: a token hash is never taken from a door.
    const invites = (await this.pendingInvitations(accountId)).filter((t) => emailKey(t.email) === invitee)
    if (invites.length === 0) return refused('no-invitation', 'conflict', 'that invitation was used, has expired or was cancelled already')
    const role = invites[0]!.role
    const event = this.#draft(ctx, 'member.invite-cancel', { type: 'member', id: invitee }, accountId, { email: invitee, role })
    // Withdrawn meanwhile (a cancellation at the same time): the same answer, and only the one that withdrew them writes the event.
    await this.#store.portal.deleteTokens(
      invites.map((t) => t.tokenHash),
      event,
    )
    return { email: invitee, role }
  }

  /** findInvitation: the pending invitation of a link's token and account, or null (malformed, unknown, used, expired or replaced). Uses nothing up. */
  async findInvitation(token: string, accountId: string): Promise<FoundInvitation | null> {
    if (!isToken(token) || accountId.length > MAX_ACCOUNT_ID) return null
    const hash = sessionIdHash(token)
    // A link without an account is an operator invitation's: an account's invitation is found through its account only.
    if (accountId === '') {
      const invitation = await this.#store.portal.findToken(hash, 'invite', this.#iso())
      return invitation === null || invitation.accountId !== null ? null : { invitation, account: null }
    }
    const invitation = (await this.pendingInvitations(accountId)).find((t) => t.tokenHash === hash)
    const account = invitation === undefined ? null : await this.#store.access.getAccount(accountId)
    return invitation === undefined || account === null ? null : { invitation, account }
  }

  /** #consume uses the invitation up: true for one caller only, however many at once. */
  async #consume(found: FoundInvitation): Promise<boolean> {
    return (await this.#store.portal.consumeToken(found.invitation.tokenHash, 'invite', this.#iso())) !== null
  }

  #joinDraft(ip: string | null, account: Account, found: FoundInvitation, user: Pick<User, 'id' | 'email'>): AuditDraft {
    return this.#draft({ actor: { type: 'portal-user', id: user.id }, ip }, 'member.join', { type: 'member', id: user.id }, account.id, {
      email: user.email,
      role: found.invitation.role,
    })
  }

  /**
   * join accepts an invitation for a signed-in user of the invited address: the address is
   * checked before the invitation is used up (someone else's click must not spend it).
   */
  async join(ctx: Context, user: Pick<User, 'id' | 'email'>, found: FoundInvitation): Promise<{ joined: true } | TeamFailure> {
    if (emailKey(user.email) !== emailKey(found.invitation.email)) return refused('wrong-address', 'invalid', 'this invitation was sent to another address')
    if (!(await this.#consume(found))) return refused('no-invitation', 'conflict', 'the invitation was used, has expired or was replaced')
    if (found.account === null) {
      // The flag is granted here, on acceptance by a signed-in user of the invited address, and nowhere before.
      await this.#store.portal.updateUser(user.id, { operator: true }, grantDraft(ctx.ip ?? null, user, {}))
      return { joined: true }
    }
    // False when they are a member already: they are where the invitation would take them.
    await this.#store.portal.addMember(
      found.account.id,
      user.id,
      found.invitation.role ?? 'viewer',
      this.#joinDraft(ctx.ip ?? null, found.account, found, user),
    )
    return { joined: true }
  }

  /**
   * signUpAndJoin accepts an invitation for an address with no sign-in: it uses the invitation
   * up, creates the user (active, the address proved by the link, whatever SIGNUP_MODE), makes
   * them a member and starts their session. The door checks the password's rule and hashes it
   * first: a password refused does not use the invitation up.
   */
  async signUpAndJoin(found: FoundInvitation, input: NewSignIn): Promise<User | TeamFailure> {
    if (!(await this.#consume(found))) return refused('no-invitation', 'conflict', 'the invitation was used, has expired or was replaced')
    if (found.account === null) return this.#operatorSignIn(found, input)
    const account = found.account
    const at = this.#iso()
    const user: User = {
      id: `usr_${newSessionToken().token.slice(0, 22)}`,
      email: found.invitation.email,
      passwordHash: input.passwordHash,
      emailVerifiedAt: at,
      status: 'active',
      operator: false,
      totpSecret: null,
      totpEnabledAt: null,
      createdAt: at,
      updatedAt: at,
    }
    const signUp: AuditDraft = {
      ...this.#joinDraft(input.ip, account, found, user),
      action: 'user.sign-up',
      target: { type: 'user', id: user.id },
      accountId: null,
      detail: { via: 'invitation' },
    }
    // Someone created a sign-in for this address since the page was shown: the invitation is used up all the same.
    if (!(await this.#store.portal.createUser(user, signUp))) return refused('has-sign-in', 'conflict', `${user.email} has a sign-in already`)
    await this.#store.portal.addMember(account.id, user.id, found.invitation.role ?? 'viewer', this.#joinDraft(input.ip, account, found, user))
    await this.#startSession(user, input)
    return user
  }

  async #startSession(user: Pick<User, 'id'>, input: NewSignIn): Promise<void> {
    await this.#store.portal.createSession({
      idHash: input.sessionIdHash,
      userId: user.id,
      expiresAt: this.#iso(this.#sessionTtlMs),
      twoFactorPending: false,
      ip: input.ip,
      userAgent: input.userAgent,
    })
  }

  // Operators

  /**
   * inviteOperator makes an operator invitation to `email` and its `operator.invite` event: a
   * link without an account, which replaces the address's earlier operator invitation (its link
   * dies). Nothing is granted now, whoever holds the address: the flag goes with the
   * acceptance (join, signUpAndJoin). Refused for an operator, a disabled user and one waiting
   * for approval (operators.ts). The door checks the address's form and sends the link.
   */
  async inviteOperator(ctx: Context, email: string): Promise<OperatorInvited | TeamFailure> {
    const invitee = emailKey(email)
    const not = operatorInvitable(await this.#store.portal.findUserByEmail(invitee))
    if (not !== null) return refused(not.refusal, 'conflict', not.message)
    const { token, idHash } = newSessionToken()
    const expiresAt = this.#iso(INVITE_TTL_MS)
    const event = this.#draft(ctx, 'operator.invite', { type: 'user', id: invitee }, null, { email: invitee })
    await this.#store.portal.createToken({ tokenHash: idHash, purpose: 'invite', email: invitee, accountId: null, role: null, expiresAt }, [event])
    return { token, email: invitee, expiresAt }
  }

  /**
   * signInNeeded: whether accepting takes signing in as the invited address's user (a sign-in
   * exists), or choosing a password. For an operator invitation a user whose address was never
   * confirmed does not count: whoever made it had not proved the address, which the link does.
   */
  async signInNeeded(found: FoundInvitation): Promise<boolean> {
    const user = await this.#store.portal.findUserByEmail(found.invitation.email)
    return user !== null && (found.account !== null || !unclaimed(user))
  }

  /**
   * #operatorSignIn: an operator invitation accepted signed out, used up already: a new user,
   * active and operator; or, for an address whose user never confirmed it, that user claimed
   * as a password reset claims it (the chosen password, the address confirmed, whatever was
   * set up without proof gone, every session ended), and made operator. Then the new session.
   */
  async #operatorSignIn(found: FoundInvitation, input: NewSignIn): Promise<User | TeamFailure> {
    const at = this.#iso()
    const existing = await this.#store.portal.findUserByEmail(found.invitation.email)
    let user: User | null = null
    if (existing === null) {
      const made = operatorSignUp(found.invitation.email, input.passwordHash, at)
      if (await this.#store.portal.createUser(made, grantDraft(input.ip, made, { via: 'invitation', signUp: true }))) user = made
    } else if (unclaimed(existing)) {
      const claim = claimDraft(input.passwordHash, at)
      user =
        (await this.#store.portal.changeUser(existing.id, { ...claim, audits: () => [grantDraft(input.ip, existing, { via: 'invitation', confirmed: true })] }))
          ?.user ?? null
    }
    if (user === null) return refused('has-sign-in', 'conflict', `${found.invitation.email} has a sign-in already`)
    await this.#startSession(user, input)
    return user
  }
}

/** lastOwnerKept runs a change of members: its answer, or null when the store refused it to keep the account's last owner. */
async function lastOwnerKept(change: () => Promise<boolean>): Promise<boolean | null> {
  try {
    return await change()
  } catch (error) {
    if (error instanceof LastOwnerError) return null
    throw error
  }
}
