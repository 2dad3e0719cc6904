/**
 * ensureDemoAccount gives a newcomer a working key and a portal sign-in: on a store with no
 * account at all, outside production, it creates a demo account subscribed to every group in
 * every region that serves it, and (with the portal on) a confirmed portal user who owns it
 * and is an operator, so that every portal page can be tried.
 * The key and the password are returned once for printing; only their hashes are stored.
 */
import { randomBytes } from 'node:crypto'
import type { Config } from '../config/config.ts'
import type { Store } from '../storage/ports.ts'
import type { Accounts } from '../services/accounts.ts'
import { isFailure } from '../services/outcome.ts'
import { SYSTEM, actorName } from '../domain/accounts.ts'
import { GROUPS, REGIONS, groupServedIn } from '../domain/regions.ts'
import { Passwords } from '../services/users/passwords.ts'

export interface Demo {
  readonly apiKey: string
  /** The demo sign-in of the portal, or null when the portal is off. */
  readonly signIn: { readonly email: string; readonly password: string } | null
}

export const DEMO_EMAIL = 'demo@example.com'

export async function ensureDemoAccount(config: Config, accounts: Accounts, store: Store): Promise<Demo | null> {
  if (config.nodeEnv === 'production' || (await accounts.countAccounts()) > 0) return null
  const ctx = { actor: SYSTEM }
  const account = await accounts.createAccount(ctx, { name: 'demo' })
  if (isFailure(account)) throw new Error(account.message)
  for (const region of REGIONS) {
    for (const group of GROUPS) if (groupServedIn(group, region)) await accounts.setSubscription(ctx, account.id, region, group, 'active')
  }
  const issued = await accounts.issueKey(ctx, account.id, { name: 'demo key' })
  if (isFailure(issued)) throw new Error(issued.message)
  if (!config.portalEnabled) return { apiKey: issued.apiKey, signIn: null }

  const password = randomBytes(15).toString('base64url')
  const now = new Date().toISOString()
  const id = `usr_${randomBytes(8).toString('hex')}`
  const draft = { actor: actorName(SYSTEM), action: 'user.create', target: { type: 'user' as const, id }, accountId: null, ip: null, outcome: 'success' as const, detail: { demo: true } }
  const created = await store.portal.createUser({
    id, email: DEMO_EMAIL, passwordHash: await new Passwords().hash(password), emailVerifiedAt: now, status: 'active', operator: true,
    totpSecret: null, totpEnabledAt: null, createdAt: now,
  }, draft)
  if (!created) return { apiKey: issued.apiKey, signIn: null }
  await store.portal.addMember(account.id, id, 'owner', { ...draft, action: 'member.add', target: { type: 'member', id }, accountId: account.id, detail: { role: 'owner' } })
  return { apiKey: issued.apiKey, signIn: { email: DEMO_EMAIL, password } }
}

export function demoBanner(demo: Demo, baseUrl: string): string {
  return [
    '',
    'A demo account was created, subscribed to every API group in every region.',
    `Its API key is shown this once: ${demo.apiKey}`,
    'Try it:',
    `  curl -H 'x-api-key: ${demo.apiKey}' ${baseUrl}/totp/ping`,
    `API docs: ${baseUrl}/docs`,
    ...(demo.signIn === null ? [] : [
      `Developer portal: ${baseUrl}/portal`,
      `  sign in as ${demo.signIn.email} with the password ${demo.signIn.password} (shown this once; an owner of the demo account and an operator)`,
    ]),
    '',
  ].join('\n')
}
