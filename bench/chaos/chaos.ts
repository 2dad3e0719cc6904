/**
 * `npm run chaos`: three nodes on a PostgreSQL and a Redis of the run's own, under a mixed load
 * (stateless and managed TOTP verification, passkey sign-ins, synchronous conversions, jobs with
 * their events at a real receiver, portal sign-ins), while a node is killed with SIGKILL every
 * 30 s and started again, PostgreSQL is restarted once and Redis (AOF) once. Then the jobs are
 * let finish, and the verdict: each check passes or the run exits 1 naming it. Minutes long;
 * not part of `npm test` or CI. See docs/performance.md ("Chaos run").
 *
 * CHAOS_SECONDS (240) the load's length; CHAOS_OUTAGE_MS (5000) how long PostgreSQL and Redis
 * stay down; CHAOS_DRAIN_SECONDS (180) the most the jobs are waited for after the load;
 * CHAOS_GRACE_MS (10000) how long after PostgreSQL or Redis is back a 503 is still taken; CHAOS_REDIS_FSYNC
 * (always, as compose.cluster.yaml runs Redis; everysec to see what a crash can lose under it) its appendfsync.
 */
import { randomBytes } from 'node:crypto'
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import { loadConfig } from '../../src/config/config.ts'
import { utcDay } from '../../src/usage/windows.ts'
import { Recorder } from './client.ts'
import { runFaults, schedule, type Fault } from './faults.ts'
import { scratch, sleep, startPostgres, startRedis, type Postgres, type RedisServer } from './infra.ts'
import { newLedger, replayRecent, runLoads } from './loads.ts'
import { Cluster } from './nodes.ts'
import { provision, type Provisioned } from './provision.ts'
import { printReport, recoveries, totals } from './report.ts'
import { usage, verdict, type Inputs, type JobEnd, type Limits } from './verdict.ts'

const SECONDS = Number(process.env.CHAOS_SECONDS ?? 240)
const OUTAGE_MS = Number(process.env.CHAOS_OUTAGE_MS ?? 5000)
const DRAIN_SECONDS = Number(process.env.CHAOS_DRAIN_SECONDS ?? 180)
const GRACE_MS = Number(process.env.CHAOS_GRACE_MS ?? 10_000)
const NODES = 3

const log = (line: string) => process.stdout.write(`# ${line}\n`)

let cleanup: () => Promise<void> = async () => undefined
let cleaning = false
async function cleanUpOnce(): Promise<void> {
  if (cleaning) return
  cleaning = true
  await cleanup().catch((error: unknown) => log(`cleanup: ${(error as Error).message}`))
}
process.once('uncaughtException', (error) => {
  process.stdout.write(`FAIL the run itself: ${error.stack}\n`)
  void cleanUpOnce().then(() => process.exit(1))
})
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    log(`${signal}: stopping, cleaning up`)
    void cleanUpOnce().then(() => process.exit(130))
  })
}

