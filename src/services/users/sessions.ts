/**
 * Signing in and out, after The Copenhagen Book and OWASP's authentication cheat sheet: the
 * same work whether an email is known or not (an unknown one is verified against a dummy
 * hash), the sign-in throttle before any hash, a new session id at every sign-in and again
 * when the second factor completes it (in the same atomic step that marks it done), and a
 * sliding expiry that a session still owing its second factor never gets.
 */
import type { Membership, Session, User } from '../../domain/portal.ts'
import { emailKey } from '../../domain/portal.ts'
import type { VerifyOutcome } from '../../totp/verify.ts'
import type { Context } from '../outcome.ts'
import { checkRecoveryCode, checkTotp } from './codes.ts'
import { SECOND_FACTOR_TTL_MS, type UsersCore } from './core.ts'
import { newSessionToken, sessionIdHash } from './tokens.ts'
import { passwordPolicy } from './sso.ts'

/** The longest email address (RFC 5321's path limit). */
export const MAX_EMAIL = 254

/** A session and its user, as found for a request. */
export interface Found {
  readonly session: Session
  readonly user: User
}

export interface SignInInput {
  readonly email: string
  readonly password: string
  readonly ip: string
  readonly userAgent: string | null
}

/**
 * What a sign-in came to: too many tries (wait seconds); a wrong email or password (and the
 * wait it left); an address not confirmed (with a new confirmation link to mail, when one may
 * go); a user pending approval or disabled; or a new session (its token, for the cookie),
 * complete or owing its second factor.
 */
export type SignInOutcome =
  | { readonly kind: 'throttled'; readonly wait: number }
  | { readonly kind: 'wrong'; readonly lockedFor: number }
  | { readonly kind: 'unconfirmed'; readonly user: User; readonly link: string | null }
  | { readonly kind: 'inactive'; readonly status: 'pending' | 'disabled' }
  | { readonly kind: 'sso-only'; readonly providers: readonly string[] }
  /** The password was right, but opens no session: the user links this provider of their domain first (through it, in this browser). */
  | { readonly kind: 'link-first'; readonly user: User; readonly providerId: string; readonly providerName: string }
  | { readonly kind: 'signed-in'; readonly token: string; readonly twoFactor: boolean }

/** What a second-factor step came to: locked (wait seconds), a wrong or reused code, the session gone, or the full session's new token. */
export type SecondFactorOutcome =
  | { readonly kind: 'locked'; readonly retryAfterSeconds: number }
  | { readonly kind: 'wrong'; readonly reused: boolean }
  | { readonly kind: 'gone' }
  | { readonly kind: 'signed-in'; readonly token: string }

export class Sessions {
  readonly #c: UsersCore

  constructor(core: UsersCore) {
    this.#c = core
  }

  /** ttlMs: how long a session lives unused (SESSION_TTL_HOURS). */
  get ttlMs(): number {
    return this.#c.sessionTtlMs
  }

  /**
   * find: the live session of a cookie's token and its user, or null (unknown, expired,
   * disabled, or a second factor still due unless `pendingToo`). Touches it, at most once a
   * minute, to slide its expiry.
   */
  async find(token: string, options: { readonly pendingToo?: boolean } = {}): Promise<Found | null> {
    const c = this.#c
    const found = await c.store.portal.findSession(sessionIdHash(token), c.iso())
    if (found === null || found.user.status !== 'active') return null
    if (found.session.twoFactorPending && options.pendingToo !== true) return null
    // Sliding expiry, written at most once a minute per session.
    // Never a pending one: its ten minutes to give the second factor must not grow by visiting.
    if (!found.session.twoFactorPending && c.now() - Date.parse(found.session.lastSeenAt) > 60_000) {
      await c.store.portal.touchSession(found.session.idHash, c.iso(), c.iso(c.now() + c.sessionTtlMs))
    }
    return found
  }

  /** membershipsOf: the accounts a user belongs to, oldest membership first. */
  membershipsOf(userId: string): Promise<Membership[]> {
    return this.#c.store.portal.membershipsOf(userId)
  }

