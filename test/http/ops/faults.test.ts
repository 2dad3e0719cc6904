/**
 * Faults: Redis and PostgreSQL made unreachable (a proxy between the service and each drops
 * every connection and refuses new ones) in the middle of a run, then brought back.
 */
import { test } from 'node:test'
import { ParamsMark } from '../../../src/totp/records.ts'
import { newSecret, toBase32 } from '../../../src/totp/otp.ts'
import assert from 'node:assert/strict'
import { post, get, startApp, type Running } from '../../support/helper.ts'
import { proxiedServices, TcpProxy } from '../../support/proxy.ts'
import { PortalClient, portalUser } from '../../support/portal-helper.ts'
import { VERSION } from '../../../src/version.ts'
import { createDatabase, redisUrl, skipUnless, uniqueName, dropPrefix } from '../../support/services.ts'

const skip = skipUnless('TEST_DATABASE_URL', 'TEST_REDIS_URL')

interface Setup {
  readonly app: Running
  readonly pgProxy: TcpProxy
  readonly redisProxy: TcpProxy
}

async function setup(t: Parameters<typeof startApp>[0]): Promise<Setup> {
  const { pgProxy, redisProxy, env } = await proxiedServices(t)
  const app = await startApp(t, { ...env, STORE_TIMEOUT_MS: '1000' })
  await signalsSettled(app)
  return { app, pgProxy, redisProxy }
}

/**
 * signalsSettled waits until no access-change signal has come for `quietMs`. The set-up's
 * own changes (account, subscriptions, key) reach the node through Redis a little later,
 * and each clears the key cache, which these tests need warm before they cut a store off
 * (on a busy machine a late signal made the PostgreSQL test see a cold cache).
 */
async function signalsSettled(app: Running, quietMs = 500): Promise<void> {
  let last = Date.now()
  const off = app.store.access.onChange(() => {
    last = Date.now()
  })
  try {
    while (Date.now() - last < quietMs) await new Promise((r) => setTimeout(r, 50))
  } finally {
    off()
  }
}

/** until calls `probe` until it returns true, for at most `ms`; it returns the time taken. */
async function until(ms: number, probe: () => Promise<boolean>): Promise<number> {
  const start = Date.now()
  while (!(await probe())) {
    if (Date.now() - start > ms) throw new Error(`not within ${ms} ms`)
    await new Promise((r) => setTimeout(r, 50))
  }
  return Date.now() - start
}

async function freshCode(app: Running): Promise<{ secret: string; token: string }> {
  const onboard = (await (await post(app.url, '/totp/onboardUser', app.key, { userID: uniqueName('u'), applicationID: 'faults' })).json()) as {
    secretKey: string
    otp: string
  }
  return { secret: onboard.secretKey, token: onboard.otp }
}

test('Redis unreachable: verifyOTP fails closed with 503, the rest works on per-node limits, and all recovers without a restart', {
  skip,
  timeout: 60_000,
}, async (t) => {
  const { app, redisProxy } = await setup(t)
  const before = await freshCode(app)
  assert.equal((await post(app.url, '/totp/verifyOTP', app.key, before)).status, 200)

  await redisProxy.cut()
  const during = await freshCode(app)
  const statuses: number[] = []
  for (let i = 0; i < 5; i++) {
    const res = await post(app.url, '/totp/verifyOTP', app.key, during)
    statuses.push(res.status)
    if (res.status === 503) {
      assert.equal(res.headers.get('retry-after'), '5')
      assert.match(JSON.stringify(await res.json()), /SERVICE_UNAVAILABLE.*Redis is unavailable/)
    }
  }
  assert.deepEqual(statuses, [503, 503, 503, 503, 503], 'never evaluated without replay protection')
  assert.equal((await post(app.url, '/totp/getOTP', app.key, { secret: during.secret })).status, 200, 'getOTP does not need Redis')
  const ping = await get(app.url, '/totp/ping', app.key)
  assert.equal(ping.status, 200)
  assert.ok(ping.headers.get('ratelimit'), 'the throttle still applies, per node')
  assert.ok(
    app.logs.some((l) => l.includes('fall back to per-node limits')),
    'the fallback is logged',
  )
  const ready = await get(app.url, '/readyz', undefined)
  assert.equal(ready.status, 200)
  assert.deepEqual(await ready.json(), { status: 'degraded', version: VERSION, checks: { postgres: 'ok', redis: 'unavailable' } })

  await redisProxy.restore()
  const took = await until(10_000, async () => (await post(app.url, '/totp/verifyOTP', app.key, during)).status === 200)
  t.diagnostic(`verifyOTP answered 200 again ${took} ms after Redis came back`)
  assert.equal((await post(app.url, '/totp/verifyOTP', app.key, during)).status, 400, 'and replay protection is back')
  assert.deepEqual(await (await get(app.url, '/readyz', undefined)).json(), { status: 'ok', version: VERSION, checks: { postgres: 'ok', redis: 'ok' } })
})

