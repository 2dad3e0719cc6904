/**
 * The keyring of the secrets the service keeps. Production sets ENCRYPTION_KEYS; elsewhere
 * a key is generated once into DATA_DIR/encryption-keys (mode 0600, like the pepper file),
 * so that `npm start` works with nothing set and the admin CLI opens what the server sealed.
 * The file holds ENCRYPTION_KEYS' syntax: an operator rotating in development appends an
 * item (`npm run admin -- encryption generate`).
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { ConfigError, type Config } from './config.ts'
import { keyring, newKeyItem, parseKeys, type Keyring } from '../crypto/keyring.ts'

export const KEYS_FILE = 'encryption-keys'

export function resolveKeyring(config: Config): Keyring {
  const { text, source } = keysText(config)
  let keys: Map<number, Buffer>
  try {
    keys = parseKeys(text)
  } catch (error) {
    throw new ConfigError(`Invalid ${source}: ${(error as Error).message}`)
  }
  const active = config.encryptionActiveVersion === 0 ? undefined : config.encryptionActiveVersion
  if (active !== undefined && !keys.has(active)) {
    throw new ConfigError(`Invalid configuration: ENCRYPTION_ACTIVE_VERSION ${active} is not among the versions of ${source} (${[...keys.keys()].join(', ')})`)
  }
  return keyring(keys, active)
}

function keysText(config: Config): { text: string; source: string } {
  if (config.encryptionKeys !== '') return { text: config.encryptionKeys, source: 'configuration: ENCRYPTION_KEYS' }
  const file = join(config.dataDir, KEYS_FILE)
  const source = `encryption key file ${file}`
  try {
    return { text: readFileSync(file, 'utf8'), source }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
  }
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 })
  const item = newKeyItem(1)
  try {
    writeFileSync(file, `${item}\n`, { mode: 0o600, flag: 'wx' })
    return { text: item, source }
  } catch (error) {
    // Another process (server or CLI) created it first: use theirs.
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return { text: readFileSync(file, 'utf8'), source }
    throw error
  }
}
