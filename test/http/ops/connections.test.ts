/**
 * Idle connections (issue 11, finding 7): sockets that send nothing, or nothing more after a
 * response, are closed within the documented time, and at the MAX_CONNECTIONS cap a node
 * still answers health checks and real calls. Real sockets against the app on a real port,
 * with small settings to keep the test quick.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { connect, type Socket } from 'node:net'
import { once } from 'node:events'
import { request } from 'node:http'
import { startApp, get, type Running } from '../../support/helper.ts'

interface Tracked {
  readonly socket: Socket
  closedAt: number | null
}

async function openIdle(url: string, count: number, t0: number): Promise<Tracked[]> {
  const { port } = new URL(url)
  return Promise.all(
    Array.from({ length: count }, async () => {
      const socket = connect(Number(port), '127.0.0.1')
      const tracked: Tracked = { socket, closedAt: null }
      socket.on('error', () => undefined)
      socket.resume() // read what the server sends (a 408 before it closes): an unread socket never sees the close
      socket.on('close', () => {
        tracked.closedAt = performance.now() - t0
      })
      await once(socket, 'connect')
      return tracked
    }),
  )
}

async function waitFor(condition: () => boolean, ms: number): Promise<void> {
  const until = performance.now() + ms
  while (!condition() && performance.now() < until) await new Promise((resolve) => setTimeout(resolve, 20))
}

/** statusOnNewConnection sends one GET on a connection of its own and gives the status. */
function statusOnNewConnection(url: string, path: string, key?: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url + path, { agent: false, headers: key === undefined ? {} : { 'x-api-key': key } }, (res) => {
      res.resume()
      res.on('end', () => resolve(res.statusCode!))
    })
    req.on('error', reject)
    req.end()
  })
}

/** serverConnections counts the connections the server holds open. */
const serverConnections = (running: Running) =>
  new Promise<number>((resolve, reject) => running.app.server.getConnections((e, n) => (e ? reject(e) : resolve(n))))

test('300 connections that send nothing are closed within HEADERS_TIMEOUT_MS and a second, none before', async (t) => {
  const app = await startApp(t, { HEADERS_TIMEOUT_MS: '1000', REQUEST_TIMEOUT_MS: '2000' })
  const t0 = performance.now()
  const sockets = await openIdle(app.url, 300, t0)
  await waitFor(() => sockets.every((s) => s.closedAt !== null), 4000)
  for (const s of sockets) s.socket.destroy() // left open, they would hold the app's close
  const times = sockets.map((s) => s.closedAt ?? Infinity).sort((a, b) => a - b)
  t.diagnostic(`closed after ${times[0]!.toFixed(0)} to ${times.at(-1)!.toFixed(0)} ms`)
  assert.ok(times[0]! >= 950, `none closed before the timeout (first at ${times[0]!.toFixed(0)} ms)`)
  assert.ok(times.at(-1)! <= 2000 + 500, `all closed within the timeout and a second (last at ${times.at(-1)!.toFixed(0)} ms)`)
  assert.equal((await get(app.url, '/healthz', undefined)).status, 200)
})

test('a kept-alive connection idle after its answer is closed within KEEP_ALIVE_TIMEOUT_MS and a second', async (t) => {
  const app = await startApp(t, { KEEP_ALIVE_TIMEOUT_MS: '500' })
  const t0 = performance.now()
  const [idle] = await openIdle(app.url, 1, t0)
  idle!.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n')
  const [answer] = (await once(idle!.socket, 'data')) as [Buffer]
  assert.match(answer.toString(), /^HTTP\/1.1 200 OK[\s\S]*Keep-Alive: timeout=0/i)
  const answeredAt = performance.now() - t0
  await waitFor(() => idle!.closedAt !== null, 3000)
  assert.ok(
    idle!.closedAt !== null && idle!.closedAt - answeredAt <= 500 + 1000 + 300,
    `closed ${idle!.closedAt === null ? 'never' : (idle!.closedAt - answeredAt).toFixed(0)} ms after the answer`,
  )
})

test('at MAX_CONNECTIONS, health checks and real calls still get in: the oldest idle connections make room', async (t) => {
  const app = await startApp(t, { MAX_CONNECTIONS: '50', HEADERS_TIMEOUT_MS: '30000' })
  const t0 = performance.now()
  const idle = await openIdle(app.url, 80, t0)
  t.after(() => {
    for (const s of idle) s.socket.destroy()
  })
  try {
    await waitFor(() => idle.filter((s) => s.closedAt === null).length <= 50, 2000)
    assert.ok((await serverConnections(app)) <= 50, 'never more than the cap open')
    assert.deepEqual(
      idle.slice(0, 30).map((s) => s.closedAt !== null),
      Array(30).fill(true),
      'the 30 oldest were closed',
    )
    for (let i = 0; i < 20; i++) {
      assert.equal(await statusOnNewConnection(app.url, '/healthz'), 200, 'health check')
      assert.equal(await statusOnNewConnection(app.url, '/totp/ping', app.key), 200, 'real call')
    }
    assert.ok((await serverConnections(app)) <= 50)
    assert.ok(
      app.logs.some((line) => line.includes('connection cap reached')),
      'the cap is logged',
    )
  } finally {
    for (const s of idle) s.socket.destroy() // before the app closes: it waits for connections that never sent a request
  }
})

test('at MAX_CONNECTIONS with a request in progress on every connection, a new connection is refused: the cap holds', async (t) => {
  const app = await startApp(t, { MAX_CONNECTIONS: '10', REQUEST_TIMEOUT_MS: '30000' })
  const t0 = performance.now()
  const busy = await openIdle(app.url, 10, t0)
  t.after(() => {
    for (const s of busy) s.socket.destroy()
  })
  try {
    // Headers whole, body never sent: each connection has a request in progress.
    for (const s of busy)
      s.socket.write(
        `POST /totp/getOTP HTTP/1.1\r\nHost: x\r\nx-api-key: ${app.key}\r\ncontent-type: application/x-www-form-urlencoded\r\ncontent-length: 100\r\n\r\n`,
      )
    await new Promise((resolve) => setTimeout(resolve, 200))
    const [late] = await openIdle(app.url, 1, t0)
    await waitFor(() => late!.closedAt !== null, 2000)
    assert.notEqual(late!.closedAt, null, 'the new connection was closed')
    assert.ok(
      busy.every((s) => s.closedAt === null),
      'no request in progress was cut',
    )
    assert.equal(await serverConnections(app), 10)
  } finally {
    for (const s of busy) s.socket.destroy() // before the app closes: it waits for requests in progress
  }
})
