/**
 * The passkeys service: WebAuthn credentials as factors of the same users as TOTP (the same
 * list, limit, labels, deletion, events, lockout and recovery codes), for the public API's
 * `/totp/users/{userID}/passkeys/…` routes, and `/totp/passkeys/…` for a sign-in that names no
 * user (the passkey's credential ID tells whose it is). A ceremony is two calls: options (a challenge
 * kept, by its digest, until answered once or expired) and the browser's answer, verified
 * by @simplewebauthn/server against the account's relying party (its factor settings).
 *
 * What identifies the user (the credential ID, the public key) is sealed with the factor, as a
 * TOTP secret is; the signature counter is kept in the clear and moved compare-and-set, so two
 * answers with one count cannot both pass (a passkey that keeps no counter, always 0, is not written:
 * its challenge, taken once, is what makes each answer single-use). A sign-in is an attempt under the user's one
 * lockout (Factors.attempt): counted before it is tried.
 */
import type { Config } from '../config/config.ts'
import { SealError, type Keyring } from '../crypto/keyring.ts'
import { keyedDigest, type Pepper } from '../crypto/keyed.ts'
import type { ChallengePurpose, Factor, FactorSettings, PasskeyCredential, PasskeyFactor } from '../domain/factors.ts'
import { newId } from '../domain/ids.ts'
import type { Store } from '../storage/ports.ts'
import { BoundedCache } from '../cache/bounded.ts'
import { sealContext } from '../totp/factors/core.ts'
import {
  authenticationOptions,
  CeremonyError,
  challengeDigest,
  challengeOf,
  newChallenge,
  registrationOptions,
  userHandle,
  verifyAuthentication,
  verifyRegistration,
  type Attachment,
  type AuthenticationResponseJSON,
  type RegistrationResponseJSON,
  type RelyingParty,
  type ResidentKey,
  type StoredPasskey,
  type UserVerification,
} from '../totp/factors/passkey.ts'
import { keyEvent, refusal, type FactorRefusal, type Factors, type KeyCaller } from './factors.ts'
import { isFailure } from './outcome.ts'

export type PasskeysConfig = Pick<
  Config,
  'factorMaxPerUser' | 'factorsPerAccount' | 'passkeyChallengeSeconds' | 'passkeyChallengesPerUser' | 'passkeyChallengesPerAccount'
>

export interface PasskeysOptions {
  readonly store: Store
  readonly config: PasskeysConfig
  readonly pepper: Pepper
  readonly keyring: Keyring
  /** The TOTP factors' service: its lockout (attempt) is the passkeys' too. */
  readonly factors: Factors
  readonly now?: () => number
}

export interface RegistrationInput {
  /** The name the authenticator shows in its account list (default: the user ID). */
  readonly userName?: string
  readonly displayName?: string
  readonly userVerification: UserVerification
  readonly residentKey: ResidentKey
  readonly attachment?: Attachment
}

/** Options to hand the browser (navigator.credentials.create / get), and when their challenge expires. */
export interface CeremonyOptions<T> {
  readonly options: T
  readonly expiresAt: string
}

export interface SignedIn {
  readonly factorId: string
  readonly userVerified: boolean
}

type RegistrationOptions = Awaited<ReturnType<typeof registrationOptions>>
type AuthenticationOptions = Awaited<ReturnType<typeof authenticationOptions>>

/**
 * Opened passkeys kept by factor ID: what a passkey's sealed part holds (its credential ID and
 * public key) is fixed when it is registered, so a factor ID always opens to the same thing, and
 * opening it (AES-GCM, JSON) at each of a sign-in's two calls is work done twice. Kept in the
 * node's memory only, bounded (OPENED_MAX, OPENED_TTL_SECONDS), under what the seal binds it to. Only the opening
 * is kept: which factors a user has, their status and counter are read from the store at every
 * call, so a deleted or disabled passkey is refused at once on every node, as before.
 */
// A ceremony's two calls are seconds apart (its challenge lives PASSKEY_CHALLENGE_SECONDS, 300 by default): 10 000 opened passkeys, about
// 7 MB of heap (20 000 measured: 13 MB), for 5 minutes. One gone by then is opened again.
const OPENED_MAX = 10_000
const OPENED_TTL_SECONDS = 300

