/**
 * The admin API's guard: every call needs `Authorization: Bearer <admin token>` (RFC 6750).
 * No token or an unknown one: 401 with `WWW-Authenticate`; a read token asking for a change
 * (any method but GET and HEAD): 403. Tokens are never logged; the log names the token by id.
 */
import type { FastifyRequest, onRequestHookHandler } from 'fastify'
import type { Accounts } from '../../services/accounts.ts'
import type { AdminToken } from '../../domain/accounts.ts'
import { apiError } from '../../errors/errors.ts'
import { onRequest } from '../../tracing/tracing.ts'

declare module 'fastify' {
  interface FastifyRequest {
    /** The operator's token, set by the admin guard. */
    adminToken: AdminToken | null
  }
}

export const REALM = 'Bearer realm="tessera-admin"'

const READS = new Set(['GET', 'HEAD'])

/** bearer gives the token of an `Authorization: Bearer` header, '' for a Bearer header without one, null for none. */
export function bearer(request: FastifyRequest): string | null {
  const header = request.headers.authorization
  if (typeof header !== 'string') return null
  const m = /^Bearer(?:[ \t]+(.*))?$/i.exec(header.trim())
  if (m === null) return null
  return (m[1] ?? '').trim()
}

export function adminGuard(accounts: Accounts): onRequestHookHandler {
  return async function adminGuard(request) {
    const token = bearer(request)
    if (token === null || token === '') {
      throw apiError('ADMIN_TOKEN_REQUIRED', {}, { 'www-authenticate': REALM })
    }
    const found = await accounts.authenticateAdmin(token)
    if (found === null) {
      request.log.info('admin token refused')
      throw apiError('ADMIN_TOKEN_INVALID', {}, { 'www-authenticate': `${REALM}, error="invalid_token"` })
    }
    request.adminToken = found
    onRequest(request, { 'tessera.admin_token.id': found.id })
    if (found.scope !== 'write' && !READS.has(request.method)) {
      request.log.info({ adminTokenId: found.id }, 'read-only admin token asked for a change')
      throw apiError('ADMIN_READ_ONLY', {}, { 'www-authenticate': `${REALM}, error="insufficient_scope"` })
    }
  }
}
