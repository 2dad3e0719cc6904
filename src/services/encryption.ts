/**
 * The encryption service: what is sealed under which key version, and re-sealing everything
 * (managed factors, portal users' two-factor secrets, webhook endpoints' signing secrets)
 * under the active one, while the service runs (the CLI's `encryption` commands).
 */
import type { Keyring } from '../crypto/keyring.ts'
import type { Store } from '../storage/ports.ts'
import { rotateSeals, type Rotation } from '../totp/factors/rotate.ts'
import { resealSecrets } from '../webhooks/secret.ts'
import { resealPortalSecrets } from './users/sealed.ts'

/** What re-sealing what was not under the active version came to, per kind of secret. */
export interface Resealed {
  readonly factors: Rotation
  readonly portalUsers: { resealed: number; unreadable: { id: string; reason: string }[] }
  readonly webhookEndpoints: { resealed: number; unreadable: { id: string; reason: string }[] }
  /** Factors still sealed under another version than the active one. */
  readonly leftUnderOtherVersions: number
}

export class Encryption {
  readonly #store: Store
  readonly keyring: Keyring

  /** `store`: the store itself, not the portal's sealed view (this reads and writes the sealed values). */
  constructor(options: { readonly store: Store; readonly keyring: Keyring }) {
    this.#store = options.store
    this.keyring = options.keyring
  }

  /** sealVersions: how many managed factors each key version seals. */
  sealVersions(): Promise<Map<number, number>> {
    return this.#store.factors.sealVersions()
  }

  /** reseal re-seals every secret not under the active key version, factors in batches of `batch`. */
  async reseal(batch: number): Promise<Resealed> {
    const ring = this.keyring
    const factors = await rotateSeals(this.#store.factors, ring, { batch })
    const portalUsers = await resealPortalSecrets(this.#store.portal, ring)
    const webhookEndpoints = await resealSecrets(this.#store.webhooks, ring)
    const left = [...(await this.#store.factors.sealVersions())].filter(([version]) => version !== ring.active).reduce((n, [, c]) => n + c, 0)
    return { factors, portalUsers, webhookEndpoints, leftUnderOtherVersions: left }
  }
}
