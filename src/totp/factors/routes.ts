/**
 * Managed factors: the service keeps each user's TOTP secrets (sealed by the keyring) and the
 * caller only says "user 42 typed 492039". Behind the same gateway guard as the rest of the
 * TOTP group (registered inside its plugin); users are the calling account's own, and another
 * account's key gets the same 404 as for a user that does not exist.
 *
 * Every attempt (activate, verify, resync, recover) goes through the user's one lockout and
 * replay record, decided atomically by the verification store; changes and the events they
 * report are written together (audit trail, and from it the webhooks' outbox).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { Config } from '../../config/config.ts'
import type { Algorithm, AuditDraft } from '../../domain/accounts.ts'
import type { Factor } from '../../domain/factors.ts'
import type { LockPolicy } from '../../domain/lockout.ts'
import type { Store } from '../../storage/ports.ts'
import type { Keyring } from '../../crypto/keyring.ts'
import { SealError } from '../../crypto/keyring.ts'
import type { Pepper } from '../../crypto/keyed.ts'
import type { EventType } from '../../domain/events.ts'
import type { Metrics } from '../../metrics/metrics.ts'
import { apiError } from '../../errors/errors.ts'
import { newId } from '../../domain/ids.ts'
import { newSecret, otpauthUrl, toBase32, totpParams, matchStep } from '../otp.ts'
import { verifyCode, type VerifyOutcome } from '../verify.ts'
import { findDrift, mark, matchFactor, paramsOf, sealContext, userLockKey } from './core.ts'
import { codeHash, newRecoveryCodes, normalizeCode } from './recovery.ts'
import { resolveUserId } from './user-id.ts'
import { PROFILE_NAMES, PROFILES, profileProblems, resolveProfile, type ProfileName } from '../profiles.ts'
import { ApiError } from '../../errors/errors.ts'
import {
  activateSchema, createFields, createSchema, deleteFactorSchema, deleteUserSchema, listSchema, recoverFields, recoverSchema,
  recoveryCodesSchema, resyncFields, resyncSchema, tokenFields, userFields, verifySchema,
} from './schemas.ts'

export interface FactorOptions {
  readonly config: Config
  readonly store: Store
  readonly pepper: Pepper
  readonly keyring: Keyring
  readonly now: () => number
  readonly metrics: Pick<Metrics, 'verified' | 'lockoutStarted'>
  /** draw gives the PNG of a QR code (the TOTP group's drawer). */
  readonly draw: (text: string) => Promise<Buffer>
}

type UserParams = { userID: string }
type FactorParams = { userID: string; factorID: string }

const view = (f: Factor) => ({
  factorID: f.id, status: f.status, label: f.label, applicationID: f.applicationId, profile: f.profile, algorithm: f.algorithm,
  tokenLength: f.digits, tokenValidity: f.period, driftSteps: f.drift, createdAt: f.createdAt, activatedAt: f.activatedAt, expiresAt: f.expiresAt,
})

