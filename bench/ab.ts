/**
 * A/B of the TOTP hot path: this tree against another checkout of the project (a baseline
 * commit, with its own node_modules), each beside two baselines measured in the same rounds:
 * the bare route (bench/bare-server.ts: same request, same bytes back, no work) and the
 * DIY service (bench/diy-server.ts: the routes as a developer would write them without us).
 * Rounds are interleaved and their order rotates (this machine's speed drifts within
 * minutes): every ratio is taken within a round, then the median of the rounds is printed.
 *
 *   git worktree add --detach ../baseline <commit> && (cd ../baseline && npm ci)
 *   BENCH_BASELINE=../baseline node bench/ab.ts
 *
 * Both servers run their demo account with no throttle (PLAN_RATE=0), on the embedded store,
 * or with BENCH_STORE=pg on PostgreSQL and Redis: a scratch database for each
 * (tessera_ab_before, tessera_ab_now, dropped and made again on BENCH_DATABASE_URL, default
 * TEST_DATABASE_URL or the local server) and a Redis database each (1 and 2 on
 * BENCH_REDIS_URL, default TEST_REDIS_URL or the local server; flushed first).
 * BENCH_SECONDS (default 2), BENCH_ROUNDS (default 9) and BENCH_ROUTES (default
 * ping,getOTP,verifyOTP,onboardUser) set what a run does.
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { FOUR_ORDERS, freePort, median, pinned, run, withQuartiles, type Load } from './load.ts'
import { demoServer, waitFor } from './wait.ts'
import { ROUTES, scratch, type RouteName } from './routes.ts'

const SECONDS = Number(process.env.BENCH_SECONDS ?? 2)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 9)
const BASELINE = process.env.BENCH_BASELINE
const PG = process.env.BENCH_STORE === 'pg'
const WANTED = (process.env.BENCH_ROUTES ?? 'ping,getOTP,verifyOTP,onboardUser').split(',') as RouteName[]
if (BASELINE === undefined || BASELINE === '') {
  process.stderr.write('BENCH_BASELINE must name a checkout of the baseline commit (see the comment at the top)\n')
  process.exit(2)
}
for (const r of WANTED) if (!(r in ROUTES)) throw new Error(`BENCH_ROUTES: no route ${r} (${Object.keys(ROUTES).join(', ')})`)

/** onCpu0 spawns a server on CPU 0 when the load generator could be pinned to CPU 1 (bench/load.ts). */
function onCpu0(script: string, env: Record<string, string>, stdout: 'pipe' | 'ignore') {
  const [cmd, args] = pinned ? ['taskset', ['-c', '0', process.execPath, script]] : [process.execPath, [script]]
  const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', stdout, 'inherit'] })
  process.on('exit', () => child.kill('SIGKILL'))
  return child
}
interface Server {
  readonly url: string
  readonly key: string
  readonly pid: number
}
async function start(script: string, env: Record<string, string>): Promise<Server> {
  const port = await freePort()
  const child = onCpu0(script, { PORT: String(port), ...env }, 'pipe')
  return { ...(await demoServer(child, port)), pid: child.pid! }
}
/** cpuOf: the CPU time a process has used so far (all its threads, user and system), in µs (taskset execs the server: same pid). */
function cpuOf(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  return (Number(fields[11]) + Number(fields[12])) * (1e6 / 100)
}
const stores = PG ? await scratch(['tessera_ab_before', 'tessera_ab_now']) : null
const env = (i: number) => ({
  DATA_DIR: mkdtempSync(join(tmpdir(), 'ab-')),
  NODE_ENV: 'development',
  PLAN_RATE: '0',
  LOG_LEVEL: 'warn',
  ADMIN_LISTEN: 'off',
  ...(stores === null ? {} : { DATABASE_URL: stores[i]!.database, REDIS_URL: stores[i]!.redis }),
})
const before = await start(resolve(BASELINE, 'src/server.ts'), env(0))
const now = await start(new URL('../src/server.ts', import.meta.url).pathname, env(1))
const barePort = await freePort()
const bareChild = onCpu0(new URL('./bare-server.ts', import.meta.url).pathname, { PORT: String(barePort) }, 'ignore')
const diyPort = await freePort()
const diyChild = onCpu0(new URL('./diy-server.ts', import.meta.url).pathname, { PORT: String(diyPort), DIY_KEY: 'diy' }, 'ignore')
const bare = `http://127.0.0.1:${barePort}`
const diy = `http://127.0.0.1:${diyPort}`
await waitFor(`${bare}/bare/10`)
const pids = [before.pid, now.pid, bareChild.pid!, diyChild.pid!]

