/**
 * The TOTP service of the Renda-compatible routes (`/totp/onboardUser`, `getOTP`,
 * `verifyOTP`) and of the operators' unlock of their secrets: the onboarding records (a
 * secret's parameters under its keyed fingerprint, never the secret), read through a bounded
 * cache, and the lockout and replay record of each secret, decided in one atomic step by the
 * verification store.
 *
 * getOTP and verifyOTP are the hot path: each method here is one direct call with no await or
 * allocation of its own beyond the work it stands for, so that the routes keep their fast paths
 * (a cached record answers synchronously) as they were.
 */
import type { Config } from '../config/config.ts'
import type { Pepper } from '../crypto/keyed.ts'
import type { Algorithm, AuditTarget } from '../domain/accounts.ts'
import type { OnboardingRecord } from '../domain/factors.ts'
import type { LockPolicy, VerifyOutcome } from '../domain/lockout.ts'
import type { Store } from '../storage/ports.ts'
import { newSecret, parseSecret, type TotpParams } from '../totp/otp.ts'
import { ParamsMark, RecordCache, secretFingerprint } from '../totp/records.ts'
import { verificationKey, verificationKeys, verifyCode } from '../totp/verify.ts'
import { draft, fail, type Context, type Failure } from './outcome.ts'

export type TotpConfig = Pick<
  Config,
  'otpMaxFailures' | 'otpLockBaseSeconds' | 'otpLockMaxSeconds' | 'keyCacheTtlSeconds' | 'keyCacheMaxEntries' | 'minSecretBits'
>

export interface TotpServiceOptions {
  readonly store: Store
  readonly config: TotpConfig
  readonly pepper: Pepper
}

/** What an onboarding keeps: the secret's parameters, for the application and user it was issued to. */
export interface Onboarding {
  readonly accountId: string
  readonly applicationId: string
  readonly userId: string
  readonly params: TotpParams
}

/** Which secret's lockout to clear: the secret (and its period, default 30) or the fingerprint its lockout's log line names. */
export interface LockoutInput {
  readonly secret?: string
  readonly fingerprint?: string
  readonly period?: number
}

export class Totp {
  readonly #store: Store
  readonly #pepper: Pepper
  readonly #config: TotpConfig
  readonly #policy: LockPolicy
  readonly #records: RecordCache
  readonly #mark: ParamsMark
  /** The mark's test, made once (RecordCache.find's `mayHaveRecord`). */
  readonly #marked: (secret: Buffer) => boolean

  constructor(opts: TotpServiceOptions) {
    const { store, config, pepper } = opts
    this.#store = store
    this.#pepper = pepper
    this.#config = config
    this.#policy = { maxFailures: config.otpMaxFailures, baseSeconds: config.otpLockBaseSeconds, maxSeconds: config.otpLockMaxSeconds }
    this.#records = new RecordCache(store.onboarding, pepper, config.keyCacheTtlSeconds, config.keyCacheMaxEntries)
    this.#mark = new ParamsMark(pepper)
    this.#marked = (secret) => this.#mark.has(secret)
  }

  /**
   * issueSecret draws the secret of a new onboarding: with parameters other than SHA1/6/30 it
   * carries the mark that tells getOTP and verifyOTP to read its record (ParamsMark).
   */
  issueSecret(algorithm: Algorithm, digits: number, period: number): Buffer {
    return algorithm === 'SHA1' && digits === 6 && period === 30 ? newSecret() : this.#mark.draw()
  }

  /**
   * record gives the onboarding record of a secret (RecordCache.find): the record or null at
   * once when cached or when the secret cannot have one that changes the answer (no mark, in an
   * account without `unmarkedParams`: see ParamsMark), else a promise of it. Callers answer
   * a hit synchronously (on getOTP a promise per call is a measurable share of the work).
   */
  record(accountId: string, secret: Buffer, now: number, unmarkedParams: boolean): OnboardingRecord | null | Promise<OnboardingRecord | null> {
    // Only a marked secret can have a record that matters, unless the account has records from before the mark.
    return this.#records.find(accountId, secret, now, unmarkedParams ? undefined : this.#marked)
  }

  /** onboard keeps the parameters of a secret onboardUser issued, under its fingerprint (the record of the same application and user is replaced). */
  onboard(o: Onboarding, now: number): Promise<OnboardingRecord> {
    const p = o.params
    return this.#store.onboarding.upsert(
      {
        accountId: o.accountId,
        applicationId: o.applicationId,
        userId: o.userId,
        algorithm: p.algorithm,
        digits: p.digits,
        period: p.period,
        secretFingerprint: secretFingerprint(this.#pepper, p.secret),
      },
      new Date(now),
    )
  }

  /** lockKey names a secret's lockout and replay record (verificationKey): a keyed fingerprint, safe to log and to show. */
  lockKey(accountId: string, p: TotpParams): string {
    return verificationKey(this.#pepper, accountId, p.secret, p.algorithm, p.period)
  }

  /** verify settles an attempt on the record `key` (`match`: the step whose code matched, or null) under the lockout policy. */
  verify(key: string, match: number | null, now: number): Promise<VerifyOutcome> {
    return verifyCode(this.#store.verification, this.#policy, key, match, now)
  }

  /**
   * clearLockout forgets the failures and lock of one secret of an account (`totp-lockout.clear`),
   * given the secret (every algorithm, at `period`) or the fingerprint that the lockout's log line names.
   */
  async clearLockout(ctx: Context, accountId: string, input: LockoutInput): Promise<{ cleared: boolean } | Failure> {
    let keys: string[]
    if (input.fingerprint !== undefined && input.fingerprint !== '') {
      if (!/^[\w-]{43}$/.test(input.fingerprint)) {
        return fail('invalid', 'fingerprint must be the 43-character fingerprint of a lockout log line', 'fingerprint')
      }
      keys = [input.fingerprint]
    } else {
      const secret = typeof input.secret === 'string' ? parseSecret(input.secret, this.#config.minSecretBits) : null
      if (secret === null) return fail('invalid', 'give the secret (base32) or its fingerprint', 'secret')
      const period = input.period ?? 30
      if (!Number.isInteger(period) || period < 15 || period > 3600) {
        return fail('invalid', 'period must be a whole number of seconds from 15 to 3600', 'period')
      }
      keys = verificationKeys(this.#pepper, accountId, secret, period)
    }
    const target: AuditTarget = { type: 'totp-lockout', id: input.fingerprint ?? keys[0]! }
    if ((await this.#store.access.getAccount(accountId)) === null) {
      await this.#store.audit.append({ ...draft(ctx, 'totp-lockout.clear', target, null, { reason: `no account ${accountId}` }), outcome: 'failure' })
      return fail('not_found', `no account ${accountId}`)
    }
    const cleared = (await Promise.all(keys.map((k) => this.#store.verification.clear(k)))).some(Boolean)
    await this.#store.audit.append(draft(ctx, 'totp-lockout.clear', target, accountId, { cleared }))
    return { cleared }
  }
}
