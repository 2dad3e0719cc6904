/**
 * The operator pages of an account's managed-factor users, through the real app: a user
 * locked by parallel wrong codes is shown locked, an operator clears the lock and the user
 * verifies at once; deleting asks first, then the user's codes stop working; hidden from
 * everyone but operators, CSRF-guarded, paged, and never a 5xx for a hostile user ID.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createCaller, post, startApp, testClock } from '../../support/helper.ts'
import { codeOf, createFactor, enroll, path, wrong } from '../../support/factors.ts'
import { signedInClient } from '../../support/portal-helper.ts'

const T0 = Date.UTC(2026, 0, 1, 12, 0, 15)
const ENV = { OTP_MAX_FAILURES: '5', PLAN_RATE: '0', FACTOR_USER_LIMIT: '0' }

test("an operator finds a locked user from the account page, clears the lock (the user verifies at once), and deletes the user's factors after a confirmation", async (t) => {
  const app = await startApp(t, ENV, testClock(T0))
  const user = 'eve <b>&"ü</b>'
  const f = await enroll(app, user)
  await post(app.url, path(user, '/recovery-codes'), app.key, {})
  app.clock.advance(30_000)
  const guesses = await Promise.all(Array.from({ length: 12 }, () => post(app.url, path(user, '/verify'), app.key, { token: wrong(f, app.clock.now()) })))
  assert.equal(guesses.filter((r) => r.status === 429).length, 7)
  const right = () => post(app.url, path(user, '/verify'), app.key, { token: codeOf(f, app.clock.now()) })
  assert.equal((await right()).status, 429)

  const { client: op, user: opUser } = await signedInClient(app, { operator: true, accountId: null })
  const account = `/portal/operator/accounts/${app.accountId}`
  assert.match((await op.get(account)).text, new RegExp(`<a href="${account}/totp-users">TOTP users of test</a>`))
  const list = await op.get(`${account}/totp-users`)
  assert.equal(list.status, 200)
  const userPage = `${account}/totp-users/${encodeURIComponent(user)}`
  assert.ok(
    list.text.includes(`<a href="${userPage}">eve &lt;b&gt;&amp;&quot;ü&lt;/b&gt;</a></td><td>1</td><td>0</td><td>10</td>`),
    'listed, escaped, with its counts',
  )
  assert.match(list.text, /<span class="badge bad">locked<\/span> until <time/)

  const page = await op.get(userPage)
  assert.equal(page.status, 200)
  assert.match(page.text, /<h2 id="lock-heading">Lock<\/h2>/)
  assert.match(page.text, /is <span class="badge bad">locked<\/span>/)
  assert.ok(page.text.includes(`<code>${f.factorID}</code></td><td><span class="badge ok">active</span>`))
  assert.match(page.text, /SHA1, 6 digits, 30 s/)
  assert.match(page.text, /10 recovery codes left\./)
  assert.ok(!page.text.includes(f.secretKey) && !page.text.includes('sealed'), 'no secret')
  assert.ok(!page.text.includes('<b>&'), 'the user ID is escaped everywhere')

  const cleared = await op.post(`${userPage}/unlock`, {})
  assert.equal(cleared.status, 303)
  assert.equal(cleared.location, `${userPage}?done=unlocked`)
  assert.match((await op.get(cleared.location!)).text, /role="status">The user&#39;s lockout is cleared|role="status">The user's lockout is cleared/)
  assert.equal((await right()).status, 200, 'verifies at once')

  const asked = await op.post(`${userPage}/delete`, {}, { from: userPage })
  assert.equal(asked.status, 200, 'a post without the confirmation asks first')
  assert.match(asked.text, /Delete the factor and 10 recovery codes of eve &lt;b&gt;.* in test\? Their codes stop working at once\. This cannot be undone\./)
  assert.match(asked.text, /<input type="hidden" name="confirm" value="1">/)
  app.clock.advance(30_000)
  assert.equal((await right()).status, 200, 'nothing deleted yet')
  const deleted = await op.post(`${userPage}/delete`, { confirm: '1' })
  assert.equal(deleted.status, 303)
  assert.equal(deleted.location, `${account}/totp-users?done=factors-deleted`)
  const after = await op.get(deleted.location!)
  assert.match(after.text, /role="status">The user.* factors and recovery codes are deleted/)
  assert.match(after.text, /No user yet\./)
  app.clock.advance(30_000)
  assert.equal((await right()).status, 404, "the user's codes no longer work")
  assert.equal((await op.get(userPage)).status, 404)

  const trail = (await app.accounts.auditEvents({ accountId: app.accountId, actor: `portal-user:${opUser.id}`, limit: 10 })).items
  assert.deepEqual(
    trail.map((e) => [e.action, e.target.id, e.detail]).reverse(),
    [
      ['factor-lockout.clear', user, { userID: user, cleared: true }],
      ['factor.deleted', user, { userID: user, factorID: null, user: true, by: 'operator' }],
    ],
    "audited as the operator's",
  )
})

test("the TOTP-user pages are a 404 to everyone but operators; forms need their CSRF token; another account's user, unknown users and hostile IDs are 4xx; users are paged", async (t) => {
  const app = await startApp(t, ENV, testClock(T0))
  const f = await enroll(app, 'frank')
  app.clock.advance(30_000)
  for (let i = 0; i < 6; i++) await (await post(app.url, path('frank', '/verify'), app.key, { token: wrong(f, app.clock.now()) })).arrayBuffer()
  const other = await createCaller(app.accounts)
  await createFactor(app, 'grace', {}, other.apiKey)
  const account = `/portal/operator/accounts/${app.accountId}`
  const frank = `${account}/totp-users/frank`

  const { client: owner } = await signedInClient(app, { role: 'owner' })
  for (const where of [`${account}/totp-users`, frank]) assert.equal((await owner.get(where)).status, 404, where)
  await owner.get('/portal/home')
  for (const action of ['unlock', 'delete'])
    assert.equal((await owner.post(`${frank}/${action}`, { confirm: '1' }, { from: '/portal/home' })).status, 404, action)

  const { client: op } = await signedInClient(app, { operator: true, accountId: null })
  await op.get(frank)
  for (const [action, fields] of [
    ['unlock', {}],
    ['delete', { confirm: '1' }],
  ] as const) {
    assert.equal((await op.post(`${frank}/${action}`, fields, { csrf: false })).status, 403, `${action} without a token`)
    assert.equal((await op.post(`${frank}/${action}`, fields, { from: frank, origin: 'https://evil.example' })).status, 403, `${action} from another site`)
  }
  assert.match((await op.get(frank)).text, /is <span class="badge bad">locked<\/span>/, 'still locked')
  assert.equal(((await app.factors.user(app.accountId, 'frank')) as { factors: unknown[] }).factors.length, 1, 'still there')

  assert.equal((await op.get(`${account}/totp-users/grace`)).status, 404, "another account's user")
  assert.equal((await op.post(`${account}/totp-users/grace/delete`, { confirm: '1' }, { from: frank })).status, 404)
  assert.equal((await op.get(`/portal/operator/accounts/${other.accountId}/totp-users/grace`)).status, 200, 'in its own account')
  assert.equal((await op.get('/portal/operator/accounts/acc_none/totp-users')).status, 404)
  assert.equal((await op.get(`${account}/totp-users/nobody`)).status, 404)
  for (const raw of ['%zz', '%', '%00', 'a%00b', '%0A', '%3A', 'a%3Ab', '%20', 'x'.repeat(300), '%ED%A0%80', '%2F', '..%2F..', '%25', '%E2%80%AE']) {
    for (const res of [await op.get(`${account}/totp-users/${raw}`), await op.post(`${account}/totp-users/${raw}/unlock`, {}, { from: frank })]) {
      assert.ok(res.status >= 400 && res.status < 500, `${raw.slice(0, 20)}: ${res.status}`)
    }
  }
  const bad = await op.get(`${account}/totp-users?after=not-a-cursor`)
  assert.equal(bad.status, 400)
  assert.match(bad.text, /role="alert">That page link is not valid/)

  for (let i = 0; i < 51; i += 17)
    await Promise.all(Array.from({ length: Math.min(17, 51 - i) }, (_, j) => createFactor(app, `user-${String(i + j).padStart(2, '0')}`)))
  const first = await op.get(`${account}/totp-users`)
  assert.equal((first.text.match(/<a href="[^"]+\/totp-users\/[^"]+">/g) ?? []).length, 50)
  const next = /<a href="([^"]+)" rel="next">Next users<\/a>/.exec(first.text)
  assert.ok(next, 'a next page')
  const second = await op.get(next[1]!.replaceAll('&amp;', '&'))
  assert.deepEqual(
    [...second.text.matchAll(/\/totp-users\/([^"]+)">/g)].map((m) => m[1]),
    ['user-49', 'user-50'],
    'frank and user-00 to user-48 on the first page',
  )
  assert.match(second.text, /TOTP users of test, continued/)
})
