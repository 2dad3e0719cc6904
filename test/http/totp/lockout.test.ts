/**
 * The lockout and the replay rule under parallel calls, through HTTP, on every store the
 * service runs on; and what decides a secret's parameters (one lockout per secret as HMAC
 * sees it; digits, algorithm and period from its onboarding record).
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Secret, TOTP } from 'otpauth'
import { post, startApp, codes, testClock, type Running } from '../../support/helper.ts'
import { createDatabase, redisEnv, skipUnless, type StoreEnv as Env } from '../../support/services.ts'
import { DatabaseSync } from 'node:sqlite'
import { join } from 'node:path'
import pg from 'pg'
import { SQLITE_FILE } from '../../../src/storage/factory.ts'
import { ParamsMark, secretFingerprint } from '../../../src/totp/records.ts'
import { newSecret, toBase32 } from '../../../src/totp/otp.ts'
import { hashApiKey } from '../../../src/gateway/keys.ts'
import { isFailure } from '../../../src/services/outcome.ts'
import { SYSTEM } from '../../../src/domain/accounts.ts'

const T0 = Date.UTC(2026, 0, 1, 12, 0, 15)

const code = (secret: string, at: number, algorithm = 'SHA1', digits = 6, period = 30) =>
  new TOTP({ secret: Secret.fromBase32(secret), algorithm, digits, period }).generate({ timestamp: at })

/** wrongCode matches none of the steps in the window at `at`. */
function wrongCode(secret: string, at: number): string {
  const taken = new Set([-1, 0, 1].map((d) => code(secret, at + d * 30_000)))
  for (let i = 0; ; i++) if (!taken.has(String(i).padStart(6, '0'))) return String(i).padStart(6, '0')
}

const verify = (app: Running, secret: string, token: string, extra: Record<string, string> = {}) =>
  post(app.url, '/totp/verifyOTP', app.key, { secret, token, ...extra })

const stores: [string, Env, false | string][] = [
  ['sqlite', async () => ({}), false],
  ['postgres', async (t) => ({ DATABASE_URL: await createDatabase(t) }), skipUnless('TEST_DATABASE_URL')],
  ['sqlite+redis', redisEnv, skipUnless('TEST_REDIS_URL')],
  ['postgres+redis', async (t) => ({ DATABASE_URL: await createDatabase(t), ...(await redisEnv(t)) }), skipUnless('TEST_DATABASE_URL', 'TEST_REDIS_URL')],
]

for (const [name, env, skip] of stores) {
  test(`${name}: 200 parallel wrong guesses evaluate at most OTP_MAX_FAILURES; 100 parallel right codes are accepted once`, { skip }, async (t) => {
    const app = await startApp(t, { ...(await env(t)), OTP_MAX_FAILURES: '5', PLAN_RATE: '0' }, testClock(T0))
    for (let round = 0; round < 3; round++) {
      const secret = new Secret().base32
      const answers = await Promise.all(Array.from({ length: 200 }, () => verify(app, secret, wrongCode(secret, T0))))
      const statuses = answers.map((r) => r.status)
      await Promise.all(answers.map((r) => r.arrayBuffer()))
      assert.equal(statuses.filter((s) => s === 400).length, 5, `round ${round}: evaluated guesses`)
      assert.equal(statuses.filter((s) => s === 429).length, 195, `round ${round}: the rest wait, unevaluated`)
    }
    const secret = new Secret().base32
    const answers = await Promise.all(Array.from({ length: 100 }, () => verify(app, secret, code(secret, T0))))
    const statuses = answers.map((r) => r.status)
    await Promise.all(answers.map((r) => r.arrayBuffer()))
    assert.equal(statuses.filter((s) => s === 200).length, 1, 'exactly one acceptance')
    assert.ok(
      statuses.every((s) => s === 200 || s === 400 || s === 429),
      statuses.join(),
    )
  })
}

