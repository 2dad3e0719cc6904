/**
 * Webhook signing secrets: made here, shown once, and kept only sealed. sealSecret and
 * openSecret are the one place a secret is turned into what the store keeps and back, with
 * the account and endpoint ids as context: a sealed secret copied to another endpoint's row
 * does not open. Today they use AES-256-GCM under a key derived from the pepper (HKDF), so the
 * database alone holds no usable secret; the versioned key ring of managed factors replaces
 * the key here (the `pep1.` prefix tells the sealings made before it apart).
 */
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto'
import type { Pepper } from '../crypto/keyed.ts'

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

const VERSION = 'pep1.'
const keys = new WeakMap<Pepper, Buffer>()

function sealingKey(pepper: Pepper): Buffer {
  let key = keys.get(pepper)
  if (key === undefined) keys.set(pepper, key = Buffer.from(hkdfSync('sha256', pepper, Buffer.alloc(0), 'tessera webhook secrets v1', 32)))
  return key
}

const context = (ctx: SecretContext) => Buffer.from(`webhook\n${ctx.accountId}\n${ctx.endpointId}`, 'utf8')

/** sealSecret: what the store keeps of an endpoint's secret. */
export async function sealSecret(pepper: Pepper, secret: string, ctx: SecretContext): Promise<string> {
  const iv = randomBytes(12)
  const cipher = createCipheriv('aes-256-gcm', sealingKey(pepper), iv)
  cipher.setAAD(context(ctx))
  const sealed = Buffer.concat([iv, cipher.update(secret, 'utf8'), cipher.final(), cipher.getAuthTag()])
  return `${VERSION}${sealed.toString('base64url')}`
}

/** SealedSecretError: a sealed secret that does not open here (another row's, another pepper's, damaged). */
export class SealedSecretError extends Error {
  override name = 'SealedSecretError'
}

/** openSecret: the secret back from its sealing, for the endpoint it was sealed for only. */
export async function openSecret(pepper: Pepper, sealed: string, ctx: SecretContext): Promise<string> {
  if (!sealed.startsWith(VERSION)) throw new SealedSecretError(`webhook secret of ${ctx.endpointId} is sealed in an unknown format`)
  const bytes = Buffer.from(sealed.slice(VERSION.length), 'base64url')
  if (bytes.length < 12 + 16) throw new SealedSecretError(`webhook secret of ${ctx.endpointId} is cut short`)
  try {
    const decipher = createDecipheriv('aes-256-gcm', sealingKey(pepper), bytes.subarray(0, 12))
    decipher.setAAD(context(ctx))
    decipher.setAuthTag(bytes.subarray(bytes.length - 16))
    return Buffer.concat([decipher.update(bytes.subarray(12, bytes.length - 16)), decipher.final()]).toString('utf8')
  } catch {
    throw new SealedSecretError(`webhook secret of ${ctx.endpointId} does not open (sealed for another endpoint, or under another key)`)
  }
}
