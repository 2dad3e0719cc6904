/**
 * A real SMTP server for tests (smtp-server, in this process, on a free port) that keeps what
 * it accepts, and a reader of the links in those messages.
 */
import type { TestContext } from 'node:test'
import type { AddressInfo } from 'node:net'
import { once } from 'node:events'
import { SMTPServer, type SMTPServerOptions } from 'smtp-server'

export interface Received {
  readonly from: string
  readonly to: readonly string[]
  readonly raw: string
}

/** smtp starts a real SMTP server on port 0 and collects what it accepts; `close` stops it before the test ends. */
export async function smtp(
  t: TestContext,
  options: Partial<SMTPServerOptions> = {},
): Promise<{ port: number; url: string; received: Received[]; close(): Promise<void> }> {
  const received: Received[] = []
  const server = new SMTPServer({
    // No TLS here: nodemailer would upgrade and then refuse the server's self-signed certificate.
    disabledCommands: ['STARTTLS'],
    authOptional: true,
    allowInsecureAuth: true,
    logger: false,
    // A test closes its mailers first; this bounds the wait for a pooled connection left open by a failed one.
    closeTimeout: 1000,
    onData(stream, session, callback) {
      const chunks: Buffer[] = []
      stream.on('data', (chunk: Buffer) => chunks.push(chunk))
      stream.on('end', () => {
        received.push({
          from: session.envelope.mailFrom === false ? '' : session.envelope.mailFrom.address,
          to: session.envelope.rcptTo.map((r) => r.address),
          raw: Buffer.concat(chunks).toString('utf8'),
        })
        callback()
      })
    },
    ...options,
  })
  server.listen(0, '127.0.0.1')
  await once(server.server, 'listening')
  let closed: Promise<void> | undefined
  const close = () => (closed ??= new Promise<void>((resolve) => server.close(() => resolve())))
  t.after(close)
  const port = (server.server.address() as AddressInfo).port
  return { port, url: `smtp://127.0.0.1:${port}`, received, close }
}

/** messageTo waits (up to 5 s) for the `n`th message (1-based) to `address`. */
export async function messageTo(received: readonly Received[], address: string, n = 1): Promise<Received> {
  for (let i = 0; i < 250; i++) {
    const found = received.filter((m) => m.to.includes(address.toLowerCase()) || m.to.includes(address))
    if (found.length >= n) return found[n - 1]!
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  throw new Error(`no message #${n} to ${address}`)
}

/** portalLinkOf: the first portal link of a message (its quoted-printable soft breaks undone). */
export function portalLinkOf(message: Received): string {
  const text = message.raw.replace(/=\r\n/g, '').replace(/=3D/gi, '=')
  const m = /https?:\/\/[^\s"<>]+\/portal\/[^\s"<>]+/.exec(text)
  if (m === null) throw new Error(`no portal link in the message:\n${message.raw}`)
  return m[0]
}