async function main(): Promise<number> {
  const work = scratch()
  let postgres: Postgres | null = null
  let redis: RedisServer | null = null
  let cluster: Cluster | null = null
  let provisioned: Provisioned | null = null
  cleanup = async () => {
    cluster?.killAll()
    await provisioned?.close()
    postgres?.remove()
    await redis?.remove()
    work.remove()
  }
  log(`chaos run: ${SECONDS} s of load on ${NODES} nodes, scratch folder ${work.dir}`)
  postgres = await startPostgres(work.dir)
  redis = await startRedis(work.dir)
  const admin = new pg.Client({ connectionString: postgres.url })
  await admin.connect()
  await admin.query('CREATE DATABASE tessera')
  await admin.end()
  // One deployment's settings, the same on every node: production, with its own pepper and key ring.
  const env: Record<string, string> = {
    NODE_ENV: 'production',
    PEPPER: randomBytes(36).toString('base64'),
    ENCRYPTION_KEYS: `1:${randomBytes(32).toString('base64')}`,
    DATABASE_URL: postgres.url.replace(/\/postgres$/, '/tessera'),
    REDIS_URL: redis.url,
    SIGNUP_MODE: 'closed',
    // The run's receiver is on loopback.
    WEBHOOK_ALLOW_PRIVATE: 'true',
    CONVERTER_WORKERS: '2',
  }
  const config = loadConfig({ ...env, DATA_DIR: work.dir })
  const limits: Limits = {
    usageFlushMs: config.usageFlushMs,
    otpMaxFailures: config.otpMaxFailures,
    otpLockBaseSeconds: config.otpLockBaseSeconds,
    otpLockMaxSeconds: config.otpLockMaxSeconds,
    factorUserLimit: config.factorUserLimit,
    factorWindowSeconds: config.factorLimitWindowSeconds,
    graceMs: GRACE_MS,
  }
  cluster = new Cluster(env, work.dir)
  await cluster.start(NODES)
  log(`nodes ready: ${cluster.nodes.map((n) => `${n.name} ${n.url}`).join(', ')}`)
  provisioned = await provision(env, work.dir, cluster, {
    managedUsers: Number(process.env.CHAOS_MANAGED_USERS ?? 300),
    passkeyUsers: Number(process.env.CHAOS_PASSKEY_USERS ?? 40),
    portalUsers: 4,
  })
  const p = provisioned
  log(
    `provisioned: an account, ${p.managed.length} managed TOTP users, ${p.passkeys.length} passkey users, ${p.portal.length} portal users, a webhook receiver`,
  )

  // What provisioning cost (factors enrolled, passkeys registered) is counted too: the run's share is what comes after.
  await sleep(limits.usageFlushMs * 2 + 1000)
  const firstDay = utcDay(Date.now())
  const baseline = await usageCount(cluster, p, firstDay)
  const rec = new Recorder()
  const ledger = newLedger()
  const faults: Fault[] = []
  const plan = schedule(SECONDS, OUTAGE_MS)
  const start = Date.now()
  log(`load for ${SECONDS} s; kills at ${plan.kills.join(', ')} s; PostgreSQL at ${plan.postgresAt} s, Redis at ${plan.redisAt} s, each down ${OUTAGE_MS} ms`)
  const progress = setInterval(() => log(`${Math.round((Date.now() - start) / 1000)} s: ${rec.calls.length} calls`), 30_000)
  const ctx = { cluster, rec, p, ledger, until: start + SECONDS * 1000 }
  await Promise.all([runLoads(ctx), runFaults({ cluster, postgres, redis }, plan, start, faults, log, (fault) => replayRecent(ctx, fault.at))])
  clearInterval(progress)
  log(`load over: ${rec.calls.length} calls in ${((Date.now() - start) / 1000).toFixed(0)} s; waiting for the jobs (at most ${DRAIN_SECONDS} s)`)

  const jobIds = [...new Set([...ledger.jobs.values()].flatMap((j) => [...j.ids]))]
  const heard = () => new Set(p.receiver.deliveries.map((d) => d.payload?.data.jobID).filter((id) => typeof id === 'string'))
  const drainEnd = Date.now() + DRAIN_SECONDS * 1000
  while (Date.now() < drainEnd && !jobIds.every((id) => heard().has(id))) await sleep(1000)
  // Redeliveries of an event come within a few seconds: wait for them too.
  await sleep(5000)
  const jobEnds = new Map<string, JobEnd | null>()
  for (const id of jobIds) {
    const node = cluster.pick()!
    const got = await rec.call({ loop: 'drain', op: 'job status', node, path: `/converter/jobs/${id}`, headers: { 'x-api-key': p.key } })
    const body = got?.status === 200 ? (JSON.parse(got.body.toString('utf8')) as { status: string; result: { size: number } | null }) : null
    jobEnds.set(id, body === null ? null : { id, status: body.status, resultSize: body.result?.size ?? null })
  }
  // Every count reaches the store within the flush interval: wait two, then ask the admin API.
  await sleep(limits.usageFlushMs * 2 + 1000)
  const usageReported = (await usageCount(cluster, p, firstDay)) - baseline
  const shutdownCodes = await cluster.stopAll()
  const logErrors = errorLines(cluster)
  const logs = keepLogs(cluster)
  log(`the nodes' logs (never a key, secret or code): ${logs}`)

  const inputs: Inputs = {
    calls: rec.calls,
    ledger,
    faults,
    deliveries: p.receiver.deliveries,
    jobEnds,
    usageReported,
    crashes: cluster.nodes.flatMap((n) => n.crashes),
    shutdownCodes,
    limits,
  }
  const checks = verdict(inputs)
  const u = usage(inputs)
  const r = recoveries(rec.calls, faults, start)
  const t = totals(rec.calls)
  const figures = {
    seconds: SECONDS,
    outageMs: OUTAGE_MS,
    calls: rec.calls.length,
    faults: r,
    usage: { reported: usageReported, lower: u.lower, upper: u.upper, allowance: u.allowance },
    jobs: jobIds.length,
    deliveries: p.receiver.deliveries.length,
    accepted: {
      stateless: ledger.accepted.stateless.size,
      managed: ledger.accepted.managed.size,
      passkey: ledger.accepted.passkey.size,
    },
    replaysAfterRedisRestart: { sent: ledger.afterRestart.sent, accepted: ledger.afterRestart.accepted },
    replaysAccepted: {
      stateless: ledger.replays.stateless.accepted,
      managed: ledger.replays.managed.accepted,
      passkey: ledger.replays.passkey.accepted,
    },
    nodeLogErrors: logErrors.count,
    checks: checks.map((c) => ({ name: c.name, ok: c.ok })),
    passed: checks.every((c) => c.ok),
  }
  printReport((line) => process.stdout.write(`${line}\n`), t, r, checks, figures)
  if (logErrors.count > 0) log(`the nodes logged ${logErrors.count} errors besides documented 503s; the first: ${logErrors.first.join(' | ')}`)
  const failedChecks = checks.filter((c) => !c.ok)
  for (const c of failedChecks) process.stdout.write(`FAIL ${c.name}: ${c.detail}\n`)
  log(failedChecks.length === 0 ? 'chaos run passed' : `chaos run FAILED: ${failedChecks.length} of ${checks.length} checks`)
  return failedChecks.length === 0 ? 0 : 1
}

