/**
 * The managed-factors service: each user's TOTP secrets (sealed by the keyring), their one
 * lockout and replay record, and their recovery codes, for every door (the public API's
 * `/totp/users/…` routes, the admin API, the operator pages, the CLI). Every attempt
 * (activate, verify, resync, recover) is decided by the verification store in one atomic
 * step; every change is written with the audit event that reports it (the trail, and from it
 * the webhooks' outbox), and failed attempts and lockouts leave events of their own.
 *
 * The public API calls as an API key in its own account (`KeyCaller`) and gets refusals that
 * name their catalogue problems (`FactorRefusal`); operators call with a `Context` and get
 * the `Failure`s every service gives.
 */
import type { Config } from '../config/config.ts'
import { SealError, type Keyring } from '../crypto/keyring.ts'
import { keyedDigest, type Pepper } from '../crypto/keyed.ts'
import type { Algorithm, AuditDraft, AuditTarget } from '../domain/accounts.ts'
import type { EventType } from '../domain/events.ts'
import {
  settingsProblem,
  type FactorStatus,
  type Factor,
  type FactorSettings,
  type FactorSettingsPatch,
  type PasskeyFactor,
  type TotpFactor,
  type TotpUser,
} from '../domain/factors.ts'
import { newId } from '../domain/ids.ts'
import type { Page } from '../domain/lists.ts'
import type { LockPolicy, Verdict } from '../domain/lockout.ts'
import { canonicalUserId, USER_ID_RULE } from '../domain/user-ids.ts'
import { render, type ErrorCode } from '../errors/catalogue.ts'
import type { Params, Problem } from '../errors/errors.ts'
import type { Metrics } from '../metrics/metrics.ts'
import type { AttemptLimit, Store } from '../storage/ports.ts'
import { findDrift, mark, matchFactor, paramsOf, sealContext, userLockKey } from '../totp/factors/core.ts'
import { codeHash, newRecoveryCodes, normalizeCode } from '../totp/factors/recovery.ts'
import { readSecret, type ImportSource } from '../totp/factors/import.ts'
import { rotateSeals, type Rotation } from '../totp/factors/rotate.ts'
import { matchStep, newSecret, otpauthUrl, toBase32, totpParams, type TotpParams } from '../totp/otp.ts'
import { PROFILES, profileProblems, resolveProfile, type ProfileName } from '../totp/profiles.ts'
import { draft, refused, fail, isFailure, type Context, type Failure, type FailureKind } from './outcome.ts'

export type FactorsConfig = Pick<
  Config,
  | 'otpMaxFailures'
  | 'otpLockBaseSeconds'
  | 'otpLockMaxSeconds'
  | 'factorPendingSeconds'
  | 'factorMaxPerUser'
  | 'factorsPerAccount'
  | 'factorResyncSteps'
  | 'factorUserLimit'
  | 'factorKeyLimit'
  | 'factorLimitWindowSeconds'
  | 'factorImportPendingDays'
  | 'minSecretBits'
>

export interface FactorsOptions {
  readonly store: Store
  readonly config: FactorsConfig
  readonly pepper: Pepper
  /** Seals and opens the factors' secrets. */
  readonly keyring: Keyring
  /** The clock (epoch ms); tests move it. */
  readonly now?: () => number
  /** Counts verifications by outcome and the lockouts they start (none: not counted). */
  readonly metrics?: Pick<Metrics, 'verified' | 'lockoutStarted' | 'attemptsLimited'>
}

/** KeyCaller: a call of the public API, made with an API key in its own account (the actor of the events it causes). */
export interface KeyCaller {
  readonly accountId: string
  readonly keyId: string
  readonly ip: string
  /** unreadable is told of each factor whose secret does not open (for the request's log: its id and why, never the sealed value). */
  readonly unreadable: (factorId: string, reason: string) => void
  /** The caller's `rateLimitKey` (the end user's IP, say): its attempts are limited across the account's users. null: none given. */
  readonly rateKey: string | null
  /** refused is told why an answer that is not a code was refused (a passkey's: its signature, origin, counter), for the request's log. */
  readonly refused: (what: string, reason: string) => void
}

/** FactorRefusal: an expected refusal of the public API's, with the catalogue problems it is answered with. */
export interface FactorRefusal extends Failure {
  readonly problems: readonly Problem[]
}

/** A factor as it is shown: everything but its sealed secret (a passkey's credential ID and public key). */
export type FactorState =
  | Omit<TotpFactor, 'sealed' | 'keyVersion' | 'accountId' | 'userId'>
  | Omit<PasskeyFactor, 'sealed' | 'keyVersion' | 'accountId' | 'userId'>

/** A user of managed factors in a list: their counts, and when their lock ends (null: not locked). */
export interface FactorUserSummary extends TotpUser {
  readonly lockedUntil: string | null
}

export interface FactorUserState {
  readonly accountId: string
  readonly userId: string
  readonly factors: FactorState[]
  readonly recoveryCodesLeft: number
  /** When the user's lock ends; null: not locked. */
  readonly lockedUntil: string | null
}

