import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { get, startApp, tempDir } from '../../support/helper.ts'
import { admin, adminJson } from '../../support/admin-helper.ts'
import { PortalClient, portalUser, signedInClient } from '../../support/portal-helper.ts'

async function until(check: () => Promise<boolean>, ms: number): Promise<number> {
  const start = Date.now()
  while (!(await check())) {
    if (Date.now() - start > ms) throw new Error(`not within ${ms} ms`)
    await new Promise((r) => setTimeout(r, 20))
  }
  return Date.now() - start
}

test('the admin CLI manages accounts, keys and subscriptions that a running server honours', async (t) => {
  const dataDir = tempDir(t)
  const app = await startApp(t, { DATA_DIR: dataDir, KEY_CACHE_POLL_MS: '100' })

  const { accountId } = await adminJson<{ accountId: string }>(dataDir, ['account', 'create', '--name', 'Acme Ltd'])
  assert.match(accountId, /^acc_[0-9a-f]{16}$/)
  const { keyId, apiKey } = await adminJson<{ keyId: string; apiKey: string }>(dataDir, ['key', 'create', '--account', accountId, '--name', 'prod'])
  assert.match(apiKey, /^tsr_[0-9a-f]{40}$/)

  assert.equal((await get(app.url, '/totp/ping', apiKey)).status, 403, 'no subscription yet')
  await adminJson(dataDir, ['subscription', 'grant', '--account', accountId, '--region', 'all', '--group', 'totp'])
  await until(async () => (await get(app.url, '/totp/ping', apiKey)).status === 200, 2000)

  const subs = await adminJson<{ region: string; group: string; status: string }[]>(dataDir, ['subscription', 'list', '--account', accountId])
  assert.deepEqual(subs.map((s) => `${s.region}:${s.group}:${s.status}`).sort(), ['apac:totp:active', 'eu:totp:active', 'us:totp:active'])

  await adminJson(dataDir, ['account', 'suspend', accountId])
  const suspendedIn = await until(async () => (await get(app.url, '/totp/ping', apiKey)).status === 403, 2000)
  await adminJson(dataDir, ['account', 'activate', accountId])
  await until(async () => (await get(app.url, '/totp/ping', apiKey)).status === 200, 2000)

  await adminJson(dataDir, ['subscription', 'revoke', '--account', accountId, '--region', 'eu', '--group', 'all'])
  await until(async () => (await get(app.url, '/totp/ping', apiKey)).status === 403, 2000)
  await adminJson(dataDir, ['subscription', 'grant', '--account', accountId, '--region', 'eu', '--group', 'totp'])
  await until(async () => (await get(app.url, '/totp/ping', apiKey)).status === 200, 2000)

  const keys = await adminJson<{ id: string; hint: string; revokedAt: string | null }[]>(dataDir, ['key', 'list', '--account', accountId])
  assert.deepEqual(
    keys.map((k) => k.id),
    [keyId],
  )
  assert.equal(keys[0]!.hint, apiKey.slice(-4))
  assert.ok(!JSON.stringify(keys).includes(apiKey.slice(4, 20)), 'listings never show the key')

  await adminJson(dataDir, ['key', 'revoke', keyId])
  const revokedIn = await until(async () => (await get(app.url, '/totp/ping', apiKey)).status === 403, 2000)
  t.diagnostic(`suspension seen after ${suspendedIn} ms, revocation after ${revokedIn} ms (poll 100 ms)`)

  const accounts = await adminJson<{ id: string; status: string }[]>(dataDir, ['account', 'list'])
  assert.ok(accounts.some((a) => a.id === accountId && a.status === 'active'))
})

