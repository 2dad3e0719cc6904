/**
 * The gateway plugin gives route groups their `onRequest` guard. Every refusal is the same
 * 403, byte for byte, and takes the same path (one HMAC, one cache lookup, one log line)
 * whatever its cause, so neither the body, the headers nor the timing tell causes apart.
 */
import fp from 'fastify-plugin'
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify'
import type { Config } from '../config/config.ts'
import type { KeyGrant, Store } from '../storage/ports.ts'
import { apiError, errorBody } from '../errors/errors.ts'
import { GrantCache } from './cache.ts'
import { hashApiKey } from './keys.ts'
import type { Pepper } from '../crypto/keyed.ts'
import { authorize, identify, type Verdict } from './access.ts'
import type { Group } from './regions.ts'

export interface Caller {
  readonly keyId: string
  readonly accountId: string
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The authenticated caller, set by the gateway guard. */
    caller: Caller | null
  }
  interface FastifyInstance {
    /** guard returns the hook that lets through only callers subscribed to `group` here. */
    guard(group: Group): onRequestHookHandler
    /** guardNotServed answers 404 to known callers (403 to others) for a group this region lacks. */
    guardNotServed(group: Group): onRequestHookHandler
    grantCache: GrantCache
  }
}

export interface GatewayOptions {
  readonly config: Config
  readonly store: Store
  readonly pepper: Pepper
  readonly now: () => number
}

async function gatewayPlugin(app: FastifyInstance, opts: GatewayOptions): Promise<void> {
  const { config, store, pepper, now } = opts
  const cache = new GrantCache(config.keyCacheTtlSeconds, config.keyCacheMaxEntries)
  const unsubscribe = store.access.onChange(() => cache.clear())
  app.addHook('onClose', async () => { unsubscribe() })
  app.decorate('grantCache', cache)
  app.decorateRequest('caller', null)

  const denied = Buffer.from(errorBody([{ code: 'ACCESS_DENIED', params: { docsUrl: config.docsUrl } }]))

  async function lookup(request: FastifyRequest): Promise<KeyGrant | null> {
    const header = request.headers['x-api-key']
    const hash = hashApiKey(pepper, typeof header === 'string' ? header : '')
    const t = now()
    const cached = cache.get(hash, t)
    if (cached !== undefined) return cached
    let grant: KeyGrant | null
    try {
      grant = await store.access.findGrant(hash)
    } catch (error) {
      request.log.error({ err: error }, 'key store unavailable')
      throw apiError('SERVICE_UNAVAILABLE', { what: 'the key store' }, { 'retry-after': '5' })
    }
    cache.set(hash, grant, t)
    return grant
  }

  function admit(request: FastifyRequest, reply: FastifyReply, verdict: Verdict): boolean {
    if (!verdict.allowed) {
      request.log.info({ keyId: verdict.grant?.keyId, reason: verdict.reason }, 'access denied')
      reply.code(403).type('application/json; charset=utf-8').send(denied)
      return false
    }
    const { keyId, accountId } = verdict.grant
    // The 'request completed' log line names the caller (see the res serializer in app.ts).
    request.caller = { keyId, accountId }
    return true
  }

  app.decorate('guard', (group: Group): onRequestHookHandler => async function guard(request, reply) {
    if (!admit(request, reply, authorize(await lookup(request), config.region, group))) return reply
  })

  app.decorate('guardNotServed', (group: Group): onRequestHookHandler => async function guardNotServed(request, reply) {
    if (!admit(request, reply, identify(await lookup(request)))) return reply
    const path = request.url.split('?')[0]
    throw apiError('GROUP_NOT_IN_REGION', { group, region: config.region, baseUrl: config.euBaseUrl, path: path ?? '' })
  })
}

export default fp(gatewayPlugin, { name: 'gateway', fastify: '5.x', dependencies: ['errors'] })
