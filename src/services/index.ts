/**
 * openServices opens the store of a configuration and builds the services over it, for a
 * process that only calls them (the admin CLI): a door that imports no storage module. The
 * services that seal secrets (webhooks, encryption) resolve the keyring when first used:
 * resolving it may write a new key file, which a command that seals nothing must not do.
 */
import type { Config } from '../config/config.ts'
import { resolveKeyring } from '../config/encryption.ts'
import { resolvePepper } from '../config/pepper.ts'
import type { Keyring } from '../crypto/keyring.ts'
import { openStore } from '../storage/factory.ts'
import { Accounts } from './accounts.ts'
import { Encryption } from './encryption.ts'
import { Factors } from './factors.ts'
import { Users } from './users.ts'
import { Webhooks } from './webhooks.ts'

export interface Services {
  readonly accounts: Accounts
  readonly users: Users
  readonly webhooks: Webhooks
  readonly encryption: Encryption
  /** Managed factors' users (the totp-user commands). */
  readonly factors: Factors
  /** The kind of store opened (`sqlite`, `postgres`, with `+redis`), for people. */
  readonly storeKind: string
  /** close closes the store. */
  close(): Promise<void>
}

/** openServices: the services of a short-lived process (no background maintenance); opening the store applies pending migrations. */
export async function openServices(config: Config): Promise<Services> {
  const pepper = resolvePepper(config)
  const store = await openStore(config, { maintenance: false })
  const accounts = new Accounts({ store, pepper, config })
  let keyring: Keyring | undefined
  const ring = (): Keyring => {
    keyring ??= resolveKeyring(config)
    return keyring
  }
  let webhooks: Webhooks | undefined
  let encryption: Encryption | undefined
  let factors: Factors | undefined
  return {
    accounts,
    // The store itself, not the portal's sealed view: the CLI never reads a user's TOTP secret, it only clears it.
    users: new Users({ store, config, pepper, accounts }),
    get webhooks() {
      webhooks ??= new Webhooks({ store, keyring: ring(), config })
      return webhooks
    },
    get factors() {
      factors ??= new Factors({ store, config, pepper, keyring: ring() })
      return factors
    },
    get encryption() {
      encryption ??= new Encryption({ store, keyring: ring() })
      return encryption
    },
    storeKind: store.kind,
    close: () => store.close(),
  }
}
