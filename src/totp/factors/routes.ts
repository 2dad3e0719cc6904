/**
 * Managed factors: the service keeps each user's TOTP secrets (sealed by the keyring) and the
 * caller only says "user 42 typed 492039". Behind the same gateway guard as the rest of the
 * TOTP group (registered inside its plugin); users are the calling account's own, and another
 * account's key gets the same 404 as for a user that does not exist.
 *
 * HTTP in, a call of the factors service (services/factors.ts), HTTP out: the service holds
 * every rule (the user's one lockout and replay record, the limits, the events each change and
 * attempt writes); these routes turn its refusals into the catalogue's answers.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { Algorithm } from '../../domain/accounts.ts'
import { ApiError, apiError } from '../../errors/errors.ts'
import { isFailure } from '../../services/outcome.ts'
import type { Factors, FactorRefusal, KeyCaller } from '../../services/factors.ts'
import type { Passkeys } from '../../services/passkeys.ts'
import type { Idempotency } from '../../services/idempotency.ts'
import { idempotent } from '../../http/idempotency.ts'
import { factorView as view } from './view.ts'
import { PROFILE_NAMES, type ProfileName } from '../profiles.ts'
import {
  activateSchema,
  createFields,
  createSchema,
  deleteFactorSchema,
  deleteUserSchema,
  importFields,
  importSchema,
  listSchema,
  recoverFields,
  recoverSchema,
  recoveryCodesSchema,
  resyncFields,
  resyncSchema,
  tokenFields,
  userFields,
  verifySchema,
} from './schemas.ts'
import {
  authenticateFields,
  authenticateSchema,
  authenticationOptionsFields,
  authenticationOptionsSchema,
  discoverableAuthenticateFields,
  discoverableAuthenticateSchema,
  discoverableOptionsFields,
  discoverableOptionsSchema,
  registerFields,
  registerSchema,
  registrationOptionsFields,
  registrationOptionsSchema,
} from './passkey-schemas.ts'
import type { Attachment, AuthenticationResponseJSON, RegistrationResponseJSON, ResidentKey, UserVerification } from './passkey.ts'

export interface FactorOptions {
  readonly factors: Factors
  readonly passkeys: Passkeys
  readonly idempotency: Idempotency
  /** draw gives the PNG of a QR code (the TOTP group's drawer). */
  readonly draw: (text: string) => Promise<Buffer>
}

type UserParams = { userID: string }
type CreateBody = { applicationID: string; label?: string; profile?: string; algorithm?: string; tokenLength?: number; tokenValidity?: number }
type FactorParams = { userID: string; factorID: string }
type ImportBody = CreateBody & { secret?: string; otpURL?: string; applicationID?: string; status?: 'active' | 'pending' }

/** caller: the request as the factors service knows it (the key, its account, the source address, the log for unreadable factors). */
function caller(request: FastifyRequest): KeyCaller {
  return {
    accountId: request.caller!.accountId,
    keyId: request.caller!.keyId,
    ip: request.ip,
    rateKey: rateKeyOf(request.body),
    unreadable: (factorId, reason) => request.log.error({ factorID: factorId, reason }, 'factor secret does not open'),
    refused: (what, reason) => request.log.info({ reason }, `${what} refused`),
  }
}

/** answer gives a service's value, or throws its refusal as the catalogue's answer (with Retry-After for a lock, the request id for an unreadable factor). */
function answer<T>(request: FastifyRequest, result: T | FactorRefusal): T {
  if (!isFailure(result)) return result
  const first = result.problems[0]!
  if (first.code === 'FACTOR_UNREADABLE') throw apiError('FACTOR_UNREADABLE', { requestId: request.id })
  const waits = first.code === 'OTP_LOCKED' || first.code === 'ATTEMPTS_LIMITED' || first.code === 'PASSKEY_CHALLENGES_PER_ACCOUNT'
  throw new ApiError(result.problems, waits ? { 'retry-after': String(first.params!.seconds) } : {})
}

/** rateKeyOf: the body's rateLimitKey (validated by the route's schema where it is taken), or null. */
function rateKeyOf(body: unknown): string | null {
  const value = typeof body === 'object' && body !== null ? (body as { rateLimitKey?: unknown }).rateLimitKey : undefined
  return typeof value === 'string' ? value : null
}

/** factorRoutes registers the routes in the order the OpenAPI document lists them: the factors and users, then the attempts. */
export function factorRoutes(app: FastifyInstance, opts: FactorOptions): void {
  const { factors } = opts
  /** userParam puts the path's user under the form it is stored by (the service's rule), before anything reads it, or answers USER_ID_INVALID. */
  const userParam = async (request: FastifyRequest): Promise<void> => {
    const params = request.params as UserParams
    params.userID = answer(request, await factors.userId(request.caller!.accountId, params.userID))
  }
  // An account's keys: one account's Idempotency-Key never meets another's.
  const once = idempotent(
    () => opts.idempotency,
    (request) => `account:${request.caller!.accountId}`,
  )
  enrolmentRoutes(app, opts, userParam, once)
  attemptRoutes(app, factors, userParam, once)
  passkeyRoutes(app, opts.passkeys, userParam, once)
}

