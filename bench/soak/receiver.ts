/**
 * The soak's own HTTP server, on loopback (the soak's server runs with WEBHOOK_ALLOW_PRIVATE so
 * that it may reach it): documents for jobs' `sourceUrl`, well behaved and not (slow, lying about
 * their length, endless), a `resultUrl` that takes a result (or fails), and a webhook receiver.
 */
import { createServer, type Server } from 'node:http'
import { DOCS, type DocName } from './documents.ts'

export interface Receiver {
  readonly url: string
  /** Requests seen, by kind: documents served, results taken, webhook deliveries. */
  readonly seen: Map<string, number>
  close(): Promise<void>
}

const count = (seen: Map<string, number>, kind: string) => seen.set(kind, (seen.get(kind) ?? 0) + 1)

export async function startReceiver(): Promise<Receiver> {
  const seen = new Map<string, number>()
  const server: Server = createServer((req, res) => {
    const [, kind, name] = (req.url ?? '/').split('/')
    res.on('error', () => undefined)
    req.on('error', () => undefined)
    if (req.method === 'GET' && kind === 'doc' && name !== undefined && name in DOCS) {
      count(seen, 'document')
      const doc = DOCS[name as DocName]
      return res.writeHead(200, { 'content-type': 'application/pdf', 'content-length': doc.length }).end(doc)
    }
    if (req.method === 'GET' && kind === 'slow') {
      count(seen, 'slow document')
      res.writeHead(200, { 'content-type': 'application/pdf' })
      const doc = DOCS.three
      let at = 0
      const drip = setInterval(() => {
        if (at >= doc.length || res.destroyed) {
          clearInterval(drip)
          return void res.end()
        }
        res.write(doc.subarray(at, at + 256))
        at += 256
      }, 50)
      return res.on('close', () => clearInterval(drip))
    }
    if (req.method === 'GET' && kind === 'lie') {
      count(seen, 'lying document')
      res.writeHead(200, { 'content-type': 'application/pdf', 'content-length': 10_000_000 })
      res.write(DOCS.three.subarray(0, 500))
      return setTimeout(() => res.destroy(), 100)
    }
    if (req.method === 'GET' && kind === 'endless') {
      count(seen, 'endless document')
      res.writeHead(200, { 'content-type': 'application/pdf' })
      const block = Buffer.alloc(64 * 1024, 0x20)
      const pump = () => {
        while (!res.destroyed && res.write(block)) {
          /* until the socket's buffer is full */
        }
      }
      res.on('drain', pump)
      return pump()
    }
    if (req.method === 'PUT' && kind === 'result') {
      count(seen, 'result')
      req.resume()
      return req.on('end', () => res.writeHead(name === 'fail' ? 500 : 200).end())
    }
    if (req.method === 'POST' && kind === 'hook') {
      count(seen, 'webhook delivery')
      req.resume()
      return req.on('end', () => res.writeHead(name === 'fail' ? 500 : 204).end())
    }
    res.writeHead(404).end()
  })
  server.keepAliveTimeout = 5000
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}
