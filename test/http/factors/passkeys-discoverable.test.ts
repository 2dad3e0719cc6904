/**
 * A passkey sign-in that names no user (POST /totp/passkeys/authentication/options, then
 * /totp/passkeys/authentication) over HTTP with a software authenticator, on SQLite and on
 * PostgreSQL + Redis: the answer names the user; one answer sent at once many times passes
 * once; a credential of another account, one the account never kept, a user handle that is
 * not the passkey's user's and a challenge of the other kind are refused with their codes; the
 * user's lockout holds once the passkey names them; the account's challenge cap holds under
 * parallel options calls, and the per-user one does not apply. The gateway's refusals and a
 * malformed body close it.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { AuthenticationResponseJSON, PublicKeyCredentialCreationOptionsJSON, PublicKeyCredentialRequestOptionsJSON } from '@simplewebauthn/server'
import { codes, createCaller, startApp, testClock, type Running } from '../../support/helper.ts'
import { createDatabase, redisEnv, skipUnless, type StoreEnv as Env } from '../../support/services.ts'
import { path } from '../../support/factors.ts'
import { SoftAuthenticator } from '../../support/soft-authenticator.ts'
import { CLI, SYSTEM } from '../../../src/domain/accounts.ts'
import { isFailure } from '../../../src/services/outcome.ts'

const T0 = Date.UTC(2026, 0, 1, 12, 0, 15)
const ORIGIN = 'http://localhost:1234'
const RP_ID = 'localhost'
const OPTIONS = '/totp/passkeys/authentication/options'
const SIGN_IN = '/totp/passkeys/authentication'

const stores: [string, Env, false | string][] = [
  ['sqlite', async () => ({}), false],
  ['postgres+redis', async (t) => ({ DATABASE_URL: await createDatabase(t), ...(await redisEnv(t)) }), skipUnless('TEST_DATABASE_URL', 'TEST_REDIS_URL')],
]

/** No attempt limit and no gateway throttle: the lockout (OTP_MAX_FAILURES) is what a test sets. */
const UNLIMITED = { PLAN_RATE: '0', FACTOR_USER_LIMIT: '0', OTP_MAX_FAILURES: '100' }

type Outcome = { status: number; codes: string[] }
type SignedIn = { type: string; valid: boolean; userID: string; factorID: string; userVerified: boolean }

async function configure(app: Running, accountId = app.accountId): Promise<void> {
  const set = await app.factors.updateSettings({ actor: SYSTEM }, accountId, { rpId: RP_ID, rpName: 'Acme', origins: [ORIGIN] })
  assert.ok(!isFailure(set), isFailure(set) ? set.message : '')
}

function send(app: Running, to: string, body: unknown, key = app.key): Promise<Response> {
  return fetch(app.url + to, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  })
}

async function outcome(res: Response): Promise<Outcome> {
  if (res.ok) {
    await res.arrayBuffer()
    return { status: res.status, codes: [] }
  }
  return { status: res.status, codes: await codes(res) }
}

const tally = (outcomes: readonly Outcome[]) => {
  const counts: Record<string, number> = {}
  for (const o of outcomes) {
    const key = o.status < 300 ? String(o.status) : `${o.status} ${o.codes.join(',')}`
    counts[key] = (counts[key] ?? 0) + 1
  }
  return counts
}

/** register: a whole registration of a discoverable passkey (residentKey required) for `user`; its factor ID. */
async function register(app: Running, auth: SoftAuthenticator, user: string, key = app.key): Promise<string> {
  const res = await send(app, path(user, '/passkeys/registration/options'), { residentKey: 'required' }, key)
  const { options } = (await res.json()) as { options: PublicKeyCredentialCreationOptionsJSON }
  assert.equal(res.status, 200)
  const made = await send(app, path(user, '/passkeys/registration'), { credential: auth.register(options) }, key)
  const body = (await made.json()) as { factor: { factorID: string } }
  assert.equal(made.status, 201, JSON.stringify(body))
  return body.factor.factorID
}

async function options(app: Running, ask: object = {}, key = app.key): Promise<PublicKeyCredentialRequestOptionsJSON> {
  const res = await send(app, OPTIONS, ask, key)
  const body = (await res.json()) as { options: PublicKeyCredentialRequestOptionsJSON; expiresAt: string }
  assert.equal(res.status, 200, JSON.stringify(body))
  return body.options
}

const signIn = (app: Running, credential: AuthenticationResponseJSON, key = app.key) => send(app, SIGN_IN, { credential }, key)

