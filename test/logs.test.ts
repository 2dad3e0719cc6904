import { CLI } from '../src/domain/accounts.ts'
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Secret, TOTP } from 'otpauth'
import { createCaller, get, post, startApp } from './helper.ts'

test('logs carry request ids and key ids, never keys, secrets, codes or bodies', async (t) => {
  const app = await startApp(t, { LOG_LEVEL: 'trace' })
  const revoked = await createCaller(app.accounts)
  await app.accounts.revokeKey({ actor: CLI }, revoked.keyId)

  const userID = 'log-probe-user@example.com'
  const onboard = await (await post(app.url, '/totp/onboardUser', app.key, { userID, applicationID: 'LogProbeApp' })).json() as Record<string, string>
  const secret = new Secret().base32
  const code = new TOTP({ secret: Secret.fromBase32(secret) }).generate({ timestamp: app.clock.now() })
  const got = await (await post(app.url, '/totp/getOTP', app.key, { secret })).json() as { otp: string }
  await post(app.url, '/totp/verifyOTP', app.key, { secret, token: code })
  await post(app.url, '/totp/verifyOTP', app.key, { secret, token: code })
  await post(app.url, '/totp/verifyOTP', app.key, { secret: onboard.secretKey!, token: '99999999' })
  await post(app.url, '/totp/generateQRCode', app.key, { data: 'qr-probe-payload-4711' })
  await post(app.url, '/totp/getOTP', app.key, { secret: 'lowercase-probe' })
  await get(app.url, '/totp/ping', revoked.apiKey)
  await get(app.url, '/totp/ping', 'tsr_probe_unknown_key')
  await get(app.url, '/totp/ping?secret=query-probe', app.key)

  // The line is written once the response has gone out: give the last one a moment.
  const done = () => app.logs.filter((l) => l.includes('"request completed"')).length >= 10
  for (let i = 0; i < 100 && !done(); i++) await new Promise((r) => setTimeout(r, 10))
  const text = app.logs.join('')
  const lines = app.logs.map((l) => JSON.parse(l) as Record<string, unknown>)
  const completed = lines.filter((l) => l.msg === 'request completed')
  assert.equal(completed.length, 10, 'one line per request')
  for (const l of completed) {
    assert.equal(typeof l.reqId, 'string')
    assert.match((l.req as { path: string }).path, /^\/totp\//)
    assert.equal(typeof l.responseTime, 'number')
  }
  assert.ok(completed.some((l) => (l.res as Record<string, string>).keyId !== undefined && (l.res as Record<string, string>).accountId === app.accountId),
    'the caller is logged by key id')
  assert.ok(lines.some((l) => l.msg === 'access denied' && l.reason === 'revoked key' && l.keyId === revoked.keyId))

  const forbidden = [
    app.key, app.key.slice(4), revoked.apiKey, 'tsr_probe_unknown_key', secret, onboard.secretKey!, onboard.otpURL!,
    userID, 'LogProbeApp', 'qr-probe-payload-4711', 'lowercase-probe', 'query-probe',
  ]
  for (const s of forbidden) assert.ok(!text.includes(s), `logs contain ${s.slice(0, 12)}…: ${app.logs.find((l) => l.includes(s))}`)
  // Numbers are matched whole: a response time may hold the same run of digits.
  for (const otp of [code, got.otp, onboard.otp!, '99999999']) {
    assert.ok(!new RegExp(`(?<![\\d.])${otp}(?![\\d])`).test(text), `logs contain the code ${otp}`)
  }
})
