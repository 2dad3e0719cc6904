/**
 * The admin API's routes: each reads its input (validated by its schema), asks the accounts
 * service with the operator's token as actor and the source address, and turns the service's
 * expected refusals into answers: not_found → 404, invalid → 400 naming the field,
 * conflict → 409.
 */
import { idempotent } from '../../http/idempotency.ts'
import type { Idempotency } from '../../services/idempotency.ts'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { Accounts, KeyInput, PlanInput } from '../../services/accounts.ts'
import type { Totp } from '../../services/totp.ts'
import { isFailure, type Context, type Failure } from '../../services/outcome.ts'
import type { AccountStatus } from '../../domain/accounts.ts'
import type { UsageBy, UsageLine } from '../../domain/usage.ts'
import { apiError } from '../../errors/errors.ts'
import { csv } from '../../usage/csv.ts'
import {
  auditEventsSchema,
  clearLockoutSchema,
  createAccountSchema,
  createKeySchema,
  DEFAULT_LIMIT,
  DEFAULT_USAGE_DAYS,
  getAccountSchema,
  getKeySchema,
  getPlanSchema,
  listAccountsSchema,
  listKeysSchema,
  listSubscriptionsSchema,
  resetPlanSchema,
  revokeKeySchema,
  rollKeySchema,
  setPlanSchema,
  setSubscriptionSchema,
  updateAccountSchema,
  usageSchema,
} from './schemas.ts'

const V1 = '/admin/v1'

/** context: who asks (the operator's token) and from where, for the audit trail. */
export function context(request: FastifyRequest): Context {
  return { actor: { type: 'admin-token', id: request.adminToken!.id }, ip: request.ip }
}

/** refusal turns a service Failure into the catalogue's answer. */
function refusal(failure: Failure): Error {
  const reason = failure.message.replace(/\.$/, '')
  switch (failure.failure) {
    case 'not_found':
      return apiError('NOT_FOUND', { reason })
    case 'conflict':
      return apiError('CONFLICT', { reason })
    case 'limit':
      return apiError('LIMIT_REACHED', { reason })
    case 'invalid': {
      const field = failure.field ?? 'request'
      // The service's messages start with the field ("name must be…"): the catalogue's message names it already.
      const rest = reason.startsWith(`${field}: `) ? reason.slice(field.length + 2) : reason.startsWith(`${field} `) ? reason.slice(field.length + 1) : reason
      return apiError('FIELD_INVALID', { field, reason: rest })
    }
  }
}

/** ok gives the service's result, or throws its refusal. */
export function ok<T>(result: T | Failure): T {
  if (isFailure(result)) throw refusal(result)
  return result
}

const noAccount = (id: string) => apiError('NOT_FOUND', { reason: `no account ${id}` })

/** wantsCsv: does the Accept header rank text/csv above JSON (JSON wins ties and wildcards)? */
export function wantsCsv(accept: string | undefined): boolean {
  if (!accept) return false
  let csvQ = 0
  let jsonQ = 0
  for (const part of accept.split(',')) {
    const [range = '', ...params] = part
      .trim()
      .toLowerCase()
      .split(';')
      .map((s) => s.trim())
    const qParam = params.find((p) => p.startsWith('q='))
    const q = qParam === undefined ? 1 : Number(qParam.slice(2))
    if (!(q > 0)) continue
    if (range === 'text/csv') csvQ = Math.max(csvQ, q)
    else if (range === 'application/json') jsonQ = Math.max(jsonQ, q)
  }
  return csvQ > jsonQ
}

/** The CSV columns of each kind of report: the line's own, then the group and the counts. */
const CSV_COLUMNS: Record<UsageBy, readonly [string, keyof UsageLine][]> = {
  day: [
    ['day', 'day'],
    ['group', 'group'],
    ['count', 'count'],
    ['units', 'units'],
  ],
  key: [
    ['keyId', 'keyId'],
    ['group', 'group'],
    ['count', 'count'],
    ['units', 'units'],
  ],
  region: [
    ['region', 'region'],
    ['group', 'group'],
    ['count', 'count'],
    ['units', 'units'],
  ],
}

const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10)

/** AdminRouteOptions: what the routes ask (the services) and the clock of the default usage range. */
interface AdminRouteOptions {
  readonly accounts: Accounts
  readonly totp: Totp
  readonly now: () => number
  /** The hooks of a creating route that takes an Idempotency-Key (adminOnce). */
  readonly once: ReturnType<typeof idempotent>
}

