/**
 * Single sign-on's doors attacked over HTTP, against a real OpenID provider (test/support/oidc.ts):
 * one code's callback sent ten times at once signs in once; hostile callbacks (no state, a long
 * one, lone surrogates, repeated parameters, a provider's error, paths with `..`, `%2e` and bidi
 * characters) get a clear 4xx page, never a 5xx; starts without the form's token or from another
 * site do nothing; starts beyond the per-source and total caps get 429 under parallel calls; a
 * provider down or silent costs a start at most its timeout and answers 503.
 */
import { test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { createServer, type Socket } from 'node:net'
import { freePort, startApp, type Running } from '../../support/helper.ts'
import { configure, Jar, startProvider, throughProvider } from '../../support/oidc.ts'
import { PortalClient, portalUser, waitForMail } from '../../support/portal-helper.ts'
import { Users } from '../../../src/services/users.ts'
import { sealedPortal } from '../../../src/services/users/sealed.ts'
import { resolveKeyring } from '../../../src/config/encryption.ts'
import { SYSTEM } from '../../../src/domain/accounts.ts'

async function app(t: TestContext, env: Record<string, string> = {}): Promise<Running> {
  const port = await freePort()
  return startApp(t, { PUBLIC_BASE_URL: `http://127.0.0.1:${port}`, ...env }, undefined, { port })
}

const callback = (a: Running, query: string, cookie = '', path = '/portal/sso/kc/callback') =>
  fetch(`${a.url}${path}${query}`, { headers: { cookie }, redirect: 'manual' })

test('one code sent back ten times at once signs in once; its replay and hostile callbacks get a 4xx page, never a 5xx', async (t) => {
  const a = await app(t)
  const kc = await startProvider(t)
  await configure(a, kc, { id: 'kc', name: 'Keycloak', domains: ['example.com'], joinAccountId: a.accountId, joinRole: 'viewer' })
  kc.accounts.set('alice', { email: 'alice@example.com', email_verified: true })

  const { callback: url, jar } = await throughProvider(a, 'kc', 'alice')
  const answers = await Promise.all(Array.from({ length: 10 }, () => fetch(url, { headers: { cookie: jar.header() }, redirect: 'manual' })))
  const statuses = answers.map((r) => r.status).sort()
  assert.deepEqual(statuses, [303, 400, 400, 400, 400, 400, 400, 400, 400, 400], 'one sign-in of ten')
  const won = answers.find((r) => r.status === 303)!
  assert.ok(won.headers.getSetCookie().some((c) => c.startsWith('tessera_session=') && !c.startsWith('tessera_session=;')))
  assert.equal(kc.tokenRequests, 1, 'the code went to the provider once')
  for (const r of answers.filter((x) => x.status === 400)) assert.match(await r.text(), /has expired, was used already/)
  assert.equal((await fetch(url, { headers: { cookie: jar.header() }, redirect: 'manual' })).status, 400, 'a replay later')

  // A provider's error for a live request: refused, and the request spent.
  const cancelled = await throughProvider(a, 'kc', 'alice', new Jar())
  const state = new URL(cancelled.callback).searchParams.get('state')!
  const denied = await callback(a, `?error=access_denied&error_description=${'x'.repeat(3000)}&state=${state}`, cancelled.jar.header())
  assert.equal(denied.status, 403)
  assert.match(await denied.text(), /did not sign you in/)
  assert.equal((await fetch(cancelled.callback, { headers: { cookie: cancelled.jar.header() }, redirect: 'manual' })).status, 400, 'spent')

  const hostile = [
    '',
    '?',
    '?code=x',
    `?state=${'s'.repeat(600)}&code=x`,
    '?state=%ED%A0%80&code=%ED%B0%80',
    '?state=%F0%9F&code=%00',
    '?state=a&state=b&code=c&code=d',
    '?state[]=a&code={"a":1}',
    `?code=${'c'.repeat(7000)}&state=x`,
    '?error=%E2%80%AEevil&state=x',
  ]
  for (const query of hostile) {
    const r = await callback(a, query, jar.header())
    assert.ok(r.status >= 400 && r.status < 500, `${query.slice(0, 40)}: ${r.status}`)
    assert.match(await r.text(), /role="alert"/, query.slice(0, 40))
  }
  for (const path of [
    '/portal/sso/%2e%2e/callback',
    '/portal/sso/..%2fkc/callback',
    '/portal/sso/k%E2%80%AEc/callback',
    `/portal/sso/${'k'.repeat(300)}/callback`,
  ]) {
    const r = await callback(a, '?state=x&code=y', jar.header(), path)
    assert.ok(r.status >= 400 && r.status < 500, `${path}: ${r.status}`)
  }
  const refusals = (await a.store.audit.list({ limit: 100, action: 'user.sign-in' })).items.filter((e) => e.outcome === 'failure')
  assert.ok(refusals.length >= hostile.length, 'each refusal audited')
  for (const e of refusals) assert.ok(!JSON.stringify(e).includes('c'.repeat(100)), 'no code in the trail')
})

test('starts: only from the form of this site, within the per-source cap under parallel calls, the oldest giving way at the total; unknown providers 404', async (t) => {
  const a = await app(t, { SSO_PENDING_PER_IP: '3', SSO_PENDING_MAX: '8', TRUST_PROXY: '127.0.0.1' })
  const kc = await startProvider(t)
  await configure(a, kc, { id: 'kc', name: 'Keycloak' })
  const jar = new Jar()
  const page = await fetch(`${a.url}/portal/sign-in`)
  jar.take(page)
  const csrf = /name="_csrf" value="([^"]+)"/.exec(await page.text())![1]!
  const start = (opts: { csrf?: string; origin?: string; from?: string; id?: string } = {}) =>
    fetch(`${a.url}/portal/sso/${opts.id ?? 'kc'}/start`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        origin: opts.origin ?? a.url,
        cookie: jar.header(),
        ...(opts.from === undefined ? {} : { 'x-forwarded-for': opts.from }),
      },
      body: new URLSearchParams({ _csrf: opts.csrf ?? csrf }).toString(),
      redirect: 'manual',
    })
  assert.equal((await start({ csrf: 'wrong' })).status, 403)
  assert.equal((await start({ origin: 'https://evil.example' })).status, 403)
  for (const id of ['nope', '%2e%2e', 'K', 'k%E2%80%AE', 'x'.repeat(200)]) assert.equal((await start({ id })).status, 404, id)

  const one = await Promise.all(Array.from({ length: 12 }, () => start({ from: '198.51.100.1' })))
  assert.deepEqual(one.map((r) => r.status).sort(), [200, 200, 200, ...Array(9).fill(429)], 'three of twelve parallel starts from one source')
  for (const r of one.filter((x) => x.status === 429)) assert.equal(r.headers.get('retry-after'), '600')
  // IPv6 sources share their /64.
  const v6 = await Promise.all(['2001:db8::1', '2001:db8::2', '2001:db8::3:4', '2001:db8::ff'].map((from) => start({ from })))
  assert.deepEqual(v6.map((r) => r.status).sort(), [200, 200, 200, 429])
  // At the total (8), the oldest give way: ten from other sources, a second later, all start, and the first source's are gone.
  a.clock.advance(1000)
  const many = await Promise.all(Array.from({ length: 10 }, (_, i) => start({ from: `203.0.113.${i + 1}` })))
  assert.ok(many.every((r) => r.status === 200))
  const back = []
  for (let i = 0; i < 3; i++) back.push((await start({ from: '198.51.100.1' })).status)
  assert.deepEqual(back, [200, 200, 200], 'its three were evicted: it starts again')
})

