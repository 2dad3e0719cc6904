/**
 * What operators do to portal users, from the portal's operator pages or the CLI: approve or
 * refuse sign-ups (one rule for both doors), disable users, grant or revoke the operator
 * flag, turn off a user's second factor (a lost phone and lost codes), and list them; and the
 * users the demo account and the tests make, confirmed, through the same writes.
 */
import type { Membership, Role, User, UserPatch } from '../../domain/portal.ts'
import type { Page } from '../../domain/lists.ts'
import type { UserChange, UserQuery } from '../../storage/ports.ts'
import { newId } from '../../domain/ids.ts'
import { fail, type Context, type Failure } from '../outcome.ts'
import type { UsersCore } from './core.ts'

export type { UserQuery }

/** A user: by id (the portal's pages) or by email (the CLI). */
export type UserRef = { readonly id: string } | { readonly email: string }

/** A change to a user: the user as they are after it, and whether anything was written. */
export interface Changed {
  readonly user: User
  readonly changed: boolean
}

export interface NewUserInput {
  readonly email: string
  readonly password: string
  readonly operator?: boolean
  /** The `user.create` event's detail. */
  readonly detail?: Record<string, unknown>
}

export class UserAdmin {
  readonly #c: UsersCore

  constructor(core: UsersCore) {
    this.#c = core
  }

  list(query: UserQuery): Promise<Page<User>> {
    return this.#c.store.portal.listUsers(query)
  }

  get(id: string): Promise<User | null> {
    return this.#c.store.portal.getUser(id)
  }

  findByEmail(email: string): Promise<User | null> {
    return this.#c.store.portal.findUserByEmail(email)
  }