export function factorRoutes(app: FastifyInstance, opts: FactorOptions): void {
  const { config, store, pepper, keyring, now } = opts
  const policy: LockPolicy = { maxFailures: config.otpMaxFailures, baseSeconds: config.otpLockBaseSeconds, maxSeconds: config.otpLockMaxSeconds }
  const iso = (ms: number) => new Date(ms).toISOString()

  /** event is the audit draft of a change or attempt of a user's, in the caller's account (and the webhook's data). */
  function event(request: FastifyRequest, action: EventType | string, userId: string, detail: Record<string, unknown>, target?: { type: 'factor'; id: string }): AuditDraft {
    const caller = request.caller!
    return {
      actor: `api-key:${caller.keyId}`, action, accountId: caller.accountId, ip: request.ip, outcome: 'success',
      target: target ?? { type: 'totp-user', id: userId }, detail: { userID: userId, ...detail },
    }
  }

  /**
   * userParam puts the path's user under the form it is stored by (resolveUserId: the domain's
   * rule, in NFC), before anything reads it, or answers USER_ID_INVALID.
   */
  async function userParam(request: FastifyRequest): Promise<void> {
    const params = request.params as UserParams
    const id = await resolveUserId(store.factors, request.caller!.accountId, params.userID, iso(now()))
    if (id === null) throw apiError('USER_ID_INVALID')
    params.userID = id
  }

  /** unreadable logs a factor whose secret does not open (never the sealed value) and remembers it for the answer. */
  function unreadableLog(request: FastifyRequest, found: string[]) {
    return (f: Factor, error: SealError) => {
      found.push(f.id)
      request.log.error({ factorID: f.id, reason: error.message }, 'factor secret does not open')
    }
  }

  /**
   * settle decides an attempt of the user's in the one atomic step, records the events of a
   * failure (and of a lockout it starts), and throws the answer of anything but acceptance.
   */
  async function settle(request: FastifyRequest, userId: string, matched: number | null, t: number, failedDetail: Record<string, unknown> = {}): Promise<void> {
    const accountId = request.caller!.accountId
    const outcome: VerifyOutcome = await verifyCode(store.verification, policy, userLockKey(pepper, accountId, userId), matched, t)
    opts.metrics.verified(outcome.kind)
    if (outcome.kind === 'accepted') return
    if (outcome.kind === 'locked') {
      throw apiError('OTP_LOCKED', { seconds: outcome.retryAfterSeconds }, { 'retry-after': String(outcome.retryAfterSeconds) })
    }
    await failed(request, userId, outcome.kind, outcome.locks === true, failedDetail)
    throw apiError(outcome.kind === 'invalid' ? 'OTP_INVALID' : 'OTP_REUSED')
  }

  /**
   * settleResync records a resync whose two codes are right. Under the new drift the second
   * code's step ends where the server's current step ends, so the mark it sets is that end:
   * the two codes cannot then verify, and the device's next code (a step later) can. The
   * outcome is the two codes' alone: a mark already there (a code of the user's accepted
   * earlier in this step) covers them as well, and the failure `settle` counted for it is
   * taken back (between the two calls a parallel attempt may see one failure more).
   */
  async function settleResync(request: FastifyRequest, userId: string, resyncMark: number, t: number): Promise<void> {
    const key = userLockKey(pepper, request.caller!.accountId, userId)
    const outcome = await verifyCode(store.verification, policy, key, resyncMark, t)
    if (outcome.kind === 'locked') {
      opts.metrics.verified(outcome.kind)
      throw apiError('OTP_LOCKED', { seconds: outcome.retryAfterSeconds }, { 'retry-after': String(outcome.retryAfterSeconds) })
    }
    if (outcome.kind === 'reused') await store.verification.forgive(key, policy)
    opts.metrics.verified('accepted')
  }

  /** failed records a failed attempt, and the lockout it started, as events. */
  async function failed(request: FastifyRequest, userId: string, reason: string, locks: boolean, detail: Record<string, unknown> = {}): Promise<void> {
    await store.audit.append({ ...event(request, 'factor.verification_failed', userId, { reason, ...detail }), outcome: 'failure' })
    if (locks) {
      opts.metrics.lockoutStarted()
      // No length: each failure past the threshold starts a longer lock, and the verdict does not say how long.
      await store.audit.append(event(request, 'factor.lockout_started', userId, {}))
    }
  }

  async function factorsOf(accountId: string, userId: string, t: number): Promise<Factor[]> {
    const factors = await store.factors.factors(accountId, userId, iso(t))
    if (factors === null) throw apiError('USER_NOT_FOUND')
    return factors
  }

  async function factorOf(accountId: string, userId: string, factorId: string, t: number): Promise<Factor> {
    const factors = await store.factors.factors(accountId, userId, iso(t))
    const factor = factors?.find((f) => f.id === factorId)
    if (factor === undefined) throw apiError('FACTOR_NOT_FOUND')
    return factor
  }

  function unreadable(request: FastifyRequest): never {
    throw apiError('FACTOR_UNREADABLE', { requestId: request.id })
  }

  app.post<{ Params: UserParams; Body: { applicationID: string; label?: string; profile?: string; algorithm?: string; tokenLength?: number; tokenValidity?: number } }>(
    '/totp/users/:userID/factors',
    { schema: createSchema(PROFILE_NAMES), config: { fields: createFields }, preValidation: userParam },
    async (request, reply) => {
      const { userID } = request.params
      const body = request.body
      const accountId = request.caller!.accountId
      const profile = (body.profile ?? 'universal') as ProfileName
      const resolved = resolveProfile(PROFILES[profile], {
        algorithm: body.algorithm?.toUpperCase() as Algorithm | undefined, digits: body.tokenLength, period: body.tokenValidity,
      })
      if (resolved.kind === 'unsupported') throw new ApiError(profileProblems(resolved))
      const secret = newSecret()
      const p = totpParams(secret, resolved.algorithm, resolved.digits, resolved.period)
      const otpURL = otpauthUrl(body.applicationID, userID, p)
      // Drawn before anything is stored: a URL too long for a QR code leaves no factor behind.
      const qr = await opts.draw(otpURL)
      const t = now()
      const id = newId('fct')
      const expiresAt = iso(t + config.factorPendingSeconds * 1000)
      const created = await store.factors.create({
        id, accountId, userId: userID, applicationId: body.applicationID, label: body.label ?? null, profile,
        status: 'pending', algorithm: p.algorithm, digits: p.digits, period: p.period, drift: 0,
        sealed: keyring.seal(secret, sealContext(accountId, userID, id)), keyVersion: keyring.active,
        createdAt: iso(t), expiresAt, activatedAt: null,
      }, config.factorMaxPerUser, iso(t), event(request, 'factor.created', userID, {
        factorID: id, applicationID: body.applicationID, label: body.label ?? null, profile,
        algorithm: p.algorithm, tokenLength: p.digits, tokenValidity: p.period,
      }, { type: 'factor', id }))
      if (created === 'limit') throw apiError('FACTOR_LIMIT', { limit: config.factorMaxPerUser })
      return reply.code(201).send({
        type: 'Success', factorID: id, status: 'pending', secretKey: toBase32(secret), otpURL,
        QRCode: `data:image/png;base64,${qr.toString('base64')}`, expiresAt, profile,
        algorithm: p.algorithm, tokenLength: p.digits, tokenValidity: p.period,
      })
    },
  )

  app.get<{ Params: UserParams }>('/totp/users/:userID/factors', { schema: listSchema, config: { fields: userFields }, preValidation: userParam }, async (request) => {
    const { userID } = request.params
    const accountId = request.caller!.accountId
    const factors = await factorsOf(accountId, userID, now())
    return { type: 'Success', userID, factors: factors.map(view), recoveryCodesLeft: await store.factors.recoveryCodesLeft(accountId, userID) }
  })

  app.delete<{ Params: FactorParams }>('/totp/users/:userID/factors/:factorID', { schema: deleteFactorSchema, config: { fields: userFields }, preValidation: userParam }, async (request, reply) => {
    const { userID, factorID } = request.params
    const removed = await store.factors.remove(request.caller!.accountId, userID, factorID,
      event(request, 'factor.deleted', userID, { factorID }, { type: 'factor', id: factorID }))
    if (!removed) throw apiError('FACTOR_NOT_FOUND')
    return reply.code(204).send()
  })

  app.delete<{ Params: UserParams }>('/totp/users/:userID', { schema: deleteUserSchema, config: { fields: userFields }, preValidation: userParam }, async (request, reply) => {
    const { userID } = request.params
    const accountId = request.caller!.accountId
    const removed = await store.factors.removeUser(accountId, userID, event(request, 'factor.deleted', userID, { factorID: null, user: true }))
    if (!removed) throw apiError('USER_NOT_FOUND')
    // Its run of failures goes with it: a user enrolled again starts unlocked (the replay record stays, so no code is accepted twice).
    await store.verification.clear(userLockKey(pepper, accountId, userID))
    return reply.code(204).send()
  })

  app.post<{ Params: FactorParams; Body: { token: string } }>(
    '/totp/users/:userID/factors/:factorID/activate',
    { schema: activateSchema, config: { fields: tokenFields }, preValidation: userParam },
    async (request) => {
      const { userID, factorID } = request.params
      const accountId = request.caller!.accountId
      const t = now()
      const factor = await factorOf(accountId, userID, factorID, t)
      if (factor.status === 'active') throw apiError('FACTOR_ACTIVE')
      let step: number | null = null
      try {
        step = request.body.token.length === factor.digits ? matchStep(paramsOf(keyring, factor), request.body.token, t) : null
      } catch (error) {
        if (!(error instanceof SealError)) throw error
        unreadableLog(request, [])(factor, error)
        unreadable(request)
      }
      await settle(request, userID, step === null ? null : mark(factor, step), t, { factorID })
      const activated = await store.factors.activate(accountId, userID, factorID, iso(t),
        event(request, 'factor.activated', userID, { factorID }, { type: 'factor', id: factorID }))
      // Expired (or deleted) between the read and now: gone, as for any pending factor past its time.
      if (!activated) throw apiError('FACTOR_NOT_FOUND')
      return { type: 'Success', factorID, status: 'active', activatedAt: iso(t) }
    },
  )

  app.post<{ Params: UserParams; Body: { token: string } }>(
    '/totp/users/:userID/verify',
    { schema: verifySchema, config: { fields: tokenFields }, preValidation: userParam },
    async (request) => {
      const { userID } = request.params
      const accountId = request.caller!.accountId
      const t = now()
      const { token } = request.body
      const active = (await factorsOf(accountId, userID, t)).filter((f) => f.status === 'active')
      if (active.length === 0) throw apiError('NO_ACTIVE_FACTOR')
      const broken: string[] = []
      const match = matchFactor(keyring, active, token, t, unreadableLog(request, broken))
      // Not one factor that could have matched (its digits) opened: say so rather than count a failure the user did not make.
      if (match === null && broken.length > 0 && broken.length === active.filter((f) => f.digits === token.length).length) unreadable(request)
      await settle(request, userID, match?.mark ?? null, t)
      return { type: 'Success', valid: true, message: 'OTP verified', factorID: match!.factor.id }
    },
  )

  app.post<{ Params: FactorParams; Body: { token: string; nextToken: string } }>(
    '/totp/users/:userID/factors/:factorID/resync',
    { schema: resyncSchema, config: { fields: resyncFields }, preValidation: userParam },
    async (request) => {
      const { userID, factorID } = request.params
      const { token, nextToken } = request.body
      const accountId = request.caller!.accountId
      const t = now()
      const factor = await factorOf(accountId, userID, factorID, t)
      if (factor.status !== 'active') throw apiError('FACTOR_PENDING')
      let found: { drift: number; step: number } | null = null
      try {
        if (token.length === factor.digits && nextToken.length === factor.digits) {
          found = findDrift(paramsOf(keyring, factor), token, nextToken, t, config.factorResyncSteps)
        }
      } catch (error) {
        if (!(error instanceof SealError)) throw error
        unreadableLog(request, [])(factor, error)
        unreadable(request)
      }
      if (found === null) {
        // A failed attempt like any other (two codes guessed at once are still guesses), answered as what it is.
        try {
          await settle(request, userID, null, t, { factorID, resync: true })
        } catch (error) {
          if ((error as { problems?: { code: string }[] }).problems?.[0]?.code === 'OTP_INVALID') {
            throw apiError('RESYNC_FAILED', { minutes: Math.round(config.factorResyncSteps * factor.period / 60) })
          }
          throw error
        }
      }
      const drift = found!.drift
      await settleResync(request, userID, mark({ period: factor.period, drift }, found!.step), t)
      const stored = await store.factors.setDrift(accountId, userID, factorID, drift, iso(t),
        event(request, 'factor.resynced', userID, { factorID, driftSteps: drift }, { type: 'factor', id: factorID }))
      if (!stored) throw apiError('FACTOR_NOT_FOUND')
      return { type: 'Success', factorID, driftSteps: drift, driftSeconds: drift * factor.period }
    },
  )

  app.post<{ Params: UserParams }>(
    '/totp/users/:userID/recovery-codes',
    { schema: recoveryCodesSchema, config: { fields: userFields }, preValidation: userParam },
    async (request, reply) => {
      const { userID } = request.params
      const accountId = request.caller!.accountId
      const codes = newRecoveryCodes()
      const stored = await store.factors.setRecoveryCodes(accountId, userID, codes.map((c) => codeHash(pepper, accountId, userID, c)), iso(now()),
        event(request, 'recovery_codes.regenerated', userID, { count: codes.length }))
      if (!stored) throw apiError('USER_NOT_FOUND')
      return reply.code(201).send({ type: 'Success', recoveryCodes: codes })
    },
  )

  app.post<{ Params: UserParams; Body: { code: string } }>(
    '/totp/users/:userID/recover',
    { schema: recoverSchema, config: { fields: recoverFields }, preValidation: userParam },
    async (request) => {
      const { userID } = request.params
      const accountId = request.caller!.accountId
      const t = now()
      // A user unknown here is 404 before any count: there is nothing to guess at.
      if (await store.factors.factors(accountId, userID, iso(t)) === null) throw apiError('USER_NOT_FOUND')
      const key = userLockKey(pepper, accountId, userID)
      // Counted before it is tried (as the portal's sign-in): parallel guesses get no more than the policy.
      const verdict = await store.verification.settle(key, null, t, policy)
      if (verdict.kind === 'locked') {
        const seconds = Math.max(1, Math.ceil((verdict.lockedUntil - t) / 1000))
        throw apiError('OTP_LOCKED', { seconds }, { 'retry-after': String(seconds) })
      }
      const code = normalizeCode(request.body.code)
      const left = code === null ? null
        : await store.factors.useRecoveryCode(accountId, userID, codeHash(pepper, accountId, userID, code), iso(t),
          event(request, 'recovery_code.used', userID, {}))
      if (left === null) {
        await failed(request, userID, 'recovery code', verdict.kind !== 'accepted' && verdict.locks === true)
        throw apiError('RECOVERY_CODE_INVALID')
      }
      await store.verification.forgive(key, policy)
      return { type: 'Success', valid: true, recoveryCodesLeft: left }
    },
  )
}
