/** Route schemas of the admin API's webhook routes (see schemas.ts for the shared parts). */
import { IDEMPOTENCY_HEADERS, IDEMPOTENCY_REPLAY_CODES } from '../../http/idempotency.ts'
import { Type } from 'typebox'
import { EVENT_TYPES } from '../../domain/events.ts'
import { MAX_URL_LENGTH } from '../../webhooks/address.ts'
import { created, errors, id, nullable, page, paging, strict, time, whole } from './schemas.ts'

const eventType = Type.String({ enum: [...EVENT_TYPES] })

const ENDPOINT_EXAMPLE = {
  id: 'whe_4f9c2a71d0b3e865',
  url: 'https://hooks.example.com/tessera',
  eventTypes: null,
  createdAt: '2026-11-23T09:20:11.402Z',
}

export const webhookEndpoint = Type.Object(
  {
    id: Type.String(),
    url: Type.String({ description: 'Where events are POSTed.' }),
    eventTypes: nullable(Type.Array(eventType), 'The event types it receives; null: every type.'),
    createdAt: time('When the endpoint was created.'),
  },
  { examples: [ENDPOINT_EXAMPLE] },
)

const attempt = Type.Object({
  at: time('When the attempt ended.'),
  statusCode: nullable(Type.Integer(), 'The HTTP status answered; null: no answer (refused, unreachable, timed out).'),
  durationMs: Type.Integer({ description: 'How long the attempt took.' }),
  error: nullable(
    Type.String(),
    'Why it failed (`HTTP 500`, `timed out after 10000 ms`, `refused: hooks.example.com resolves to an address that is not public`); null: delivered.',
  ),
})

export const webhookDelivery = Type.Object(
  {
    id: Type.String({ description: "The event's id, sent as `webhook-id` (the same in every attempt and re-send, for the receiver to drop duplicates)." }),
    eventType,
    createdAt: time("When the event happened (the payload's `timestamp`)."),
    status: Type.String({
      enum: ['pending', 'delivered', 'failed', 'cancelled'],
      description: '`pending`: to be tried (again); `failed`: not delivered within `WEBHOOK_RETRY_SECONDS`; `cancelled`: its endpoint was deleted first.',
    }),
    nextAttemptAt: nullable(time(), 'When a pending delivery is tried next.'),
    attempts: Type.Array(attempt, { description: 'Its latest attempts (up to 20), newest first.' }),
  },
  {
    examples: [
      {
        id: 'evt_0193581c2a5f0000a1b2c3',
        eventType: 'factor.activated',
        createdAt: '2026-11-23T09:21:40.118Z',
        status: 'delivered',
        nextAttemptAt: null,
        attempts: [{ at: '2026-11-23T09:21:40.402Z', statusCode: 204, durationMs: 212, error: null }],
      },
    ],
  },
)

const webhookParams = Type.Object({ id: id('account', 'acc_01JD3Q5Z8X'), webhookID: id('webhook', 'whe_4f9c2a71d0b3e865') })

export const createWebhookSchema = {
  operationId: 'createWebhook',
  summary: 'Add a webhook endpoint to an account (its secret shown once)',
  description:
    'The URL must be `https` and its host public: loopback, private, link-local, unique-local, CGNAT, multicast and reserved addresses, the IPv6 forms of IPv4 ones, and local names (`localhost`, `.local`, `.internal`, `home.arpa`, single labels; a trailing dot changes nothing) are refused here, and at every delivery whatever the name resolves to (unless `WEBHOOK_ALLOW_PRIVATE=true`). Events are signed with the secret as Standard Webhooks says; it is shown this once.',
  tags: ['webhooks'],
  params: Type.Object({ id: id('account', 'acc_01JD3Q5Z8X') }),
  headers: IDEMPOTENCY_HEADERS,
  body: Type.Object(
    {
      url: Type.String({ minLength: 1, maxLength: MAX_URL_LENGTH, description: 'An https URL with a public host.' }),
      eventTypes: Type.Optional(
        nullable(
          Type.Array(eventType, { minItems: 1, maxItems: EVENT_TYPES.length, uniqueItems: true }),
          'The event types to send; absent or null: every type, present and future.',
        ),
      ),
    },
    { ...strict, examples: [{ url: 'https://hooks.example.com/tessera', eventTypes: ['factor.created', 'factor.deleted'] }] },
  ),
  response: {
    201: created(
      Type.Object(
        {
          ...webhookEndpoint.properties,
          secret: Type.String({ description: 'The signing secret, `whsec_` and base64, shown this once.' }),
        },
        { examples: [{ ...ENDPOINT_EXAMPLE, secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw0LqYWcqtKuk=' }] },
      ),
      'The endpoint, with its secret (once).',
    ),
    ...errors(['NOT_FOUND', 'LIMIT_REACHED', ...IDEMPOTENCY_REPLAY_CODES], { write: true, body: true }),
  },
}

export const listWebhooksSchema = {
  operationId: 'listWebhooks',
  summary: "List an account's webhook endpoints (never their secrets)",
  tags: ['webhooks'],
  params: Type.Object({ id: id('account', 'acc_01JD3Q5Z8X') }),
  response: { 200: whole(webhookEndpoint, "The account's endpoints, oldest first."), ...errors(['NOT_FOUND']) },
}

export const deleteWebhookSchema = {
  operationId: 'deleteWebhook',
  summary: 'Delete a webhook endpoint',
  description: 'It receives no further event, and its pending deliveries are cancelled.',
  tags: ['webhooks'],
  params: webhookParams,
  response: {
    200: { ...Type.Object({ deleted: Type.Literal(true) }, { examples: [{ deleted: true }] }), description: 'Deleted.' },
    ...errors(['NOT_FOUND'], { write: true }),
  },
}

export const webhookDeliveriesSchema = {
  operationId: 'listWebhookDeliveries',
  summary: "An endpoint's delivery log, newest event first",
  tags: ['webhooks'],
  params: webhookParams,
  querystring: Type.Object(paging, strict),
  response: { 200: page(webhookDelivery, 'A page of deliveries, each with its latest attempts.'), ...errors(['NOT_FOUND', 'BAD_CURSOR']) },
}

export const resendWebhookSchema = {
  operationId: 'resendWebhookDelivery',
  summary: 'Send a delivery again',
  description: 'The delivery is due at once (whatever its status), with the same `webhook-id` and a fresh retry window.',
  tags: ['webhooks'],
  params: Type.Object({ ...webhookParams.properties, deliveryID: id('delivery', 'evt_0193581c2a5f0000a1b2c3') }),
  response: {
    200: { ...Type.Object({ resent: Type.Literal(true) }, { examples: [{ resent: true }] }), description: 'Due now.' },
    ...errors(['NOT_FOUND'], { write: true }),
  },
}
