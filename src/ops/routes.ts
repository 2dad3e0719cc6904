/**
 * Operational routes, without a key: liveness, and readiness naming each dependency.
 * A node is unready (503) when an essential dependency (SQLite or PostgreSQL) is down; with
 * Redis down it stays ready but degraded, since only verifyOTP stops (it fails closed).
 */
import type { FastifyInstance } from 'fastify'
import { Type } from 'typebox'
import type { Store } from '../storage/ports.ts'

const status = Type.Object({ status: Type.String() })
const readiness = Type.Object({
  status: Type.Union([Type.Literal('ok'), Type.Literal('degraded'), Type.Literal('unavailable')]),
  checks: Type.Record(Type.String(), Type.String(), { description: 'Each dependency by name (`sqlite`, `postgres`, `redis`): `ok` or `unavailable` (the log says why).' }),
})

export default async function opsRoutes(app: FastifyInstance, opts: { store: Store }): Promise<void> {
  app.get('/healthz', {
    schema: { operationId: 'checkLiveness', summary: 'Liveness: the process answers', tags: ['operations'], security: [], response: { 200: status } },
  }, async () => ({ status: 'ok' }))

  app.get('/readyz', {
    schema: {
      operationId: 'checkReadiness',
      summary: 'Readiness: each dependency answers',
      description: '503 when the store (SQLite or PostgreSQL) is down; 200 `degraded` when only Redis is (verifyOTP then answers 503).',
      tags: ['operations'],
      security: [],
      response: { 200: readiness, 503: readiness },
    },
  }, async (request, reply) => {
    const health = await opts.store.health()
    const checks: Record<string, string> = {}
    const why: Record<string, string> = {}
    let ready = true
    let degraded = false
    for (const [name, h] of Object.entries(health)) {
      // Unauthenticated: the body names the dependency, the log (not the client) gets the error.
      checks[name] = h.ok ? 'ok' : 'unavailable'
      if (!h.ok) {
        why[name] = h.detail
        if (h.essential) ready = false
        else degraded = true
      }
    }
    if (!ready || degraded) request.log.warn({ unavailable: why }, 'readiness check failed')
    return reply.code(ready ? 200 : 503).send({ status: ready ? (degraded ? 'degraded' : 'ok') : 'unavailable', checks })
  })
}
