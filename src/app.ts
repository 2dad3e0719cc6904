/**
 * buildApp wires the service in one explicit order: Fastify and its parsers, then the
 * cross-cutting plugins (errors, gateway, OpenAPI), then the route groups this region
 * serves. It owns no process concerns (listening, signals): see server.ts.
 */
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify'
import { randomUUID } from 'node:crypto'
import type { Config } from './config/config.ts'
import type { Store } from './storage/ports.ts'
import type { Pepper } from './crypto/keyed.ts'
import errors, { sendProblems } from './errors/plugin.ts'
import gateway from './gateway/plugin.ts'
import openapi from './openapi/plugin.ts'
import opsRoutes from './ops/routes.ts'
import totpRoutes from './totp/routes.ts'
import converterRoutes from './converter/routes.ts'
import portal from './portal/plugin.ts'
import { Passwords } from './portal/passwords.ts'
import { SignInThrottle } from './portal/throttle.ts'
import { keepPortalTidy } from './portal/maintenance.ts'
import { countedMailer, openMailer } from './mail/mailer.ts'
import { Accounts } from './services/accounts.ts'
import { Factors } from './services/factors.ts'
import { Totp } from './services/totp.ts'
import { ConversionPool } from './converter/pool.ts'
import { groupServedIn } from './domain/regions.ts'
import { VERSION } from './version.ts'
import { lazyChildLoggerFactory } from './logging/lazy-child.ts'
import { OneLineLogController } from './logging/controller.ts'
import { logDestination } from './logging/format.ts'
import { answerError } from './errors/errors.ts'
import { Limits } from './usage/limits.ts'
import { createMetrics, type Metrics } from './metrics/metrics.ts'
import metricsRoute from './metrics/route.ts'
import { instrumentStore } from './metrics/store.ts'
import type { Keyring } from './crypto/keyring.ts'
import { resolveKeyring } from './config/encryption.ts'
import { sealedPortal } from './portal/sealed.ts'
import { capConnections, httpServerOptions } from './ops/connections.ts'
import { WebhookWorker } from './webhooks/worker.ts'
import { Webhooks } from './services/webhooks.ts'

export interface AppOptions {
  readonly config: Config
  readonly store: Store
  readonly pepper: Pepper
  /** Seals the secrets the service keeps (default: from the configuration, see config/encryption.ts). */
  readonly keyring?: Keyring
  /** The clock (epoch ms); tests move it. */
  readonly now?: () => number
  /** Where logs go (default: standard output). */
  readonly logStream?: { write(line: string): void }
  /** The process's metrics, shared with the admin listener (default: the app's own). */
  readonly metrics?: Metrics
}

const REQUEST_ID = /^[\w.:-]{1,128}$/

