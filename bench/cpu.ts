/**
 * CPU time of the parts a bench runs against, read from outside them: a process (or one of its
 * threads) from /proc, PostgreSQL's processes on this machine, and Redis's own count (INFO cpu).
 * What capacity is planned from (docs/capacity.md): CPU seconds per unit of work on the node, on
 * PostgreSQL and on Redis, each where it is spent.
 */
import { readdirSync, readFileSync } from 'node:fs'
import type { Redis } from 'ioredis'

/** USER_HZ, the unit of /proc/<pid>/stat's times (100 on Linux). */
const CLOCK_TICKS = 100

/** cpuSeconds: the user and system CPU seconds in a /proc stat file (a process's or a thread's). */
export function cpuSeconds(file: string): number {
  const fields = readFileSync(file, 'utf8').split(') ')[1]!.split(' ')
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS
}

/** processSeconds: a process's CPU seconds, all its threads. */
export const processSeconds = (pid: number): number => cpuSeconds(`/proc/${pid}/stat`)

/** postgresTimes: the CPU seconds of each PostgreSQL process on this machine (the server runs here). */
export function postgresTimes(): Map<string, number> {
  const times = new Map<string, number>()
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue
    try {
      if (readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'postgres') times.set(pid, cpuSeconds(`/proc/${pid}/stat`))
    } catch {
      /* gone meanwhile */
    }
  }
  return times
}

/** postgresSince: PostgreSQL's CPU seconds since `before` (processes that ended meanwhile are not counted; new ones are, whole). */
export function postgresSince(before: Map<string, number>): number {
  let total = 0
  for (const [pid, t] of postgresTimes()) total += t - (before.get(pid) ?? 0)
  return total
}

/** redisSeconds: the Redis server's own CPU seconds so far (its main thread and the rest: used_cpu_user + used_cpu_sys). */
export async function redisSeconds(redis: Redis): Promise<number> {
  const info = await redis.info('cpu')
  const field = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? Number.NaN)
  return field('used_cpu_user') + field('used_cpu_sys')
}