/** usageCount: the load account's admitted calls from `firstDay` to today, as the admin API reports them. */
async function usageCount(cluster: Cluster, p: Provisioned, firstDay: string): Promise<number> {
  const node = cluster.nodes[0]!
  const report = await fetch(`${node.adminUrl}/admin/v1/accounts/${p.accountId}/usage?from=${firstDay}&to=${utcDay(Date.now())}&by=day`, {
    headers: { authorization: `Bearer ${p.adminToken}` },
  })
  if (report.status !== 200) throw new Error(`usage report: ${report.status} ${await report.text()}`)
  return ((await report.json()) as { items: { count: number }[] }).items.reduce((n, x) => n + x.count, 0)
}

/** keepLogs writes every node process's output to a folder that outlives the run (CHAOS_LOGS, or a new one in the temporary folder). */
function keepLogs(cluster: Cluster): string {
  const dir = process.env.CHAOS_LOGS ?? mkdtempSync(join(tmpdir(), 'tessera-chaos-logs-'))
  mkdirSync(dir, { recursive: true })
  for (const node of cluster.nodes) {
    for (const [i, proc] of node.history.entries()) writeFileSync(join(dir, `${node.name}.${i}.log`), proc.output() + proc.errors())
  }
  return dir
}

/** errorLines: the nodes' log lines at error and above, but those of a documented 503 (a store away); messages only, never bodies. */
function errorLines(cluster: Cluster): { count: number; first: string[] } {
  const first: string[] = []
  let count = 0
  for (const node of cluster.nodes) {
    for (const proc of node.history) {
      for (const line of proc.output().split('\n')) {
        const level = Number(/^\{"level":(\d+)/.exec(line)?.[1] ?? 0)
        // A store away is logged with its cause as the request's 503 goes out (`request failed`); any other error line counts.
        if (level < 50 || (/"type":"UnavailableError"/.test(line) && /"msg":"request failed"/.test(line))) continue
        count++
        if (first.length < 5) first.push(`${node.name}: ${/"msg":"([^"]*)"/.exec(line)?.[1] ?? line.slice(0, 200)}`)
      }
    }
  }
  return { count, first }
}

let code = 1
try {
  code = await main()
} catch (error) {
  process.stdout.write(`FAIL the run itself: ${(error as Error).stack}\n`)
} finally {
  await cleanUpOnce()
}
process.exit(code)
