/**
 * Load for event-loop tests: `startLoad` keeps N connections busy with one request each,
 * back to back, from a worker thread (so that the load's own work does not run on the
 * event loop of an app started in this process), and `pingLatencies` measures a ping sent
 * every few milliseconds, from the moment it was due (a late timer counts: it is the event
 * loop being held).
 */
import { request, Agent } from 'node:http'
import { Worker } from 'node:worker_threads'
import { once } from 'node:events'

export interface LoadOptions {
  readonly url: string
  readonly path: string
  readonly headers: Record<string, string>
  readonly body: string
  readonly connections: number
  /** Each `{n}` in the body and the header values becomes the request's number (0, 1, …): a flood of different sign-ups from different addresses. */
  readonly numbered?: boolean
  /**
   * The load's thread runs at the lowest CPU priority (nice 19; Linux keeps a nice value per
   * thread): an attacker's machine does not take the server's CPU, and here the load's own
   * work would otherwise compete with the app for the test machine's cores.
   */
  readonly lowPriority?: boolean
}

export interface Load {
  /** stop ends the load and gives the count of answers by status. */
  stop(): Promise<Record<string, number>>
}

export async function startLoad(options: LoadOptions): Promise<Load> {
  const worker = new Worker(new URL('./load-worker.ts', import.meta.url), { workerData: options })
  await once(worker, 'message') // every connection has had its first answer
  return {
    async stop() {
      worker.postMessage('stop')
      const [statuses] = (await once(worker, 'message')) as [Record<string, number>]
      await worker.terminate()
      return statuses
    },
  }
}

/**
 * pingLatencies sends GET `path` every `everyMs` for `durationMs`, each on schedule (when the
 * event loop was held, every ping that fell due meanwhile goes out at once), and returns each
 * one's latency (ms) from when it was due. A ping still unanswered `giveUpMs` after the last
 * one fell due counts with the time it has waited so far.
 */
export async function pingLatencies(
  url: string,
  path: string,
  headers: Record<string, string>,
  everyMs: number,
  durationMs: number,
  giveUpMs = 5000,
): Promise<number[]> {
  const agent = new Agent({ keepAlive: true, maxSockets: 16 })
  const start = performance.now()
  const count = Math.floor(durationMs / everyMs)
  const latencies: (number | undefined)[] = new Array(count).fill(undefined)
  const dueOf = (i: number) => start + i * everyMs
  let errors = 0
  const send = (i: number) => {
    const req = request(url + path, { agent, headers }, (res) => {
      res.resume()
      res.on('end', () => {
        if (res.statusCode === 200) latencies[i] = performance.now() - dueOf(i)
        else errors++
      })
    })
    req.on('error', () => {
      errors++
    })
    req.end()
  }
  let sent = 0
  while (sent < count) {
    while (sent < count && dueOf(sent) <= performance.now()) send(sent++)
    if (sent < count) await new Promise((resolve) => setTimeout(resolve, Math.max(0, dueOf(sent) - performance.now())))
  }
  const deadline = dueOf(count - 1) + giveUpMs
  while (latencies.includes(undefined) && performance.now() < deadline && errors === 0) await new Promise((resolve) => setTimeout(resolve, 5))
  agent.destroy()
  if (errors > 0) throw new Error(`${errors} pings failed`)
  return latencies.map((latency, i) => latency ?? performance.now() - dueOf(i))
}

/** percentile of a list of numbers (nearest rank). */
export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!
}
