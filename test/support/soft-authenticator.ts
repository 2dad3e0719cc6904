/**
 * A software WebAuthn authenticator for tests and benches, without a browser: node:crypto
 * only. It holds ES256 (P-256) credentials and answers registration options (attestation
 * format `none`) and authentication options the way a browser's PublicKeyCredential.toJSON()
 * would give them, base64url throughout, so that the service's @simplewebauthn/server verifies
 * them as it does a real authenticator's.
 *
 * The little CBOR it needs (the attestation object, the COSE public key) is of fixed shapes and
 * hand-encoded. Each answer can be bent for a test: the user not verified, a counter of its
 * choosing, another origin or relying party ID, an existing credential registered again.
 */
import { createHash, generateKeyPairSync, randomBytes, randomInt, sign, type KeyObject } from 'node:crypto'
import type {
  AuthenticationResponseJSON,
  PublicKeyCredentialCreationOptionsJSON,
  PublicKeyCredentialRequestOptionsJSON,
  RegistrationResponseJSON,
} from '@simplewebauthn/server'

/** Authenticator data flags (WebAuthn §6.1). */
const UP = 0x01
const UV = 0x04
const AT = 0x40
/** COSE: kty EC2, alg ES256, crv P-256 (RFC 9053). */
const COSE_EC2 = 2
const COSE_ES256 = -7
const COSE_P256 = 1

/** A credential the authenticator holds. */
export interface SoftCredential {
  /** The credential ID, base64url. */
  readonly id: string
  readonly rpId: string
  /** The user handle the registration options gave (base64url), answered back at sign-in. */
  readonly userHandle: string
  readonly privateKey: KeyObject
  /** The public key as COSE_Key bytes (what the service keeps). */
  readonly cose: Buffer
  /** The public key as SubjectPublicKeyInfo DER (what toJSON()'s getPublicKey() gives). */
  readonly spki: Buffer
  counter: number
}

export interface RegisterOptions {
  /** Whether the authenticator says it verified the user (UV flag); default true. */
  readonly userVerified?: boolean
  /** The signature counter the registration shows; default 0 (a credential registered again: its own). */
  readonly signCount?: number
  /** Register this held credential (its ID) again, as if excludeCredentials had not named it; default: a new credential. */
  readonly reuse?: string
  /** The origin clientDataJSON names; default the authenticator's. */
  readonly origin?: string
  /** The relying party ID hashed into the authenticator data; default the options' (or the authenticator's). */
  readonly rpId?: string
}

export interface AuthenticateOptions {
  /** Whether the authenticator says it verified the user (UV flag); default true. */
  readonly userVerified?: boolean
  /** The counter to sign (the credential's is set to it); default the credential's, plus one. */
  readonly counter?: number
  /** The origin clientDataJSON names; default the authenticator's. */
  readonly origin?: string
  /** The relying party ID hashed into the authenticator data; default the options' (or the authenticator's). */
  readonly rpId?: string
  /** Sign with this held credential (its ID) rather than the first one allowed. */
  readonly credential?: string
}

export class SoftAuthenticator {
  readonly origin: string
  readonly rpId: string
  readonly #credentials: SoftCredential[] = []

  constructor(opts: { origin: string; rpId: string }) {
    this.origin = opts.origin
    this.rpId = opts.rpId
  }

  /** The credentials held, oldest first. */
  get credentials(): readonly SoftCredential[] {
    return this.#credentials
  }

