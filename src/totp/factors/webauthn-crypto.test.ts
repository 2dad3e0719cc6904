/**
 * The WebCrypto handed to @simplewebauthn/server (webauthn-crypto.ts): the library takes it
 * (a release that moves its setter fails here, not silently), its digests are node:crypto's,
 * a passkey's key is imported once, and every refusal still holds with the key kept: another
 * key's signature, a changed byte, another origin, a counter gone back.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createHash, generateKeyPairSync, randomBytes } from 'node:crypto'
import { SoftAuthenticator } from '../../../test/support/soft-authenticator.ts'
import {
  authenticationOptions,
  CeremonyError,
  newChallenge,
  registrationOptions,
  verifyAuthentication,
  verifyRegistration,
  type StoredPasskey,
} from './passkey.ts'
import { webAuthnCrypto, webAuthnCryptoStats } from './webauthn-crypto.ts'

const RP = { id: 'example.test', name: 'Example', origins: ['https://example.test'] }

async function registered(): Promise<{ authenticator: SoftAuthenticator; passkey: StoredPasskey }> {
  const authenticator = new SoftAuthenticator({ origin: RP.origins[0]!, rpId: RP.id })
  const challenge = newChallenge()
  const options = await registrationOptions({
    rp: RP,
    handle: new Uint8Array(randomBytes(32)),
    userName: 'u',
    displayName: 'u',
    challenge,
    exclude: [],
    userVerification: 'preferred',
    residentKey: 'preferred',
    timeoutMs: 60_000,
  })
  const made = await verifyRegistration(authenticator.register(options), RP, challenge, 'preferred')
  return { authenticator, passkey: { credential: made.credential, signCount: made.signCount, transports: [] } }
}

async function signIn(authenticator: SoftAuthenticator, passkey: StoredPasskey, opts: { origin?: string; counter?: number } = {}) {
  const challenge = newChallenge()
  const options = await authenticationOptions({ rp: RP, challenge, allow: [passkey], userVerification: 'preferred', timeoutMs: 60_000 })
  return { response: authenticator.authenticate(options, opts), challenge }
}

test('the library uses the facade: digests answered by node:crypto, a key imported once for many sign-ins', async () => {
  const { authenticator, passkey } = await registered()
  const before = webAuthnCryptoStats()
  let current = passkey
  for (let i = 0; i < 5; i++) {
    const { response, challenge } = await signIn(authenticator, current)
    const ok = await verifyAuthentication(response, RP, challenge, current, 'preferred')
    assert.equal(ok.signCount, i + 1)
    current = { ...current, signCount: ok.signCount }
  }
  const after = webAuthnCryptoStats()
  assert.ok(after.digests - before.digests >= 10, `two digests a sign-in at least: ${JSON.stringify({ before, after })}`)
  assert.equal(after.imports - before.imports, 1, 'the passkey key imported once')
  assert.equal(after.importsKept - before.importsKept, 4, 'and found kept for the four after')
  // The digest it gives is SHA-256's, as WebCrypto's.
  const data = randomBytes(300)
  const ours = Buffer.from(await webAuthnCrypto.subtle.digest('SHA-256', data))
  assert.deepEqual(ours, createHash('sha256').update(data).digest())
})

test('with its key kept, a passkey still refuses a changed signature, a changed byte, another origin, a counter gone back', async () => {
  const { authenticator, passkey } = await registered()
  const first = await signIn(authenticator, passkey)
  const ok = await verifyAuthentication(first.response, RP, first.challenge, passkey, 'preferred')
  const moved = { ...passkey, signCount: ok.signCount }

  const tampered = await signIn(authenticator, moved)
  const sig = Buffer.from(tampered.response.response.signature, 'base64url')
  sig[sig.length - 1]! ^= 1
  await assert.rejects(
    verifyAuthentication(
      { ...tampered.response, response: { ...tampered.response.response, signature: sig.toString('base64url') } },
      RP,
      tampered.challenge,
      moved,
      'preferred',
    ),
    CeremonyError,
  )

  const changed = await signIn(authenticator, moved)
  const data = Buffer.from(changed.response.response.authenticatorData, 'base64url')
  data[data.length - 1]! ^= 1 // the counter's last byte: signed over, so the signature no longer holds
  await assert.rejects(
    verifyAuthentication(
      { ...changed.response, response: { ...changed.response.response, authenticatorData: data.toString('base64url') } },
      RP,
      changed.challenge,
      moved,
      'preferred',
    ),
    CeremonyError,
  )

  const elsewhere = await signIn(authenticator, moved, { origin: 'https://evil.test' })
  await assert.rejects(verifyAuthentication(elsewhere.response, RP, elsewhere.challenge, moved, 'preferred'), CeremonyError)

  const back = await signIn(authenticator, { ...moved, signCount: 10 }, { counter: 5 })
  await assert.rejects(
    verifyAuthentication(back.response, RP, back.challenge, { ...moved, signCount: 10 }, 'preferred'),
    (e: CeremonyError) => e.cause === 'counter',
  )
})

test("another passkey's signature does not verify under a kept key (keys are kept by the whole key, not by a prefix of it)", async () => {
  const a = await registered()
  const b = await registered()
  // Both keys imported and kept.
  for (const { authenticator, passkey } of [a, b]) {
    const { response, challenge } = await signIn(authenticator, passkey)
    await verifyAuthentication(response, RP, challenge, passkey, 'preferred')
  }
  // b's authenticator signs, the answer names a's credential: a's kept key must refuse it.
  const { response, challenge } = await signIn(b.authenticator, { ...b.passkey, signCount: 1 })
  const forged = { ...response, id: a.passkey.credential.id, rawId: a.passkey.credential.id }
  await assert.rejects(verifyAuthentication(forged, RP, challenge, { ...a.passkey, signCount: 1 }, 'preferred'), CeremonyError)
})

test('keys it does not keep: a private key, an extractable key, other formats go to WebCrypto as before', async () => {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
  const before = webAuthnCryptoStats()
  const jwk = privateKey.export({ format: 'jwk' })
  const key = await webAuthnCrypto.subtle.importKey('jwk', jwk, { name: 'ECDSA', namedCurve: 'P-256' }, false, ['sign'])
  assert.equal(key.type, 'private')
  const pub = await webAuthnCrypto.subtle.importKey('jwk', { ...jwk, d: undefined }, { name: 'ECDSA', namedCurve: 'P-256' }, true, ['verify'])
  assert.equal(pub.type, 'public')
  assert.deepEqual(webAuthnCryptoStats(), before)
})
