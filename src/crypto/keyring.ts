/**
 * The keyring seals the secrets the service must read back (TOTP factors' secrets, webhook
 * signing secrets) with AES-256-GCM under versioned key-encryption keys. The associated data
 * binds a sealed value to its row (account, user, factor…): moved to another row it fails to
 * open, and is never used. The active version seals; every configured version opens, so a
 * new key can be rolled out (ENCRYPTION_KEYS), every value re-sealed under it
 * (`npm run admin -- encryption rotate`, while the service runs), and the old key removed.
 *
 * A KMS fits behind the same interface: its Keyring would unwrap the key-encryption keys (or
 * data keys) with the KMS at start-up and seal and open locally, keeping verification free of
 * a network call.
 */
import { createCipheriv, createDecipheriv, createSecretKey, randomBytes, type KeyObject } from 'node:crypto'

export const KEY_BYTES = 32
const NONCE_BYTES = 12
const TAG_BYTES = 16
const SEALED = /^v(\d{1,9})\.([A-Za-z0-9_-]+)$/

export interface Keyring {
  /** The version that seals. */
  readonly active: number
  /** Every version that opens, in ascending order. */
  readonly versions: readonly number[]
  /** seal encrypts `plain` under the active version, bound to `context` (the row it belongs to). */
  seal(plain: Buffer, context: readonly string[]): string
  /** open decrypts a sealed value of `context`; throws SealError when it cannot (unknown version, another row's value, tampering). */
  open(sealed: string, context: readonly string[]): Buffer
  /** versionOf tells the version a value was sealed under (null: not a sealed value). */
  versionOf(sealed: string): number | null
}

/** SealError: a sealed value that does not open; the reason names no secret. */
export class SealError extends Error {
  override name = 'SealError'
}

/** aad writes the context length-prefixed: no two contexts give the same bytes. */
function aad(context: readonly string[]): Buffer {
  let text = 'tessera-seal-v1'
  for (const part of context) text += `|${Buffer.byteLength(part, 'utf8')}:${part}`
  return Buffer.from(text, 'utf8')
}

/** keyring builds a keyring of `keys` (version → 32 bytes); `active` defaults to the highest version. */
export function keyring(keys: ReadonlyMap<number, Buffer>, active?: number): Keyring {
  if (keys.size === 0) throw new Error('a keyring needs at least one key')
  for (const [version, key] of keys) {
    if (!Number.isSafeInteger(version) || version < 1) throw new Error(`key version ${version} must be a whole number from 1`)
    if (key.length !== KEY_BYTES) throw new Error(`key version ${version} must be ${KEY_BYTES} bytes (got ${key.length})`)
  }
  const versions = [...keys.keys()].sort((a, b) => a - b)
  const current = active ?? versions.at(-1)!
  // Imported once: a KeyObject makes each cipher about five times cheaper than raw key bytes
  // (a verification opens a secret on every call).
  const objects = new Map<number, KeyObject>([...keys].map(([version, key]) => [version, createSecretKey(key)]))
  const sealKey = objects.get(current)
  if (sealKey === undefined) throw new Error(`the active key version ${current} is not among the keys (${versions.join(', ')})`)
  return {
    active: current,
    versions,
    seal(plain, context) {
      const nonce = randomBytes(NONCE_BYTES)
      const cipher = createCipheriv('aes-256-gcm', sealKey, nonce)
      cipher.setAAD(aad(context))
      const body = Buffer.concat([nonce, cipher.update(plain), cipher.final(), cipher.getAuthTag()])
      return `v${current}.${body.toString('base64url')}`
    },
    open(sealed, context) {
      const m = SEALED.exec(sealed)
      if (m === null) throw new SealError('not a sealed value')
      const version = Number(m[1])
      const key = objects.get(version)
      if (key === undefined) throw new SealError(`sealed under key version ${version}, which is not configured (ENCRYPTION_KEYS has ${versions.join(', ')})`)
      const body = Buffer.from(m[2]!, 'base64url')
      if (body.length < NONCE_BYTES + TAG_BYTES) throw new SealError('sealed value truncated')
      const decipher = createDecipheriv('aes-256-gcm', key, body.subarray(0, NONCE_BYTES))
      decipher.setAAD(aad(context))
      decipher.setAuthTag(body.subarray(body.length - TAG_BYTES))
      try {
        return Buffer.concat([decipher.update(body.subarray(NONCE_BYTES, body.length - TAG_BYTES)), decipher.final()])
      } catch {
        throw new SealError(`sealed value does not open under key version ${version}: it belongs to another row, or was altered`)
      }
    },
    versionOf(sealed) {
      const m = SEALED.exec(sealed)
      return m === null ? null : Number(m[1])
    },
  }
}

/**
 * resealValue opens a value sealed under any configured version and seals it under the active
 * one, for the same row: the new value, or why it does not open (what a rotation reports and
 * leaves as it is).
 */
export function resealValue(keyring: Keyring, sealed: string, context: readonly string[]): { readonly sealed: string } | { readonly unreadable: string } {
  let plain: Buffer
  try {
    plain = keyring.open(sealed, context)
  } catch (error) {
    if (!(error instanceof SealError)) throw error
    return { unreadable: error.message }
  }
  try {
    return { sealed: keyring.seal(plain, context) }
  } finally {
    plain.fill(0)
  }
}

/**
 * parseKeys reads `version:base64key` items, comma-separated; throws Error with what is
 * wrong (never the key). Keys are standard or URL-safe base64 of 32 bytes.
 */
export function parseKeys(text: string): Map<number, Buffer> {
  const keys = new Map<number, Buffer>()
  for (const raw of text.split(/[,\n]/)) {
    const item = raw.trim()
    if (item === '') continue
    const m = /^(\d{1,9}):([A-Za-z0-9+/_-]+={0,2})$/.exec(item)
    if (m === null) throw new Error(`item ${keys.size + 1} is not version:base64key`)
    const version = Number(m[1])
    if (version < 1) throw new Error(`version ${version} must be 1 or more`)
    if (keys.has(version)) throw new Error(`version ${version} appears twice`)
    const key = Buffer.from(m[2]!.replace(/-/g, '+').replace(/_/g, '/'), 'base64')
    if (key.length !== KEY_BYTES) throw new Error(`the key of version ${version} is ${key.length} bytes; it must be ${KEY_BYTES} (openssl rand -base64 32)`)
    keys.set(version, key)
  }
  if (keys.size === 0) throw new Error('holds no key')
  return keys
}

/** newKeyItem makes a fresh `version:base64key` item. */
export function newKeyItem(version: number): string {
  return `${version}:${randomBytes(KEY_BYTES).toString('base64')}`
}
