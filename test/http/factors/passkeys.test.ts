/**
 * Passkeys over HTTP with a software authenticator (test/support/soft-authenticator.ts), fast
 * and on every store: registration and sign-in, one answer or one count used by parallel calls
 * (the challenge is taken once, the counter moved compare-and-set), the refusals and their
 * catalogue codes (origin, relying party ID, user verification, challenges, counters, the
 * passkey as a factor), and a sweep of malformed answers that must each be a 4xx with a code,
 * never a 5xx. The browser test (test/browser/passkeys.test.ts) stays the end-to-end one; the
 * lockout shared with TOTP is tested there.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import type {
  AuthenticationResponseJSON,
  PublicKeyCredentialCreationOptionsJSON,
  PublicKeyCredentialRequestOptionsJSON,
  RegistrationResponseJSON,
} from '@simplewebauthn/server'
import { join } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import pg from 'pg'
import { Redis } from 'ioredis'
import { codes, createCaller, get, post, startApp, testClock, type Running } from '../../support/helper.ts'
import { createDatabase, redisEnv, skipUnless, type StoreEnv as Env } from '../../support/services.ts'
import { path } from '../../support/factors.ts'
import { SoftAuthenticator, type AuthenticateOptions, type RegisterOptions } from '../../support/soft-authenticator.ts'
import { SYSTEM } from '../../../src/domain/accounts.ts'
import { isFailure } from '../../../src/services/outcome.ts'
import { catalogue } from '../../../src/errors/catalogue.ts'
import { SQLITE_FILE } from '../../../src/storage/factory.ts'

const T0 = Date.UTC(2026, 0, 1, 12, 0, 15)
const ORIGIN = 'http://localhost:1234'
const RP_ID = 'localhost'

const stores: [string, Env, false | string][] = [
  ['sqlite', async () => ({}), false],
  ['postgres', async (t) => ({ DATABASE_URL: await createDatabase(t) }), skipUnless('TEST_DATABASE_URL')],
  ['sqlite+redis', redisEnv, skipUnless('TEST_REDIS_URL')],
  ['postgres+redis', async (t) => ({ DATABASE_URL: await createDatabase(t), ...(await redisEnv(t)) }), skipUnless('TEST_DATABASE_URL', 'TEST_REDIS_URL')],
]

/** Many attempts by one user in these tests, none about limits: no attempt limit, no gateway throttle, the lockout far away. */
const UNLIMITED = { PLAN_RATE: '0', FACTOR_USER_LIMIT: '0', OTP_MAX_FAILURES: '100' }
/** The metrics' bearer token, for the test that counts the store's writes. */
const METRICS_TOKEN = 'passkeys-metrics-token-'.padEnd(32, 'x')

interface PasskeyView {
  factorID: string
  type: string
  status: string
  label: string | null
  applicationID: string
  algorithm: string
  passkey: { deviceType: string; backedUp: boolean; transports: string[]; signCount: number }
}
type Outcome = { status: number; codes: string[] }

async function configure(app: Running): Promise<void> {
  const set = await app.factors.updateSettings({ actor: SYSTEM }, app.accountId, { rpId: RP_ID, rpName: 'Acme', origins: [ORIGIN] })
  assert.ok(!isFailure(set), isFailure(set) ? set.message : '')
}