/** adminOnce: an Idempotency-Key's hooks for the admin API, its keys the admin token's own. */
export const adminOnce = (idempotency: Idempotency) =>
  idempotent(
    () => idempotency,
    (request) => `admin:${request.adminToken!.id}`,
    // The admin API answers in lists: a token that keeps as many records as it may hears LIMIT_REACHED.
    (seconds) =>
      apiError(
        'LIMIT_REACHED',
        {
          reason: `this admin token keeps the most Idempotency-Key records it may (IDEMPOTENCY_KEYS_PER_ACCOUNT, IDEMPOTENCY_BYTES_PER_ACCOUNT); retry in ${seconds} seconds`,
        },
        { 'retry-after': String(seconds) },
      ),
  )

/** requireAccount answers 404 for an account that does not exist, before a read of what belongs to it. */
async function requireAccount(accounts: Accounts, id: string): Promise<void> {
  if ((await accounts.getAccount(id)) === null) throw noAccount(id)
}

/** accountRoutes: create, list, read and change (rename, suspend) accounts. */
function accountRoutes(app: FastifyInstance, { accounts, once }: AdminRouteOptions): void {
  app.post(`${V1}/accounts`, { schema: createAccountSchema, ...once }, async (request, reply) => {
    const { name } = request.body as { name: string }
    const account = ok(await accounts.createAccount(context(request), { name }))
    return reply.code(201).header('location', `${V1}/accounts/${account.id}`).send(account)
  })

  app.get(`${V1}/accounts`, { schema: listAccountsSchema }, async (request) => {
    const q = request.query as { status?: AccountStatus; name?: string; after?: string; limit?: number }
    return accounts.listAccounts({
      limit: q.limit ?? DEFAULT_LIMIT,
      ...(q.status === undefined ? {} : { status: q.status }),
      ...(q.name === undefined ? {} : { name: q.name }),
      ...(q.after === undefined ? {} : { cursor: q.after }),
    })
  })

  app.get(`${V1}/accounts/:id`, { schema: getAccountSchema }, async (request) => {
    const { id } = request.params as { id: string }
    const account = await accounts.getAccount(id)
    if (account === null) throw noAccount(id)
    return account
  })

  app.patch(`${V1}/accounts/:id`, { schema: updateAccountSchema }, async (request) => {
    const { id } = request.params as { id: string }
    return ok(await accounts.updateAccount(context(request), id, request.body as { name?: string; status?: string }))
  })
}

/** keyRoutes: an account's API keys, issued (shown once), listed, read, rolled and revoked. */
function keyRoutes(app: FastifyInstance, { accounts, once }: AdminRouteOptions): void {
  app.post(`${V1}/accounts/:id/keys`, { schema: createKeySchema, ...once }, async (request, reply) => {
    const { id } = request.params as { id: string }
    const { key, apiKey } = ok(await accounts.issueKey(context(request), id, request.body as KeyInput))
    return reply
      .code(201)
      .header('location', `${V1}/keys/${key.id}`)
      .send({ ...key, apiKey })
  })

  app.get(`${V1}/accounts/:id/keys`, { schema: listKeysSchema }, async (request) => {
    const { id } = request.params as { id: string }
    await requireAccount(accounts, id)
    return { items: await accounts.listKeys(id), next: null }
  })

  app.get(`${V1}/keys/:id`, { schema: getKeySchema }, async (request) => {
    const { id } = request.params as { id: string }
    const key = await accounts.getKey(id)
    if (key === null) throw apiError('NOT_FOUND', { reason: `no key ${id}` })
    return key
  })

  app.post(`${V1}/keys/:id/roll`, { schema: rollKeySchema, ...once }, async (request, reply) => {
    const { id } = request.params as { id: string }
    const { key, apiKey, old } = ok(await accounts.rollKey(context(request), id, request.body as { graceSeconds?: number; name?: string }))
    return reply
      .code(201)
      .header('location', `${V1}/keys/${key.id}`)
      .send({ ...key, apiKey, old })
  })

  app.delete(`${V1}/keys/:id`, { schema: revokeKeySchema }, async (request) => {
    const { id } = request.params as { id: string }
    return ok(await accounts.revokeKey(context(request), id))
  })
}

