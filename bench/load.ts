/** The load side of the benchmarks: free ports, CPU pinning, server processes, autocannon runs. */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { createServer } from 'node:net'
import { cpus } from 'node:os'
import { join } from 'node:path'
import autocannon from 'autocannon'

export const CONNECTIONS = 50
const ROOT = new URL('..', import.meta.url).pathname

export const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b)
  const mid = Math.floor(s.length / 2)
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2
}

export async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port
      s.close(() => resolve(port))
    })
  })
}

/**
 * pinned is true when the servers run on CPU 0 and this process (the load generator) on
 * CPU 1: on a small machine the two would otherwise fight for the same cores, and the
 * figures would measure the scheduler as much as the server.
 */
export const pinned =
  process.env.BENCH_ONLY !== 'convert' && cpus().length >= 2 && spawnSync('taskset', ['-p', '-c', '1', String(process.pid)], { stdio: 'ignore' }).status === 0

export function serve(script: string, env: Record<string, string>): ChildProcess {
  const [cmd, args] = pinned ? ['taskset', ['-c', '0', process.execPath, join(ROOT, script)]] : [process.execPath, [join(ROOT, script)]]
  return spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'inherit'] })
}

export interface Load {
  readonly method: 'GET' | 'POST'
  readonly path: string
  readonly headers?: Record<string, string>
  /** A fixed body, or one made per request. */
  readonly body?: string | (() => string)
}

export interface Figures {
  rps: number
  /** Answers counted (2xx or not). */
  total: number
  p50: number
  p99: number
  non2xx: number
}

export async function run(base: string, load: Load, seconds: number, connections = CONNECTIONS): Promise<Figures> {
  const headers = { ...(load.body !== undefined ? { 'content-type': 'application/x-www-form-urlencoded' } : {}), ...load.headers }
  const body = load.body
  const result = await autocannon({
    url: base + load.path,
    connections,
    duration: seconds,
    method: load.method,
    headers,
    ...(typeof body === 'function'
      ? { requests: [{ method: load.method, setupRequest: (req: object) => ({ ...req, body: body() }) }] }
      : body !== undefined
        ? { body }
        : {}),
  })
  if (result.non2xx + result.errors > 0) {
    // What they were, for whoever reads a failed run: each status apart, and the client's own errors (timeouts, resets).
    process.stderr.write(`${load.path}: not 2xx: ${JSON.stringify(result.statusCodeStats)}; client errors ${result.errors}, timeouts ${result.timeouts}\n`)
  }
  return { rps: result.requests.average, total: result.requests.total, p50: result.latency.p50, p99: result.latency.p99, non2xx: result.non2xx + result.errors }
}

/** FOUR_ORDERS: the orders in which a round runs four servers, in turn (this machine's speed drifts within minutes: each goes first as often). */
export const FOUR_ORDERS: readonly (readonly number[])[] = [
  [0, 1, 2, 3],
  [1, 3, 0, 2],
  [2, 0, 3, 1],
  [3, 2, 1, 0],
  [1, 0, 2, 3],
  [0, 3, 1, 2],
]

/** quantile: the value at fraction `f` of the sorted values (0.25: the first quartile). */
export const quantile = (xs: number[], f: number): number => [...xs].sort((a, b) => a - b)[Math.floor(f * (xs.length - 1))]!

/** withQuartiles: "median (first..third quartile)", three decimals. */
export const withQuartiles = (xs: number[]): string => `${median(xs).toFixed(3)} (${quantile(xs, 0.25).toFixed(3)}..${quantile(xs, 0.75).toFixed(3)})`
