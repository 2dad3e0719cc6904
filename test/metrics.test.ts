/**
 * GET /metrics (issue 14, first step): on the public port only with METRICS_TOKEN, behind it;
 * on the admin listener openly; counters that the test's own calls move, by route pattern,
 * refusal cause and verification outcome; no key or secret in any label.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { startApp } from './helper.ts'
import { buildAdminApp } from '../src/admin/api/app.ts'
import { createMetrics } from '../src/metrics/metrics.ts'

const TOKEN = 'a-metrics-token-of-at-least-32-characters'
const SECRET = 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP'

/** sample reads one sample's value from the text format (labels in any order), or 0 when absent. */
function sample(text: string, name: string, labels: Record<string, string>): number {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue
    const inside = line.slice(name.length + 1, line.lastIndexOf('}'))
    if (Object.entries(labels).every(([k, v]) => inside.includes(`${k}="${v}"`))) return Number(line.slice(line.lastIndexOf(' ') + 1))
  }
  return 0
}

test('the public port serves /metrics only with METRICS_TOKEN and behind it; the counters follow the calls, without a key or secret in sight', async (t) => {
  const plain = await startApp(t)
  assert.equal((await fetch(`${plain.url}/metrics`)).status, 404, 'without METRICS_TOKEN, nothing on the public port')

  const app = await startApp(t, { METRICS_TOKEN: TOKEN })
  const scrape = (auth?: string) => fetch(`${app.url}/metrics`, auth === undefined ? {} : { headers: { authorization: auth } })
  for (const auth of [undefined, 'Bearer wrong', `Basic ${TOKEN}`, `Bearer ${TOKEN}x`]) {
    const res = await scrape(auth)
    assert.equal(res.status, 401, String(auth))
    assert.equal(res.headers.get('www-authenticate'), 'Bearer realm="metrics"')
  }

  const form = (fields: Record<string, string>) => ({ method: 'POST', headers: { 'x-api-key': app.key, 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(fields).toString() })
  for (let i = 0; i < 3; i++) assert.equal((await fetch(`${app.url}/totp/ping`, { headers: { 'x-api-key': app.key } })).status, 200)
  assert.equal((await fetch(`${app.url}/totp/ping`)).status, 403)
  assert.equal((await fetch(`${app.url}/totp/ping`, { headers: { 'x-api-key': `tsr_${'0'.repeat(40)}` } })).status, 403)
  assert.equal((await fetch(`${app.url}/totp/verifyOTP`, form({ secret: SECRET, token: '000000' }))).status, 400)
  assert.equal((await fetch(`${app.url}/no/such/path/${SECRET}`)).status, 404)

  const res = await scrape(`Bearer ${TOKEN}`)
  assert.equal(res.status, 200)
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/)
  const text = await res.text()
  assert.equal(sample(text, 'tessera_http_requests_total', { route: '/totp/ping', method: 'GET', status: '200', region: 'eu' }), 3)
  assert.equal(sample(text, 'tessera_http_requests_total', { route: '/totp/ping', method: 'GET', status: '403' }), 2)
  assert.equal(sample(text, 'tessera_http_requests_total', { route: 'unmatched', method: 'GET', status: '404' }), 1, 'an unknown path is "unmatched", never its path')
  assert.equal(sample(text, 'tessera_http_request_duration_seconds_count', { route: '/totp/ping', status: '200' }), 3)
  assert.equal(sample(text, 'tessera_http_request_duration_seconds_bucket', { route: '/totp/ping', status: '200', le: '+Inf' }), 3, 'the +Inf bucket holds every observation')
  assert.ok(sample(text, 'tessera_http_request_duration_seconds_sum', { route: '/totp/ping', status: '200' }) > 0)
  assert.equal(sample(text, 'tessera_gateway_refusals_total', { cause: 'missing' }), 1)
  assert.equal(sample(text, 'tessera_gateway_refusals_total', { cause: 'unknown' }), 1)
  assert.match(text, /^tessera_gateway_refusals_total\{[^}]*cause="over quota"[^}]*\} 0$/m, "every cause from the start")
  assert.equal(sample(text, 'tessera_otp_verifications_total', { outcome: 'invalid' }), 1)
  assert.match(text, /^process_resident_memory_bytes\{region="eu"\} \d+/m, 'the process defaults')
  assert.match(text, /^nodejs_eventloop_lag_seconds\{region="eu"\}/m)
  for (const leak of [app.key, SECRET, app.accountId, app.keyId, TOKEN]) assert.ok(!text.includes(leak), `${leak.slice(0, 8)}… is not in the metrics`)
})

test('the admin listener serves /metrics openly, or behind METRICS_TOKEN when it is set', async (t) => {
  const app = await startApp(t)
  const metrics = createMetrics({ region: 'eu' })
  metrics.observeRequest('/totp/getOTP', 'POST', 200, 0.0003)
  metrics.refused('throttled')
  const admin = await buildAdminApp({ config: app.config, accounts: app.accounts, metrics, logStream: { write: () => undefined } })
  await admin.listen({ port: 0, host: '127.0.0.1' })
  t.after(() => admin.close())
  const address = admin.server.address()
  assert.ok(address !== null && typeof address !== 'string')
  const text = await (await fetch(`http://127.0.0.1:${address.port}/metrics`)).text()
  assert.equal(sample(text, 'tessera_http_requests_total', { route: '/totp/getOTP', method: 'POST', status: '200' }), 1)
  assert.equal(sample(text, 'tessera_http_request_duration_seconds_bucket', { route: '/totp/getOTP', le: '0.00025' }), 0, '300 µs is not under 250 µs')
  assert.equal(sample(text, 'tessera_http_request_duration_seconds_bucket', { route: '/totp/getOTP', le: '0.0005' }), 1)
  assert.equal(sample(text, 'tessera_gateway_refusals_total', { cause: 'throttled' }), 1)

  const guarded = await startApp(t, { METRICS_TOKEN: TOKEN })
  const admin2 = await buildAdminApp({ config: guarded.config, accounts: guarded.accounts, metrics, logStream: { write: () => undefined } })
  await admin2.listen({ port: 0, host: '127.0.0.1' })
  t.after(() => admin2.close())
  const a2 = admin2.server.address()
  assert.ok(a2 !== null && typeof a2 !== 'string')
  assert.equal((await fetch(`http://127.0.0.1:${a2.port}/metrics`)).status, 401)
  assert.equal((await fetch(`http://127.0.0.1:${a2.port}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).status, 200)
})