/** What a new factor is asked with; parameters left out come from the profile (default `universal`). */
export interface FactorInput {
  readonly applicationId: string
  readonly label?: string
  readonly profile?: ProfileName
  readonly algorithm?: Algorithm
  readonly digits?: number
  readonly period?: number
}

/**
 * Enrolment: a factor drawn and not yet stored (`enrol`), with its secret; `create` stores it.
 * The door shows `otpURL` (as a QR code) between the two, so that what cannot be shown is never stored.
 */
export interface Enrolment {
  readonly userId: string
  readonly applicationId: string
  readonly label: string | null
  readonly profile: ProfileName
  readonly params: TotpParams
  readonly otpURL: string
}

/** An import: where the secret is read from, and how the factor starts. */
export interface ImportInput {
  readonly source: ImportSource
  readonly label: string | null
  /** `active`: it verifies at once; `pending`: after the user's first code (activate), within FACTOR_IMPORT_PENDING_DAYS. */
  readonly status: FactorStatus
}

export interface Resynced {
  readonly driftSteps: number
  readonly driftSeconds: number
}

export interface CreatedFactor {
  readonly factorId: string
  /** The secret in base32: shown in the creation answer only. */
  readonly secretKey: string
  readonly expiresAt: string
}

/** An attempt's outcome: null when accepted, else its refusal. */
type Refused = FactorRefusal | null
const ACCEPTED = null

export class Factors {
  readonly #store: Store
  readonly #config: FactorsConfig
  readonly #pepper: Pepper
  readonly #keyring: Keyring
  readonly #now: () => number
  readonly #metrics: Pick<Metrics, 'verified' | 'lockoutStarted' | 'attemptsLimited'> | undefined
  readonly #policy: LockPolicy

  constructor(opts: FactorsOptions) {
    this.#store = opts.store
    this.#config = opts.config
    this.#pepper = opts.pepper
    this.#keyring = opts.keyring
    this.#now = opts.now ?? Date.now
    this.#metrics = opts.metrics
    this.#policy = { maxFailures: opts.config.otpMaxFailures, baseSeconds: opts.config.otpLockBaseSeconds, maxSeconds: opts.config.otpLockMaxSeconds }
  }

  // The public API's calls (an API key, in its own account)