/** send posts JSON: an object as JSON.stringify writes it (a lone surrogate as its \\u escape), a string as it is. */
function send(app: Running, to: string, body: unknown): Promise<Response> {
  return fetch(app.url + to, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': app.key },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  })
}

/** outcome reads an answer: its status and its catalogue codes (none for a success). */
async function outcome(res: Response): Promise<Outcome> {
  if (res.ok) {
    await res.arrayBuffer()
    return { status: res.status, codes: [] }
  }
  return { status: res.status, codes: await codes(res) }
}

async function registrationOptions(app: Running, user: string, ask: object = {}): Promise<PublicKeyCredentialCreationOptionsJSON> {
  const res = await send(app, path(user, '/passkeys/registration/options'), ask)
  const body = (await res.json()) as { options: PublicKeyCredentialCreationOptionsJSON; expiresAt: string }
  assert.equal(res.status, 200, JSON.stringify(body))
  return body.options
}

async function authenticationOptions(app: Running, user: string, ask: object = {}): Promise<PublicKeyCredentialRequestOptionsJSON> {
  const res = await send(app, path(user, '/passkeys/authentication/options'), ask)
  const body = (await res.json()) as { options: PublicKeyCredentialRequestOptionsJSON; expiresAt: string }
  assert.equal(res.status, 200, JSON.stringify(body))
  return body.options
}

const registerAnswer = (app: Running, user: string, credential: RegistrationResponseJSON, label?: string) =>
  send(app, path(user, '/passkeys/registration'), { credential, ...(label === undefined ? {} : { label }) })

const signIn = (app: Running, user: string, credential: AuthenticationResponseJSON) => send(app, path(user, '/passkeys/authentication'), { credential })

/** register runs a whole registration: the passkey as its factor. */
async function register(app: Running, auth: SoftAuthenticator, user: string, ask: object = {}, label?: string, opts?: RegisterOptions): Promise<PasskeyView> {
  const res = await registerAnswer(app, user, auth.register(await registrationOptions(app, user, ask), opts), label)
  const body = (await res.json()) as { factor: PasskeyView }
  assert.equal(res.status, 201, JSON.stringify(body))
  return body.factor
}

/** assertion: options, and the authenticator's answer to them (not sent). */
async function assertion(
  app: Running,
  auth: SoftAuthenticator,
  user: string,
  ask: object = {},
  opts?: AuthenticateOptions,
): Promise<AuthenticationResponseJSON> {
  return auth.authenticate(await authenticationOptions(app, user, ask), opts)
}

async function listed(app: Running, user: string): Promise<{ text: string; factors: PasskeyView[] }> {
  const res = await get(app.url, path(user, '/factors'), app.key)
  const text = await res.text()
  assert.equal(res.status, 200, text)
  return { text, factors: (JSON.parse(text) as { factors: PasskeyView[] }).factors }
}

const tally = (outcomes: readonly Outcome[]) => {
  const counts: Record<string, number> = {}
  for (const o of outcomes) {
    const key = o.status < 300 ? String(o.status) : `${o.status} ${o.codes.join(',')}`
    counts[key] = (counts[key] ?? 0) + 1
  }
  return counts
}

for (const [name, env, skip] of stores) {
  test(`${name}: a passkey registers and signs in; one answer sent 20 times at once passes once; 20 fresh challenges signed at one count pass once`, {
    skip,
  }, async (t) => {
    // The lockout far away (each refused answer is a failure), and room for 20 open challenges.
    const app = await startApp(t, { ...(await env(t)), ...UNLIMITED, PASSKEY_CHALLENGES_PER_USER: '50' }, testClock(T0))
    await configure(app)
    const auth = new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID })
    const factor = await register(app, auth, 'alice', { userName: 'alice@example.com', userVerification: 'required', residentKey: 'required' }, 'Laptop')
    assert.match(factor.factorID, /^fct_[0-9a-f]{16}$/)
    assert.equal(factor.type, 'passkey')
    assert.equal(factor.status, 'active')
    assert.equal(factor.label, 'Laptop')
    assert.equal(factor.applicationID, RP_ID)
    assert.equal(factor.algorithm, 'ES256')
    assert.deepEqual(factor.passkey, { deviceType: 'singleDevice', backedUp: false, transports: ['internal'], signCount: 0 })

    const ok = await signIn(app, 'alice', await assertion(app, auth, 'alice', { userVerification: 'required' }))
    assert.equal(ok.status, 200)
    assert.deepEqual(await ok.json(), { type: 'Success', valid: true, factorID: factor.factorID, userVerified: true })

    // One answer, 20 times at once: its challenge is taken once.
    const same = await assertion(app, auth, 'alice')
    const replays = await Promise.all(Array.from({ length: 20 }, async () => outcome(await signIn(app, 'alice', same))))
    assert.equal(replays.filter((o) => o.status === 200).length, 1, JSON.stringify(tally(replays)))
    for (const o of replays.filter((r) => r.status !== 200)) {
      assert.equal(o.status, 400, JSON.stringify(o))
      assert.ok(o.codes.length === 1 && ['PASSKEY_CHALLENGE_INVALID', 'PASSKEY_REPLAYED'].includes(o.codes[0]!), JSON.stringify(o))
    }

    // 20 challenges of their own, each answered at the same count: the counter moves once.
    const asks = await Promise.all(Array.from({ length: 20 }, () => authenticationOptions(app, 'alice')))
    const count = auth.credentials[0]!.counter + 1
    const answers = asks.map((o) => auth.authenticate(o, { counter: count }))
    const raced = await Promise.all(answers.map(async (a) => outcome(await signIn(app, 'alice', a))))
    assert.deepEqual(tally(raced), { 200: 1, '400 PASSKEY_REPLAYED': 19 })
    assert.equal((await listed(app, 'alice')).factors[0]!.passkey.signCount, count)

    // The highest count an authenticator can sign (u32) is kept, and nothing passes after it.
    const top = 2 ** 32 - 1
    assert.deepEqual(await outcome(await signIn(app, 'alice', await assertion(app, auth, 'alice', {}, { counter: top }))), { status: 200, codes: [] })
    assert.equal((await listed(app, 'alice')).factors[0]!.passkey.signCount, top)
    assert.deepEqual(await outcome(await signIn(app, 'alice', await assertion(app, auth, 'alice', {}, { counter: top }))), {
      status: 400,
      codes: ['PASSKEY_REPLAYED'],
    })
  })

  test(`${name}: one authenticator's credential registered by 8 parallel ceremonies is kept once (PASSKEY_REGISTERED for the rest)`, {
    skip,
  }, async (t) => {
    const app = await startApp(t, { ...(await env(t)), ...UNLIMITED }, testClock(T0))
    await configure(app)
    const auth = new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID })
    const asks = await Promise.all(Array.from({ length: 8 }, () => registrationOptions(app, 'alice')))
    const first = auth.register(asks[0]!)
    // The same credential in every answer, each to a challenge of its own (as if excludeCredentials had not been read yet).
    const answers = [first, ...asks.slice(1).map((o) => auth.register(o, { reuse: first.id }))]
    // Two factors of one credential would outlive each other: deleting the passkey a sign-in names would leave its twin signing in.
    const results = await Promise.all(answers.map(async (a) => outcome(await registerAnswer(app, 'alice', a))))
    assert.deepEqual(tally(results), { 201: 1, '409 PASSKEY_REGISTERED': 7 })
    assert.equal((await listed(app, 'alice')).factors.length, 1)
  })

  test(`${name}: a registration whose transports are not text (NUL, a lone surrogate) is refused or kept without them, never a 5xx`, { skip }, async (t) => {
    const app = await startApp(t, { ...(await env(t)), ...UNLIMITED }, testClock(T0))
    await configure(app)
    const auth = new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID })
    for (const [i, bad] of ['\u0000', '\ud800', 'usb\u001b[31m'].entries()) {
      const user = `t-${i}`
      const credential = auth.register(await registrationOptions(app, user))
      const res = await registerAnswer(app, user, { ...credential, response: { ...credential.response, transports: [bad as 'usb'] } })
      const text = await res.text()
      assert.ok(res.status < 500, `${JSON.stringify(bad)}: ${res.status} ${text}`)
      if (res.status === 201) {
        const { transports } = (JSON.parse(text) as { factor: PasskeyView }).factor.passkey
        for (const kept of transports)
          assert.ok(kept.isWellFormed() && !/[\u0000-\u001f\u007f]/.test(kept), `${JSON.stringify(bad)} kept as ${JSON.stringify(kept)}`)
      } else {
        assert.equal(res.status, 400, text)
        assert.deepEqual(
          (JSON.parse(text) as { code: string }[]).map((e) => e.code),
          ['CREDENTIAL_INVALID'],
        )
      }
    }
  })

  test(`${name}: malformed answers on both answer routes are each a 4xx with a catalogue code, never a 5xx`, { skip }, async (t) => {
    const app = await startApp(t, { ...(await env(t)), ...UNLIMITED }, testClock(T0))
    await configure(app)
    const auth = new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID })
    await register(app, auth, 'signer')
    const problems: string[] = []
    // Registrations: each case for a user of its own (one that passes must not fill another's factor list).
    for (const [i, [what, mutate, expected]] of registrationCases.entries()) {
      const user = `r-${i}`
      const valid = { credential: auth.register(await registrationOptions(app, user)) }
      const got = await outcome(await send(app, path(user, '/passkeys/registration'), mutate(valid)))
      problems.push(...judge(`registration: ${what}`, got, expected))
      app.clock.advance(1000)
    }
    for (const [what, mutate, expected] of authenticationCases) {
      const valid = { credential: await assertion(app, auth, 'signer') }
      const got = await outcome(await send(app, path('signer', '/passkeys/authentication'), mutate(valid)))
      problems.push(...judge(`authentication: ${what}`, got, expected))
      app.clock.advance(1000)
    }
    assert.deepEqual(problems, [])
    // After it all, the passkey still signs in.
    assert.deepEqual(await outcome(await signIn(app, 'signer', await assertion(app, auth, 'signer'))), { status: 200, codes: [] })
  })
}

