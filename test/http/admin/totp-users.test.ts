/**
 * The admin API's users of managed TOTP factors, as operators meet it: the real public app
 * and the real admin listener over one store, on real ports, on SQLite and on PostgreSQL +
 * Redis. What an operator does is checked where it matters, on the public factor routes: a
 * locked user verifies again at once after the clear; a deleted user's codes stop working.
 * Every admin answer is checked against the admin document.
 */
import { test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { createCaller, post, testClock, type Clock } from '../../support/helper.ts'
import { startAdmin as startAdminNode, type Admin } from '../../support/admin-helper.ts'
import { createDatabase, redisEnv, skipUnless, type StoreEnv as Env } from '../../support/services.ts'
import { codeOf, createFactor, enroll, path, wrong } from '../../support/factors.ts'
import { catalogue } from '../../../src/errors/catalogue.ts'

const T0 = Date.UTC(2026, 0, 1, 12, 0, 15)

const startAdmin = (t: TestContext, env: Record<string, string>, clock: Clock) =>
  startAdminNode(t, { OTP_MAX_FAILURES: '5', PLAN_RATE: '0', FACTOR_USER_LIMIT: '0', ...env }, clock)

function call(a: Admin, method: string, path: string, token: string): Promise<Response> {
  return fetch(a.url + path, { method, headers: { authorization: `Bearer ${token}` } })
}

async function json<T = Record<string, unknown>>(res: Response, status: number): Promise<T> {
  const text = await res.text()
  assert.equal(res.status, status, text)
  return JSON.parse(text) as T
}

async function errorCodes(res: Response, status: number): Promise<string[]> {
  const body = await json<{ code: string }[]>(res, status)
  for (const e of body) assert.equal(catalogue[e.code as keyof typeof catalogue]?.status, status, e.code)
  return body.map((e) => e.code)
}

const users = (accountId: string, userId?: string, rest = '') =>
  `/admin/v1/accounts/${encodeURIComponent(accountId)}/totp-users${userId === undefined ? '' : `/${encodeURIComponent(userId)}`}${rest}`

const statuses = async (answers: Promise<Response>[]) => {
  const all = await Promise.all(answers)
  await Promise.all(all.map((r) => r.arrayBuffer()))
  return all.map((r) => r.status)
}

interface UserState {
  accountId: string
  userID: string
  factors: Record<string, unknown>[]
  recoveryCodesLeft: number
  locked: boolean
  lockedUntil: string | null
}

const stores: [string, Env, false | string][] = [
  ['sqlite', async () => ({}), false],
  ['postgres+redis', async (t) => ({ DATABASE_URL: await createDatabase(t), ...(await redisEnv(t)) }), skipUnless('TEST_DATABASE_URL', 'TEST_REDIS_URL')],
]

for (const [name, env, skip] of stores) {
  const start = async (t: TestContext) => startAdmin(t, await env(t), testClock(T0))

  test(`${name}: a user locked by parallel wrong codes is shown locked, cleared by an operator, and verifies again at once; a read token reads and cannot change`, {
    skip,
  }, async (t) => {
    const a = await start(t)
    const user = 'alice/ü smith@example.com'
    const f = await enroll(a.pub, user)
    a.pub.clock.advance(30_000)
    const guesses = await statuses(Array.from({ length: 20 }, () => post(a.pub.url, path(user, '/verify'), a.pub.key, { token: wrong(f, a.pub.clock.now()) })))
    assert.equal(guesses.filter((s) => s === 400).length, 5)
    assert.equal(guesses.filter((s) => s === 429).length, 15)
    const right = () => post(a.pub.url, path(user, '/verify'), a.pub.key, { token: codeOf(f, a.pub.clock.now()) })
    assert.equal((await right()).status, 429, 'locked: even the right code waits')

    const list = await json<{ items: Record<string, unknown>[]; next: string | null }>(await call(a, 'GET', users(a.pub.accountId), a.read.secret), 200)
    assert.equal(list.next, null)
    assert.equal(list.items.length, 1)
    const { lockedUntil: listed, ...summary } = list.items[0]!
    assert.deepEqual(summary, { userID: user, createdAt: new Date(T0).toISOString(), activeFactors: 1, pendingFactors: 0, recoveryCodesLeft: 0, locked: true })
    assert.ok(Date.parse(listed as string) > a.pub.clock.now())

    const res = await call(a, 'GET', users(a.pub.accountId, user), a.read.secret)
    const text = await res.clone().text()
    const state = await json<UserState>(res, 200)
    assert.equal(state.userID, user)
    assert.equal(state.locked, true)
    assert.equal(state.lockedUntil, listed)
    assert.deepEqual(state.factors, [
      {
        factorID: f.factorID,
        type: 'totp',
        status: 'active',
        label: null,
        applicationID: 'Acme',
        profile: 'universal',
        algorithm: 'SHA1',
        tokenLength: 6,
        tokenValidity: 30,
        driftSteps: 0,
        createdAt: new Date(T0).toISOString(),
        activatedAt: new Date(T0).toISOString(),
        expiresAt: null,
      },
    ])
    assert.ok(!text.includes(f.secretKey) && !/sealed|secret/i.test(text), 'no secret, sealed or not')

    for (const method of ['POST', 'DELETE']) {
      const where = method === 'POST' ? users(a.pub.accountId, user, '/lockout/clear') : users(a.pub.accountId, user)
      assert.deepEqual(await errorCodes(await call(a, method, where, a.read.secret), 403), ['ADMIN_READ_ONLY'], method)
    }
    assert.equal((await right()).status, 429, 'the read token changed nothing')

    assert.deepEqual(await json(await call(a, 'POST', users(a.pub.accountId, user, '/lockout/clear'), a.write.secret), 200), { cleared: true })
    const again = await right()
    assert.equal(again.status, 200, await again.clone().text())
    assert.equal((await json<UserState>(await call(a, 'GET', users(a.pub.accountId, user), a.read.secret), 200)).locked, false)
    const events = (await a.pub.accounts.auditEvents({ action: 'factor-lockout.clear', limit: 10 })).items
    assert.deepEqual(
      events.map((e) => [e.actor, e.target, e.accountId, e.outcome, e.detail]),
      [[`admin-token:${a.write.id}`, { type: 'totp-user', id: user }, a.pub.accountId, 'success', { userID: user, cleared: true }]],
    )
  })

  test(`${name}: an operator deletes a user's factors and recovery codes: their codes stop working at once, the event says who; a second delete is 404`, {
    skip,
  }, async (t) => {
    const a = await start(t)
    const f = await enroll(a.pub, 'bob')
    const codes = await json<{ recoveryCodes: string[] }>(await post(a.pub.url, path('bob', '/recovery-codes'), a.pub.key, {}), 201)
    assert.equal((await json<UserState>(await call(a, 'GET', users(a.pub.accountId, 'bob'), a.read.secret), 200)).recoveryCodesLeft, 10)
    assert.deepEqual(await json(await call(a, 'DELETE', users(a.pub.accountId, 'bob'), a.write.secret), 200), { deleted: true, userID: 'bob' })
    a.pub.clock.advance(30_000)
    for (const res of [
      await post(a.pub.url, path('bob', '/verify'), a.pub.key, { token: codeOf(f, a.pub.clock.now()) }),
      await post(a.pub.url, path('bob', '/recover'), a.pub.key, { code: codes.recoveryCodes[0]! }),
    ]) {
      assert.equal(res.status, 404)
      assert.deepEqual(
        ((await res.json()) as { code: string }[]).map((e) => e.code),
        ['USER_NOT_FOUND'],
      )
    }
    assert.deepEqual(await errorCodes(await call(a, 'GET', users(a.pub.accountId, 'bob'), a.read.secret), 404), ['NOT_FOUND'])
    assert.deepEqual(await errorCodes(await call(a, 'DELETE', users(a.pub.accountId, 'bob'), a.write.secret), 404), ['NOT_FOUND'])
    const deleted = (await a.pub.accounts.auditEvents({ action: 'factor.deleted', limit: 10 })).items
    assert.deepEqual(
      deleted.map((e) => [e.actor, e.target, e.accountId, e.outcome, e.detail]),
      [
        [
          `admin-token:${a.write.id}`,
          { type: 'totp-user', id: 'bob' },
          a.pub.accountId,
          'success',
          { userID: 'bob', factorID: null, user: true, by: 'operator' },
        ],
      ],
      'one factor.deleted event (a webhook event): the refused second delete is recorded under another action',
    )
    const refused = (await a.pub.accounts.auditEvents({ action: 'factor-user.delete', limit: 10 })).items
    assert.deepEqual(
      refused.map((e) => e.outcome),
      ['failure'],
    )
    // The user may enrol again, from nothing.
    await enroll(a.pub, 'bob')
    assert.equal((await json<UserState>(await call(a, 'GET', users(a.pub.accountId, 'bob'), a.read.secret), 200)).recoveryCodesLeft, 0)
  })

  test(`${name}: another account's user is not found; users are paged by cursor; unknown accounts, bad cursors and hostile user IDs get a 4xx, never a 5xx`, {
    skip,
  }, async (t) => {
    const a = await start(t)
    const other = await createCaller(a.pub.accounts)
    await createFactor(a.pub, 'carol', {}, other.apiKey)
    for (const [method, rest] of [
      ['GET', ''],
      ['POST', '/lockout/clear'],
      ['DELETE', ''],
    ] as const) {
      assert.deepEqual(await errorCodes(await call(a, method, users(a.pub.accountId, 'carol', rest), a.write.secret), 404), ['NOT_FOUND'], `${method} ${rest}`)
      assert.deepEqual(
        await errorCodes(await call(a, method, users('acc_none', 'carol', rest), a.write.secret), 404),
        ['NOT_FOUND'],
        `${method} ${rest}: no account`,
      )
    }
    assert.deepEqual(await errorCodes(await call(a, 'GET', users('acc_none'), a.read.secret), 404), ['NOT_FOUND'])
    const carol = await json<UserState>(await call(a, 'GET', users(other.accountId, 'carol'), a.read.secret), 200)
    assert.deepEqual(
      carol.factors.map((f) => f.status),
      ['pending'],
      "carol is the other account's, untouched",
    )

    const names = ['u1', 'u2', 'u3', 'u4', 'u5']
    for (const u of names) await createFactor(a.pub, u)
    const seen: string[] = []
    let next: string | null = null
    do {
      const got: { items: { userID: string }[]; next: string | null } = await json(
        await call(a, 'GET', `${users(a.pub.accountId)}?limit=2${next === null ? '' : `&after=${encodeURIComponent(next)}`}`, a.read.secret),
        200,
      )
      assert.ok(got.items.length <= 2)
      seen.push(...got.items.map((u) => u.userID))
      next = got.next
    } while (next !== null)
    assert.deepEqual(seen, names)
    assert.deepEqual(await errorCodes(await call(a, 'GET', `${users(a.pub.accountId)}?after=not-a-cursor`, a.read.secret), 400), ['BAD_CURSOR'])
    assert.deepEqual(await errorCodes(await call(a, 'GET', `${users(a.pub.accountId)}?limit=0`, a.read.secret), 400), ['FIELD_INVALID'])

    const hostile = [
      '%zz',
      '%',
      '%E0%A4%A',
      '%ED%A0%80',
      '%00',
      'a%00b',
      '%0A',
      '%7F',
      '%3A',
      'a%3Ab',
      '%20',
      '%20%20',
      'x'.repeat(257),
      '%2F',
      'a%2Fb',
      '%2E%2E',
      '..%2F..%2Fkeys',
      '%C0%AF',
      '%EF%BF%BF',
      '%E2%80%AE',
      "'%20OR%201%3D1--",
      '%22%3E%3Cscript%3E',
      '%F0%9F%94%91',
      '%25',
      '%2525',
      'ü'.repeat(300),
    ]
    const base = `/admin/v1/accounts/${a.pub.accountId}/totp-users/`
    for (const raw of hostile) {
      for (const [method, rest] of [
        ['GET', ''],
        ['POST', '/lockout/clear'],
        ['DELETE', ''],
      ] as const) {
        const res = await call(a, method, `${base}${raw}${rest}`, a.write.secret)
        const body = await res.text()
        assert.ok([400, 404].includes(res.status), `${method} ${raw.slice(0, 40)}${rest}: ${res.status} ${body.slice(0, 200)}`)
      }
    }
    for (const raw of ['%00', 'a%00b', '%zz', '%ED%A0%80', 'x'.repeat(300)]) {
      const res = await call(a, 'GET', `/admin/v1/accounts/${raw}/totp-users/u1`, a.read.secret)
      await res.arrayBuffer()
      assert.ok([400, 404].includes(res.status), `account ${raw.slice(0, 20)}: ${res.status}`)
    }
    assert.equal((await json<{ items: unknown[] }>(await call(a, 'GET', users(a.pub.accountId), a.read.secret), 200)).items.length, 5, 'nothing deleted')
  })
}