  /**
   * userId: which stored user an ID given at any door names, or USER_ID_INVALID. The rule is
   * the domain's (canonicalUserId); new users are stored under their NFC form. Users stored
   * before IDs were normalised keep working under the exact form they were created with: when
   * the NFC form names no user and the given form differs from it, a user stored under the
   * given form is that user. The fallback costs a read only for an ID that is not already
   * canonical (never for ASCII), and a row is never renamed: its sealed secrets are bound to its ID.
   */
  async userId(accountId: string, raw: unknown): Promise<string | FactorRefusal> {
    const id = canonicalUserId(raw)
    if (id !== null && id === raw) return id
    if (!couldBeStored(raw)) return id ?? refusal('invalid', 'USER_ID_INVALID')
    const exists = async (userId: string) => (await this.#store.factors.factors(accountId, userId, this.#iso())) !== null
    if (id !== null && (await exists(id))) return id
    // A user created before the rule, under this exact form (not NFC, or an ID the rule now refuses).
    if (await exists(raw)) return raw
    return id ?? refusal('invalid', 'USER_ID_INVALID')
  }

  /** enrol resolves a new factor's profile and draws its secret; nothing is stored (see Enrolment). */
  enrol(userId: string, input: FactorInput): Enrolment | FactorRefusal {
    const profile = input.profile ?? 'universal'
    const resolved = resolveProfile(PROFILES[profile], { algorithm: input.algorithm, digits: input.digits, period: input.period })
    if (resolved.kind === 'unsupported') {
      const problems = profileProblems(resolved)
      return { failure: 'invalid', message: render(problems[0]!.code, problems[0]!.params), problems }
    }
    const params = totpParams(newSecret(), resolved.algorithm, resolved.digits, resolved.period)
    return { userId, applicationId: input.applicationId, label: input.label ?? null, profile, params, otpURL: otpauthUrl(input.applicationId, userId, params) }
  }

  /** create stores an enrolment as a pending factor (`factor.created`), unless the user has FACTOR_MAX_PER_USER factors or the account FACTORS_PER_ACCOUNT. */
  async create(caller: KeyCaller, e: Enrolment): Promise<CreatedFactor | FactorRefusal> {
    const t = this.#now()
    const id = newId('fct')
    const expiresAt = iso(t + this.#config.factorPendingSeconds * 1000)
    const { accountId } = caller
    const p = e.params
    const max = this.#config.factorMaxPerUser
    const created = await this.#store.factors.create(
      {
        id,
        type: 'totp',
        accountId,
        userId: e.userId,
        applicationId: e.applicationId,
        label: e.label,
        profile: e.profile,
        status: 'pending',
        algorithm: p.algorithm,
        digits: p.digits,
        period: p.period,
        drift: 0,
        sealed: this.#keyring.seal(p.secret, sealContext(accountId, e.userId, id)),
        keyVersion: this.#keyring.active,
        createdAt: iso(t),
        expiresAt,
        activatedAt: null,
      },
      max,
      this.#config.factorsPerAccount,
      iso(t),
      keyEvent(
        caller,
        'factor.created',
        e.userId,
        {
          factorID: id,
          type: 'totp',
          applicationID: e.applicationId,
          label: e.label,
          profile: e.profile,
          algorithm: p.algorithm,
          tokenLength: p.digits,
          tokenValidity: p.period,
        },
        id,
      ),
    )
    if (created === 'limit') return refusal('conflict', 'FACTOR_LIMIT', { limit: max })
    if (created === 'account_limit') return refusal('conflict', 'FACTORS_PER_ACCOUNT', { limit: this.#config.factorsPerAccount })
    return { factorId: id, secretKey: toBase32(p.secret), expiresAt }
  }

  /**
   * importFactor keeps a secret the caller already has (its users keep the authenticators they
   * have), sealed on arrival and never shown again (`factor.created`, imported). Its id is
   * derived from account, user and secret: the same import again is FACTOR_EXISTS, not a second factor.
   */
  async importFactor(caller: KeyCaller, userId: string, input: ImportInput): Promise<FactorState | FactorRefusal> {
    return this.#import(caller.accountId, userId, input, (id, detail) => keyEvent(caller, 'factor.created', userId, detail, id))
  }

  /** importAs: an operator's import (the admin API's and the CLI's bulk import), its event the operator's. */
  importAs(ctx: Context, accountId: string, userId: string, input: ImportInput): Promise<FactorState | FactorRefusal> {
    return this.#import(accountId, userId, input, (id, detail) =>
      draft(ctx, 'factor.created', { type: 'factor', id }, accountId, { userID: userId, ...detail, by: 'operator' }),
    )
  }

  async #import(
    accountId: string,
    userId: string,
    input: ImportInput,
    event: (factorId: string, detail: Record<string, unknown>) => AuditDraft,
  ): Promise<FactorState | FactorRefusal> {
    const read = readSecret(input.source, this.#config.minSecretBits)
    if (Array.isArray(read)) return { failure: 'invalid', message: render(read[0]!.code, read[0]!.params), problems: read }
    const t = this.#now()
    const p = read.params
    const id = importedId(this.#pepper, accountId, userId, p)
    const pending = input.status === 'pending'
    const factor: TotpFactor = {
      id,
      type: 'totp',
      accountId,
      userId,
      applicationId: read.applicationId,
      label: input.label,
      profile: input.source.profile,
      status: input.status,
      algorithm: p.algorithm,
      digits: p.digits,
      period: p.period,
      drift: 0,
      sealed: this.#keyring.seal(p.secret, sealContext(accountId, userId, id)),
      keyVersion: this.#keyring.active,
      createdAt: iso(t),
      expiresAt: pending ? iso(t + this.#config.factorImportPendingDays * 86_400_000) : null,
      activatedAt: pending ? null : iso(t),
    }
    const max = this.#config.factorMaxPerUser
    const detail = {
      factorID: id,
      type: 'totp',
      imported: true,
      status: input.status,
      applicationID: read.applicationId,
      label: input.label,
      profile: input.source.profile,
      algorithm: p.algorithm,
      tokenLength: p.digits,
      tokenValidity: p.period,
    }
    const created = await this.#store.factors.create(factor, max, this.#config.factorsPerAccount, iso(t), event(id, detail))
    if (created === 'limit') return refusal('conflict', 'FACTOR_LIMIT', { limit: max })
    if (created === 'account_limit') return refusal('conflict', 'FACTORS_PER_ACCOUNT', { limit: this.#config.factorsPerAccount })
    if (created === 'exists') return refusal('conflict', 'FACTOR_EXISTS', { factorID: id })
    return factorState(factor)
  }

  /** factors: the user's live factors, oldest first, and their recovery codes left. */
  async factors(caller: KeyCaller, userId: string): Promise<{ factors: FactorState[]; recoveryCodesLeft: number } | FactorRefusal> {
    const factors = await this.#factorsOf(caller.accountId, userId, this.#now())
    if (isFailure(factors)) return factors
    return { factors: factors.map(factorState), recoveryCodesLeft: await this.#store.factors.recoveryCodesLeft(caller.accountId, userId) }
  }

  /** removeFactor deletes one factor (`factor.deleted`). */
  async removeFactor(caller: KeyCaller, userId: string, factorId: string): Promise<{ deleted: true } | FactorRefusal> {
    // Read first for the event's type: a factor deleted in between is not found below all the same.
    const factor = await this.#factorOf(caller.accountId, userId, factorId, this.#now())
    if (isFailure(factor)) return factor
    const removed = await this.#store.factors.remove(
      caller.accountId,
      userId,
      factorId,
      keyEvent(caller, 'factor.deleted', userId, { factorID: factorId, type: factor.type }, factorId),
    )
    return removed ? { deleted: true } : refusal('not_found', 'FACTOR_NOT_FOUND')
  }

  /** removeUser deletes a user, their factors and recovery codes (`factor.deleted`), and their run of failures. */
  async removeUser(caller: KeyCaller, userId: string): Promise<{ deleted: true } | FactorRefusal> {
    const { accountId } = caller
    const removed = await this.#store.factors.removeUser(accountId, userId, keyEvent(caller, 'factor.deleted', userId, { factorID: null, user: true }))
    if (!removed) return refusal('not_found', 'USER_NOT_FOUND')
    // Its run of failures goes with it: a user enrolled again starts unlocked (the replay record stays, so no code is accepted twice).
    await this.#store.verification.clear(userLockKey(this.#pepper, accountId, userId))
    return { deleted: true }
  }

  /** activate makes a pending factor active with its first code (`factor.activated`): an attempt like any other. */
  async activate(caller: KeyCaller, userId: string, factorId: string, token: string): Promise<{ activatedAt: string } | FactorRefusal> {
    const t = this.#now()
    const found = await this.#attemptFactor(caller.accountId, userId, factorId, t)
    if (isFailure(found)) return found
    const { factor, settings } = found
    if (factor.status === 'active') return refusal('conflict', 'FACTOR_ACTIVE')
    let step: number | null = null
    try {
      step = token.length === factor.digits ? matchStep(paramsOf(this.#keyring, factor), token, t) : null
    } catch (error) {
      return unreadable(caller, factor, error)
    }
    const refused = await this.#settle(caller, userId, step === null ? null : mark(factor, step), t, settings, { factorID: factorId, type: 'totp' })
    if (refused !== ACCEPTED) return refused
    const activated = await this.#store.factors.activate(
      caller.accountId,
      userId,
      factorId,
      iso(t),
      keyEvent(caller, 'factor.activated', userId, { factorID: factorId, type: 'totp' }, factorId),
    )
    // Expired (or deleted) between the read and now: gone, as for any pending factor past its time.
    return activated ? { activatedAt: iso(t) } : refusal('not_found', 'FACTOR_NOT_FOUND')
  }

  /** verify checks a code of the user's against each of their active factors: the factor it is of. */
  async verify(caller: KeyCaller, userId: string, token: string): Promise<{ factorId: string } | FactorRefusal> {
    const t = this.#now()
    const view = await this.#attempting(caller.accountId, userId, t)
    if (isFailure(view)) return view
    const active = view.factors.filter((f): f is TotpFactor => f.type === 'totp' && f.status === 'active')
    if (active.length === 0) return refusal('conflict', 'NO_ACTIVE_FACTOR')
    let broken = 0
    const match = matchFactor(this.#keyring, active, token, t, (f, error) => {
      broken++
      caller.unreadable(f.id, error.message)
    })
    // Not one factor that could have matched (its digits) opened: say so rather than count a failure the user did not make.
    if (match === null && broken > 0 && broken === active.filter((f) => f.digits === token.length).length) return refusal('conflict', 'FACTOR_UNREADABLE')
    const refused = await this.#settle(caller, userId, match?.mark ?? null, t, view.settings, { type: 'totp' })
    return refused ?? { factorId: match!.factor.id }
  }

  /**
   * resync finds the drift of a device from two consecutive codes (`factor.resynced`). Two
   * codes that are not are a failed attempt like any other (two codes guessed at once are
   * still guesses), answered as what it is.
   */
  async resync(caller: KeyCaller, userId: string, factorId: string, token: string, nextToken: string): Promise<Resynced | FactorRefusal> {
    const t = this.#now()
    const named = await this.#attemptFactor(caller.accountId, userId, factorId, t)
    if (isFailure(named)) return named
    const { factor, settings } = named
    if (factor.status !== 'active') return refusal('conflict', 'FACTOR_PENDING')
    let found: { drift: number; step: number } | null = null
    try {
      if (token.length === factor.digits && nextToken.length === factor.digits) {
        found = findDrift(paramsOf(this.#keyring, factor), token, nextToken, t, this.#config.factorResyncSteps)
      }
    } catch (error) {
      return unreadable(caller, factor, error)
    }
    if (found === null) {
      const refused = (await this.#settle(caller, userId, null, t, settings, { factorID: factorId, type: 'totp', resync: true }))!
      if (refused.problems[0]!.code !== 'OTP_INVALID') return refused
      return refusal('invalid', 'RESYNC_FAILED', { minutes: Math.round((this.#config.factorResyncSteps * factor.period) / 60) })
    }
    const { drift } = found
    const locked = await this.#settleResync(caller, userId, mark({ period: factor.period, drift }, found.step), t, settings)
    if (locked !== ACCEPTED) return locked
    const stored = await this.#store.factors.setDrift(
      caller.accountId,
      userId,
      factorId,
      drift,
      iso(t),
      keyEvent(caller, 'factor.resynced', userId, { factorID: factorId, type: 'totp', driftSteps: drift }, factorId),
    )
    return stored ? { driftSteps: drift, driftSeconds: drift * factor.period } : refusal('not_found', 'FACTOR_NOT_FOUND')
  }

  /** regenerateRecoveryCodes replaces the user's recovery codes by new ones (`recovery_codes.regenerated`), shown once. */
  async regenerateRecoveryCodes(caller: KeyCaller, userId: string): Promise<{ codes: string[] } | FactorRefusal> {
    const { accountId } = caller
    const codes = newRecoveryCodes()
    const stored = await this.#store.factors.setRecoveryCodes(
      accountId,
      userId,
      codes.map((c) => codeHash(this.#pepper, accountId, userId, c)),
      this.#iso(),
      keyEvent(caller, 'recovery_codes.regenerated', userId, { count: codes.length }),
    )
    return stored ? { codes } : refusal('not_found', 'USER_NOT_FOUND')
  }

  /** recover uses one of the user's recovery codes (`recovery_code.used`): an attempt under the user's lockout. */
  async recover(caller: KeyCaller, userId: string, given: string): Promise<{ recoveryCodesLeft: number } | FactorRefusal> {
    const { accountId } = caller
    const t = this.#now()
    // A user unknown here is 404 before any count: there is nothing to guess at.
    const view = await this.#attempting(accountId, userId, t)
    if (isFailure(view)) return view
    return this.attempt(caller, userId, view.settings, { reason: 'recovery code' }, async () => {
      const code = normalizeCode(given)
      const left =
        code === null
          ? null
          : await this.#store.factors.useRecoveryCode(
              accountId,
              userId,
              codeHash(this.#pepper, accountId, userId, code),
              iso(t),
              keyEvent(caller, 'recovery_code.used', userId, {}),
            )
      return left === null ? refusal('invalid', 'RECOVERY_CODE_INVALID') : { recoveryCodesLeft: left }
    })
  }

  /**
   * attempt tries something of the user's under their one lockout (a recovery code, a
   * passkey's signature), counted before it is tried, as the portal's sign-in: however many
   * try at once, no more than the policy's failures are tried before the lock. `tried` answers
   * its value, or the refusal of a failure (recorded with `detail` and counted); an accepted
   * attempt takes its count back, or, with `endsRun` (a passkey's signature, as a right TOTP
   * code), ends the user's run of failures.
   */
  async attempt<T>(
    caller: KeyCaller,
    userId: string,
    settings: FactorSettings,
    detail: { readonly reason: string } & Record<string, unknown>,
    tried: () => Promise<T | FactorRefusal>,
    endsRun = false,
  ): Promise<T | FactorRefusal> {
    const t = this.#now()
    const key = userLockKey(this.#pepper, caller.accountId, userId)
    const verdict = await this.#decide(caller, key, userId, null, t, settings)
    if ('failure' in verdict) return verdict
    if (verdict.kind === 'locked') return lockedRefusal(secondsTo(verdict.lockedUntil, t))
    let result: T | FactorRefusal
    try {
      result = await tried()
    } catch (error) {
      // Not tried after all (a fault): its count goes back, the fault goes on.
      await this.#store.verification.forgive(key, this.#policy)
      throw error
    }
    if (isFailure(result)) {
      const { reason, ...rest } = detail
      await this.#failed(caller, userId, reason, verdict.kind !== 'accepted' && verdict.locks === true, rest)
      return result
    }
    if (endsRun) await this.#store.verification.clear(key)
    else await this.#store.verification.forgive(key, this.#policy)
    return result
  }

  /**
   * #decide settles an attempt of the user's behind the account's attempt limits (per user, and
   * per the caller's rate limit key when it gave one), in one step of the verification store: a
   * refused attempt is not tried, takes nothing from the windows and is no failure of the
   * user's, so a flood from one source neither gets more guesses than the limit nor counts
   * towards the user's lock beyond it. The verdict, or the limit's refusal.
   */
  async #decide(caller: KeyCaller, key: string, userId: string, step: number | null, t: number, s: FactorSettings): Promise<Verdict | FactorRefusal> {
    const perUser = s.userLimit ?? this.#config.factorUserLimit
    const perKey = s.keyLimit ?? this.#config.factorKeyLimit
    const limits: AttemptLimit[] = []
    if (perUser > 0) limits.push({ key: keyedDigest(this.#pepper, 'attempts-user', caller.accountId, userId), max: perUser })
    if (perKey > 0 && caller.rateKey !== null) limits.push({ key: keyedDigest(this.#pepper, 'attempts-key', caller.accountId, caller.rateKey), max: perKey })
    if (limits.length === 0) return this.#store.verification.settle(key, step, t, this.#policy)
    const windowMs = (s.limitWindowSeconds ?? this.#config.factorLimitWindowSeconds) * 1000
    const verdict = await this.#store.verification.settleWithin(key, step, t, this.#policy, limits, windowMs)
    if (verdict.kind !== 'limited') return verdict
    this.#metrics?.attemptsLimited()
    return refusal('limit', 'ATTEMPTS_LIMITED', { seconds: secondsTo(verdict.retryAtMs, t) })
  }

  /**
   * #settle decides an attempt of the user's in the one atomic step and records the events of
   * a failure (and of a lockout it starts): null when accepted, else the refusal.
   */
  async #settle(
    caller: KeyCaller,
    userId: string,
    matched: number | null,
    t: number,
    settings: FactorSettings,
    failedDetail: Record<string, unknown> = {},
  ): Promise<Refused> {
    const verdict = await this.#decide(caller, userLockKey(this.#pepper, caller.accountId, userId), userId, matched, t, settings)
    if ('failure' in verdict) return verdict
    this.#metrics?.verified(verdict.kind)
    if (verdict.kind === 'accepted') return ACCEPTED
    if (verdict.kind === 'locked') return lockedRefusal(secondsTo(verdict.lockedUntil, t))
    await this.#failed(caller, userId, verdict.kind, verdict.locks === true, failedDetail)
    return verdict.kind === 'invalid' ? refusal('invalid', 'OTP_INVALID') : refusal('conflict', 'OTP_REUSED')
  }

  /**
   * #settleResync records a resync whose two codes are right. Under the new drift the second
   * code's step ends where the server's current step ends, so the mark it sets is that end:
   * the two codes cannot then verify, and the device's next code (a step later) can. The
   * outcome is the two codes' alone: a mark already there (a code of the user's accepted
   * earlier in this step) covers them as well, and the failure `#settle` counted for it is
   * taken back (between the two calls a parallel attempt may see one failure more).
   */
  async #settleResync(caller: KeyCaller, userId: string, resyncMark: number, t: number, settings: FactorSettings): Promise<Refused> {
    const key = userLockKey(this.#pepper, caller.accountId, userId)
    const verdict = await this.#decide(caller, key, userId, resyncMark, t, settings)
    if ('failure' in verdict) return verdict
    if (verdict.kind === 'locked') {
      this.#metrics?.verified(verdict.kind)
      return lockedRefusal(secondsTo(verdict.lockedUntil, t))
    }
    if (verdict.kind === 'reused') await this.#store.verification.forgive(key, this.#policy)
    this.#metrics?.verified('accepted')
    return ACCEPTED
  }

  /** #failed records a failed attempt, and the lockout it started, as events. */
  async #failed(caller: KeyCaller, userId: string, reason: string, locks: boolean, detail: Record<string, unknown> = {}): Promise<void> {
    await this.#store.audit.append({ ...keyEvent(caller, 'factor.verification_failed', userId, { reason, ...detail }), outcome: 'failure' })
    if (locks) {
      this.#metrics?.lockoutStarted()
      // No length: each failure past the threshold starts a longer lock, and the verdict does not say how long.
      await this.#store.audit.append(keyEvent(caller, 'factor.lockout_started', userId, {}))
    }
  }

  /** #attempting: what an attempt of the user's needs (their factors, the account's settings), in one read; USER_NOT_FOUND when there is no such user. */
  async #attempting(accountId: string, userId: string, t: number): Promise<{ factors: Factor[]; settings: FactorSettings } | FactorRefusal> {
    return (await this.#store.factors.attempting(accountId, userId, iso(t))) ?? refusal('not_found', 'USER_NOT_FOUND')
  }

  /** #attemptFactor: the TOTP factor an attempt names, with the account's settings, in one read. */
  async #attemptFactor(
    accountId: string,
    userId: string,
    factorId: string,
    t: number,
  ): Promise<{ factor: TotpFactor; settings: FactorSettings } | FactorRefusal> {
    const view = await this.#store.factors.attempting(accountId, userId, iso(t))
    const factor = totpOnly(view?.factors.find((f) => f.id === factorId) ?? refusal('not_found', 'FACTOR_NOT_FOUND'))
    return isFailure(factor) ? factor : { factor, settings: view!.settings }
  }

  async #factorsOf(accountId: string, userId: string, t: number): Promise<Factor[] | FactorRefusal> {
    return (await this.#store.factors.factors(accountId, userId, iso(t))) ?? refusal('not_found', 'USER_NOT_FOUND')
  }

  async #factorOf(accountId: string, userId: string, factorId: string, t: number): Promise<Factor | FactorRefusal> {
    const factors = await this.#store.factors.factors(accountId, userId, iso(t))
    return factors?.find((f) => f.id === factorId) ?? refusal('not_found', 'FACTOR_NOT_FOUND')
  }

  // Operators' calls (the admin API, the operator pages, the CLI): what they see (never a secret) and may do

  /** listUsers pages through an account's users by user id, each with when their lock ends (null: not locked). A malformed cursor throws CursorError. */
  async listUsers(accountId: string, query: { readonly cursor?: string; readonly limit: number }): Promise<Page<FactorUserSummary> | Failure> {
    if ((await this.#store.access.getAccount(accountId)) === null) return fail('not_found', `no account ${accountId}`)
    const now = this.#now()
    const page = await this.#store.factors.listUsers(accountId, { ...query, nowIso: iso(now) })
    // One read per user of the page, at once: a page is at most a few hundred.
    const locks = await Promise.all(page.items.map((u) => this.#lockEnd(accountId, u.userId, now)))
    return { items: page.items.map((u, i) => ({ ...u, lockedUntil: locks[i]! })), next: page.next }
  }

  /** user: one user's factors (never their secrets), recovery codes left and lock; not_found for an unknown account or user. */
  async user(accountId: string, givenId: string): Promise<FactorUserState | Failure> {
    if ((await this.#store.access.getAccount(accountId)) === null) return fail('not_found', `no account ${accountId}`)
    const userId = await this.#operatorUserId(accountId, givenId)
    if (isFailure(userId)) return userId
    const now = this.#now()
    const factors = await this.#store.factors.factors(accountId, userId, iso(now))
    if (factors === null) return fail('not_found', `no TOTP user ${userId} in account ${accountId}`)
    const [recoveryCodesLeft, lockedUntil] = await Promise.all([
      this.#store.factors.recoveryCodesLeft(accountId, userId),
      this.#lockEnd(accountId, userId, now),
    ])
    return { accountId, userId, factors: factors.map(factorState), recoveryCodesLeft, lockedUntil }
  }

  /** clearLockout forgets a user's run of failures and lock (`factor-lockout.clear`): their next right code is taken at once. */
  async clearLockout(ctx: Context, accountId: string, givenId: string): Promise<{ cleared: boolean } | Failure> {
    const userId = await this.#operatorUserId(accountId, givenId)
    if (isFailure(userId)) return userId
    const target: AuditTarget = { type: 'totp-user', id: userId }
    if ((await this.#store.access.getAccount(accountId)) === null) {
      return this.#refuse(ctx, 'factor-lockout.clear', target, null, fail('not_found', `no account ${accountId}`))
    }
    if ((await this.#store.factors.factors(accountId, userId, this.#iso())) === null) {
      return this.#refuse(ctx, 'factor-lockout.clear', target, accountId, fail('not_found', `no TOTP user ${userId} in account ${accountId}`))
    }
    const cleared = await this.#store.verification.clear(userLockKey(this.#pepper, accountId, userId))
    await this.#store.audit.append(draft(ctx, 'factor-lockout.clear', target, accountId, { userID: userId, cleared }))
    return { cleared }
  }

  /**
   * deleteUser deletes a user's factors and recovery codes (a lost phone and lost codes):
   * the `factor.deleted` event, written with the deletion, reaches the account's webhooks too.
   */
  async deleteUser(ctx: Context, accountId: string, givenId: string): Promise<{ deleted: true } | Failure> {
    const userId = await this.#operatorUserId(accountId, givenId)
    if (isFailure(userId)) return userId
    const target: AuditTarget = { type: 'totp-user', id: userId }
    // A refusal is recorded under its own action: `factor.deleted` is a webhook event, and nothing was deleted.
    const refused = (failure: Failure, known: boolean) => this.#refuse(ctx, 'factor-user.delete', target, known ? accountId : null, failure)
    if ((await this.#store.access.getAccount(accountId)) === null) return refused(fail('not_found', `no account ${accountId}`), false)
    const removed = await this.#store.factors.removeUser(
      accountId,
      userId,
      draft(ctx, 'factor.deleted', target, accountId, { userID: userId, factorID: null, user: true, by: 'operator' }),
    )
    if (!removed) return refused(fail('not_found', `no TOTP user ${userId} in account ${accountId}`), true)
    // Its run of failures goes with it: a user enrolled again starts unlocked (the replay record stays).
    await this.#store.verification.clear(userLockKey(this.#pepper, accountId, userId))
    return { deleted: true }
  }

  /** settings: an account's factor settings (its passkeys' relying party, its attempt limits); not_found for an unknown account. */
  async settings(accountId: string): Promise<FactorSettings | Failure> {
    if ((await this.#store.access.getAccount(accountId)) === null) return fail('not_found', `no account ${accountId}`)
    return this.#store.factors.settings(accountId)
  }

  /**
   * updateSettings changes an account's factor settings (`factor-settings.update`): a field
   * left out stays, null clears it. Refused (invalid, naming the field) when the relying party
   * and origins would be refused by a browser, or a limit is out of bounds.
   */
  async updateSettings(ctx: Context, accountId: string, patch: FactorSettingsPatch): Promise<FactorSettings | Failure> {
    const target: AuditTarget = { type: 'account', id: accountId }
    if ((await this.#store.access.getAccount(accountId)) === null) {
      return this.#refuse(ctx, 'factor-settings.update', target, null, fail('not_found', `no account ${accountId}`))
    }
    const { updatedAt: _, ...current } = await this.#store.factors.settings(accountId)
    const next = { ...current, ...patch }
    const problem = settingsProblem(next)
    if (problem !== null) return this.#refuse(ctx, 'factor-settings.update', target, accountId, fail('invalid', problem.message, problem.field))
    const t = this.#iso()
    await this.#store.factors.setSettings(accountId, next, t, draft(ctx, 'factor-settings.update', target, accountId, { ...patch }))
    return { ...next, updatedAt: t }
  }

  // Key rotation (the CLI's `encryption` commands)

  /** sealVersions counts factors per key version. */
  sealVersions(): Promise<Map<number, number>> {
    return this.#store.factors.sealVersions()
  }

  /** rotateSeals re-seals every factor sealed under another key version than the keyring's active one (rotate.ts). */
  rotateSeals(options: { batch?: number; onBatch?: (done: number) => void | Promise<void> } = {}): Promise<Rotation> {
    return rotateSeals(this.#store.factors, this.#keyring, options)
  }

  /** #operatorUserId: the stored form of a user ID given at a door (the API's rule), or the refusal of one no user can have. */
  async #operatorUserId(accountId: string, givenId: unknown): Promise<string | Failure> {
    const userId = await this.userId(accountId, givenId)
    return isFailure(userId) ? fail('invalid', `userID must be ${USER_ID_RULE}`, 'userID') : userId
  }

  /** #lockEnd: when the user's lock ends (ISO time), or null when they are not locked. */
  async #lockEnd(accountId: string, userId: string, now: number): Promise<string | null> {
    const until = await this.#store.verification.lockedUntil([userLockKey(this.#pepper, accountId, userId)], now)
    return until > now ? iso(until) : null
  }

  /** #refuse records a refused change and returns its failure. */
  #refuse(ctx: Context, action: string, target: AuditTarget, accountId: string | null, failure: Failure): Promise<Failure> {
    return refused(this.#store.audit, ctx, action, target, accountId, failure)
  }

  #iso(): string {
    return iso(this.#now())
  }
}

const iso = (ms: number) => new Date(ms).toISOString()

/** importedId: an imported factor's id, the same for the same account, user and secret (so an import run again finds what went in). */
function importedId(pepper: Pepper, accountId: string, userId: string, p: TotpParams): string {
  const digest = keyedDigest(pepper, 'factor-import', accountId, userId, toBase32(p.secret), p.algorithm, String(p.digits), String(p.period))
  return `fct_${Buffer.from(digest, 'base64url').subarray(0, 8).toString('hex')}`
}

/**
 * keyEvent is the audit draft of a change or attempt of a user's, made with an API key in its
 * account (and the webhook's data): about the factor when one is named, else about the user.
 */
export function keyEvent(caller: KeyCaller, action: EventType | string, userId: string, detail: Record<string, unknown>, factorId?: string): AuditDraft {
  return {
    actor: `api-key:${caller.keyId}`,
    action,
    accountId: caller.accountId,
    ip: caller.ip,
    outcome: 'success',
    target: factorId === undefined ? { type: 'totp-user', id: userId } : { type: 'factor', id: factorId },
    detail: { userID: userId, ...detail },
  }
}

export function refusal(failure: FailureKind, code: ErrorCode, params?: Params): FactorRefusal {
  return { failure, message: render(code, params), problems: [params === undefined ? { code } : { code, params }] }
}

const lockedRefusal = (seconds: number): FactorRefusal => refusal('conflict', 'OTP_LOCKED', { seconds })

/** secondsTo: whole seconds from `t` to `until` (epoch ms), at least one: a Retry-After. */
const secondsTo = (until: number, t: number): number => Math.max(1, Math.ceil((until - t) / 1000))

/** unreadable reports a factor whose secret does not open (SealError; anything else is a fault and thrown on). */
export function unreadable(caller: KeyCaller, factor: Factor, error: unknown): FactorRefusal {
  if (!(error instanceof SealError)) throw error
  caller.unreadable(factor.id, error.message)
  return refusal('conflict', 'FACTOR_UNREADABLE')
}

/** totpOnly: a factor the TOTP calls (activate, resync) take, or the refusal of a passkey. */
function totpOnly(f: Factor | FactorRefusal): TotpFactor | FactorRefusal {
  if (isFailure(f) || f.type === 'totp') return f
  return refusal('conflict', 'FACTOR_NOT_TOTP', { factorID: f.id })
}

function factorState(f: Factor): FactorState {
  if (f.type === 'passkey') {
    const { sealed: _s, keyVersion: _k, accountId: _a, userId: _u, ...shown } = f
    return shown
  }
  return {
    id: f.id,
    type: 'totp',
    status: f.status,
    label: f.label,
    applicationId: f.applicationId,
    profile: f.profile,
    algorithm: f.algorithm,
    digits: f.digits,
    period: f.period,
    drift: f.drift,
    createdAt: f.createdAt,
    activatedAt: f.activatedAt,
    expiresAt: f.expiresAt,
  }
}

/** couldBeStored: the IDs the earlier rule took (no ':' or C0 control, not blank, at most 256 characters): no other is looked up. */
function couldBeStored(raw: unknown): raw is string {
  return typeof raw === 'string' && raw.isWellFormed() && raw.trim() !== '' && [...raw].length <= 256 && !/[:\u0000-\u001f\u007f]/.test(raw)
}
