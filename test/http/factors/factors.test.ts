/**
 * Managed factors over HTTP: the lifecycle (create, activate, verify, list, delete), the
 * per-user lockout and replay rule, resync, recovery codes, and the walls between accounts.
 * Codes come from the `otpauth` package (an independent implementation), fed the secret the
 * creation answer showed.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { codes, createCaller, get, post, startApp, testClock } from '../../support/helper.ts'
import { codeOf, createFactor, enroll, path, wrong, type Created } from '../../support/factors.ts'
import { toolSkip } from '../../support/services.ts'
import { execFileSync } from 'node:child_process'

const T0 = Date.UTC(2026, 0, 1, 12, 0, 15)

test('a factor is created pending, activated by its first code, then verifies the user; its secret is shown once', async (t) => {
  const app = await startApp(t, {}, testClock(T0))
  const f = await createFactor(app, 'user-42', { label: 'Work phone' })
  assert.match(f.factorID, /^fct_[0-9a-f]{16}$/)
  assert.equal(f.otpURL, `otpauth://totp/Acme:user-42?secret=${f.secretKey}&issuer=Acme&algorithm=SHA1&digits=6&period=30`)
  assert.equal(new Date(f.expiresAt).getTime(), T0 + 600_000)
  assert.match(f.QRCode, /^data:image\/png;base64,/)

  const pending = await post(app.url, path('user-42', '/verify'), app.key, { token: codeOf(f, T0) })
  assert.equal(pending.status, 409)
  assert.deepEqual(await codes(pending), ['NO_ACTIVE_FACTOR'])

  const act = await post(app.url, path('user-42', `/factors/${f.factorID}/activate`), app.key, { token: codeOf(f, T0) })
  assert.equal(act.status, 200)
  assert.equal(((await act.json()) as { status: string }).status, 'active')

  // The activation used the step's code: the same code again is a replay.
  const replay = await post(app.url, path('user-42', '/verify'), app.key, { token: codeOf(f, T0) })
  assert.deepEqual(await codes(replay), ['OTP_REUSED'])
  app.clock.advance(30_000)
  const ok = await post(app.url, path('user-42', '/verify'), app.key, { token: codeOf(f, app.clock.now()) })
  assert.equal(ok.status, 200)
  assert.deepEqual(await ok.json(), { type: 'Success', valid: true, message: 'OTP verified', factorID: f.factorID })

  const list = await get(app.url, path('user-42', '/factors'), app.key)
  assert.equal(list.status, 200)
  const body = (await list.json()) as { factors: Record<string, unknown>[]; recoveryCodesLeft: number }
  assert.equal(body.factors.length, 1)
  assert.equal(body.factors[0]!.status, 'active')
  assert.equal(body.factors[0]!.label, 'Work phone')
  assert.equal(body.recoveryCodesLeft, 0)
  const text = JSON.stringify(body)
  assert.ok(!text.includes(f.secretKey), 'the listing never shows the secret')
  assert.ok(!text.includes('sealed'))
})

test('a user with several factors is verified by any of them, and the answer names the one that matched', async (t) => {
  const app = await startApp(t, {}, testClock(T0))
  const a = await enroll(app, 'u')
  // One code per user per time step (replay protection is the user's): the second device enrols a step later.
  app.clock.advance(30_000)
  const b = await enroll(app, 'u', { profile: 'any', algorithm: 'SHA256', tokenLength: '8', tokenValidity: '60' })
  app.clock.advance(60_000)
  const byB = await post(app.url, path('u', '/verify'), app.key, { token: codeOf(b, app.clock.now()) })
  assert.equal(byB.status, 200)
  assert.equal(((await byB.json()) as { factorID: string }).factorID, b.factorID)
  app.clock.advance(60_000)
  const byA = await post(app.url, path('u', '/verify'), app.key, { token: codeOf(a, app.clock.now()) })
  assert.equal(((await byA.json()) as { factorID: string }).factorID, a.factorID)
})

test('a pending factor not activated in FACTOR_PENDING_SECONDS is gone', async (t) => {
  const app = await startApp(t, { FACTOR_PENDING_SECONDS: '60' }, testClock(T0))
  const f = await createFactor(app, 'late')
  app.clock.advance(61_000)
  const res = await post(app.url, path('late', `/factors/${f.factorID}/activate`), app.key, { token: codeOf(f, app.clock.now()) })
  assert.equal(res.status, 404)
  assert.deepEqual(await codes(res), ['FACTOR_NOT_FOUND'])
  const list = (await (await get(app.url, path('late', '/factors'), app.key)).json()) as { factors: unknown[] }
  assert.deepEqual(list.factors, [])
})

test('another account sees no trace of a user: the same 404 as for a user that does not exist', async (t) => {
  const app = await startApp(t, {}, testClock(T0))
  const f = await enroll(app, 'shared-name')
  const other = await createCaller(app.accounts)
  for (const key of [other.apiKey]) {
    const answers = [
      await get(app.url, path('shared-name', '/factors'), key),
      await post(app.url, path('shared-name', '/verify'), key, { token: codeOf(f, T0 + 30_000) }),
      await post(app.url, path('shared-name', '/recovery-codes'), key, {}),
      await post(app.url, path('shared-name', '/recover'), key, { code: 'aaaa-bbbb-cccc' }),
      await fetch(app.url + path('shared-name'), { method: 'DELETE', headers: { 'x-api-key': key } }),
    ]
    for (const res of answers) {
      assert.equal(res.status, 404)
      assert.deepEqual(await codes(res), ['USER_NOT_FOUND'])
    }
    const none = await get(app.url, path('nobody', '/factors'), key)
    assert.deepEqual(await codes(none), ['USER_NOT_FOUND'])
    const del = await fetch(app.url + path('shared-name', `/factors/${f.factorID}`), { method: 'DELETE', headers: { 'x-api-key': key } })
    assert.equal(del.status, 404)
    assert.deepEqual(await codes(del), ['FACTOR_NOT_FOUND'])
  }
  // And the owner's factor is untouched.
  const mine = await post(app.url, path('shared-name', '/verify'), app.key, { token: codeOf(f, T0 + 30_000) })
  assert.equal(mine.status, 200)
})

test("resync stores the device's drift; verification then follows the device's clock", async (t) => {
  const app = await startApp(t, {}, testClock(T0))
  const f = await enroll(app, 'drifty')
  app.clock.advance(30_000)
  const device = app.clock.now() + 5 * 60_000 // five minutes fast: ten steps
  const far = await post(app.url, path('drifty', '/verify'), app.key, { token: codeOf(f, device + 30_000) })
  assert.deepEqual(await codes(far), ['OTP_INVALID'])
  const res = await post(app.url, path('drifty', `/factors/${f.factorID}/resync`), app.key, {
    token: codeOf(f, device + 30_000),
    nextToken: codeOf(f, device + 60_000),
  })
  assert.equal(res.status, 200, await res.clone().text())
  // The second code is the device's current one: ten steps ahead, and one more for the code shown after the first.
  assert.deepEqual(await res.json(), { type: 'Success', factorID: f.factorID, driftSteps: 12, driftSeconds: 360 })
  app.clock.advance(30_000)
  const ok = await post(app.url, path('drifty', '/verify'), app.key, { token: codeOf(f, device + 90_000) })
  assert.equal(ok.status, 200, await ok.clone().text())
  const bad = await post(app.url, path('drifty', `/factors/${f.factorID}/resync`), app.key, { token: '123456', nextToken: '654321' })
  assert.deepEqual(await codes(bad), ['RESYNC_FAILED'])
})

test('recovery codes: ten, shown once, each accepted once, a new set replaces the old, counted with the factors', async (t) => {
  const app = await startApp(t, {}, testClock(T0))
  await enroll(app, 'r')
  const res = await post(app.url, path('r', '/recovery-codes'), app.key, {})
  assert.equal(res.status, 201)
  const { recoveryCodes } = (await res.json()) as { recoveryCodes: string[] }
  assert.equal(recoveryCodes.length, 10)
  assert.equal(new Set(recoveryCodes).size, 10)
  for (const c of recoveryCodes) assert.match(c, /^[a-z2-7]{4}-[a-z2-7]{4}-[a-z2-7]{4}$/)
  const use = await post(app.url, path('r', '/recover'), app.key, { code: recoveryCodes[0]!.toUpperCase().replace(/-/g, ' ') })
  assert.equal(use.status, 200)
  assert.deepEqual(await use.json(), { type: 'Success', valid: true, recoveryCodesLeft: 9 })
  const again = await post(app.url, path('r', '/recover'), app.key, { code: recoveryCodes[0]! })
  assert.deepEqual(await codes(again), ['RECOVERY_CODE_INVALID'])
  const list = (await (await get(app.url, path('r', '/factors'), app.key)).json()) as { recoveryCodesLeft: number }
  assert.equal(list.recoveryCodesLeft, 9)
  const renewed = (await (await post(app.url, path('r', '/recovery-codes'), app.key, {})).json()) as { recoveryCodes: string[] }
  const old = await post(app.url, path('r', '/recover'), app.key, { code: recoveryCodes[1]! })
  assert.deepEqual(await codes(old), ['RECOVERY_CODE_INVALID'], 'the earlier set is gone')
  assert.equal((await post(app.url, path('r', '/recover'), app.key, { code: renewed.recoveryCodes[1]! })).status, 200)
})

test('a factor and a user are deleted; their codes stop working', async (t) => {
  const app = await startApp(t, {}, testClock(T0))
  const f = await enroll(app, 'd')
  const del = await fetch(app.url + path('d', `/factors/${f.factorID}`), { method: 'DELETE', headers: { 'x-api-key': app.key } })
  assert.equal(del.status, 204)
  const res = await post(app.url, path('d', '/verify'), app.key, { token: codeOf(f, T0 + 30_000) })
  assert.deepEqual(await codes(res), ['NO_ACTIVE_FACTOR'])
  const user = await fetch(app.url + path('d'), { method: 'DELETE', headers: { 'x-api-key': app.key } })
  assert.equal(user.status, 204)
  assert.deepEqual(await codes(await get(app.url, path('d', '/factors'), app.key)), ['USER_NOT_FOUND'])
})

test('the factors per user are limited', async (t) => {
  const app = await startApp(t, { FACTOR_MAX_PER_USER: '2' }, testClock(T0))
  await createFactor(app, 'many')
  await createFactor(app, 'many')
  const third = await post(app.url, path('many', '/factors'), app.key, { applicationID: 'Acme' })
  assert.equal(third.status, 409)
  assert.deepEqual(await codes(third), ['FACTOR_LIMIT'])
})

test("factors' codes agree with oathtool over SHA1/256/512 × 6/8 digits × 30/60 s", { skip: toolSkip('oathtool', 'oathtool') }, async (t) => {
  const app = await startApp(t, { PLAN_RATE: '0' }, testClock(T0))
  const oath = (f: Created, at: number) =>
    execFileSync(
      'oathtool',
      [`--totp=${f.algorithm}`, '-d', String(f.tokenLength), '-s', `${f.tokenValidity}s`, '-b', f.secretKey, '-N', `@${Math.floor(at / 1000)}`],
      { encoding: 'utf8' },
    ).trim()
  let n = 0
  for (const algorithm of ['SHA1', 'SHA256', 'SHA512']) {
    for (const digits of [6, 8]) {
      for (const period of [30, 60]) {
        const user = `oath-${n++}`
        const f = await createFactor(app, user, { profile: 'any', algorithm, tokenLength: String(digits), tokenValidity: String(period) })
        assert.match(f.otpURL, new RegExp(`algorithm=${algorithm}&digits=${digits}&period=${period}$`))
        const first = await post(app.url, path(user, `/factors/${f.factorID}/activate`), app.key, { token: oath(f, app.clock.now()) })
        assert.equal(first.status, 200, `activate ${algorithm}/${digits}/${period}`)
        const later = app.clock.now() + period * 1000
        const ok = await post(app.url, path(user, '/verify'), app.key, { token: oath(f, later) })
        // The next step is one step ahead of the server's: inside the window.
        assert.equal(ok.status, 200, `verify ${algorithm}/${digits}/${period}`)
      }
    }
  }
})

test("a factor is made for an authenticator app's profile: universal by default; a parameter outside it is refused, naming the app", async (t) => {
  const app = await startApp(t, {}, testClock(T0))
  const refused = await post(app.url, path('p', '/factors'), app.key, { applicationID: 'Acme', algorithm: 'SHA256' })
  assert.equal(refused.status, 400)
  const body = (await refused.json()) as { code: string; message: string }[]
  assert.deepEqual(
    body.map((e) => e.code),
    ['PROFILE_UNSUPPORTED'],
  )
  assert.match(body[0]!.message, /does not support algorithm SHA256/)
  const ms = await post(app.url, path('p', '/factors'), app.key, { applicationID: 'Acme', profile: 'microsoft', tokenLength: '8' })
  assert.match(JSON.stringify(await ms.json()), /Microsoft Authenticator does not support tokenLength 8/)
  const unknown = await post(app.url, path('p', '/factors'), app.key, { applicationID: 'Acme', profile: 'nokia' })
  assert.deepEqual(await codes(unknown), ['PROFILE_INVALID'])
  assert.deepEqual(await codes(await get(app.url, path('p', '/factors'), app.key)), ['USER_NOT_FOUND'], 'nothing was stored')
  const aegis = await createFactor(app, 'p', { profile: 'aegis', algorithm: 'SHA512', tokenLength: '10', tokenValidity: '45' })
  assert.match(aegis.otpURL, /algorithm=SHA512&digits=10&period=45$/)
})

test('a user deleted while locked and enrolled again starts unlocked; no code is accepted twice', async (t) => {
  const app = await startApp(t, { OTP_MAX_FAILURES: '2' }, testClock(T0))
  const f = await enroll(app, 'again')
  app.clock.advance(30_000)
  const used = codeOf(f, app.clock.now())
  assert.equal((await post(app.url, path('again', '/verify'), app.key, { token: used })).status, 200)
  for (let i = 0; i < 2; i++) await post(app.url, path('again', '/verify'), app.key, { token: wrong(f, app.clock.now()) })
  assert.equal((await post(app.url, path('again', '/verify'), app.key, { token: used })).status, 429)
  assert.equal((await fetch(app.url + path('again'), { method: 'DELETE', headers: { 'x-api-key': app.key } })).status, 204)
  // The replay record stays: a new factor's first code in the same step would be a replay of the user's.
  app.clock.advance(30_000)
  const g = await enroll(app, 'again')
  app.clock.advance(30_000)
  assert.equal((await post(app.url, path('again', '/verify'), app.key, { token: codeOf(g, app.clock.now()) })).status, 200)
})

test("resync judges its two codes only: a code accepted earlier in the step does not make them replays, and the device's next code verifies", async (t) => {
  const app = await startApp(t, { OTP_MAX_FAILURES: '3' }, testClock(T0))
  for (const [user, steps] of [
    ['ahead', 3],
    ['behind', -3],
  ] as const) {
    // Enrolled (the activation accepts this step's code), then resynced within the same step.
    const f = await enroll(app, user)
    const device = app.clock.now() + steps * 30_000
    const res = await post(app.url, path(user, `/factors/${f.factorID}/resync`), app.key, {
      token: codeOf(f, device - 30_000),
      nextToken: codeOf(f, device),
    })
    assert.equal(res.status, 200, await res.clone().text())
    assert.equal(((await res.json()) as { driftSteps: number }).driftSteps, steps)
    // The resync's codes are used now; a wrong code is a failure; the resync counted none (else this third would lock).
    assert.deepEqual(await codes(await post(app.url, path(user, '/verify'), app.key, { token: codeOf(f, device) })), ['OTP_REUSED'])
    assert.deepEqual(await codes(await post(app.url, path(user, '/verify'), app.key, { token: wrong(f, device) })), ['OTP_INVALID'])
    // The device's next code is not a replay.
    app.clock.advance(30_000)
    const next = await post(app.url, path(user, '/verify'), app.key, { token: codeOf(f, device + 30_000) })
    assert.equal(next.status, 200, await next.clone().text())
    app.clock.advance(30_000)
  }
})
