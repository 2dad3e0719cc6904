/**
 * BENCH_ONLY=tracing (or `node bench/tracing.ts` alone): what tracing costs the TOTP hot path
 * (ping, getOTP, verifyOTP on the embedded store), four servers in interleaved rounds whose
 * order rotates, every ratio taken within a round, medians printed:
 *
 * - before: the project as it was just before tracing existed (a checkout of the parent of the
 *   commit that added src/tracing/tracing.ts, made by this bench with `git worktree` and removed
 *   after; BENCH_BASELINE names another checkout instead);
 * - off: this tree with no OTEL_* setting (the default);
 * - on: this tree tracing every request at the default sampler (parentbased_always_on),
 *   exporting OTLP protobuf to a collector stand-in in this process that answers 200 at once;
 * - 1 %: this tree with OTEL_TRACES_SAMPLER=parentbased_traceidratio, OTEL_TRACES_SAMPLER_ARG=0.01.
 *
 * The issue's mark: off within 2 % of before. BENCH_SECONDS (default 2) and BENCH_ROUNDS (default 9).
 */
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { FOUR_ORDERS, freePort, median, pinned, run, withQuartiles, type Load } from './load.ts'
import { demoServer } from './wait.ts'
import { ROUTES, type RouteName } from './routes.ts'

const SECONDS = Number(process.env.BENCH_SECONDS ?? 2)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 9)
const WANTED: RouteName[] = ['ping', 'getOTP', 'verifyOTP']
const ROOT = resolve(import.meta.dirname, '..')

/** baseline: a checkout of the project just before tracing, and how to remove it; null when git cannot make one here. */
function baseline(): { dir: string; commit: string; remove: () => void } | null {
  if (process.env.BENCH_BASELINE) return { dir: resolve(process.env.BENCH_BASELINE), commit: 'BENCH_BASELINE', remove: () => {} }
  const git = (...args: string[]) => spawnSync('git', ['-C', ROOT, ...args], { encoding: 'utf8' })
  const added = git('log', '--format=%H', '--diff-filter=A', '--', 'src/tracing/tracing.ts').stdout.trim().split('\n').pop()
  if (!added) return null
  const commit = git('rev-parse', `${added}^`).stdout.trim()
  const dir = mkdtempSync(join(tmpdir(), 'tracing-before-'))
  rmSync(dir, { recursive: true })
  if (git('worktree', 'add', '--detach', dir, commit).status !== 0) return null
  // Its dependencies are a subset of this tree's (tracing only added some): the same node_modules serve it.
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'))
  return { dir, commit: commit.slice(0, 12), remove: () => git('worktree', 'remove', '--force', dir) }
}

interface Server {
  readonly url: string
  readonly key: string
  readonly pid: number
}

function cpuOf(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  return (Number(fields[11]) + Number(fields[12])) * (1e6 / 100)
}

const children: ReturnType<typeof spawn>[] = []
async function start(script: string, env: Record<string, string>): Promise<Server> {
  const port = await freePort()
  const [cmd, args] = pinned ? ['taskset', ['-c', '0', process.execPath, script]] : [process.execPath, [script]]
  const child = spawn(cmd, args, {
    env: {
      ...process.env,
      PORT: String(port),
      DATA_DIR: mkdtempSync(join(tmpdir(), 'tracing-bench-')),
      NODE_ENV: 'development',
      PLAN_RATE: '0',
      LOG_LEVEL: 'warn',
      ADMIN_LISTEN: 'off',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  children.push(child)
  return { ...(await demoServer(child, port)), pid: child.pid! }
}

export async function tracingBench(): Promise<void> {
  const before = baseline()
  if (before === null) {
    process.stdout.write('## Tracing: skipped (no git history here to check out the tree before tracing; set BENCH_BASELINE)\n')
    return
  }
  // The collector stand-in: takes every export and answers at once.
  let exports = 0
  let exportedBytes = 0
  const collector = http.createServer((request, response) => {
    request.on('data', (c: Buffer) => {
      exportedBytes += c.byteLength
    })
    request.on('end', () => {
      exports++
      response.writeHead(200, { 'content-type': 'application/x-protobuf' }).end()
    })
  })
  await new Promise<void>((ok) => collector.listen(0, '127.0.0.1', ok))
  const endpoint = `http://127.0.0.1:${(collector.address() as AddressInfo).port}`
  try {
    const here = join(ROOT, 'src/server.ts')
    const servers = [
      await start(join(before.dir, 'src/server.ts'), {}),
      await start(here, {}),
      await start(here, { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint }),
      await start(here, { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.01' }),
    ]
    const NAMES = ['before', 'off', 'on', '1 %']
    const rows: string[] = []
    for (const name of WANTED) {
      const route = ROUTES[name]
      const loadsFor = (): Load[] => {
        const bodies = route.bodies?.(SECONDS)
        return servers.map((s) => ({
          method: route.method,
          path: route.path,
          headers: { 'x-api-key': s.key },
          ...(bodies === undefined ? {} : { body: bodies() }),
        }))
      }
      const warm = loadsFor()
      for (const [i, s] of servers.entries()) {
        const f = await run(s.url, warm[i]!, 1)
        if (f.non2xx > 0) throw new Error(`${name} on ${NAMES[i]}: ${f.non2xx} answers not 2xx`)
      }
      const ratios = { offBefore: [] as number[], onOff: [] as number[], sampledOff: [] as number[] }
      const cpu: number[][] = [[], [], [], []]
      for (let r = 0; r < ROUNDS; r++) {
        const rps = [0, 0, 0, 0]
        const loads = loadsFor()
        for (const i of FOUR_ORDERS[r % FOUR_ORDERS.length]!) {
          const c0 = cpuOf(servers[i]!.pid)
          const f = await run(servers[i]!.url, loads[i]!, SECONDS)
          cpu[i]!.push((cpuOf(servers[i]!.pid) - c0) / f.total)
          rps[i] = f.rps
          if (f.non2xx > 0) throw new Error(`${name} on ${NAMES[i]}: ${f.non2xx} answers not 2xx`)
        }
        ratios.offBefore.push(rps[1]! / rps[0]!)
        ratios.onOff.push(rps[2]! / rps[1]!)
        ratios.sampledOff.push(rps[3]! / rps[1]!)
        console.log(`tracing ${name} round ${r}: ${rps.map((x, i) => `${NAMES[i]} ${x.toFixed(0)}`).join(', ')} req/s`)
      }
      const us = cpu.map((xs) => median(xs).toFixed(1))
      rows.push(`| ${name} | ${withQuartiles(ratios.offBefore)} | ${withQuartiles(ratios.onOff)} | ${withQuartiles(ratios.sampledOff)} | ${us.join(' | ')} |`)
    }
    process.stdout.write(
      [
        '',
        `## Tracing: the hot path before tracing (${before.commit}), with it off, on (every request, exported as OTLP protobuf) and at 1 %: ${ROUNDS} interleaved rounds of ${SECONDS} s, medians (quartiles), ${pinned ? 'servers on CPU 0, load on CPU 1' : 'not pinned'}`,
        '',
        '| route | off / before | on / off | 1 % / off | CPU µs/request before | off | on | 1 % |',
        '| --- | --- | --- | --- | --- | --- | --- | --- |',
        ...rows,
        '',
        `The collector stand-in took ${exports} exports, ${(exportedBytes / 1048576).toFixed(1)} MiB.`,
        '',
      ].join('\n'),
    )
  } finally {
    for (const c of children) c.kill('SIGTERM')
    collector.close()
    before.remove()
  }
}

if (import.meta.main) {
  await tracingBench()
  process.exit(0)
}