test('a provider down or silent costs a start its timeout at most, and answers 503 with Retry-After', async (t) => {
  const a = await app(t, { SSO_TIMEOUT_MS: '1000' })
  const closed = await freePort()
  await configure(a, { issuer: `http://127.0.0.1:${closed}` }, { id: 'down', name: 'Down' })
  const sockets: Socket[] = []
  const silent = createServer((socket) => sockets.push(socket))
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve))
  t.after(() => {
    for (const s of sockets) s.destroy()
    silent.close()
  })
  const port = (silent.address() as { port: number }).port
  await configure(a, { issuer: `http://127.0.0.1:${port}` }, { id: 'silent', name: 'Silent' })
  const jar = new Jar()
  const page = await fetch(`${a.url}/portal/sign-in`)
  jar.take(page)
  const html = await page.text()
  assert.match(html, /Sign in with Down/)
  const csrf = /name="_csrf" value="([^"]+)"/.exec(html)![1]!
  for (const id of ['down', 'silent']) {
    const began = Date.now()
    const r = await fetch(`${a.url}/portal/sso/${id}/start`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: a.url, cookie: jar.header() },
      body: new URLSearchParams({ _csrf: csrf }).toString(),
      redirect: 'manual',
    })
    const took = Date.now() - began
    assert.equal(r.status, 503, id)
    assert.equal(r.headers.get('retry-after'), '60')
    assert.match(await r.text(), /did not answer in time/)
    assert.ok(took < 3000, `${id}: ${took} ms`)
  }
})

