import { test } from 'node:test'
import assert from 'node:assert/strict'
import { get, post, startApp, testClock } from '../../test/helper.ts'
import { CLI } from '../domain/accounts.ts'

const CTX = { actor: CLI }

test('admitted calls carry RateLimit-Policy and RateLimit; refused keys get neither and count for no one', async (t) => {
  const app = await startApp(t, { PLAN_RATE: '10', PLAN_BURST: '20', PLAN_QUOTA: '1000', PLAN_PERIOD: 'day' })
  const ok = await get(app.url, '/totp/ping', app.key)
  assert.equal(ok.status, 200)
  assert.equal(ok.headers.get('ratelimit-policy'), '"burst";q=20;w=2, "day";q=1000;w=86400')
  assert.match(ok.headers.get('ratelimit') ?? '', /^"burst";r=19;t=1, "day";r=998;t=\d+$/, 'the quota in units: a TOTP call costs 2 by default')
  for (let i = 0; i < 30; i++) {
    const refused = await get(app.url, '/totp/ping', 'tsr_unknown')
    assert.equal(refused.status, 403)
    assert.equal(refused.headers.get('ratelimit-policy'), null)
    assert.equal(refused.headers.get('ratelimit'), null)
  }
  await app.app.close()
  assert.deepEqual((await app.store.usage.report(app.accountId, '2000-01-01', '2999-12-31', 'key')).map((r) => [r.keyId, r.group, r.count, r.units]),
    [[app.keyId, 'totp', 1, 2]],
    'only the admitted call was counted (saved at shutdown)')
})

test('over the throttle: 429 "Too Many Requests" with Retry-After, and the refusal consumed nothing', async (t) => {
  const clock = testClock(Date.UTC(2026, 10, 21, 12))
  const app = await startApp(t, {}, clock)
  await app.accounts.setPlan(CTX, app.accountId, { rate: 0.5, burst: 2, quota: 0, period: 'month', weights: { totp: 1, converter: 1 } })
  assert.equal((await get(app.url, '/totp/ping', app.key)).status, 200)
  assert.equal((await get(app.url, '/totp/ping', app.key)).status, 200)
  for (let i = 0; i < 3; i++) {
    const res = await get(app.url, '/totp/ping', app.key)
    assert.equal(res.status, 429)
    assert.equal(res.headers.get('retry-after'), '2')
    assert.equal(res.headers.get('ratelimit-policy'), '"burst";q=2;w=4')
    assert.equal(await res.text(), '{"message":"Too Many Requests"}')
  }
  clock.advance(2000)
  assert.equal((await get(app.url, '/totp/ping', app.key)).status, 200, 'one token back after 1/rate, untouched by the refusals')
  assert.equal((await get(app.url, '/totp/ping', app.key)).status, 429)
})

test('over the quota: 429 "Limit Exceeded" until the next UTC day; the quota counts every group', async (t) => {
  const clock = testClock(Date.UTC(2026, 10, 21, 23, 59, 0))
  const app = await startApp(t, {}, clock)
  await app.accounts.setPlan(CTX, app.accountId, { rate: 0, burst: 1, quota: 2, period: 'day', weights: { totp: 1, converter: 1 } })
  assert.equal((await get(app.url, '/totp/ping', app.key)).status, 200)
  const converter = await fetch(`${app.url}/converter/generateImage`, { method: 'POST', headers: { 'x-api-key': app.key } })
  assert.equal(converter.status, 415, 'admitted (and counted), then refused for its body')
  const res = await get(app.url, '/totp/ping', app.key)
  assert.equal(res.status, 429)
  assert.equal(res.headers.get('retry-after'), '60')
  assert.equal(await res.text(), '{"message":"Limit Exceeded"}')
  clock.advance(60_000)
  assert.equal((await get(app.url, '/totp/ping', app.key)).status, 200, 'a new day, a new quota')
})

test('the quota survives a restart: a new process seeds its window from the saved usage counts', async (t) => {
  const clock = testClock(Date.UTC(2026, 10, 21, 12))
  const first = await startApp(t, {}, clock)
  await first.accounts.setPlan(CTX, first.accountId, { rate: 0, burst: 1, quota: 3, period: 'month', weights: { totp: 1, converter: 1 } })
  for (let i = 0; i < 2; i++) assert.equal((await get(first.url, '/totp/ping', first.key)).status, 200)
  await first.app.close()
  await first.store.close()
  const second = await startApp(t, { DATA_DIR: first.dataDir }, clock)
  assert.equal((await get(second.url, '/totp/ping', first.key)).status, 200)
  assert.equal((await get(second.url, '/totp/ping', first.key)).status, 429, 'two used before the restart, one after: three')
})

test('plans in units (Renda.io\'s free plan): 50 a month, a TOTP call costs 2, a conversion 1; 429 and RateLimit speak in units', async (t) => {
  const clock = testClock(Date.UTC(2026, 10, 21, 12))
  const app = await startApp(t, { PLAN_QUOTA: '50', PLAN_PERIOD: 'month', PLAN_RATE: '0' }, clock)
  const first = await get(app.url, '/totp/ping', app.key)
  assert.equal(first.headers.get('ratelimit-policy'), '"month";q=50;w=2592000')
  assert.match(first.headers.get('ratelimit') ?? '', /^"month";r=48;t=\d+$/)
  for (let i = 1; i < 24; i++) assert.equal((await get(app.url, '/totp/ping', app.key)).status, 200)
  // 48 units used: one TOTP call (2) fits, then only a conversion (1) would.
  const last = await post(app.url, '/totp/getOTP', app.key, { secret: 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP' })
  assert.equal(last.status, 200)
  assert.match(last.headers.get('ratelimit') ?? '', /^"month";r=0;t=\d+$/)
  const refused = await get(app.url, '/totp/ping', app.key)
  assert.equal(refused.status, 429)
  assert.equal(await refused.text(), '{"message":"Limit Exceeded"}')
  // An account's own plan: free TOTP calls, conversions at 1 unit.
  assert.ok('weights' in (await app.accounts.setPlan(CTX, app.accountId, { quota: 2, weights: { totp: 0 } })))
  for (let i = 0; i < 5; i++) assert.equal((await get(app.url, '/totp/ping', app.key)).status, 200, 'weight 0: free')
  await app.app.close()
  const report = await app.store.usage.report(app.accountId, '2026-11-01', '2026-11-30', 'region')
  assert.deepEqual(report, [{ region: 'eu', group: 'totp', count: 30, units: 50 }])
})