type UserHook = (request: FastifyRequest) => Promise<void>
/** The hooks of a route that takes an Idempotency-Key. */
type Once = ReturnType<typeof idempotent>

/** enrolmentRoutes: creating, listing and deleting factors, and deleting a user. */
function enrolmentRoutes(app: FastifyInstance, opts: FactorOptions, userParam: UserHook, once: Once): void {
  const { factors } = opts
  app.post<{ Params: UserParams; Body: CreateBody }>(
    '/totp/users/:userID/factors',
    { schema: createSchema(PROFILE_NAMES), config: { fields: createFields }, preValidation: userParam, ...once },
    async (request, reply) => {
      const body = request.body
      const enrolment = answer(
        request,
        factors.enrol(request.params.userID, {
          applicationId: body.applicationID,
          label: body.label,
          profile: body.profile as ProfileName | undefined,
          algorithm: body.algorithm?.toUpperCase() as Algorithm | undefined,
          digits: body.tokenLength,
          period: body.tokenValidity,
        }),
      )
      // Drawn before anything is stored: a URL too long for a QR code leaves no factor behind.
      const qr = await opts.draw(enrolment.otpURL)
      const created = answer(request, await factors.create(caller(request), enrolment))
      const p = enrolment.params
      return reply.code(201).send({
        type: 'Success',
        factorID: created.factorId,
        status: 'pending',
        secretKey: created.secretKey,
        otpURL: enrolment.otpURL,
        QRCode: `data:image/png;base64,${qr.toString('base64')}`,
        expiresAt: created.expiresAt,
        profile: enrolment.profile,
        algorithm: p.algorithm,
        tokenLength: p.digits,
        tokenValidity: p.period,
      })
    },
  )

  app.post<{ Params: UserParams; Body: ImportBody }>(
    '/totp/users/:userID/factors/import',
    { schema: importSchema(PROFILE_NAMES), config: { fields: importFields }, preValidation: userParam, ...once },
    async (request, reply) => {
      const b = request.body
      const factor = answer(
        request,
        await factors.importFactor(caller(request), request.params.userID, {
          source: {
            ...(b.secret === undefined ? {} : { secret: b.secret }),
            ...(b.otpURL === undefined ? {} : { otpURL: b.otpURL }),
            ...(b.applicationID === undefined ? {} : { applicationId: b.applicationID }),
            ...(b.algorithm === undefined ? {} : { algorithm: b.algorithm.toUpperCase() as Algorithm }),
            ...(b.tokenLength === undefined ? {} : { digits: b.tokenLength }),
            ...(b.tokenValidity === undefined ? {} : { period: b.tokenValidity }),
            profile: (b.profile ?? 'any') as ProfileName,
          },
          label: b.label ?? null,
          status: b.status ?? 'active',
        }),
      )
      return reply.code(201).send({ type: 'Success', factor: view(factor) })
    },
  )

  const userRoute = { config: { fields: userFields }, preValidation: userParam }

  app.get<{ Params: UserParams }>('/totp/users/:userID/factors', { schema: listSchema, ...userRoute }, async (request) => {
    const { userID } = request.params
    const found = answer(request, await factors.factors(caller(request), userID))
    return { type: 'Success', userID, factors: found.factors.map(view), recoveryCodesLeft: found.recoveryCodesLeft }
  })

  app.delete<{ Params: FactorParams }>('/totp/users/:userID/factors/:factorID', { schema: deleteFactorSchema, ...userRoute }, async (request, reply) => {
    answer(request, await factors.removeFactor(caller(request), request.params.userID, request.params.factorID))
    return reply.code(204).send()
  })

  app.delete<{ Params: UserParams }>('/totp/users/:userID', { schema: deleteUserSchema, ...userRoute }, async (request, reply) => {
    answer(request, await factors.removeUser(caller(request), request.params.userID))
    return reply.code(204).send()
  })
}

