/**
 * OpenAPI 3.1 generated from the route schemas (@fastify/swagger), served at /openapi.json,
 * and the reference page made from it at /docs (reference.ts).
 */
import fp from 'fastify-plugin'
import swagger from '@fastify/swagger'
import type { FastifyInstance, FastifyReply } from 'fastify'
import { REFERENCE_CSS, REFERENCE_JS, renderReference } from './reference.ts'
import { ICON_SVG } from '../http/icon.ts'
import type { Config } from '../config/config.ts'
import { ERROR_SHAPES, errorTable } from '../errors/reference.ts'

export const API_TITLE = 'Tessera: TOTP and PDF conversion API'

/**
 * DESCRIPTION carries the whole error reference: the readers of /docs have the service, not
 * the repository. Codes of no documented operation (an unknown route, the conversion group
 * outside `eu`) are only here.
 */
const DESCRIPTION = [
  'Every `/totp/*` and `/converter/*` call needs a key in the `x-api-key` header.',
  '',
  '## Errors',
  '',
  ERROR_SHAPES,
  '',
  errorTable(),
].join('\n')

async function openapiPlugin(app: FastifyInstance, opts: { config: Config; version: string }): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: API_TITLE,
        version: opts.version,
        description: DESCRIPTION,
        license: { name: 'AGPL-3.0-or-later', identifier: 'AGPL-3.0-or-later' },
      },
      servers: [{ url: opts.config.publicBaseUrl, description: `region ${opts.config.region}` }],
      components: {
        securitySchemes: { apiKey: { type: 'apiKey', in: 'header', name: 'x-api-key' } },
      },
      security: [{ apiKey: [] }],
      tags: [
        { name: 'totp', description: 'TOTP (RFC 6238) secrets, codes and QR codes' },
        { name: 'converter', description: 'PDF to PNG and to PostScript (region eu only)' },
        { name: 'operations', description: 'Health and documentation, no key needed' },
      ],
    },
  })
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger())
  serveReference(app, '/docs', () => app.swagger() as unknown as Record<string, unknown>, {
    intro: [
      'Every `/totp/*` and `/converter/*` call needs a key in the `x-api-key` header. Errors come as `[{"type":"Error","code":…,"message":…}]` (a problem with the request), or as `{"message":…}` (the gateway: 403, 404, 429); the table at the end lists every code.',
    ],
  })
}

export default fp(openapiPlugin, { name: 'openapi', fastify: '5.x' })

/** The reference page's headers: nothing loads or runs but its own stylesheet and filter script, no framing. */
export function referenceHeaders(reply: FastifyReply): FastifyReply {
  return reply.headers({
    'content-security-policy':
      "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    'x-content-type-options': 'nosniff',
    'x-frame-options': 'DENY',
    'referrer-policy': 'no-referrer',
    'cache-control': 'no-cache',
  })
}

/**
 * serveReference serves the reference page of a document at `path` (made once, on first
 * request: the document is complete only once every route is registered) and its stylesheet.
 */
export function serveReference(
  app: FastifyInstance,
  path: string,
  doc: () => Record<string, unknown>,
  opts: { intro: readonly string[]; codes?: Parameters<typeof renderReference>[1]['codes'] },
): void {
  let page: string | undefined
  app.get(path, { schema: { hide: true } }, async (_request, reply) => {
    const here = path.split('/').pop()
    page ??= renderReference(doc(), { ...opts, stylesheet: `${here}/reference.css`, script: `${here}/reference.js`, icon: `${here}/icon.svg` })
    return referenceHeaders(reply).type('text/html; charset=utf-8').send(page)
  })
  app.get(`${path}/reference.css`, { schema: { hide: true } }, async (_request, reply) =>
    referenceHeaders(reply).type('text/css; charset=utf-8').send(REFERENCE_CSS),
  )
  app.get(`${path}/icon.svg`, { schema: { hide: true } }, async (_request, reply) =>
    referenceHeaders(reply).type('image/svg+xml').header('cache-control', 'public, max-age=86400').send(ICON_SVG),
  )
  app.get(`${path}/reference.js`, { schema: { hide: true } }, async (_request, reply) =>
    referenceHeaders(reply).type('text/javascript; charset=utf-8').send(REFERENCE_JS),
  )
}
