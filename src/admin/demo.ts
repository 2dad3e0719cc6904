/**
 * ensureDemoAccount gives a newcomer a working key: on a store with no account at all,
 * outside production, it creates a demo account subscribed to every group in every region.
 * The key is returned once for printing; only its hash is stored.
 */
import type { Config } from '../config/config.ts'
import type { Store } from '../storage/ports.ts'
import { issueKey } from '../gateway/keys.ts'
import type { Pepper } from '../crypto/keyed.ts'
import { GROUPS, REGIONS } from '../domain/regions.ts'

export async function ensureDemoAccount(config: Config, store: Store, pepper: Pepper): Promise<string | null> {
  if (config.nodeEnv === 'production' || (await store.access.countAccounts()) > 0) return null
  const account = await store.access.createAccount('demo')
  for (const region of REGIONS) {
    for (const group of GROUPS) await store.access.setSubscription(account.id, region, group, 'active')
  }
  const { apiKey } = await issueKey(store.access, pepper, account.id, 'demo key')
  return apiKey
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
