/**
 * What a store holds at rest, for the tests that look for secrets in it: the SQLite file and
 * its write-ahead log as they are on disk, or a pg_dump of the database and every Redis key of
 * the test's prefix with its value; and every way a secret could be written down.
 */
import { execFile } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { Redis } from 'ioredis'
import { Secret } from 'otpauth'
import type { Running } from './helper.ts'
import type { Created } from './factors.ts'
import { redisUrl } from './services.ts'

const run = promisify(execFile)

/** spellings: every way a secret could be written down (raw bytes, hex either case, base32 either case, base64). */
export function spellings(f: Pick<Created, 'secretKey'>): Buffer[] {
  const raw = Buffer.from(Secret.fromBase32(f.secretKey).bytes)
  return [
    raw,
    raw.toString('hex'),
    raw.toString('hex').toUpperCase(),
    f.secretKey,
    f.secretKey.toLowerCase(),
    raw.toString('base64'),
    raw.toString('base64url'),
  ].map((s) => (typeof s === 'string' ? Buffer.from(s) : s))
}

export async function everything(app: Pick<Running, 'dataDir'>, env: Record<string, string>): Promise<Buffer> {
  if (env.DATABASE_URL === undefined) {
    // The database file and its write-ahead log, as they are on disk.
    return Buffer.concat(
      readdirSync(app.dataDir)
        .filter((n) => n.startsWith('tessera.sqlite'))
        .map((n) => readFileSync(join(app.dataDir, n))),
    )
  }
  const { stdout } = await run('pg_dump', ['--data-only', env.DATABASE_URL], { encoding: 'buffer', maxBuffer: 256 * 1024 * 1024 })
  const redis = new Redis(redisUrl())
  try {
    const parts: Buffer[] = [stdout as unknown as Buffer]
    for (const key of await redis.keys(`${env.REDIS_PREFIX}*`)) {
      parts.push(Buffer.from(key), (await redis.dumpBuffer(key)) ?? Buffer.alloc(0))
    }
    return Buffer.concat(parts)
  } finally {
    redis.disconnect()
  }
}