test('the CLI speaks the admin API: the same fields (old names kept as aliases), the same roll grace, short usage errors, --version', async (t) => {
  const dataDir = tempDir(t)
  const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string }

  const account = await adminJson<{ id: string; accountId: string; name: string; status: string; createdAt: string }>(dataDir, [
    'account',
    'create',
    '--name',
    'Vocabulary',
  ])
  assert.match(account.id, /^acc_[0-9a-f]{16}$/)
  assert.equal(account.accountId, account.id, 'accountId: the old name, an alias')
  assert.equal(account.name, 'Vocabulary')
  assert.equal(account.status, 'active')

  const key = await adminJson<{ id: string; keyId: string; accountId: string; apiKey: string; hint: string; expiresAt: string | null }>(dataDir, [
    'key',
    'create',
    '--account',
    account.id,
    '--name',
    'deploy',
  ])
  assert.match(key.id, /^key_[0-9a-f]+$/)
  assert.equal(key.keyId, key.id, 'keyId: the old name, an alias')
  assert.equal(key.accountId, account.id)
  assert.equal(key.hint, key.apiKey.slice(-4))
  assert.equal(key.expiresAt, null)

  // No --grace: 24 hours, as the portal's roll form and the admin API default to.
  const before = Date.now()
  const rolled = await adminJson<{ id: string; keyId: string; apiKey: string; old: { id: string; keyId: string; expiresAt: string; rolledTo: string } }>(
    dataDir,
    ['key', 'roll', key.id],
  )
  assert.equal(rolled.old.id, key.id)
  assert.equal(rolled.old.keyId, key.id)
  assert.equal(rolled.old.rolledTo, rolled.id)
  const grace = Date.parse(rolled.old.expiresAt) - before
  assert.ok(grace > 86_400_000 - 60_000 && grace < 86_400_000 + 60_000, `the old key works for 24 hours (${grace} ms)`)

  const revoked = await adminJson<{ id: string; keyId: string; revoked: boolean; revokedAt: string | null }>(dataDir, ['key', 'revoke', rolled.id])
  assert.equal(revoked.id, rolled.id)
  assert.equal(revoked.revoked, true)
  assert.ok(revoked.revokedAt !== null)

  // A usage error: one line, then that command's own usage, not the whole page.
  const missing = await admin(dataDir, ['key', 'roll'])
  assert.equal(missing.code, 2)
  assert.match(missing.stderr, /^error: missing the key id\n/)
  assert.match(missing.stderr, /key roll KEYID \[--grace SECONDS\]/)
  assert.doesNotMatch(missing.stderr, /account create|subscription grant/, 'only the command at hand')
  assert.ok(missing.stderr.split('\n').length < 10, missing.stderr)
  const unknown = await admin(dataDir, ['frobnicate'])
  assert.equal(unknown.stderr.split('\n').filter(Boolean).length, 2, unknown.stderr)
  assert.match(unknown.stderr, /^Commands: account, key, /m)
  const help = await admin(dataDir, ['key', '--help'])
  assert.equal(help.code, 0)
  assert.match(help.stdout, /key create --account ID/)
  assert.doesNotMatch(help.stdout, /subscription grant/)

  const version = await admin(dataDir, ['--version'])
  assert.equal(version.code, 0)
  assert.equal(version.stdout, `${pkg.version}\n`)
})

test('the admin CLI prints for people by default and fails with one line and a non-zero code', async (t) => {
  const dataDir = tempDir(t)
  const created = await admin(dataDir, ['account', 'create', '--name', 'People'])
  assert.equal(created.code, 0)
  assert.match(created.stdout, /^Created account acc_[0-9a-f]{16} \(People\)\n$/)
  const list = await admin(dataDir, ['account', 'list'])
  assert.match(list.stdout, /^id\s+name\s+status\s+createdAt\n/)

  const failures: [string[], RegExp][] = [
    [['key', 'revoke', 'key_nope'], /^error: no active key key_nope\n$/],
    [['account', 'suspend', 'acc_nope'], /^error: no account acc_nope\n$/],
    [['key', 'create', '--account', 'acc_nope'], /^error: no account acc_nope\n$/],
    [['subscription', 'grant', '--account', 'acc_nope', '--region', 'eu', '--group', 'totp'], /^error: no account acc_nope\n$/],
    [['subscription', 'grant', '--account', 'x', '--region', 'mars', '--group', 'totp'], /^error: --region must be one of eu, us, apac or all/],
    [['account', 'create'], /^error: missing --name\n/],
    [['frobnicate'], /^error: unknown command "frobnicate"\n/],
    [['account', 'list', '--bogus'], /^error: Unknown option '--bogus'/],
  ]
  for (const [args, message] of failures) {
    const r = await admin(dataDir, args)
    assert.notEqual(r.code, 0, args.join(' '))
    assert.match(r.stderr, message, args.join(' '))
  }
  const badEnv = await admin(dataDir, ['account', 'list'], { REGION: 'mars' })
  assert.equal(badEnv.code, 78)
  assert.match(badEnv.stderr, /^error: Invalid configuration: REGION must be one of eu, us, apac/)
})

