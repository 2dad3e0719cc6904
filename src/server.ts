/**
 * The process, and nothing else: configuration, the store, the runtime (runtime.ts builds
 * everything else), the app and the admin API (on ADMIN_LISTEN unless `off`), listening, and
 * a graceful close on SIGTERM/SIGINT (drain for SHUTDOWN_DRAIN_MS, stop accepting, finish in-flight
 * requests of both up to SHUTDOWN_TIMEOUT_MS, close the runtime, then the store, exit 0).
 */
import { ConfigError, loadConfig, type Config } from './config/config.ts'
import { resolvePepper } from './config/pepper.ts'
import { resolveKeyring } from './config/encryption.ts'
import { openStore } from './storage/factory.ts'
import type { Store } from './storage/ports.ts'
import { demoBanner, ensureDemoAccount } from './admin/demo.ts'
import { buildPublicApp } from './app.ts'
import { createRuntime } from './runtime.ts'
import { buildAdminApp } from './admin/api/app.ts'
import { startTracing, stopTracing, tracingOn } from './tracing/tracing.ts'

/** orExit runs a start-up step; a configuration error stops the process with its one-line message. */
function orExit<T>(step: () => T): T {
  try {
    return step()
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`)
      process.exit(1)
    }
    throw error
  }
}

/**
 * Errors of no request (a dependency dropping, reconnect attempts) go to the log, at most one
 * line per dependency every 10 s: an outage is reported, not repeated every retry.
 */
let log: (error: Error, what: string) => void = (error, what) => process.stderr.write(`${what}: ${error.message}\n`)
const lastReported = new Map<string, number>()
function reportBackground(error: Error, what: string): void {
  const now = Date.now()
  if (now - (lastReported.get(what) ?? 0) < 10_000) return
  lastReported.set(what, now)
  log(error, what)
}

/** openStoreOrExit: a store that cannot be reached at start-up stops the process with one clear line. */
async function openStoreOrExit(config: Config): Promise<Store> {
  try {
    return await openStore(config, { onBackgroundError: reportBackground, clock: now })
  } catch (error) {
    process.stderr.write(`Cannot open the store: ${(error as Error).message}\n`)
    process.exit(1)
  }
}

/** The process's one clock: the store's own stamps and every service read it. */
const now: () => number = Date.now
const config: Config = orExit(() => loadConfig())
const pepper = orExit(() => resolvePepper(config))
const keyring = orExit(() => resolveKeyring(config))
// Before anything is built: the store's clients and both listeners are traced from their first call (when OTEL_* asks).
await startTracing(config)
// One runtime for both listeners: the admin API's operations are timed and its webhook re-sends wake this node's worker.
const runtime = createRuntime({ config, store: await openStoreOrExit(config), pepper, keyring, now })
const demo = await ensureDemoAccount(config, runtime.accounts, runtime.users)
const app = await buildPublicApp(runtime)
const admin =
  config.adminListen === null
    ? null
    : await buildAdminApp({
        config,
        accounts: runtime.accounts,
        metrics: runtime.metrics,
        webhooks: runtime.webhooks,
        jobs: runtime.jobs,
        operators: { team: runtime.team, mailer: runtime.mailer },
        sso: runtime.users.sso,
        factors: runtime.factors,
        totp: runtime.totp,
        idempotency: runtime.idempotency,
      })
runtime.log.attach(app.log)
await runtime.start()
log = (error, what) => app.log.warn({ err: error, dependency: what }, 'dependency error')

/** adminAddress: where the admin API listens, as host:port (the port chosen when ADMIN_LISTEN asked for 0). */
function adminAddress(address: ReturnType<typeof app.server.address>): string {
  if (address === null || typeof address === 'string') return String(address)
  return address.family === 'IPv6' ? `[${address.address}]:${address.port}` : `${address.address}:${address.port}`
}

let closing = false
async function shutdown(signal: string): Promise<void> {
  if (closing) return
  closing = true
  app.log.info({ signal, drainMs: config.shutdownDrainMs }, 'shutting down')
  // From now on every answer closes its connection (Connection: close), so that no connection sits idle to be cut
  // under a proxy's next request; and while the node drains, /readyz answers 503 and the load balancer takes it out
  // before the listener closes, so that a rolling update fails no request (docs/deploy.md).
  for (const server of [app.server, admin?.server]) {
    server?.prependListener('request', (_request, response) => {
      response.shouldKeepAlive = false
    })
  }
  runtime.draining = true
  if (config.shutdownDrainMs > 0) await new Promise((resolve) => setTimeout(resolve, config.shutdownDrainMs))
  const force = setTimeout(() => {
    app.log.warn('in-flight requests did not finish in time; exiting')
    process.exit(1)
  }, config.shutdownTimeoutMs).unref()
  // Both before the store: their in-flight requests still use it. Each closes its kept-alive
  // connections as they go idle (http/base.ts), so an answer under way does not hold it up.
  await Promise.all([app.close(), admin?.close()])
  await runtime.close()
  await runtime.store.close()
  // The spans of the last requests, exported (for at most tracing.ts's STOP_FLUSH_MS, and within the force above).
  await stopTracing()
  clearTimeout(force)
  process.exit(0)
}
process.on('SIGTERM', () => void shutdown('SIGTERM'))
process.on('SIGINT', () => void shutdown('SIGINT'))

await app.listen({ port: config.port, host: config.host })
if (admin !== null && config.adminListen !== null) {
  await admin.listen({ port: config.adminListen.port, host: config.adminListen.host, listenTextResolver: (address) => `Admin API listening at ${address}` })
}
app.log.info(
  {
    region: config.region,
    store: runtime.store.kind,
    tracing: tracingOn() ? config.otelSampler : 'off',
    admin: admin === null ? 'off' : adminAddress(admin.server.address()),
  },
  'serving',
)
if (demo !== null) process.stdout.write(demoBanner(demo, config.publicBaseUrl))
