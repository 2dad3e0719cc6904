import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createCaller, get, post, startApp } from '../../support/helper.ts'
import { isFailure } from '../../../src/services/outcome.ts'
import { CLI } from '../../../src/domain/accounts.ts'
import { VERSION } from '../../../src/version.ts'

const CTX = { actor: CLI }

/** headerShape is every response header but the two that differ per request by design. */
function headerShape(res: Response): string {
  return [...res.headers]
    .filter(([name]) => name !== 'date' && name !== 'x-request-id')
    .map(([n, v]) => `${n}: ${v}`)
    .join('\n')
}

test('every refusal is the same 403, byte for byte, headers included', async (t) => {
  const app = await startApp(t, { REGION: 'eu' })
  const { accounts, clock } = app
  const revoked = await createCaller(accounts)
  await accounts.revokeKey(CTX, revoked.keyId)
  const suspended = await createCaller(accounts)
  await accounts.updateAccount(CTX, suspended.accountId, { status: 'suspended' })
  const inactive = await createCaller(accounts, [['eu', 'totp']])
  await accounts.setSubscription(CTX, inactive.accountId, 'eu', 'totp', 'inactive')
  const pending = await createCaller(accounts, [])
  await accounts.setSubscription(CTX, pending.accountId, 'eu', 'totp', 'pending')
  const otherGroup = await createCaller(accounts, [['eu', 'converter']])
  const otherRegion = await createCaller(accounts, [
    ['us', 'totp'],
    ['apac', 'totp'],
  ])
  const expired = await createCaller(accounts, undefined, { expiresAt: new Date(clock.now() + 60_000).toISOString() })
  const outOfScopeGroup = await createCaller(accounts, undefined, { scope: { groups: ['converter'] } })
  const outOfScopeRegion = await createCaller(accounts, undefined, { scope: { regions: ['us', 'apac'] } })
  const rolledAway = await createCaller(accounts)
  const rolled = await accounts.rollKey(CTX, rolledAway.keyId, { graceSeconds: 0 })
  assert.ok(!isFailure(rolled))
  const graceOver = await createCaller(accounts)
  assert.ok(!isFailure(await accounts.rollKey(CTX, graceOver.keyId, { graceSeconds: 30 })))
  clock.advance(60_000)

  const causes: [string, string | undefined][] = [
    ['missing key', undefined],
    ['empty key', ''],
    ['unknown key', 'tsr_0000000000000000000000000000000000000000'],
    ['malformed key', 'not a key at all'],
    ['revoked key', revoked.apiKey],
    ['suspended account', suspended.apiKey],
    ['inactive subscription', inactive.apiKey],
    ['group not subscribed', otherGroup.apiKey],
    ['region not subscribed', otherRegion.apiKey],
    ['pending subscription', pending.apiKey],
    ['expired key', expired.apiKey],
    ['key scoped to another group', outOfScopeGroup.apiKey],
    ['key scoped to other regions', outOfScopeRegion.apiKey],
    ['key rolled without grace', rolledAway.apiKey],
    ['key rolled, grace over', graceOver.apiKey],
  ]
  const answers = []
  for (const [cause, key] of causes) {
    for (const call of [() => get(app.url, '/totp/ping', key), () => post(app.url, '/totp/getOTP', key, { secret: 'x' })]) {
      const res = await call()
      assert.equal(res.status, 403, cause)
      answers.push({ cause, body: Buffer.from(await res.arrayBuffer()).toString('hex'), headers: headerShape(res) })
    }
  }
  const [first] = answers
  for (const a of answers) {
    assert.equal(a.body, first!.body, `${a.cause}: same bytes`)
    assert.equal(a.headers, first!.headers, `${a.cause}: same headers`)
  }
  const body = JSON.parse(Buffer.from(first!.body, 'hex').toString()) as Record<string, string>
  assert.deepEqual(Object.keys(body), ['message'])
  assert.match(body.message!, /active\* subscription/)
  assert.match(body.message!, /\*Subscribed\* for this region/)
  assert.match(body.message!, /x-api-key/)
  assert.ok(body.message!.includes(app.config.docsUrl))
})

