/**
 * Drop-in for Renda.io clients: the secrets Renda.io issued (80 bits) give the codes an
 * independent implementation gives, and the answers carry Renda.io's field names beside ours.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createHmac } from 'node:crypto'
import { execFileSync } from 'node:child_process'
import { post, startApp, codes, testClock } from '../../support/helper.ts'

/** Renda.io's documented example secret: 16 base32 characters, 80 bits. */
const RENDA_SECRET = 'LVJFKZI5AJZXIZKG'
const TIMES = [59, 1111111109, 1234567890, 1700000000, 2000000000].map((s) => s * 1000)

/** hotp is RFC 4226 §5.3 written out on node:crypto, independent of the service's code. */
function hotp(key: Buffer, counter: number, digits = 6): string {
  const message = Buffer.alloc(8)
  message.writeBigUInt64BE(BigInt(counter))
  const mac = createHmac('sha1', key).update(message).digest()
  const offset = mac[mac.length - 1]! & 0xf
  return String((mac.readUInt32BE(offset) & 0x7fffffff) % 10 ** digits).padStart(digits, '0')
}

const oathtool = (() => {
  try {
    execFileSync('oathtool', ['--version'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
})()
const required = process.env.TESSERA_REQUIRE_SERVICES === '1'
if (!oathtool && !required) process.stderr.write('# SKIPPED: oathtool is not installed (apt-get install oathtool)\n')

test("Renda.io's 80-bit example secret gives the codes oathtool gives, and verifies", { skip: !oathtool && !required && 'needs oathtool' }, async (t) => {
  const app = await startApp(t, {}, testClock(TIMES[0]))
  for (const at of TIMES) {
    app.clock.set(at)
    const expected = execFileSync('oathtool', ['--totp', '-b', RENDA_SECRET, '-N', `@${at / 1000}`], { encoding: 'utf8' }).trim()
    const got = await post(app.url, '/totp/getOTP', app.key, { secret: RENDA_SECRET })
    assert.equal(got.status, 200)
    const body = (await got.json()) as { otp: string; currentToken: string; timeUsed: number; expiresIn: number }
    assert.equal(body.otp, expected, `at ${at / 1000}`)
    assert.equal(body.currentToken, expected)
    const verified = await post(app.url, '/totp/verifyOTP', app.key, { secret: RENDA_SECRET, token: expected })
    assert.equal(verified.status, 200, `verify at ${at / 1000}`)
  }
})

test('80-bit secrets match RFC 4226 computed independently; MIN_SECRET_BITS refuses weaker ones', async (t) => {
  const app = await startApp(t, {}, testClock(1700000000_000))
  const key = Buffer.from('5d5255651d0273746546', 'hex') // LVJFKZI5AJZXIZKG
  const got = (await (await post(app.url, '/totp/getOTP', app.key, { secret: RENDA_SECRET })).json()) as { otp: string }
  assert.equal(got.otp, hotp(key, Math.floor(1700000000 / 30)))

  const short = await post(app.url, '/totp/getOTP', app.key, { secret: RENDA_SECRET.slice(0, 15) })
  assert.deepEqual(await codes(short), ['SECRET_INVALID'], '75 bits')

  const strict = await startApp(t, { MIN_SECRET_BITS: '128' })
  for (const path of ['/totp/getOTP', '/totp/verifyOTP']) {
    const res = await post(strict.url, path, strict.key, { secret: RENDA_SECRET, token: '123456' })
    assert.equal(res.status, 400)
    const body = (await res.json()) as { code: string; message: string }[]
    assert.deepEqual(
      body.map((e) => e.code),
      ['SECRET_INVALID'],
    )
    assert.match(body[0]!.message, /at least 128 bits \(26 characters\)/)
  }
})

test('a Renda.io client reads token from onboardUser, and currentToken and timeUsed from getOTP', async (t) => {
  const at = Date.UTC(2026, 0, 1, 12, 0, 10) // 10 s into a 30 s step
  const app = await startApp(t, {}, testClock(at))
  const onboard = (await (await post(app.url, '/totp/onboardUser', app.key, { userID: 'jane', applicationID: 'Acme' })).json()) as Record<string, unknown>
  for (const field of ['secretKey', 'otpURL', 'QRCode', 'token']) assert.equal(typeof onboard[field], 'string', field)
  assert.match(onboard.token as string, /^\d{6}$/)
  assert.equal(onboard.token, onboard.otp)

  const current = (await (await post(app.url, '/totp/getOTP', app.key, { secret: onboard.secretKey as string })).json()) as Record<string, unknown>
  assert.equal(current.currentToken, onboard.token)
  assert.equal(current.timeUsed, 10, 'seconds elapsed in the current step')
  assert.equal(current.expiresIn, 20)
  const verified = await post(app.url, '/totp/verifyOTP', app.key, { secret: onboard.secretKey as string, token: current.currentToken as string })
  assert.equal(verified.status, 200)
})
