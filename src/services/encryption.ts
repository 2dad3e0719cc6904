/**
 * The encryption service: what is sealed under which key version, and re-sealing everything
 * under the active one, while the service runs (the CLI's `encryption` commands). Everything
 * the keyring seals is here, each kind once: managed factors (TOTP secrets and passkeys),
 * portal users' two-factor secrets (and single sign-on providers' client secrets with them), webhook endpoints' signing secrets, kept Idempotency-Key
 * answers and conversion jobs' secrets (their password and URLs, kept while queued or
 * running). A kind left out would stop opening once the old key version is removed.
 */
import { resealValue, type Keyring } from '../crypto/keyring.ts'
import { secretsContext } from '../domain/jobs.ts'
import type { IdempotencyRef, SealCounts, SealedValue, Store } from '../storage/ports.ts'
import { rotateSeals, type Rotation } from '../totp/factors/rotate.ts'
import { resealSecrets } from '../webhooks/secret.ts'
import { sealContext as answerContext } from './idempotency.ts'
import { isSealed, resealPortalSecrets } from './users/sealed.ts'

/** What re-sealing one kind came to: how many, and those that do not open (their version is not configured, or they were altered). */
export interface KindResealed {
  resealed: number
  unreadable: { id: string; reason: string }[]
}

/** What re-sealing what was not under the active version came to, per kind of secret. */
export interface Resealed {
  readonly factors: Rotation
  readonly portalUsers: KindResealed
  readonly webhookEndpoints: KindResealed
  readonly idempotencyAnswers: KindResealed
  readonly jobSecrets: KindResealed
  /** Values of every kind still sealed under another version than the active one. */
  readonly leftUnderOtherVersions: number
}

/** The kinds of sealed values, as `status` counts them. */
export const SEALED_KINDS = ['factors', 'portalUsers', 'webhookEndpoints', 'idempotencyAnswers', 'jobSecrets'] as const
export type SealedKind = (typeof SEALED_KINDS)[number]

const PAGE = 500

export class Encryption {
  readonly #store: Store
  readonly keyring: Keyring

  /** `store`: the store itself, not the portal's sealed view (this reads and writes the sealed values). */
  constructor(options: { readonly store: Store; readonly keyring: Keyring }) {
    this.#store = options.store
    this.keyring = options.keyring
  }

  /** sealVersions: how many values of each kind each key version seals. */
  async sealVersions(): Promise<Record<SealedKind, SealCounts>> {
    const store = this.#store
    return {
      factors: await store.factors.sealVersions(),
      portalUsers: await this.#portalVersions(),
      webhookEndpoints: await this.#count(
        (after) => store.webhooks.sealedSecrets(after, PAGE),
        (r) => r.sealed,
        (r) => r.id,
      ),
      idempotencyAnswers: await store.idempotency.sealVersions(),
      jobSecrets: await store.jobs.sealVersions(),
    }
  }

  /** reseal re-seals every secret not under the active key version, factors in batches of `batch`. */
  async reseal(batch: number): Promise<Resealed> {
    const ring = this.keyring
    const store = this.#store
    const factors = await rotateSeals(store.factors, ring, { batch })
    const portalUsers = await resealPortalSecrets(store.portal, ring)
    const webhookEndpoints = await resealSecrets(store.webhooks, ring)
    const idempotencyAnswers = await this.#reseal(
      (after: IdempotencyRef | null) => store.idempotency.sealedAnswers(after, batch),
      (v) => answerContext(v.row.owner, v.row.key, v.row.fingerprint),
      (v, to) => store.idempotency.resealAnswer(v.row, v.sealed, to),
      (v) => ({ owner: v.row.owner, key: v.row.key }),
      (v) => `${v.row.owner}/${v.row.key}`,
    )
    const jobSecrets = await this.#reseal(
      (after: string | null) => store.jobs.sealedSecrets(after ?? '', batch),
      (v) => secretsContext(v.row.accountId, v.row.id),
      (v, to) => store.jobs.resealSecret(v.row.id, v.sealed, to),
      (v) => v.row.id,
      (v) => v.row.id,
    )
    const left = Object.values(await this.sealVersions())
      .flatMap((counts) => [...counts])
      .filter(([version]) => version !== ring.active)
      .reduce((n, [, c]) => n + c, 0)
    return { factors, portalUsers, webhookEndpoints, idempotencyAnswers, jobSecrets, leftUnderOtherVersions: left }
  }

  /**
   * #reseal pages through one kind's sealed values and re-seals those under another version,
   * compare-and-set (a value changed or gone meanwhile is left as the other change left it).
   */
  async #reseal<R, C>(
    page: (after: C | null) => Promise<SealedValue<R>[]>,
    context: (v: SealedValue<R>) => string[],
    write: (v: SealedValue<R>, to: string) => Promise<boolean>,
    cursor: (v: SealedValue<R>) => C,
    name: (v: SealedValue<R>) => string,
  ): Promise<KindResealed> {
    const ring = this.keyring
    const done: KindResealed = { resealed: 0, unreadable: [] }
    let after: C | null = null
    for (;;) {
      const values = await page(after)
      if (values.length === 0) return done
      for (const v of values) {
        if (ring.versionOf(v.sealed) === ring.active) continue
        const next = resealValue(ring, v.sealed, context(v))
        if ('unreadable' in next) done.unreadable.push({ id: name(v), reason: next.unreadable })
        else if (await write(v, next.sealed)) done.resealed++
      }
      after = cursor(values.at(-1)!)
    }
  }

  async #count<R>(page: (after: string) => Promise<R[]>, sealed: (r: R) => string, id: (r: R) => string): Promise<SealCounts> {
    const counts: SealCounts = new Map()
    let after = ''
    for (;;) {
      const rows = await page(after)
      if (rows.length === 0) return counts
      for (const r of rows) {
        const version = this.keyring.versionOf(sealed(r))
        if (version !== null) counts.set(version, (counts.get(version) ?? 0) + 1)
      }
      after = id(rows.at(-1)!)
    }
  }

  /** #portalVersions counts portal users' sealed two-factor secrets (one kept plain, from before sealing, is not counted). */
  async #portalVersions(): Promise<SealCounts> {
    const counts: SealCounts = new Map()
    let cursor: string | undefined
    do {
      const page = await this.#store.portal.listUsers({ limit: PAGE, ...(cursor === undefined ? {} : { cursor }) })
      for (const user of page.items) {
        const version = user.totpSecret !== null && isSealed(user.totpSecret) ? this.keyring.versionOf(user.totpSecret) : null
        if (version !== null) counts.set(version, (counts.get(version) ?? 0) + 1)
      }
      cursor = page.next ?? undefined
    } while (cursor !== undefined)
    // Single sign-on providers' client secrets count with the portal's (resealPortalSecrets re-seals both).
    for (const provider of await this.#store.portal.listSsoProviders()) {
      const version = provider.clientSecret === null ? null : this.keyring.versionOf(provider.clientSecret)
      if (version !== null) counts.set(version, (counts.get(version) ?? 0) + 1)
    }
    return counts
  }
}