test("answers that do not verify are PASSKEY_INVALID: another origin, another relying party ID, no user verification where it was required, a credential the user does not have, a bad signature, another user's handle", async (t) => {
  const app = await startApp(t, UNLIMITED, testClock(T0))
  await configure(app)
  const auth = new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID })
  const refused = async (res: Promise<Response>) => assert.deepEqual(await outcome(await res), { status: 400, codes: ['PASSKEY_INVALID'] })

  // Registration.
  await refused(registerAnswer(app, 'alice', auth.register(await registrationOptions(app, 'alice'), { origin: 'https://evil.example' })))
  await refused(registerAnswer(app, 'alice', auth.register(await registrationOptions(app, 'alice'), { rpId: 'evil.example' })))
  await refused(registerAnswer(app, 'alice', auth.register(await registrationOptions(app, 'alice', { userVerification: 'required' }), { userVerified: false })))
  // Where it was only preferred, an authenticator that did not verify the user is taken.
  const factor = await register(app, auth, 'alice', { userVerification: 'preferred' }, undefined, { userVerified: false })
  assert.equal((await listed(app, 'alice')).factors.length, 1)

  // Sign-in.
  await refused(signIn(app, 'alice', await assertion(app, auth, 'alice', {}, { origin: 'http://localhost:4321' })))
  await refused(signIn(app, 'alice', await assertion(app, auth, 'alice', {}, { rpId: 'evil.example' })))
  await refused(signIn(app, 'alice', await assertion(app, auth, 'alice', { userVerification: 'required' }, { userVerified: false })))
  const unverified = await signIn(app, 'alice', await assertion(app, auth, 'alice', { userVerification: 'discouraged' }, { userVerified: false }))
  assert.deepEqual(await unverified.json(), { type: 'Success', valid: true, factorID: factor.factorID, userVerified: false })

  // Bob's passkey (the same account) answering Alice's challenge: a credential Alice does not have.
  const bobs = new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID })
  await register(app, bobs, 'bob')
  const options = await authenticationOptions(app, 'alice')
  await refused(signIn(app, 'alice', bobs.authenticate({ ...options, allowCredentials: [] })))

  // A signature that does not verify.
  const forged = await assertion(app, auth, 'alice')
  const signature = Buffer.from(forged.response.signature, 'base64url')
  signature[signature.length - 1]! ^= 1
  await refused(signIn(app, 'alice', { ...forged, response: { ...forged.response, signature: signature.toString('base64url') } }))

  // A user handle the authenticator sends must be Alice's (WebAuthn § 7.2, step 6): Bob's is refused; none (a passkey that keeps none) is taken.
  const withHandle = async (handle: string | null) => {
    const answer = await assertion(app, auth, 'alice')
    return signIn(app, 'alice', { ...answer, response: { ...answer.response, userHandle: handle as string } })
  }
  await refused(withHandle(bobs.credentials[0]!.userHandle))
  assert.deepEqual(await outcome(await withHandle(null)), { status: 200, codes: [] })
  assert.deepEqual(await outcome(await withHandle(auth.credentials[0]!.userHandle)), { status: 200, codes: [] })

  assert.deepEqual(await outcome(await signIn(app, 'alice', await assertion(app, auth, 'alice'))), { status: 200, codes: [] })
})

