/**
 * Prometheus's own linter, `promtool check metrics` (Debian's `prometheus` package; `.ci/run`
 * installs it), on the /metrics of a node that has served every route: the TOTP routes,
 * both conversions, refusals, an unknown path, the operational routes and portal pages, on
 * PostgreSQL + Redis when the test has them (every store series then appears), with the
 * per-account series on. The test skips with a notice without promtool, and fails instead
 * when TESSERA_REQUIRE_SERVICES=1 (CI).
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { startApp } from '../support/helper.ts'
import { createDatabase, dropPrefix, redisUrl, toolSkip, uniqueName } from '../support/services.ts'
import { HAS_CORPUS, real, upload } from '../support/convert.ts'
import { PortalClient } from '../support/portal-helper.ts'

const TOKEN = 'a-metrics-token-of-at-least-32-characters'
const SECRET = 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP'

test('promtool check metrics accepts what a node that has served every kind of answer exports', { skip: toolSkip('promtool', 'prometheus') }, async (t) => {
  const services: Record<string, string> = {}
  if (process.env.TEST_DATABASE_URL && process.env.TEST_REDIS_URL) {
    const prefix = `${uniqueName('t')}:`
    t.after(() => dropPrefix(prefix))
    Object.assign(services, { DATABASE_URL: await createDatabase(t), REDIS_URL: redisUrl(), REDIS_PREFIX: prefix })
  }
  const app = await startApp(t, { METRICS_TOKEN: TOKEN, METRICS_PER_ACCOUNT: 'true', ...services })
  const post = (path: string, fields: Record<string, string>, key = app.key) =>
    fetch(`${app.url}${path}`, {
      method: 'POST',
      headers: { 'x-api-key': key, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(fields).toString(),
    })
  assert.equal((await fetch(`${app.url}/totp/ping`, { headers: { 'x-api-key': app.key } })).status, 200)
  assert.equal((await post('/totp/onboardUser', { userID: 'jane@example.com', applicationID: 'Acme' })).status, 200)
  assert.equal((await post('/totp/getOTP', { secret: SECRET })).status, 200)
  assert.equal((await post('/totp/verifyOTP', { secret: SECRET, token: '000000' })).status, 400)
  assert.equal((await post('/totp/ping', {}, 'tsr_nope')).status, 404)
  assert.equal((await fetch(`${app.url}/totp/ping`)).status, 403)
  assert.equal((await fetch(`${app.url}/nowhere`)).status, 404)
  assert.equal((await post('/totp/generateQRCode', { data: 'otpauth://totp/x' })).status, 200)
  for (const path of ['/healthz', '/readyz', '/openapi.json']) assert.equal((await fetch(`${app.url}${path}`)).status, 200, path)
  if (HAS_CORPUS) {
    const image = await upload(app.url, '/converter/generateImage', app.key, real('minimal-document.pdf'), { dpi: '36' })
    assert.equal(image.status, 200)
    await image.arrayBuffer()
    const ps = await upload(app.url, '/converter/generatePostscript', app.key, real('minimal-document.pdf'))
    assert.equal(ps.status, 200)
    await ps.arrayBuffer()
  }
  const portal = new PortalClient(app.url)
  assert.equal((await portal.post('/portal/sign-in', { email: 'nobody@example.com', password: 'not the password' }, { from: '/portal/sign-in' })).status, 401)
  const text = await (await fetch(`${app.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).text()
  assert.match(text, /tessera_http_requests_total\{[^}]*route="\/totp\/onboardUser"/)
  assert.match(text, /tessera_store_operation_duration_seconds_bucket\{/)
  assert.match(text, /tessera_account_requests_total\{/)
  if (HAS_CORPUS) assert.match(text, /tessera_conversion_engine_seconds_bucket\{/)
  if (services.DATABASE_URL !== undefined) assert.match(text, /tessera_postgres_pool_connections\{/)
  const lint = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' })
  assert.equal(lint.status, 0, `promtool: ${lint.stdout}${lint.stderr}`)
})
