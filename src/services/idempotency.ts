/**
 * Idempotency-Key (draft-ietf-httpapi-idempotency-key-header) for the calls that create
 * something (a factor, recovery codes, an import, the admin API's creations): the same key and
 * request within 24 hours answer as the first did, once, however many arrive at once; another
 * request with the key is refused. Answers are kept sealed by the keyring (one may carry a
 * secret: a factor's, an API key, recovery codes) and go when their 24 hours are up.
 *
 * Of parallel requests with one key one begins (the store's atomic step); the others wait for
 * its answer, up to IDEMPOTENCY_WAIT_MS, then hear that it is still under way (409). A request
 * that ends in a fault keeps nothing: its key is free again.
 *
 * A key is a record its owner makes by calling, kept a day: an owner keeps at most
 * IDEMPOTENCY_KEYS_PER_ACCOUNT records and IDEMPOTENCY_BYTES_PER_ACCOUNT bytes of them (decided
 * by the store in the step that makes the record); past either, a new key is refused until the
 * owner's first record expires. A kept answer that no longer opens (its key version removed
 * before `encryption rotate` re-sealed it) is refused as such, never replayed nor run again.
 */
import { createHash } from 'node:crypto'
import type { Config } from '../config/config.ts'
import { SealError, type Keyring } from '../crypto/keyring.ts'
import type { Store } from '../storage/ports.ts'

/** How long a key and its answer are kept. */
export const IDEMPOTENCY_MS = 86_400_000
/** How long a request under way holds its key before a retry may take it over (its node stopped). */
const LEASE_MS = 60_000

/** An answer as it is kept and replayed. */
export interface KeptAnswer {
  readonly status: number
  readonly contentType: string
  readonly body: string
  /** Location, for a 201. */
  readonly location?: string
}

export type Begun =
  | { readonly kind: 'started' }
  | { readonly kind: 'replay'; readonly answer: KeptAnswer }
  | { readonly kind: 'mismatch' }
  | { readonly kind: 'busy' }
  /** The owner keeps as many records as it may: a new key is refused for `seconds`. */
  | { readonly kind: 'full'; readonly seconds: number }
  /** The kept answer does not open (`reason` names no secret). */
  | { readonly kind: 'unreadable'; readonly reason: string }

export interface IdempotencyOptions {
  readonly store: Store
  readonly keyring: Keyring
  readonly config: Pick<Config, 'idempotencyWaitMs' | 'idempotencyKeysPerAccount' | 'idempotencyBytesPerAccount'>
  readonly now?: () => number
  /** How long a wait sleeps between looks (tests shorten it). */
  readonly pollMs?: number
}

/** fingerprint: what makes two requests the same request (method, path and query as sent, body as parsed). */
export function fingerprint(method: string, url: string, body: unknown): string {
  return createHash('sha256')
    .update(JSON.stringify([method, url, canonical(body)]))
    .digest('base64url')
}

/** canonical: a value with its objects' keys sorted, so that field order does not make two requests differ. */
function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical)
  if (value === null || typeof value !== 'object') return value ?? null
  if (Buffer.isBuffer(value)) return { bytes: createHash('sha256').update(value).digest('base64url') }
  return Object.fromEntries(
    Object.keys(value)
      .sort()
      .map((k) => [k, canonical((value as Record<string, unknown>)[k])]),
  )
}

export class Idempotency {
  readonly #o: IdempotencyOptions
  readonly #now: () => number

  constructor(opts: IdempotencyOptions) {
    this.#o = opts
    this.#now = opts.now ?? Date.now
  }

  /** begin starts a request under its key, or gives the first one's answer to replay, or says why neither. */
  async begin(owner: string, key: string, print: string): Promise<Begun> {
    const { store } = this.#o
    const waitUntil = Date.now() + this.#o.config.idempotencyWaitMs
    let pause = this.#o.pollMs ?? 20
    const { idempotencyKeysPerAccount: rows, idempotencyBytesPerAccount: bytes } = this.#o.config
    for (;;) {
      const now = this.#now()
      const begun = await store.idempotency.begin(owner, key, print, now, LEASE_MS, IDEMPOTENCY_MS, { rows, bytes })
      if (begun.started) return { kind: 'started' }
      if ('full' in begun) return { kind: 'full', seconds: Math.max(1, Math.ceil((begun.full.freesAtMs - now) / 1000)) }
      const { record } = begun
      if (record.fingerprint !== print) return { kind: 'mismatch' }
      if (record.status !== null && record.sealed !== null) return this.#replay(owner, key, print, record.sealed)
      // The first is under way: its answer, when it comes, is this one's too. Wall time: a wait is real time whatever the service's clock says.
      if (Date.now() >= waitUntil) return { kind: 'busy' }
      await new Promise((resolve) => setTimeout(resolve, pause))
      pause = Math.min(pause * 2, 250)
    }
  }

  #replay(owner: string, key: string, print: string, sealed: string): Begun {
    let plain: Buffer
    try {
      plain = this.#o.keyring.open(sealed, sealContext(owner, key, print))
    } catch (error) {
      if (!(error instanceof SealError)) throw error
      return { kind: 'unreadable', reason: error.message }
    }
    return { kind: 'replay', answer: JSON.parse(plain.toString('utf8')) as KeptAnswer }
  }

  /** finish keeps a started request's answer, sealed, for the rest of its 24 hours. */
  async finish(owner: string, key: string, print: string, answer: KeptAnswer): Promise<void> {
    const sealed = this.#o.keyring.seal(Buffer.from(JSON.stringify(answer)), sealContext(owner, key, print))
    await this.#o.store.idempotency.finish(owner, key, print, answer.status, sealed)
  }

  /** abandon frees the key of a started request that has no answer worth keeping (a fault). */
  abandon(owner: string, key: string, print: string): Promise<void> {
    return this.#o.store.idempotency.abandon(owner, key, print)
  }
}

/** sealContext: what a kept answer is bound to (its owner, key and request): a copy in another record does not open. */
export const sealContext = (owner: string, key: string, print: string): string[] => ['idempotency', owner, key, print]
