/**
 * /readyz and the SMTP server (a real one, test/support/smtp.ts): named `smtp` when SMTP_URL is set,
 * asked at most once per SMTP_CHECK_TTL_MS, degraded (200, not 503) when it is down, and never
 * waited for past STORE_TIMEOUT_MS. The store's own checks are in gateway.test.ts (SQLite) and
 * test/http/ops/faults.test.ts (PostgreSQL and Redis).
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createServer, type AddressInfo, type Socket } from 'node:net'
import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import { get, startApp } from '../../support/helper.ts'
import { smtp } from '../../support/smtp.ts'
import { SMTP_CHECK_TTL_MS } from '../../../src/ops/checks.ts'

const { version } = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string }

async function readyz(url: string): Promise<{ status: number; body: unknown }> {
  const res = await get(url, '/readyz', undefined)
  return { status: res.status, body: await res.json() }
}

test('readyz names smtp when SMTP_URL is set: ok, asked once per TTL however many probes, then degraded with 200 once the server is gone', async (t) => {
  let connections = 0
  const server = await smtp(t, {
    onConnect(_session, callback) {
      connections++
      callback()
    },
  })
  const app = await startApp(t, { SMTP_URL: server.url })
  const ok = { status: 200, body: { status: 'ok', version, checks: { sqlite: 'ok', smtp: 'ok' } } }

  assert.deepEqual(await Promise.all([readyz(app.url), readyz(app.url), readyz(app.url)]), [ok, ok, ok])
  assert.deepEqual(await readyz(app.url), ok)
  assert.equal(connections, 1, 'probes at once share one check, and later ones within the TTL take its result')
  assert.deepEqual(await (await get(app.url, '/healthz', undefined)).json(), { status: 'ok', version })

  await server.close()
  app.clock.advance(SMTP_CHECK_TTL_MS - 1)
  assert.deepEqual(await readyz(app.url), ok, 'still the cached result')
  app.clock.advance(1)
  assert.deepEqual(await readyz(app.url), { status: 200, body: { status: 'degraded', version, checks: { sqlite: 'ok', smtp: 'unavailable' } } })
  const logged = app.logs.map((l) => JSON.parse(l) as { msg: string; unavailable?: { smtp?: string } }).find((l) => l.msg === 'readiness check failed')
  assert.match(logged?.unavailable?.smtp ?? '', /ECONNREFUSED/, 'the log says why')
})

test('an SMTP server that never answers holds readyz no longer than STORE_TIMEOUT_MS', async (t) => {
  const sockets = new Set<Socket>()
  const silent = createServer((socket) => {
    sockets.add(socket)
  })
  silent.listen(0, '127.0.0.1')
  await once(silent, 'listening')
  t.after(() => {
    for (const s of sockets) s.destroy()
    silent.close()
  })
  const app = await startApp(t, { SMTP_URL: `smtp://127.0.0.1:${(silent.address() as AddressInfo).port}`, STORE_TIMEOUT_MS: '300' })

  const started = performance.now()
  assert.deepEqual(await readyz(app.url), { status: 200, body: { status: 'degraded', version, checks: { sqlite: 'ok', smtp: 'unavailable' } } })
  const took = performance.now() - started
  assert.ok(took >= 250 && took < 1500, `answered after ${Math.round(took)} ms (STORE_TIMEOUT_MS 300; the mailer's own timeout is 10 s)`)
  assert.equal(sockets.size, 1, 'the check did reach the server')
})

test('without the portal no email is sent, so SMTP_URL is not checked', async (t) => {
  const server = await smtp(t)
  const app = await startApp(t, { SMTP_URL: server.url, PORTAL_ENABLED: 'false' })
  assert.deepEqual(await readyz(app.url), { status: 200, body: { status: 'ok', version, checks: { sqlite: 'ok' } } })
})
