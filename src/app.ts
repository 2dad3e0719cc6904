/**
 * The public app: Fastify on the shared base (http/base.ts), then the cross-cutting plugins
 * (errors, gateway, OpenAPI), then the route groups this region serves, each given what it
 * needs from the runtime. It owns no process concerns (listening, signals): see server.ts;
 * and it builds nothing of its own: see runtime.ts.
 */
import type { FastifyInstance } from 'fastify'
import type { Config } from './config/config.ts'
import type { Store } from './storage/ports.ts'
import type { Pepper } from './crypto/keyed.ts'
import errors, { sendProblems } from './errors/plugin.ts'
import gateway from './gateway/plugin.ts'
import openapi from './openapi/plugin.ts'
import { VERSION } from './version.ts'
import { createBase } from './http/base.ts'
import opsRoutes from './ops/routes.ts'
import totpRoutes from './totp/routes.ts'
import converterRoutes from './converter/routes.ts'
import portal from './portal/web/plugin.ts'
import type { Metrics } from './metrics/metrics.ts'
import metricsRoute from './metrics/route.ts'
import type { Keyring } from './crypto/keyring.ts'
import { createRuntime, type Runtime } from './runtime.ts'
import type { LogStream } from './logging/format.ts'
import type { Lookup } from './webhooks/address.ts'

/** AppOptions: a runtime made for this app alone (tests, docs); it starts with the app and closes with it. */
export interface AppOptions {
  readonly config: Config
  readonly store: Store
  readonly pepper: Pepper
  /** Seals the secrets the service keeps (default: from the configuration, see config/encryption.ts). */
  readonly keyring?: Keyring
  /** The clock (epoch ms); tests move it. */
  readonly now?: () => number
  /** Where logs go (default: standard output). */
  readonly logStream?: LogStream
  /** The process's metrics (default: the app's own). */
  readonly metrics?: Metrics
  /** How outbound URLs' names are resolved (default: the system's; tests make names resolve where they need). */
  readonly lookup?: Lookup
}

/** buildApp: the public app with a runtime of its own, started now and closed when the app closes (the caller closes the store). */
export async function buildApp(opts: AppOptions): Promise<FastifyInstance> {
  const runtime = createRuntime(opts)
  const app = await buildPublicApp(runtime, { logStream: opts.logStream })
  runtime.log.attach(app.log)
  await runtime.start()
  app.addHook('onClose', () => runtime.close())
  return app
}

/** buildPublicApp: the public app on a runtime that the caller starts and closes (server.ts: after both listeners have stopped). */
export async function buildPublicApp(runtime: Runtime, opts: { readonly logStream?: LogStream } = {}): Promise<FastifyInstance> {
  const { config, store, pepper, now, metrics } = runtime
  const perAccount = metrics.perAccount
  let lastCapWarning = 0
  const app = await createBase({
    config,
    logStream: opts.logStream,
    // The caller by key id and account, never by key.
    who: (request) => (request.caller ? { keyId: request.caller.keyId, accountId: request.caller.accountId } : null),
    // Each completed request is counted by its route's pattern, never its path: label values stay a closed set.
    onCompleted: (request, reply) => {
      const route = request.routeOptions.url ?? 'unmatched'
      metrics.observeRequest(route, request.method, reply.statusCode, reply.elapsedTime / 1000)
      // Only where the operator asked (METRICS_PER_ACCOUNT), and only for callers the gateway let through.
      // (`caller` is unset, not null, on a request answered before the gateway's scope: /metrics itself.)
      const caller = perAccount ? request.caller : null
      if (caller) metrics.accountRequest(caller.accountId, route.startsWith('/converter/') ? 'converter' : 'totp', reply.statusCode)
    },
    bodyLimit: config.bodyLimitBytes,
    trustProxy: config.trustProxy,
    // A path that does not decode (a user ID with bad percent-escapes) gets the catalogue's 400, not Fastify's own body.
    badPath: (reply, reason) => sendProblems(reply, [{ code: 'PATH_INVALID', params: { reason } }], 400),
    onCapReached: (stats) => {
      if (Date.now() - lastCapWarning < 60_000) return
      lastCapWarning = Date.now()
      app.log.warn({ maxConnections: config.maxConnections, ...stats }, 'connection cap reached: idle connections are closed to make room')
    },
  })
  // Kept for compatibility, but a client that reaches this port past the proxy names any address it likes.
  if (config.trustProxy === true && config.nodeEnv === 'production')
    app.log.warn(
      { setting: 'TRUST_PROXY' },
      "TRUST_PROXY=true believes any peer's X-Forwarded-For: a client that reaches this port without the proxy escapes the per-source limits; list the proxy's addresses instead (docs/configuration.md)",
    )

  if (config.metricsToken !== '') await app.register(metricsRoute, { metrics, token: config.metricsToken })

  await app.register(errors, { config })
  await app.register(gateway, { config, store, pepper, now, limits: runtime.limits, metrics })
  await app.register(openapi, { config, version: VERSION })

  const { mailer } = runtime
  await app.register(opsRoutes, { store, mailer, now, timeoutMs: config.storeTimeoutMs, draining: () => runtime.draining })
  // Its own scope: its headers, HTML error pages and assets stay there; the API-key guard never runs on it.
  if (mailer !== null) {
    await app.register(portal, {
      prefix: '/portal',
      config,
      pepper,
      now,
      mailer,
      metrics,
      accounts: runtime.accounts,
      webhooks: runtime.webhooks,
      jobs: runtime.jobs,
      factors: runtime.factors,
      users: runtime.users,
      team: runtime.team,
      passwords: runtime.passwords,
      throttle: runtime.throttle,
    })
  }
  await app.register(totpRoutes, {
    config,
    totp: runtime.totp,
    factors: runtime.factors,
    passkeys: runtime.passkeys,
    idempotency: runtime.idempotency,
    now,
    metrics,
  })
  const { pool } = runtime
  if (pool !== null) {
    await app.register(converterRoutes, { config, pool, metrics, jobs: runtime.jobs })
  } else {
    await app.register(async (scope) => {
      scope.all('/converter/*', { onRequest: scope.guardNotServed('converter'), schema: { hide: true } }, async () => undefined)
    })
  }
  return app
}