/** subscriptionRoutes: an account's region × group subscriptions, listed and set. */
function subscriptionRoutes(app: FastifyInstance, { accounts }: AdminRouteOptions): void {
  app.get(`${V1}/accounts/:id/subscriptions`, { schema: listSubscriptionsSchema }, async (request) => {
    const { id } = request.params as { id: string }
    await requireAccount(accounts, id)
    return { items: await accounts.listSubscriptions(id), next: null }
  })

  app.put(`${V1}/accounts/:id/subscriptions/:region/:group`, { schema: setSubscriptionSchema }, async (request) => {
    const { id, region, group } = request.params as { id: string; region: string; group: string }
    const { status } = request.body as { status: string }
    return ok(await accounts.setSubscription(context(request), id, region, group, status))
  })
}

/** planRoutes: an account's plan, read, set (its own) and reset (the default). */
function planRoutes(app: FastifyInstance, { accounts }: AdminRouteOptions): void {
  app.get(`${V1}/accounts/:id/plan`, { schema: getPlanSchema }, async (request) => {
    const { id } = request.params as { id: string }
    const plan = await accounts.getPlan(id)
    if (plan === null) throw noAccount(id)
    return plan
  })

  app.put(`${V1}/accounts/:id/plan`, { schema: setPlanSchema }, async (request) => {
    const { id } = request.params as { id: string }
    return { plan: ok(await accounts.setPlan(context(request), id, request.body as PlanInput)), own: true }
  })

  app.delete(`${V1}/accounts/:id/plan`, { schema: resetPlanSchema }, async (request) => {
    const { id } = request.params as { id: string }
    return { plan: ok(await accounts.resetPlan(context(request), id)), own: false }
  })
}

/** usageRoutes: an account's usage report, as JSON or (when the Accept header prefers it) CSV. */
function usageRoutes(app: FastifyInstance, { accounts, now }: AdminRouteOptions): void {
  app.get(`${V1}/accounts/:id/usage`, { schema: usageSchema }, async (request, reply) => {
    const { id } = request.params as { id: string }
    const q = request.query as { from?: string; to?: string; by?: UsageBy }
    const by = q.by ?? 'day'
    const to = q.to ?? dayOf(now())
    // Without `from`: the DEFAULT_USAGE_DAYS days that end with `to` (a `to` the service will refuse keeps its own error).
    const toMs = Date.parse(to)
    const from = q.from ?? (Number.isNaN(toMs) ? to : dayOf(toMs - (DEFAULT_USAGE_DAYS - 1) * 86_400_000))
    const items = ok(await accounts.usage(id, from, to, by))
    if (wantsCsv(request.headers.accept)) {
      const columns = CSV_COLUMNS[by]
      return reply
        .type('text/csv; charset=utf-8')
        .header('content-disposition', `attachment; filename="usage-${id.replace(/[^\w-]/g, '_')}-${from}-${to}-by-${by}.csv"`)
        .send(
          csv(
            columns.map(([title]) => title),
            items.map((line) => columns.map(([, field]) => line[field])),
          ),
        )
    }
    return reply.type('application/json; charset=utf-8').send({ accountId: id, from, to, by, items })
  })
}

/** auditRoutes: the trail, a read and nothing else. No route changes or deletes an event. */
function auditRoutes(app: FastifyInstance, { accounts }: AdminRouteOptions): void {
  app.get(`${V1}/audit-events`, { schema: auditEventsSchema }, async (request) => {
    const q = request.query as { account?: string; actor?: string; action?: string; after?: string; limit?: number }
    return accounts.auditEvents({
      limit: q.limit ?? DEFAULT_LIMIT,
      ...(q.account === undefined ? {} : { accountId: q.account }),
      ...(q.actor === undefined ? {} : { actor: q.actor }),
      ...(q.action === undefined ? {} : { action: q.action }),
      ...(q.after === undefined ? {} : { cursor: q.after }),
    })
  })
}

/** lockoutRoutes: clear the lockout of a Renda-compatible TOTP secret. */
function lockoutRoutes(app: FastifyInstance, { totp }: AdminRouteOptions): void {
  app.post(`${V1}/accounts/:id/totp-lockouts/clear`, { schema: clearLockoutSchema }, async (request) => {
    const { id } = request.params as { id: string }
    return ok(await totp.clearLockout(context(request), id, request.body as { secret?: string; fingerprint?: string; period?: number }))
  })
}

/** adminRoutes registers every resource's routes, in the order of the OpenAPI document. */
export default async function adminRoutes(app: FastifyInstance, opts: AdminRouteOptions): Promise<void> {
  accountRoutes(app, opts)
  keyRoutes(app, opts)
  subscriptionRoutes(app, opts)
  planRoutes(app, opts)
  usageRoutes(app, opts)
  auditRoutes(app, opts)
  lockoutRoutes(app, opts)
}
