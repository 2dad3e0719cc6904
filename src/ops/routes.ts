/**
 * Operational routes, without a key: liveness, and readiness naming each dependency, both
 * with the version this node runs (to see a rolling update through).
 * A node is unready (503) when an essential dependency (SQLite or PostgreSQL) is down; with
 * Redis down it stays ready but degraded, since only verifyOTP stops (it fails closed), and
 * likewise with the SMTP server down, since only the portal's emails stop.
 */
import type { FastifyInstance } from 'fastify'
import { Type } from 'typebox'
import type { Store } from '../storage/ports.ts'
import type { Mailer } from '../mail/mailer.ts'
import { VERSION } from '../version.ts'
import { SMTP_CHECK_TTL_MS, cachedCheck, storeHealth, type Dependency } from './checks.ts'

const version = Type.String({ description: 'The version of Tessera this node runs.' })
const status = Type.Object({ status: Type.String(), version }, { description: 'The process answers.', examples: [{ status: 'ok', version: '0.1.0' }] })
const readinessFields = {
  status: Type.Union([Type.Literal('ok'), Type.Literal('degraded'), Type.Literal('unavailable')]),
  version,
  checks: Type.Record(Type.String(), Type.String(), {
    description:
      'Each dependency by name: the store (`sqlite` or `postgres`), and `redis` and `smtp` when configured: `ok` or `unavailable` (the log says why).',
  }),
}
const readiness = Type.Object(readinessFields, {
  description: 'Every essential dependency answers (`ok`), or one that is not essential does not (`degraded`).',
  examples: [{ status: 'degraded', version: '0.1.0', checks: { postgres: 'ok', redis: 'unavailable' } }],
})
const unready = Type.Object(readinessFields, {
  description: 'The store does not answer: take this node out of the load balancer until it does.',
  examples: [{ status: 'unavailable', version: '0.1.0', checks: { postgres: 'unavailable', redis: 'ok' } }],
})

export interface OpsOptions {
  readonly store: Store
  /** The portal's mailer: when it has a server to ask (SMTP_URL), readyz names `smtp`. */
  readonly mailer?: Mailer | null
  /** Longest a readiness answer takes (STORE_TIMEOUT_MS): a dependency that has not answered by then is reported as it stands. */
  readonly timeoutMs: number
  /** The clock (epoch ms) of the SMTP check's cache; tests move it. */
  readonly now?: () => number
  /** True while the node drains before it closes (SHUTDOWN_DRAIN_MS): readyz answers 503 whatever the dependencies say. */
  readonly draining?: () => boolean
}

export default async function opsRoutes(app: FastifyInstance, opts: OpsOptions): Promise<void> {
  const { store, timeoutMs } = opts
  const verify = opts.mailer?.verify?.bind(opts.mailer)
  const smtp = verify === undefined ? undefined : cachedCheck(verify, { ttlMs: SMTP_CHECK_TTL_MS, now: opts.now ?? Date.now })

  app.get(
    '/healthz',
    {
      schema: { operationId: 'checkLiveness', summary: 'Liveness: the process answers', tags: ['operations'], security: [], response: { 200: status } },
    },
    async () => ({ status: 'ok', version: VERSION }),
  )

  app.get(
    '/readyz',
    {
      schema: {
        operationId: 'checkReadiness',
        summary: 'Readiness: each dependency answers',
        description:
          "503 when the store (SQLite or PostgreSQL) is down; 200 `degraded` when only Redis is down (verifyOTP then answers 503) or the SMTP server is (the portal's emails then fail). " +
          `The SMTP server is asked at most every ${SMTP_CHECK_TTL_MS / 1000} s, and the answer never waits longer than \`STORE_TIMEOUT_MS\` for a dependency.`,
        tags: ['operations'],
        security: [],
        response: { 200: readiness, 503: unready },
      },
    },
    async (request, reply) => {
      // Shutting down: out of the load balancer first, while the node still serves what it is sent.
      if (opts.draining?.() === true) return reply.code(503).send({ status: 'unavailable', version: VERSION, checks: { node: 'shutting down' } })
      const [health, mail] = await Promise.all([storeHealth(store, timeoutMs), smtp?.(timeoutMs)])
      const all: Record<string, Dependency> = mail === undefined ? health : { ...health, smtp: { ...mail, essential: false } }
      const checks: Record<string, string> = {}
      const why: Record<string, string> = {}
      let ready = true
      let degraded = false
      for (const [name, h] of Object.entries(all)) {
        // Unauthenticated: the body names the dependency, the log (not the client) gets the error.
        checks[name] = h.ok ? 'ok' : 'unavailable'
        if (!h.ok) {
          why[name] = h.detail
          if (h.essential) ready = false
          else degraded = true
        }
      }
      if (!ready || degraded) request.log.warn({ unavailable: why }, 'readiness check failed')
      return reply.code(ready ? 200 : 503).send({ status: ready ? (degraded ? 'degraded' : 'ok') : 'unavailable', version: VERSION, checks })
    },
  )
}
