/**
 * A webhook receiver for tests: a real HTTP (or HTTPS) server that verifies each delivery with
 * the `standardwebhooks` package (the specification's own library), records it, and can be
 * taken down and brought back on the same port.
 */
import http from 'node:http'
import https from 'node:https'
import type { AddressInfo, Socket } from 'node:net'
import { Webhook } from 'standardwebhooks'
import type { Running } from './helper.ts'
import { Webhooks } from '../../src/services/webhooks.ts'
import { resolveKeyring } from '../../src/config/encryption.ts'
import { isFailure } from '../../src/services/outcome.ts'
import { SYSTEM } from '../../src/domain/accounts.ts'

export interface Delivery {
  readonly id: string
  readonly headers: http.IncomingHttpHeaders
  readonly body: string
  /** The payload as the library verified it; null when the signature did not verify. */
  readonly payload: { type: string; timestamp: string; data: Record<string, unknown> } | null
  readonly servername: string | null
}

export class Receiver {
  readonly deliveries: Delivery[] = []
  /** The status it answers (default 204). */
  status = 204
  secret = ''
  port = 0
  readonly #tls: { key: string; cert: string } | undefined
  #server: http.Server | null = null
  readonly #sockets = new Set<Socket>()

  constructor(tls?: { key: string; cert: string }) {
    this.#tls = tls
  }

  async start(port = this.port): Promise<this> {
    const handler: http.RequestListener = (req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8')
        let payload: Delivery['payload'] = null
        try {
          payload = new Webhook(this.secret).verify(body, req.headers as Record<string, string>) as Delivery['payload']
        } catch {
          /* recorded as unverified */
        }
        const servername = (req.socket as { servername?: string }).servername ?? null
        this.deliveries.push({ id: String(req.headers['webhook-id']), headers: req.headers, body, payload, servername })
        res.statusCode = this.status
        res.end()
      })
    }
    const server = this.#tls ? https.createServer(this.#tls, handler) : http.createServer(handler)
    server.on('connection', (s: Socket) => {
      this.#sockets.add(s)
      s.on('close', () => this.#sockets.delete(s))
    })
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve))
    this.port = (server.address() as AddressInfo).port
    this.#server = server
    return this
  }

  /** stop takes it down: connections refused until start again. */
  async stop(): Promise<void> {
    const server = this.#server
    this.#server = null
    if (server === null) return
    for (const s of this.#sockets) s.destroy()
    await new Promise((resolve) => server.close(resolve))
  }

  /** ids: the distinct webhook-ids received, verified ones only. */
  ids(): Set<string> {
    return new Set(this.deliveries.filter((d) => d.payload !== null).map((d) => d.id))
  }
}

/** waitFor polls `check` until it holds, or fails after `ms` saying `what`. */
export async function waitFor(check: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

/**
 * factorEvent: an event of a managed factor in the account's audit trail, as the factors service
 * writes it (the same insert feeds the webhook outbox), without going through a factor.
 */
export function factorEvent(
  app: Pick<Running, 'store' | 'accountId'>,
  action: string,
  options: { readonly outcome?: 'success' | 'failure'; readonly detail?: Record<string, unknown> } = {},
): ReturnType<Running['store']['audit']['append']> {
  return app.store.audit.append({
    actor: 'system',
    action,
    target: { type: 'factor', id: 'fct_1' },
    accountId: app.accountId,
    ip: null,
    outcome: options.outcome ?? 'success',
    detail: options.detail ?? { userID: 'u1' },
  })
}

/** listening: a receiver started for the test, and the app's account's endpoint (every event type) pointing at it, its secret known to it. */
export async function listening(app: Pick<Running, 'store' | 'config' | 'accountId'>, t: { after(fn: () => unknown): void }): Promise<Receiver> {
  const receiver = await new Receiver().start()
  t.after(() => receiver.stop())
  const made = await new Webhooks({ store: app.store, keyring: resolveKeyring(app.config), config: app.config }).create({ actor: SYSTEM }, app.accountId, {
    url: `http://127.0.0.1:${receiver.port}/hooks`,
  })
  if (isFailure(made)) throw new Error(made.message)
  receiver.secret = made.secret
  return receiver
}
