/** openStore picks the storage adapters from the configuration (one place, at start-up). */
import { join } from 'node:path'
import type { Config } from '../config/config.ts'
import type { Store } from './ports.ts'
import { openSqliteStore } from './sqlite/store.ts'

export const SQLITE_FILE = 'tessera.sqlite'

export function openStore(config: Config): Store {
  return openSqliteStore({ path: join(config.dataDir, SQLITE_FILE), changePollMs: config.keyCachePollMs })
}
