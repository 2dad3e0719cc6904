/**
 * The runtime: everything the service is made of, built once, in one place, in dependency
 * order: the store (instrumented; the portal's sealed view of it), the services, the usage
 * limits, the conversion pool, the mailer, the metrics, and the background jobs (webhook
 * delivery, audit retention, the portal's pruning). Both listeners (the public app and the
 * admin API) and the CLI are built from it; `close` stops what `start` started and closes the
 * rest in reverse order. The process (signals, listening, exit codes) is server.ts's.
 *
 * One clock: `now` reaches every service, the limits, the jobs and the store's own stamps.
 */
import type { Config } from './config/config.ts'
import type { Pepper } from './crypto/keyed.ts'
import type { Keyring } from './crypto/keyring.ts'
import { resolveKeyring } from './config/encryption.ts'
import type { Store } from './storage/ports.ts'
import { createMetrics, type Metrics } from './metrics/metrics.ts'
import { instrumentStore } from './metrics/store.ts'
import type { Accounts } from './services/accounts.ts'
import type { Webhooks } from './services/webhooks.ts'
import { buildServices } from './services/index.ts'
import { WebhookWorker } from './webhooks/worker.ts'
import { Limits } from './usage/limits.ts'
import { countedMailer, openMailer, type Mailer } from './mail/mailer.ts'
import { ConversionPool } from './converter/pool.ts'
import { JobRunner } from './converter/jobs/runner.ts'
import type { Jobs } from './services/jobs.ts'
import { hostname } from 'node:os'
import { randomBytes } from 'node:crypto'
import { groupServedIn } from './domain/regions.ts'
import { sealedPortal } from './services/users/sealed.ts'
import { Passwords } from './services/users/passwords.ts'
import { SignInThrottle } from './services/users/throttle.ts'
import { keepPortalTidy } from './services/users/maintenance.ts'
import type { Users } from './services/users.ts'
import type { Team } from './services/team.ts'
import type { Factors } from './services/factors.ts'
import type { Passkeys } from './services/passkeys.ts'
import type { Idempotency } from './services/idempotency.ts'
import type { Totp } from './services/totp.ts'
import { LateLog, type Log } from './logging/late.ts'
import type { Lookup } from './webhooks/address.ts'

export interface RuntimeOptions {
  readonly config: Config
  /** The opened store; the runtime instruments it but never closes it (whoever opened it does). */
  readonly store: Store
  readonly pepper: Pepper
  /** Seals the secrets the service keeps (default: from the configuration, see config/encryption.ts). */
  readonly keyring?: Keyring
  /** The clock (epoch ms); tests move it. */
  readonly now?: () => number
  /** The process's metrics (default: the runtime's own). */
  readonly metrics?: Metrics
  /** How outbound URLs' names are resolved, for webhooks and jobs' transfers (default: the system's; tests give their own). */
  readonly lookup?: Lookup
}

/** Runtime: built by createRuntime; `start` begins the background jobs, `close` ends everything it built. */
export class Runtime {
  readonly config: Config
  readonly now: () => number
  readonly pepper: Pepper
  readonly keyring: Keyring
  readonly metrics: Metrics
  /** Every operation timed (the metrics' store histogram). */
  readonly store: Store
  /** The store as the portal sees it: users' TOTP secrets sealed with the keyring, and nothing else does. */
  readonly portalStore: Store
  /** Where the background jobs report (the public app's logger once attached). */
  readonly log: LateLog = new LateLog()
  readonly accounts: Accounts
  readonly webhooks: Webhooks
  /** Portal users: sign-up, confirmation, sign-in, reset, sessions, two-factor, approvals. */
  readonly users: Users
  /** Account members and invitations. */
  readonly team: Team
  /** Managed TOTP factors: their users, recovery codes, lockouts and events. */
  readonly factors: Factors
  /** Passkeys of the same users. */
  readonly passkeys: Passkeys
  /** Idempotency-Key records, for the creating calls of both listeners. */
  readonly idempotency: Idempotency
  /** The Renda-compatible TOTP routes' onboarding records and verifications. */
  readonly totp: Totp
  readonly limits: Limits
  readonly worker: WebhookWorker
  /** The portal's mailer (null: no portal); readyz asks its SMTP server through it. */
  readonly mailer: Mailer | null
  readonly passwords: Passwords
  readonly throttle: SignInThrottle
  /** The conversion pool (null: conversions are not served in this region). */
  readonly pool: ConversionPool | null
  /** Conversion jobs: their submission, reading and cancelling, for every door. */
  readonly jobs: Jobs
  /** Runs conversion jobs on this node's pool (null: no pool here). */
  readonly runner: JobRunner | null
  /** Set on SIGTERM while the node drains (SHUTDOWN_DRAIN_MS): /readyz answers 503 so that the load balancer takes it out. */
  draining = false
  readonly #stops: (() => unknown)[] = []
  readonly #lookup: Lookup | undefined
  #started = false

