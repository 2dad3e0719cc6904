/**
 * ensureDemoAccount gives a newcomer a working key: on a store with no account at all,
 * outside production, it creates a demo account subscribed to every group in every region
 * that serves it.
 * The key is returned once for printing; only its hash is stored.
 */
import type { Config } from '../config/config.ts'
import { isFailure, type Accounts } from '../accounts/service.ts'
import { SYSTEM } from '../domain/accounts.ts'
import { GROUPS, REGIONS, groupServedIn } from '../domain/regions.ts'

export async function ensureDemoAccount(config: Config, accounts: Accounts): Promise<string | null> {
  if (config.nodeEnv === 'production' || (await accounts.countAccounts()) > 0) return null
  const ctx = { actor: SYSTEM }
  const account = await accounts.createAccount(ctx, { name: 'demo' })
  if (isFailure(account)) throw new Error(account.message)
  for (const region of REGIONS) {
    for (const group of GROUPS) if (groupServedIn(group, region)) await accounts.setSubscription(ctx, account.id, region, group, 'active')
  }
  const issued = await accounts.issueKey(ctx, account.id, { name: 'demo key' })
  if (isFailure(issued)) throw new Error(issued.message)
  return issued.apiKey
}

export function demoBanner(apiKey: string, baseUrl: string): string {
  return [
    '',
    'A demo account was created, subscribed to every API group in every region.',
    `Its API key is shown this once: ${apiKey}`,
    'Try it:',
    `  curl -H 'x-api-key: ${apiKey}' ${baseUrl}/totp/ping`,
    `API docs: ${baseUrl}/docs`,
    '',
  ].join('\n')
}
