/**
 * The scale-out part of `npm run bench`: getOTP and verifyOTP on one node with SQLite, one
 * node with PostgreSQL + Redis, and two nodes with PostgreSQL + Redis, rounds alternating,
 * medians. Every account has a real plan (a throttle far above the load), so every call
 * also goes through the limiter: in process on SQLite, one Redis script per call otherwise.
 *
 * Placement on a 2-CPU machine: every node on CPU 0 (two nodes share it, so their sum is
 * compared with one node on the same CPU); the load generator, and, when they run on this
 * machine and may be pinned, the PostgreSQL and Redis servers on CPU 1 (their affinity is
 * put back after), so that CPU 0 is the node's alone, as a node's machine would be in a
 * deployment. BENCH_DATABASE_URL (a server to create a scratch database on; default
 * TEST_DATABASE_URL or the local postgres) and BENCH_REDIS_URL.
 */
import { spawnSync, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { Redis } from 'ioredis'
import { HOTP, Secret } from 'otpauth'
import { loadConfig } from '../src/config/config.ts'
import { resolvePepper } from '../src/config/pepper.ts'
import { openStore } from '../src/storage/factory.ts'
import { Accounts } from '../src/services/accounts.ts'
import { isFailure } from '../src/services/outcome.ts'
import { SYSTEM } from '../src/domain/accounts.ts'
import { GROUPS, REGIONS, groupServedIn } from '../src/domain/regions.ts'
import { freePort, median, pinned, run, serve, type Figures, type Load } from './load.ts'
import { waitFor } from './wait.ts'

const PEPPER = randomBytes(24).toString('hex')
const PLAN = { rate: 1e6, burst: 1e6, quota: 0, period: 'month' } as const

async function keyFor(env: Record<string, string>): Promise<string> {
  const config = loadConfig({ NODE_ENV: 'test', PEPPER, ...env })
  const store = await openStore(config)
  try {
    const accounts = new Accounts({ store, pepper: resolvePepper(config), config })
    const ctx = { actor: SYSTEM }
    const account = await accounts.createAccount(ctx, { name: 'bench' })
    if (isFailure(account)) throw new Error(account.message)
    for (const r of REGIONS) for (const g of GROUPS) if (groupServedIn(g, r)) await accounts.setSubscription(ctx, account.id, r, g, 'active')
    await accounts.setPlan(ctx, account.id, PLAN)
    const issued = await accounts.issueKey(ctx, account.id, { name: 'bench' })
    if (isFailure(issued)) throw new Error(issued.message)
    return issued.apiKey
  } finally {
    await store.close()
  }
}

/** Fresh secrets with their current code: every verifyOTP is a first use (the success path, which writes state). */
function verifications(count: number): () => string {
  const counter = Math.floor(Date.now() / 30000)
  const bodies = Array.from({ length: count }, () => {
    const s = new Secret({ size: 20 })
    return `secret=${s.base32}&token=${HOTP.generate({ secret: s, counter })}`
  })
  let i = 0
  return () => bodies[i++ % bodies.length]!
}

/**
 * pinServices moves the local PostgreSQL (its postmaster: new backends inherit) and Redis
 * servers to CPU 1; it returns what puts them back, and what it did, for the table's title.
 */
function pinServices(): { restore: () => void; placement: string } {
  const pids = ['redis-server', 'postgres'].flatMap((name) => {
    const oldest = spawnSync('pgrep', ['-o', '-x', name], { encoding: 'utf8' }).stdout.trim()
    return oldest === '' ? [] : [oldest]
  })
  const before = new Map<string, string>()
  for (const pid of pids) {
    const mask = /: (\S+)$/.exec(spawnSync('taskset', ['-c', '-p', pid], { encoding: 'utf8' }).stdout.trim())?.[1]
    if (mask !== undefined && spawnSync('taskset', ['-a', '-c', '-p', '1', pid], { stdio: 'ignore' }).status === 0) before.set(pid, mask)
  }
  return {
    restore: () => {
      for (const [pid, mask] of before) spawnSync('taskset', ['-a', '-c', '-p', mask, pid], { stdio: 'ignore' })
    },
    placement: before.size === pids.length && pids.length === 2 ? 'PostgreSQL and Redis on CPU 1 too' : 'PostgreSQL and Redis unpinned',
  }
}

export async function scaleBench(seconds: number, rounds: number): Promise<string> {
  const adminUrl = process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'
  const redisUrl = process.env.BENCH_REDIS_URL ?? process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'
  const admin = new pg.Client({ connectionString: adminUrl })
  const probe = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 0 })
  try {
    await admin.connect()
    await probe.connect()
  } catch (error) {
    probe.disconnect()
    await admin.end().catch(() => undefined)
    return `Scale-out bench skipped: PostgreSQL or Redis unreachable (${(error as Error).message}); set BENCH_DATABASE_URL and BENCH_REDIS_URL.\n`
  }
  const db = `tessera_bench_${randomBytes(4).toString('hex')}`
  const prefix = `bench-${randomBytes(4).toString('hex')}:`
  await admin.query(`CREATE DATABASE ${db}`)
  const url = new URL(adminUrl)
  url.pathname = `/${db}`
  const dataDir = mkdtempSync(join(tmpdir(), 'tessera-bench-'))
  const children: ChildProcess[] = []
  const services = pinned ? pinServices() : { restore: () => undefined, placement: 'PostgreSQL and Redis unpinned' }
  try {
    const shared = { DATABASE_URL: url.href, REDIS_URL: redisUrl, REDIS_PREFIX: prefix }
    const sqliteKey = await keyFor({ DATA_DIR: join(dataDir, 'sqlite') })
    const sharedKey = await keyFor({ DATA_DIR: join(dataDir, 'shared'), ...shared })
    const base = { NODE_ENV: 'test', LOG_LEVEL: 'warn', PEPPER }
    const ports = await Promise.all([freePort(), freePort(), freePort()])
    children.push(serve('src/server.ts', { ...base, DATA_DIR: join(dataDir, 'sqlite'), PORT: String(ports[0]) }))
    children.push(serve('src/server.ts', { ...base, DATA_DIR: join(dataDir, 'n1'), PORT: String(ports[1]), ...shared }))
    children.push(serve('src/server.ts', { ...base, DATA_DIR: join(dataDir, 'n2'), PORT: String(ports[2]), ...shared }))
    const [sqliteNode, node1, node2] = ports.map((p) => `http://127.0.0.1:${p}`) as [string, string, string]
    for (const n of [sqliteNode, node1, node2]) await waitFor(`${n}/healthz`)

    const secret = new Secret({ size: 20 }).base32
    const loads = (key: string): [string, () => Load][] => [
      ['getOTP', () => ({ method: 'POST', path: '/totp/getOTP', headers: { 'x-api-key': key }, body: `secret=${secret}` })],
      ['verifyOTP', () => ({ method: 'POST', path: '/totp/verifyOTP', headers: { 'x-api-key': key }, body: verifications(Math.ceil(20_000 * seconds)) })],
    ]
    const configs: [string, (name: number) => Promise<Figures[]>][] = [
      ['1 node, SQLite', (i) => Promise.all([run(sqliteNode, loads(sqliteKey)[i]![1](), seconds)])],
      ['1 node, PostgreSQL + Redis', (i) => Promise.all([run(node1, loads(sharedKey)[i]![1](), seconds)])],
      ['2 nodes, PostgreSQL + Redis', (i) => Promise.all([node1, node2].map((n) => run(n, loads(sharedKey)[i]![1](), seconds, 25)))],
    ]
    const totals = new Map<string, number[]>()
    const errors = new Map<string, number>()
    for (let route = 0; route < 2; route++) {
      for (const [, go] of configs) await go(route) // warm-up, one round each
      for (let r = 0; r < rounds; r++) {
        for (const [name, go] of configs) {
          const figures = await go(route)
          const id = `${name}|${route}`
          totals.set(id, [...(totals.get(id) ?? []), figures.reduce((s, f) => s + f.rps, 0)])
          errors.set(id, (errors.get(id) ?? 0) + figures.reduce((s, f) => s + f.non2xx, 0))
        }
      }
    }
    const m = (name: string, route: number) => median(totals.get(`${name}|${route}`)!)
    const lines = [
      `## Scale-out: getOTP and verifyOTP, ${rounds} rounds of ${seconds} s, 50 connections in all, medians (${pinned ? `nodes pinned to CPU 0, load generator to CPU 1, ${services.placement}` : 'not pinned'})`,
      '',
      '| configuration | getOTP req/s | per node | × SQLite node | verifyOTP req/s | per node | × SQLite node | non-2xx |',
      '| --- | --- | --- | --- | --- | --- | --- | --- |',
    ]
    const ref = [m(configs[0]![0], 0), m(configs[0]![0], 1)]
    for (const [name] of configs) {
      const nodes = name.startsWith('2') ? 2 : 1
      const cells = [0, 1].map((route) => {
        const total = m(name, route)
        return `${total.toFixed(0)} | ${(total / nodes).toFixed(0)} | **${(total / ref[route]!).toFixed(2)}×**`
      })
      lines.push(`| ${name} | ${cells.join(' | ')} | ${(errors.get(`${name}|0`) ?? 0) + (errors.get(`${name}|1`) ?? 0)} |`)
    }
    lines.push(
      '',
      'Two nodes share CPU 0 here, so their sum against one node on the same CPU is the cost of running as two: ' +
        'per-node throughput on a node of its own is the "1 node" row.',
      '',
    )
    return lines.join('\n')
  } finally {
    services.restore()
    for (const c of children) c.kill('SIGTERM')
    await new Promise((r) => setTimeout(r, 500))
    await admin.query(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`).catch(() => undefined)
    await admin.end()
    // The verification state of every call: hundreds of thousands of keys, removed in batches.
    for await (const keys of probe.scanStream({ match: `${prefix}*`, count: 1000 }) as AsyncIterable<string[]>) {
      if (keys.length > 0) await probe.unlink(...keys)
    }
    probe.disconnect()
    rmSync(dataDir, { recursive: true, force: true })
  }
}
