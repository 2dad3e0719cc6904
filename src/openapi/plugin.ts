/**
 * OpenAPI 3.1 generated from the route schemas (@fastify/swagger), served at /openapi.json,
 * with the interactive page at /docs (@fastify/swagger-ui, assets served locally).
 */
import fp from 'fastify-plugin'
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { FastifyInstance } from 'fastify'
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
  await app.register(swaggerUi, { routePrefix: '/docs', uiConfig: { docExpansion: 'list' } })
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger())
}

export default fp(openapiPlugin, { name: 'openapi', fastify: '5.x' })