test('PostgreSQL unreachable: onboardUser answers 503 naming it, readyz names it, and service resumes without a restart', {
  skip,
  timeout: 60_000,
}, async (t) => {
  const { app, pgProxy } = await setup(t)
  const onboard = (userID: string) => post(app.url, '/totp/onboardUser', app.key, { userID, applicationID: 'faults' })
  assert.equal((await onboard('before')).status, 200)

  await pgProxy.cut()
  const res = await onboard('during')
  assert.equal(res.status, 503)
  assert.equal(res.headers.get('retry-after'), '5')
  assert.match(JSON.stringify(await res.json()), /SERVICE_UNAVAILABLE.*PostgreSQL is unavailable/)
  assert.equal((await get(app.url, '/totp/ping', app.key)).status, 200, 'a cached key still works for calls that need no PostgreSQL')
  // A 160-bit secret with the parameters mark, as onboardUser issues with parameters other than the defaults.
  const secret = toBase32(new ParamsMark(app.pepper).draw())
  const otp = await post(app.url, '/totp/getOTP', app.key, { secret })
  assert.equal(otp.status, 503, "getOTP reads a marked secret's onboarding record")
  let unmarkedBytes = newSecret()
  while (new ParamsMark(app.pepper).has(unmarkedBytes)) unmarkedBytes = newSecret()
  const unmarked = await post(app.url, '/totp/getOTP', app.key, { secret: toBase32(unmarkedBytes) })
  assert.equal(unmarked.status, 200, 'a secret without the mark has no record that matters: no lookup')
  await unmarked.arrayBuffer()
  const renda = await post(app.url, '/totp/getOTP', app.key, { secret: 'LVJFKZI5AJZXIZKG' })
  assert.equal(renda.status, 200, 'an 80-bit secret cannot have a record here: no lookup')
  await renda.arrayBuffer()
  await otp.arrayBuffer()
  const given = await post(app.url, '/totp/getOTP', app.key, { secret, tokenLength: '6', algorithm: 'SHA1', tokenValidity: '30' })
  assert.equal(given.status, 200, 'a request that gives every parameter needs no record')
  await given.arrayBuffer()
  const ready = await get(app.url, '/readyz', undefined)
  assert.equal(ready.status, 503)
  assert.deepEqual(await ready.json(), { status: 'unavailable', version: VERSION, checks: { postgres: 'unavailable', redis: 'ok' } })

  await pgProxy.restore()
  const took = await until(10_000, async () => (await onboard('after')).status === 200)
  t.diagnostic(`onboardUser answered 200 again ${took} ms after PostgreSQL came back`)
  assert.equal((await get(app.url, '/readyz', undefined)).status, 200)
  assert.ok(await app.store.onboarding.get(app.accountId, 'faults', 'before'))
  assert.ok(await app.store.onboarding.get(app.accountId, 'faults', 'after'))
  assert.equal(await app.store.onboarding.get(app.accountId, 'faults', 'during'), null, 'the refused call left nothing')
})

test('a node started while Redis is down serves what it can, then picks Redis up when it comes', { skip, timeout: 60_000 }, async (t) => {
  const databaseUrl = await createDatabase(t)
  const redisProxy = await TcpProxy.start(redisUrl())
  const prefix = `${uniqueName('t')}:`
  t.after(async () => {
    await redisProxy.close()
    await dropPrefix(prefix)
  })
  await redisProxy.cut()
  const app = await startApp(t, { DATABASE_URL: databaseUrl, REDIS_URL: redisProxy.via(redisUrl()), REDIS_PREFIX: prefix, STORE_TIMEOUT_MS: '500' })
  const code = await freshCode(app)
  assert.equal((await post(app.url, '/totp/verifyOTP', app.key, code)).status, 503)
  await redisProxy.restore()
  await until(10_000, async () => (await post(app.url, '/totp/verifyOTP', app.key, code)).status === 200)
  assert.equal((await post(app.url, '/totp/verifyOTP', app.key, code)).status, 400)
})

test("the portal's sign-in, with PostgreSQL or Redis unreachable, is a page saying so with 503 and Retry-After (never a 500), and signs in once it is back", {
  skip,
  timeout: 60_000,
}, async (t) => {
  const { app, pgProxy, redisProxy } = await setup(t)
  const { email, password } = await portalUser(app)
  for (const [name, proxy] of [
    ['PostgreSQL', pgProxy],
    ['Redis', redisProxy],
  ] as const) {
    const client = new PortalClient(app.url)
    assert.equal((await client.get('/portal/sign-in')).status, 200)
    await proxy.cut()
    const refused = await client.post('/portal/sign-in', { email, password })
    assert.equal(refused.status, 503, `${name} away: ${refused.text.slice(0, 200)}`)
    assert.equal(refused.headers.get('retry-after'), '5')
    assert.match(refused.text, /cannot reach its data just now/)
    assert.equal(client.cookie('tessera_session') ?? client.cookie('__Host-tessera_session'), undefined, 'no session given')
    await proxy.restore()
    await until(10_000, async () => (await client.post('/portal/sign-in', { email, password }, { from: '/portal/sign-in' })).status === 303)
  }
})
