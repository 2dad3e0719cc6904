/** The load of test/support/load.ts: `connections` loops, each sending the same request as soon as the last is answered. */
import { parentPort, workerData } from 'node:worker_threads'
import { request, Agent } from 'node:http'
import { setPriority } from 'node:os'
import type { LoadOptions } from './load.ts'

const options = workerData as LoadOptions
// Linux: this thread only (the nice value is per thread there).
if (options.lowPriority) setPriority(19)
const agent = new Agent({ keepAlive: true, maxSockets: options.connections })
const statuses: Record<string, number> = {}
let stopping = false
let started = 0

let sent = 0

function send(): Promise<void> {
  const n = String(sent++)
  const number = (text: string) => (options.numbered ? text.replaceAll('{n}', n) : text)
  const body = number(options.body)
  const headers = Object.fromEntries(Object.entries(options.headers).map(([k, v]) => [k, number(v)]))
  return new Promise((resolve) => {
    const req = request(options.url + options.path, { method: 'POST', agent, headers: { ...headers, 'content-length': Buffer.byteLength(body) } }, (res) => {
      res.resume()
      res.on('end', () => {
        statuses[res.statusCode!] = (statuses[res.statusCode!] ?? 0) + 1
        resolve()
      })
    })
    req.on('error', (error) => {
      statuses[error.message] = (statuses[error.message] ?? 0) + 1
      resolve()
    })
    req.end(body)
  })
}

async function loop(): Promise<void> {
  await send()
  if (++started === options.connections) parentPort!.postMessage('running')
  while (!stopping) await send()
}

parentPort!.on('message', () => {
  stopping = true
})
await Promise.all(Array.from({ length: options.connections }, loop))
parentPort!.postMessage(statuses)
agent.destroy()