for (const [name, env, skip] of stores) {
  test(`${name}: without a user ID, the passkey names its user; one answer sent 20 times at once passes once; 20 challenges signed at one count pass once`, {
    skip,
  }, async (t) => {
    const app = await startApp(t, { ...(await env(t)), ...UNLIMITED, PASSKEY_CHALLENGES_PER_USER: '2' }, testClock(T0))
    await configure(app)
    const alices = new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID })
    const bobs = new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID })
    const aliceFactor = await register(app, alices, 'alice@example.com')
    const bobFactor = await register(app, bobs, 'bob')

    const ask = await options(app, { userVerification: 'required' })
    assert.deepEqual(ask.allowCredentials, [], 'no credential named: the browser offers those it holds')
    assert.equal(ask.rpId, RP_ID)
    assert.equal(ask.userVerification, 'required')
    const ok = await signIn(app, alices.authenticate(ask))
    assert.equal(ok.status, 200)
    assert.deepEqual((await ok.json()) as SignedIn, { type: 'Success', valid: true, userID: 'alice@example.com', factorID: aliceFactor, userVerified: true })
    const bob = await signIn(app, bobs.authenticate(await options(app)))
    assert.deepEqual((await bob.json()) as SignedIn, { type: 'Success', valid: true, userID: 'bob', factorID: bobFactor, userVerified: true })

    // One answer, 20 times at once: its challenge is taken once.
    const same = alices.authenticate(await options(app))
    const replays = await Promise.all(Array.from({ length: 20 }, async () => outcome(await signIn(app, same))))
    assert.equal(replays.filter((o) => o.status === 200).length, 1, JSON.stringify(tally(replays)))
    for (const o of replays.filter((r) => r.status !== 200)) {
      assert.equal(o.status, 400, JSON.stringify(o))
      assert.ok(o.codes.length === 1 && ['PASSKEY_CHALLENGE_INVALID', 'PASSKEY_REPLAYED'].includes(o.codes[0]!), JSON.stringify(o))
    }

    // 20 challenges of the account's (more than PASSKEY_CHALLENGES_PER_USER, 2: that cap is a user's), each signed at one count: the counter moves once.
    const asks = await Promise.all(Array.from({ length: 20 }, () => options(app)))
    const count = alices.credentials[0]!.counter + 1
    const raced = await Promise.all(asks.map(async (a) => outcome(await signIn(app, alices.authenticate(a, { counter: count })))))
    assert.deepEqual(tally(raced), { 200: 1, '400 PASSKEY_REPLAYED': 19 })
  })

  test(`${name}: another account's passkey and one never kept are PASSKEY_UNKNOWN (the challenge used up); a user handle not the user's is PASSKEY_INVALID and counts towards their lockout`, {
    skip,
  }, async (t) => {
    const app = await startApp(t, { ...(await env(t)), ...UNLIMITED, OTP_MAX_FAILURES: '5' }, testClock(T0))
    await configure(app)
    const alices = new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID })
    const bobs = new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID })
    await register(app, alices, 'alice')
    await register(app, bobs, 'bob')

    // Another account of the same store and relying party, its own user `alice`: its passkey is not this account's.
    const other = await createCaller(app.accounts)
    await configure(app, other.accountId)
    const theirs = new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID })
    const theirFactor = await register(app, theirs, 'alice', other.apiKey)
    const unknown = async (credential: AuthenticationResponseJSON) =>
      assert.deepEqual(await outcome(await signIn(app, credential)), { status: 404, codes: ['PASSKEY_UNKNOWN'] })
    const stolen = await options(app)
    await unknown(theirs.authenticate(stolen))
    // The challenge went with it: the right passkey cannot use it after.
    assert.deepEqual(await outcome(await signIn(app, alices.authenticate(stolen))), { status: 400, codes: ['PASSKEY_CHALLENGE_INVALID'] })
    // In its own account it signs in.
    const home = await signIn(app, theirs.authenticate(await options(app, {}, other.apiKey)), other.apiKey)
    assert.deepEqual(await home.json(), { type: 'Success', valid: true, userID: 'alice', factorID: theirFactor, userVerified: true })

    // A credential the account never kept (made, never registered).
    const stranger = new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID })
    stranger.register({ challenge: 'AAAA', rp: { id: RP_ID, name: 'x' }, user: { id: 'dXNlcg', name: 'u', displayName: 'u' }, pubKeyCredParams: [] })
    await unknown(stranger.authenticate(await options(app)))
    // A per-user challenge answered here, and this route's answered as a user's: each is a challenge of the other kind.
    const usersOwn = await send(app, path('alice', '/passkeys/authentication/options'), {})
    const { options: perUser } = (await usersOwn.json()) as { options: PublicKeyCredentialRequestOptionsJSON }
    assert.deepEqual(await outcome(await signIn(app, alices.authenticate(perUser))), { status: 400, codes: ['PASSKEY_CHALLENGE_INVALID'] })
    const crossed = await send(app, path('alice', '/passkeys/authentication'), { credential: alices.authenticate(await options(app)) })
    assert.deepEqual(await outcome(crossed), { status: 400, codes: ['PASSKEY_CHALLENGE_INVALID'] })

    // Alice's passkey answering with Bob's user handle, and with none: refused, and each a failure of Alice's.
    const handled = (handle: string | null) => async () => {
      const a = alices.authenticate(await options(app))
      return outcome(await signIn(app, { ...a, response: { ...a.response, userHandle: handle as string } }))
    }
    assert.deepEqual(await handled(bobs.credentials[0]!.userHandle)(), { status: 400, codes: ['PASSKEY_INVALID'] })
    assert.deepEqual(await handled(null)(), { status: 400, codes: ['PASSKEY_INVALID'] })
    const failures = (await app.store.audit.list({ accountId: app.accountId, action: 'factor.verification_failed', limit: 100 })).items
    // Alice's passkey on the used challenge, on a challenge of the other kind twice, and the two handles: none for the unknown credentials.
    assert.equal(failures.length, 5, JSON.stringify(failures.map((f) => f.detail)))
    assert.ok(failures.every((f) => f.detail.userID === 'alice' && f.detail.reason === 'passkey'))
    // Five failures (OTP_MAX_FAILURES): Alice is locked, on this route and on her own alike; Bob is not.
    const locked = await signIn(app, alices.authenticate(await options(app)))
    assert.equal(locked.status, 429)
    assert.deepEqual(await codes(locked), ['OTP_LOCKED'])
    assert.ok(Number(locked.headers.get('retry-after')) > 0)
    const own = await send(app, path('alice', '/passkeys/authentication/options'), {})
    const { options: lockedOwn } = (await own.json()) as { options: PublicKeyCredentialRequestOptionsJSON }
    assert.deepEqual(await outcome(await send(app, path('alice', '/passkeys/authentication'), { credential: alices.authenticate(lockedOwn) })), {
      status: 429,
      codes: ['OTP_LOCKED'],
    })
    assert.equal((await signIn(app, bobs.authenticate(await options(app)))).status, 200)
  })

  test(`${name}: 60 options calls at once keep PASSKEY_CHALLENGES_PER_ACCOUNT (25) open, the rest 429 with Retry-After; the kept ones all answer`, {
    skip,
  }, async (t) => {
    const app = await startApp(t, { ...(await env(t)), ...UNLIMITED, PASSKEY_CHALLENGES_PER_ACCOUNT: '25' }, testClock(T0))
    await configure(app)
    const auth = new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID })
    await register(app, auth, 'alice')
    // The registration's challenge was taken: the account has none open.
    const answers = await Promise.all(Array.from({ length: 60 }, () => send(app, OPTIONS, {})))
    const bodies = await Promise.all(
      answers.map(async (r) => ({ status: r.status, retryAfter: r.headers.get('retry-after'), body: (await r.json()) as unknown })),
    )
    const kept = bodies.filter((b) => b.status === 200).map((b) => (b.body as { options: PublicKeyCredentialRequestOptionsJSON }).options)
    const refused = bodies.filter((b) => b.status !== 200)
    assert.equal(kept.length, 25)
    assert.equal(refused.length, 35)
    for (const r of refused) {
      assert.equal(r.status, 429)
      assert.deepEqual((r.body as { code: string }).code, 'PASSKEY_CHALLENGES_PER_ACCOUNT')
      assert.equal(r.retryAfter, '300')
    }
    // None of the 25 ended another (no per-user cap here): each answers, in turn (one counter).
    const results: Outcome[] = []
    for (const o of kept) results.push(await outcome(await signIn(app, auth.authenticate(o))))
    assert.deepEqual(tally(results), { 200: 25 })
  })
}

