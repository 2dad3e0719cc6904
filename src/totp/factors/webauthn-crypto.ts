/**
 * The WebCrypto that @simplewebauthn/server is handed: Node's own, with two of its calls made
 * cheaper, and every check of the library left as it is.
 *
 * A sign-in's answer costs the library two digests (the RP ID's and clientDataJSON's), one key
 * import (the passkey's COSE key as a JWK) and one signature check, each an asynchronous
 * WebCrypto call: a job on libuv's pool and its promise. Profiled under the passkeys bench, the
 * digests and the import cost the node's main thread more than the signature check itself:
 * - `digest` is answered at once with node:crypto's createHash (a few hundred bytes: a few µs,
 *   where a pool job's hop costs tens);
 * - `importKey` keeps what it imported for a while: a passkey signing in again soon is not imported
 *   again (a small bounded cache, keyed by the whole JWK and algorithm; public keys only, nothing
 *   secret is kept, and a key removed from its factor is simply never asked for again);
 * - `verify`, and everything else, is Node's WebCrypto unchanged: the signature's arithmetic stays
 *   on the pool, off the main thread, where a node with CPUs to spare runs it beside requests.
 *
 * The library reads its WebCrypto once, through a setter it keeps for its own tests
 * (`_getWebCryptoInternals`, in a module its package does not export); installWebAuthnCrypto
 * reaches it by the file's URL next to the package's entry. When a release of the library moves
 * it, installation fails loudly at start-up (and `webauthn-crypto.test.ts` says so), rather than
 * silently going back to the slower path.
 */
import { createHash } from 'node:crypto'
import { BoundedCache } from '../../cache/bounded.ts'

const real = globalThis.crypto
const SUBTLE = real.subtle

/** WebCrypto's hash names and node:crypto's. */
const HASHES: Readonly<Record<string, string>> = { 'SHA-1': 'sha1', 'SHA-256': 'sha256', 'SHA-384': 'sha384', 'SHA-512': 'sha512' }
/** Inputs up to this size are hashed at once; a larger one (none in a ceremony) goes to the pool as before. */
const SYNC_DIGEST_MAX = 64 * 1024

/**
 * Imported public keys kept: few, for a short while. A CryptoKey holds about 5 KB of the process (20 000 P-256 keys measured: RSS +107 MB),
 * and a user signs in again within minutes only now and then (a retry, a second tab), so 2 000 of them (about 11 MB) for 10 minutes.
 */
const KEYS_MAX = 2_000
const KEYS_TTL_SECONDS = 600

const stats = { digests: 0, imports: 0, importsKept: 0 }
/** What the facade did, for its test: digests answered at once, keys imported, imports answered from the cache. */
export const webAuthnCryptoStats = (): Readonly<typeof stats> => ({ ...stats })

const keys = new BoundedCache<CryptoKey>(KEYS_TTL_SECONDS, KEYS_MAX)

function hashName(algorithm: AlgorithmIdentifier): string | undefined {
  const name = typeof algorithm === 'string' ? algorithm : algorithm.name
  return HASHES[name.toUpperCase()]
}

function bytesOf(data: BufferSource): Uint8Array {
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength)
  return new Uint8Array(data)
}

const subtle = {
  digest(algorithm: AlgorithmIdentifier, data: BufferSource): Promise<ArrayBuffer> {
    const name = hashName(algorithm)
    const bytes = bytesOf(data)
    if (name === undefined || bytes.byteLength > SYNC_DIGEST_MAX) return SUBTLE.digest(algorithm, data)
    stats.digests++
    const out = createHash(name).update(bytes).digest()
    return Promise.resolve(out.buffer.slice(out.byteOffset, out.byteOffset + out.byteLength) as ArrayBuffer)
  },
  importKey(format: string, keyData: unknown, algorithm: unknown, extractable: boolean, usages: KeyUsage[]): Promise<CryptoKey> {
    // Public keys for verification only: anything else (a private key, an extractable one) is imported as it always was.
    if (format !== 'jwk' || extractable || usages.length !== 1 || usages[0] !== 'verify') {
      return (SUBTLE.importKey as (...a: unknown[]) => Promise<CryptoKey>)(format, keyData, algorithm, extractable, usages)
    }
    const id = JSON.stringify([keyData, algorithm])
    const now = Date.now()
    const kept = keys.get(id, now)
    if (kept !== undefined) {
      stats.importsKept++
      return Promise.resolve(kept)
    }
    stats.imports++
    // Kept once imported: a key that does not import is not kept, and the next answer naming it is refused the same way.
    return SUBTLE.importKey('jwk', keyData as JsonWebKey, algorithm as AlgorithmIdentifier, false, usages).then((key) => {
      keys.set(id, key, Date.now())
      return key
    })
  },
  verify: SUBTLE.verify.bind(SUBTLE),
}

/** The object the library uses as its `crypto`: random values from Node's, subtle as above. */
export const webAuthnCrypto = {
  getRandomValues: real.getRandomValues.bind(real),
  randomUUID: real.randomUUID.bind(real),
  subtle,
}

let installed = false

/** installWebAuthnCrypto hands the library the facade; once per process (idempotent). */
export async function installWebAuthnCrypto(): Promise<void> {
  if (installed) return
  const entry = import.meta.resolve('@simplewebauthn/server')
  const module = (await import(new URL('./helpers/iso/isoCrypto/getWebCrypto.js', entry).href)) as {
    _getWebCryptoInternals?: { setCachedCrypto?: (c: unknown) => void }
  }
  const set = module._getWebCryptoInternals?.setCachedCrypto
  if (typeof set !== 'function') throw new Error('@simplewebauthn/server no longer lets its WebCrypto be set: see src/totp/factors/webauthn-crypto.ts')
  set(webAuthnCrypto)
  installed = true
}
