import { test } from 'node:test'
import assert from 'node:assert/strict'
import { get, startApp, testClock } from '../../support/helper.ts'
import { CLI } from '../../../src/domain/accounts.ts'

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
  assert.deepEqual(
    (await app.store.usage.report(app.accountId, '2000-01-01', '2999-12-31', 'key')).map((r) => [r.keyId, r.group, r.count, r.units]),
    [[app.keyId, 'totp', 1, 2]],
    'only the admitted call was counted (saved at shutdown)',
  )
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

test("plans in units (Renda.io's free plan): 50 a month, a TOTP call costs 2, a conversion 1; 429 and RateLimit speak in units", async (t) => {
  const clock = testClock(Date.UTC(2026, 10, 21, 12))
  const app = await startApp(t, { PLAN_QUOTA: '50', PLAN_PERIOD: 'month', PLAN_RATE: '0' }, clock)
  const first = await get(app.url, '/totp/ping', app.key)
  assert.equal(first.headers.get('ratelimit-policy'), '"month";q=50;w=2592000')
  assert.match(first.headers.get('ratelimit') ?? '', /^"month";r=48;t=\d+$/)
  for (let i = 1; i < 24; i++) assert.equal((await get(app.url, '/totp/ping', app.key)).status, 200)
  // 48 units used: a conversion (1 unit) fits, then a TOTP call (2) no longer does, while another conversion does.
  const convert = () => fetch(`${app.url}/converter/generateImage`, { method: 'POST', headers: { 'x-api-key': app.key } })
  const conversion = await convert()
  assert.equal(conversion.status, 415, 'admitted (and counted), then refused for its body')
  assert.match(conversion.headers.get('ratelimit') ?? '', /^"month";r=1;t=\d+$/)
  const refused = await get(app.url, '/totp/ping', app.key)
  assert.equal(refused.status, 429, '2 units asked, 1 left')
  assert.equal(await refused.text(), '{"message":"Limit Exceeded"}')
  const last = await convert()
  assert.equal(last.status, 415)
  assert.match(last.headers.get('ratelimit') ?? '', /^"month";r=0;t=\d+$/)
  assert.equal((await convert()).status, 429)
  // An account's own plan: free TOTP calls.
  assert.ok('weights' in (await app.accounts.setPlan(CTX, app.accountId, { quota: 2, weights: { totp: 0 } })))
  for (let i = 0; i < 5; i++) assert.equal((await get(app.url, '/totp/ping', app.key)).status, 200, 'weight 0: free')
  await app.app.close()
  const report = await app.store.usage.report(app.accountId, '2026-11-01', '2026-11-30', 'region')
  assert.deepEqual(report, [
    { region: 'eu', group: 'converter', count: 2, units: 2 },
    { region: 'eu', group: 'totp', count: 29, units: 48 },
  ])
})

test("a key's last use (time and region) is saved with the usage counts, at most once a minute", async (t) => {
  const clock = testClock(Date.UTC(2026, 10, 21, 12))
  const app = await startApp(t, { REGION: 'us', USAGE_FLUSH_MS: '100' }, clock)
  assert.equal((await app.accounts.getKey(app.keyId))?.lastUsedAt, null)
  assert.equal((await get(app.url, '/totp/ping', app.key)).status, 200)
  const saved = async (at: string) => {
    for (let i = 0; i < 100 && (await app.accounts.getKey(app.keyId))?.lastUsedAt !== at; i++) await new Promise((r) => setTimeout(r, 20))
    return app.accounts.getKey(app.keyId)
  }
  const first = await saved('2026-11-21T12:00:00.000Z')
  assert.deepEqual([first?.lastUsedAt, first?.lastUsedRegion], ['2026-11-21T12:00:00.000Z', 'us'])
  clock.advance(30_000)
  assert.equal((await get(app.url, '/totp/ping', app.key)).status, 200)
  await new Promise((r) => setTimeout(r, 400))
  assert.equal((await app.accounts.getKey(app.keyId))?.lastUsedAt, '2026-11-21T12:00:00.000Z', 'not written again within the minute')
  clock.advance(30_000)
  assert.equal((await saved('2026-11-21T12:00:30.000Z'))?.lastUsedAt, '2026-11-21T12:00:30.000Z', 'the latest use, once the minute is over')
})