test('the gateway holds: no key, a suspended account and a key without the TOTP subscription are 403 on both routes; before the relying party is set, 409', async (t) => {
  const app = await startApp(t, UNLIMITED, testClock(T0))
  const auth = new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID })
  const early = await outcome(await send(app, OPTIONS, {}))
  assert.deepEqual(early, { status: 409, codes: ['PASSKEYS_NOT_CONFIGURED'] })
  await configure(app)
  await register(app, auth, 'alice')
  const answer = auth.authenticate(await options(app))
  const suspended = await createCaller(app.accounts)
  await configure(app, suspended.accountId)
  await app.accounts.updateAccount({ actor: CLI }, suspended.accountId, { status: 'suspended' })
  const converterOnly = await createCaller(app.accounts, [['eu', 'converter']])
  for (const key of ['', 'not-a-key', suspended.apiKey, converterOnly.apiKey]) {
    for (const [to, body] of [
      [OPTIONS, {}],
      [SIGN_IN, { credential: answer }],
    ] as const) {
      const res = await send(app, to, body, key)
      assert.equal(res.status, 403, `${to} with ${key.slice(0, 8) || 'no key'}`)
      await res.arrayBuffer()
    }
  }
  // Refused at the gateway, the answer was never tried: it still signs in.
  assert.equal((await signIn(app, answer)).status, 200)
})

