/**
 * The user's lockout, replay rule and single-use recovery codes under parallel calls,
 * through HTTP, on every store the service runs on (the lesson of the first lockout: a check
 * and a write in two round trips passed every sequential test).
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { post, startApp, testClock } from '../../support/helper.ts'
import { createDatabase, redisEnv, skipUnless, type StoreEnv as Env } from '../../support/services.ts'
import { codeOf, createFactor, enroll, path, wrong } from '../../support/factors.ts'

const T0 = Date.UTC(2026, 0, 1, 12, 0, 15)

const stores: [string, Env, false | string][] = [
  ['sqlite', async () => ({}), false],
  ['postgres', async (t) => ({ DATABASE_URL: await createDatabase(t) }), skipUnless('TEST_DATABASE_URL')],
  ['sqlite+redis', redisEnv, skipUnless('TEST_REDIS_URL')],
  ['postgres+redis', async (t) => ({ DATABASE_URL: await createDatabase(t), ...(await redisEnv(t)) }), skipUnless('TEST_DATABASE_URL', 'TEST_REDIS_URL')],
]

const statuses = async (answers: Promise<Response>[]) => {
  const all = await Promise.all(answers)
  await Promise.all(all.map((r) => r.arrayBuffer()))
  return all.map((r) => r.status)
}
const count = (xs: number[], s: number) => xs.filter((x) => x === s).length

for (const [name, env, skip] of stores) {
  test(`${name}: a user's 150 parallel wrong codes evaluate at most OTP_MAX_FAILURES; 100 parallel right codes are accepted once`, { skip }, async (t) => {
    const app = await startApp(t, { ...(await env(t)), OTP_MAX_FAILURES: '5', PLAN_RATE: '0', FACTOR_USER_LIMIT: '0' }, testClock(T0))
    const f = await enroll(app, 'guessed')
    app.clock.advance(30_000)
    const guesses = await statuses(Array.from({ length: 150 }, () => post(app.url, path('guessed', '/verify'), app.key, { token: wrong(f, app.clock.now()) })))
    assert.equal(count(guesses, 400), 5, 'evaluated guesses')
    assert.equal(count(guesses, 429), 145, 'the rest wait, unevaluated')
    // The lockout is the user's: the right code waits too.
    const locked = await post(app.url, path('guessed', '/verify'), app.key, { token: codeOf(f, app.clock.now()) })
    assert.equal(locked.status, 429)
    assert.ok(Number(locked.headers.get('retry-after')) > 0)

    const g = await enroll(app, 'rushed')
    app.clock.advance(30_000)
    const rights = await statuses(Array.from({ length: 100 }, () => post(app.url, path('rushed', '/verify'), app.key, { token: codeOf(g, app.clock.now()) })))
    assert.equal(count(rights, 200), 1, 'exactly one acceptance')
    // Each replay is a failure like any other: five are answered, then the user is locked.
    assert.equal(count(rights, 400), 5)
    assert.equal(count(rights, 429), 94)
  })

  test(`${name}: one recovery code used by 50 parallel calls is accepted once; parallel wrong codes stop at the lockout`, { skip }, async (t) => {
    const app = await startApp(t, { ...(await env(t)), OTP_MAX_FAILURES: '5', PLAN_RATE: '0', FACTOR_USER_LIMIT: '0' }, testClock(T0))
    await createFactor(app, 'r')
    const { recoveryCodes } = (await (await post(app.url, path('r', '/recovery-codes'), app.key, {})).json()) as { recoveryCodes: string[] }
    const uses = await statuses(Array.from({ length: 50 }, () => post(app.url, path('r', '/recover'), app.key, { code: recoveryCodes[0]! })))
    assert.equal(count(uses, 200), 1)
    // Each refused use counted as a failure: the user is locked now, and the rest waited.
    assert.equal(count(uses, 200) + count(uses, 400) + count(uses, 429), 50)
    assert.ok(count(uses, 400) <= 5, `${count(uses, 400)} refusals evaluated`)

    await createFactor(app, 'g')
    await post(app.url, path('g', '/recovery-codes'), app.key, {})
    const guesses = await statuses(
      Array.from({ length: 100 }, (_, i) => post(app.url, path('g', '/recover'), app.key, { code: `aaaa-bbbb-${String(i).padStart(4, 'c')}` })),
    )
    assert.equal(count(guesses, 400), 5)
    assert.equal(count(guesses, 429), 95)
  })

  test(`${name}: attempt limits: 200 parallel verifications of one user and one rate limit key let through exactly the limit, untried beyond it`, {
    skip,
  }, async (t) => {
    // The lockout far away: what stops the guesses here is the attempt limit alone.
    const app = await startApp(
      t,
      { ...(await env(t)), OTP_MAX_FAILURES: '100', PLAN_RATE: '0', FACTOR_USER_LIMIT: '7', FACTOR_KEY_LIMIT: '9', FACTOR_LIMIT_WINDOW_SECONDS: '60' },
      testClock(T0),
    )
    const f = await enroll(app, 'u')
    app.clock.advance(30_000)
    const guess = (user: string, rateLimitKey?: string) =>
      post(app.url, path(user, '/verify'), app.key, { token: wrong(f, app.clock.now()), ...(rateLimitKey === undefined ? {} : { rateLimitKey }) })
    // The activation was the user's first attempt of this window: six more get through.
    const answers = await Promise.all(Array.from({ length: 200 }, () => guess('u', '203.0.113.7')))
    const bodies = await Promise.all(answers.map(async (r) => ({ status: r.status, retry: r.headers.get('retry-after'), body: await r.json() })))
    assert.equal(bodies.filter((b) => b.status === 400).length, 6, 'tried: the user limit, less the activation')
    const limited = bodies.filter((b) => b.status === 429)
    assert.equal(limited.length, 194)
    for (const b of limited) {
      assert.equal((b.body as { code: string }).code, 'ATTEMPTS_LIMITED')
      // The window is [12:00:00, 12:01:00); now is 12:00:45.
      assert.equal(b.retry, '15')
    }

    // The rate limit key, across the account's users: nine of 200 spread over 40 users get through (each user's own limit is far).
    for (let i = 0; i < 40; i++) await enroll(app, `spread-${i}`)
    const spread = await Promise.all(Array.from({ length: 200 }, (_, i) => guess(`spread-${i % 40}`, '198.51.100.1')))
    const spreadStatuses = await Promise.all(spread.map(async (r) => ({ status: r.status, code: (await r.json()) as unknown })))
    assert.equal(spreadStatuses.filter((r) => r.status === 400).length, 9, 'tried: the key limit')
    assert.equal(spreadStatuses.filter((r) => r.status === 429).length, 191)

    // Refused attempts took nothing: in the next window each limit admits again.
    app.clock.advance(60_000)
    assert.equal((await post(app.url, path('u', '/verify'), app.key, { token: codeOf(f, app.clock.now()), rateLimitKey: '203.0.113.7' })).status, 200)
  })

  test(`${name}: attempts refused by the limit are no failures: a flood from one source cannot lock the user out within a window`, { skip }, async (t) => {
    const app = await startApp(
      t,
      { ...(await env(t)), OTP_MAX_FAILURES: '5', PLAN_RATE: '0', FACTOR_USER_LIMIT: '4', FACTOR_LIMIT_WINDOW_SECONDS: '60' },
      testClock(T0),
    )
    const f = await enroll(app, 'v')
    // A new window: the activation counted in the last one.
    app.clock.advance(60_000)
    const flood = await statuses(Array.from({ length: 100 }, () => post(app.url, path('v', '/verify'), app.key, { token: wrong(f, app.clock.now()) })))
    assert.equal(count(flood, 400), 4)
    assert.equal(count(flood, 429), 96)
    // Four failures, under OTP_MAX_FAILURES: the user's right code in the next window is taken.
    app.clock.advance(60_000)
    assert.equal((await post(app.url, path('v', '/verify'), app.key, { token: codeOf(f, app.clock.now()) })).status, 200)
  })
}
