/**
 * A TCP proxy the fault tests put between the service and PostgreSQL or Redis: `cut()`
 * drops every connection and refuses new ones (the dependency is unreachable), `restore()`
 * accepts again on the same port; `hang()` keeps every connection open and accepts new ones,
 * but passes nothing on either way (the dependency is there and never answers).
 */
import { createServer, connect, type Server, type Socket } from 'node:net'
import { once } from 'node:events'
import { createDatabase, dropPrefix, redisUrl, uniqueName } from './services.ts'

export class TcpProxy {
  readonly #target: { host: string; port: number }
  readonly #sockets = new Set<Socket>()
  #server: Server | null = null
  #hung = false
  port = 0

  private constructor(target: { host: string; port: number }) {
    this.#target = target
  }

  /** start proxies a free local port to the host and port of `url`. */
  static async start(url: string): Promise<TcpProxy> {
    const u = new URL(url)
    const proxy = new TcpProxy({ host: u.hostname, port: Number(u.port) })
    await proxy.restore()
    return proxy
  }

  /** via rewrites `url` to go through the proxy. */
  via(url: string): string {
    const u = new URL(url)
    u.hostname = '127.0.0.1'
    u.port = String(this.port)
    return u.href
  }

  async restore(): Promise<void> {
    if (this.#server !== null) return
    const server = createServer((client) => {
      if (this.#hung) {
        this.#sockets.add(client)
        client.on('close', () => this.#sockets.delete(client))
        client.on('error', () => client.destroy())
        client.pause()
        return
      }
      const upstream = connect(this.#target.port, this.#target.host)
      for (const s of [client, upstream]) {
        this.#sockets.add(s)
        s.on('close', () => this.#sockets.delete(s))
        s.on('error', () => {
          client.destroy()
          upstream.destroy()
        })
      }
      client.pipe(upstream)
      upstream.pipe(client)
    })
    server.listen(this.port, '127.0.0.1')
    await once(server, 'listening')
    const address = server.address()
    if (address === null || typeof address === 'string') throw new Error('no port')
    this.port = address.port
    this.#server = server
  }

  /** hang: every connection, open or new, stays open and silent. */
  hang(): void {
    this.#hung = true
    for (const s of this.#sockets) {
      s.unpipe()
      s.pause()
    }
  }

  async cut(): Promise<void> {
    this.#hung = false
    const server = this.#server
    this.#server = null
    for (const s of this.#sockets) s.destroy()
    if (server !== null) await new Promise<void>((resolve) => server.close(() => resolve()))
  }

  close(): Promise<void> {
    return this.cut()
  }
}

/** Proxied: a fresh database and a Redis prefix of the test's own, each behind a TcpProxy the test can cut or hang. */
export interface Proxied {
  readonly pgProxy: TcpProxy
  readonly redisProxy: TcpProxy
  /** The settings that put an app on them, through the proxies. */
  readonly env: Record<string, string>
}

/** proxiedServices sets them up (on TEST_DATABASE_URL and TEST_REDIS_URL); all is closed and dropped after the test. */
export async function proxiedServices(t: { after(fn: () => Promise<void>): void }): Promise<Proxied> {
  const databaseUrl = await createDatabase(t)
  const pgProxy = await TcpProxy.start(databaseUrl)
  const redisProxy = await TcpProxy.start(redisUrl())
  const prefix = `${uniqueName('t')}:`
  t.after(async () => {
    await pgProxy.close()
    await redisProxy.close()
    await dropPrefix(prefix)
  })
  return { pgProxy, redisProxy, env: { DATABASE_URL: pgProxy.via(databaseUrl), REDIS_URL: redisProxy.via(redisUrl()), REDIS_PREFIX: prefix } }
}
