/**
 * buildAdminApp: the operators' JSON API, a Fastify instance of its own on its own listener
 * (ADMIN_LISTEN), so that it can stay on a private address while the public API faces the
 * world. Every change goes through the accounts service with the operator's token as actor
 * and the source address, which the audit trail records. It serves its own OpenAPI 3.1
 * document at /admin/v1/openapi.json.
 *
 * Errors are catalogue bodies in the list shape; expected refusals of the service (`Failure`)
 * become 404, 400 or 409 in routes.ts, and everything else is mapped here.
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import swagger from '@fastify/swagger'
import type { Metrics } from '../../metrics/metrics.ts'
import metricsRoute from '../../metrics/route.ts'
import type { Config } from '../../config/config.ts'
import type { Accounts } from '../../services/accounts.ts'
import type { Factors } from '../../services/factors.ts'
import type { Totp } from '../../services/totp.ts'
import type { ErrorCode } from '../../errors/catalogue.ts'
import { ApiError, apiError, type Problem } from '../../errors/errors.ts'
import { sendProblems } from '../../errors/plugin.ts'
import { errorTable } from '../../errors/reference.ts'
import { CursorError, UnavailableError } from '../../domain/errors.ts'
import { VERSION } from '../../version.ts'
import { createBase } from '../../http/base.ts'
import { emptyBodyIsNoFields } from '../../bodies/fields.ts'
import { adminGuard } from './auth.ts'
import totpUserRoutes, { factorImportRoutes } from './totp-users.ts'
import { serveReference } from '../../openapi/plugin.ts'
import adminRoutes, { adminOnce } from './routes.ts'
import webhookRoutes from './webhooks.ts'
import jobRoutes from './jobs.ts'
import type { Idempotency } from '../../services/idempotency.ts'
import type { Webhooks } from '../../services/webhooks.ts'
import type { Jobs } from '../../services/jobs.ts'
import { TAGS } from './schemas.ts'
import { JOBS_TAG } from './job-schemas.ts'
import operatorRoutes, { OPERATORS_TAG, type OperatorRouteOptions } from './operators.ts'
import ssoRoutes, { SSO_TAG } from './sso.ts'
import type { SingleSignOn } from '../../services/users/sso.ts'

export const ADMIN_TITLE = 'Tessera admin API'
export const ADMIN_DOCUMENT_PATH = '/admin/v1/openapi.json'

/** Admin bodies are a few fields: 64 KiB is ample. */
export const ADMIN_BODY_LIMIT = 65_536

/** The codes the admin API answers (its document's error table). */
export const ADMIN_CODES: readonly ErrorCode[] = [
  'ADMIN_TOKEN_REQUIRED',
  'ADMIN_TOKEN_INVALID',
  'ADMIN_READ_ONLY',
  'NOT_FOUND',
  'ADMIN_ROUTE_NOT_FOUND',
  'FIELD_INVALID',
  'CONFLICT',
  'LIMIT_REACHED',
  'BAD_CURSOR',
  'IDEMPOTENCY_KEY_INVALID',
  'IDEMPOTENCY_KEY_REUSED',
  'IDEMPOTENCY_KEY_BUSY',
  'IDEMPOTENCY_ANSWER_UNREADABLE',
  'MALFORMED_BODY',
  'BODY_TOO_LARGE',
  'JSON_REQUIRED',
  'CSV_REQUIRED',
  'INTERNAL_ERROR',
  'SERVICE_UNAVAILABLE',
]

const DESCRIPTION = [
  "The operators' API: accounts, keys, subscriptions, plans, usage, the audit trail, TOTP lockouts, webhooks, conversion jobs and operator invitations. It listens on `ADMIN_LISTEN` (default 127.0.0.1:3001), apart from the public API.",
  '',
  'Every call needs `Authorization: Bearer <admin token>`; tokens are created, listed and revoked with `npm run admin -- admin token …` and shown once. A `read` token may only read (GET). Every change is recorded in the audit trail with the token and the source address.',
  '',
  'Lists come as `{"items": [...], "next": cursor}`: pass `next` as `after` for the following page (null on the last).',
  '',
  '## Errors',
  '',
  'Every error body is a list, `[{"type":"Error","code":"…","message":"…"}]`, with all the problems of the request at once.',
  '',
  errorTable(ADMIN_CODES),
].join('\n')

