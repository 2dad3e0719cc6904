/**
 * Prometheus's own linter, `promtool check metrics` (Debian's `prometheus` package; `.ci/run`
 * installs it), on the /metrics of a node that has answered the TOTP routes, refusals, an
 * unknown path and a portal page. The test skips with a notice without promtool, and fails
 * instead when TESSERA_REQUIRE_SERVICES=1 (CI).
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { startApp } from './helper.ts'

const TOKEN = 'a-metrics-token-of-at-least-32-characters'
const SECRET = 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP'

function promtoolSkip(): false | string {
  if (spawnSync('promtool', ['--version']).status === 0) return false
  const notice = 'needs promtool (apt-get install prometheus)'
  if (process.env.TESSERA_REQUIRE_SERVICES === '1') {
    test('required: promtool is installed', () => { throw new Error(`TESSERA_REQUIRE_SERVICES=1 but ${notice}`) })
  } else process.stderr.write(`# SKIPPED: ${notice}\n`)
  return notice
}

test('promtool check metrics accepts what a node that has served every kind of answer exports', { skip: promtoolSkip() }, async (t) => {
  const app = await startApp(t, { METRICS_TOKEN: TOKEN })
  const post = (path: string, fields: Record<string, string>, key = app.key) => fetch(`${app.url}${path}`, {
    method: 'POST', headers: { 'x-api-key': key, 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(fields).toString(),
  })
  assert.equal((await fetch(`${app.url}/totp/ping`, { headers: { 'x-api-key': app.key } })).status, 200)
  assert.equal((await post('/totp/onboardUser', { userID: 'jane@example.com', applicationID: 'Acme' })).status, 200)
  assert.equal((await post('/totp/getOTP', { secret: SECRET })).status, 200)
  assert.equal((await post('/totp/verifyOTP', { secret: SECRET, token: '000000' })).status, 400)
  assert.equal((await post('/totp/ping', {}, 'tsr_nope')).status, 404)
  assert.equal((await fetch(`${app.url}/totp/ping`)).status, 403)
  assert.equal((await fetch(`${app.url}/nowhere`)).status, 404)
  assert.equal((await fetch(`${app.url}/portal/sign-in`)).status, 200)
  const text = await (await fetch(`${app.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).text()
  assert.match(text, /tessera_http_requests_total\{[^}]*route="\/totp\/onboardUser"/)
  const lint = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' })
  assert.equal(lint.status, 0, `promtool: ${lint.stdout}${lint.stderr}`)
})
