/**
 * The external services the PostgreSQL and Redis suites need: TEST_DATABASE_URL and
 * TEST_REDIS_URL. Unset, those suites skip with a visible notice, except when
 * TESSERA_REQUIRE_SERVICES=1 (as .ci/run sets it): then a missing service fails the run.
 * Each store gets a schema (PostgreSQL) and a key prefix (Redis) of its own, dropped after.
 */
import { test } from 'node:test'
import { randomBytes } from 'node:crypto'
import { spawnSync } from 'node:child_process'
import pg from 'pg'
import { Redis } from 'ioredis'
import { openPostgresStore } from '../../src/storage/postgres/store.ts'
import { openRedisParts, type RedisParts, type RedisStoreOptions } from '../../src/storage/redis/store.ts'
import { openSqliteStore } from '../../src/storage/sqlite/store.ts'
import { withRedis } from '../../src/storage/factory.ts'
import type { Store } from '../../src/storage/ports.ts'

export type Service = 'TEST_DATABASE_URL' | 'TEST_REDIS_URL'

const required = process.env.TESSERA_REQUIRE_SERVICES === '1'

/**
 * skipUnless gives the `skip` option for a test that needs `services`: false when they are
 * set; a notice naming the variables when not. When they are required, a test is added that
 * fails, naming what is missing.
 */
export function skipUnless(...services: Service[]): false | string {
  const missing = services.filter((s) => !process.env[s])
  if (missing.length === 0) return false
  const notice = `needs ${missing.join(' and ')} (e.g. postgres://postgres@127.0.0.1:5432/tessera_test, redis://127.0.0.1:6379)`
  if (required) {
    test(`required services are configured: ${missing.join(', ')}`, () => {
      throw new Error(`TESSERA_REQUIRE_SERVICES=1 but ${notice}`)
    })
  } else {
    process.stderr.write(`# SKIPPED: ${notice}\n`)
  }
  return notice
}

/**
 * toolSkip gives the `skip` option for a test that needs the command `tool` (a Debian package's
 * program that .ci/run installs): false when `tool --version` (or `versionArgs`) runs; else a notice, and under
 * TESSERA_REQUIRE_SERVICES=1 a test that fails naming the package.
 */
export function toolSkip(tool: string, debianPackage: string, versionArgs: readonly string[] = ['--version']): false | string {
  if (spawnSync(tool, versionArgs).status === 0) return false
  const notice = `needs ${tool} (apt-get install ${debianPackage})`
  if (required) {
    test(`required: ${tool} is installed`, () => {
      throw new Error(`TESSERA_REQUIRE_SERVICES=1 but ${notice}`)
    })
  } else process.stderr.write(`# SKIPPED: ${notice}\n`)
  return notice
}

export const databaseUrl = () => process.env.TEST_DATABASE_URL!
export const redisUrl = () => process.env.TEST_REDIS_URL!

export const uniqueName = (prefix: string) => `${prefix}_${randomBytes(5).toString('hex')}`

/** dropSchema removes a test schema and all in it. */
export async function dropSchema(schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl() })
  await client.connect()
  try {
    await client.query(`DROP SCHEMA IF EXISTS ${pg.escapeIdentifier(schema)} CASCADE`)
  } finally {
    await client.end()
  }
}

/** dropPrefix deletes every Redis key under a test prefix. */
export async function dropPrefix(prefix: string): Promise<void> {
  const redis = new Redis(redisUrl())
  try {
    const keys = await redis.keys(`${prefix}*`)
    if (keys.length > 0) await redis.del(...keys)
  } finally {
    redis.disconnect()
  }
}

/** openTestPostgres opens a PostgreSQL store in a fresh schema, dropped when the store closes (stamping by `clock`, if given). */
export async function openTestPostgres(schema = uniqueName('t'), clock?: () => number): Promise<Store> {
  const store = await openPostgresStore({ url: databaseUrl(), schema, timeoutMs: 5000, ...(clock === undefined ? {} : { clock }) })
  return {
    ...store,
    close: async () => {
      await store.close()
      await dropSchema(schema)
    },
  }
}

/** openTestRedis opens the Redis parts under a fresh prefix, deleted when they close. */
export async function openTestRedis(options: Partial<RedisStoreOptions> = {}): Promise<RedisParts> {
  const prefix = options.prefix ?? `${uniqueName('t')}:`
  const parts = await openRedisParts({ url: redisUrl(), ...options, prefix })
  return {
    ...parts,
    close: async () => {
      await parts.close()
      await dropPrefix(prefix)
    },
  }
}

/** The store combinations the contract suite runs on, beside plain SQLite. */
export async function openSqliteWithRedis(clock?: () => number): Promise<Store> {
  return withRedis(openSqliteStore({ path: ':memory:', ...(clock === undefined ? {} : { clock }) }), await openTestRedis(), () => undefined)
}

export async function openPostgresWithRedis(clock?: () => number): Promise<Store> {
  return withRedis(await openTestPostgres(undefined, clock), await openTestRedis(), () => undefined)
}

/** createDatabase makes a fresh database on the TEST_DATABASE_URL server; it is dropped after the test. */
export async function createDatabase(t: { after(fn: () => Promise<void>): void }): Promise<string> {
  const name = uniqueName('tessera_t')
  const admin = new pg.Client({ connectionString: databaseUrl() })
  await admin.connect()
  await admin.query(`CREATE DATABASE ${name}`)
  await admin.end()
  t.after(async () => {
    const c = new pg.Client({ connectionString: databaseUrl() })
    await c.connect()
    await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
    await c.end()
  })
  const url = new URL(databaseUrl())
  url.pathname = `/${name}`
  return url.href
}

/** StoreEnv: the settings that put a test app on a store (the embedded one: none). */
export type StoreEnv = (t: { after(fn: () => Promise<void>): void }) => Promise<Record<string, string>>

/** redisEnv: Redis settings with a prefix of the test's own, dropped after it. */
export async function redisEnv(t: { after(fn: () => Promise<void>): void }): Promise<Record<string, string>> {
  const prefix = `${uniqueName('t')}:`
  t.after(() => dropPrefix(prefix))
  return { REDIS_URL: redisUrl(), REDIS_PREFIX: prefix }
}