export async function buildApp(opts: AppOptions): Promise<FastifyInstance> {
  const { config, pepper } = opts
  const keyring = opts.keyring ?? resolveKeyring(config)
  const now = opts.now ?? Date.now
  const metrics = opts.metrics ?? createMetrics({ region: config.region, perAccount: config.metricsPerAccount })
  // Every operation timed (server.ts may have instrumented it already, for the admin listener: then it is the same).
  const store = instrumentStore(opts.store, metrics, { healthTimeoutMs: config.storeTimeoutMs })
  const perAccount = metrics.perAccount
  const logger: FastifyServerOptions['logger'] = {
    level: config.logLevel,
    ...(await logDestination(config, opts.logStream)),
    serializers: {
      // The path only: a query string could carry anything.
      req: (req: { method: string; url: string; ip?: string }) => ({ method: req.method, path: req.url.split('?')[0], ip: req.ip }),
      // The caller by key id and account, never by key.
      res: (reply: { statusCode: number; request?: { caller: { keyId: string; accountId: string } | null } }) => {
        const caller = reply.request?.caller
        return caller ? { statusCode: reply.statusCode, keyId: caller.keyId, accountId: caller.accountId } : { statusCode: reply.statusCode }
      },
    },
  }
  const app = Fastify({
    logger,
    childLoggerFactory: lazyChildLoggerFactory,
    // Each completed request is counted by its route's pattern, never its path: label values stay a closed set.
    logController: new OneLineLogController((request, reply) => {
      const route = request.routeOptions.url ?? 'unmatched'
      metrics.observeRequest(route, request.method, reply.statusCode, reply.elapsedTime / 1000)
      // Only where the operator asked (METRICS_PER_ACCOUNT), and only for callers the gateway let through.
      // (`caller` is unset, not null, on a request answered before the gateway's scope: /metrics itself.)
      const caller = perAccount ? request.caller : null
      if (caller) metrics.accountRequest(caller.accountId, route.startsWith('/converter/') ? 'converter' : 'totp', reply.statusCode)
    }),
    bodyLimit: config.bodyLimitBytes,
    requestTimeout: config.requestTimeoutMs,
    keepAliveTimeout: config.keepAliveTimeoutMs,
    http: httpServerOptions(config),
    trustProxy: config.trustProxy,
    // A well-formed incoming X-Request-Id is kept so that logs join across a proxy.
    genReqId: (req) => {
      const given = req.headers['x-request-id']
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID()
    },
    // All problems at once; the body is at most bodyLimit bytes, which bounds the work.
    ajv: { customOptions: { allErrors: true, coerceTypes: true } },
    // The errors plugin reads the ajv errors themselves; the message is for the log only.
    schemaErrorFormatter: (_errors, dataVar) => answerError(`${dataVar} failed validation`),
    // A path that does not decode (a user ID with bad percent-escapes) gets the catalogue's 400, not Fastify's own body.
    frameworkErrors: (_error, _request, reply) => {
      sendProblems(reply, [{ code: 'PATH_INVALID' }], 400)
    },
  })

  let lastCapWarning = 0
  capConnections(app.server, config.maxConnections, (stats) => {
    if (Date.now() - lastCapWarning < 60_000) return
    lastCapWarning = Date.now()
    app.log.warn({ maxConnections: config.maxConnections, ...stats }, 'connection cap reached: idle connections are closed to make room')
  })

  // Each route group registers the body types it takes (TOTP: bodies/fields.ts; converter: multipart).
  app.removeContentTypeParser('text/plain')
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id)
    done()
  })

  if (config.metricsToken !== '') await app.register(metricsRoute, { metrics, token: config.metricsToken })

  const limits = new Limits({
    config, store, now, log: app.log, onRefused: (cause) => metrics.refused(cause), onFlushed: (ok) => metrics.usageFlushed(ok),
  })
  metrics.watchUsageLag(() => limits.usageLagMs() / 1000)
  // After the server has stopped: the last usage counts are saved before the store closes.
  app.addHook('onClose', () => limits.close())

  // The outbox's sender, on every node; closed before the store (the caller's), after the routes that feed it.
  const worker = new WebhookWorker({
    store: store.webhooks, keyring, config,
    onError: (error, what) => app.log.warn({ err: error, what }, 'webhook delivery failed to run'),
    onOutcome: (outcome) => metrics.webhookAttempt(outcome),
  })
  worker.start()
  app.addHook('onClose', () => worker.close())
  metrics.watchWebhooks(() => store.webhooks.pending())
  const webhooks = new Webhooks({ store, keyring, config, onDue: () => worker.nudge() })
  const factors = new Factors({ store, config, pepper, keyring, now, metrics })

  await app.register(errors, { config })
  await app.register(gateway, { config, store, pepper, now, limits, metrics })
  await app.register(openapi, { config, version: VERSION })

  // The portal's mailer, opened once: readyz asks its SMTP server through it, not through a second transport.
  const mailer = config.portalEnabled ? countedMailer(openMailer(config, app.log), metrics) : null
  await app.register(opsRoutes, { store, mailer, now, timeoutMs: config.storeTimeoutMs })
  // Its own scope: its headers, HTML error pages and assets stay there; the API-key guard never runs on it.
  if (mailer !== null) {
    app.addHook('onClose', () => mailer.close())
    // The portal reads and writes users' TOTP secrets through the keyring; nothing else sees them.
    const portalStore = { ...store, portal: sealedPortal(store.portal, keyring) }
    await app.register(portal, {
      prefix: '/portal', config, store: portalStore, pepper, now, mailer, metrics,
      accounts: new Accounts({ store: portalStore, pepper, config, now }),
      factors,
      webhooks,
      passwords: new Passwords(),
      throttle: new SignInThrottle(portalStore, config, now, pepper),
    })
    const stopTidying = keepPortalTidy(store, now, (error) => app.log.warn({ err: error }, 'portal sessions, tokens or unconfirmed sign-ups not pruned'), config.signupConfirmHours * 3_600_000)
    // On close, before the caller closes the store: a pass under way finishes first.
    app.addHook('onClose', () => stopTidying())
  }
  await app.register(totpRoutes, { config, totp: new Totp({ store, config, pepper }), factors, now, metrics })
  if (groupServedIn('converter', config.region)) {
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
        app.log.info({ reason, detail }, 'conversion worker replaced')
      },
      onQueueWait: (seconds) => metrics.queueWaited(seconds),
    })
    metrics.watchPool(() => pool.gauges())
    // After the server has stopped and in-flight requests (conversions included) are done.
    app.addHook('onClose', () => pool.close())
    await app.register(converterRoutes, { config, pool, metrics })
  } else {
    await app.register(async (scope) => {
      scope.all('/converter/*', { onRequest: scope.guardNotServed('converter'), schema: { hide: true } }, async () => undefined)
    })
  }
  return app
}