test('under SIGNUP_MODE=approval a first sign-in with no account to join waits for an operator, who is told; under closed it is refused', async (t) => {
  const a = await app(t, { SIGNUP_MODE: 'approval' })
  const kc = await startProvider(t)
  await configure(a, kc, { id: 'kc', name: 'Keycloak' })
  kc.accounts.set('pat', { email: 'pat@example.com', email_verified: true })
  const op = await portalUser(a, { email: 'op@example.com', operator: true, accountId: null })
  const first = await throughProvider(a, 'kc', 'pat')
  const waiting = await fetch(first.callback, { headers: { cookie: first.jar.header() }, redirect: 'manual' })
  assert.equal(waiting.status, 200)
  assert.match(await waiting.text(), /an operator approves each new account/)
  assert.ok(!waiting.headers.getSetCookie().some((c) => c.startsWith('tessera_session=') && !c.startsWith('tessera_session=;')), 'no session')
  const pat = (await a.store.portal.findUserByEmail('pat@example.com'))!
  assert.equal(pat.status, 'pending')
  assert.equal((await a.store.portal.membershipsOf(pat.id)).length, 1, 'an account of their own, as a sign-up')
  assert.match((await waitForMail(a, op.email)).text, /pat@example\.com/)
  await waitForMail(a, 'pat@example.com')
  // Again before the approval: refused, nothing new made.
  const again = await throughProvider(a, 'kc', 'pat')
  const refused = await fetch(again.callback, { headers: { cookie: again.jar.header() }, redirect: 'manual' })
  assert.equal(refused.status, 403)
  assert.match(await refused.text(), /waiting for an operator&#39;s approval|waiting for an operator's approval/)

  const closed = await app(t, { SIGNUP_MODE: 'closed' })
  await configure(closed, kc, { id: 'kc', name: 'Keycloak' })
  const shut = await throughProvider(closed, 'kc', 'pat')
  const no = await fetch(shut.callback, { headers: { cookie: shut.jar.header() }, redirect: 'manual' })
  assert.equal(no.status, 403)
  assert.match(await no.text(), /Sign-ups are closed/)
  assert.equal(await closed.store.portal.findUserByEmail('pat@example.com'), null)
})

test('linking asks who it is: a user with no password links another provider only within 10 minutes of a sign-in through one', async (t) => {
  const a = await app(t)
  const kc = await startProvider(t)
  const okta = await startProvider(t)
  await configure(a, kc, { id: 'kc', name: 'Keycloak', domains: ['example.com'], joinAccountId: a.accountId, joinRole: 'viewer' })
  await configure(a, okta, { id: 'okta', name: 'Okta' })
  kc.accounts.set('sam', { email: 'sam@example.com', email_verified: true })
  const { callback: url, jar } = await throughProvider(a, 'kc', 'sam')
  const signed = await fetch(url, { headers: { cookie: jar.header() }, redirect: 'manual' })
  assert.equal(signed.status, 303)
  jar.take(signed)
  const security = await fetch(`${a.url}/portal/security`, { headers: { cookie: jar.header() } })
  const html = await security.text()
  assert.match(html, /You have no password here: this works within 10 minutes/)
  const csrf = /name="_csrf" value="([^"]+)"/.exec(html)![1]!
  const link = () =>
    fetch(`${a.url}/portal/security/sso-link`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: a.url, cookie: jar.header() },
      body: new URLSearchParams({ _csrf: csrf, provider: 'okta' }).toString(),
      redirect: 'manual',
    })
  const fresh = await link()
  assert.equal(fresh.status, 200)
  assert.match(fresh.headers.get('refresh') ?? '', new RegExp(`^0;url=${okta.issuer}/`))
  // Unlinking the only way in is refused.
  const unlink = () =>
    fetch(`${a.url}/portal/security/sso-unlink`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: a.url, cookie: jar.header() },
      body: new URLSearchParams({ _csrf: csrf, provider: 'kc' }).toString(),
      redirect: 'manual',
    })
  const only = await unlink()
  assert.equal(only.status, 409)
  assert.match(await only.text(), /only way to sign in/)
  a.clock.advance(11 * 60_000)
  for (const late of [await link(), await unlink()]) {
    assert.equal(late.status, 403)
    assert.match(await late.text(), /sign in through a provider again, then do this within 10 minutes/)
  }
})

