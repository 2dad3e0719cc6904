/** Operational routes, without a key: liveness, readiness (the store answers). */
import type { FastifyInstance } from 'fastify'
import { Type } from 'typebox'
import type { Store } from '../storage/ports.ts'

const status = Type.Object({ status: Type.String() })
const readiness = Type.Object({ status: Type.String(), checks: Type.Record(Type.String(), Type.String()) })

export default async function opsRoutes(app: FastifyInstance, opts: { store: Store }): Promise<void> {
  app.get('/healthz', {
    schema: { summary: 'Liveness: the process answers', tags: ['operations'], security: [], response: { 200: status } },
  }, async () => ({ status: 'ok' }))

  app.get('/readyz', {
    schema: {
      summary: 'Readiness: the store answers',
      tags: ['operations'],
      security: [],
      response: { 200: readiness, 503: readiness },
    },
  }, async (request, reply) => {
    try {
      await opts.store.ping()
      return { status: 'ok', checks: { store: 'ok' } }
    } catch (error) {
      request.log.warn({ err: error }, 'readiness check failed')
      return reply.code(503).send({ status: 'unavailable', checks: { store: `unavailable (${opts.store.kind})` } })
    }
  })
}
