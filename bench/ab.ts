/**
 * A/B of the gateway's hot path: this tree against another checkout of the project (a
 * baseline commit, with its own node_modules), each beside the bare route, in interleaved
 * rounds whose order rotates (this machine's speed drifts by half within minutes: a ratio is
 * taken within each round, then the median).
 *
 *   git worktree add ../baseline <commit> && (cd ../baseline && npm ci)
 *   BENCH_BASELINE=../baseline node bench/ab.ts
 *
 * Both servers run on the embedded store with their demo account (no throttle: PLAN_RATE=0).
 * BENCH_SECONDS (default 2) and BENCH_ROUNDS (default 15) set the length of a run.
 */
import { spawn } from 'node:child_process'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { freePort, median, pinned, run, type Load } from './load.ts'
import { demoServer, waitFor } from './wait.ts'

const SECONDS = Number(process.env.BENCH_SECONDS ?? 2)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 15)
const BASELINE = process.env.BENCH_BASELINE
if (BASELINE === undefined || BASELINE === '') {
  process.stderr.write('BENCH_BASELINE must name a checkout of the baseline commit (see the comment at the top)\n')
  process.exit(2)
}
/** onCpu0 spawns a server on CPU 0 when the load generator could be pinned to CPU 1 (bench/load.ts). */
function onCpu0(script: string, env: Record<string, string>, stdout: 'pipe' | 'ignore') {
  const [cmd, args] = pinned ? ['taskset', ['-c', '0', process.execPath, script]] : [process.execPath, [script]]
  return spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', stdout, 'inherit'] })
}

async function start(script: string, env: Record<string, string>): Promise<{ url: string; key: string }> {
  const port = await freePort()
  return demoServer(onCpu0(script, { PORT: String(port), ...env }, 'pipe'), port)
}
const env = (extra: Record<string, string> = {}) => ({
  DATA_DIR: mkdtempSync(join(tmpdir(), 'ab-')),
  NODE_ENV: 'development',
  PLAN_RATE: '0',
  LOG_LEVEL: 'warn',
  ADMIN_LISTEN: 'off',
  ...extra,
})
const old = await start(resolve(BASELINE, 'src/server.ts'), env())
const now = await start(new URL('../src/server.ts', import.meta.url).pathname, env())
const barePort = await freePort()
const bareChild = onCpu0(new URL('./bare-server.ts', import.meta.url).pathname, { PORT: String(barePort) }, 'ignore')
process.on('exit', () => bareChild.kill('SIGKILL'))
const bare = `http://127.0.0.1:${barePort}`
await waitFor(`${bare}/bare/10`)
const secret = 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP'
for (const [name, path, body, size] of [
  ['ping', '/totp/ping', undefined, 46],
  ['getOTP', '/totp/getOTP', `secret=${secret}`, 85],
] as const) {
  const load = (key: string): Load => ({
    method: body === undefined ? 'GET' : 'POST',
    path,
    headers: { 'x-api-key': key },
    ...(body === undefined ? {} : { body }),
  })
  const bareLoad: Load = { method: body === undefined ? 'GET' : 'POST', path: `/bare/${size}`, ...(body === undefined ? {} : { body }) }
  for (const [u, l] of [
    [old.url, load(old.key)],
    [now.url, load(now.key)],
    [bare, bareLoad],
  ] as const) {
    const f = await run(u, l, 1)
    if (f.non2xx > 0) throw new Error(`${name} on ${u}: non-2xx`)
  }
  const ro: number[] = []
  const rn: number[] = []
  const paired: number[] = []
  const order = [
    [0, 1, 2],
    [1, 2, 0],
    [2, 0, 1],
    [0, 2, 1],
    [1, 0, 2],
    [2, 1, 0],
  ]
  for (let r = 0; r < ROUNDS; r++) {
    const rps: number[] = [0, 0, 0]
    for (const i of order[r % order.length]!) {
      const [u, l] = i === 0 ? [old.url, load(old.key)] : i === 1 ? [now.url, load(now.key)] : [bare, bareLoad]
      rps[i] = (await run(u, l, SECONDS)).rps
    }
    ro.push(rps[0]! / rps[2]!)
    rn.push(rps[1]! / rps[2]!)
    paired.push(rps[1]! / rps[0]!)
    console.log(`${name} round ${r}: old ${rps[0]!.toFixed(0)}, new ${rps[1]!.toFixed(0)}, bare ${rps[2]!.toFixed(0)} req/s`)
  }
  const mo = median(ro)
  const mn = median(rn)
  console.log(
    `${name}: ratio to bare, medians of ${ROUNDS} rounds: before ${mo.toFixed(3)}x, now ${mn.toFixed(3)}x; now/before ${(mn / mo).toFixed(3)}; median of the rounds' now/before ${median(paired).toFixed(3)} (quartiles ${[...paired].sort((a, b) => a - b)[Math.floor(paired.length / 4)]!.toFixed(3)}..${[...paired].sort((a, b) => a - b)[Math.floor((3 * paired.length) / 4)]!.toFixed(3)})`,
  )
}
process.exit(0)
