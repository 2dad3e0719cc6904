/**
 * The TOTP group: HTTP in, core calls, HTTP out. Every route is behind the gateway guard,
 * and every answer carries Cache-Control: no-store (codes, secrets, or QR codes that may
 * encode them).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Caller } from '../gateway/plugin.ts'
import type { Metrics } from '../metrics/metrics.ts'
import type { Config } from '../config/config.ts'
import type { Algorithm } from '../domain/accounts.ts'
import type { OnboardingRecord } from '../domain/factors.ts'
import { ApiError, apiError } from '../errors/errors.ts'
import type { Factors } from '../services/factors.ts'
import type { Passkeys } from '../services/passkeys.ts'
import type { Idempotency } from '../services/idempotency.ts'
import type { Totp } from '../services/totp.ts'
import { currentCode, matchStep, otpauthUrl, parseSecret, toBase32, totpParams, type TotpParams } from './otp.ts'
import { CAPACITY, type Ecc } from './qr/matrix.ts'
import { parseColor } from './qr/render.ts'
import { QrDrawer } from './qr/drawer.ts'
import { pickQrOutput } from './negotiate.ts'
import { PROFILES, profileProblems, resolveProfile, type ProfileName } from './profiles.ts'
import { acceptFields } from '../bodies/fields.ts'
import { factorRoutes } from './factors/routes.ts'
import { getOtpFields, getOtpSchema, onboardFields, onboardSchema, pingSchema, qrFields, qrSchema, verifyFields, verifySchema } from './schemas.ts'

export interface TotpOptions {
  readonly config: Config
  /** Onboarding records and the secrets' lockouts. */
  readonly totp: Totp
  /** The managed factors (/totp/users/…). */
  readonly factors: Factors
  readonly passkeys: Passkeys
  readonly idempotency: Idempotency
  readonly now: () => number
  readonly metrics: Pick<Metrics, 'verified' | 'lockoutStarted'>
}

interface TotpBody {
  tokenValidity?: number
  tokenLength?: number
  algorithm?: string
}

const BLACK = [0, 0, 0, 255] as const
const WHITE = [255, 255, 255, 255] as const

type QrBody = { data: string; format?: string; size?: number; ecc?: string; margin?: number; color?: string; bgcolor?: string }
type OnboardBody = TotpBody & { userID: string; applicationID: string; profile?: ProfileName }
type GetOtpBody = TotpBody & { secret: string }
type VerifyBody = TotpBody & { secret: string; token: string }

// ping and getOTP answer synchronously (reply.send, no promise) where they can: on routes
// this cheap the promise of an async handler is a measurable share of the work (npm run bench).
const PING = Object.freeze({ type: 'Success', message: 'Ping successful' })

/** ping answers that the caller's key is let in here (the guard has run). */
function ping(_request: FastifyRequest, reply: FastifyReply): void {
  reply.send(PING)
}

/**
 * TotpHandlers holds what the TOTP routes share (the configuration, the service, the clock, the
 * QR drawer) and each route's handler. The handlers are arrow fields, made once per plugin: Fastify
 * calls them as they are, with no bind and no wrapper, so a request costs what it did as a closure.
 */
class TotpHandlers {
  readonly #config: Config
  readonly #totp: Totp
  readonly #now: () => number
  readonly #metrics: TotpOptions['metrics']
  readonly #drawer: QrDrawer
  /** The shortest secret taken, in bits and base32 characters (the SECRET_INVALID answer's parameters). */
  readonly secretLimits: { readonly bits: number; readonly chars: number }

  constructor(opts: TotpOptions, drawer: QrDrawer) {
    this.#config = opts.config
    this.#totp = opts.totp
    this.#now = opts.now
    this.#metrics = opts.metrics
    this.#drawer = drawer
    this.secretLimits = { bits: opts.config.minSecretBits, chars: Math.ceil(opts.config.minSecretBits / 5) }
  }