test('plan set/show/reset and usage: a running server applies the plan, and usage shows calls per day and group', async (t) => {
  const dataDir = tempDir(t)
  const app = await startApp(t, { DATA_DIR: dataDir, KEY_CACHE_POLL_MS: '100', USAGE_FLUSH_MS: '100' })
  const shown = await adminJson<{ plan: unknown; default: boolean }>(dataDir, ['plan', 'show', '--account', app.accountId])
  assert.deepEqual(shown, {
    accountId: app.accountId,
    plan: { rate: 100, burst: 200, quota: 0, period: 'month', weights: { totp: 2, converter: 1 } },
    default: true,
  })
  const set = await adminJson<{ plan: unknown }>(dataDir, ['plan', 'set', '--account', app.accountId, '--quota', '3', '--period', 'day', '--weight-totp', '1'])
  assert.deepEqual(set.plan, { rate: 100, burst: 200, quota: 3, period: 'day', weights: { totp: 1, converter: 1 } }, 'unset flags keep their value')
  await until(async () => (await get(app.url, '/totp/ping', app.key)).headers.get('ratelimit-policy')?.includes('"day";q=3') === true, 3000)
  const statuses = []
  for (let i = 0; i < 4; i++) statuses.push((await get(app.url, '/totp/ping', app.key)).status)
  assert.deepEqual(statuses, [200, 200, 429, 429], 'the probe above took one of the three')

  await until(async () => (await adminJson<{ usage: unknown[] }>(dataDir, ['usage', '--account', app.accountId])).usage.length > 0, 3000)
  const usage = await adminJson<{ usage: { day: string; group: string; count: number }[] }>(dataDir, ['usage', '--account', app.accountId])
  assert.deepEqual(usage.usage, [{ day: new Date().toISOString().slice(0, 10), group: 'totp', count: 3, units: 3 }])
  const human = await admin(dataDir, ['usage', '--account', app.accountId])
  assert.match(human.stdout, /^day\s+group\s+count\s+units\n\d{4}-\d\d-\d\d\s+totp\s+3\s+3$/m)
  const byKey = await adminJson<{ usage: unknown[] }>(dataDir, ['usage', '--account', app.accountId, '--by', 'key'])
  assert.deepEqual(byKey.usage, [{ keyId: app.keyId, group: 'totp', count: 3, units: 3 }])

  const bad = await admin(dataDir, ['plan', 'set', '--account', app.accountId, '--burst', '0'])
  assert.equal(bad.code, 2)
  assert.match(bad.stderr, /^error: --burst must be a whole number from 1 to/)
  const reset = await adminJson<{ default: boolean }>(dataDir, ['plan', 'reset', '--account', app.accountId])
  assert.equal(reset.default, true)
  assert.equal((await admin(dataDir, ['plan', 'show', '--account', 'acc_nope'])).code, 1)
})

