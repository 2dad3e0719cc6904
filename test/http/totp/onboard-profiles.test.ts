import { test } from 'node:test'
import assert from 'node:assert/strict'
import { type TOTP, URI } from 'otpauth'
import { post, startApp, codes } from '../../support/helper.ts'
import { PROFILES, PROFILE_NAMES, type Allowed } from '../../../src/totp/profiles.ts'

const user = { userID: 'jane@example.com', applicationID: 'Acme' }

const largest = (allowed: Allowed) => ('min' in allowed ? allowed.max : Math.max(...allowed))
/** A value the service accepts that the profile refuses, if there is one. */
const outside = (allowed: Allowed, candidates: number[]) =>
  candidates.find((v) => ('min' in allowed ? v < allowed.min || v > allowed.max : !allowed.includes(v)))

test('onboardUser under each profile issues what the app reads and refuses the rest, storing nothing', async (t) => {
  const app = await startApp(t)
  for (const name of PROFILE_NAMES) {
    const profile = PROFILES[name]
    const fit = { algorithm: profile.algorithms.at(-1)!, tokenLength: String(largest(profile.digits)), tokenValidity: String(largest(profile.periods)) }
    const res = await post(app.url, '/totp/onboardUser', app.key, { ...user, applicationID: `app-${name}`, profile: name, ...fit })
    assert.equal(res.status, 200, name)
    const body = (await res.json()) as Record<string, string | number>
    assert.deepEqual([body.algorithm, body.tokenLength, body.tokenValidity], [fit.algorithm, Number(fit.tokenLength), Number(fit.tokenValidity)], name)
    const url = URI.parse(body.otpURL as string) as TOTP
    assert.deepEqual(
      [url.algorithm, url.digits, url.period],
      [fit.algorithm, Number(fit.tokenLength), Number(fit.tokenValidity)],
      `${name}: the URL carries the parameters`,
    )
    assert.equal(url.generate({ timestamp: app.clock.now() }), body.otp, `${name}: the URL gives the code`)

    const refused: Record<string, string> = {}
    const algorithm = (['SHA1', 'SHA256', 'SHA512'] as const).find((a) => !(profile.algorithms as readonly string[]).includes(a))
    if (algorithm) refused.algorithm = algorithm
    const digits = outside(profile.digits, [7, 10, 8])
    if (digits !== undefined) refused.tokenLength = String(digits)
    const period = outside(profile.periods, [60, 3600, 15])
    if (period !== undefined) refused.tokenValidity = String(period)
    if (Object.keys(refused).length === 0) {
      assert.ok(name === 'any' || name === 'aegis' || name === 'bitwarden', `${name} refuses nothing the service takes`)
      continue
    }
    const no = await post(app.url, '/totp/onboardUser', app.key, { ...user, applicationID: `refused-${name}`, profile: name, ...refused })
    assert.equal(no.status, 400, name)
    const problems = (await no.json()) as { type: string; code: string; message: string }[]
    assert.deepEqual(
      problems.map((p) => p.code),
      Object.keys(refused).map(() => 'PROFILE_UNSUPPORTED'),
      name,
    )
    for (const p of problems) {
      assert.equal(p.type, 'Error')
      assert.ok(p.message.startsWith(`${profile.app} does not support `), p.message)
      assert.doesNotMatch(p.message, /\{\w+\}/)
    }
    assert.equal(await app.store.onboarding.get(app.accountId, `refused-${name}`, user.userID), null, `${name}: a refusal stores nothing`)
  }
})

test('a refusal names the app and exactly what it does not read', async (t) => {
  const app = await startApp(t)
  const res = await post(app.url, '/totp/onboardUser', app.key, { ...user, profile: 'microsoft', algorithm: 'sha256', tokenValidity: '60' })
  assert.equal(res.status, 400)
  assert.equal(res.headers.get('content-type'), 'application/json; charset=utf-8')
  assert.deepEqual(await res.json(), [
    { type: 'Error', code: 'PROFILE_UNSUPPORTED', message: 'Microsoft Authenticator does not support algorithm SHA256 (it reads SHA1 only).' },
    { type: 'Error', code: 'PROFILE_UNSUPPORTED', message: 'Microsoft Authenticator does not support tokenValidity 60 (it reads 30 seconds only).' },
  ])
  const authy = await post(app.url, '/totp/onboardUser', app.key, { ...user, profile: 'authy', tokenLength: '7' })
  assert.deepEqual(await authy.json(), [
    { type: 'Error', code: 'PROFILE_UNSUPPORTED', message: 'Twilio Authy does not support tokenLength 7 (it reads 6 or 8 digits).' },
  ])
})

test('a profile takes its defaults for parameters left out, in any body form', async (t) => {
  const app = await startApp(t)
  const res = await fetch(`${app.url}/totp/onboardUser`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': app.key },
    body: JSON.stringify({ ...user, profile: 'google', tokenLength: 8 }),
  })
  assert.equal(res.status, 200)
  const body = (await res.json()) as Record<string, string | number>
  assert.deepEqual([body.algorithm, body.tokenLength, body.tokenValidity], ['SHA1', 8, 30])
  const universal = (await (await post(app.url, '/totp/onboardUser', app.key, { ...user, profile: 'universal' })).json()) as Record<string, string>
  // Every app reads the parameters written out, so the URL keeps them (as without a profile).
  assert.match(universal.otpURL!, /&algorithm=SHA1&digits=6&period=30$/)
})

test("an unknown profile is a 400 listing the known ones, beside the request's other problems", async (t) => {
  const app = await startApp(t)
  const res = await post(app.url, '/totp/onboardUser', app.key, { userID: 'a:b', applicationID: 'x', tokenLength: '11', profile: 'Google' })
  assert.equal(res.status, 400)
  const body = (await res.json()) as { code: string; message: string }[]
  assert.deepEqual(
    body.map((e) => e.code),
    ['USER_ID_INVALID', 'TOKEN_LENGTH_INVALID', 'PROFILE_INVALID'],
  )
  assert.equal(body[2]!.message, `Profile must be one of: ${PROFILE_NAMES.join(', ')}.`)
  assert.deepEqual(await codes(await post(app.url, '/totp/onboardUser', app.key, { ...user, profile: '' })), ['PROFILE_INVALID'])
})

test('without a profile onboardUser checks nothing, as Renda.io did', async (t) => {
  const app = await startApp(t)
  // What no profile but `any` allows for Microsoft Authenticator, and the Renda.io defaults.
  const res = await post(app.url, '/totp/onboardUser', app.key, { ...user, algorithm: 'SHA512', tokenLength: '7', tokenValidity: '45' })
  assert.equal(res.status, 200)
  const body = (await res.json()) as Record<string, string | number>
  assert.deepEqual([body.algorithm, body.tokenLength, body.tokenValidity], ['SHA512', 7, 45])
  const plain = (await (await post(app.url, '/totp/onboardUser', app.key, user)).json()) as Record<string, string | number>
  assert.deepEqual([plain.algorithm, plain.tokenLength, plain.tokenValidity], ['SHA1', 6, 30])
  assert.match(plain.otpURL as string, /\?secret=[A-Z2-7]{32}&issuer=Acme&algorithm=SHA1&digits=6&period=30$/)
})