/** attemptRoutes: everything a user's code or recovery code is tried by (under their one lockout), and new recovery codes. */
function attemptRoutes(app: FastifyInstance, factors: Factors, userParam: UserHook, once: Once): void {
  const userRoute = { config: { fields: userFields }, preValidation: userParam }

  app.post<{ Params: FactorParams; Body: { token: string } }>(
    '/totp/users/:userID/factors/:factorID/activate',
    { schema: activateSchema, config: { fields: tokenFields }, preValidation: userParam },
    async (request) => {
      const { userID, factorID } = request.params
      const { activatedAt } = answer(request, await factors.activate(caller(request), userID, factorID, request.body.token))
      return { type: 'Success', factorID, status: 'active', activatedAt }
    },
  )

  app.post<{ Params: UserParams; Body: { token: string } }>(
    '/totp/users/:userID/verify',
    { schema: verifySchema, config: { fields: tokenFields }, preValidation: userParam },
    async (request) => {
      const { factorId } = answer(request, await factors.verify(caller(request), request.params.userID, request.body.token))
      return { type: 'Success', valid: true, message: 'OTP verified', factorID: factorId }
    },
  )

  app.post<{ Params: FactorParams; Body: { token: string; nextToken: string } }>(
    '/totp/users/:userID/factors/:factorID/resync',
    { schema: resyncSchema, config: { fields: resyncFields }, preValidation: userParam },
    async (request) => {
      const { userID, factorID } = request.params
      const { token, nextToken } = request.body
      const { driftSteps, driftSeconds } = answer(request, await factors.resync(caller(request), userID, factorID, token, nextToken))
      return { type: 'Success', factorID, driftSteps, driftSeconds }
    },
  )

  app.post<{ Params: UserParams }>('/totp/users/:userID/recovery-codes', { schema: recoveryCodesSchema, ...userRoute, ...once }, async (request, reply) => {
    const { codes } = answer(request, await factors.regenerateRecoveryCodes(caller(request), request.params.userID))
    return reply.code(201).send({ type: 'Success', recoveryCodes: codes })
  })

  app.post<{ Params: UserParams; Body: { code: string } }>(
    '/totp/users/:userID/recover',
    { schema: recoverSchema, config: { fields: recoverFields }, preValidation: userParam },
    async (request) => {
      const { recoveryCodesLeft } = answer(request, await factors.recover(caller(request), request.params.userID, request.body.code))
      return { type: 'Success', valid: true, recoveryCodesLeft }
    },
  )
}

type RegistrationOptionsBody = {
  userName?: string
  displayName?: string
  userVerification?: UserVerification
  residentKey?: ResidentKey
  authenticatorAttachment?: Attachment
}

/** passkeyRoutes: a passkey's registration and a sign-in with one (for a user named, or for whoever the passkey is of), each options then the browser's answer. */
function passkeyRoutes(app: FastifyInstance, passkeys: Passkeys, userParam: UserHook, once: Once): void {
  app.post<{ Params: UserParams; Body: RegistrationOptionsBody | undefined }>(
    '/totp/users/:userID/passkeys/registration/options',
    { schema: registrationOptionsSchema, config: { fields: registrationOptionsFields }, preValidation: userParam },
    async (request) => {
      const body = request.body ?? {}
      const started = answer(
        request,
        await passkeys.registrationOptions(caller(request), request.params.userID, {
          ...(body.userName === undefined ? {} : { userName: body.userName }),
          ...(body.displayName === undefined ? {} : { displayName: body.displayName }),
          userVerification: body.userVerification ?? 'preferred',
          residentKey: body.residentKey ?? 'preferred',
          ...(body.authenticatorAttachment === undefined ? {} : { attachment: body.authenticatorAttachment }),
        }),
      )
      return { type: 'Success', options: started.options, expiresAt: started.expiresAt }
    },
  )

  app.post<{ Params: UserParams; Body: { credential: RegistrationResponseJSON; label?: string } }>(
    '/totp/users/:userID/passkeys/registration',
    { schema: registerSchema, config: { fields: registerFields }, preValidation: userParam, ...once },
    async (request, reply) => {
      const { credential, label } = request.body
      const factor = answer(request, await passkeys.register(caller(request), request.params.userID, credential, label ?? null))
      return reply.code(201).send({ type: 'Success', factor: view(factor) })
    },
  )

  app.post<{ Params: UserParams; Body: { userVerification?: UserVerification } | undefined }>(
    '/totp/users/:userID/passkeys/authentication/options',
    { schema: authenticationOptionsSchema, config: { fields: authenticationOptionsFields }, preValidation: userParam },
    async (request) => {
      const uv = request.body?.userVerification ?? 'preferred'
      const started = answer(request, await passkeys.authenticationOptions(caller(request), request.params.userID, uv))
      return { type: 'Success', options: started.options, expiresAt: started.expiresAt }
    },
  )

  app.post<{ Params: UserParams; Body: { credential: AuthenticationResponseJSON } }>(
    '/totp/users/:userID/passkeys/authentication',
    { schema: authenticateSchema, config: { fields: authenticateFields }, preValidation: userParam },
    async (request) => {
      const signed = answer(request, await passkeys.authenticate(caller(request), request.params.userID, request.body.credential))
      return { type: 'Success', valid: true, factorID: signed.factorId, userVerified: signed.userVerified }
    },
  )

  // A sign-in that names no user: the passkey the browser picks tells whose it is (discoverable credentials).
  app.post<{ Body: { userVerification?: UserVerification } | undefined }>(
    '/totp/passkeys/authentication/options',
    { schema: discoverableOptionsSchema, config: { fields: discoverableOptionsFields } },
    async (request) => {
      const started = answer(request, await passkeys.discoverableOptions(caller(request), request.body?.userVerification ?? 'preferred'))
      return { type: 'Success', options: started.options, expiresAt: started.expiresAt }
    },
  )

  app.post<{ Body: { credential: AuthenticationResponseJSON } }>(
    '/totp/passkeys/authentication',
    { schema: discoverableAuthenticateSchema, config: { fields: discoverableAuthenticateFields } },
    async (request) => {
      const signed = answer(request, await passkeys.authenticateDiscoverable(caller(request), request.body.credential))
      return { type: 'Success', valid: true, userID: signed.userId, factorID: signed.factorId, userVerified: signed.userVerified }
    },
  )
}