test("challenges: another user's, a registration's at sign-in, a sign-in's at registration, one answered already, an expired one are PASSKEY_CHALLENGE_INVALID", async (t) => {
  const app = await startApp(t, UNLIMITED, testClock(T0))
  await configure(app)
  const auth = new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID })
  await register(app, auth, 'alice')
  const bobs = new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID })
  await register(app, bobs, 'bob')
  const invalid = async (res: Promise<Response>) => assert.deepEqual(await outcome(await res), { status: 400, codes: ['PASSKEY_CHALLENGE_INVALID'] })
  const mine = auth.credentials[0]!.id

  // Bob's challenge, signed by Alice's passkey and sent as Alice's sign-in.
  const bobsOptions = await authenticationOptions(app, 'bob')
  await invalid(signIn(app, 'alice', auth.authenticate(bobsOptions, { credential: mine })))

  // A registration's challenge answered as a sign-in, and a sign-in's as a registration.
  const creation = await registrationOptions(app, 'alice')
  await invalid(signIn(app, 'alice', auth.authenticate({ challenge: creation.challenge, rpId: RP_ID, allowCredentials: [{ id: mine, type: 'public-key' }] })))
  const request = await authenticationOptions(app, 'alice')
  await invalid(registerAnswer(app, 'alice', new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID }).register({ ...creation, challenge: request.challenge })))

  // One answered already (in turn; in parallel in the store tests above).
  const once = await assertion(app, auth, 'alice')
  assert.deepEqual(await outcome(await signIn(app, 'alice', once)), { status: 200, codes: [] })
  await invalid(signIn(app, 'alice', once))

  // PASSKEY_CHALLENGE_SECONDS (300 s): answered a second before, it passes; a second after, it has expired.
  const res = await send(app, path('alice', '/passkeys/authentication/options'), {})
  const { options, expiresAt } = (await res.json()) as { options: PublicKeyCredentialRequestOptionsJSON; expiresAt: string }
  assert.equal(Date.parse(expiresAt), app.clock.now() + 300_000)
  const late = await authenticationOptions(app, 'alice')
  app.clock.advance(299_000)
  assert.deepEqual(await outcome(await signIn(app, 'alice', auth.authenticate(options))), { status: 200, codes: [] })
  app.clock.advance(2000)
  await invalid(signIn(app, 'alice', auth.authenticate(late)))
  const lateRegistration = await registrationOptions(app, 'carol')
  app.clock.advance(301_000)
  await invalid(registerAnswer(app, 'carol', new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID }).register(lateRegistration)))
})