test('a secret with trailing zero bytes shares the lockout and the replay record of the secret without them', async (t) => {
  const app = await startApp(t, {}, testClock(T0))
  const secret = 'LVJFKZI5AJZXIZKG'
  const padded = `${secret}AA` // one more zero byte: HMAC pads the key with zeros, so the codes are the same
  assert.equal(code(padded, T0), code(secret, T0))
  assert.equal((await verify(app, padded, code(secret, T0))).status, 200)
  const replay = await verify(app, secret, code(secret, T0))
  assert.deepEqual(await codes(replay), ['OTP_REUSED'])
  // The replay was a failed attempt: four more, in either spelling, make five.
  for (let i = 0; i < 4; i++) assert.equal((await verify(app, i % 2 ? secret : padded, wrongCode(secret, T0))).status, 400)
  for (const spelling of [secret, padded, `${padded}AAAA`, secret.toLowerCase()]) {
    assert.equal((await verify(app, spelling, wrongCode(secret, T0))).status, 429, spelling)
  }
})

test('a secret onboarded with 8 digits does not verify with its last 6; its record gives digits, algorithm and period', async (t) => {
  const app = await startApp(t, {}, testClock(T0))
  const onboarded = await post(app.url, '/totp/onboardUser', app.key, {
    userID: 'jane',
    applicationID: 'Acme',
    tokenLength: '8',
    algorithm: 'SHA256',
    tokenValidity: '60',
  })
  const { secretKey } = (await onboarded.json()) as { secretKey: string }
  const eight = code(secretKey, T0, 'SHA256', 8, 60)

  const got = (await (await post(app.url, '/totp/getOTP', app.key, { secret: secretKey })).json()) as { otp: string }
  assert.equal(got.otp, eight, 'getOTP reads the record too')

  const lastSix = await verify(app, secretKey, eight.slice(2))
  assert.deepEqual(await codes(lastSix), ['OTP_INVALID'], 'a 6-digit token is a failed guess')
  assert.equal((await verify(app, secretKey, eight)).status, 200, 'the record gives SHA256, 8 digits, 60 s')
  // The failed guess counted: four more and the secret is locked.
  for (let i = 0; i < 3; i++) assert.equal((await verify(app, secretKey, '12345678')).status, 400)
  assert.equal((await verify(app, secretKey, '00000000')).status, 400)
  assert.equal((await verify(app, secretKey, '00000001')).status, 400)
  assert.equal((await verify(app, secretKey, '00000002')).status, 429)

  // A lower-case, spaced spelling of the secret finds the same record.
  const spaced = secretKey.toLowerCase().replace(/(.{4})/g, '$1 ')
  const other = (await (await post(app.url, '/totp/getOTP', app.key, { secret: spaced })).json()) as { otp: string }
  assert.equal(other.otp, eight)
  // Fields the request gives win over the record.
  const six = (await (
    await post(app.url, '/totp/getOTP', app.key, { secret: secretKey, tokenLength: '6', algorithm: 'SHA1', tokenValidity: '30' })
  ).json()) as { otp: string }
  assert.equal(six.otp, code(secretKey, T0))
})

test("a record is the account's own: another account's verifyOTP takes the token's length", async (t) => {
  const app = await startApp(t, {}, testClock(T0))
  const { secretKey } = (await (await post(app.url, '/totp/onboardUser', app.key, { userID: 'u', applicationID: 'a', tokenLength: '8' })).json()) as {
    secretKey: string
  }
  const { createCaller } = await import('../../support/helper.ts')
  const other = await createCaller(app.accounts)
  const res = await post(app.url, '/totp/verifyOTP', other.apiKey, { secret: secretKey, token: code(secretKey, T0) })
  assert.equal(res.status, 200, 'no record in this account: 6 digits, from the token')
})

test("a secret with no record here is verified with the token's length (a secret issued by Renda.io)", async (t) => {
  const app = await startApp(t, {}, testClock(T0))
  const secret = new Secret({ size: 10 }).base32
  assert.equal((await verify(app, secret, code(secret, T0, 'SHA1', 8))).status, 200)
  const secret6 = new Secret({ size: 10 }).base32
  assert.equal((await verify(app, secret6, code(secret6, T0))).status, 200)
})

