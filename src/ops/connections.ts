/**
 * Connection limits. Node's http server closes a connection that has not sent a request's
 * headers within `headersTimeout` (counted from connecting, then from the start of each
 * request), one whose request is not whole within `requestTimeout`, and one idle between
 * requests for `keepAliveTimeout` (plus a one-second margin of Node's own). It checks the
 * first two every `connectionsCheckingInterval`, 30 s by default: that is why idle sockets
 * used to close 30 to 60 s after connecting, whatever REQUEST_TIMEOUT_MS said.
 *
 * The cap: Node's `maxConnections` destroys every new socket once the cap is reached, which
 * would let a few hundred idle sockets keep out health checks and clients alike. Instead,
 * at the cap a new connection closes the oldest connection that has no request in progress
 * (idle between requests, or yet to send its headers), and is refused only when every
 * connection has a request in progress. Idle sockets cost a client nothing to open, so
 * they give way; a request in progress is bounded by the timeouts and the throttle.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'

export interface ConnectionTimeouts {
  readonly headersTimeoutMs: number
  readonly requestTimeoutMs: number
  readonly keepAliveTimeoutMs: number
}

/** httpServerOptions gives Node's timeouts, checked often enough that a socket outlives its timeout by at most a second. */
export function httpServerOptions(t: ConnectionTimeouts) {
  const headersTimeout = Math.min(t.headersTimeoutMs, t.requestTimeoutMs) // Node refuses a longer one
  return {
    headersTimeout,
    requestTimeout: t.requestTimeoutMs,
    keepAliveTimeout: t.keepAliveTimeoutMs,
    connectionsCheckingInterval: Math.max(25, Math.min(1000, Math.floor(headersTimeout / 4))),
  }
}

export interface CapStats {
  /** Idle connections closed to make room. */
  evicted: number
  /** New connections refused because every connection had a request in progress. */
  refused: number
}

/** capConnections keeps at most `max` connections open on the server (see above); `onFull` is told each time the cap acts. */
export function capConnections(server: Server, max: number, onFull: (stats: CapStats) => void = () => undefined): CapStats {
  // Requests in progress per open socket; a Map iterates in insertion order, oldest first.
  const open = new Map<Socket, number>()
  const stats: CapStats = { evicted: 0, refused: 0 }
  server.on('connection', (socket: Socket) => {
    open.set(socket, 0)
    socket.once('close', () => open.delete(socket))
    if (open.size <= max) return
    for (const [other, inProgress] of open) {
      if (inProgress === 0 && other !== socket) {
        open.delete(other)
        other.destroy()
        stats.evicted++
        onFull(stats)
        return
      }
    }
    open.delete(socket)
    socket.destroy()
    stats.refused++
    onFull(stats)
  })
  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    const socket = request.socket
    if (!open.has(socket)) return
    open.set(socket, open.get(socket)! + 1)
    response.once('close', () => {
      if (open.has(socket)) open.set(socket, Math.max(0, open.get(socket)! - 1))
    })
  })
  return stats
}
