/**
 * GET /metrics: the registry in Prometheus's text format. On the admin listener it is open
 * (a private address), unless METRICS_TOKEN is set; on the public port it exists only when
 * METRICS_TOKEN is set, and asks for `Authorization: Bearer <METRICS_TOKEN>` (compared in
 * constant time). Hidden from the OpenAPI documents: it is for Prometheus, not API clients.
 */
import { timingSafeEqual, createHash } from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import type { Metrics } from './metrics.ts'

export interface MetricsRouteOptions {
  readonly metrics: Metrics
  /** The bearer token a scrape must present; '' for none. */
  readonly token: string
}

const digest = (value: string) => createHash('sha256').update(value).digest()

/** bearerMatches: the Authorization header carries this token (compared as digests: same length, constant time). */
export function bearerMatches(header: string | undefined, token: string): boolean {
  const m = typeof header === 'string' ? /^Bearer ([^\s]+)$/i.exec(header) : null
  return m !== null && timingSafeEqual(digest(m[1]!), digest(token))
}

export default async function metricsRoute(app: FastifyInstance, opts: MetricsRouteOptions): Promise<void> {
  const { metrics, token } = opts
  app.get('/metrics', { schema: { hide: true } }, async (request, reply) => {
    reply.header('cache-control', 'no-store')
    if (token !== '' && !bearerMatches(request.headers.authorization, token)) {
      return reply
        .code(401)
        .header('www-authenticate', 'Bearer realm="metrics"')
        .type('text/plain; charset=utf-8')
        .send('A bearer token (METRICS_TOKEN) is needed.\n')
    }
    return reply.type(metrics.registry.contentType).send(await metrics.registry.metrics())
  })
}
