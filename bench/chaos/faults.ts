/**
 * The chaos run's faults, on a schedule from the load's start: a node killed with SIGKILL every
 * 30 s (in turn) and started again at once; PostgreSQL stopped the hard way once and Redis
 * killed once, each down for `outageMs` and then started again, half-way between two kills so
 * that no two faults overlap. Each fault is recorded with when it began and when what it took
 * down was back (the node answering /readyz 200, the server taking connections again).
 */
import { sleep, type Postgres, type RedisServer } from './infra.ts'
import type { Cluster } from './nodes.ts'

export interface Fault {
  readonly kind: 'node' | 'postgres' | 'redis'
  /** The node killed, or the server restarted. */
  readonly target: string
  /** Epoch ms: the fault began (the kill, the stop). */
  readonly at: number
  /** Epoch ms: what it took down was back (the node ready, the server taking connections). */
  backAt: number
}

export interface Schedule {
  /** Seconds from the load's start of each kill, of PostgreSQL's stop and of Redis's. */
  readonly kills: readonly number[]
  readonly postgresAt: number
  readonly redisAt: number
  readonly outageMs: number
}

/** schedule: kills every 30 s while the load runs; PostgreSQL at 45% of the run and Redis at 70%, each snapped half-way between two kills. */
export function schedule(seconds: number, outageMs: number): Schedule {
  const kills: number[] = []
  for (let t = 30; t < seconds; t += 30) kills.push(t)
  const between = (share: number) => Math.max(15, Math.floor((seconds * share) / 30) * 30 + 15)
  let postgresAt = between(0.45)
  let redisAt = between(0.7)
  if (redisAt === postgresAt) redisAt += 30
  // A run too short for both: they go where they fit, in order, before the end.
  postgresAt = Math.min(postgresAt, Math.max(5, seconds - 20))
  redisAt = Math.min(redisAt, Math.max(postgresAt + 10, seconds - 10))
  return { kills, postgresAt, redisAt, outageMs }
}

export interface Infrastructure {
  readonly cluster: Cluster
  readonly postgres: Postgres
  readonly redis: RedisServer
}

/** runFaults plays the schedule from `start` (epoch ms); `faults` fills as they happen; `onRedisBack` runs once Redis answers again. */
export async function runFaults(
  infra: Infrastructure,
  plan: Schedule,
  start: number,
  faults: Fault[],
  log: (line: string) => void,
  onRedisBack: (fault: Fault) => Promise<void>,
): Promise<void> {
  const at = (seconds: number) => sleep(Math.max(0, start + seconds * 1000 - Date.now()))
  const kills = plan.kills.map(async (t, i) => {
    await at(t)
    const node = infra.cluster.nodes[i % infra.cluster.nodes.length]!
    // A node still starting from a fault before is left alone (it is out of the rotation already).
    if (!node.up) return log(`${t}s: ${node.name} not up yet, its kill is skipped`)
    const fault: Fault = { kind: 'node', target: node.name, at: Date.now(), backAt: Number.NaN }
    faults.push(fault)
    await infra.cluster.kill(node)
    log(`${t}s: ${node.name} killed (SIGKILL), starting it again`)
    fault.backAt = await infra.cluster.restart(node)
    log(`${node.name} ready again after ${fault.backAt - fault.at} ms`)
  })
  const postgres = (async () => {
    await at(plan.postgresAt)
    const fault: Fault = { kind: 'postgres', target: 'PostgreSQL', at: Date.now(), backAt: Number.NaN }
    faults.push(fault)
    infra.postgres.stop()
    log(`${plan.postgresAt}s: PostgreSQL stopped (immediate), down for ${plan.outageMs} ms`)
    await sleep(plan.outageMs)
    await infra.postgres.start()
    fault.backAt = Date.now()
    log(`PostgreSQL taking connections again, ${fault.backAt - fault.at} ms after its stop`)
  })()
  const redis = (async () => {
    await at(plan.redisAt)
    const fault: Fault = { kind: 'redis', target: 'Redis', at: Date.now(), backAt: Number.NaN }
    faults.push(fault)
    await infra.redis.kill()
    log(`${plan.redisAt}s: Redis killed (SIGKILL), down for ${plan.outageMs} ms`)
    await sleep(plan.outageMs)
    await infra.redis.start()
    fault.backAt = Date.now()
    log(`Redis answering again (its AOF loaded), ${fault.backAt - fault.at} ms after its kill`)
    await onRedisBack(fault)
  })()
  await Promise.all([...kills, postgres, redis])
}
