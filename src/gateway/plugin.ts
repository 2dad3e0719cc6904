/**
 * The gateway plugin gives route groups their `onRequest` guard. Every refusal is the same
 * 403, byte for byte, and takes the same path (one cache lookup, or on a miss one HMAC and
 * one store lookup; one log line) whatever its cause, so neither the body, the headers nor
 * the timing tell causes apart. A known key's refusal is also counted for its account (a map
 * increment in the usage recorder, for the portal's overview), which the answer does not show.
 *
 * The cache is keyed by the presented key itself, in process memory only: a hit then costs
 * a map lookup instead of an HMAC (the hot path of every call). The store holds only HMACs,
 * and keys are never logged.
 */
import fp from 'fastify-plugin'
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify'
import type { Config } from '../config/config.ts'
import type { KeyGrant } from '../domain/accounts.ts'
import type { Store } from '../storage/ports.ts'
import { apiError, errorBody } from '../errors/errors.ts'
import { GrantCache } from './cache.ts'
import { hashApiKey } from './keys.ts'
import type { Pepper } from '../crypto/keyed.ts'
import { authorize, denial, subscriptionKey, type DenialReason } from './access.ts'
import type { Metrics, RefusalCause } from '../metrics/metrics.ts'
import type { Group } from '../domain/regions.ts'
import type { Limits } from '../usage/limits.ts'
import { onRequest, tracingOn } from '../tracing/tracing.ts'

export interface Caller {
  readonly keyId: string
  readonly accountId: string
  /** The account has onboarding records from before the parameters mark (KeyGrant.unmarkedParams). */
  readonly unmarkedParams?: boolean
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The authenticated caller, set by the gateway guard. */
    caller: Caller | null
  }
  interface FastifyInstance {
    /** guard returns the hook that lets through only callers subscribed to `group` here. */
    /** With `free`, an admitted call costs no quota units (it is counted and throttled all the same): reading a job's status or result. */
    guard(group: Group, options?: { readonly free?: boolean }): onRequestHookHandler
    /** guardNotServed answers 404 to known callers (403 to others) for a group this region lacks. */
    guardNotServed(group: Group): onRequestHookHandler
  }
}

export interface GatewayOptions {
  readonly config: Config
  readonly store: Store
  readonly pepper: Pepper
  readonly now: () => number
  /** The account's plan, applied to every call the gateway lets through. */
  readonly limits: Limits
  readonly metrics: Metrics
}

/** The metrics' name of each denial reason ('unknown' becomes 'missing' when no key was sent). */
const CAUSES: Readonly<Record<DenialReason, RefusalCause>> = {
  'unknown key': 'unknown',
  'revoked key': 'revoked',
  'expired key': 'expired',
  'account suspended': 'suspended',
  'not subscribed': 'not subscribed',
  'out of scope': 'out of scope',
}

/** Keys longer than this are not cached (no real key is): a flood of huge headers cannot fill memory. */
const CACHEABLE = 256

type Done = (error?: Error) => void

/** Decide is a guard's verdict on a grant; `context` is what the guard was made for (its group). */
type Decide<T> = (gateway: Gateway, request: FastifyRequest, reply: FastifyReply, done: Done, grant: KeyGrant | null, context: T) => void

/**
 * Gateway holds the guards' state, made once per plugin: the grant cache and the refusal's
 * bytes, with the options. Its fields are read by the module's decide functions, which the
 * guards pass by reference: a request allocates nothing more than it did as closures.
 */
class Gateway {
  readonly config: Config
  readonly now: () => number
  readonly limits: Limits
  readonly metrics: Metrics
  readonly #store: Store
  readonly #pepper: Pepper
  readonly cache: GrantCache
  /** The one 403 body every refusal sends. */
  readonly #denied: Buffer

  constructor(opts: GatewayOptions) {
    this.config = opts.config
    this.now = opts.now
    this.limits = opts.limits
    this.metrics = opts.metrics
    this.#store = opts.store
    this.#pepper = opts.pepper
    this.cache = new GrantCache(opts.config.keyCacheTtlSeconds, opts.config.keyCacheMaxEntries)
    this.#denied = Buffer.from(errorBody([{ code: 'ACCESS_DENIED', params: { docsUrl: opts.config.docsUrl } }]))
  }

  /** fetchGrant asks the store for a key's grant (by its HMAC) and caches it, unless the cache was cleared meanwhile. */
  async fetchGrant(request: FastifyRequest, presented: string, t: number): Promise<KeyGrant | null> {
    const generation = this.cache.generation
    let grant: KeyGrant | null
    try {
      grant = await this.#store.access.findGrant(hashApiKey(this.#pepper, presented))
    } catch (error) {
      request.log.error({ err: error }, 'key store unavailable')
      throw apiError('SERVICE_UNAVAILABLE', { what: 'the key store' }, { 'retry-after': '5' })
    }
    if (presented.length <= CACHEABLE) this.cache.set(presented, grant, t, generation)
    return grant
  }

