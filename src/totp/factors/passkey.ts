/**
 * The passkeys' core: WebAuthn ceremonies through @simplewebauthn/server (its CBOR, COSE keys,
 * attestation formats and signature checks; none of that is ours). No HTTP, no store: options
 * are made here from what the service read, and answers are verified against what it kept.
 *
 * A challenge is 32 random bytes; the service keeps only its keyed digest (challengeDigest)
 * and finds it again from the answer's clientDataJSON, so a ceremony needs no id of its own.
 * The user handle is a keyed digest of account and user: opaque to the authenticator (no
 * user ID leaves in it), the same for all of a user's passkeys.
 */
import {
  generateAuthenticationOptions,
  generateRegistrationOptions,
  verifyAuthenticationResponse,
  verifyRegistrationResponse,
  type AuthenticationResponseJSON,
  type AuthenticatorTransport,
  type PublicKeyCredentialCreationOptionsJSON,
  type PublicKeyCredentialRequestOptionsJSON,
  type RegistrationResponseJSON,
} from '@simplewebauthn/server'
import { decodeCredentialPublicKey } from '@simplewebauthn/server/helpers'
import { randomBytes } from 'node:crypto'
import { keyedDigest, type Pepper } from '../../crypto/keyed.ts'
import type { PasskeyCredential, PasskeyMeta } from '../../domain/factors.ts'
import { installWebAuthnCrypto } from './webauthn-crypto.ts'

export type { AuthenticationResponseJSON, RegistrationResponseJSON }

// The library's WebCrypto, with its digests answered at once and its imported keys kept (webauthn-crypto.ts).
await installWebAuthnCrypto()

export const USER_VERIFICATION = ['required', 'preferred', 'discouraged'] as const
export type UserVerification = (typeof USER_VERIFICATION)[number]
export const RESIDENT_KEY = ['required', 'preferred', 'discouraged'] as const
export type ResidentKey = (typeof RESIDENT_KEY)[number]
export const ATTACHMENT = ['platform', 'cross-platform'] as const
export type Attachment = (typeof ATTACHMENT)[number]

/**
 * The public-key algorithms offered, in order of preference: ES256, EdDSA, RS256. The library's
 * default puts ML-DSA first, and a browser that has it (Chromium 156) then makes a key few
 * verifiers or authenticators elsewhere take.
 */
const ALGORITHM_IDS = [-7, -8, -257]
/** The COSE_Key label of the algorithm (RFC 9052). */
const COSE_ALG = 3
const COSE_NAMES: Readonly<Record<number, string>> = { [-7]: 'ES256', [-8]: 'EdDSA', [-257]: 'RS256', [-35]: 'ES384', [-36]: 'ES512', [-37]: 'PS256' }

/** The relying party a ceremony is for: the account's settings. */
export interface RelyingParty {
  readonly id: string
  readonly name: string
  readonly origins: readonly string[]
}

/** A credential as the core works with it: the sealed part opened, with its counter. */
export interface StoredPasskey {
  readonly credential: PasskeyCredential
  readonly signCount: number
  readonly transports: readonly string[]
}

/** userHandle: the opaque WebAuthn user ID of an account's user (64 bytes at most, by the spec; here 32). */
export function userHandle(pepper: Pepper, accountId: string, userId: string): Uint8Array<ArrayBuffer> {
  return new Uint8Array(Buffer.from(keyedDigest(pepper, 'passkey-user', accountId, userId), 'base64url'))
}

/** challengeDigest: how a challenge is kept (never itself: an answer must carry it). */
export function challengeDigest(pepper: Pepper, challenge: string): string {
  return keyedDigest(pepper, 'passkey-challenge', challenge)
}

/** newChallenge: 32 random bytes, base64url, as the options and clientDataJSON carry it. */
export const newChallenge = (): string => randomBytes(32).toString('base64url')

/** challengeOf reads the challenge an answer signed (its clientDataJSON), or null when there is none to read. */
export function challengeOf(response: { readonly clientDataJSON?: unknown } | undefined): string | null {
  const encoded = response?.clientDataJSON
  if (typeof encoded !== 'string' || encoded.length > 8192) return null
  try {
    const data = JSON.parse(Buffer.from(encoded, 'base64url').toString('utf8')) as { challenge?: unknown }
    return typeof data.challenge === 'string' && /^[A-Za-z0-9_-]{16,128}$/.test(data.challenge) ? data.challenge : null
  } catch {
    return null
  }
}

export interface RegistrationAsk {
  readonly rp: RelyingParty
  readonly handle: Uint8Array<ArrayBuffer>
  readonly userName: string
  readonly displayName: string
  readonly challenge: string
  readonly exclude: readonly StoredPasskey[]
  readonly userVerification: UserVerification
  readonly residentKey: ResidentKey
  readonly attachment?: Attachment
  readonly timeoutMs: number
}

