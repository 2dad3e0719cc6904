/**
 * The admin API's operator invitations: POST /admin/v1/operator-invitations makes one through
 * the team service (admin/operator-invite.ts, as the CLI's `operator invite`), with the token as
 * actor, and emails its link through the node's mailer before it answers. The link is never in
 * the answer: it is the invitee's secret. A node that cannot send email (production without
 * SMTP_URL) refuses before making anything, naming the CLI's --print-link.
 */
import type { FastifyInstance } from 'fastify'
import { Type } from 'typebox'
import type { Config } from '../../config/config.ts'
import { apiError } from '../../errors/errors.ts'
import type { Mailer } from '../../mail/mailer.ts'
import { INVITE_TTL_MS, type Team } from '../../services/team.ts'
import { duration } from '../../mail/templates.ts'
import { inviteOperator, noMailHere, operatorMessage } from '../operator-invite.ts'
import { context, ok } from './routes.ts'
import { errors, strict, time } from './schemas.ts'

export const OPERATORS_TAG = { name: 'operators', description: "Portal operators: invitations, accepted on the portal's invitation page" }

/** The longest email address (RFC 5321's path limit), as the portal's forms. */
const MAX_EMAIL = 254

const invitation = Type.Object(
  {
    email: Type.String({ description: 'The invited address, as kept (lowercased).' }),
    expiresAt: time('When the link stops working, if it has not been used or replaced by then.'),
  },
  { examples: [{ email: 'olga@example.com', expiresAt: '2026-12-06T08:00:00.000Z' }] },
)

export const inviteOperatorSchema = {
  operationId: 'inviteOperator',
  summary: 'Invite someone to be a portal operator',
  description: [
    `Emails the address a single-use link to the portal's invitation page, working for ${duration(INVITE_TTL_MS)}; a new invitation to the same address replaces the earlier (its link dies). Nothing is granted now: the operator flag is set when the invited address accepts, signed in as its user (with their second factor), or, for an address without a confirmed user, by choosing a password on that page. The way to the first operator under \`SIGNUP_MODE=closed\`.`,
    '',
    'Audited as `operator.invite` (the token as actor), and the acceptance as `user.operator-grant` (the user as actor). 409 when the address is an operator already, its user is disabled or waits for approval, or the node serves no portal (`PORTAL_ENABLED=false`) or has no `SMTP_URL` in production (then run `npm run admin -- operator invite --email E --print-link` on the node); 503 when the SMTP server did not take the email (the invitation made is void for want of its link: call again).',
  ].join('\n'),
  tags: ['operators'],
  body: Type.Object(
    { email: Type.String({ minLength: 1, maxLength: MAX_EMAIL, description: 'The address to invite.' }) },
    { ...strict, examples: [{ email: 'olga@example.com' }] },
  ),
  response: {
    201: { ...invitation, description: 'The invitation is made and its email taken by the SMTP server.' },
    ...errors(['CONFLICT'], { write: true, body: true }),
  },
}

export interface OperatorRouteOptions {
  readonly config: Config
  readonly team: Team
  /** The node's mailer (null: no portal; the service refuses first). */
  readonly mailer: Mailer | null
}

export default async function operatorRoutes(app: FastifyInstance, opts: OperatorRouteOptions): Promise<void> {
  const { config, team, mailer } = opts
  app.post('/admin/v1/operator-invitations', { schema: inviteOperatorSchema }, async (request, reply) => {
    const { email } = request.body as { email: string }
    const noMail = mailer === null ? 'this node serves no portal (PORTAL_ENABLED=false), where an invitation is accepted' : noMailHere(config)
    if (noMail !== null || mailer === null) throw apiError('CONFLICT', { reason: noMail ?? '' })
    const made = ok(await inviteOperator(team, config, context(request), email))
    try {
      await mailer.send(operatorMessage(config, made))
    } catch (error) {
      // The log names the address, never the link; the invitation left pending is void, its link sent nowhere.
      request.log.error({ email: made.email, reason: (error as Error).message }, 'operator invitation email not sent')
      throw apiError('SERVICE_UNAVAILABLE', { what: 'the SMTP server' }, { 'retry-after': '30' })
    }
    return reply.code(201).send({ email: made.email, expiresAt: made.expiresAt })
  })
}
