/**
 * onEachStore runs a bench on every store it can reach: the embedded SQLite in a scratch
 * folder, then PostgreSQL in a scratch database on BENCH_DATABASE_URL (or TEST_DATABASE_URL),
 * dropped after; it prints each store's table as it is done, and says so when PostgreSQL is
 * skipped.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { randomBytes } from 'node:crypto'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import { Redis } from 'ioredis'

export type StoreName = 'SQLite' | 'PostgreSQL'

export async function onEachStore(what: string, run: (name: StoreName, env: Record<string, string>, dataDir: string) => Promise<string>): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), `tessera-bench-${what}-`))
  try {
    process.stdout.write(`${await run('SQLite', { DATA_DIR: dataDir }, dataDir)}\n`)
  } finally {
    rmSync(dataDir, { recursive: true, force: true })
  }
  const adminUrl = process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL
  if (adminUrl === undefined || adminUrl === '') {
    process.stdout.write(
      `The ${what} bench on PostgreSQL skipped: set BENCH_DATABASE_URL (or TEST_DATABASE_URL) to a server to create a scratch database on.\n\n`,
    )
    return
  }
  const admin = new pg.Client({ connectionString: adminUrl })
  await admin.connect()
  const db = `tessera_bench_${what}_${randomBytes(4).toString('hex')}`
  await admin.query(`CREATE DATABASE ${db}`)
  const url = new URL(adminUrl)
  url.pathname = `/${db}`
  const pgDir = mkdtempSync(join(tmpdir(), `tessera-bench-${what}-`))
  try {
    process.stdout.write(`${await run('PostgreSQL', { DATA_DIR: pgDir, DATABASE_URL: url.href }, pgDir)}\n`)
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`).catch(() => undefined)
    await admin.end()
    rmSync(pgDir, { recursive: true, force: true })
  }
}

/**
 * onPostgresWithRedis runs a bench on PostgreSQL + Redis (a scratch database on
 * BENCH_DATABASE_URL or TEST_DATABASE_URL, a key prefix of its own on BENCH_REDIS_URL or
 * TEST_REDIS_URL, both dropped after), printing its table, or says it is skipped.
 */
export async function onPostgresWithRedis(what: string, run: (env: Record<string, string>) => Promise<string>): Promise<void> {
  const dbUrl = process.env.BENCH_DATABASE_URL || process.env.TEST_DATABASE_URL
  const redisUrl = process.env.BENCH_REDIS_URL || process.env.TEST_REDIS_URL
  if (!dbUrl || !redisUrl) {
    process.stdout.write(`The ${what} bench on PostgreSQL + Redis skipped: set BENCH_DATABASE_URL and BENCH_REDIS_URL (or the TEST_ ones).\n\n`)
    return
  }
  const admin = new pg.Client({ connectionString: dbUrl })
  await admin.connect()
  const db = `tessera_bench_${what}_${randomBytes(4).toString('hex')}`
  await admin.query(`CREATE DATABASE ${db}`)
  const url = new URL(dbUrl)
  url.pathname = `/${db}`
  const prefix = `tessera-bench-${what}-${randomBytes(4).toString('hex')}:`
  const pgDir = mkdtempSync(join(tmpdir(), `tessera-bench-${what}-`))
  try {
    process.stdout.write(`${await run({ DATA_DIR: pgDir, DATABASE_URL: url.href, REDIS_URL: redisUrl, REDIS_PREFIX: prefix })}\n`)
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`).catch(() => undefined)
    await admin.end()
    const redis = new Redis(redisUrl)
    const keys = await redis.keys(`${prefix}*`)
    // In slices: a bench leaves a key per secret it verified, more than one call's arguments can hold.
    for (let i = 0; i < keys.length; i += 1000) await redis.del(...keys.slice(i, i + 1000))
    redis.disconnect()
    rmSync(pgDir, { recursive: true, force: true })
  }
}
