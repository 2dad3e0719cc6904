/**
 * Operator invitations from the operators' doors (the CLI's `operator invite`, the admin API's
 * inviteOperator): the address checked, the invitation made by the team service (its rules in
 * services/operators.ts), and its link and email. The link is a secret until it is used: it
 * goes into the email, or to the CLI's standard output with --print-link, never into a log.
 */
import type { Config } from '../config/config.ts'
import * as mail from '../mail/templates.ts'
import type { Message } from '../mail/mailer.ts'
import { fail, isFailure, type Context, type Failure } from '../services/outcome.ts'
import { INVITE_TTL_MS, type OperatorInvited, type Team } from '../services/team.ts'
import { checkEmail } from '../services/users/sign-up.ts'
import { invitationLink } from '../portal/pages/invitations.ts'

/** An operator invitation made, with its link (a secret). */
export interface OperatorInvitation extends OperatorInvited {
  readonly link: string
}

/**
 * inviteOperator makes an operator invitation to `email`: refused when the address is not one,
 * when this node serves no portal (the invitation is accepted there), or by the team service's
 * rules (an operator already, a disabled user, one waiting for approval).
 */
export async function inviteOperator(team: Team, config: Config, ctx: Context, email: string): Promise<OperatorInvitation | Failure> {
  const bad = checkEmail(email)
  if (bad !== null) return fail('invalid', `email must be ${bad}`, 'email')
  if (!config.portalEnabled) return fail('conflict', 'this node serves no portal (PORTAL_ENABLED=false), where an invitation is accepted')
  const invited = await team.inviteOperator(ctx, email)
  if (isFailure(invited)) return { failure: invited.failure, message: invited.message }
  return { ...invited, link: invitationLink({ config }, invited.token, null) }
}

/** operatorMessage: the email of an operator invitation, to its address. */
export function operatorMessage(config: Config, invitation: OperatorInvitation): Message {
  const content = mail.operatorInvitation({ portalUrl: `${config.publicBaseUrl}/portal`, link: invitation.link, validForMs: INVITE_TTL_MS })
  return { to: invitation.email, ...content }
}

/** noMailHere: why this node cannot send an invitation's email (production without SMTP_URL), or null. */
export function noMailHere(config: Config): string | null {
  return config.smtpUrl === '' && config.nodeEnv === 'production'
    ? 'this node has no SMTP_URL to send the invitation by: set it, or run `npm run admin -- operator invite --email E --print-link` on the node'
    : null
}
