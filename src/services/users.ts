/**
 * The users service: the developer portal's identity rules, for every door (the portal's
 * pages, its operator pages, the CLI, the demo account, the tests). Each change checks its
 * rule, writes, and drafts its audit event with the write; expected refusals are data.
 * It is made of parts over one core (services/users/): sessions (signing in and out, the
 * second-factor step), sign-ups (sign-up, confirmation, reset), the security page's changes,
 * and operators' changes to users.
 */
import { UserAdmin } from './users/admin.ts'
import { UsersCore, type UsersOptions } from './users/core.ts'
import { Security } from './users/security.ts'
import { Sessions } from './users/sessions.ts'
import { SignUps } from './users/sign-up.ts'
import { SingleSignOn } from './users/sso.ts'

export type { UsersOptions } from './users/core.ts'
export type { Found, SecondFactorOutcome, SignInOutcome } from './users/sessions.ts'
export type { SsoFinish, SsoProviderInput, SsoRefusal, SsoStart } from './users/sso.ts'
export type { ConfirmOutcome, SignUpMail, SignUpOutcome } from './users/sign-up.ts'
export type { Misstep, ProofRefusal } from './users/security.ts'
export type { Changed, UserQuery, UserRef } from './users/admin.ts'
export type { PasswordRefusal } from './users/core.ts'

export class Users {
  readonly sessions: Sessions
  readonly signUps: SignUps
  readonly security: Security
  readonly admin: UserAdmin
  readonly sso: SingleSignOn

  constructor(options: UsersOptions) {
    const core = new UsersCore(options)
    this.sessions = new Sessions(core)
    this.signUps = new SignUps(core)
    this.security = new Security(core)
    this.admin = new UserAdmin(core)
    this.sso = new SingleSignOn(core)
  }
}