const NAMES = ['before', 'now', 'bare', 'diy'] as const
const summary: string[] = []
const cpuSummary: string[] = []
console.log(`${PG ? 'PostgreSQL + Redis' : 'SQLite'}; ${ROUNDS} rounds of ${SECONDS} s; ${pinned ? 'servers on CPU 0, load on CPU 1' : 'not pinned'}`)
for (const name of WANTED) {
  const route = ROUTES[name]
  // The four take the same load, each with its own key; the bare route answers as many bytes as the real one.
  const sample = route.bodies?.(1)()
  const answer = await fetch(now.url + route.path, {
    method: route.method,
    headers: { 'x-api-key': now.key, ...(sample === undefined ? {} : { 'content-type': 'application/x-www-form-urlencoded' }) },
    ...(sample === undefined ? {} : { body: typeof sample === 'function' ? sample() : sample }),
  })
  const size = (await answer.arrayBuffer()).byteLength
  const loadsFor = (): Load[] => {
    const bodies = route.bodies?.(SECONDS)
    const body = () => (bodies === undefined ? {} : { body: bodies() })
    return [
      { method: route.method, path: route.path, headers: { 'x-api-key': before.key }, ...body() },
      { method: route.method, path: route.path, headers: { 'x-api-key': now.key }, ...body() },
      { method: route.method, path: `/bare/${size}`, ...body() },
      { method: route.method, path: route.path, headers: { 'x-api-key': 'diy' }, ...body() },
    ]
  }
  const urls = [before.url, now.url, bare, diy]
  const warm = loadsFor()
  for (let i = 0; i < 4; i++) {
    const f = await run(urls[i]!, warm[i]!, 1)
    if (f.non2xx > 0) throw new Error(`${name} on ${NAMES[i]}: ${f.non2xx} answers not 2xx`)
  }
  const ratios = { nowBefore: [] as number[], beforeBare: [] as number[], nowBare: [] as number[], beforeDiy: [] as number[], nowDiy: [] as number[] }
  const cpu = { before: [] as number[], now: [] as number[], bare: [] as number[], diy: [] as number[], nowBefore: [] as number[] }
  for (let r = 0; r < ROUNDS; r++) {
    const rps = [0, 0, 0, 0]
    const us = [0, 0, 0, 0]
    const loads = loadsFor()
    let errors = 0
    for (const i of FOUR_ORDERS[r % FOUR_ORDERS.length]!) {
      const c0 = cpuOf(pids[i]!)
      const f = await run(urls[i]!, loads[i]!, SECONDS)
      us[i] = (cpuOf(pids[i]!) - c0) / f.total
      rps[i] = f.rps
      errors += f.non2xx
    }
    cpu.before.push(us[0]!)
    cpu.now.push(us[1]!)
    cpu.bare.push(us[2]!)
    cpu.diy.push(us[3]!)
    cpu.nowBefore.push(us[0]! / us[1]!)
    const [b, n, x, d] = rps as [number, number, number, number]
    ratios.nowBefore.push(n / b)
    ratios.beforeBare.push(b / x)
    ratios.nowBare.push(n / x)
    ratios.beforeDiy.push(b / d)
    ratios.nowDiy.push(n / d)
    console.log(
      `${name} round ${r}: before ${b.toFixed(0)}, now ${n.toFixed(0)}, bare ${x.toFixed(0)}, diy ${d.toFixed(0)} req/s; ` +
        `server CPU per request ${us.map((u) => u.toFixed(1)).join(', ')} µs${errors > 0 ? `; ${errors} not 2xx` : ''}`,
    )
  }
  const line = `| ${name} | ${withQuartiles(ratios.nowBefore)} | ${withQuartiles(ratios.beforeBare)} | ${withQuartiles(ratios.nowBare)} | ${withQuartiles(ratios.beforeDiy)} | ${withQuartiles(ratios.nowDiy)} |`
  summary.push(line)
  const m = (xs: number[]) => median(xs).toFixed(1)
  cpuSummary.push(`| ${name} | ${m(cpu.before)} | ${m(cpu.now)} | ${m(cpu.bare)} | ${m(cpu.diy)} | ${withQuartiles(cpu.nowBefore)} |`)
  console.log(line)
}
console.log(
  [
    '',
    `Medians of ${ROUNDS} interleaved rounds (quartiles), ${PG ? 'PostgreSQL + Redis' : 'SQLite'}:`,
    '',
    '| route | now / before | before / bare | now / bare | before / DIY | now / DIY |',
    '| --- | --- | --- | --- | --- | --- |',
    ...summary,
    '',
    'Server CPU time per request (µs, all threads, user and system; medians of the rounds) and its ratio before / now (above 1: now costs less):',
    '',
    '| route | before | now | bare | DIY | before / now |',
    '| --- | --- | --- | --- | --- | --- |',
    ...cpuSummary,
  ].join('\n'),
)
process.exit(0)
