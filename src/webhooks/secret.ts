/**
 * Webhook signing secrets: made here, shown once, and kept only sealed. sealSecret and
 * openSecret are the one place a secret is turned into what the store keeps and back: the
 * keyring's AES-256-GCM under the active key version (config/encryption.ts), with the account
 * and endpoint ids as associated data, so a sealed secret copied to another endpoint's row
 * does not open, and `encryption rotate` re-seals them with the factors.
 */
import { randomBytes } from 'node:crypto'
import { resealValue, SealError, type Keyring } from '../crypto/keyring.ts'
import type { WebhookStore } from '../storage/ports.ts'

/** Standard Webhooks' secret format: `whsec_` and the key in base64 (32 random bytes here). */
export const SECRET_PREFIX = 'whsec_'

export function newWebhookSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(32).toString('base64')}`
}

/** secretKey: the signing key a `whsec_` secret carries. */
export function secretKey(secret: string): Buffer {
  return Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64')
}

export interface SecretContext {
  readonly accountId: string
  readonly endpointId: string
}

export const secretContext = (ctx: SecretContext): string[] => ['webhook', ctx.accountId, ctx.endpointId]

/** sealSecret: what the store keeps of an endpoint's secret. */
export async function sealSecret(keyring: Keyring, secret: string, ctx: SecretContext): Promise<string> {
  return keyring.seal(Buffer.from(secret, 'utf8'), secretContext(ctx))
}

/** SealedSecretError: a sealed secret that does not open here (another row's, a key version not configured, damaged). */
export class SealedSecretError extends Error {
  override name = 'SealedSecretError'
}

/** openSecret: the secret back from its sealing, for the endpoint it was sealed for only. */
export async function openSecret(keyring: Keyring, sealed: string, ctx: SecretContext): Promise<string> {
  try {
    return keyring.open(sealed, secretContext(ctx)).toString('utf8')
  } catch (error) {
    if (error instanceof SealError) throw new SealedSecretError(`webhook secret of ${ctx.endpointId}: ${error.message}`)
    throw error
  }
}

/** resealSecrets seals every live endpoint's secret under the active key version (compare-and-set, in batches); returns how many, and those that do not open. */
export async function resealSecrets(
  store: Pick<WebhookStore, 'sealedSecrets' | 'resealSecret'>,
  keyring: Keyring,
): Promise<{ resealed: number; unreadable: { id: string; reason: string }[] }> {
  let resealed = 0
  const unreadable: { id: string; reason: string }[] = []
  let after = ''
  for (;;) {
    const rows = await store.sealedSecrets(after, 500)
    if (rows.length === 0) break
    for (const row of rows) {
      if (keyring.versionOf(row.sealed) === keyring.active) continue
      const next = resealValue(keyring, row.sealed, secretContext({ accountId: row.accountId, endpointId: row.id }))
      if ('unreadable' in next) unreadable.push({ id: row.id, reason: next.unreadable })
      else if (await store.resealSecret(row.id, row.sealed, next.sealed)) resealed++
    }
    after = rows.at(-1)!.id
  }
  return { resealed, unreadable }
}