test('a locked secret answers 429 with the catalogue code OTP_LOCKED beside the message Renda.io clients read, on verifyOTP and managed factors', async (t) => {
  const app = await startApp(t, { OTP_MAX_FAILURES: '2', PLAN_RATE: '0' }, testClock(T0))
  const secret = new Secret().base32
  for (let i = 0; i < 2; i++) assert.equal((await verify(app, secret, wrongCode(secret, T0))).status, 400)
  const locked = await verify(app, secret, code(secret, T0))
  assert.equal(locked.status, 429)
  assert.ok(Number(locked.headers.get('retry-after')) > 0)
  const body = (await locked.json()) as { code?: string; message?: string }
  assert.equal(body.code, 'OTP_LOCKED')
  assert.match(body.message ?? '', /^Too many failed verifications for this secret\. Try again in \d+ seconds\.$/)

  const created = await post(app.url, '/totp/users/alice/factors', app.key, { applicationID: 'Acme' })
  assert.equal(created.status, 201)
  const { factorID } = (await created.json()) as { factorID: string }
  for (let i = 0; i < 2; i++) assert.equal((await post(app.url, `/totp/users/alice/factors/${factorID}/activate`, app.key, { token: '000000' })).status, 400)
  const factorLocked = await post(app.url, `/totp/users/alice/factors/${factorID}/activate`, app.key, { token: '000000' })
  assert.equal(factorLocked.status, 429)
  assert.equal(((await factorLocked.json()) as { code?: string }).code, 'OTP_LOCKED')
})

/** onboardingSql runs one statement on the app's relational store, as an operator's older data would be. */
async function onboardingSql(app: Running, env: Record<string, string>, sql: string, params: string[]): Promise<void> {
  if (env.DATABASE_URL !== undefined) {
    const client = new pg.Client({ connectionString: env.DATABASE_URL })
    await client.connect()
    let n = 0
    await client.query(
      sql.replaceAll('?', () => `$${++n}`),
      params,
    )
    await client.end()
    return
  }
  const db = new DatabaseSync(join(app.dataDir, SQLITE_FILE))
  db.prepare(sql.replaceAll('true', '1').replaceAll('false', '0')).run(...params)
  db.close()
}

for (const [name, env, skip] of stores.filter(([n]) => !n.endsWith('redis'))) {
  test(`${name}: an account with records from before the parameters mark reads every secret's record, until they are replaced`, { skip }, async (t) => {
    const e = await env(t)
    const app = await startApp(t, e, testClock(T0))
    const onboard = { userID: 'old', applicationID: 'Acme', tokenLength: '8', algorithm: 'SHA256', tokenValidity: '60' }
    assert.equal((await post(app.url, '/totp/onboardUser', app.key, onboard)).status, 200)
    // An older record: its secret, issued before the mark, does not carry it.
    const mark = new ParamsMark(app.pepper)
    let bytes = newSecret()
    while (mark.has(bytes)) bytes = newSecret()
    const secret = toBase32(bytes)
    const older = "UPDATE onboarding SET secret_fingerprint = ?, params_marked = false WHERE user_id = 'old'"
    await onboardingSql(app, e, older, [secretFingerprint(app.pepper, bytes)])
    // A new key reads the account's grant anew (the key cache is emptied by the issue).
    const key = async () => {
      const issued = await app.accounts.issueKey({ actor: SYSTEM }, app.accountId, { name: `k${Math.random()}` })
      assert.ok(!isFailure(issued))
      return issued.apiKey
    }
    const otp = async (apiKey: string) => ((await (await post(app.url, '/totp/getOTP', apiKey, { secret })).json()) as { otp: string }).otp
    assert.equal(await otp(await key()), code(secret, T0, 'SHA256', 8, 60), 'the older record is read: SHA256, 8 digits, 60 s')
    assert.equal((await post(app.url, '/totp/verifyOTP', await key(), { secret, token: code(secret, T0, 'SHA256', 8, 60) })).status, 200)
    // Onboarding the same user again replaces the older record with a marked one: the account reads by the mark again.
    assert.equal((await post(app.url, '/totp/onboardUser', app.key, onboard)).status, 200)
    const grant = await app.store.access.findGrant(hashApiKey(app.pepper, await key()))
    assert.equal(grant?.unmarkedParams, undefined)
    const before = await app.store.access.findGrant(hashApiKey(app.pepper, app.key))
    await onboardingSql(app, e, "UPDATE onboarding SET params_marked = false WHERE user_id = 'old'", [])
    assert.equal((await app.store.access.findGrant(hashApiKey(app.pepper, app.key)))?.unmarkedParams, true)
    assert.equal(before?.unmarkedParams, undefined)
  })
}
