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
import type { Server } from 'node:http'
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

/**
 * inProgress tells whether a connection has a request in progress: Node's server sets
 * `_httpMessage` to the answer once a request's headers are in and clears it when the
 * answer is finished (and to the next one's when requests were pipelined). It is read
 * only when the cap acts, so a request costs nothing here; counting requests per socket
 * with a listener on every answer cost about 1.3 µs of each call (bench/ab.ts).
 * test/http/ops/connections.test.ts checks that Node still keeps it.
 */
export function inProgress(socket: Socket): boolean {
  return (socket as Socket & { _httpMessage?: unknown })._httpMessage != null
}

/** The open connections of a server, to close those that have sent nothing yet. */
export interface Connections {
  /**
   * closeSilent closes the connections open for `graceMs` or more that have not sent a byte (a browser opens one ahead of its next
   * request): Node counts one as waiting for its headers, not idle, so `closeIdleConnections` leaves it, and its headers timeout is
   * no longer checked once the server closes; it would hold the close until the client gave up on it (about a minute for Chromium).
   * Nothing was asked on it; the grace spares a client that has just connected and is sending.
   */
  closeSilent(graceMs: number): number
}

/** capConnections keeps at most `max` connections open on the server (see above); `onFull` is told each time the cap acts. */
export function capConnections(server: Server, max: number, onFull: (stats: CapStats) => void = () => undefined): Connections {
  // Open sockets and when each connected; a Map iterates in insertion order, oldest first.
  const open = new Map<Socket, number>()
  const stats: CapStats = { evicted: 0, refused: 0 }
  server.on('connection', (socket: Socket) => {
    open.set(socket, performance.now())
    socket.once('close', () => open.delete(socket))
    if (open.size <= max) return
    for (const other of open.keys()) {
      if (other !== socket && !inProgress(other)) {
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
  return {
    closeSilent(graceMs) {
      let closed = 0
      const before = performance.now() - graceMs
      for (const [socket, since] of open) {
        if (since > before) break
        if (socket.bytesRead > 0 || inProgress(socket)) continue
        open.delete(socket)
        socket.destroy()
        closed++
      }
      return closed
    },
  }
}