  /** signIn checks an email and password and, when they are right, opens a session. */
  async signIn(input: SignInInput): Promise<SignInOutcome> {
    const c = this.#c
    const { email, password, ip } = input
    const wait = await c.throttle.blocked(emailKey(email), ip)
    if (wait > 0) return { kind: 'throttled', wait }
    const user = email === '' || email.length > MAX_EMAIL ? null : await c.store.portal.findUserByEmail(email)
    // An unknown email takes as long as a wrong password (a dummy hash), and gets the same words.
    let ok: boolean
    try {
      ok = await c.passwords.verify(password, user?.passwordHash ?? null)
    } catch (error) {
      // Never checked (the hash queue was full: 503): not counted either.
      await c.throttle.release(emailKey(email), ip)
      throw error
    }
    const lockedFor = await c.throttle.settle(emailKey(email), ip, ok && user !== null)
    if (!ok || user === null) {
      await c.audit(ip, user, 'user.sign-in', 'failure', { reason: 'wrong email or password' }, emailKey(email))
      return { kind: 'wrong', lockedFor }
    }
    if (user.emailVerifiedAt === null) {
      await c.audit(ip, user, 'user.sign-in', 'failure', { reason: 'email not confirmed' })
      return { kind: 'unconfirmed', user, link: await c.verifyLink(user) }
    }
    if (user.status !== 'active') {
      await c.audit(ip, user, 'user.sign-in', 'failure', { reason: `user ${user.status}` })
      return { kind: 'inactive', status: user.status }
    }
    // A provider that allows no password and knows this user: the right password opens nothing.
    const policy = await passwordPolicy(c, user)
    if (policy.refused.length > 0) {
      await c.audit(ip, user, 'user.sign-in', 'failure', { reason: 'password not allowed: single sign-on only' })
      return { kind: 'sso-only', providers: policy.refused }
    }
    if (policy.linkFirst !== null) {
      await c.audit(ip, user, 'user.sign-in', 'failure', { reason: `password right, but ${policy.linkFirst.id} must be linked first` })
      return { kind: 'link-first', user, providerId: policy.linkFirst.id, providerName: policy.linkFirst.name }
    }
    if (c.passwords.needsRehash(user.passwordHash!)) await c.store.portal.updateUser(user.id, { passwordHash: await c.passwords.hash(password) }, null)
    // A new session id at every sign-in (no fixation).
    const twoFactor = user.totpEnabledAt !== null
    const session = newSessionToken()
    // Signed in with the session, its event in the same step; one still owing its second factor has none yet.
    const events = twoFactor ? [] : (await c.ownEvents(ip, user, 'user.sign-in', 'success'))({})
    const userAgent = input.userAgent === null ? null : input.userAgent.slice(0, 256)
    const expiresAt = c.iso(c.now() + (twoFactor ? SECOND_FACTOR_TTL_MS : c.sessionTtlMs))
    await c.store.portal.createSession({ idHash: session.idHash, userId: user.id, expiresAt, twoFactorPending: twoFactor, ip, userAgent }, events)
    return { kind: 'signed-in', token: session.token, twoFactor }
  }

  /**
   * secondFactor completes a pending session with a code from the user's app, or one of their
   * recovery codes (`recovery` not empty). Guesses are counted and locked across nodes.
   */
  async secondFactor(found: Found, input: { readonly code: string; readonly recovery: string }, ip: string): Promise<SecondFactorOutcome> {
    const c = this.#c
    const { user } = found
    const factor = input.recovery === '' ? 'totp' : 'recovery-code'
    const outcome: VerifyOutcome =
      input.recovery === '' ? await checkTotp(c, user.id, user.totpSecret!, input.code) : await checkRecoveryCode(c, user, input.recovery)
    if (outcome.kind === 'locked') return { kind: 'locked', retryAfterSeconds: outcome.retryAfterSeconds }
    if (outcome.kind !== 'accepted') {
      await c.auditUser(ip, user, 'user.sign-in', 'failure', { factor, reason: outcome.kind === 'reused' ? 'code used already' : 'wrong code' })
      return { kind: 'wrong', reused: outcome.kind === 'reused' }
    }
    const fresh = newSessionToken()
    const events = (await c.ownEvents(ip, user, 'user.sign-in', 'success'))({ factor })
    // Once, atomically, with its events: of two completions at once (a code and a recovery code), one gets the session.
    if (!(await c.store.portal.completeTwoFactor(found.session.idHash, fresh.idHash, events))) return { kind: 'gone' }
    await c.store.portal.touchSession(fresh.idHash, c.iso(), c.iso(c.now() + c.sessionTtlMs))
    return { kind: 'signed-in', token: fresh.token }
  }

  /** endPending ends a session whose second factor was turned off meanwhile (it signs in again from the start). */
  async endPending(found: Found): Promise<void> {
    await this.#c.store.portal.deleteSession(found.session.idHash)
  }

  /** signOut ends this session, or every session of its user. */
  async signOut(ctx: Context, found: Found, everywhere: boolean): Promise<void> {
    const c = this.#c
    const events = await c.ownEvents(ctx.ip ?? null, found.user, 'user.sign-out', 'success')
    await c.store.portal.changeUser(found.user.id, { sessions: everywhere ? 'all' : { only: found.session.idHash }, audits: () => events({ everywhere }) })
  }

  /** signOutOthers ends every session of the user but this one. */
  async signOutOthers(ctx: Context, found: Found): Promise<void> {
    const c = this.#c
    const events = await c.ownEvents(ctx.ip ?? null, found.user, 'user.sign-out', 'success')
    await c.store.portal.changeUser(found.user.id, {
      sessions: { except: found.session.idHash },
      audits: (sessions) => events({ everywhere: true, exceptThisSession: true, sessions }),
    })
  }

  /** recoveryCodesLeft: how many of a user's recovery codes are unused. */
  recoveryCodesLeft(userId: string): Promise<number> {
    return this.#c.store.portal.recoveryCodesLeft(userId)
  }
}
