/**
 * The admin API's webhook routes: an account's endpoints, their delivery logs and re-sends,
 * through the webhooks service with the operator's token as actor (every change audited).
 */
import type { adminOnce } from './routes.ts'
import type { FastifyInstance } from 'fastify'
import type { Webhooks, WebhookInput } from '../../services/webhooks.ts'
import { context, ok } from './routes.ts'
import { DEFAULT_LIMIT } from './schemas.ts'
import { createWebhookSchema, deleteWebhookSchema, listWebhooksSchema, resendWebhookSchema, webhookDeliveriesSchema } from './webhook-schemas.ts'

const BASE = '/admin/v1/accounts/:id/webhooks'

export default async function webhookRoutes(app: FastifyInstance, opts: { webhooks: Webhooks; once: ReturnType<typeof adminOnce> }): Promise<void> {
  const { webhooks } = opts

  app.post(BASE, { schema: createWebhookSchema, ...opts.once }, async (request, reply) => {
    const { id } = request.params as { id: string }
    const { endpoint, secret } = ok(await webhooks.create(context(request), id, request.body as WebhookInput))
    return reply
      .code(201)
      .header('location', `/admin/v1/accounts/${id}/webhooks/${endpoint.id}`)
      .send({ ...endpoint, secret })
  })

  app.get(BASE, { schema: listWebhooksSchema }, async (request) => {
    const { id } = request.params as { id: string }
    return { items: ok(await webhooks.list(id)), next: null }
  })

  app.delete(`${BASE}/:webhookID`, { schema: deleteWebhookSchema }, async (request) => {
    const { id, webhookID } = request.params as { id: string; webhookID: string }
    return ok(await webhooks.remove(context(request), id, webhookID))
  })

  app.get(`${BASE}/:webhookID/deliveries`, { schema: webhookDeliveriesSchema }, async (request) => {
    const { id, webhookID } = request.params as { id: string; webhookID: string }
    const q = request.query as { after?: string; limit?: number }
    return ok(await webhooks.deliveries(id, webhookID, { limit: q.limit ?? DEFAULT_LIMIT, ...(q.after === undefined ? {} : { cursor: q.after }) }))
  })

  app.post(`${BASE}/:webhookID/deliveries/:deliveryID/resend`, { schema: resendWebhookSchema }, async (request) => {
    const { id, webhookID, deliveryID } = request.params as { id: string; webhookID: string; deliveryID: string }
    return ok(await webhooks.resend(context(request), id, webhookID, deliveryID))
  })
}
