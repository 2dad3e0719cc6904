/**
 * The admin API's users of managed TOTP factors: list an account's users, read one user's
 * factor states and lock, clear the lock, delete the user's factors. Through the factors
 * service with the operator's token as actor (changes audited); a user of another account is
 * the same 404 as one that does not exist.
 */
import type { FastifyInstance } from 'fastify'
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