  /**
   * withGrant calls `decide` with the caller's grant: at once on a cache hit (the hot path
   * of every call: no closure, no promise, no allocation), after the store otherwise.
   */
  withGrant<T>(request: FastifyRequest, reply: FastifyReply, done: Done, context: T, decide: Decide<T>): void {
    const header = request.headers['x-api-key']
    const presented = typeof header === 'string' ? header : ''
    const t = this.now()
    const cached = this.cache.get(presented, t)
    this.metrics.keyCache(cached !== undefined)
    if (cached !== undefined) {
      decide(this, request, reply, done, cached, context)
      return
    }
    this.fetchGrant(request, presented, t).then((grant) => decide(this, request, reply, done, grant, context), done)
  }

  /** admit lets the caller in (request.caller) or sends the one refusal; either way the answer is not cached. */
  admit(request: FastifyRequest, reply: FastifyReply, grant: KeyGrant | null, reason: DenialReason | null, group: Group): grant is KeyGrant {
    // Guarded answers carry codes, secrets or documents: no cache may keep them (refusals alike, so headers match).
    reply.header('cache-control', 'no-store')
    if (reason !== null) {
      request.log.info({ keyId: grant?.keyId, reason }, 'access denied')
      const cause = reason === 'unknown key' && typeof request.headers['x-api-key'] !== 'string' ? 'missing' : CAUSES[reason]
      this.metrics.refused(cause)
      // A known key's refusal is its account's to see (the portal's overview); an unknown key belongs to no one.
      if (grant !== null && cause !== 'unknown' && cause !== 'missing') this.limits.refused(grant, group, cause)
      reply.code(403).type('application/json; charset=utf-8').send(this.#denied)
      return false
    }
    // The 'request completed' log line names the caller (see the res serializer in app.ts), and so does its span, by id.
    request.caller = grant
    if (tracingOn()) onRequest(request, { 'tessera.account.id': grant?.accountId, 'tessera.key.id': grant?.keyId })
    return true
  }
}

interface Guarded {
  readonly group: Group
  readonly subscription: string
  readonly free: boolean
}

/** decideGuarded: a caller subscribed to the group here goes on to its plan's limits. */
function decideGuarded(gw: Gateway, request: FastifyRequest, reply: FastifyReply, done: Done, grant: KeyGrant | null, g: Guarded): void {
  if (gw.admit(request, reply, grant, authorize(grant, g.subscription, gw.config.region, g.group, gw.now()), g.group))
    gw.limits.admit(grant, g.group, reply, done, g.free)
}

/** decideNotServed: a known caller learns that the group is not served in this region (and where it is). */
function decideNotServed(gw: Gateway, request: FastifyRequest, reply: FastifyReply, done: Done, grant: KeyGrant | null, group: Group): void {
  if (!gw.admit(request, reply, grant, denial(grant, gw.now()), group)) return
  const { config } = gw
  const path = request.url.split('?')[0] ?? ''
  // Without EU_BASE_URL this node knows no eu URL: naming its own would send the client back here.
  const where = config.euBaseUrl === '' ? '' : ` Call ${config.euBaseUrl}${path} instead.`
  done(apiError('GROUP_NOT_IN_REGION', { group, region: config.region, where }))
}

async function gatewayPlugin(app: FastifyInstance, opts: GatewayOptions): Promise<void> {
  const { config, store } = opts
  const gateway = new Gateway(opts)
  const unsubscribe = store.access.onChange(() => gateway.cache.clear())
  app.addHook('onClose', async () => {
    unsubscribe()
  })
  app.decorateRequest('caller', null)

  // Callback-style hooks: a cache hit decides synchronously, with no promise in the way.
  // The plan applies only once the caller is known: a refused key counts against no one.
  app.decorate('guard', (group: Group, options: { readonly free?: boolean } = {}): onRequestHookHandler => {
    const guarded: Guarded = { group, subscription: subscriptionKey(config.region, group), free: options.free === true }
    return function guard(request, reply, done) {
      gateway.withGrant(request, reply, done, guarded, decideGuarded)
    }
  })

  app.decorate(
    'guardNotServed',
    (group: Group): onRequestHookHandler =>
      function guardNotServed(request, reply, done) {
        gateway.withGrant(request, reply, done, group, decideNotServed)
      },
  )
}

export default fp(gatewayPlugin, { name: 'gateway', fastify: '5.x', dependencies: ['errors'] })
