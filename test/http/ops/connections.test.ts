/**
 * Idle connections (issue 11, finding 7): sockets that send nothing, or nothing more after a
 * response, are closed within the documented time, and at the MAX_CONNECTIONS cap a node
 * still answers health checks and real calls. Real sockets against the app on a real port,
 * with small settings to keep the test quick; and a request past its timeout is answered 408 only where no answer has begun.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { connect, type Socket } from 'node:net'
import { once } from 'node:events'
import { request } from 'node:http'
import { startApp, get, type Running } from '../../support/helper.ts'
import { createBase } from '../../../src/http/base.ts'
import { loadConfig } from '../../../src/config/config.ts'

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
  for (const s of sockets) s.socket.destroy() // left open, they would keep the close waiting a second
  const times = sockets.map((s) => s.closedAt ?? Infinity).sort((a, b) => a - b)
  t.diagnostic(`closed after ${times[0]!.toFixed(0)} to ${times.at(-1)!.toFixed(0)} ms`)
  assert.ok(times[0]! >= 950, `none closed before the timeout (first at ${times[0]!.toFixed(0)} ms)`)
  assert.ok(times.at(-1)! <= 2000 + 500, `all closed within the timeout and a second (last at ${times.at(-1)!.toFixed(0)} ms)`)
  assert.equal((await get(app.url, '/healthz', undefined)).status, 200)
})

test("connections that have sent nothing do not hold the node's close: closed a second after they connected, the close then ends", async (t) => {
  // A browser opens a connection ahead of its next request: Node counts it as waiting for headers (not idle), and stops checking
  // HEADERS_TIMEOUT_MS once the server closes, so such a connection held a test's close for a minute (Chromium's own timeout).
  const app = await startApp(t, { HEADERS_TIMEOUT_MS: '60000' })
  const t0 = performance.now()
  const silent = await openIdle(app.url, 20, t0)
  const [asked] = await openIdle(app.url, 1, t0)
  asked!.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n')
  await once(asked!.socket, 'data')
  await new Promise((resolve) => setTimeout(resolve, 1200))
  assert.ok(
    [...silent, asked].every((s) => s!.closedAt === null),
    'open until the close: the headers timeout is a minute',
  )
  const closing = performance.now()
  const closed = app.app.close()
  const held = await Promise.race([closed.then(() => false), new Promise<boolean>((resolve) => setTimeout(() => resolve(true), 5000))])
  if (held) for (const s of [...silent, asked]) s!.socket.destroy() // so that the close ends, and the test with it
  await closed
  const took = performance.now() - closing
  t.diagnostic(`the close took ${took.toFixed(0)} ms`)
  assert.ok(took < 1000, `the close took ${took.toFixed(0)} ms`)
  await waitFor(() => [...silent, asked].every((s) => s!.closedAt !== null), 1000)
  assert.equal([...silent, asked].filter((s) => s!.closedAt === null).length, 0, 'every connection closed')
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
    for (const s of idle) s.socket.destroy() // before the app closes: it would wait a second for those that never sent a request
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

test('a request past REQUEST_TIMEOUT_MS whose answer has begun is cut, never given a 408 inside that answer; one whose answer has not begun gets its 408', async (t) => {
  const config = loadConfig({ ...process.env, NODE_ENV: 'test', REQUEST_TIMEOUT_MS: '1000', HEADERS_TIMEOUT_MS: '1000' })
  const app = await createBase({
    config,
    who: () => null,
    bodyLimit: 1 << 20,
    trustProxy: false,
    badPath: (reply) => reply.code(400).send(),
    logStream: { write: () => undefined },
  })
  // A route that answers before it reads its body (a body it takes as a stream): a chunked answer begins and goes on past the request's timeout.
  app.addContentTypeParser('application/octet-stream', (_request, payload, done) => done(null, payload))
  app.post('/early', async (_request, reply) => {
    reply.raw.writeHead(200, { 'content-type': 'text/plain', 'transfer-encoding': 'chunked' })
    reply.raw.write('begun\n')
    setTimeout(() => reply.raw.end('ended\n'), 3000).unref()
    return reply
  })
  app.post('/late', async (request) => request.body)
  await app.listen({ port: 0, host: '127.0.0.1' })
  t.after(() => app.close())
  const { port } = app.server.address() as { port: number }
  /** send: a POST that promises 100 bytes of body and sends 10, then waits; what came back before the close. */
  const send = async (path: string, type: string) => {
    const socket = connect(port, '127.0.0.1')
    socket.on('error', () => undefined)
    let got = ''
    socket.on('data', (d: Buffer) => {
      got += d.toString('latin1')
    })
    await once(socket, 'connect')
    socket.write(`POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: ${type}\r\nContent-Length: 100\r\n\r\n{"a":"1234`)
    const started = performance.now()
    await once(socket, 'close')
    return { got, ms: performance.now() - started }
  }
  const early = await send('/early', 'application/octet-stream')
  assert.match(early.got, /^HTTP\/1\.1 200 OK\r\n/, 'the answer began')
  assert.doesNotMatch(early.got, /HTTP\/1\.1 408/, 'no 408 written into the answer under way')
  assert.ok(early.got.includes('\r\n\r\n6\r\nbegun\n\r\n'), 'its first chunk whole')
  assert.ok(early.ms < 2900, `cut at the request's timeout, not at the answer's end: ${early.ms.toFixed(0)} ms`)
  const late = await send('/late', 'application/json')
  assert.match(late.got, /^HTTP\/1\.1 408 Request Timeout\r\n/, 'no answer begun: the 408')
})