test('malformed bodies on both routes are 4xx with their catalogue codes, never a 5xx', async (t) => {
  const app = await startApp(t, UNLIMITED, testClock(T0))
  await configure(app)
  const cases: [string, string, unknown, Outcome][] = [
    [OPTIONS, 'userVerification not one of its values', { userVerification: 'always' }, { status: 400, codes: ['USER_VERIFICATION_INVALID'] }],
    [OPTIONS, 'not JSON', '{"userVerification": ', { status: 400, codes: ['MALFORMED_BODY'] }],
    [SIGN_IN, 'no credential', {}, { status: 400, codes: ['CREDENTIAL_REQUIRED'] }],
    [SIGN_IN, 'credential a string', { credential: 'public-key' }, { status: 400, codes: ['CREDENTIAL_INVALID'] }],
    [
      SIGN_IN,
      'a rateLimitKey of 257 characters',
      { credential: {}, rateLimitKey: 'k'.repeat(257) },
      { status: 400, codes: ['CREDENTIAL_INVALID', 'RATE_LIMIT_KEY_INVALID'] },
    ],
    [
      SIGN_IN,
      'an id that is not base64url',
      { credential: { id: 'a+b', rawId: 'a+b', type: 'public-key', response: { clientDataJSON: '', authenticatorData: '', signature: '' } } },
      { status: 400, codes: ['CREDENTIAL_INVALID'] },
    ],
    [
      SIGN_IN,
      'a challenge never issued',
      {
        credential: {
          id: 'AAAA',
          rawId: 'AAAA',
          type: 'public-key',
          response: {
            clientDataJSON: Buffer.from(
              JSON.stringify({ type: 'webauthn.get', challenge: Buffer.alloc(32, 1).toString('base64url'), origin: ORIGIN }),
            ).toString('base64url'),
            authenticatorData: '',
            signature: '',
          },
        },
      },
      { status: 400, codes: ['PASSKEY_CHALLENGE_INVALID'] },
    ],
  ]
  const got = []
  for (const [to, what, body] of cases) got.push([to, what, await outcome(await send(app, to, body))])
  assert.deepEqual(
    got,
    cases.map(([to, what, , expected]) => [to, what, expected]),
  )
})

test('the options routes take no body at all (curl -X POST) or a JSON body of no bytes, with their defaults; a route that needs a field names it', async (t) => {
  const app = await startApp(t, UNLIMITED, testClock(T0))
  await configure(app)
  const auth = new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID })
  await register(app, auth, 'alice')
  const post = (to: string, headers: Record<string, string>) => fetch(app.url + to, { method: 'POST', headers: { ...headers, 'x-api-key': app.key } })
  const bodies: [string, Record<string, string>][] = [
    ['no body, no content type', {}],
    ['a JSON body of no bytes', { 'content-type': 'application/json' }],
    ['a form of no bytes', { 'content-type': 'application/x-www-form-urlencoded' }],
  ]
  for (const [what, headers] of bodies) {
    const registration = await post(path('bob', '/passkeys/registration/options'), headers)
    const made = (await registration.json()) as { options: PublicKeyCredentialCreationOptionsJSON }
    assert.equal(registration.status, 200, `registration options, ${what}`)
    assert.deepEqual(
      [made.options.authenticatorSelection?.userVerification, made.options.authenticatorSelection?.residentKey],
      ['preferred', 'preferred'],
      `registration options, ${what}: the defaults`,
    )
    for (const to of [OPTIONS, path('alice', '/passkeys/authentication/options')]) {
      const res = await post(to, headers)
      const body = (await res.json()) as { options: PublicKeyCredentialRequestOptionsJSON }
      assert.equal(res.status, 200, `${to}, ${what}`)
      assert.equal(body.options.userVerification, 'preferred', `${to}, ${what}: the default`)
    }
    for (const to of [SIGN_IN, path('alice', '/passkeys/authentication'), path('bob', '/passkeys/registration')]) {
      assert.deepEqual(await outcome(await post(to, headers)), { status: 400, codes: ['CREDENTIAL_REQUIRED'] }, `${to}, ${what}`)
    }
  }
})
