/**
 * Passkeys end to end (issue 29): Chromium with a virtual authenticator (the DevTools
 * protocol's WebAuthn domain) on a customer's page (test/support/relying-party.ts) that asks
 * Tessera for options and sends back what the browser answered. Registration, sign-in, a
 * replayed answer and a counter gone back, another account's user, the lockout the user's TOTP
 * factor shares, and the events a real receiver hears, none holding the credential.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { CDPSession, Page } from 'playwright-core'
import { codes, createCaller, get, post, startApp, testClock, type Running } from '../support/helper.ts'
import { browserSkip, openBrowser } from '../support/browser.ts'
import { relyingParty } from '../support/relying-party.ts'
import { listening, waitFor } from '../support/receiver.ts'
import { codeOf, enroll, path, wrong } from '../support/factors.ts'
import { SYSTEM } from '../../src/domain/accounts.ts'
import { isFailure } from '../../src/services/outcome.ts'

const skip = browserSkip()
const T0 = Date.UTC(2026, 0, 1, 12, 0, 15)

type Answer = { status: number; body: unknown; step?: string; error?: string }
type Credential = { id: string; response: { signature: string; clientDataJSON: string } }
/** What the relying party's page defines (test/support/relying-party.ts). */
type Page_ = {
  register(user: string, ask: object, label?: string): Promise<Answer>
  assertion(user: string, ask: object): Promise<Answer & { credential?: Credential }>
  signIn(user: string, credential: Credential): Promise<Answer>
}

/** authenticator: a CTAP2 platform authenticator that verifies the user and keeps resident keys, on the page's browser. */
async function authenticator(page: Page): Promise<{ cdp: CDPSession; id: string }> {
  const cdp = await page.context().newCDPSession(page)
  await cdp.send('WebAuthn.enable')
  const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true },
  })
  return { cdp, id: authenticatorId }
}

async function configure(app: Running, accountId: string, origin: string): Promise<void> {
  const set = await app.factors.updateSettings({ actor: SYSTEM }, accountId, { rpId: 'localhost', rpName: 'Acme', origins: [origin] })
  assert.ok(!isFailure(set), isFailure(set) ? set.message : '')
}