  /** draw gives the image of a QR code, drawn off the event loop when it is large. */
  async draw(text: string, ecc: Ecc, format: 'png' | 'svg', body: { size?: number; margin?: number; color?: string; bgcolor?: string } = {}): Promise<Buffer> {
    const drawn = await this.#drawer.draw({
      text,
      ecc,
      format,
      size: body.size,
      margin: body.margin,
      scale: this.#config.qrDefaultScale,
      color: body.color ? parseColor(body.color)! : BLACK,
      background: body.bgcolor ? parseColor(body.bgcolor)! : WHITE,
    })
    if (drawn.kind === 'too-long') throw apiError('DATA_TOO_LONG', { ecc, ...CAPACITY[ecc] })
    if (drawn.kind === 'busy') throw apiError('QR_BUSY', { seconds: 1 }, { 'retry-after': '1' })
    return Buffer.from(drawn.image.buffer, drawn.image.byteOffset, drawn.image.byteLength)
  }

  /** newParams: the parameters of a new onboarding and its secret, drawn under the parameters mark (ParamsMark). */
  #newParams(body: TotpBody): TotpParams {
    const algorithm = (body.algorithm ?? 'SHA1').toUpperCase() as Algorithm
    const digits = body.tokenLength ?? 6
    const period = body.tokenValidity ?? 30
    return totpParams(this.#totp.issueSecret(algorithm, digits, period), algorithm, digits, period)
  }

  #secretOf(input: string) {
    const secret = parseSecret(input, this.#config.minSecretBits)
    if (secret === null) throw apiError('SECRET_INVALID', this.secretLimits)
    return secret
  }

  /**
   * recordOf gives the onboarding record of a secret when the request leaves a parameter
   * out (at once from the cache, else a promise), or null when it gives them all.
   */
  #recordOf(secret: Buffer, caller: Caller, body: TotpBody): OnboardingRecord | null | Promise<OnboardingRecord | null> {
    const complete = body.algorithm !== undefined && body.tokenValidity !== undefined && body.tokenLength !== undefined
    return complete ? null : this.#totp.record(caller.accountId, secret, this.#now(), caller.unmarkedParams === true)
  }

  /**
   * paramsOf gives a secret's parameters: each from the request where it gives it, else
   * from the onboarding record of that secret here, else the default (for digits, in
   * verifyOTP, the token's length: a secret issued elsewhere, such as by Renda.io).
   */
  #paramsOf(secret: Buffer, body: TotpBody, record: OnboardingRecord | null, defaultDigits: number): TotpParams {
    return totpParams(
      secret,
      (body.algorithm?.toUpperCase() as Algorithm | undefined) ?? record?.algorithm ?? 'SHA1',
      body.tokenLength ?? record?.digits ?? defaultDigits,
      body.tokenValidity ?? record?.period ?? 30,
    )
  }

  /** generateQrCode draws any text as a QR code: an image, or a data URL in JSON (pickQrOutput). */
  generateQrCode = async (request: FastifyRequest<{ Body: QrBody }>, reply: FastifyReply) => {
    const body = request.body
    const output = pickQrOutput(body.format, request.headers.accept)
    const image = await this.draw(body.data, (body.ecc ?? 'M').toUpperCase() as Ecc, output.format, body)
    const mime = output.format === 'svg' ? 'image/svg+xml' : 'image/png'
    if (output.json) return { type: 'Success', QRCode: `data:${mime};base64,${image.toString('base64')}` }
    return reply.type(output.format === 'svg' ? 'image/svg+xml; charset=utf-8' : mime).send(image)
  }

  /** onboardUser makes a new secret, keeps its onboarding record and answers it with its URL, QR code and current code. */
  onboardUser = async (request: FastifyRequest<{ Body: OnboardBody }>) => {
    const { userID, applicationID } = request.body
    const p = this.#newParams(request.body)
    if (request.body.profile !== undefined) {
      // The schema has filled in SHA1/6/30 for parameters left out, which is every profile's default.
      const fit = resolveProfile(PROFILES[request.body.profile], { algorithm: p.algorithm, digits: p.digits, period: p.period })
      if (fit.kind === 'unsupported') throw new ApiError(profileProblems(fit))
    }
    const secretKey = toBase32(p.secret)
    const otpURL = otpauthUrl(applicationID, userID, p)
    // Drawn before anything is stored: a URL too long for a QR code leaves no record behind.
    const qrCode = await this.draw(otpURL, 'M', 'png')
    const t = this.#now()
    await this.#totp.onboard({ accountId: request.caller!.accountId, applicationId: applicationID, userId: userID, params: p }, t)
    const { otp, expiresIn } = currentCode(p, t)
    return {
      secretKey,
      otpURL,
      QRCode: `data:image/png;base64,${qrCode.toString('base64')}`,
      otp,
      token: otp,
      tokenValidity: p.period,
      tokenLength: p.digits,
      algorithm: p.algorithm,
      expiresIn,
    }
  }

  /** getOtp answers a secret's current code. Synchronous when the record is cached or not needed (see ping). */
  getOtp = (request: FastifyRequest<{ Body: GetOtpBody }>, reply: FastifyReply): void => {
    const { body } = request
    const secret = this.#secretOf(body.secret)
    const record = this.#recordOf(secret, request.caller!, body)
    if (record instanceof Promise)
      record.then(
        (r) => reply.send(this.#currentOtp(secret, body, r)),
        (error: unknown) => reply.send(error),
      )
    else reply.send(this.#currentOtp(secret, body, record))
  }

  /** The answer of getOTP (a method, not a closure per request). */
  #currentOtp(secret: Buffer, body: GetOtpBody, record: OnboardingRecord | null) {
    const p = this.#paramsOf(secret, body, record, 6)
    const { otp, expiresIn } = currentCode(p, this.#now())
    return { type: 'Success', otp, expiresIn, currentToken: otp, timeUsed: p.period - expiresIn }
  }

  /** verifyOtp checks a code against its secret, once per time step, under the secret's lockout. */
  verifyOtp = async (request: FastifyRequest<{ Body: VerifyBody }>) => {
    const { token } = request.body
    const caller = request.caller!
    const accountId = caller.accountId
    const secret = this.#secretOf(request.body.secret)
    // A cached record is used as it is: awaiting a value would still cost a turn of the microtask queue.
    const found = this.#recordOf(secret, caller, request.body)
    const p = this.#paramsOf(secret, request.body, found instanceof Promise ? await found : found, token.length)
    const key = this.#totp.lockKey(accountId, p)
    const t = this.#now()
    const match = token.length === p.digits ? matchStep(p, token, t) : null
    const outcome = await this.#totp.verify(key, match, t)
    this.#metrics.verified(outcome.kind)
    if ((outcome.kind === 'invalid' || outcome.kind === 'reused') && outcome.locks === true) this.#metrics.lockoutStarted()
    switch (outcome.kind) {
      case 'accepted':
        return { type: 'Success', valid: true, message: 'OTP verified' }
      case 'invalid':
        throw apiError('OTP_INVALID')
      case 'reused':
        throw apiError('OTP_REUSED')
      case 'locked':
        // The fingerprint (a keyed HMAC, not the secret) is what an operator gives to clear the lockout.
        request.log.info({ lockout: key, retryAfterSeconds: outcome.retryAfterSeconds }, 'TOTP secret locked')
        throw apiError('OTP_LOCKED', { seconds: outcome.retryAfterSeconds }, { 'retry-after': String(outcome.retryAfterSeconds) })
    }
  }
}

export default async function totpRoutes(app: FastifyInstance, opts: TotpOptions): Promise<void> {
  const { config } = opts

  app.addHook('onRequest', app.guard('totp'))
  acceptFields(app, config.bodyLimitBytes)

  const drawer = new QrDrawer({ workers: config.qrWorkers, queuePerWorker: config.qrQueuePerWorker })
  app.addHook('onClose', () => drawer.close())
  const handlers = new TotpHandlers(opts, drawer)
  const { secretLimits } = handlers

  app.get('/totp/ping', { schema: pingSchema }, ping)
  app.post('/totp/generateQRCode', { schema: qrSchema(config.qrMaxSizePx), config: { fields: qrFields(config.qrMaxSizePx) } }, handlers.generateQrCode)
  app.post('/totp/onboardUser', { schema: onboardSchema, config: { fields: onboardFields } }, handlers.onboardUser)
  app.post('/totp/getOTP', { schema: getOtpSchema, config: { fields: getOtpFields(secretLimits) } }, handlers.getOtp)
  app.post('/totp/verifyOTP', { schema: verifySchema, config: { fields: verifyFields(secretLimits) } }, handlers.verifyOtp)

  factorRoutes(app, { factors: opts.factors, passkeys: opts.passkeys, idempotency: opts.idempotency, draw: (text) => handlers.draw(text, 'M', 'png') })
}