export interface AdminAppOptions {
  readonly config: Config
  readonly accounts: Accounts
  /** Operators' view of managed-factor users, and the Renda-compatible secrets' lockouts. */
  readonly factors: Factors
  readonly totp: Totp
  /** Idempotency-Key records: the admin API's creating calls take the header. */
  readonly idempotency: Idempotency
  /** The webhooks service (none: no webhook routes). */
  readonly webhooks?: Webhooks
  /** The conversion jobs service (none: no job routes). */
  readonly jobs?: Jobs
  /** The team service and the node's mailer, for operator invitations (none: no such route). */
  readonly operators?: Omit<OperatorRouteOptions, 'config'>
  /** Single sign-on providers (none: no such routes), over the portal's sealed view of the store. */
  readonly sso?: SingleSignOn
  /** The clock (epoch ms), for the default usage range; tests move it. Give the Accounts the same one. */
  readonly now?: () => number
  /** Where logs go (default: standard output). */
  readonly logStream?: { write(line: string): void }
  /** The process's metrics, served at /metrics on this listener (none: no /metrics here). */
  readonly metrics?: Metrics
}

interface AjvError {
  keyword: string
  instancePath: string
  message?: string
  params: { missingProperty?: string; additionalProperty?: string; allowedValues?: unknown[] }
}

/** validationProblems: one FIELD_INVALID per bad field (path, query or body), named as the caller wrote it. */
export function validationProblems(errors: readonly AjvError[], context: string | undefined): Problem[] {
  const seen = new Map<string, string>()
  for (const e of errors) {
    const path = e.instancePath.split('/').filter(Boolean)
    let reason = e.message ?? 'is not valid'
    if (e.keyword === 'required' && e.params.missingProperty) {
      path.push(e.params.missingProperty)
      reason = 'is required'
    } else if (e.keyword === 'additionalProperties' && e.params.additionalProperty) {
      path.push(e.params.additionalProperty)
      reason = `is not a field of this ${context === 'body' ? 'body' : 'request'}`
    } else if (e.keyword === 'minProperties') {
      reason = 'give at least one field'
    } else if (e.keyword === 'enum' && e.params.allowedValues) {
      reason = `must be one of ${e.params.allowedValues.join(', ')}`
    }
    const field = path.join('.') || (context === 'querystring' ? 'query' : (context ?? 'request'))
    // One problem per field: a union's branches each report the same field.
    if (!seen.has(field)) seen.set(field, reason)
  }
  return [...seen].map(([field, reason]) => ({ code: 'FIELD_INVALID', params: { field, reason } }))
}

/** controlled: the name of a parameter whose text holds a control character, or null. */
function controlled(values: unknown): string | null {
  if (typeof values !== 'object' || values === null) return null
  for (const [name, value] of Object.entries(values)) {
    if (typeof value === 'string' && /[\u0000-\u001f\u007f]/.test(value)) return name
  }
  return null
}

function toApiError(error: FastifyError): ApiError | undefined {
  if (error instanceof ApiError) return error
  if (error instanceof CursorError) return apiError('BAD_CURSOR')
  if (error instanceof UnavailableError) return apiError('SERVICE_UNAVAILABLE', { what: error.dependency }, { 'retry-after': '5' })
  if (error.validation) return new ApiError(validationProblems(error.validation as AjvError[], error.validationContext))
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return apiError('BODY_TOO_LARGE', { limit: ADMIN_BODY_LIMIT })
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return apiError('JSON_REQUIRED')
  }
  const status = error.statusCode ?? 500
  if (status >= 400 && status < 500) return apiError('MALFORMED_BODY', { contentType: 'application/json' })
  return undefined
}

/** addRequestHooks: what every admin request goes through before its route: no caching, empty bodies, no control characters. */
function addRequestHooks(app: FastifyInstance): void {
  app.decorateRequest('adminToken', null)
  app.addHook('onRequest', (_request, reply, done) => {
    // Answers carry API keys (once) and customers' data: no cache may keep them.
    reply.header('cache-control', 'no-store')
    done()
  })
  // A POST with no body at all (a roll with the default grace) is an empty object, not a type error.
  emptyBodyIsNoFields(app)
  // No id or filter of this API holds a control character, and PostgreSQL refuses a NUL with
  // an error of its own (a 500): a decoded path or query parameter with one is a 400 here, first.
  app.addHook('preValidation', (request, _reply, done) => {
    const bad = controlled(request.params) ?? controlled(request.query)
    done(bad === null ? undefined : apiError('FIELD_INVALID', { field: bad, reason: 'must be text without control characters' }))
  })
}

