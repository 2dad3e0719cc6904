/**
 * The TOTP routes as the A/B bench (ab.ts) and its guard (guard.ts) drive them, and the
 * scratch PostgreSQL databases and Redis databases they run on with BENCH_STORE=pg.
 */
import { randomBytes } from 'node:crypto'
import { HOTP, Secret } from 'otpauth'
import pg from 'pg'
import { Redis } from 'ioredis'
import type { Load } from './load.ts'

export type RouteName = 'ping' | 'getOTP' | 'verifyOTP' | 'onboardUser'

export interface Route {
  readonly method: Load['method']
  readonly path: string
  /**
   * bodies(seconds) is called once a round and gives a maker of each server's body for it
   * (undefined for a GET): a fixed form, or one made per request where each request must be
   * new (a verification takes the success path, and writes, only on a secret's first use).
   */
  readonly bodies?: (seconds: number) => () => NonNullable<Load['body']>
}

/**
 * The most verifications a server could answer in a second here, with room: each needs a secret of its own. A round's requests got only
 * half the bodies made (37 500 answered 200 of 3 × 25 000, the rest replays: autocannon draws two per request), so at 25 000 a server
 * past 12 500/s (seen: 14 000) ran out of fresh ones and was answered 400 OTP_REUSED, which the guard took for failures.
 */
const VERIFY_RATE = 60_000

export const ROUTES: Readonly<Record<RouteName, Route>> = {
  ping: { method: 'GET', path: '/totp/ping' },
  getOTP: { method: 'POST', path: '/totp/getOTP', bodies: () => () => `secret=${'JBSWY3DPEHPK3PXP'.repeat(2)}` },
  verifyOTP: {
    method: 'POST',
    path: '/totp/verifyOTP',
    bodies: (seconds) => {
      const step = Math.floor(Date.now() / 30_000)
      const all: string[] = []
      // otpauth, the tests' reference implementation, makes the codes: the bench does not feed the server its own.
      for (let i = 0; i < VERIFY_RATE * seconds; i++) {
        const secret = new Secret({ size: 20 })
        all.push(`secret=${secret.base32}&token=${HOTP.generate({ secret, counter: step })}`)
      }
      return () => {
        let i = 0
        return () => all[i++ % all.length]!
      }
    },
  },
  onboardUser: {
    method: 'POST',
    path: '/totp/onboardUser',
    bodies: () => () => {
      const run = randomBytes(4).toString('hex')
      let i = 0
      return () => `userID=user-${run}-${i++}%40example.com&applicationID=Bench%20App`
    },
  },
}

/**
 * scratch makes one empty PostgreSQL database and one empty Redis database for each name
 * (Redis databases 1, 2, …) and gives their URLs.
 */
export async function scratch(names: readonly string[]): Promise<{ database: string; redis: string }[]> {
  const admin = process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'
  const redisUrl = process.env.BENCH_REDIS_URL ?? process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'
  const client = new pg.Client({ connectionString: admin })
  await client.connect()
  const out: { database: string; redis: string }[] = []
  for (const [i, name] of names.entries()) {
    await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
    await client.query(`CREATE DATABASE ${name}`)
    const database = new URL(admin)
    database.pathname = `/${name}`
    const redis = new URL(redisUrl)
    redis.pathname = `/${i + 1}`
    const r = new Redis(redis.href)
    await r.flushdb()
    r.disconnect()
    out.push({ database: database.href, redis: redis.href })
  }
  await client.end()
  return out
}