test('a counter gone back or repeated is PASSKEY_REPLAYED; an authenticator that keeps no counter (always 0) is taken, and not written', async (t) => {
  const app = await startApp(t, { ...UNLIMITED, METRICS_TOKEN }, testClock(T0))
  await configure(app)
  const auth = new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID })
  await register(app, auth, 'alice')
  const at = async (counter: number) => outcome(await signIn(app, 'alice', await assertion(app, auth, 'alice', {}, { counter })))
  assert.equal((await at(10)).status, 200)
  assert.deepEqual(await at(5), { status: 400, codes: ['PASSKEY_REPLAYED'] })
  assert.deepEqual(await at(10), { status: 400, codes: ['PASSKEY_REPLAYED'] })
  assert.deepEqual(await at(0), { status: 400, codes: ['PASSKEY_REPLAYED'] })
  assert.equal((await at(11)).status, 200)
  assert.equal((await listed(app, 'alice')).factors[0]!.passkey.signCount, 11)

  // No counter: 0 each time, taken each time (and nothing written: there is no count to move), until the authenticator shows one.
  const plain = new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID })
  await register(app, plain, 'bob')
  const bob = async (counter: number) => outcome(await signIn(app, 'bob', await assertion(app, plain, 'bob', {}, { counter })))
  const writes = async () => {
    const text = await (await fetch(`${app.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text()
    const line = text
      .split('\n')
      .find((l) => l.startsWith('tessera_store_operation_duration_seconds_count{') && l.includes('operation="factors.useCredential"'))
    return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1))
  }
  const before = await writes()
  assert.equal((await bob(0)).status, 200)
  assert.equal((await bob(0)).status, 200)
  assert.equal(await writes(), before, 'a passkey without a counter is not written at sign-in')
  const held = plain.credentials[0]!
  const replayed = await assertion(app, plain, 'bob', {}, { counter: 0 })
  assert.equal((await outcome(await signIn(app, 'bob', replayed))).status, 200)
  assert.deepEqual(
    await outcome(await signIn(app, 'bob', replayed)),
    { status: 400, codes: ['PASSKEY_CHALLENGE_INVALID'] },
    'its answer used once all the same',
  )
  assert.equal(held.counter, 0)
  assert.equal((await bob(3)).status, 200)
  assert.equal(await writes(), before + 1, 'the first count it shows is written')
  assert.deepEqual(await bob(0), { status: 400, codes: ['PASSKEY_REPLAYED'] })
})

test('a passkey is a factor: listed as type passkey without its credential, never activated or resynced, no TOTP code for a passkey-only user, not registered twice', async (t) => {
  const app = await startApp(t, UNLIMITED, testClock(T0))
  await configure(app)
  const auth = new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID })
  const factor = await register(app, auth, 'alice', {}, 'Phone')
  const held = auth.credentials[0]!

  const { text, factors } = await listed(app, 'alice')
  assert.equal(factors.length, 1)
  assert.equal(factors[0]!.factorID, factor.factorID)
  assert.equal(factors[0]!.type, 'passkey')
  assert.equal(factors[0]!.label, 'Phone')
  for (const secret of [held.id, held.cose.toString('base64url'), held.spki.toString('base64url'), held.userHandle]) {
    assert.ok(!text.includes(secret), 'the listing shows neither the credential ID, nor the public key, nor the user handle')
  }

  const activate = await post(app.url, path('alice', `/factors/${factor.factorID}/activate`), app.key, { token: '123456' })
  assert.equal(activate.status, 409)
  assert.deepEqual(await codes(activate), ['FACTOR_NOT_TOTP'])
  const resync = await post(app.url, path('alice', `/factors/${factor.factorID}/resync`), app.key, { token: '123456', nextToken: '654321' })
  assert.equal(resync.status, 409)
  assert.deepEqual(await codes(resync), ['FACTOR_NOT_TOTP'])
  const verify = await post(app.url, path('alice', '/verify'), app.key, { token: '123456' })
  assert.equal(verify.status, 409)
  assert.deepEqual(await codes(verify), ['NO_ACTIVE_FACTOR'])

  // The same authenticator again: the options exclude its credential (a browser refuses), and registering it anyway is refused.
  const again = await registrationOptions(app, 'alice')
  assert.deepEqual(
    again.excludeCredentials?.map((c) => c.id),
    [held.id],
  )
  assert.throws(() => auth.register(again), { name: 'InvalidStateError' })
  assert.deepEqual(await outcome(await registerAnswer(app, 'alice', auth.register(again, { reuse: held.id }))), {
    status: 409,
    codes: ['PASSKEY_REGISTERED'],
  })
  assert.equal((await listed(app, 'alice')).factors.length, 1)
})

test('before the account names its relying party, no ceremony starts and no answer is read: PASSKEYS_NOT_CONFIGURED', async (t) => {
  const app = await startApp(t, UNLIMITED, testClock(T0))
  const auth = new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID })
  const notConfigured = async (res: Promise<Response>) => assert.deepEqual(await outcome(await res), { status: 409, codes: ['PASSKEYS_NOT_CONFIGURED'] })
  await notConfigured(send(app, path('alice', '/passkeys/registration/options'), {}))
  await notConfigured(send(app, path('alice', '/passkeys/authentication/options'), {}))
  const challenge = Buffer.alloc(32, 7).toString('base64url')
  const made = auth.register({ challenge, rp: { id: RP_ID, name: 'Acme' }, user: { id: 'dXNlcg', name: 'alice', displayName: 'alice' }, pubKeyCredParams: [] })
  await notConfigured(registerAnswer(app, 'alice', made))
  await notConfigured(signIn(app, 'alice', auth.authenticate({ challenge, rpId: RP_ID })))
})

test('a flood of options calls: beyond PASSKEY_CHALLENGES_PER_USER (10) open challenges, the oldest are ended', async (t) => {
  const app = await startApp(t, UNLIMITED, testClock(T0))
  await configure(app)
  const auth = new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID })
  await register(app, auth, 'alice')
  const asked: PublicKeyCredentialRequestOptionsJSON[] = []
  for (let i = 0; i < 30; i++) {
    asked.push(await authenticationOptions(app, 'alice'))
    // A millisecond apart at least, so that "oldest" is well defined.
    app.clock.advance(1000)
  }
  const results: Outcome[] = []
  for (const options of asked) results.push(await outcome(await signIn(app, 'alice', auth.authenticate(options))))
  assert.deepEqual(
    results.slice(0, 20).map((r) => `${r.status} ${r.codes.join(',')}`),
    Array.from({ length: 20 }, () => '400 PASSKEY_CHALLENGE_INVALID'),
  )
  assert.deepEqual(
    results.slice(20).map((r) => r.status),
    Array.from({ length: 10 }, () => 200),
  )
})

for (const [name, env, skip] of stores) {
  test(`${name}: 120 options calls at once for 120 new users keep PASSKEY_CHALLENGES_PER_ACCOUNT (25) open, the rest 429; another account is not affected`, {
    skip,
  }, async (t) => {
    const storeEnv = await env(t)
    const app = await startApp(t, { ...storeEnv, ...UNLIMITED, PASSKEY_CHALLENGES_PER_ACCOUNT: '25' }, testClock(T0))
    await configure(app)
    const flood = (n: number, prefix: string, route: 'registration' | 'authentication' = 'registration') =>
      Promise.all(Array.from({ length: n }, (_, i) => send(app, path(`${prefix}-${i}`, `/passkeys/${route}/options`), {})))
    const answers = await flood(120, 'new')
    const outcomes = await Promise.all(answers.map(async (r) => ({ ...(await outcome(r)), retryAfter: r.headers.get('retry-after') })))
    assert.deepEqual(tally(outcomes), { 200: 25, '429 PASSKEY_CHALLENGES_PER_ACCOUNT': 95 })
    // Retry-After: until the first open challenge expires (PASSKEY_CHALLENGE_SECONDS, 300, on a clock that stood still).
    assert.deepEqual(new Set(outcomes.filter((o) => o.status === 429).map((o) => o.retryAfter)), new Set(['300']))
    assert.equal(await openChallenges(app, storeEnv), 25, 'the store keeps the cap, no more')

    // Another account of the same store has a cap of its own.
    const other = await createCaller(app.accounts)
    const set = await app.factors.updateSettings({ actor: SYSTEM }, other.accountId, { rpId: RP_ID, rpName: 'Other', origins: [ORIGIN] })
    assert.ok(!isFailure(set))
    const theirs = await send({ ...app, key: other.apiKey }, path('someone', '/passkeys/registration/options'), {})
    assert.equal(theirs.status, 200, await theirs.text())

    // Expired challenges count no more, and go as new ones come.
    app.clock.advance(300_000)
    assert.deepEqual(tally(await Promise.all((await flood(30, 'later')).map(outcome))), { 200: 25, '429 PASSKEY_CHALLENGES_PER_ACCOUNT': 5 })
    assert.equal(await openChallenges(app, storeEnv), 25)
  })
}

/** openChallenges counts the passkey challenges the store keeps for the app's account (open or not): in Redis when it has one. */
async function openChallenges(app: Running, env: Record<string, string>): Promise<number> {
  if (env.REDIS_URL !== undefined) {
    const redis = new Redis(env.REDIS_URL)
    try {
      // redis/challenges.ts: the account's challenges by digest, and its sorted set of those open; each must hold all.
      const [kept, open] = await Promise.all([
        redis.hlen(`${env.REDIS_PREFIX}pk:{${app.accountId}}:data`),
        redis.zcard(`${env.REDIS_PREFIX}pk:{${app.accountId}}:open`),
      ])
      assert.equal(kept, open, 'every challenge kept is counted')
      return kept
    } finally {
      redis.disconnect()
    }
  }
  const sql = 'SELECT count(*) AS n FROM passkey_challenges WHERE account_id = $1'
  if (env.DATABASE_URL === undefined) {
    const db = new DatabaseSync(join(app.dataDir, SQLITE_FILE), { readOnly: true })
    try {
      return Number(db.prepare(sql.replace('$1', '?')).get(app.accountId)!.n)
    } finally {
      db.close()
    }
  }
  const client = new pg.Client({ connectionString: env.DATABASE_URL })
  await client.connect()
  try {
    return Number((await client.query(sql, [app.accountId])).rows[0].n)
  } finally {
    await client.end()
  }
}

test("a credential of the wrong shape is CREDENTIAL_INVALID (credential's field), not MALFORMED_BODY", async (t) => {
  const app = await startApp(t, UNLIMITED, testClock(T0))
  await configure(app)
  const auth = new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID })
  await register(app, auth, 'alice')
  const registration = auth.register(await registrationOptions(app, 'bob'))
  const authentication = await assertion(app, auth, 'alice')
  const wrong: [string, (c: Record<string, unknown>) => unknown][] = [
    ['an empty object', () => ({})],
    ['id an object', (c) => ({ ...c, id: {} })],
    ['no rawId', ({ rawId: _, ...c }) => c],
    ['no response', ({ response: _, ...c }) => c],
    ['a response without clientDataJSON', (c) => ({ ...c, response: { ...(c.response as object), clientDataJSON: undefined } })],
  ]
  const got: string[] = []
  for (const [what, bend] of wrong) {
    for (const [route, user, credential] of [
      ['registration', 'bob', registration],
      ['authentication', 'alice', authentication],
    ] as const) {
      const o = await outcome(await send(app, path(user, `/passkeys/${route}`), { credential: bend(credential as unknown as Record<string, unknown>) }))
      got.push(`${route}, ${what}: ${o.status} ${o.codes.join(',')}`)
    }
  }
  assert.deepEqual(
    got,
    got.map((g) => g.replace(/: .*$/, ': 400 CREDENTIAL_INVALID')),
  )
})

// The sweep's cases: a name, the body made from a valid one, and the codes expected (null: any 4xx with catalogue codes).

type Mutate = (valid: { credential: RegistrationResponseJSON | AuthenticationResponseJSON }) => unknown
type Case = readonly [string, Mutate, readonly string[] | null]

const b64 = (text: string | Buffer) => Buffer.from(text).toString('base64url')
const randomish = (n: number) => Buffer.from(Array.from({ length: n }, (_, i) => (i * 73 + 41) % 256)).toString('base64url')
/** withCredential: the valid body, its credential's fields changed. */
const withCredential =
  (change: Record<string, unknown>): Mutate =>
  (v) => ({ ...v, credential: { ...v.credential, ...change } })
/** withResponse: the valid body, its credential's response's fields changed. */
const withResponse =
  (change: Record<string, unknown>): Mutate =>
  (v) => ({ ...v, credential: { ...v.credential, response: { ...v.credential.response, ...change } } })
/** clientData: the valid answer's clientDataJSON, decoded, changed and encoded again (the challenge kept unless changed). */
const clientData =
  (change: Record<string, unknown>): Mutate =>
  (v) => {
    const data = JSON.parse(Buffer.from(v.credential.response.clientDataJSON, 'base64url').toString('utf8')) as Record<string, unknown>
    return withResponse({ clientDataJSON: b64(JSON.stringify({ ...data, ...change })) })(v)
  }
const over = (n: number) => 'A'.repeat(n)

const commonCases: Case[] = [
  ['not JSON', () => '{"credential": ', ['MALFORMED_BODY']],
  ['JSON with a trailing comma', () => '{"credential": {},}', ['MALFORMED_BODY']],
  ['a JSON array', () => '[]', ['MALFORMED_BODY']],
  ['a JSON array of the answer', (v) => [v], ['MALFORMED_BODY']],
  ['a JSON string', () => '"credential"', ['MALFORMED_BODY']],
  ['JSON null', () => 'null', null],
  ['no credential', () => ({}), ['CREDENTIAL_REQUIRED']],
  ['credential null', () => ({ credential: null }), ['CREDENTIAL_REQUIRED']],
  ['credential a string', () => ({ credential: 'public-key' }), ['CREDENTIAL_INVALID']],
  ['credential an array', (v) => ({ credential: [v.credential] }), ['CREDENTIAL_INVALID']],
  ['credential an empty object', () => ({ credential: {} }), null],
  ['id a number', withCredential({ id: 12 }), null],
  ['type not public-key', withCredential({ type: 'password' }), ['CREDENTIAL_INVALID']],
  ['response a string', withCredential({ response: 'yes' }), ['CREDENTIAL_INVALID']],
  // The schemas coerce a scalar to the text a field wants (Fastify's Ajv, for the form bodies of the TOTP group): 42 is "42".
  ['clientDataJSON a number', withResponse({ clientDataJSON: 42 }), null],
  ['clientDataJSON an object', withResponse({ clientDataJSON: { challenge: 'x' } }), ['CREDENTIAL_INVALID']],
  // A property no schema names is dropped (Fastify's Ajv: removeAdditional), not refused.
  ['a field the answer has not', withCredential({ extra: true }), null],
  ['clientExtensionResults an array', withCredential({ clientExtensionResults: [] }), ['CREDENTIAL_INVALID']],
  // Past the schema's limits (the body stays within BODY_LIMIT_BYTES, 16 KiB).
  ['an id of 1401 characters', withCredential({ id: over(1401), rawId: over(1401) }), ['CREDENTIAL_INVALID']],
  ['a clientDataJSON of 8193 characters', withResponse({ clientDataJSON: over(8193) }), ['CREDENTIAL_INVALID']],
  ['an authenticatorAttachment of 33 characters', withCredential({ authenticatorAttachment: over(33) }), ['CREDENTIAL_INVALID']],
  [
    '17 clientExtensionResults',
    withCredential({ clientExtensionResults: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`e${i}`, true])) }),
    ['CREDENTIAL_INVALID'],
  ],
  ['a body past BODY_LIMIT_BYTES', withCredential({ id: over(20_000) }), ['BODY_TOO_LARGE']],
  // Lone surrogates, sent as JSON escapes (JSON.stringify writes them so).
  ['a lone surrogate in id', withCredential({ id: '\ud800', rawId: '\ud800' }), ['CREDENTIAL_INVALID']],
  ['a lone surrogate in clientDataJSON', withResponse({ clientDataJSON: 'eyJ\udc00' }), ['CREDENTIAL_INVALID']],
  ['a lone surrogate as the whole body', () => '"\\ud800"', ['MALFORMED_BODY']],
  ['a lone surrogate as a key of the body', (v) => ({ ...v, '\ud800': 1 }), null],
  // Fields that must be base64url and are not.
  ['id with + and /', withCredential({ id: 'ab+/cd', rawId: 'ab+/cd' }), ['CREDENTIAL_INVALID']],
  ['rawId padded in the middle', withCredential({ rawId: 'ab=cd' }), ['CREDENTIAL_INVALID']],
  ['clientDataJSON with a space', withResponse({ clientDataJSON: 'eyJ0 eXBl' }), ['CREDENTIAL_INVALID']],
  ['clientDataJSON in non-ASCII letters', withResponse({ clientDataJSON: 'ÉÉÉÉ' }), ['CREDENTIAL_INVALID']],
  // clientDataJSON that names no challenge.
  ['clientDataJSON empty', withResponse({ clientDataJSON: '' }), ['PASSKEY_CHALLENGE_INVALID']],
  ['clientDataJSON not JSON', withResponse({ clientDataJSON: b64('not json at all') }), ['PASSKEY_CHALLENGE_INVALID']],
  ['clientDataJSON not UTF-8', withResponse({ clientDataJSON: b64(Buffer.from([0xff, 0xfe, 0x7b, 0x7d])) }), ['PASSKEY_CHALLENGE_INVALID']],
  ['clientDataJSON JSON null', withResponse({ clientDataJSON: b64('null') }), ['PASSKEY_CHALLENGE_INVALID']],
  ['clientDataJSON a JSON array', withResponse({ clientDataJSON: b64('[{"challenge":"x"}]') }), ['PASSKEY_CHALLENGE_INVALID']],
  [
    'clientDataJSON without a challenge',
    withResponse({ clientDataJSON: b64('{"type":"webauthn.get","origin":"http://localhost:1234"}') }),
    ['PASSKEY_CHALLENGE_INVALID'],
  ],
  ['clientDataJSON with a numeric challenge', clientData({ challenge: 1234567890123 }), ['PASSKEY_CHALLENGE_INVALID']],
  ['clientDataJSON with a challenge not base64url', clientData({ challenge: '../../etc/passwd/../../etc/passwd' }), ['PASSKEY_CHALLENGE_INVALID']],
  ['clientDataJSON with a challenge never issued', clientData({ challenge: b64(Buffer.alloc(32, 1)) }), ['PASSKEY_CHALLENGE_INVALID']],
  // The right challenge, the rest broken.
  ['id and rawId that differ', withCredential({ rawId: b64('another') }), ['PASSKEY_INVALID']],
  ['clientDataJSON with an origin that is an object', clientData({ origin: { href: ORIGIN } }), ['PASSKEY_INVALID']],
  ['clientDataJSON with a type that is a number', clientData({ type: 7 }), ['PASSKEY_INVALID']],
  ['clientDataJSON with a tokenBinding that is a string', clientData({ tokenBinding: 'present' }), ['PASSKEY_INVALID']],
]

const registrationCases: Case[] = [
  ...commonCases,
  ['attestationObject of 65 537 characters', withResponse({ attestationObject: over(65_537) }), ['BODY_TOO_LARGE']],
  ['a label of 65 characters', (v) => ({ ...v, label: over(65) }), ['LABEL_INVALID']],
  ['a label with a lone surrogate', (v) => ({ ...v, label: 'Phone \ud800' }), ['LABEL_INVALID']],
  ['a label a number', (v) => ({ ...v, label: 7 }), null],
  ['a label an object', (v) => ({ ...v, label: { text: 'Phone' } }), ['LABEL_INVALID']],
  ['attestationObject not base64url', withResponse({ attestationObject: '%%%%' }), ['CREDENTIAL_INVALID']],
  ['transports not an array', withResponse({ transports: 'usb' }), ['CREDENTIAL_INVALID']],
  ['nine transports', withResponse({ transports: Array.from({ length: 9 }, () => 'usb') }), ['CREDENTIAL_INVALID']],
  ['clientDataJSON of a sign-in', clientData({ type: 'webauthn.get' }), ['PASSKEY_INVALID']],
  ['attestationObject of random bytes', withResponse({ attestationObject: randomish(300) }), ['PASSKEY_INVALID']],
  ['attestationObject empty', withResponse({ attestationObject: '' }), ['PASSKEY_INVALID']],
  ['attestationObject a CBOR text, not a map', withResponse({ attestationObject: b64(Buffer.from([0x63, 0x61, 0x62, 0x63])) }), ['PASSKEY_INVALID']],
  [
    'attestationObject a CBOR map cut short',
    (v) => withResponse({ attestationObject: (v.credential as RegistrationResponseJSON).response.attestationObject.slice(0, 60) })(v),
    ['PASSKEY_INVALID'],
  ],
  // @simplewebauthn/server reads topOrigin at sign-in only (and a registration's clientDataJSON is not signed under attestation none).
  ['clientDataJSON with a topOrigin', clientData({ topOrigin: 'https://evil.example' }), null],
  // A lone surrogate where the schema takes any string: not kept, and nothing breaks.
  ['a lone surrogate in authenticatorAttachment', withCredential({ authenticatorAttachment: '\ud800' }), null],
  ['lone surrogates in clientExtensionResults', withCredential({ clientExtensionResults: { '\ud800': '\udfff' } }), null],
]

const authenticationCases: Case[] = [
  ...commonCases,
  ['a signature of 2049 characters', withResponse({ signature: over(2049) }), ['CREDENTIAL_INVALID']],
  ['a userHandle of 129 characters', withResponse({ userHandle: over(129) }), ['CREDENTIAL_INVALID']],
  ['a rateLimitKey of 257 characters', (v) => ({ ...v, rateLimitKey: over(257) }), ['RATE_LIMIT_KEY_INVALID']],
  ['a rateLimitKey with a lone surrogate', (v) => ({ ...v, rateLimitKey: '203.0.113.7\udfff' }), ['RATE_LIMIT_KEY_INVALID']],
  ['a signature not base64url', withResponse({ signature: '****' }), ['CREDENTIAL_INVALID']],
  ['authenticatorData not base64url', withResponse({ authenticatorData: 'a.b' }), ['CREDENTIAL_INVALID']],
  ['a userHandle an object', withResponse({ userHandle: { id: 5 } }), ['CREDENTIAL_INVALID']],
  ['clientDataJSON with a topOrigin', clientData({ topOrigin: 'https://evil.example' }), ['PASSKEY_INVALID']],
  ['clientDataJSON of a registration', clientData({ type: 'webauthn.create' }), ['PASSKEY_INVALID']],
  ['authenticatorData of random bytes', withResponse({ authenticatorData: randomish(37) }), ['PASSKEY_INVALID']],
  ['authenticatorData too short', withResponse({ authenticatorData: randomish(5) }), ['PASSKEY_INVALID']],
  ['authenticatorData empty', withResponse({ authenticatorData: '' }), ['PASSKEY_INVALID']],
  ['a signature of random bytes', withResponse({ signature: randomish(72) }), ['PASSKEY_INVALID']],
  ['a signature empty', withResponse({ signature: '' }), ['PASSKEY_INVALID']],
  ['a credential the user does not have', withCredential({ id: b64('not mine'), rawId: b64('not mine') }), ['PASSKEY_INVALID']],
  // Allowed shapes that do not matter to the check: taken or refused, never a 5xx.
  ['userHandle null', withResponse({ userHandle: null }), null],
  ['a lone surrogate in authenticatorAttachment', withCredential({ authenticatorAttachment: '\ud800' }), null],
]

/** judge: what is wrong with an answer to a malformed body (nothing: an empty list). */
function judge(what: string, got: Outcome, expected: readonly string[] | null): string[] {
  const seen = `${what}: ${got.status} ${got.codes.join(',')}`
  if (got.status >= 500) return [`${seen} (a 5xx)`]
  if (expected === null && got.status < 300) return []
  if (got.status < 400) return [`${seen} (taken)`]
  if (got.codes.length === 0 || got.codes.some((c) => !(c in catalogue))) return [`${seen} (not catalogue codes)`]
  if (expected !== null && got.codes.join(',') !== expected.join(',')) return [`${seen} (expected ${expected.join(',')})`]
  return []
}