test("what the provider says is checked too: odd addresses, another organisation's domain, the sign-up limits, a token endpoint that never answers", async (t) => {
  const a = await app(t, { SIGNUP_IP_MAX: '2', SSO_TIMEOUT_MS: '1000' })
  const kc = await startProvider(t)
  await configure(a, kc, { id: 'kc', name: 'Keycloak', domains: ['example.com'], joinAccountId: a.accountId, joinRole: 'viewer' })
  const end = async (account: string) => {
    const { callback: url, jar } = await throughProvider(a, 'kc', account)
    const r = await fetch(url, { headers: { cookie: jar.header() }, redirect: 'manual' })
    return { status: r.status, text: await r.text() }
  }
  // An address with a control character, a bidi override, or a lone surrogate: not one to make a user of (and no 500).
  for (const [account, email] of [
    ['ctl', 'c\u0001tl@example.com'],
    ['bidi', 'bi\u202edi@example.com'],
    ['half', 'ha\ud800lf@example.com'],
  ] as const) {
    kc.accounts.set(account, { email, email_verified: true })
    const r = await end(account)
    assert.equal(r.status, 403, account)
    assert.match(r.text, /did not give us an email address it has verified/, account)
  }
  // The organisation's domain the token names must be one of the provider's too.
  kc.accounts.set('ex', { email: 'ex@example.com', email_verified: true, hd: 'personal.example' })
  assert.match((await end('ex')).text, /does not sign in addresses of your domain/)
  // First sign-ins are sign-ups: counted against the source.
  for (const name of ['n1', 'n2', 'n3']) kc.accounts.set(name, { email: `${name}@example.com`, email_verified: true })
  assert.equal((await end('n1')).status, 303)
  assert.equal((await end('n2')).status, 303)
  const third = await end('n3')
  assert.equal(third.status, 429)
  assert.match(third.text, /Too many new sign-ups/)
  assert.equal((await end('n1')).status, 303, 'a user already made signs in whatever the limit')
  // A token endpoint that never answers: 503 after the timeout, not a check that failed.
  kc.tamper = 'hang'
  const began = Date.now()
  const hung = await end('n1')
  assert.equal(hung.status, 503)
  assert.match(hung.text, /did not answer in time/)
  assert.ok(Date.now() - began < 4000, `${Date.now() - began} ms`)
})

