/**
 * The services, built in one place: buildServices makes them over a store for both the runtime
 * (the listeners) and the admin CLI. openServices opens the store of a configuration for a
 * process that only calls them (the CLI): a door that imports no storage module.
 *
 * The keyring is asked for only when a service that seals secrets (webhooks, factors,
 * encryption) is first used: the CLI resolves it then, because resolving it may write a new
 * key file, which a command that seals nothing must not do.
 */
import type { Config } from '../config/config.ts'
import { resolveKeyring } from '../config/encryption.ts'
import { resolvePepper } from '../config/pepper.ts'
import type { Pepper } from '../crypto/keyed.ts'
import type { Keyring } from '../crypto/keyring.ts'
import type { Metrics } from '../metrics/metrics.ts'
import { openStore } from '../storage/factory.ts'
import type { Store } from '../storage/ports.ts'
import { Accounts } from './accounts.ts'
import { Encryption } from './encryption.ts'
import { Factors } from './factors.ts'
import { Passkeys } from './passkeys.ts'
import { Idempotency } from './idempotency.ts'
import { Totp } from './totp.ts'
import { Users } from './users.ts'
import type { Passwords } from './users/passwords.ts'
import type { SignInThrottle } from './users/throttle.ts'
import { Webhooks } from './webhooks.ts'
import { Jobs } from './jobs.ts'
import { Team } from './team.ts'
import type { SingleSignOn } from './users/sso.ts'
import { sealedPortal } from './users/sealed.ts'
import type { Lookup } from '../webhooks/address.ts'

/** ServiceParts: what the services are made of, and what only the runtime adds. */
export interface ServiceParts {
  readonly store: Store
  readonly config: Config
  readonly pepper: Pepper
  /** keyring gives the keyring; it is called when a service that seals is first used, at most once. */
  readonly keyring: () => Keyring
  /** The clock (epoch ms). */
  readonly now: () => number
  /**
   * The store as accounts and users see it: the runtime gives the portal's view, in which users'
   * TOTP secrets are sealed (default: the store itself; the CLI never reads a user's TOTP secret, it only clears it).
   */
  readonly portalStore?: Store
  /** The users' password hashing and sign-in throttle (default: the users service's own). */
  readonly passwords?: Passwords
  readonly throttle?: SignInThrottle
  /** Verifications and lockouts of managed factors, counted (default: not counted). */
  readonly metrics?: Pick<Metrics, 'verified' | 'lockoutStarted' | 'attemptsLimited'>
  /** Told when a webhook delivery is due (the runtime's delivery worker). */
  readonly onWebhookDue?: () => void
  /** Told when a conversion job is queued (the runtime's job runner). */
  readonly onJobSubmitted?: () => void
  /** How jobs' sourceUrl and resultUrl names are resolved when submitted (default: the system's; tests give their own). */
  readonly lookup?: Lookup
}

/** CoreServices: the services every door shares; those that seal are made when first used. */
export interface CoreServices {
  readonly accounts: Accounts
  readonly users: Users
  /** Account members and invitations, and operator invitations. */
  readonly team: Team
  readonly webhooks: Webhooks
  /** Managed TOTP factors: their users, recovery codes, lockouts and events. */
  readonly factors: Factors
  /** Passkeys: WebAuthn credentials as factors of the same users, under the same lockout. */
  readonly passkeys: Passkeys
  /** Idempotency-Key records and their sealed answers, for the doors' creating calls. */
  readonly idempotency: Idempotency
  /** The Renda-compatible TOTP routes' onboarding records and verifications. */
  readonly totp: Totp
  /** The keyring's versions and the re-sealing of what it seals. */
  readonly encryption: Encryption
  /** Conversion jobs: submitted, read, listed and cancelled (the runtime's runner runs them). */
  readonly jobs: Jobs
  /** Single sign-on providers and sign-ins, over the portal's sealed view (client secrets sealed with the keyring). */
  readonly sso: SingleSignOn
}

/**
 * ServiceSet makes the services over one store, with one clock; it opens and closes nothing.
 * Those that seal (webhooks, factors, encryption) are made, and the keyring asked for, when first used.
 */
