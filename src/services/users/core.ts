/**
 * What every part of the users service shares: its dependencies, the clock, the drafts of a
 * user's audit events, the email links, and checking a signed-in user's password again.
 */
import type { Config } from '../../config/config.ts'
import type { Pepper } from '../../crypto/keyed.ts'
import type { AuditDraft } from '../../domain/accounts.ts'
import { emailKey, type User } from '../../domain/portal.ts'
import type { Store } from '../../storage/ports.ts'
import type { Accounts } from '../accounts.ts'
import { draft, type Context } from '../outcome.ts'
import type { CodeDeps } from './codes.ts'
import { PortalLimits } from './limits.ts'
import { Passwords } from './passwords.ts'
import { SignInThrottle } from './throttle.ts'
import { newSessionToken } from './tokens.ts'

/** How long a password-reset link works (a confirmation link: SIGNUP_CONFIRM_HOURS). */
export const RESET_TTL_MS = 30 * 60_000
/** How long a session has to give its second factor. */
export const SECOND_FACTOR_TTL_MS = 10 * 60_000

export interface UsersOptions {
  /** The portal's view of the store (TOTP secrets sealed: services/users/sealed.ts). */
  readonly store: Store
  readonly config: Config
  readonly pepper: Pepper
  /** The accounts service: a sign-up's account is made through it. */
  readonly accounts: Accounts
  /** Default: OWASP's setting, with its lanes (passwords.ts). */
  readonly passwords?: Passwords
  /** Default: one over the same store, clock and pepper. */
  readonly throttle?: SignInThrottle
  /** The clock (epoch ms); tests move it. */
  readonly now?: () => number
}

/** Why a password asked for again was not taken: too many tries (wait seconds), or wrong (and the wait it left). */
export type PasswordRefusal = { readonly kind: 'throttled'; readonly wait: number } | { readonly kind: 'wrong'; readonly lockedFor: number }

/** The context of a user's own change: they are the actor. */
export const own = (user: Pick<User, 'id'>, ip: string | null): Context => ({ actor: { type: 'portal-user', id: user.id }, ip })

export class UsersCore implements CodeDeps {
  readonly store: Store
  readonly config: Config
  readonly pepper: Pepper
  readonly accounts: Accounts
  readonly passwords: Passwords
  readonly throttle: SignInThrottle
  /** Sign-ups and unasked-for emails, per source and address (limits.ts). */
  readonly limits: PortalLimits
  readonly now: () => number
  readonly sessionTtlMs: number
  readonly verifyTtlMs: number

  constructor(o: UsersOptions) {
    this.store = o.store
    this.config = o.config
    this.pepper = o.pepper
    this.accounts = o.accounts
    this.now = o.now ?? Date.now
    this.passwords = o.passwords ?? new Passwords()
    this.throttle = o.throttle ?? new SignInThrottle(o.store, o.config, this.now, o.pepper)
    this.limits = new PortalLimits(o.store, o.config, this.now, o.pepper)
    this.sessionTtlMs = o.config.sessionTtlHours * 3_600_000
    this.verifyTtlMs = o.config.signupConfirmHours * 3_600_000
  }

  iso(ms = this.now()): string {
    return new Date(ms).toISOString()
  }

  /** draft: an audit event about a user (no account: the user's, as updateUser records it). */
  draft(ctx: Context, user: Pick<User, 'id'>, action: string, detail: Record<string, unknown> = {}): AuditDraft {
    return draft(ctx, action, { type: 'user', id: user.id }, null, detail)
  }

  /**
   * ownEvents drafts a user's own event in each of their accounts (so each account's audit
   * page shows it; at most 20), or once with none: the accounts are read now, the drafts made
   * with the detail (a sign-out's count, known in the store's step), for the step that writes
   * the change.
   */
  async ownEvents(ip: string | null, user: User, action: string, outcome: 'success' | 'failure'): Promise<(detail: Record<string, unknown>) => AuditDraft[]> {
    const accounts = (await this.store.portal.membershipsOf(user.id)).slice(0, 20)
    return (detail) => {
      const one: AuditDraft = { ...this.draft(own(user, ip), user, action, detail), outcome }
      return accounts.length === 0 ? [one] : accounts.map((m) => ({ ...one, accountId: m.accountId }))
    }
  }

  /** auditUser records a user's own event that goes with no change (a failure) in each of their accounts, or once with none (ownEvents). */
  async auditUser(ip: string | null, user: User, action: string, outcome: 'success' | 'failure', detail: Record<string, unknown>): Promise<void> {
    for (const event of (await this.ownEvents(ip, user, action, outcome))(detail)) await this.store.audit.append(event)
  }

  /** audit records a user's event (auditUser), or an unknown email's attempt once, as anonymous. */
  async audit(ip: string, user: User | null, action: string, outcome: 'success' | 'failure', detail: Record<string, unknown>, target = ''): Promise<void> {
    if (user !== null) return this.auditUser(ip, user, action, outcome, detail)
    await this.store.audit.append({ actor: 'anonymous', action, target: { type: 'user', id: target.slice(0, 320) }, accountId: null, ip, outcome, detail })
  }

  /** link: an email link, a fresh single-use token of this purpose, replacing the earlier ones; `audits` are written with it. */
  async link(user: User, purpose: 'verify-email' | 'reset-password', path: string, ttlMs: number, audits: readonly AuditDraft[] = []): Promise<string> {
    const { token, idHash } = newSessionToken()
    const expiresAt = this.iso(this.now() + ttlMs)
    await this.store.portal.createToken({ tokenHash: idHash, purpose, email: user.email, userId: user.id, expiresAt }, audits)
    return `${this.config.publicBaseUrl}/portal/${path}?token=${token}`
  }

  /** verifyLink: a new confirmation link for a user's address, or null when one went within the mail window. */
  async verifyLink(user: User): Promise<string | null> {
    return (await this.limits.mail('sign-up', user.email)) ? this.link(user, 'verify-email', 'verify-email', this.verifyTtlMs) : null
  }

  /**
   * passwordAgain checks a signed-in user's password again, through the sign-in throttle (a
   * session left open must not become a way to guess it): null when right; a wrong one is
   * audited with the form it was typed into.
   */
  async passwordAgain(user: User, password: string, ip: string, form: string): Promise<PasswordRefusal | null> {
    const key = emailKey(user.email)
    const wait = await this.throttle.blocked(key, ip)
    if (wait > 0) return { kind: 'throttled', wait }
    const ok = await this.passwords.verify(password, user.passwordHash)
    const lockedFor = await this.throttle.settle(key, ip, ok)
    if (ok) return null
    await this.auditUser(ip, user, 'user.password-check', 'failure', { form })
    return { kind: 'wrong', lockedFor }
  }
}