test('a provider whose client secret no longer opens (its key version removed) fails only its own sign-ins, and can still be removed', async (t) => {
  const a = await app(t)
  const kc = await startProvider(t)
  await configure(a, kc, { id: 'kc', name: 'Keycloak' })
  const [stored] = await a.store.portal.listSsoProviders()
  const elsewhere = resolveKeyring(a.config).seal(Buffer.from('a secret of another provider'), ['sso-client-secret', 'other'])
  assert.equal(await a.store.portal.resealSsoSecret('kc', stored!.clientSecret!, elsewhere), true)
  const user = await portalUser(a)
  const client = new PortalClient(a.url)
  const page = await client.get('/portal/sign-in')
  assert.equal(page.status, 200)
  assert.match(page.text, /Sign in with Keycloak/)
  await client.signIn(user.email, user.password)
  assert.equal((await client.get('/portal/security')).status, 200, 'a password sign-in and the Security page are untouched')
  const jar = new Jar()
  const signIn = await fetch(`${a.url}/portal/sign-in`)
  jar.take(signIn)
  const csrf = /name="_csrf" value="([^"]+)"/.exec(await signIn.text())![1]!
  const started = await fetch(`${a.url}/portal/sso/kc/start`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: a.url, cookie: jar.header() },
    body: new URLSearchParams({ _csrf: csrf }).toString(),
    redirect: 'manual',
  })
  assert.equal(started.status, 503)
  assert.match(await started.text(), /settings cannot be read/)
  const users = new Users({
    store: { ...a.store, portal: sealedPortal(a.store.portal, resolveKeyring(a.config)) },
    config: a.config,
    pepper: a.pepper,
    accounts: a.accounts,
  })
  assert.equal(await users.sso.deleteProvider({ actor: SYSTEM }, 'kc'), true)
})

test('operators who must use SSO: a session through a provider that knows them by another address opens no operator page; a password-off provider stays linked', async (t) => {
  const a = await app(t, { SSO_OPERATORS_REQUIRED: 'true' })
  const kc = await startProvider(t)
  await configure(a, kc, { id: 'kc', name: 'Keycloak', domains: ['example.com'], joinAccountId: a.accountId, joinRole: 'viewer', passwordAllowed: false })
  const op = await portalUser(a, { email: 'olga@example.com', operator: true, accountId: null })
  // A link to another address, made before the setting (or before Olga was an operator): written as it was then.
  kc.accounts.set('other', { email: 'someone-else@example.com', email_verified: true })
  const event = {
    actor: 'cli',
    action: 'user.sso-link',
    target: { type: 'user' as const, id: op.user.id },
    accountId: null,
    ip: null,
    outcome: 'success' as const,
    detail: {},
  }
  assert.equal(await a.store.portal.bindSsoIdentity({ providerId: 'kc', subject: 'other', userId: op.user.id, email: 'someone-else@example.com' }, event), true)
  const { callback: url, jar } = await throughProvider(a, 'kc', 'other')
  const signed = await fetch(url, { headers: { cookie: jar.header() }, redirect: 'manual' })
  assert.equal(signed.status, 303)
  jar.take(signed)
  const operatorPage = await fetch(`${a.url}/portal/operator`, { headers: { cookie: jar.header() }, redirect: 'manual' })
  assert.equal(operatorPage.status, 403)
  assert.match(await operatorPage.text(), /only in a session signed in through single sign-on/)
  // The provider allows no password: Olga cannot unlink it (with it her password would work again).
  const security = await fetch(`${a.url}/portal/security`, { headers: { cookie: jar.header() } })
  const csrf = /name="_csrf" value="([^"]+)"/.exec(await security.text())![1]!
  const unlink = await fetch(`${a.url}/portal/security/sso-unlink`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: a.url, cookie: jar.header() },
    body: new URLSearchParams({ _csrf: csrf, provider: 'kc', 'sso-unlink-proof': op.password }).toString(),
    redirect: 'manual',
  })
  assert.equal(unlink.status, 409)
  assert.match(await unlink.text(), /signs you in through Keycloak: it stays linked/)
})
