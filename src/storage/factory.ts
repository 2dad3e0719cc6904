/**
 * openStore picks the storage adapters from the configuration (one place, at start-up):
 * - accounts, keys, subscriptions, plans, onboarding records and usage counts: PostgreSQL
 *   when DATABASE_URL is set, the embedded SQLite file in DATA_DIR otherwise;
 * - verification state, the shared limiter and the access-change signal: Redis when
 *   REDIS_URL is set; otherwise the verification state stays in the relational store, each
 *   node limits in process, and changes reach other nodes by polling (SQLite) or the key
 *   cache TTL (PostgreSQL).
 */
import { join } from 'node:path'
import type { Config } from '../config/config.ts'
import type { AccessStore, Health, Store } from './ports.ts'
import { openSqliteStore } from './sqlite/store.ts'
import { openPostgresStore } from './postgres/store.ts'
import { openRedisParts, type AccessSignal, type RedisParts } from './redis/store.ts'

export const SQLITE_FILE = 'tessera.sqlite'

export interface StoreHooks {
  /** Errors that belong to no request (a dropped idle connection, a failed signal). */
  readonly onBackgroundError?: (error: Error, what: string) => void
  /** False for short-lived processes (the admin CLI): no background maintenance. */
  readonly maintenance?: boolean
  /** Tests: a PostgreSQL schema and a Redis prefix of their own. */
  readonly postgresSchema?: string
  readonly redisPrefix?: string
  /**
   * The clock of every time the store stamps itself (default Date.now): pass the service's
   * `now`, so that one clock dates audit events, revocations, sessions and what retention
   * prunes. Redis stores no time of its own (verification state is given the caller's time);
   * its limiter keeps to Redis's TIME, one clock for every node sharing a bucket.
   */
  readonly clock?: () => number
}

export async function openStore(config: Config, hooks: StoreHooks = {}): Promise<Store> {
  const report = hooks.onBackgroundError ?? (() => undefined)
  const relational =
    config.databaseUrl === ''
      ? openSqliteStore({
          path: join(config.dataDir, SQLITE_FILE),
          changePollMs: config.keyCachePollMs,
          maintenance: hooks.maintenance ?? true,
          onBackgroundError: (error) => report(error, 'SQLite'),
          ...(hooks.clock === undefined ? {} : { clock: hooks.clock }),
        })
      : await openPostgresStore({
          url: config.databaseUrl,
          poolSize: config.databasePoolSize,
          timeoutMs: config.storeTimeoutMs,
          ...(hooks.postgresSchema === undefined ? {} : { schema: hooks.postgresSchema }),
          onBackgroundError: (error) => report(error, 'PostgreSQL'),
          ...(hooks.clock === undefined ? {} : { clock: hooks.clock }),
        })
  if (config.redisUrl === '') return relational
  let redis: RedisParts
  try {
    redis = await openRedisParts({
      url: config.redisUrl,
      cluster: config.redisCluster,
      prefix: hooks.redisPrefix ?? config.redisPrefix,
      timeoutMs: config.storeTimeoutMs,
      onBackgroundError: (error) => report(error, 'Redis'),
    })
  } catch (error) {
    await relational.close()
    throw error
  }
  return withRedis(relational, redis, report)
}

/** withRedis moves verification state and limits to Redis and signals access changes through it. */
export function withRedis(relational: Store, redis: RedisParts, report: (error: Error, what: string) => void): Store {
  return {
    kind: `${relational.kind}+redis`,
    access: signalled(relational.access, redis.signal, report),
    onboarding: relational.onboarding,
    // A ceremony's challenge is used once within minutes: Redis keeps it (one script each way, no row lock to queue on).
    factors: { ...relational.factors, ...redis.challenges },
    verification: redis.verification,
    usage: relational.usage,
    audit: relational.audit,
    adminTokens: relational.adminTokens,
    portal: relational.portal,
    // Webhooks live in the relational store: the outbox is written with the audit events there.
    webhooks: relational.webhooks,
    // Jobs too: their ends write their events, and so the outbox, in the same transaction.
    jobs: relational.jobs,
    idempotency: relational.idempotency,
    sharedLimiter: redis.limiter,
    gauges: () => ({ ...relational.gauges(), redisConnected: redis.connected() }),
    async health(): Promise<Health> {
      const [own, shared] = await Promise.all([
        relational.health(),
        redis.ping().then(
          () => ({ ok: true, detail: 'ok' }),
          (error: Error) => ({ ok: false, detail: error.message }),
        ),
      ])
      // Without Redis only verifyOTP stops (fail closed): the node stays ready for the rest.
      return { ...own, redis: { ...shared, essential: false } }
    },
    async close() {
      await redis.close()
      await relational.close()
    },
  }
}

/**
 * signalled publishes every change committed through this store to the other nodes: one
 * after-commit hook of the store, so that no change can be left out.
 */
function signalled(access: AccessStore, signal: AccessSignal, report: (error: Error, what: string) => void): AccessStore {
  access.onCommit(() => {
    // The change is committed; if the signal is lost, other nodes see it within the key cache TTL.
    signal.publish().catch((error: Error) => report(error, 'Redis (access-change signal)'))
  })
  return {
    ...access,
    onChange(listener) {
      const offStore = access.onChange(listener)
      const offSignal = signal.subscribe(listener)
      return () => {
        offStore()
        offSignal()
      }
    },
  }
}
