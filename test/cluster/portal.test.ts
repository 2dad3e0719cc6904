/**
 * Portal sessions live in the store, so every node of a deployment (PostgreSQL + Redis) knows
 * them: a session made on one node works on the other, and signing out everywhere on one is
 * refused on the other at its next request, over HTTP and in a browser with two devices; a
 * single sign-on started on one node is finished by the other.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { freePort, startApp, testClock } from '../support/helper.ts'
import { configure, startProvider, throughProvider } from '../support/oidc.ts'
import { PortalClient, portalUser } from '../support/portal-helper.ts'
import { createDatabase, redisEnv, skipUnless } from '../support/services.ts'
import { browserSkip, openBrowser, seriousViolations, signInPage } from '../support/browser.ts'

test('two nodes on PostgreSQL and Redis share sessions: signed out everywhere on one, refused on the other', {
  skip: skipUnless('TEST_DATABASE_URL', 'TEST_REDIS_URL'),
}, async (t) => {
  const env = { DATABASE_URL: await createDatabase(t), ...(await redisEnv(t)), PEPPER: 'a pepper both nodes share, at least 32 characters' }
  const clock = testClock()
  const a = await startApp(t, env, clock)
  const b = await startApp(t, env, clock)
  const user = await portalUser(a)

  // Two browsers of the same user, one on each node.
  const onA = new PortalClient(a.url)
  await onA.signIn(user.email, user.password)
  const onB = new PortalClient(b.url)
  await onB.signIn(user.email, user.password)
  // The cookie of node A's session, presented to node B: the same session.
  const crossed = await fetch(`${b.url}/portal/home`, { redirect: 'manual', headers: { cookie: onA.cookieHeader } })
  assert.equal(crossed.status, 200, 'a session made on A works on B')

  assert.equal((await onB.get('/portal/home')).status, 200)
  const out = await onA.post('/portal/sign-out', { everywhere: '1' }, { from: '/portal/home' })
  assert.equal(out.status, 303)
  const refused = await onB.get('/portal/home')
  assert.equal(refused.status, 303, 'signed out everywhere on A: refused on B')
  assert.match(refused.location ?? '', /^\/portal\/sign-in/)
  assert.equal((await fetch(`${b.url}/portal/home`, { redirect: 'manual', headers: { cookie: onB.cookieHeader } })).status, 303)
})

test('in a browser, two devices and two nodes: "sign out everywhere else" on node A ends the other device\'s session, refused at once on node B', {
  skip: skipUnless('TEST_DATABASE_URL', 'TEST_REDIS_URL') || browserSkip(),
}, async (t) => {
  const env = { DATABASE_URL: await createDatabase(t), ...(await redisEnv(t)), PEPPER: 'a pepper both nodes share, at least 32 characters' }
  const clock = testClock()
  const a = await startApp(t, env, clock)
  const b = await startApp(t, env, clock)
  const user = await portalUser(a)
  const browser = await openBrowser(t)
  const signIn = (base: string) => signInPage(browser, base, user)
  const laptop = await signIn(a.url)
  const phone = await signIn(b.url)
  await phone.goto(`${b.url}/portal/home`)
  assert.equal(await phone.getByRole('heading', { level: 1 }).innerText(), 'Your accounts')

  await laptop.goto(`${a.url}/portal/security`)
  await Promise.all([laptop.waitForLoadState('load'), laptop.getByRole('button', { name: /^Sign out everywhere else/ }).click()])
  await laptop.getByRole('status').first().waitFor()
  assert.deepEqual(await seriousViolations(laptop), [])

  await phone.goto(`${b.url}/portal/home`)
  assert.match(phone.url(), /\/portal\/sign-in\?next=%2Fportal%2Fhome$/, 'the phone, on node B, is signed out')
  await laptop.goto(`${a.url}/portal/home`)
  assert.equal(await laptop.getByRole('heading', { level: 1 }).innerText(), 'Your accounts', 'the laptop stays signed in')
})

test('single sign-on across two nodes on PostgreSQL: started on one, the callback from the provider taken by the other, one session that both know', {
  skip: skipUnless('TEST_DATABASE_URL', 'TEST_REDIS_URL'),
}, async (t) => {
  const port = await freePort()
  // Both nodes behind one public URL (a load balancer's): the provider sends the browser back there, and either node may take it.
  const env = {
    DATABASE_URL: await createDatabase(t),
    ...(await redisEnv(t)),
    PEPPER: 'a pepper both nodes share, at least 32 characters',
    // The key the provider's client secret is sealed with, as every node of a deployment shares it.
    ENCRYPTION_KEYS: `1:${Buffer.alloc(32, 7).toString('base64')}`,
    PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
  }
  const clock = testClock()
  const a = await startApp(t, env, clock, { port })
  const b = await startApp(t, env, clock)
  const kc = await startProvider(t)
  await configure(a, kc, { id: 'kc', name: 'Keycloak', domains: ['example.com'], joinAccountId: a.accountId, joinRole: 'developer' })
  kc.accounts.set('alice', { email: 'alice@example.com', email_verified: true })
  const { callback, jar } = await throughProvider(a, 'kc', 'alice')
  const onB = await fetch(callback.replace(a.url, b.url), { headers: { cookie: jar.header() }, redirect: 'manual' })
  assert.equal(onB.status, 303, 'node B takes the request node A kept')
  jar.take(onB)
  assert.equal((await fetch(`${a.url}/portal/home`, { headers: { cookie: jar.header() }, redirect: 'manual' })).status, 200, 'and node A knows the session')
  assert.equal((await fetch(callback, { headers: { cookie: jar.header() }, redirect: 'manual' })).status, 400, 'once: node A refuses it after')
})
