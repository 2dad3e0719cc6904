/**
 * The Idempotency-Key header on the routes that create something, for both listeners: the
 * header read (draft-ietf-httpapi-idempotency-key-header: an sf-string, its quotes taken off),
 * and route hooks that hand the request to the Idempotency service before the handler (a
 * replay is answered here, the handler never runs) and its answer after (kept unless it is a
 * fault). A route takes them with `...idempotent(service, ownerOf)` in its options.
 */
import type { FastifyReply, FastifyRequest, onSendHookHandler, preHandlerAsyncHookHandler } from 'fastify'
import { Type } from 'typebox'
import type { ErrorCode } from '../errors/catalogue.ts'
import { apiError } from '../errors/errors.ts'
import { fingerprint, type Idempotency } from '../services/idempotency.ts'

/** idempotencyKey: the Idempotency-Key header (an sf-string's quotes taken off), null when absent. */
export function idempotencyKey(request: FastifyRequest): string | null {
  const raw = request.headers['idempotency-key']
  if (raw === undefined) return null
  if (Array.isArray(raw)) throw apiError('IDEMPOTENCY_KEY_INVALID')
  let key = raw.trim()
  if (key.length >= 2 && key.startsWith('"') && key.endsWith('"')) key = key.slice(1, -1)
  if (!/^[\x20-\x7e]{1,255}$/.test(key)) throw apiError('IDEMPOTENCY_KEY_INVALID')
  return key
}

/** The request's key under way: its answer is kept when it is sent. */
const underWay = new WeakMap<FastifyRequest, { readonly owner: string; readonly key: string; readonly print: string }>()

/**
 * idempotent: the hooks of a route that takes an Idempotency-Key. `ownerOf` names whose keys
 * they are (an account; an admin token): one owner's key never meets another's.
 */
export function idempotent(
  service: () => Idempotency,
  ownerOf: (request: FastifyRequest) => string,
  full: (seconds: number) => Error = publicFull,
): { preHandler: preHandlerAsyncHookHandler; onSend: onSendHookHandler } {
  return {
    async preHandler(request: FastifyRequest, reply: FastifyReply) {
      const key = idempotencyKey(request)
      if (key === null) return
      const owner = ownerOf(request)
      const print = fingerprint(request.method, request.url, request.body)
      const begun = await service().begin(owner, key, print)
      switch (begun.kind) {
        case 'started':
          underWay.set(request, { owner, key, print })
          return
        case 'replay': {
          const { answer } = begun
          reply.code(answer.status).type(answer.contentType).header('idempotent-replayed', 'true')
          if (answer.location !== undefined) reply.header('location', answer.location)
          // Sent as it was serialised the first time: the schema's serializer must not run on it twice.
          return reply.serializer((payload: unknown) => payload as string).send(answer.body)
        }
        case 'mismatch':
          throw apiError('IDEMPOTENCY_KEY_REUSED', { what: '' })
        case 'busy':
          throw apiError('IDEMPOTENCY_KEY_BUSY')
        case 'full':
          throw full(begun.seconds)
        case 'unreadable':
          // One line, the reason only (it names no secret): neither the sealed answer nor the key.
          request.log.error({ owner, reason: begun.reason }, 'kept Idempotency-Key answer does not open')
          throw apiError('IDEMPOTENCY_ANSWER_UNREADABLE')
      }
    },
    async onSend(request: FastifyRequest, reply: FastifyReply, payload: unknown) {
      const started = underWay.get(request)
      if (started === undefined) return payload
      underWay.delete(request)
      const { owner, key, print } = started
      // A fault is not an answer to keep: the client's retry should run again. So is a body that is not text (none of these routes sends one).
      if (reply.statusCode >= 500 || typeof payload !== 'string') {
        await service().abandon(owner, key, print)
        return payload
      }
      const location = reply.getHeader('location')
      await service().finish(owner, key, print, {
        status: reply.statusCode,
        contentType: String(reply.getHeader('content-type') ?? 'application/json; charset=utf-8'),
        body: payload,
        ...(typeof location === 'string' ? { location } : {}),
      })
      return payload
    },
  }
}

/** publicFull: the public API's refusal of a new key when the account keeps as many records as it may. */
const publicFull = (seconds: number): Error => apiError('IDEMPOTENCY_KEYS_PER_ACCOUNT', { seconds }, { 'retry-after': String(seconds) })

/** The header as the route schemas document it (the OpenAPI document of each listener). */
export const IDEMPOTENCY_HEADERS = Type.Object({
  'idempotency-key': Type.Optional(
    Type.String({
      maxLength: 255,
      description:
        'draft-ietf-httpapi-idempotency-key-header: a unique key per request (a UUID). The same key and request within 24 hours answer as the first did (`Idempotent-Replayed: true`), once however many arrive at once; the same key with another request is a 422.',
    }),
  ),
})

/** The refusals a route that takes the header may answer, on either listener (each answers a full owner its own way). */
export const IDEMPOTENCY_REPLAY_CODES = [
  'IDEMPOTENCY_KEY_INVALID',
  'IDEMPOTENCY_KEY_REUSED',
  'IDEMPOTENCY_KEY_BUSY',
  'IDEMPOTENCY_ANSWER_UNREADABLE',
] as const satisfies readonly ErrorCode[]

/** The refusals a public route that takes the header may answer. */
export const IDEMPOTENCY_CODES = [...IDEMPOTENCY_REPLAY_CODES, 'IDEMPOTENCY_KEYS_PER_ACCOUNT'] as const satisfies readonly ErrorCode[]