/** setErrorHandlers: every error as catalogue problems (an unknown one as INTERNAL_ERROR, logged), an unknown route as ADMIN_ROUTE_NOT_FOUND. */
function setErrorHandlers(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    const known = toApiError(error)
    if (known) {
      if (known.statusCode >= 500) request.log.error({ err: error }, 'request failed')
      return sendProblems(reply, known.problems, known.statusCode, known.headers)
    }
    request.log.error({ err: error }, 'unhandled error')
    return sendProblems(reply, [{ code: 'INTERNAL_ERROR', params: { requestId: request.id } }], 500)
  })
  app.setNotFoundHandler((_request, reply) => sendProblems(reply, [{ code: 'ADMIN_ROUTE_NOT_FOUND' }], 404))
}

/** serveDocument registers the OpenAPI generator and serves its document and reference page, both without a token. */
async function serveDocument(app: FastifyInstance): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: ADMIN_TITLE,
        version: VERSION,
        description: DESCRIPTION,
        license: { name: 'AGPL-3.0-or-later', identifier: 'AGPL-3.0-or-later' },
      },
      // Relative: the document is served by the listener it describes, whatever address reaches it (a tunnel, a proxy).
      servers: [{ url: '/', description: 'The admin listener that serves this document (ADMIN_LISTEN)' }],
      components: {
        securitySchemes: { adminToken: { type: 'http', scheme: 'bearer', description: 'An admin token (`npm run admin -- admin token create`).' } },
      },
      security: [{ adminToken: [] }],
      tags: [...TAGS, JOBS_TAG, OPERATORS_TAG, SSO_TAG],
    },
  })
  // The document needs no token: it holds no data, only what the routes take and answer,
  // and tools (client generators, API browsers) fetch it without credentials. Every route it
  // describes needs a token.
  app.get(ADMIN_DOCUMENT_PATH, { schema: { hide: true } }, async () => app.swagger())
  // Its reference page likewise, made from it (the public API's /docs renderer).
  serveReference(app, '/admin/v1/docs', () => app.swagger() as unknown as Record<string, unknown>, {
    codes: ADMIN_CODES,
    intro: [
      'Every call needs `Authorization: Bearer <admin token>` (`npm run admin -- admin token create --name N --scope read|write`); a `read` token may only read. Lists are pages of `{"items": […], "next": cursor}`: pass `after=<next>` for the following one.',
    ],
  })
}

export async function buildAdminApp(opts: AdminAppOptions): Promise<FastifyInstance> {
  const { config, accounts } = opts
  const now = opts.now ?? Date.now
  const app = await createBase({
    config,
    name: 'admin',
    logStream: opts.logStream,
    // The operator by token id, never by token.
    who: (request) => (request.adminToken ? { adminTokenId: request.adminToken.id } : null),
    bodyLimit: ADMIN_BODY_LIMIT,
    // Not TRUST_PROXY: the audit trail records request.ip, and on a listener that may not sit
    // behind the public proxy an X-Forwarded-For header would let a caller write any address there.
    trustProxy: false,
    // Every bad field at once; unknown fields are refused, not dropped (a misspelt `stauts`
    // must not answer 200 having changed nothing).
    removeAdditional: false,
    // A path that is not a URL (bad percent-encoding) gets the catalogue's 400, not Fastify's own body.
    badPath: (reply, reason) => sendProblems(reply, [{ code: 'FIELD_INVALID', params: { field: 'path', reason: `is not a valid URL path: ${reason}` } }], 400),
  })
  // The public listener's cap and timeouts hold here too (createBase): a flood of idle connections must not lock operators out.

  addRequestHooks(app)
  setErrorHandlers(app)
  await serveDocument(app)

  await app.register(async (guarded) => {
    guarded.addHook('onRequest', adminGuard(accounts))
    await guarded.register(totpUserRoutes, { factors: opts.factors })
    await guarded.register(factorImportRoutes, { factors: opts.factors, config })
    const once = adminOnce(opts.idempotency)
    await guarded.register(adminRoutes, { accounts, totp: opts.totp, now, once })
    if (opts.webhooks !== undefined) await guarded.register(webhookRoutes, { webhooks: opts.webhooks, once })
    if (opts.jobs !== undefined) await guarded.register(jobRoutes, { config, accounts, jobs: opts.jobs })
    if (opts.operators !== undefined) await guarded.register(operatorRoutes, { config, ...opts.operators })
    if (opts.sso !== undefined) await guarded.register(ssoRoutes, { sso: opts.sso })
  })
  // Prometheus's scrape: outside the admin tokens (a scraper holds none), behind METRICS_TOKEN when set.
  if (opts.metrics !== undefined) await app.register(metricsRoute, { metrics: opts.metrics, token: config.metricsToken })
  return app
}
