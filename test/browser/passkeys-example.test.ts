/**
 * The passkeys example of the docs (examples/passkeys/: the page, its script and the backend
 * relay) as a customer runs it: the relay is started as its own process with `node server.mjs`
 * against the real app, and Chromium, with a virtual authenticator per person (the DevTools
 * protocol's WebAuthn domain), uses the page by its labels and buttons. A passkey registers,
 * signs in with a user ID and without one (the page then names the user the passkey is of),
 * also where the browser lacks the JSON methods (the script's base64url fallback), and a passkey
 * deleted on the server is refused as unknown.
 */
import { test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import type { Browser, Page } from 'playwright-core'
import { startApp, testClock, type Running } from '../support/helper.ts'
import { browserSkip, openBrowser, seriousViolations } from '../support/browser.ts'
import { path } from '../support/factors.ts'
import { SYSTEM } from '../../src/domain/accounts.ts'
import { isFailure } from '../../src/services/outcome.ts'

const skip = browserSkip()
const T0 = Date.UTC(2026, 0, 1, 12, 0, 15)
const SERVER = fileURLToPath(new URL('../../examples/passkeys/server.mjs', import.meta.url))

/** relay starts the example's backend as the docs say, on a free port, for the app and its key: its origin. */
async function relay(t: TestContext, app: Running): Promise<string> {
  const child = spawn(process.execPath, [SERVER], {
    env: { PATH: process.env.PATH, TESSERA_URL: app.url, TESSERA_API_KEY: app.key, PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let errors = ''
  child.stderr.on('data', (c: Buffer) => {
    errors += c.toString()
  })
  t.after(async () => {
    if (child.exitCode === null) {
      const stopping = Date.now()
      child.kill('SIGTERM')
      await once(child, 'exit')
      // The browser, still open, keeps a connection it has sent nothing on: it held the relay's close for a minute.
      assert.ok(Date.now() - stopping < 3000, `the relay took ${Date.now() - stopping} ms to stop`)
    }
    assert.equal(errors, '', 'the relay wrote no error')
  })
  let out = ''
  for await (const chunk of child.stdout) {
    out += String(chunk)
    const port = /http:\/\/localhost:(\d+)\//.exec(out)?.[1]
    if (port !== undefined) return `http://localhost:${port}`
  }
  throw new Error(`the relay did not start: ${out} ${errors}`)
}

/** person: a browser context of its own with a CTAP2 platform authenticator that keeps resident keys, on the example's page. */
async function person(browser: Browser, origin: string, withoutJsonMethods = false): Promise<Page> {
  const context = await browser.newContext()
  if (withoutJsonMethods) {
    // As a browser before the JSON methods: the page's fallback turns options and answers into bytes and base64url itself.
    await context.addInitScript(() => {
      const pkc = PublicKeyCredential as unknown as Record<string, unknown>
      delete pkc.parseCreationOptionsFromJSON
      delete pkc.parseRequestOptionsFromJSON
      delete (PublicKeyCredential.prototype as unknown as Record<string, unknown>).toJSON
    })
  }
  const page = await context.newPage()
  await page.goto(`${origin}/`)
  const cdp = await context.newCDPSession(page)
  await cdp.send('WebAuthn.enable')
  await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true },
  })
  return page
}

/** done: the page's message and who it says is signed in, once a ceremony has answered. */
async function done(page: Page, what: string): Promise<{ who: string; message: string }> {
  const message = page.getByRole('alert')
  await message.filter({ hasText: what }).waitFor()
  const result = { who: await page.getByRole('status').innerText(), message: await message.innerText() }
  await page.evaluate(() => {
    document.getElementById('message')!.textContent = ''
  })
  return result
}

async function register(page: Page, user: string, name: string): Promise<{ who: string; message: string }> {
  await page.getByLabel('User ID', { exact: true }).first().fill(user)
  await page.getByLabel('Name shown by the authenticator').fill(name)
  await page.getByRole('button', { name: 'Register a passkey' }).click()
  return done(page, 'Registration')
}

async function signOut(page: Page): Promise<void> {
  await page.getByRole('button', { name: 'Sign out' }).click()
  assert.equal((await done(page, 'Sign-out')).who, 'Not signed in.')
}

async function signInAs(page: Page, user: string): Promise<{ who: string; message: string }> {
  await page.locator('#sign-in-user').fill(user)
  await page.getByRole('button', { name: 'Sign in with a passkey of this user' }).click()
  return done(page, 'Sign-in')
}

async function signInWithoutUser(page: Page): Promise<{ who: string; message: string }> {
  await page.getByRole('button', { name: 'Sign in with a passkey, no user ID' }).click()
  return done(page, 'Sign-in')
}

async function configure(app: Running, origin: string): Promise<void> {
  const set = await app.factors.updateSettings({ actor: SYSTEM }, app.accountId, { rpId: 'localhost', rpName: 'Acme', origins: [origin] })
  assert.ok(!isFailure(set), isFailure(set) ? set.message : '')
}

test('the passkeys example: register, sign in with and without a user ID (the page names the user), with and without the JSON methods', { skip }, async (t) => {
  const app = await startApp(t, { PLAN_RATE: '0' }, testClock(T0))
  const origin = await relay(t, app)
  await configure(app, origin)
  const browser = await openBrowser(t)

  const alice = await person(browser, origin)
  assert.deepEqual(await seriousViolations(alice), [])
  assert.equal(await alice.getByRole('status').innerText(), 'Not signed in.')
  // Where the browser offers autofill (conditional mediation), the page waits on it in the background; the buttons end it first.
  t.diagnostic(`conditional mediation: ${await alice.evaluate(() => PublicKeyCredential.isConditionalMediationAvailable())}`)
  assert.deepEqual(await register(alice, 'alice', 'alice@example.com'), { who: 'Signed in as alice.', message: 'Registration: done.' })
  await signOut(alice)
  assert.deepEqual(await signInAs(alice, 'alice'), { who: 'Signed in as alice.', message: 'Sign-in: done.' })
  await signOut(alice)
  assert.deepEqual(await signInWithoutUser(alice), { who: 'Signed in as alice.', message: 'Sign-in: done.' })

  // Another person, another authenticator: without a user ID, the page names them, not Alice.
  const bob = await person(browser, origin)
  assert.deepEqual(await register(bob, 'bob', 'bob@example.com'), { who: 'Signed in as bob.', message: 'Registration: done.' })
  await signOut(bob)
  assert.deepEqual(await signInWithoutUser(bob), { who: 'Signed in as bob.', message: 'Sign-in: done.' })
  // Alice's passkey for Bob's user ID: not one of his.
  await signOut(alice)
  const crossed = await signInAs(alice, 'bob')
  assert.equal(crossed.who, 'Not signed in.')
  assert.match(crossed.message, /^Sign-in: .+ \((NotAllowedError|PASSKEY_INVALID)\)$/)

  // A browser without parseCreationOptionsFromJSON, parseRequestOptionsFromJSON and toJSON: the fallback does the same.
  const carol = await person(browser, origin, true)
  assert.equal(await carol.evaluate(() => typeof (PublicKeyCredential as unknown as Record<string, unknown>).parseRequestOptionsFromJSON), 'undefined')
  assert.deepEqual(await register(carol, 'carol', 'carol@example.com'), { who: 'Signed in as carol.', message: 'Registration: done.' })
  await signOut(carol)
  assert.deepEqual(await signInAs(carol, 'carol'), { who: 'Signed in as carol.', message: 'Sign-in: done.' })
  await signOut(carol)
  assert.deepEqual(await signInWithoutUser(carol), { who: 'Signed in as carol.', message: 'Sign-in: done.' })

  // Carol's passkey deleted on the server: still on her authenticator, but unknown to the account.
  const listed = (await (await fetch(app.url + path('carol', '/factors'), { headers: { 'x-api-key': app.key } })).json()) as { factors: { factorID: string }[] }
  const deleted = await fetch(app.url + path('carol', `/factors/${listed.factors[0]!.factorID}`), { method: 'DELETE', headers: { 'x-api-key': app.key } })
  assert.equal(deleted.status, 204)
  await signOut(carol)
  const unknown = await signInWithoutUser(carol)
  assert.equal(unknown.who, 'Not signed in.')
  assert.match(unknown.message, /\(PASSKEY_UNKNOWN\)$/)

  // The key never reached a page.
  for (const page of [alice, bob, carol]) assert.ok(!(await page.content()).includes(app.key))
})
