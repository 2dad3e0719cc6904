import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Secret, type TOTP, URI } from 'otpauth'
import { post, get, startApp, codes } from '../../support/helper.ts'
import { decodeQr, dataUrlBytes } from '../../support/qr.ts'
import { RFC4226_CODES, RFC6238_SEEDS, RFC6238_VECTORS } from '../../../src/totp/rfc-vectors.ts'

test('ping answers with a valid key', async (t) => {
  const app = await startApp(t)
  const res = await get(app.url, '/totp/ping', app.key)
  assert.equal(res.status, 200)
  assert.deepEqual(await res.json(), { type: 'Success', message: 'Ping successful' })
})

test('getOTP gives the RFC 6238 Appendix B codes (8 digits, SHA1/SHA256/SHA512)', async (t) => {
  const app = await startApp(t)
  for (const [seconds, expected] of RFC6238_VECTORS) {
    app.clock.set(seconds * 1000)
    for (const algorithm of ['SHA1', 'SHA256', 'SHA512'] as const) {
      const secret = Secret.fromLatin1(RFC6238_SEEDS[algorithm]).base32
      const res = await post(app.url, '/totp/getOTP', app.key, { secret, tokenLength: '8', algorithm })
      assert.equal(res.status, 200)
      const body = (await res.json()) as { otp: string; expiresIn: number; type: string }
      assert.equal(body.otp, expected[algorithm], `${algorithm} at ${seconds}`)
      assert.equal(body.type, 'Success')
      assert.equal(body.expiresIn, 30 - (seconds % 30))
      assert.equal(res.headers.get('cache-control'), 'no-store')
    }
  }
})

test('getOTP gives the RFC 4226 Appendix D codes at the matching time steps', async (t) => {
  const app = await startApp(t)
  const secret = Secret.fromLatin1(RFC6238_SEEDS.SHA1).base32
  for (const [counter, code] of RFC4226_CODES.entries()) {
    app.clock.set(counter * 30_000)
    const res = await post(app.url, '/totp/getOTP', app.key, { secret })
    assert.deepEqual(await res.json(), { type: 'Success', otp: code, expiresIn: 30, currentToken: code, timeUsed: 0 })
  }
})

test('onboard → scan the QR → the URL gives the code getOTP gives → verify once, replay refused', async (t) => {
  const app = await startApp(t)
  const res = await post(app.url, '/totp/onboardUser', app.key, { userID: 'jane.doe@example.com', applicationID: 'Acme Portal' })
  assert.equal(res.status, 200)
  assert.equal(res.headers.get('cache-control'), 'no-store')
  const body = (await res.json()) as Record<string, unknown>
  assert.deepEqual(Object.keys(body).sort(), ['QRCode', 'algorithm', 'expiresIn', 'otp', 'otpURL', 'secretKey', 'token', 'tokenLength', 'tokenValidity'])
  const secretKey = body.secretKey as string
  assert.match(secretKey, /^[A-Z2-7]{32}$/, '160 bits of base32, upper case, no padding')
  assert.equal(body.otpURL, `otpauth://totp/Acme%20Portal:jane.doe%40example.com?secret=${secretKey}&issuer=Acme%20Portal&algorithm=SHA1&digits=6&period=30`)
  assert.equal(body.tokenValidity, 30)
  assert.equal(body.tokenLength, 6)
  assert.equal(body.algorithm, 'SHA1')

  const scanned = decodeQr(dataUrlBytes(body.QRCode as string, 'image/png'))
  assert.equal(scanned.text, body.otpURL)

  const fromUrl = URI.parse(scanned.text) as TOTP
  const expected = fromUrl.generate({ timestamp: app.clock.now() })
  assert.equal(body.otp, expected)
  const current = (await (await post(app.url, '/totp/getOTP', app.key, { secret: fromUrl.secret.base32 })).json()) as { otp: string }
  assert.equal(current.otp, expected)

  const first = await post(app.url, '/totp/verifyOTP', app.key, { secret: secretKey, token: expected })
  assert.equal(first.status, 200)
  assert.deepEqual(await first.json(), { type: 'Success', valid: true, message: 'OTP verified' })
  const replay = await post(app.url, '/totp/verifyOTP', app.key, { secret: secretKey, token: expected })
  assert.equal(replay.status, 400)
  assert.deepEqual(await codes(replay), ['OTP_REUSED'])

  const record = await app.store.onboarding.get(app.accountId, 'Acme Portal', 'jane.doe@example.com')
  assert.ok(record)
  assert.equal(record.period, 30)
  assert.ok(!JSON.stringify(record).includes(secretKey), 'the record keeps a fingerprint, not the secret')
})

test('onboardUser honours tokenValidity, tokenLength and algorithm, and re-onboarding issues a new secret', async (t) => {
  const app = await startApp(t)
  const fields = { userID: 'u1', applicationID: 'app', tokenValidity: '60', tokenLength: '8', algorithm: 'sha512' }
  const a = (await (await post(app.url, '/totp/onboardUser', app.key, fields)).json()) as Record<string, string | number>
  assert.equal(a.algorithm, 'SHA512')
  assert.equal(a.tokenLength, 8)
  assert.equal(a.tokenValidity, 60)
  assert.match(a.otp as string, /^\d{8}$/)
  assert.ok((a.expiresIn as number) >= 1 && (a.expiresIn as number) <= 60)
  const parsed = URI.parse(a.otpURL as string) as TOTP
  assert.equal(parsed.period, 60)
  assert.equal(parsed.generate({ timestamp: app.clock.now() }), a.otp)
  const before = await app.store.onboarding.get(app.accountId, 'app', 'u1')

  app.clock.advance(5000)
  const b = (await (await post(app.url, '/totp/onboardUser', app.key, { userID: 'u1', applicationID: 'app' })).json()) as Record<string, string>
  assert.notEqual(b.secretKey, a.secretKey)
  const after = await app.store.onboarding.get(app.accountId, 'app', 'u1')
  assert.ok(before && after)
  assert.notEqual(after.secretFingerprint, before.secretFingerprint)
  assert.equal(after.algorithm, 'SHA1')
  assert.equal(after.createdAt, before.createdAt)
  assert.ok(after.updatedAt > before.updatedAt)
})

test('JSON bodies are accepted too', async (t) => {
  const app = await startApp(t)
  const secret = new Secret().base32
  const res = await fetch(`${app.url}/totp/getOTP`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': app.key },
    body: JSON.stringify({ secret, tokenLength: 7 }),
  })
  assert.equal(res.status, 200)
  assert.match(((await res.json()) as { otp: string }).otp, /^\d{7}$/)
})