export function registrationOptions(ask: RegistrationAsk): Promise<PublicKeyCredentialCreationOptionsJSON> {
  return generateRegistrationOptions({
    rpName: ask.rp.name,
    rpID: ask.rp.id,
    userName: ask.userName,
    userDisplayName: ask.displayName,
    userID: ask.handle,
    challenge: Buffer.from(ask.challenge, 'base64url'),
    timeout: ask.timeoutMs,
    attestationType: 'none',
    excludeCredentials: ask.exclude.map((p) => ({ id: p.credential.id, transports: p.transports as AuthenticatorTransport[] })),
    authenticatorSelection: {
      residentKey: ask.residentKey,
      userVerification: ask.userVerification,
      ...(ask.attachment === undefined ? {} : { authenticatorAttachment: ask.attachment }),
    },
    supportedAlgorithmIDs: ALGORITHM_IDS,
  })
}

export interface AuthenticationAsk {
  readonly rp: RelyingParty
  readonly challenge: string
  readonly allow: readonly StoredPasskey[]
  readonly userVerification: UserVerification
  readonly timeoutMs: number
}

export function authenticationOptions(ask: AuthenticationAsk): Promise<PublicKeyCredentialRequestOptionsJSON> {
  return generateAuthenticationOptions({
    rpID: ask.rp.id,
    challenge: Buffer.from(ask.challenge, 'base64url'),
    timeout: ask.timeoutMs,
    userVerification: ask.userVerification,
    allowCredentials: ask.allow.map((p) => ({ id: p.credential.id, transports: p.transports as AuthenticatorTransport[] })),
  })
}

/** A registration that verified: the credential to seal, its counter and what it told of itself. */
export interface Registered {
  readonly credential: PasskeyCredential
  readonly signCount: number
  readonly meta: PasskeyMeta
  readonly userVerified: boolean
}

/** Why an answer was refused: its reason is for the log and the event, never for the caller to tell attacks apart. */
export class CeremonyError extends Error {}

/** verifyRegistration checks an authenticator's answer to registration options: the credential, or CeremonyError. */
export async function verifyRegistration(
  response: RegistrationResponseJSON,
  rp: RelyingParty,
  challenge: string,
  userVerification: UserVerification,
): Promise<Registered> {
  let result: Awaited<ReturnType<typeof verifyRegistrationResponse>>
  try {
    result = await verifyRegistrationResponse({
      response,
      expectedChallenge: challenge,
      expectedOrigin: [...rp.origins],
      expectedRPID: rp.id,
      requireUserVerification: userVerification === 'required',
      supportedAlgorithmIDs: ALGORITHM_IDS,
    })
  } catch (error) {
    throw new CeremonyError((error as Error).message)
  }
  if (!result.verified) throw new CeremonyError('registration not verified')
  const info = result.registrationInfo
  // Kept as the browser named them, when they are names (lower-case words: WebAuthn's, or one it adds later); anything else is dropped.
  const transports = [...new Set(info.credential.transports ?? response.response.transports ?? [])].filter((t) => /^[a-z0-9-]{1,32}$/.test(t)).slice(0, 8)
  const algorithm = coseAlgorithm(info.credential.publicKey)
  return {
    credential: { id: info.credential.id, publicKey: Buffer.from(info.credential.publicKey).toString('base64url') },
    signCount: info.credential.counter,
    meta: { deviceType: info.credentialDeviceType, backedUp: info.credentialBackedUp, transports, algorithm },
    userVerified: info.userVerified,
  }
}

/** A sign-in that verified: the counter to store, whether the user was verified. */
export interface Authenticated {
  readonly signCount: number
  readonly userVerified: boolean
}

/**
 * verifyAuthentication checks an assertion against the passkey it names: the new counter, or
 * CeremonyError (a bad signature, another origin or RP, user verification missing when it was
 * required, a counter that went back: a cloned authenticator or a replay).
 */
export async function verifyAuthentication(
  response: AuthenticationResponseJSON,
  rp: RelyingParty,
  challenge: string,
  passkey: StoredPasskey,
  userVerification: UserVerification,
): Promise<Authenticated> {
  let result: Awaited<ReturnType<typeof verifyAuthenticationResponse>>
  try {
    result = await verifyAuthenticationResponse({
      response,
      expectedChallenge: challenge,
      expectedOrigin: [...rp.origins],
      expectedRPID: rp.id,
      requireUserVerification: userVerification === 'required',
      credential: {
        id: passkey.credential.id,
        publicKey: new Uint8Array(Buffer.from(passkey.credential.publicKey, 'base64url')),
        counter: passkey.signCount,
        transports: passkey.transports as AuthenticatorTransport[],
      },
    })
  } catch (error) {
    const message = (error as Error).message
    throw new CeremonyError(message, { cause: /counter/i.test(message) ? 'counter' : 'invalid' })
  }
  if (!result.verified) throw new CeremonyError('signature not verified', { cause: 'invalid' })
  return { signCount: result.authenticationInfo.newCounter, userVerified: result.authenticationInfo.userVerified }
}

/** coseAlgorithm names the algorithm of a COSE public key (its label 3, read by the library's decoder). */
function coseAlgorithm(publicKey: Uint8Array<ArrayBuffer>): string {
  const alg = (decodeCredentialPublicKey(publicKey) as unknown as Map<number, unknown>).get(COSE_ALG)
  return typeof alg === 'number' ? (COSE_NAMES[alg] ?? `COSE ${alg}`) : 'unknown'
}
