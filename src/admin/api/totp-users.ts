/**
 * The admin API's users of managed TOTP factors: list an account's users, read one user's
 * factor states and lock, clear the lock, delete the user's factors. Through the factors
 * service with the operator's token as actor (changes audited); a user of another account is
 * the same 404 as one that does not exist.
 */
import type { FastifyInstance } from 'fastify'
import { Readable } from 'node:stream'
import type { Config } from '../../config/config.ts'
import { apiError } from '../../errors/errors.ts'
import { importCsv } from '../../services/factor-import.ts'
import { isProfileName, PROFILE_NAMES, type ProfileName } from '../../totp/profiles.ts'
import type { Factors, FactorUserSummary } from '../../services/factors.ts'
import { factorView } from '../../totp/factors/view.ts'
import { context, ok } from './routes.ts'
import { DEFAULT_LIMIT } from './schemas.ts'
import type { FactorSettings, FactorSettingsPatch } from '../../domain/factors.ts'
import {
  clearTotpUserLockoutSchema,
  deleteTotpUserSchema,
  getFactorSettingsSchema,
  getTotpUserSchema,
  importFactorsSchema,
  listTotpUsersSchema,
  updateFactorSettingsSchema,
} from './totp-user-schemas.ts'

const BASE = '/admin/v1/accounts/:id/totp-users'
const SETTINGS = '/admin/v1/accounts/:id/factor-settings'

type UserParams = { id: string; userID: string }

const lock = (lockedUntil: string | null) => ({ locked: lockedUntil !== null, lockedUntil })

const userView = (u: FactorUserSummary) => ({
  userID: u.userId,
  createdAt: u.createdAt,
  activeFactors: u.active,
  pendingFactors: u.pending,
  recoveryCodesLeft: u.recoveryCodesLeft,
  ...lock(u.lockedUntil),
})

export default async function totpUserRoutes(app: FastifyInstance, opts: { factors: Factors }): Promise<void> {
  const { factors } = opts

  app.get(BASE, { schema: listTotpUsersSchema }, async (request) => {
    const { id } = request.params as { id: string }
    const q = request.query as { after?: string; limit?: number }
    const found = ok(await factors.listUsers(id, { limit: q.limit ?? DEFAULT_LIMIT, ...(q.after === undefined ? {} : { cursor: q.after }) }))
    return { items: found.items.map(userView), next: found.next }
  })

  app.get(`${BASE}/:userID`, { schema: getTotpUserSchema }, async (request) => {
    const { id, userID } = request.params as UserParams
    const user = ok(await factors.user(id, userID))
    return {
      accountId: user.accountId,
      userID: user.userId,
      factors: user.factors.map(factorView),
      recoveryCodesLeft: user.recoveryCodesLeft,
      ...lock(user.lockedUntil),
    }
  })

  app.post(`${BASE}/:userID/lockout/clear`, { schema: clearTotpUserLockoutSchema }, async (request) => {
    const { id, userID } = request.params as UserParams
    return ok(await factors.clearLockout(context(request), id, userID))
  })

  app.delete(`${BASE}/:userID`, { schema: deleteTotpUserSchema }, async (request) => {
    const { id, userID } = request.params as UserParams
    ok(await factors.deleteUser(context(request), id, userID))
    return { deleted: true, userID }
  })

  app.get(SETTINGS, { schema: getFactorSettingsSchema }, async (request) => {
    const { id } = request.params as { id: string }
    return settingsView(id, ok(await factors.settings(id)))
  })

  app.patch(SETTINGS, { schema: updateFactorSettingsSchema }, async (request) => {
    const { id } = request.params as { id: string }
    return settingsView(id, ok(await factors.updateSettings(context(request), id, request.body as FactorSettingsPatch)))
  })
}

const settingsView = (accountId: string, s: FactorSettings) => ({ accountId, ...s })

/**
 * factorImportRoutes: the bulk import, in a plugin of its own: its body is a CSV, read as it
 * streams in (no other admin route takes one), and its answer streams out a line per line.
 */
export async function factorImportRoutes(app: FastifyInstance, opts: { factors: Factors; config: Config }): Promise<void> {
  app.removeAllContentTypeParsers()
  app.addContentTypeParser(['text/csv', 'application/csv'], (_request, payload, done) => done(null, payload))
  app.addContentTypeParser('*', (_request, _payload, done) => done(apiError('CSV_REQUIRED'), undefined))

  app.post(`${BASE.replace('/totp-users', '')}/factors/import`, { schema: importFactorsSchema }, async (request, reply) => {
    const { id } = request.params as { id: string }
    const q = request.query as { applicationID?: string; profile?: string; status?: 'active' | 'pending'; from?: number }
    if (q.profile !== undefined && !isProfileName(q.profile))
      throw apiError('FIELD_INVALID', { field: 'profile', reason: `must be one of ${PROFILE_NAMES.join(', ')}` })
    if (request.body === undefined || request.body === null) throw apiError('CSV_REQUIRED')
    ok(await opts.factors.settings(id))
    const csv = await takeBody(request.body as Readable, opts.config.importMaxBytes)
    const lines = importCsv(opts.factors, context(request), id, Readable.from(csv), {
      ...(q.applicationID === undefined ? {} : { applicationId: q.applicationID }),
      profile: (q.profile ?? 'any') as ProfileName,
      status: q.status ?? 'active',
      from: q.from ?? 1,
      maxBytes: opts.config.importMaxBytes,
    })
    return reply.type('application/x-ndjson').send(Readable.from(ndjson(lines)))
  })
}

/**
 * takeBody reads the whole CSV before the import begins: REQUEST_TIMEOUT_MS bounds the time until the request's last byte, so a
 * body read line by line as the store takes each line made a large import on a slow store (10 000 lines on PostgreSQL under load, past
 * 30 s) end in the request timeout while its answer streamed. It keeps at most `maxBytes` + 1 bytes (the import reports the rest as not
 * read) and reads the rest without keeping it, so the request ends as fast as the client sends it. A body cut short imports nothing.
 */
async function takeBody(body: Readable, maxBytes: number): Promise<Buffer[]> {
  const kept: Buffer[] = []
  let size = 0
  try {
    for await (const chunk of body as AsyncIterable<Buffer>) {
      if (size > maxBytes) continue
      const part = chunk.subarray(0, maxBytes + 1 - size)
      kept.push(part)
      size += part.length
    }
  } catch {
    // The client hung up mid-upload: nothing was imported, and the answer (a 400 nobody reads) is not a server error.
    throw apiError('MALFORMED_BODY', { contentType: 'text/csv' })
  }
  return kept
}

async function* ndjson(items: AsyncIterable<unknown>): AsyncGenerator<string> {
  for await (const item of items) yield `${JSON.stringify(item)}\n`
}