export class Passkeys {
  readonly #o: PasskeysOptions
  readonly #now: () => number
  readonly #opened = new BoundedCache<PasskeyCredential>(OPENED_TTL_SECONDS, OPENED_MAX)

  constructor(opts: PasskeysOptions) {
    this.#o = opts
    this.#now = opts.now ?? Date.now
  }

  /** registrationOptions starts a registration: the options for navigator.credentials.create, the user's passkeys excluded. */
  async registrationOptions(caller: KeyCaller, userId: string, input: RegistrationInput): Promise<CeremonyOptions<RegistrationOptions> | FactorRefusal> {
    const rp = await this.#relyingParty(caller.accountId)
    if (isFailure(rp)) return rp
    const t = this.#now()
    const factors = (await this.#o.store.factors.factors(caller.accountId, userId, iso(t))) ?? []
    const max = this.#o.config.factorMaxPerUser
    // Refused before the ceremony as well as after it: a user at the limit is not asked to touch their authenticator for nothing.
    if (factors.length >= max) return refusal('conflict', 'FACTOR_LIMIT', { limit: max })
    const issued = await this.#challenge(caller.accountId, userId, 'registration', input.userVerification, t)
    if (isFailure(issued)) return issued
    const { challenge, expiresAt } = issued
    const options = await registrationOptions({
      rp,
      handle: userHandle(this.#o.pepper, caller.accountId, userId),
      userName: input.userName ?? userId,
      displayName: input.displayName ?? input.userName ?? userId,
      challenge,
      exclude: this.#open(caller, passkeysOf(factors)),
      userVerification: input.userVerification,
      residentKey: input.residentKey,
      ...(input.attachment === undefined ? {} : { attachment: input.attachment }),
      timeoutMs: this.#o.config.passkeyChallengeSeconds * 1000,
    })
    return { options, expiresAt }
  }

  /** register verifies the authenticator's answer and keeps the passkey, active at once (`factor.created`, type passkey). */
  async register(caller: KeyCaller, userId: string, response: RegistrationResponseJSON, label: string | null): Promise<PasskeyFactor | FactorRefusal> {
    const rp = await this.#relyingParty(caller.accountId)
    if (isFailure(rp)) return rp
    const t = this.#now()
    const challenge = await this.#take(caller.accountId, userId, 'registration', response, t)
    if (isFailure(challenge)) return challenge
    let registered: Awaited<ReturnType<typeof verifyRegistration>>
    try {
      registered = await verifyRegistration(response, rp, challenge.value, challenge.userVerification)
    } catch (error) {
      if (!(error instanceof CeremonyError)) throw error
      caller.refused('passkey registration', error.message)
      return refusal('invalid', 'PASSKEY_INVALID')
    }
    // Known by a keyed digest (never the ID in the clear): the store makes one credential one factor of the account, however many race.
    const credentialDigest = this.#credentialDigest(caller.accountId, registered.credential.id)
    const id = newId('fct')
    const factor: PasskeyFactor = {
      id,
      type: 'passkey',
      accountId: caller.accountId,
      userId,
      applicationId: rp.id,
      label,
      status: 'active',
      sealed: this.#o.keyring.seal(Buffer.from(JSON.stringify(registered.credential)), sealContext(caller.accountId, userId, id)),
      keyVersion: this.#o.keyring.active,
      createdAt: iso(t),
      expiresAt: null,
      activatedAt: iso(t),
      signCount: registered.signCount,
      meta: registered.meta,
      credentialDigest,
    }
    const max = this.#o.config.factorMaxPerUser
    const event = keyEvent(
      caller,
      'factor.created',
      userId,
      {
        factorID: id,
        type: 'passkey',
        status: 'active',
        applicationID: rp.id,
        label,
        algorithm: registered.meta.algorithm,
        backedUp: registered.meta.backedUp,
      },
      id,
    )
    const perAccount = this.#o.config.factorsPerAccount
    const created = await this.#o.store.factors.create(factor, max, perAccount, iso(t), event)
    if (created === 'limit') return refusal('conflict', 'FACTOR_LIMIT', { limit: max })
    if (created === 'account_limit') return refusal('conflict', 'FACTORS_PER_ACCOUNT', { limit: perAccount })
    return created === 'exists' ? refusal('conflict', 'PASSKEY_REGISTERED') : factor
  }

  /** authenticationOptions starts a sign-in: the options for navigator.credentials.get, allowing the user's passkeys. */
  async authenticationOptions(
    caller: KeyCaller,
    userId: string,
    userVerification: UserVerification,
  ): Promise<CeremonyOptions<AuthenticationOptions> | FactorRefusal> {
    const t = this.#now()
    // The user's factors and the account's settings (its relying party) in one read; the settings alone when there is no such user.
    const view = await this.#o.store.factors.attempting(caller.accountId, userId, iso(t))
    const rp = relyingParty(view?.settings ?? (await this.#o.store.factors.settings(caller.accountId)))
    if (isFailure(rp)) return rp
    if (view === null) return refusal('not_found', 'USER_NOT_FOUND')
    const allow = this.#open(caller, passkeysOf(view.factors))
    if (allow.length === 0) return refusal('conflict', 'NO_PASSKEY')
    const issued = await this.#challenge(caller.accountId, userId, 'authentication', userVerification, t)
    if (isFailure(issued)) return issued
    const { challenge, expiresAt } = issued
    const options = await authenticationOptions({ rp, challenge, allow, userVerification, timeoutMs: this.#o.config.passkeyChallengeSeconds * 1000 })
    return { options, expiresAt }
  }

  /**
   * discoverableOptions starts a sign-in that names no user: options with an empty allowCredentials, so that the browser
   * offers the passkeys it holds for the relying party (discoverable credentials) and the answer tells whose it is. Its
   * challenge is the account's, under the account's cap alone (there is no user to hold to PASSKEY_CHALLENGES_PER_USER).
   */
  async discoverableOptions(caller: KeyCaller, userVerification: UserVerification): Promise<CeremonyOptions<AuthenticationOptions> | FactorRefusal> {
    const rp = await this.#relyingParty(caller.accountId)
    if (isFailure(rp)) return rp
    const t = this.#now()
    const issued = await this.#challenge(caller.accountId, null, 'authentication', userVerification, t)
    if (isFailure(issued)) return issued
    const { challenge, expiresAt } = issued
    const options = await authenticationOptions({ rp, challenge, allow: [], userVerification, timeoutMs: this.#o.config.passkeyChallengeSeconds * 1000 })
    return { options, expiresAt }
  }

  /**
   * authenticate verifies a sign-in's answer: the passkey it is of. An attempt under the user's
   * lockout, as a TOTP code: an unknown challenge, a bad signature and a counter gone back are
   * failures, recorded (`factor.verification_failed`, reason passkey) and counted.
   */
  async authenticate(caller: KeyCaller, userId: string, response: AuthenticationResponseJSON): Promise<SignedIn | FactorRefusal> {
    const { accountId } = caller
    const t = this.#now()
    // The user's factors and the account's settings (its relying party, its attempt limits) in one read.
    const view = await this.#o.store.factors.attempting(accountId, userId, iso(t))
    const rp = relyingParty(view?.settings ?? (await this.#o.store.factors.settings(accountId)))
    if (isFailure(rp)) return rp
    if (view === null) return refusal('not_found', 'USER_NOT_FOUND')
    return this.#signIn(caller, { ...view, userId, rp, discoverable: false }, response, t)
  }

  /**
   * authenticateDiscoverable verifies the answer to discoverableOptions: the user is the one whose passkey the answer names,
   * looked up by its credential ID in the calling account only (PASSKEY_UNKNOWN when it has none: the challenge is used up
   * all the same). From there it is the user's sign-in, as authenticate's, and the user handle the authenticator gives back
   * must be theirs.
   */
  async authenticateDiscoverable(caller: KeyCaller, response: AuthenticationResponseJSON): Promise<(SignedIn & { readonly userId: string }) | FactorRefusal> {
    const { accountId } = caller
    const t = this.#now()
    const digest = typeof response.id === 'string' ? this.#credentialDigest(accountId, response.id) : null
    const view = digest === null ? null : await this.#o.store.factors.attemptingCredential(accountId, digest, iso(t))
    const rp = relyingParty(view?.settings ?? (await this.#o.store.factors.settings(accountId)))
    if (isFailure(rp)) return rp
    if (view === null) {
      // No user to count a failure against; the challenge goes, so that an answer is tried once whatever it names.
      const challenge = await this.#take(accountId, null, 'authentication', response, t)
      if (isFailure(challenge)) return challenge
      caller.refused('passkey sign-in', 'a credential the account does not have')
      return refusal('not_found', 'PASSKEY_UNKNOWN')
    }
    const signed = await this.#signIn(caller, { ...view, rp, discoverable: true }, response, t)
    return isFailure(signed) ? signed : { ...signed, userId: view.userId }
  }

  /**
   * #signIn verifies a sign-in's answer for a user whose factors and settings were read: the passkey it names, under the
   * user's one lockout (Factors.attempt), the challenge taken inside it (issued to the user, or to none when discoverable).
   */
  async #signIn(
    caller: KeyCaller,
    who: {
      readonly userId: string
      readonly factors: readonly Factor[]
      readonly settings: FactorSettings
      readonly rp: RelyingParty
      readonly discoverable: boolean
    },
    response: AuthenticationResponseJSON,
    t: number,
  ): Promise<SignedIn | FactorRefusal> {
    const { accountId } = caller
    const { userId, rp } = who
    // The passkey the answer names, found by its digest: only it is opened.
    const digest = typeof response.id === 'string' ? this.#credentialDigest(accountId, response.id) : null
    const named = this.#open(
      caller,
      passkeysOf(who.factors).filter((p) => p.credentialDigest === digest),
    ).find((p) => p.credential.id === response.id)
    // A signature that verifies is the user present, as a right TOTP code is: their run of failures ends (endsRun).
    return this.#o.factors.attempt(
      caller,
      userId,
      who.settings,
      { reason: 'passkey', type: 'passkey', factorID: named?.factorId ?? null },
      async () => {
        const challenge = await this.#take(accountId, who.discoverable ? null : userId, 'authentication', response, t)
        if (isFailure(challenge)) return challenge
        if (named === undefined) {
          caller.refused('passkey sign-in', 'a credential the user does not have')
          return refusal('invalid', 'PASSKEY_INVALID')
        }
        // Without a user named, the authenticator's user handle says whose passkey it is: it must be the one it was registered for.
        // With one named, a handle the authenticator sends must be theirs too (WebAuthn § 7.2, step 6); one without a handle sends none
        // (null, which the body's schema reads as an empty string).
        const handle = response.response.userHandle
        const handleNeeded = who.discoverable || (typeof handle === 'string' && handle !== '')
        if (handleNeeded && !sameHandle(handle, userHandle(this.#o.pepper, accountId, userId))) {
          caller.refused('passkey sign-in', "a user handle that is not the passkey user's")
          return refusal('invalid', 'PASSKEY_INVALID')
        }
        let signed: Awaited<ReturnType<typeof verifyAuthentication>>
        try {
          signed = await verifyAuthentication(response, rp, challenge.value, named, challenge.userVerification)
        } catch (error) {
          if (!(error instanceof CeremonyError)) throw error
          caller.refused('passkey sign-in', error.message)
          return refusal('invalid', error.cause === 'counter' ? 'PASSKEY_REPLAYED' : 'PASSKEY_INVALID')
        }
        // Compare-and-set: of two answers read at one count, the second finds it moved. A passkey that keeps no counter (it answers
        // 0 and has never shown more, as synced passkeys do) has nothing to move: its answer is used once because its challenge is,
        // and the write would only cost the store a commit at every sign-in.
        const counted = signed.signCount !== 0 || named.signCount !== 0
        if (counted && !(await this.#o.store.factors.useCredential(accountId, userId, named.factorId, named.signCount, signed.signCount))) {
          caller.refused('passkey sign-in', 'the signature counter moved meanwhile')
          return refusal('invalid', 'PASSKEY_REPLAYED')
        }
        return { factorId: named.factorId, userVerified: signed.userVerified }
      },
      true,
    )
  }

  #credentialDigest(accountId: string, credentialId: string): string {
    return keyedDigest(this.#o.pepper, 'passkey-credential', accountId, credentialId)
  }

  /** #relyingParty: the account's relying party, or PASSKEYS_NOT_CONFIGURED. */
  async #relyingParty(accountId: string): Promise<RelyingParty | FactorRefusal> {
    return relyingParty(await this.#o.store.factors.settings(accountId))
  }

  /**
   * #challenge issues a ceremony's challenge, kept by its digest: PASSKEY_CHALLENGES_PER_ACCOUNT when the account has as
   * many open as it may (the store decides in the same step as it keeps it), with the seconds until its first one expires.
   */
  async #challenge(
    accountId: string,
    userId: string | null,
    purpose: ChallengePurpose,
    userVerification: UserVerification,
    t: number,
  ): Promise<{ challenge: string; expiresAt: string } | FactorRefusal> {
    const challenge = newChallenge()
    const { passkeyChallengeSeconds, passkeyChallengesPerUser, passkeyChallengesPerAccount } = this.#o.config
    const expiresAt = iso(t + passkeyChallengeSeconds * 1000)
    const added = await this.#o.store.factors.addChallenge(
      { digest: challengeDigest(this.#o.pepper, challenge), accountId, userId, purpose, userVerification, createdAt: iso(t), expiresAt },
      passkeyChallengesPerUser,
      passkeyChallengesPerAccount,
      iso(t),
    )
    if (!added.added) {
      const seconds = Math.max(1, Math.ceil((Date.parse(added.freesAt) - t) / 1000))
      return refusal('limit', 'PASSKEY_CHALLENGES_PER_ACCOUNT', { limit: passkeyChallengesPerAccount, seconds })
    }
    return { challenge, expiresAt }
  }

  /** #take uses the challenge an answer carries, once: when it was issued to this user (null: to none) for this ceremony and has not expired. */
  async #take(
    accountId: string,
    userId: string | null,
    purpose: ChallengePurpose,
    response: { readonly response?: { readonly clientDataJSON?: unknown } },
    t: number,
  ): Promise<{ value: string; userVerification: UserVerification } | FactorRefusal> {
    const value = challengeOf(response.response)
    if (value === null) return refusal('invalid', 'PASSKEY_CHALLENGE_INVALID')
    const taken = await this.#o.store.factors.takeChallenge(accountId, challengeDigest(this.#o.pepper, value), iso(t))
    if (taken === null || taken.accountId !== accountId || taken.userId !== userId || taken.purpose !== purpose) {
      return refusal('invalid', 'PASSKEY_CHALLENGE_INVALID')
    }
    return { value, userVerification: taken.userVerification as UserVerification }
  }

  /** #open opens passkeys' sealed credentials (or finds them opened); one that does not open is logged and left out. */
  #open(caller: KeyCaller, passkeys: readonly PasskeyFactor[]): (StoredPasskey & { readonly factorId: string })[] {
    const opened: (StoredPasskey & { readonly factorId: string })[] = []
    const now = this.#now()
    for (const f of passkeys) {
      // Kept under what it was sealed to (account, user, factor), as the seal itself binds it.
      const id = `${f.accountId}\u0000${f.userId}\u0000${f.id}`
      let credential = this.#opened.get(id, now)
      if (credential === undefined) {
        try {
          credential = JSON.parse(this.#o.keyring.open(f.sealed, sealContext(f.accountId, f.userId, f.id)).toString('utf8')) as PasskeyCredential
        } catch (error) {
          if (!(error instanceof SealError)) throw error
          caller.unreadable(f.id, error.message)
          continue
        }
        this.#opened.set(id, credential, now)
      }
      opened.push({ factorId: f.id, credential, signCount: f.signCount, transports: f.meta.transports })
    }
    return opened
  }
}

const iso = (ms: number) => new Date(ms).toISOString()

/** relyingParty: an account's relying party from its settings, or PASSKEYS_NOT_CONFIGURED. */
function relyingParty(s: FactorSettings): RelyingParty | FactorRefusal {
  if (s.rpId === null || s.origins.length === 0) return refusal('conflict', 'PASSKEYS_NOT_CONFIGURED')
  return { id: s.rpId, name: s.rpName ?? s.rpId, origins: s.origins }
}

/** sameHandle: whether an answer's user handle (base64url) is `handle`; an answer without one is not. */
function sameHandle(given: unknown, handle: Uint8Array): boolean {
  return typeof given === 'string' && Buffer.from(given, 'base64url').equals(handle)
}

const passkeysOf = (factors: readonly Factor[]): PasskeyFactor[] => factors.filter((f): f is PasskeyFactor => f.type === 'passkey' && f.status === 'active')
