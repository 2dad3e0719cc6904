/**
 * Signing up, confirming an address and resetting a password, after The Copenhagen Book:
 * - the same work and the same answer whether an email is known or not;
 * - links sent by email are single-use, short-lived, kept as hashes (the door consumes them
 *   from a form post, never by opening them: mail scanners open links);
 * - an address is never confirmed for a password its owner did not choose: while it is
 *   unconfirmed, the last sign-up's password is the pending one, and confirming asks for it
 *   with the link (the portal's auth.ts says why); confirming stores the exact hash it checked;
 * - a reset of a never-confirmed account ends its sessions and second factor;
 * - sign-ups are counted per source and in total before any work, and emails an address did
 *   not ask for go at most once per window (limits.ts).
 * Emails are the door's to send: these methods return who to write to, with the link.
 */
import type { User } from '../../domain/portal.ts'
import { emailKey } from '../../domain/portal.ts'
import { fail, type Failure } from '../outcome.ts'
import { own, RESET_TTL_MS, type UsersCore } from './core.ts'
import { checkPassword } from './passwords.ts'
import { MAX_EMAIL } from './sessions.ts'
import { newSessionToken, sessionIdHash } from './tokens.ts'

// No control character either (\s leaves most of them in): PostgreSQL refuses a NUL in text, and no address holds one.
const EMAIL = /^[^\s\u0000-\u001f\u007f@<>()",;:]{1,64}@[^\s\u0000-\u001f\u007f@<>()",;:]+\.[^\s\u0000-\u001f\u007f@<>()",;:]+$/

/** checkEmail says what is wrong with an address, or null. */
export function checkEmail(email: string): string | null {
  return email.length <= MAX_EMAIL && EMAIL.test(email) ? null : 'an email address like jane@example.com'
}

export interface SignUpInput {
  readonly email: string
  readonly password: string
  readonly accountName: string
  readonly ip: string
}

/**
 * The email a sign-up asks for, if any may go: a confirmation link (a new user, or a new
 * pending password for an unconfirmed one), or "you already have an account".
 */
export type SignUpMail = { readonly kind: 'verify'; readonly to: string; readonly link: string } | { readonly kind: 'registered'; readonly to: string } | null

export type SignUpOutcome =
  | { readonly kind: 'throttled'; readonly wait: number }
  | { readonly kind: 'done'; readonly created: boolean; readonly mail: SignUpMail }

/** What a confirmation came to: a dead link, not the pending password, or confirmed (with whether it waits for an operator). */
export type ConfirmOutcome =
  | { readonly kind: 'dead' }
  | { readonly kind: 'wrong-password' }
  | { readonly kind: 'confirmed'; readonly user: User; readonly pending: boolean }

export class SignUps {
  readonly #c: UsersCore

  constructor(core: UsersCore) {
    this.#c = core
  }

  /** verifyTtlMs: how long a confirmation link works (SIGNUP_CONFIRM_HOURS). */
  get verifyTtlMs(): number {
    return this.#c.verifyTtlMs
  }

  /** resetTtlMs: how long a password-reset link works. */
  get resetTtlMs(): number {
    return RESET_TTL_MS
  }

  /**
   * signUp makes a user and their account (pending approval under SIGNUP_MODE=approval), or,
   * for an address signed up and never confirmed, makes this password the pending one. The
   * input is checked by the door (the form's fields) before.
   */
  async signUp(input: SignUpInput): Promise<SignUpOutcome> {
    const c = this.#c
    const { email, ip } = input
    // Counted before any work: a refused sign-up costs no hash, writes nothing and sends nothing.
    const wait = await c.limits.signUp(ip)
    if (wait > 0) return { kind: 'throttled', wait }
    // Hashed before anything is looked up: a known email costs the same time as a new one. In
    // the sign-up lane: a flood of sign-ups never takes the hashes sign-ins need.
    const hash = await c.passwords.hash(input.password, 'sign-up')
    const user: User = {
      id: `usr_${newSessionToken().token.slice(0, 22)}`,
      email,
      passwordHash: hash,
      emailVerifiedAt: null,
      status: c.config.signupMode === 'approval' ? 'pending' : 'active',
      operator: false,
      totpSecret: null,
      totpEnabledAt: null,
      createdAt: c.iso(),
      updatedAt: c.iso(),
    }
    if (await c.store.portal.createUser(user, c.draft(own(user, ip), user, 'user.sign-up', { mode: c.config.signupMode }))) {
      // The account and its owner in one write (a user left without one, by a crash between the
      // two writes, creates one from the home page).
      await c.accounts.createOwnedAccount(own(user, ip), user.id, { name: input.accountName === '' ? email.slice(0, 200) : input.accountName })
      const link = await c.verifyLink(user)
      return { kind: 'done', created: true, mail: link === null ? null : { kind: 'verify', to: user.email, link } }
    }
    return { kind: 'done', created: false, mail: await this.#again(user, hash, ip) }
  }

  /** #again: a sign-up for an address that has a user: a new pending password while unconfirmed, else a notice. */
  async #again(made: User, hash: string, ip: string): Promise<SignUpMail> {
    const c = this.#c
    const known = await c.store.portal.findUserByEmail(made.email)
    if (known !== null && known.emailVerifiedAt === null && known.status !== 'disabled') {
      // Never confirmed: this sign-up's password becomes the pending one (unless a
      // confirmation has just won), and confirming will ask for it.
      const replaced = await c.store.portal.setPendingPassword(
        known.id,
        hash,
        c.draft(own(known, ip), known, 'user.sign-up', { mode: c.config.signupMode, again: true }),
      )
      // With no new email, the last link sent stays live and confirms this password.
      const link = replaced ? await c.verifyLink(known) : null
      return link === null ? null : { kind: 'verify', to: known.email, link }
    }
    if (known !== null && (await c.limits.mail('sign-up', known.email))) return { kind: 'registered', to: known.email }
    return null
  }

  /** confirm uses a confirmation link's token, with the password of the last sign-up (a wrong one leaves the link as it was). */
  async confirm(token: string, password: string, ip: string): Promise<ConfirmOutcome> {
    const c = this.#c
    // Read, not used: a wrong password leaves the link as it was.
    const found = token === '' ? null : await c.store.portal.findToken(sessionIdHash(token), 'verify-email', c.iso())
    const user = found?.userId ? await c.store.portal.getUser(found.userId) : null
    if (found === null || user === null) return { kind: 'dead' }
    // The link proves the inbox; the password proves the sign-up: only both confirm.
    const pending = user.passwordHash
    if (user.emailVerifiedAt === null && !(await c.passwords.verify(password, pending))) {
      await c.audit(ip, user, 'user.verify-email', 'failure', { reason: 'not the pending password' })
      return { kind: 'wrong-password' }
    }
    if ((await c.store.portal.consumeToken(sessionIdHash(token), 'verify-email', c.iso())) === null) return { kind: 'dead' }
    if (user.emailVerifiedAt === null) {
      // The password checked is the one kept, whatever a sign-up did meanwhile.
      await c.store.portal.updateUser(user.id, { emailVerifiedAt: c.iso(), passwordHash: pending }, c.draft(own(user, ip), user, 'user.verify-email'))
    }
    return { kind: 'confirmed', user, pending: user.status === 'pending' }
  }

  /**
   * operatorsToTell: the operators to tell that a confirmed sign-up waits for them (at most
   * 5 000 users looked through), and the name of the sign-up's account.
   */
  async operatorsToTell(user: User): Promise<{ emails: string[]; accountName: string }> {
    const c = this.#c
    const account = (await c.store.portal.membershipsOf(user.id))[0]
    const emails: string[] = []
    let cursor: string | undefined
    for (let pages = 0; pages < 10; pages++) {
      const page = await c.store.portal.listUsers({ status: 'active', limit: 500, ...(cursor === undefined ? {} : { cursor }) })
      for (const op of page.items) if (op.operator) emails.push(op.email)
      if (page.next === null) break
      cursor = page.next
    }
    return { emails, accountName: account?.accountName ?? '' }
  }

  /**
   * requestReset: a reset link for an address's user, to mail, or null (no such user, a
   * disabled one, or one sent within the window: counted whether or not the address has a
   * user, once per address per window, and per source).
   */
  async requestReset(email: string, ip: string): Promise<{ to: string; link: string } | null> {
    const c = this.#c
    if (checkEmail(email) !== null || !(await c.limits.mail('reset', email, ip))) return null
    const user = await c.store.portal.findUserByEmail(email)
    if (user === null || user.status === 'disabled') return null
    const events = await c.ownEvents(ip, user, 'user.reset-request', 'success')
    const link = await c.link(user, 'reset-password', 'reset/confirm', RESET_TTL_MS, events({}))
    return { to: user.email, link }
  }

  /**
   * resetPassword sets a new password with a reset link's token, and signs the user out
   * everywhere. The password is checked first: one refused does not use the link up.
   */
  async resetPassword(token: string, password: string, ip: string): Promise<{ reset: true } | { dead: true } | Failure> {
    const c = this.#c
    const bad = checkPassword(password)
    if (bad) return fail('invalid', bad, 'password')
    const used = token === '' ? null : await c.store.portal.consumeToken(sessionIdHash(token), 'reset-password', c.iso())
    const user = used?.userId ? await c.store.portal.getUser(used.userId) : null
    if (used === null || user === null) return { dead: true }
    // The link proves the address. Never confirmed before, whatever was set up on the account
    // (a second factor, sessions) was set up by someone who had not proved it: it goes.
    const neverConfirmed = user.emailVerifiedAt === null
    const passwordHash = await c.passwords.hash(password)
    await c.store.portal.changeUser(user.id, {
      patch: { passwordHash, ...(neverConfirmed ? { emailVerifiedAt: c.iso(), totpSecret: null, totpEnabledAt: null } : {}) },
      ...(neverConfirmed ? { recoveryCodes: [] } : {}),
      sessions: 'all',
      audits: () => [c.draft(own(user, ip), user, 'user.reset-password', neverConfirmed ? { confirmed: true } : {})],
    })
    // The link proved the address: the guesses that locked it are no reason to keep its owner out.
    await c.throttle.forget(emailKey(user.email))
    return { reset: true }
  }
}
