/**
 * The pepper keys every HMAC the service stores (API key hashes, secret fingerprints).
 * Production sets PEPPER; elsewhere one is generated once into DATA_DIR/pepper (mode 0600)
 * so that `npm start` works with nothing set and the admin CLI hashes keys the same way.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import type { Config } from './config.ts'
import { pepperKey, type Pepper } from '../crypto/keyed.ts'

export function resolvePepper(config: Config): Pepper {
  return pepperKey(pepperText(config))
}

function pepperText(config: Config): string {
  if (config.pepper !== '') return config.pepper
  const file = join(config.dataDir, 'pepper')
  try {
    return readFileSync(file, 'utf8').trim()
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
  }
  mkdirSync(config.dataDir, { recursive: true })
  const pepper = randomBytes(32).toString('base64url')
  try {
    writeFileSync(file, `${pepper}\n`, { mode: 0o600, flag: 'wx' })
    return pepper
  } catch (error) {
    // Another process (server or CLI) created it first: use theirs.
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return readFileSync(file, 'utf8').trim()
    throw error
  }
}