test("keys roll with a grace period, expire and are scoped; admin tokens; every change is in the audit trail as the CLI's", async (t) => {
  const dataDir = tempDir(t)
  const app = await startApp(t, { DATA_DIR: dataDir, KEY_CACHE_POLL_MS: '100' })
  const { accountId } = await adminJson<{ accountId: string }>(dataDir, ['account', 'create', '--name', 'Rolling'])
  await adminJson(dataDir, ['subscription', 'grant', '--account', accountId, '--region', 'all', '--group', 'all'])
  const { keyId, apiKey } = await adminJson<{ keyId: string; apiKey: string }>(dataDir, ['key', 'create', '--account', accountId, '--name', 'prod'])
  await until(async () => (await get(app.url, '/totp/ping', apiKey)).status === 200, 2000)

  const rolled = await adminJson<{ keyId: string; apiKey: string; old: { keyId: string; expiresAt: string } }>(dataDir, [
    'key',
    'roll',
    keyId,
    '--grace',
    '3600',
  ])
  assert.notEqual(rolled.apiKey, apiKey)
  assert.ok(Math.abs(Date.parse(rolled.old.expiresAt) - Date.now() - 3_600_000) < 60_000, 'the old key works for the grace period')
  await until(async () => (await get(app.url, '/totp/ping', rolled.apiKey)).status === 200, 2000)
  assert.equal((await get(app.url, '/totp/ping', apiKey)).status, 200, 'the old key still works within the grace')
  const again = await admin(dataDir, ['key', 'roll', keyId])
  assert.equal(again.code, 1)
  assert.match(again.stderr, /^error: key key_[0-9a-f]+ is revoked, expired or rolled already\n$/)
  const now = await adminJson<{ apiKey: string }>(dataDir, ['key', 'roll', rolled.keyId, '--grace', '0'])
  await until(async () => (await get(app.url, '/totp/ping', rolled.apiKey)).status === 403, 2000)
  assert.equal((await get(app.url, '/totp/ping', now.apiKey)).status, 200)

  const scoped = await adminJson<{ apiKey: string; scope: unknown }>(dataDir, [
    'key',
    'create',
    '--account',
    accountId,
    '--groups',
    'converter',
    '--regions',
    'eu',
  ])
  assert.deepEqual(scoped.scope, { groups: ['converter'], regions: ['eu'] })
  await until(async () => (await get(app.url, '/totp/ping', now.apiKey)).status === 200, 2000)
  assert.equal((await get(app.url, '/totp/ping', scoped.apiKey)).status, 403, 'outside its scope')
  const human = await admin(dataDir, ['key', 'create', '--account', accountId, '--expires', '2099-01-01T00:00:00Z', '--name', 'temp'])
  assert.match(
    human.stdout,
    /^Created key key_[0-9a-f]+ for account acc_[0-9a-f]+ expiring 2099-01-01T00:00:00.000Z\.\nAPI key \(shown once, store it now\): tsr_[0-9a-f]{40}\n$/,
  )
  for (const [args, message] of [
    [['key', 'create', '--account', accountId, '--expires', '2001-01-01T00:00:00Z'], /^error: expiresAt must be in the future\n$/],
    [['key', 'create', '--account', accountId, '--groups', 'email'], /^error: scope.groups: "email" is not one of totp, converter\n$/],
    [['key', 'roll', keyId, '--grace', '604801'], /^error: --grace must be a whole number from 0 to 604800/],
  ] as const) {
    const r = await admin(dataDir, [...args])
    assert.notEqual(r.code, 0, args.join(' '))
    assert.match(r.stderr, message)
  }

  const token = await adminJson<{ tokenId: string; token: string; scope: string }>(dataDir, ['admin', 'token', 'create', '--name', 'ops', '--scope', 'read'])
  assert.match(token.token, /^tsa_[\w-]{32}$/)
  const tokens = await admin(dataDir, ['admin', 'token', 'list'])
  assert.match(tokens.stdout, new RegExp(`^${token.tokenId}\\s+ops\\s+read\\s`, 'm'))
  assert.ok(!tokens.stdout.includes(token.token), 'the token is shown once')
  await adminJson(dataDir, ['admin', 'token', 'revoke', token.tokenId])
  assert.equal((await admin(dataDir, ['admin', 'token', 'revoke', token.tokenId])).code, 1)

  const trail = await adminJson<{ items: { actor: string; action: string; outcome: string; target: { id: string }; detail: Record<string, unknown> }[] }>(
    dataDir,
    ['audit', '--account', accountId, '--limit', '100'],
  )
  const actions = trail.items.map((e) => `${e.action}:${e.outcome}`).reverse()
  assert.deepEqual(actions.slice(0, 2), ['account.create:success', 'subscription.set:success'])
  for (const expected of ['key.create:success', 'key.roll:success', 'key.roll:failure']) assert.ok(actions.includes(expected), expected)
  assert.ok(trail.items.every((e) => e.actor === 'cli'))
  assert.ok(!JSON.stringify(trail).includes(apiKey.slice(4)), 'no key in the trail')
  const tokenTrail = await adminJson<{ items: { action: string; outcome: string }[] }>(dataDir, ['audit', '--action', 'admin-token.revoke'])
  assert.deepEqual(
    tokenTrail.items.map((e) => `${e.action}:${e.outcome}`),
    ['admin-token.revoke:failure', 'admin-token.revoke:success'],
    'newest first; the refused second revoke too',
  )
  const table = await admin(dataDir, ['audit', '--account', accountId, '--limit', '1'])
  assert.match(table.stdout, /^at\s+actor\s+action\s+target\s+accountId\s+ip\s+outcome\s+detail\n\S+\s+cli\s+key\.create/)
  assert.match(table.stdout, /\(more: --after evt_[0-9a-f]{22}\)$/m)
})

