/**
 * An account's factor settings through the admin API and the CLI: read, changed (a field left
 * out stays, null clears), refused when a browser would refuse the relying party or a limit is
 * out of bounds (nothing saved), audited; and the account's attempt limit taking over the
 * server's default at once, with the rate limit key's.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { codes, post, startApp, tempDir, testClock } from '../../support/helper.ts'
import { admin, adminJson, startAdmin } from '../../support/admin-helper.ts'
import { codeOf, enroll, path, wrong } from '../../support/factors.ts'

const T0 = Date.UTC(2026, 0, 1, 12, 0, 15)

test("admin API: an account's factor settings are read, changed, refused when a browser would refuse them, audited; a read token only reads", async (t) => {
  const a = await startAdmin(t, { PLAN_RATE: '0' }, testClock(T0))
  const at = `/admin/v1/accounts/${a.pub.accountId}/factor-settings`
  const call = async (method: string, url: string, body?: unknown, token = a.write.secret) => {
    const res = await fetch(a.url + url, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    })
    return { status: res.status, body: (await res.json()) as Record<string, unknown> & { code?: string }[] }
  }
  const empty = await call('GET', at)
  assert.equal(empty.status, 200)
  assert.deepEqual(empty.body, {
    accountId: a.pub.accountId,
    rpId: null,
    rpName: null,
    origins: [],
    userLimit: null,
    keyLimit: null,
    limitWindowSeconds: null,
    updatedAt: null,
  })
  assert.equal((await call('GET', '/admin/v1/accounts/acc_0000000000000000/factor-settings')).status, 404)

  const set = await call('PATCH', at, { rpId: 'example.com', origins: ['https://example.com', 'https://app.example.com'], userLimit: 3 })
  assert.equal(set.status, 200)
  assert.equal(set.body.rpId, 'example.com')
  assert.equal(set.body.userLimit, 3)
  // A field left out stays; null clears.
  const next = await call('PATCH', at, { rpName: 'Example', userLimit: null })
  assert.deepEqual([next.body.rpId, next.body.rpName, next.body.userLimit], ['example.com', 'Example', null])

  const refusals: [unknown, string][] = [
    [{ origins: ['http://example.com'] }, 'origins'],
    [{ origins: ['https://evil.test'] }, 'origins'],
    [{ origins: ['https://example.com/'] }, 'origins'],
    [{ rpId: 'https://example.com' }, 'rpId'],
    [{ rpId: 'Example.COM' }, 'rpId'],
    [{ userLimit: 0 }, 'userLimit'],
    [{ limitWindowSeconds: 86_401 }, 'limitWindowSeconds'],
    [{ origins: Array.from({ length: 17 }, (_, i) => `https://a${i}.example.com`) }, 'origins'],
    [{ unknown: 1 }, 'unknown'],
  ]
  for (const [body, field] of refusals) {
    const refused = await call('PATCH', at, body)
    assert.equal(refused.status, 400, JSON.stringify(body))
    assert.equal(refused.body[0]!.code, 'FIELD_INVALID', JSON.stringify(body))
    assert.match(JSON.stringify(refused.body), new RegExp(field), JSON.stringify(body))
  }
  assert.deepEqual((await call('GET', at)).body.origins, ['https://example.com', 'https://app.example.com'], 'nothing saved by a refusal')
  assert.equal((await call('PATCH', at, { rpName: 'x' }, a.read.secret)).status, 403)
  const trail = await a.pub.store.audit.list({ accountId: a.pub.accountId, action: 'factor-settings.update', limit: 50 })
  assert.equal(trail.items.filter((e) => e.outcome === 'success').length, 2)
})

test("the account's attempt limit takes over the server's at once; a rate limit key is limited across users; bad keys are refused", async (t) => {
  const a = await startAdmin(t, { PLAN_RATE: '0', OTP_MAX_FAILURES: '100' }, testClock(T0))
  const app = a.pub
  const f = await enroll(app, 'u1')
  const g = await enroll(app, 'u2')
  // Into a window of its own: the activations counted in the one before.
  app.clock.advance(600_000)
  const patch = (body: unknown) =>
    fetch(`${a.url}/admin/v1/accounts/${app.accountId}/factor-settings`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${a.write.secret}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    }).then((r) => r.json())
  await patch({ userLimit: 2, keyLimit: 3, limitWindowSeconds: 600 })
  const guess = (user: string, token: string, rateLimitKey?: string) =>
    post(app.url, path(user, '/verify'), app.key, { token, ...(rateLimitKey === undefined ? {} : { rateLimitKey }) })
  assert.deepEqual(await codes(await guess('u1', wrong(f, app.clock.now()))), ['OTP_INVALID'])
  assert.deepEqual(await codes(await guess('u1', wrong(f, app.clock.now()))), ['OTP_INVALID'])
  const limited = await guess('u1', codeOf(f, app.clock.now()))
  assert.equal(limited.status, 429)
  // The window of 600 s started at 12:10:00; now is 12:10:15.
  assert.equal(limited.headers.get('retry-after'), '585')
  assert.deepEqual(await codes(limited), ['ATTEMPTS_LIMITED'])
  // The key's limit counts across users: three attempts from one address (two of u2's, one of u1's, each user with room), the fourth refused.
  assert.deepEqual(await codes(await guess('u2', wrong(g, app.clock.now()), '192.0.2.1')), ['OTP_INVALID'])
  await patch({ userLimit: 50 })
  assert.deepEqual(await codes(await guess('u2', wrong(g, app.clock.now()), '192.0.2.1')), ['OTP_INVALID'])
  assert.deepEqual(await codes(await guess('u1', wrong(f, app.clock.now()), '192.0.2.1')), ['OTP_INVALID'])
  assert.deepEqual(await codes(await guess('u1', codeOf(f, app.clock.now()), '192.0.2.1')), ['ATTEMPTS_LIMITED'], 'the key has had its three')
  assert.equal((await guess('u1', codeOf(f, app.clock.now()), '198.51.100.9')).status, 200, 'another key, and the user has room')
  for (const bad of ['', 'x'.repeat(257), 'a\u0000b']) {
    assert.deepEqual(await codes(await guess('u2', codeOf(g, app.clock.now()), bad)), ['RATE_LIMIT_KEY_INVALID'], JSON.stringify(bad).slice(0, 20))
  }
})

test('the CLI shows and sets factor settings; a refusal is one line, exit 1', async (t) => {
  const dataDir = tempDir(t)
  const app = await startApp(t, { DATA_DIR: dataDir })
  const account = ['--account', app.accountId]
  const set = await adminJson<{ rpId: string; origins: string[]; userLimit: number; limitWindowSeconds: number | null }>(dataDir, [
    'factor-settings',
    'set',
    ...account,
    '--rp-id',
    'example.com',
    '--origins',
    'https://example.com, https://app.example.com',
    '--user-limit',
    '10',
  ])
  assert.deepEqual(
    [set.rpId, set.origins, set.userLimit, set.limitWindowSeconds],
    ['example.com', ['https://example.com', 'https://app.example.com'], 10, null],
  )
  const shown = await admin(dataDir, ['factor-settings', 'show', ...account])
  assert.match(
    shown.stdout,
    /passkeys: relying party example\.com \("example\.com"\)\n {2}origins: https:\/\/example\.com, https:\/\/app\.example\.com\n {2}attempts per user: 10; per rate key: server default; window: server default s/,
  )
  const cleared = await adminJson<{ userLimit: number | null }>(dataDir, ['factor-settings', 'set', ...account, '--user-limit', 'none'])
  assert.equal(cleared.userLimit, null)
  const refused = await admin(dataDir, ['factor-settings', 'set', ...account, '--origins', 'http://example.com'])
  assert.equal(refused.code, 1)
  assert.match(refused.stderr, /^error: http:\/\/example\.com must be https \(http only for localhost\)\n$/)
  assert.equal((await admin(dataDir, ['factor-settings', 'set', ...account, '--user-limit', 'many'])).code, 2)
})
