/**
 * A signed-in user's own security changes, after The Copenhagen Book's MFA chapter and
 * OWASP's: a change that weakens the sign-in, or could lock its owner out, asks for the
 * password again (a session left open is not enough), through the sign-in throttle; a new
 * password or a new second factor ends every other session; an address never confirmed gets
 * no second factor (nobody proved it theirs); recovery codes are returned once, never kept
 * in clear.
 */
import type { VerifyOutcome } from '../../totp/verify.ts'
import { fail, type Failure } from '../outcome.ts'
import { checkTotp, newTotpSecret, recoveryCodeSet } from './codes.ts'
import { own, type PasswordRefusal, type UsersCore } from './core.ts'
import { checkPassword } from './passwords.ts'
import type { Found } from './sessions.ts'

/** A refused proof: the password asked for again, or a code from the app. */
export type ProofRefusal = { readonly kind: 'password'; readonly refusal: PasswordRefusal } | { readonly kind: 'code'; readonly outcome: VerifyOutcome }

/** Not the state the change starts from (two-factor on, or off), or an address never confirmed. */
export type Misstep = { readonly kind: 'not-now' } | { readonly kind: 'unconfirmed' }

export class Security {
  readonly #c: UsersCore

  constructor(core: UsersCore) {
    this.#c = core
  }

  /** changePassword: the current password again, then the new one (checked), which ends the user's other sessions. */
  async changePassword(
    found: Found,
    input: { readonly current: string; readonly next: string },
    ip: string,
  ): Promise<{ changed: true } | ProofRefusal | Failure> {
    const c = this.#c
    const refusal = await c.passwordAgain(found.user, input.current, ip, 'current-password')
    if (refusal !== null) return { kind: 'password', refusal }
    const bad = checkPassword(input.next)
    if (bad !== null) return fail('invalid', bad, 'new-password')
    const passwordHash = await c.passwords.hash(input.next)
    await c.store.portal.changeUser(found.user.id, {
      patch: { passwordHash },
      sessions: { except: found.session.idHash },
      audits: () => [c.draft(own(found.user, ip), found.user, 'user.password')],
    })
    return { changed: true }
  }

  /** #unconfirmed: the address was never confirmed (no sign-in gives such a user a session, but no session may be enough). */
  #unconfirmed(found: Found): Misstep | null {
    return found.user.emailVerifiedAt === null ? { kind: 'unconfirmed' } : null
  }

  /**
   * setUpTwoFactor gives the user a secret to scan, kept while two-factor sign-in is off: one
   * secret while setting up, so that coming back shows the one the app may have scanned already.
   */
  async setUpTwoFactor(found: Found): Promise<{ secret: string } | Misstep> {
    const { user } = found
    if (user.totpEnabledAt !== null) return { kind: 'not-now' }
    const refused = this.#unconfirmed(found)
    if (refused !== null) return refused
    if (user.totpSecret !== null) return { secret: user.totpSecret }
    const secret = (await this.#c.store.portal.updateUser(user.id, { totpSecret: newTotpSecret() }, null))?.totpSecret ?? null
    return secret === null ? { kind: 'not-now' } : { secret }
  }

  /**
   * enableTwoFactor turns two-factor sign-in on with the secret being set up: the password
   * first (a session left open must not be enough to put someone else's phone on the
   * account), then a code from the app. Gives the new recovery codes, and ends the user's
   * other sessions (signed in with the password alone).
   */
  async enableTwoFactor(
    found: Found,
    input: { readonly password: string; readonly code: string },
    ip: string,
  ): Promise<{ codes: string[] } | ProofRefusal | Misstep> {
    const c = this.#c
    const { user } = found
    if (user.totpSecret === null || user.totpEnabledAt !== null) return { kind: 'not-now' }
    const refused = this.#unconfirmed(found)
    if (refused !== null) return refused
    const refusal = await c.passwordAgain(user, input.password, ip, 'enable-password')
    if (refusal !== null) return { kind: 'password', refusal }
    const outcome = await checkTotp(c, user.id, user.totpSecret, input.code)
    if (outcome.kind !== 'accepted') return { kind: 'code', outcome }
    const { codes, hashes } = recoveryCodeSet(c.pepper, user.id)
    // Sessions signed in with the password alone end: from now on every session has passed both factors.
    await c.store.portal.changeUser(user.id, {
      patch: { totpEnabledAt: c.iso() },
      recoveryCodes: hashes,
      sessions: { except: found.session.idHash },
      audits: () => [c.draft(own(user, ip), user, 'user.2fa-on')],
    })
    return { codes }
  }

  /** newRecoveryCodes replaces the user's recovery codes, given their password or a code from their app. */
  async newRecoveryCodes(found: Found, proof: string, ip: string): Promise<{ codes: string[] } | ProofRefusal | Misstep> {
    const c = this.#c
    const { user } = found
    if (user.totpSecret === null || user.totpEnabledAt === null) return { kind: 'not-now' }
    // A password has at least 12 characters: six digits can only be a code.
    if (/^\s*\d{3}\s?\d{3}\s*$/.test(proof)) {
      const outcome = await checkTotp(c, user.id, user.totpSecret, proof)
      if (outcome.kind !== 'accepted') return { kind: 'code', outcome }
    } else {
      const refusal = await c.passwordAgain(user, proof, ip, 'regen-proof')
      if (refusal !== null) return { kind: 'password', refusal }
    }
    const { codes, hashes } = recoveryCodeSet(c.pepper, user.id)
    const events = await c.ownEvents(ip, user, 'user.recovery-codes', 'success')
    await c.store.portal.changeUser(user.id, { recoveryCodes: hashes, audits: () => events({ count: codes.length }) })
    return { codes }
  }

  /** disableTwoFactor turns two-factor sign-in off, given the password; the recovery codes go too. */
  async disableTwoFactor(found: Found, password: string, ip: string): Promise<{ off: true } | ProofRefusal | Misstep> {
    const c = this.#c
    const { user } = found
    if (user.totpEnabledAt === null) return { kind: 'not-now' }
    const refusal = await c.passwordAgain(user, password, ip, 'off-password')
    if (refusal !== null) return { kind: 'password', refusal }
    await c.store.portal.changeUser(user.id, {
      patch: { totpSecret: null, totpEnabledAt: null },
      recoveryCodes: [],
      audits: () => [c.draft(own(user, ip), user, 'user.2fa-off')],
    })
    return { off: true }
  }
}