test('refusals take the same time whatever the cause (medians within noise)', async (t) => {
  const app = await startApp(t)
  const revoked = await createCaller(app.accounts)
  await app.accounts.revokeKey(CTX, revoked.keyId)
  const unsubscribed = await createCaller(app.accounts, [])
  const keys: Record<string, string | undefined> = {
    missing: undefined,
    unknown: 'tsr_ffffffffffffffffffffffffffffffffffffffff',
    revoked: revoked.apiKey,
    unsubscribed: unsubscribed.apiKey,
  }
  const samples: Record<string, number[]> = Object.fromEntries(Object.keys(keys).map((k) => [k, []]))
  for (let round = 0; round < 300; round++) {
    // Interleaved, so that drift of the machine's load hits every cause alike.
    for (const [cause, key] of Object.entries(keys)) {
      const start = process.hrtime.bigint()
      const res = await get(app.url, '/totp/ping', key)
      await res.arrayBuffer()
      samples[cause]!.push(Number(process.hrtime.bigint() - start) / 1e6)
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
  const medians = Object.values(samples).map(median)
  const spread = Math.max(...medians) - Math.min(...medians)
  const all = Object.values(samples).flat()
  const center = median(all)
  const noise = median(all.map((x) => Math.abs(x - center))) // median absolute deviation
  t.diagnostic(`medians (ms): ${JSON.stringify(Object.fromEntries(Object.keys(keys).map((k, i) => [k, medians[i]!.toFixed(3)])))}`)
  assert.ok(spread < Math.max(0.15, 2 * noise), `spread ${spread.toFixed(3)} ms vs noise ${noise.toFixed(3)} ms`)
})

test('a change made through this process takes effect at once, cached or not', async (t) => {
  const app = await startApp(t)
  const caller = await createCaller(app.accounts)
  assert.equal((await get(app.url, '/totp/ping', caller.apiKey)).status, 200)
  assert.equal((await get(app.url, '/totp/ping', caller.apiKey)).status, 200, 'now cached')
  await app.accounts.updateAccount(CTX, caller.accountId, { status: 'suspended' })
  assert.equal((await get(app.url, '/totp/ping', caller.apiKey)).status, 403)
  await app.accounts.updateAccount(CTX, caller.accountId, { status: 'active' })
  assert.equal((await get(app.url, '/totp/ping', caller.apiKey)).status, 200)
  await app.accounts.setSubscription(CTX, caller.accountId, 'eu', 'totp', 'inactive')
  assert.equal((await get(app.url, '/totp/ping', caller.apiKey)).status, 403)
  await app.accounts.setSubscription(CTX, caller.accountId, 'eu', 'totp', 'active')
  assert.equal((await get(app.url, '/totp/ping', caller.apiKey)).status, 200)
  await app.accounts.revokeKey(CTX, caller.keyId)
  assert.equal((await get(app.url, '/totp/ping', caller.apiKey)).status, 403)
})

test('the instance serves its own region: a key subscribed elsewhere only is refused', async (t) => {
  const app = await startApp(t, { REGION: 'apac' })
  const usOnly = await createCaller(app.accounts, [['us', 'totp']])
  const apac = await createCaller(app.accounts, [['apac', 'totp']])
  assert.equal((await get(app.url, '/totp/ping', usOnly.apiKey)).status, 403)
  assert.equal((await get(app.url, '/totp/ping', apac.apiKey)).status, 200)
})

for (const region of ['us', 'apac']) {
  test(`converter routes in ${region}: 404 naming the eu base URL for a valid key, 403 otherwise`, async (t) => {
    const app = await startApp(t, { REGION: region, EU_BASE_URL: 'https://api-eu.example.net/' })
    for (const path of ['/converter/generateImage', '/converter/generatePostscript']) {
      const res = await post(app.url, path, app.key, {})
      assert.equal(res.status, 404)
      const body = (await res.json()) as Record<string, string>
      assert.deepEqual(Object.keys(body), ['message'])
      assert.equal(
        body.message,
        `The converter API is served in the eu region only, not in the ${region} region. Call https://api-eu.example.net${path} instead.`,
      )
      assert.equal((await post(app.url, path, undefined, {})).status, 403)
      assert.equal((await post(app.url, path, 'tsr_nope', {})).status, 403)
    }
    const totpOnly = await createCaller(app.accounts, [[region as 'us', 'totp']])
    assert.equal((await post(app.url, '/converter/generateImage', totpOnly.apiKey, {})).status, 404, 'a valid key learns where the group lives')
  })

  test(`converter routes in ${region} without EU_BASE_URL: the 404 names the eu region and no URL (not this node's own)`, async (t) => {
    const app = await startApp(t, { REGION: region, PUBLIC_BASE_URL: 'https://api-us.example.net' })
    const res = await post(app.url, '/converter/generatePostscript', app.key, {})
    assert.equal(res.status, 404)
    const body = (await res.json()) as Record<string, string>
    assert.equal(body.message, `The converter API is served in the eu region only, not in the ${region} region.`)
    assert.doesNotMatch(body.message!, /https?:|example/)
  })
}

test('unknown routes answer 404 "Unsupported API request", key or not', async (t) => {
  const app = await startApp(t)
  for (const [method, path] of [
    ['GET', '/nope'],
    ['GET', '/totp/nope'],
    ['GET', '/totp/onboardUser'],
    ['DELETE', '/totp/ping'],
  ] as const) {
    for (const key of [app.key, undefined]) {
      const res = await fetch(app.url + path, { method, headers: key ? { 'x-api-key': key } : {} })
      assert.equal(res.status, 404, `${method} ${path}`)
      const body = (await res.json()) as Record<string, string>
      assert.deepEqual(Object.keys(body), ['message'])
      assert.match(body.message!, /^Unsupported API request\. /)
    }
  }
})

test('operational routes need no key', async (t) => {
  const app = await startApp(t)
  assert.deepEqual(await (await get(app.url, '/healthz', undefined)).json(), { status: 'ok', version: VERSION })
  assert.deepEqual(await (await get(app.url, '/readyz', undefined)).json(), { status: 'ok', version: VERSION, checks: { sqlite: 'ok' } })
  const doc = (await (await get(app.url, '/openapi.json', undefined)).json()) as { openapi: string; paths: Record<string, unknown> }
  assert.equal(doc.openapi, '3.1.0')
  assert.ok(doc.paths['/totp/verifyOTP'])
  const page = await get(app.url, '/docs', undefined)
  assert.equal(page.status, 200)
  assert.match(await page.text(), /<h1>Tessera: TOTP and PDF conversion API reference<\/h1>/)
})

test('readyz says 503 when the store is gone', async (t) => {
  const app = await startApp(t)
  await app.store.close()
  const res = await get(app.url, '/readyz', undefined)
  assert.equal(res.status, 503)
  assert.deepEqual(await res.json(), { status: 'unavailable', version: VERSION, checks: { sqlite: 'unavailable' } })
})

test('a request id is returned, and a well-formed incoming one is kept', async (t) => {
  const app = await startApp(t)
  const own = await get(app.url, '/totp/ping', app.key, { 'x-request-id': 'edge-1234' })
  assert.equal(own.headers.get('x-request-id'), 'edge-1234')
  const bad = await get(app.url, '/totp/ping', app.key, { 'x-request-id': 'a b c' })
  assert.match(bad.headers.get('x-request-id') ?? '', /^[0-9a-f-]{36}$/)
})
