import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Secret, TOTP } from 'otpauth'
import { post, startApp, codes, testClock, type Running } from '../../support/helper.ts'

const T0 = Date.UTC(2026, 0, 1, 12, 0, 15) // 15 s into a 30 s step

function totp(secret: string, algorithm = 'SHA1', digits = 6, period = 30): TOTP {
  return new TOTP({ secret: Secret.fromBase32(secret), algorithm, digits, period })
}

/** wrongCode is a code that matches none of the steps in the window at `now`. */
function wrongCode(secret: string, now: number): string {
  const t = totp(secret)
  const taken = new Set([-1, 0, 1].map((d) => t.generate({ timestamp: now + d * 30_000 })))
  for (let i = 0; ; i++) {
    const code = String(i).padStart(6, '0')
    if (!taken.has(code)) return code
  }
}

const verify = (app: Running, secret: string, token: string, extra: Record<string, string> = {}) =>
  post(app.url, '/totp/verifyOTP', app.key, { secret, token, ...extra })

test('the current step and one step either side are accepted; two steps away is not', async (t) => {
  const app = await startApp(t, {}, testClock(T0))
  for (const delta of [-1, 0, 1]) {
    const secret = new Secret().base32
    const res = await verify(app, secret, totp(secret).generate({ timestamp: T0 + delta * 30_000 }))
    assert.equal(res.status, 200, `step ${delta}`)
  }
  for (const delta of [-2, 2]) {
    const secret = new Secret().base32
    const res = await verify(app, secret, totp(secret).generate({ timestamp: T0 + delta * 30_000 }))
    assert.equal(res.status, 400, `step ${delta}`)
    assert.deepEqual(await codes(res), ['OTP_INVALID'])
  }
})

test('a step at or before the last accepted one is refused as reused; a later one is accepted', async (t) => {
  const app = await startApp(t)
  app.clock.set(T0)
  const secret = new Secret().base32
  const code = (d: number) => totp(secret).generate({ timestamp: T0 + d * 30_000 })
  assert.equal((await verify(app, secret, code(1))).status, 200)
  const earlier = await verify(app, secret, code(0))
  assert.equal(earlier.status, 400)
  assert.deepEqual(await codes(earlier), ['OTP_REUSED'])
  app.clock.advance(60_000)
  assert.equal((await verify(app, secret, code(2))).status, 200, 'the next step is a new code')
})

test('codes with other digits, period and algorithm verify against their own parameters', async (t) => {
  const app = await startApp(t)
  app.clock.set(T0)
  const secret = new Secret().base32
  const code = totp(secret, 'SHA256', 8, 60).generate({ timestamp: T0 })
  assert.equal((await verify(app, secret, code, { tokenValidity: '60' })).status, 400, 'SHA1 by default')
  assert.equal((await verify(app, secret, code, { tokenValidity: '60', algorithm: 'SHA256' })).status, 200)
})

test('five failures lock the secret for a doubling delay, capped at an hour; a success resets the count', async (t) => {
  const app = await startApp(t)
  app.clock.set(T0)
  const secret = new Secret().base32
  for (let i = 0; i < 5; i++) {
    const res = await verify(app, secret, wrongCode(secret, app.clock.now()))
    assert.equal(res.status, 400)
    assert.deepEqual(await codes(res), ['OTP_INVALID'])
  }
  const good = () => totp(secret).generate({ timestamp: app.clock.now() })
  const locked = await verify(app, secret, good())
  assert.equal(locked.status, 429, 'even the right code waits: it is not evaluated')
  assert.equal(locked.headers.get('retry-after'), '60')
  // The message Renda.io clients read, and the catalogue's code.
  assert.deepEqual(await locked.json(), { message: 'Too many failed verifications for this secret. Try again in 60 seconds.', code: 'OTP_LOCKED' })

  app.clock.advance(59_000)
  assert.equal((await verify(app, secret, good())).headers.get('retry-after'), '1')

  // Each further failure doubles the delay, up to the cap.
  let delay = 60
  for (const expected of [120, 240, 480, 960, 1920, 3600, 3600]) {
    app.clock.advance(delay * 1000)
    assert.equal((await verify(app, secret, wrongCode(secret, app.clock.now()))).status, 400)
    const res = await verify(app, secret, good())
    assert.equal(res.status, 429)
    assert.equal(res.headers.get('retry-after'), String(expected))
    delay = expected
  }

  app.clock.advance(delay * 1000)
  assert.equal((await verify(app, secret, good())).status, 200, 'the right code after the delay')
  for (let i = 0; i < 4; i++) {
    app.clock.advance(30_000)
    assert.equal((await verify(app, secret, wrongCode(secret, app.clock.now()))).status, 400)
  }
  app.clock.advance(30_000)
  assert.equal((await verify(app, secret, good())).status, 200, 'four failures after a success do not lock')
})

test('the lock is per secret: another secret of the same account still verifies', async (t) => {
  const app = await startApp(t)
  app.clock.set(T0)
  const locked = new Secret().base32
  for (let i = 0; i < 6; i++) await verify(app, locked, wrongCode(locked, T0))
  assert.equal((await verify(app, locked, wrongCode(locked, T0))).status, 429)
  const other = new Secret().base32
  assert.equal((await verify(app, other, totp(other).generate({ timestamp: T0 }))).status, 200)
})