test('passkeys in Chromium: register, sign in, replay and counter refused, other account 404, lockout shared with TOTP, events heard', { skip }, async (t) => {
  const app = await startApp(t, { WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_POLL_MS: '50', OTP_MAX_FAILURES: '3', PLAN_RATE: '0' }, testClock(T0))
  const receiver = await listening(app, t)
  const site = await relyingParty(app.url, app.key)
  t.after(() => site.close())
  const browser = await openBrowser(t)
  const page = await (await browser.newContext()).newPage()
  await page.goto(`${site.origin}/`)
  const { cdp, id } = await authenticator(page)
  const register = (user: string, ask: object, label?: string) =>
    page.evaluate(([u, a, l]) => (window as unknown as Page_).register(u, a, l), [user, ask, label] as const) as Promise<Answer>
  const assertion = async (user: string, ask: object = {}) => {
    const r = (await page.evaluate(([u, a]) => (window as unknown as Page_).assertion(u, a), [user, ask] as const)) as Answer & {
      credential?: Credential
    }
    assert.ok(r.credential, JSON.stringify(r))
    return r.credential
  }
  const signIn = (user: string, credential: Credential) =>
    page.evaluate(([u, c]) => (window as unknown as Page_).signIn(u, c), [user, credential] as const) as Promise<Answer>

  // Before the account names its relying party, no ceremony starts.
  const early = await register('alice', {})
  assert.equal(early.status, 409)
  assert.deepEqual(
    (early.body as { code: string }[]).map((e) => e.code),
    ['PASSKEYS_NOT_CONFIGURED'],
  )
  await configure(app, app.accountId, site.origin)

  // Registration: the options go through the browser's own parser, the answer verifies, the passkey is a factor of the user.
  const made = await register('alice', { userName: 'alice@example.com', userVerification: 'required', residentKey: 'required' }, 'Laptop')
  assert.equal(made.status, 201, JSON.stringify(made))
  const factor = (made.body as { factor: { factorID: string; type: string; status: string; label: string; applicationID: string; algorithm: string } }).factor
  assert.equal(factor.type, 'passkey')
  assert.equal(factor.status, 'active')
  assert.equal(factor.label, 'Laptop')
  assert.equal(factor.applicationID, 'localhost')
  assert.equal(factor.algorithm, 'ES256')
  const { credentials } = (await cdp.send('WebAuthn.getCredentials', { authenticatorId: id })) as {
    credentials: { credentialId: string; isResidentCredential: boolean; userHandle: string; signCount: number }[]
  }
  assert.equal(credentials.length, 1)
  assert.equal(credentials[0]!.isResidentCredential, true)
  const credentialId = Buffer.from(credentials[0]!.credentialId, 'base64').toString('base64url')
  // The user handle the authenticator keeps is opaque: not the user ID.
  assert.ok(!Buffer.from(credentials[0]!.userHandle, 'base64').toString('latin1').includes('alice'))

  // The same authenticator again: the options exclude the passkey it holds, and the browser refuses.
  const again = await register('alice', {})
  assert.equal(again.step, 'browser', JSON.stringify(again))
  assert.equal(again.error, 'InvalidStateError')

  // Sign-in.
  const first = await assertion('alice', { userVerification: 'required' })
  assert.equal(first.id, credentialId)
  const ok = await signIn('alice', first)
  assert.equal(ok.status, 200, JSON.stringify(ok))
  assert.deepEqual(ok.body, { type: 'Success', valid: true, factorID: factor.factorID, userVerified: true })

  // The same answer again: its challenge is spent.
  const replayed = await signIn('alice', first)
  assert.equal(replayed.status, 400)
  assert.deepEqual(
    (replayed.body as { code: string }[]).map((e) => e.code),
    ['PASSKEY_CHALLENGE_INVALID'],
  )

  // A counter gone back: two answers made in turn, the later one used first; the earlier one (a lower count) is refused.
  const older = await assertion('alice')
  const newer = await assertion('alice')
  assert.equal((await signIn('alice', newer)).status, 200)
  const back = await signIn('alice', older)
  assert.equal(back.status, 400, JSON.stringify(back))
  assert.deepEqual(
    (back.body as { code: string }[]).map((e) => e.code),
    ['PASSKEY_REPLAYED'],
  )

  // Listed with the user's factors, never with its credential ID or public key.
  const listed = await get(app.url, path('alice', '/factors'), app.key)
  const listText = await listed.text()
  assert.equal(listed.status, 200)
  assert.ok(listText.includes(factor.factorID) && !listText.includes(credentialId))

  // Another account's key: the user is not there, for options and for an answer alike.
  const other = await createCaller(app.accounts)
  await configure(app, other.accountId, site.origin)
  const theirs = await fetch(`${app.url}${path('alice', '/passkeys/authentication/options')}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': other.apiKey },
    body: '{}',
  })
  assert.equal(theirs.status, 404)
  assert.deepEqual(await codes(theirs), ['USER_NOT_FOUND'])
  const stolen = await assertion('alice')
  const answered = await fetch(`${app.url}${path('alice', '/passkeys/authentication')}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': other.apiKey },
    body: JSON.stringify({ credential: stolen }),
  })
  assert.equal(answered.status, 404)
  assert.deepEqual(await codes(answered), ['USER_NOT_FOUND'])

  // The lockout is the user's, whatever the factor: two wrong TOTP codes and a bad signature lock out the passkey and the TOTP factor alike.
  const totp = await enroll(app, 'alice')
  app.clock.advance(30_000)
  for (let i = 0; i < 2; i++) {
    const res = await post(app.url, path('alice', '/verify'), app.key, { token: wrong(totp, app.clock.now()) })
    assert.deepEqual(await codes(res), ['OTP_INVALID'])
  }
  const forged = await assertion('alice')
  const signature = Buffer.from(forged.response.signature, 'base64url')
  signature[signature.length - 1]! ^= 1
  const bad = await signIn('alice', { ...forged, response: { ...forged.response, signature: signature.toString('base64url') } })
  assert.equal(bad.status, 400)
  assert.deepEqual(
    (bad.body as { code: string }[]).map((e) => e.code),
    ['PASSKEY_INVALID'],
  )
  const locked = await signIn('alice', await assertion('alice'))
  assert.equal(locked.status, 429, JSON.stringify(locked))
  const totpLocked = await post(app.url, path('alice', '/verify'), app.key, { token: codeOf(totp, app.clock.now()) })
  assert.equal(totpLocked.status, 429)
  assert.deepEqual(await codes(totpLocked), ['OTP_LOCKED'])

  // Deleted like a TOTP factor.
  const deleted = await fetch(app.url + path('alice', `/factors/${factor.factorID}`), { method: 'DELETE', headers: { 'x-api-key': app.key } })
  assert.equal(deleted.status, 204)

  // What the receiver heard: the passkey's creation, the failures (reason passkey), the lockout and the deletion, never the credential.
  await waitFor(
    () => receiver.deliveries.some((d) => d.payload?.type === 'factor.deleted' && d.payload.data.type === 'passkey'),
    15_000,
    'the passkey deletion event',
  )
  const heard = receiver.deliveries.filter((d) => d.payload !== null).map((d) => d.payload!)
  const created = heard.filter((p) => p.type === 'factor.created' && p.data.type === 'passkey')
  assert.equal(created.length, 1)
  assert.equal(created[0]!.data.factorID, factor.factorID)
  assert.equal(created[0]!.data.userID, 'alice')
  const failed = heard.filter((p) => p.type === 'factor.verification_failed' && p.data.reason === 'passkey')
  // The replayed answer, the counter gone back, the forged signature.
  assert.equal(failed.length, 3, JSON.stringify(failed))
  assert.ok(heard.some((p) => p.type === 'factor.lockout_started'))
  for (const d of receiver.deliveries) assert.ok(!d.body.includes(credentialId), `${d.payload?.type} holds no credential ID`)
  for (const line of app.logs) assert.ok(!line.includes(credentialId), 'no credential ID in the logs')
})
