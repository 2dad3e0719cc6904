/**
 * The process: configuration, store, the app, listening, and a graceful close on
 * SIGTERM/SIGINT (stop accepting, finish in-flight requests up to SHUTDOWN_TIMEOUT_MS,
 * close the store, exit 0).
 */
import { ConfigError, loadConfig, type Config } from './config/config.ts'
import { resolvePepper } from './config/pepper.ts'
import { openStore } from './storage/factory.ts'
import { buildApp } from './app.ts'
import { demoBanner, ensureDemoAccount } from './admin/demo.ts'

function configOrExit(): Config {
  try {
    return loadConfig()
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`)
      process.exit(1)
    }
    throw error
  }
}

const config = configOrExit()
const pepper = resolvePepper(config)
const store = openStore(config)
const demoKey = await ensureDemoAccount(config, store, pepper)
const app = await buildApp({ config, store, pepper })

let closing = false
async function shutdown(signal: string): Promise<void> {
  if (closing) return
  closing = true
  app.log.info({ signal }, 'shutting down')
  const force = setTimeout(() => {
    app.log.warn('in-flight requests did not finish in time; exiting')
    process.exit(1)
  }, config.shutdownTimeoutMs).unref()
  await app.close()
  await store.close()
  clearTimeout(force)
  process.exit(0)
}
process.on('SIGTERM', () => void shutdown('SIGTERM'))
process.on('SIGINT', () => void shutdown('SIGINT'))

await app.listen({ port: config.port, host: config.host })
app.log.info({ region: config.region, store: store.kind }, 'serving')
if (demoKey !== null) process.stdout.write(demoBanner(demoKey, config.publicBaseUrl))