class ServiceSet implements CoreServices {
  readonly accounts: Accounts
  readonly users: Users
  readonly team: Team
  readonly totp: Totp
  readonly #parts: ServiceParts
  #keyring: Keyring | undefined
  #webhooks: Webhooks | undefined
  #factors: Factors | undefined
  #passkeys: Passkeys | undefined
  #idempotency: Idempotency | undefined
  #encryption: Encryption | undefined
  #jobs: Jobs | undefined
  #sso: SingleSignOn | undefined

  constructor(parts: ServiceParts) {
    const { store, config, pepper, now } = parts
    this.#parts = parts
    const portalStore = parts.portalStore ?? store
    this.accounts = new Accounts({ store: portalStore, pepper, config, now })
    this.users = new Users({
      store: portalStore,
      config,
      pepper,
      accounts: this.accounts,
      ...(parts.passwords === undefined ? {} : { passwords: parts.passwords }),
      ...(parts.throttle === undefined ? {} : { throttle: parts.throttle }),
      now,
    })
    this.team = new Team({ store: portalStore, now, sessionTtlMs: this.users.sessions.ttlMs })
    this.totp = new Totp({ store, config, pepper })
  }

  #ring(): Keyring {
    this.#keyring ??= this.#parts.keyring()
    return this.#keyring
  }

  get webhooks(): Webhooks {
    const { store, config, now, onWebhookDue } = this.#parts
    this.#webhooks ??= new Webhooks({ store, keyring: this.#ring(), config, now, ...(onWebhookDue === undefined ? {} : { onDue: onWebhookDue }) })
    return this.#webhooks
  }

  get factors(): Factors {
    const { store, config, pepper, now, metrics } = this.#parts
    this.#factors ??= new Factors({ store, config, pepper, keyring: this.#ring(), now, ...(metrics === undefined ? {} : { metrics }) })
    return this.#factors
  }

  get passkeys(): Passkeys {
    const { store, config, pepper, now } = this.#parts
    this.#passkeys ??= new Passkeys({ store, config, pepper, keyring: this.#ring(), factors: this.factors, now })
    return this.#passkeys
  }

  get idempotency(): Idempotency {
    const { store, config, now } = this.#parts
    this.#idempotency ??= new Idempotency({ store, config, keyring: this.#ring(), now })
    return this.#idempotency
  }

  get jobs(): Jobs {
    const { store, config, onJobSubmitted, lookup } = this.#parts
    // The wall clock, as the runner's: a job's times and its leases are compared across nodes (a test's moved clock is not the runners').
    this.#jobs ??= new Jobs({
      store,
      keyring: () => this.#ring(),
      config,
      now: Date.now,
      ...(onJobSubmitted === undefined ? {} : { onSubmitted: onJobSubmitted }),
      ...(lookup === undefined ? {} : { lookup }),
    })
    return this.#jobs
  }

  get sso(): SingleSignOn {
    const { store, portalStore, config, pepper, now } = this.#parts
    if (portalStore !== undefined) return this.users.sso
    // The CLI's services read the store as it is (no keyring needed for most commands); providers' secrets are sealed.
    this.#sso ??= new Users({ store: { ...store, portal: sealedPortal(store.portal, this.#ring()) }, config, pepper, accounts: this.accounts, now }).sso
    return this.#sso
  }

  get encryption(): Encryption {
    this.#encryption ??= new Encryption({ store: this.#parts.store, keyring: this.#ring() })
    return this.#encryption
  }
}

/** buildServices: the services of the runtime and of the CLI, made in this one place. */
export function buildServices(parts: ServiceParts): CoreServices {
  return new ServiceSet(parts)
}

export interface Services extends CoreServices {
  /** The kind of store opened (`sqlite`, `postgres`, with `+redis`), for people. */
  readonly storeKind: string
  /** close closes the store. */
  close(): Promise<void>
}

/** OpenedServices: the services over a store this process opened, which closing them closes. */
class OpenedServices extends ServiceSet implements Services {
  readonly storeKind: string
  readonly #store: Store

  constructor(parts: ServiceParts) {
    super(parts)
    this.#store = parts.store
    this.storeKind = parts.store.kind
  }

  close(): Promise<void> {
    return this.#store.close()
  }
}

/** openServices: the services of a short-lived process (no background maintenance); opening the store applies pending migrations. */
export async function openServices(config: Config): Promise<Services> {
  const pepper = resolvePepper(config)
  const store = await openStore(config, { maintenance: false })
  return new OpenedServices({ store, config, pepper, keyring: () => resolveKeyring(config), now: Date.now })
}