  async #find(ref: UserRef): Promise<User | Failure> {
    const user = 'id' in ref ? await this.get(ref.id) : await this.findByEmail(ref.email)
    return user ?? fail('not_found', `no portal user ${'id' in ref ? ref.id : ref.email}`)
  }

  /** pendingSignUps: sign-ups waiting for approval, oldest first, each with its (first) account. */
  async pendingSignUps(query: { readonly cursor?: string; readonly limit: number }): Promise<Page<{ user: User; account: Membership | null }>> {
    const page = await this.list({ status: 'pending', ...query })
    const items = await Promise.all(page.items.map(async (user) => ({ user, account: (await this.#c.store.portal.membershipsOf(user.id))[0] ?? null })))
    return { items, next: page.next }
  }

  /**
   * decideSignUp approves (active) or refuses (disabled) a sign-up waiting for approval, with
   * its event in the trail of the user's account. A user in that state already is left as
   * they are (`changed` false); one in another state is a conflict (decided already), unless
   * `disabledToo` lets an approval in a user an operator had disabled (the CLI's `user approve`).
   */
  async decideSignUp(ctx: Context, ref: UserRef, verb: 'approve' | 'refuse', options: { readonly disabledToo?: boolean } = {}): Promise<Changed | Failure> {
    const c = this.#c
    const user = await this.#find(ref)
    if ('failure' in user) return user
    const status = verb === 'approve' ? 'active' : 'disabled'
    if (user.status === status) return { user, changed: false }
    if (user.status !== 'pending' && !(options.disabledToo === true && verb === 'approve')) return fail('conflict', `${user.email} was decided already`)
    const account = (await c.store.portal.membershipsOf(user.id))[0]
    const draft = { ...c.draft(ctx, user, `user.${verb}`, { email: user.email }), accountId: account?.accountId ?? null }
    const changed = await c.store.portal.updateUser(user.id, { status }, draft)
    return changed === null ? fail('not_found', `no portal user ${user.email}`) : { user: changed, changed: true }
  }

  /**
   * #change applies a patch to a user, unless it is in place already (then nothing is
   * written), with what goes with it (`also`: codes, sessions) and its event, whose detail is
   * the patch, in one store step.
   */
  async #change(
    ctx: Context,
    ref: UserRef,
    patch: UserPatch,
    action: string,
    done: (user: User) => boolean,
    also: Pick<UserChange, 'recoveryCodes' | 'sessions'> = {},
  ): Promise<(Changed & { sessionsEnded: number }) | Failure> {
    const user = await this.#find(ref)
    if ('failure' in user) return user
    if (done(user)) return { user, changed: false, sessionsEnded: 0 }
    const changed = await this.#c.store.portal.changeUser(user.id, { ...also, patch, audits: () => [this.#c.draft(ctx, user, action, { ...patch })] })
    return changed === null
      ? fail('not_found', `no portal user ${'id' in ref ? ref.id : ref.email}`)
      : { user: changed.user, changed: true, sessionsEnded: changed.sessionsEnded }
  }

  /** disable refuses a user's sign-in and ends every session of theirs (ended again if disabled already). */
  async disable(ctx: Context, ref: UserRef): Promise<(Changed & { sessionsEnded: number }) | Failure> {
    const done = await this.#change(ctx, ref, { status: 'disabled' }, 'user.disable', (u) => u.status === 'disabled', { sessions: 'all' })
    if ('failure' in done || done.changed) return done
    // Disabled already: no change, no event; whatever session is left ends all the same.
    return { ...done, sessionsEnded: await this.#c.store.portal.deleteSessionsOf(done.user.id) }
  }

  /** setOperator grants or revokes the operator flag (every account, from the portal). */
  async setOperator(ctx: Context, ref: UserRef, operator: boolean): Promise<Changed | Failure> {
    const done = await this.#change(ctx, ref, { operator }, `user.operator-${operator ? 'grant' : 'revoke'}`, (u) => u.operator === operator)
    return 'failure' in done ? done : { user: done.user, changed: done.changed }
  }

  /** turnOffTwoFactor: a user's second factor off, with their recovery codes and sessions (a lost phone, lost codes), in one step. */
  turnOffTwoFactor(ctx: Context, ref: UserRef): Promise<(Changed & { sessionsEnded: number }) | Failure> {
    // Unused recovery codes of the old enrolment must not outlive it.
    return this.#change(ctx, ref, { totpSecret: null, totpEnabledAt: null }, 'user.2fa-off', (u) => u.totpEnabledAt === null && u.totpSecret === null, {
      recoveryCodes: [],
      sessions: 'all',
    })
  }

  /** operators: every operator; there is no store query for them (they are few): this walks the users once, in pages. */
  async operators(): Promise<User[]> {
    const found: User[] = []
    let cursor: string | undefined
    do {
      const page = await this.list({ limit: 1000, ...(cursor === undefined ? {} : { cursor }) })
      found.push(...page.items.filter((u) => u.operator))
      cursor = page.next ?? undefined
    } while (cursor !== undefined)
    return found
  }

  /**
   * createUser makes an active user with a confirmed address (the demo account's, the
   * tests'), and, with `member`, makes them a member of an account; a conflict when the
   * address has a user already.
   */
  async createUser(ctx: Context, input: NewUserInput, member?: { readonly accountId: string; readonly role: Role }): Promise<User | Failure> {
    const c = this.#c
    const now = c.iso()
    const user: User = {
      id: newId('usr'),
      email: input.email,
      passwordHash: await c.passwords.hash(input.password),
      emailVerifiedAt: now,
      status: 'active',
      operator: input.operator ?? false,
      totpSecret: null,
      totpEnabledAt: null,
      createdAt: now,
      updatedAt: now,
    }
    const made = await c.store.portal.createUser(user, c.draft(ctx, user, 'user.create', input.detail ?? {}))
    if (!made) return fail('conflict', `${input.email} has a user already`)
    if (member !== undefined) {
      const target = { type: 'member' as const, id: user.id }
      const draft = { ...c.draft(ctx, user, 'member.add', { role: member.role }), target, accountId: member.accountId }
      if (!(await c.store.portal.addMember(member.accountId, user.id, member.role, draft))) return fail('not_found', `no account ${member.accountId}`)
    }
    return user
  }
}