  constructor(opts: RuntimeOptions) {
    const { config } = opts
    this.config = config
    this.now = opts.now ?? Date.now
    this.pepper = opts.pepper
    this.keyring = opts.keyring ?? resolveKeyring(config)
    this.#lookup = opts.lookup
    const lookup = opts.lookup === undefined ? {} : { lookup: opts.lookup }
    this.metrics = opts.metrics ?? createMetrics({ region: config.region, perAccount: config.metricsPerAccount })
    const { metrics, now, log } = this
    this.store = instrumentStore(opts.store, metrics, { healthTimeoutMs: config.storeTimeoutMs })
    this.portalStore = { ...this.store, portal: sealedPortal(this.store.portal, this.keyring) }
    this.limits = new Limits({
      config,
      store: this.store,
      now,
      log,
      onRefused: (cause) => metrics.refused(cause),
      onFlushed: (ok) => metrics.usageFlushed(ok),
    })
    metrics.watchUsageLag(() => this.limits.usageLagMs() / 1000)
    // The outbox's sender, on every node; every door's webhooks service wakes it when a delivery is due.
    this.worker = new WebhookWorker({
      // Deliveries are scheduled and sent on the wall clock: a receiver checks a signature's freshness against its own.
      store: this.store.webhooks,
      keyring: this.keyring,
      config,
      onError: (error, what) => log.warn({ err: error, what }, 'webhook delivery failed to run'),
      onOutcome: (outcome) => metrics.webhookAttempt(outcome),
      onDropped: (accountId, deliveries, note) => {
        metrics.webhookDropped(deliveries)
        if (note !== null) {
          const limit = config.webhookPendingPerAccount
          log.warn({ accountId, dropped: note, limit }, 'webhook deliveries dropped: the account has WEBHOOK_PENDING_PER_ACCOUNT pending')
        }
      },
      send: lookup,
    })
    metrics.watchWebhooks(() => this.store.webhooks.pending())
    this.mailer = config.portalEnabled ? countedMailer(openMailer(config, log), metrics) : null
    this.passwords = new Passwords()
    this.throttle = new SignInThrottle(this.portalStore, config, now, this.pepper)
    // The services, as the CLI's (services/index.ts), with the portal's view for accounts and users and the runtime's parts.
    const services = buildServices({
      store: this.store,
      portalStore: this.portalStore,
      config,
      pepper: this.pepper,
      keyring: () => this.keyring,
      now,
      passwords: this.passwords,
      throttle: this.throttle,
      metrics,
      onWebhookDue: () => this.worker.nudge(),
      onJobSubmitted: () => this.runner?.nudge(),
      ...lookup,
    })
    this.accounts = services.accounts
    this.webhooks = services.webhooks
    this.users = services.users
    this.team = services.team
    this.factors = services.factors
    this.passkeys = services.passkeys
    this.idempotency = services.idempotency
    this.totp = services.totp
    this.pool = groupServedIn('converter', config.region) ? this.#openPool() : null
    this.jobs = services.jobs
    this.runner = this.pool === null ? null : this.#openRunner(this.pool)
    if (this.pool !== null) metrics.watchJobs(() => this.store.jobs.gauges())
  }

  #openRunner(pool: ConversionPool): JobRunner {
    const { config, metrics, log } = this
    return new JobRunner({
      store: this.store.jobs,
      pool,
      keyring: this.keyring,
      // Synchronous conversions keep a worker of their own where there is more than one.
      config: { ...config, jobWorkers: Math.min(config.jobWorkers, Math.max(1, config.converterWorkers - 1)) },
      node: `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`,
      log,
      metrics,
      onEvent: () => this.worker.nudge(),
      ...(this.#lookup === undefined ? {} : { transfer: { lookup: this.#lookup } }),
      // Jobs run and their leases are renewed on the wall clock: leases are compared across nodes.
    })
  }

  #openPool(): ConversionPool {
    const { config, metrics, log } = this
    const pool = new ConversionPool({
      size: config.converterWorkers,
      splitPages: config.converterSplitPages,
      maxQueue: config.converterWorkers * config.converterQueuePerWorker,
      timeoutMs: config.conversionTimeoutMs,
      maxJobsPerWorker: config.workerMaxJobs,
      maxMemoryBytes: config.workerMaxMemoryMb * 1048576,
      stallTimeoutMs: config.clientStallTimeoutMs,
      maxPerAccount: config.converterMaxPerAccount,
      pageTimeoutMs: config.conversionPageTimeoutMs,
      onRecycle: (reason, detail) => {
        metrics.workerReplaced(reason)
        log.info({ reason, detail }, 'conversion worker replaced')
      },
      onQueueWait: (seconds) => metrics.queueWaited(seconds),
    })
    metrics.watchPool(() => pool.gauges())
    return pool
  }

  /**
   * start begins the background jobs: webhook delivery, audit retention and (with the portal) its pruning; first it gives
   * the store this node's WEBHOOK_PENDING_PER_ACCOUNT (the outbox trigger reads it there).
   */
  async start(): Promise<void> {
    if (this.#started) return
    this.#started = true
    const { config, log } = this
    await this.store.webhooks.setPendingCap(config.webhookPendingPerAccount)
    this.worker.start()
    this.#stops.push(() => this.worker.close())
    if (this.runner !== null) {
      this.runner.start()
      // Stopped before the pool closes (in close), so that its jobs go back to the queue, not as attempts.
      this.#stops.push(() => this.runner!.close())
    }
    this.#stops.push(this.accounts.keepAuditRetention((error) => log.warn({ err: error, dependency: 'audit retention' }, 'dependency error')))
    if (this.mailer !== null) {
      const report = (error: Error) => log.warn({ err: error }, 'portal sessions, tokens or unconfirmed sign-ups not pruned')
      this.#stops.push(keepPortalTidy(this.store, this.now, report, config.signupConfirmHours * 3_600_000))
    }
  }

  /**
   * close, once every listener has stopped (in-flight requests, conversions included, are
   * done): the jobs in reverse order of their start (a pass under way finishes first), then
   * the pool, the mailer, and the usage counts (saved last, before the caller closes the store).
   */
  async close(): Promise<void> {
    for (const stop of this.#stops.reverse()) await stop()
    this.#stops.length = 0
    await this.pool?.close()
    await this.mailer?.close()
    await this.limits.close()
  }
}

/** createRuntime: the runtime for one process (or one test's app). */
export function createRuntime(opts: RuntimeOptions): Runtime {
  return new Runtime(opts)
}

export type { Log }