  /**
   * register answers registration options with a new credential (or `opts.reuse`'s), as
   * navigator.credentials.create would; throws InvalidStateError, as a browser does, when the
   * options exclude a credential it holds and `reuse` is not given.
   */
  register(options: PublicKeyCredentialCreationOptionsJSON, opts: RegisterOptions = {}): RegistrationResponseJSON {
    const rpId = opts.rpId ?? options.rp.id ?? this.rpId
    let credential: SoftCredential
    if (opts.reuse !== undefined) {
      credential = this.#held(opts.reuse)
    } else {
      const excluded = new Set((options.excludeCredentials ?? []).map((c) => c.id))
      if (this.#credentials.some((c) => excluded.has(c.id))) throw new DOMException('the authenticator holds an excluded credential', 'InvalidStateError')
      credential = this.#create(rpId, options.user.id)
    }
    // A new credential starts at 0; one registered again keeps its count.
    credential.counter = opts.signCount ?? (opts.reuse === undefined ? 0 : credential.counter)
    const rawId = Buffer.from(credential.id, 'base64url')
    const flags = UP | AT | (opts.userVerified === false ? 0 : UV)
    const authData = Buffer.concat([
      sha256(rpId),
      Buffer.of(flags),
      u32(credential.counter),
      Buffer.alloc(16), // AAGUID: none
      u16(rawId.length),
      rawId,
      credential.cose,
    ])
    const attestationObject = cborMap([
      [cborText('fmt'), cborText('none')],
      [cborText('attStmt'), cborMap([])],
      [cborText('authData'), cborBytes(authData)],
    ])
    const clientDataJSON = clientData('webauthn.create', options.challenge, opts.origin ?? this.origin)
    return {
      id: credential.id,
      rawId: credential.id,
      type: 'public-key',
      response: {
        clientDataJSON: clientDataJSON.toString('base64url'),
        attestationObject: attestationObject.toString('base64url'),
        authenticatorData: authData.toString('base64url'),
        transports: ['internal'],
        publicKey: credential.spki.toString('base64url'),
        publicKeyAlgorithm: COSE_ES256,
      },
      clientExtensionResults: {},
      authenticatorAttachment: 'platform',
    }
  }

  /**
   * authenticate answers authentication options with the first allowed credential it holds
   * (any it holds for the relying party when none is listed), its counter moved on, as
   * navigator.credentials.get would. Throws NotAllowedError when it holds none allowed.
   */
  authenticate(options: PublicKeyCredentialRequestOptionsJSON, opts: AuthenticateOptions = {}): AuthenticationResponseJSON {
    const credential = opts.credential !== undefined ? this.#held(opts.credential) : this.#allowed(options)
    credential.counter = opts.counter ?? credential.counter + 1
    const rpId = opts.rpId ?? options.rpId ?? this.rpId
    const authData = Buffer.concat([sha256(rpId), Buffer.of(UP | (opts.userVerified === false ? 0 : UV)), u32(credential.counter)])
    const clientDataJSON = clientData('webauthn.get', options.challenge, opts.origin ?? this.origin)
    // ECDSA over authData || SHA-256(clientDataJSON), DER-encoded as WebAuthn wants (node's default).
    const signature = sign('sha256', Buffer.concat([authData, createHash('sha256').update(clientDataJSON).digest()]), credential.privateKey)
    return {
      id: credential.id,
      rawId: credential.id,
      type: 'public-key',
      response: {
        clientDataJSON: clientDataJSON.toString('base64url'),
        authenticatorData: authData.toString('base64url'),
        signature: signature.toString('base64url'),
        userHandle: credential.userHandle,
      },
      clientExtensionResults: {},
      authenticatorAttachment: 'platform',
    }
  }

  #create(rpId: string, userHandle: string): SoftCredential {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
    const jwk = publicKey.export({ format: 'jwk' })
    const cose = cborMap([
      [cborInt(1), cborInt(COSE_EC2)],
      [cborInt(3), cborInt(COSE_ES256)],
      [cborInt(-1), cborInt(COSE_P256)],
      [cborInt(-2), cborBytes(Buffer.from(jwk.x!, 'base64url'))],
      [cborInt(-3), cborBytes(Buffer.from(jwk.y!, 'base64url'))],
    ])
    const credential: SoftCredential = {
      id: randomBytes(randomInt(16, 33)).toString('base64url'),
      rpId,
      userHandle,
      privateKey,
      cose,
      spki: publicKey.export({ format: 'der', type: 'spki' }),
      counter: 0,
    }
    this.#credentials.push(credential)
    return credential
  }

  #held(id: string): SoftCredential {
    const credential = this.#credentials.find((c) => c.id === id)
    if (credential === undefined) throw new Error(`the authenticator holds no credential ${id}`)
    return credential
  }

  #allowed(options: PublicKeyCredentialRequestOptionsJSON): SoftCredential {
    const allow = options.allowCredentials ?? []
    const rpId = options.rpId ?? this.rpId
    const credential =
      allow.length === 0
        ? this.#credentials.find((c) => c.rpId === rpId)
        : allow.map((a) => this.#credentials.find((c) => c.id === a.id)).find((c) => c !== undefined)
    if (credential === undefined) throw new DOMException('the authenticator holds no credential allowed', 'NotAllowedError')
    return credential
  }
}

const sha256 = (text: string) => createHash('sha256').update(text).digest()

function clientData(type: 'webauthn.create' | 'webauthn.get', challenge: string, origin: string): Buffer {
  return Buffer.from(JSON.stringify({ type, challenge, origin, crossOrigin: false }))
}

function u16(n: number): Buffer {
  const b = Buffer.alloc(2)
  b.writeUInt16BE(n)
  return b
}

function u32(n: number): Buffer {
  const b = Buffer.alloc(4)
  b.writeUInt32BE(n)
  return b
}

// CBOR (RFC 8949), the few items needed: small maps, byte and text strings, integers.

/** cborHead: a major type and its argument (lengths and values up to 2^32 - 1). */
function cborHead(major: number, n: number): Buffer {
  const m = major << 5
  if (n < 24) return Buffer.of(m | n)
  if (n < 0x100) return Buffer.of(m | 24, n)
  if (n < 0x10000) return Buffer.concat([Buffer.of(m | 25), u16(n)])
  return Buffer.concat([Buffer.of(m | 26), u32(n)])
}

const cborInt = (n: number): Buffer => (n >= 0 ? cborHead(0, n) : cborHead(1, -1 - n))
const cborBytes = (b: Buffer): Buffer => Buffer.concat([cborHead(2, b.length), b])
const cborText = (s: string): Buffer => {
  const b = Buffer.from(s, 'utf8')
  return Buffer.concat([cborHead(3, b.length), b])
}
const cborMap = (entries: readonly (readonly [Buffer, Buffer])[]): Buffer => Buffer.concat([cborHead(5, entries.length), ...entries.flat()])
