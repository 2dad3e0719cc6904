import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createServer } from 'node:http'
import { connect, type AddressInfo, type Socket } from 'node:net'
import { once } from 'node:events'
import { inProgress } from './connections.ts'

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

// The cap reads a private field of Node's server (see inProgress): this fails if a Node upgrade moves it.
test('inProgress: a connection has a request in progress from the end of its headers to the end of its answer', async (t) => {
  let serverSide: Socket | undefined
  let answer = () => {}
  const server = createServer((_request, response) => {
    answer = () => response.end('ok')
  })
  server.on('connection', (socket: Socket) => {
    serverSide = socket
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.after(() => server.close())
  const client = connect((server.address() as AddressInfo).port, '127.0.0.1')
  t.after(() => client.destroy())
  client.resume()
  await once(client, 'connect')
  const settle = () => pause(30)
  await settle()
  assert.equal(inProgress(serverSide!), false, 'connected, nothing sent')
  client.write('POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n')
  await settle()
  assert.equal(inProgress(serverSide!), false, 'headers not complete')
  client.write('\r\nab')
  await settle()
  assert.equal(inProgress(serverSide!), true, 'body on its way')
  client.write('cd')
  await settle()
  assert.equal(inProgress(serverSide!), true, 'handler running')
  answer()
  await settle()
  assert.equal(inProgress(serverSide!), false, 'answered: idle between requests')
  client.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n')
  await settle()
  assert.equal(inProgress(serverSide!), true, 'the next request')
  answer()
  await settle()
  assert.equal(inProgress(serverSide!), false)
})