test("operator grant/revoke/list: the portal's operator pages follow at once; user list/approve/disable; every change audited as the CLI's", async (t) => {
  const dataDir = tempDir(t)
  const app = await startApp(t, { DATA_DIR: dataDir, SIGNUP_MODE: 'approval' })
  const { client, user } = await signedInClient(app, { email: 'Ops@Example.com', accountId: null })
  assert.equal((await client.get('/portal/operator')).status, 404)

  const granted = await admin(dataDir, ['operator', 'grant', '--email', 'ops@example.com'])
  assert.equal(granted.code, 0, granted.stderr)
  assert.equal(granted.stdout, 'Ops@Example.com is an operator now\n')
  assert.equal((await client.get('/portal/operator')).status, 200, 'the next page sees the flag')
  assert.equal((await admin(dataDir, ['operator', 'grant', '--email', 'ops@example.com'])).stdout, 'Ops@Example.com is an operator already\n')
  const operators = await adminJson<{ id: string; email: string; operator: boolean }[]>(dataDir, ['operator', 'list'])
  assert.deepEqual(
    operators.map((o) => [o.id, o.email, o.operator]),
    [[user.id, 'Ops@Example.com', true]],
  )
  assert.match((await admin(dataDir, ['operator', 'list'])).stdout, /^id\s+email\s+status\s+confirmed\s+createdAt\nusr_\w+\s+Ops@Example\.com\s+active\s+yes\s/)

  const revoked = await adminJson<{ operator: boolean; changed: boolean }>(dataDir, ['operator', 'revoke', '--email', 'ops@example.com'])
  assert.deepEqual([revoked.operator, revoked.changed], [false, true])
  assert.equal((await client.get('/portal/operator')).status, 404)
  assert.deepEqual(await adminJson(dataDir, ['operator', 'list']), [])

  const waiting = await portalUser(app, { email: 'waiting@example.com', accountId: null })
  await app.store.portal.updateUser(waiting.user.id, { status: 'pending' }, null)
  const pending = await adminJson<{ items: { email: string; status: string }[]; next: string | null }>(dataDir, ['user', 'list', '--status', 'pending'])
  assert.deepEqual(pending, { items: [{ ...pending.items[0]!, email: 'waiting@example.com', status: 'pending' }], next: null })
  const approved = await admin(dataDir, ['user', 'approve', '--email', 'waiting@example.com'])
  assert.equal(approved.stdout, 'waiting@example.com is approved and may sign in (emailed)\n')
  assert.match(approved.stderr, /"to":"waiting@example\.com","subject":"Your Tessera account is approved"/, 'the log mailer (no SMTP_URL) writes the email')
  const signedIn = new PortalClient(app.url)
  await signedIn.signIn(waiting.email, waiting.password)
  // A lost phone: the operator turns the second factor off; the user's sessions end.
  await app.store.portal.updateUser(waiting.user.id, { totpSecret: 'JBSWY3DPEHPK3PXP', totpEnabledAt: new Date().toISOString() }, null)
  await app.store.portal.setRecoveryCodes(waiting.user.id, ['a'.repeat(64)])
  const off = await admin(dataDir, ['user', 'two-factor-off', '--email', 'waiting@example.com'])
  assert.equal(off.stdout, 'waiting@example.com signs in with the password alone now; 1 session(s) ended\n')
  const after = await app.store.portal.getUser(waiting.user.id)
  assert.deepEqual([after?.totpSecret, after?.totpEnabledAt, await app.store.portal.recoveryCodesLeft(waiting.user.id)], [null, null, 0])
  assert.equal((await admin(dataDir, ['user', 'two-factor-off', '--email', 'waiting@example.com'])).stdout, 'waiting@example.com has no two-factor sign-in\n')
  await signedIn.signIn(waiting.email, waiting.password)
  const disabled = await admin(dataDir, ['user', 'disable', '--email', 'waiting@example.com'])
  assert.equal(disabled.stdout, 'waiting@example.com is disabled; 1 session(s) ended\n')
  assert.equal((await signedIn.get('/portal/home')).status, 303, 'signed out')

  const trail = await adminJson<{ items: { actor: string; action: string; target: { id: string } }[] }>(dataDir, ['audit', '--actor', 'cli'])
  assert.deepEqual(
    trail.items.map((e) => `${e.action}:${e.target.id === user.id ? 'ops' : 'waiting'}`).reverse(),
    ['user.operator-grant:ops', 'user.operator-revoke:ops', 'user.approve:waiting', 'user.2fa-off:waiting', 'user.disable:waiting'],
    'the repeated grant and 2fa-off wrote nothing',
  )
  for (const [args, message] of [
    [['operator', 'grant', '--email', 'nobody@example.com'], /^error: no portal user nobody@example\.com\n$/],
    [['operator', 'grant'], /^error: missing --email\n/],
    [['user', 'list', '--status', 'asleep'], /^error: --status must be one of active, pending, disabled/],
    [['operator', 'promote'], /^error: unknown command "operator promote"\n/],
  ] as const) {
    const r = await admin(dataDir, [...args])
    assert.notEqual(r.code, 0, args.join(' '))
    assert.match(r.stderr, message, args.join(' '))
  }
})
