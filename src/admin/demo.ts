/**
 * ensureDemoAccount gives a newcomer a working key and a portal sign-in: on a store with no
 * account at all, outside production, it creates a demo account subscribed to every group in
 * every region that serves it, and (with the portal on) a confirmed portal user who owns it
 * and is an operator, so that every portal page can be tried.
 * The key and the password are returned once for printing; only their hashes are stored.
 */
import { randomBytes } from 'node:crypto'
import type { Config } from '../config/config.ts'
import type { Accounts } from '../services/accounts.ts'
import type { Users } from '../services/users.ts'
import { isFailure, type Failure } from '../services/outcome.ts'
import { SYSTEM } from '../domain/accounts.ts'
import { GROUPS, REGIONS, groupServedIn } from '../domain/regions.ts'

export interface Demo {
  readonly apiKey: string
  /** The demo sign-in of the portal, or null when the portal is off. */
  readonly signIn: { readonly email: string; readonly password: string } | null
}

export const DEMO_EMAIL = 'demo@example.com'

export async function ensureDemoAccount(config: Config, accounts: Accounts, users: Users): Promise<Demo | null> {
  if (config.nodeEnv === 'production' || (await accounts.countAccounts()) > 0) return null
  const ctx = { actor: SYSTEM }
  const signIn = config.portalEnabled ? await demoUser(users) : null
  // With its user, the account is made through the one path that makes an owned account (its owner in the same write).
  const account = ok(
    signIn === null ? await accounts.createAccount(ctx, { name: 'demo' }) : await accounts.createOwnedAccount(ctx, signIn.userId, { name: 'demo' }),
  )
  for (const region of REGIONS) {
    for (const group of GROUPS) if (groupServedIn(group, region)) await accounts.setSubscription(ctx, account.id, region, group, 'active')
  }
  const issued = ok(await accounts.issueKey(ctx, account.id, { name: 'demo key' }))
  return { apiKey: issued.apiKey, signIn: signIn === null ? null : { email: signIn.email, password: signIn.password } }
}

/** demoUser: a confirmed operator with a new password, or null when the address has a user already. */
async function demoUser(users: Users): Promise<{ userId: string; email: string; password: string } | null> {
  const password = randomBytes(15).toString('base64url')
  const user = await users.admin.createUser({ actor: SYSTEM }, { email: DEMO_EMAIL, password, operator: true, detail: { demo: true } })
  return isFailure(user) ? null : { userId: user.id, email: DEMO_EMAIL, password }
}

function ok<T>(made: T | Failure): T {
  if (isFailure(made)) throw new Error(made.message)
  return made
}

export function demoBanner(demo: Demo, baseUrl: string): string {
  return [
    '',
    'A demo account was created, subscribed to every API group in every region.',
    `Its API key is shown this once: ${demo.apiKey}`,
    'Try it:',
    `  curl -H 'x-api-key: ${demo.apiKey}' ${baseUrl}/totp/ping`,
    `API docs: ${baseUrl}/docs`,
    ...(demo.signIn === null
      ? []
      : [
          `Developer portal: ${baseUrl}/portal`,
          `  sign in as ${demo.signIn.email} with the password ${demo.signIn.password} (shown this once; an owner of the demo account and an operator)`,
        ]),
    '',
  ].join('\n')
}
