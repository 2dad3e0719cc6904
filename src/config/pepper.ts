/**
 * The pepper keys every HMAC the service stores (API key hashes, secret fingerprints).
 * Production sets PEPPER; elsewhere one is generated once into DATA_DIR/pepper (mode 0600,
 * in a DATA_DIR created 0700) so that `npm start` works with nothing set and the admin CLI
 * hashes keys the same way. A pepper file is held to the same rule as PEPPER.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { ConfigError, MIN_PEPPER_LENGTH, type Config } from './config.ts'
import { pepperKey, type Pepper } from '../crypto/keyed.ts'

export function resolvePepper(config: Config): Pepper {
  return pepperKey(pepperText(config))
}

function pepperText(config: Config): string {
  if (config.pepper !== '') return config.pepper
  const file = join(config.dataDir, 'pepper')
  try {
    return checked(file, readFileSync(file, 'utf8'))
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
  }
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 })
  const pepper = randomBytes(32).toString('base64url')
  try {
    writeFileSync(file, `${pepper}\n`, { mode: 0o600, flag: 'wx' })
    return pepper
  } catch (error) {
    // Another process (server or CLI) created it first: use theirs.
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return checked(file, readFileSync(file, 'utf8'))
    throw error
  }
}

/** checked gives the pepper in a file, or throws ConfigError naming the file when it is too short (an empty file would key every HMAC with nothing). */
function checked(file: string, content: string): string {
  const pepper = content.trim()
  if (pepper.length < MIN_PEPPER_LENGTH) {
    throw new ConfigError(
      `Invalid pepper file ${file}: it must hold at least ${MIN_PEPPER_LENGTH} characters, like PEPPER (it holds ${pepper.length}). Put a strong secret in it, or remove it to have one generated (every API key would then have to be issued again).`,
    )
  }
  return pepper
}
