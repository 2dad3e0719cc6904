/**
 * The SQLite portal store: users, members, sessions, email tokens and recovery codes. Writes
 * go through the group commit (batch.ts); each check and its write run in one synchronous
 * step inside the write transaction (BEGIN IMMEDIATE), so no other write, of this process or
 * another, comes between them. A change with its audit event is one SAVEPOINT: both or neither.
 *
 * PortalStore is assembled from builders by concern (users, unconfirmed sign-ups, members,
 * sessions, email tokens, recovery codes) over one Part (part.ts says why not a class); each
 * check, change and event stays in the one synchronous function handed to the group commit.
 */
import type { DatabaseSync } from 'node:sqlite'
import { emailKey } from '../../domain/portal.ts'
import type { PortalStore, SessionsToEnd } from '../ports.ts'
import type { UserPatch } from '../../domain/portal.ts'
import { LastOwnerError } from '../../domain/errors.ts'
import {
  likePattern,
  toEmailToken,
  toMember,
  toMembership,
  toSession,
  toUser,
  USER_COLUMNS,
  createdOrderPage,
  pageOf,
  HOLDS_NOTHING,
  newUserValues,
} from '../rows.ts'
import type { GroupCommit } from './batch.ts'
import { part, type Part } from './part.ts'
import type { Stamps } from '../stamps.ts'
import { ssoOps } from './sso.ts'

const flag = (value: boolean) => (value ? 1 : 0)

/** portalStatements: the PortalStore's statements, prepared once. */
function portalStatements(db: DatabaseSync) {
  return {
    reseal: db.prepare('UPDATE users SET totp_secret = ? WHERE id = ? AND totp_secret = ?'),
    user: db.prepare('SELECT * FROM users WHERE id = ?'),
    userByEmail: db.prepare('SELECT * FROM users WHERE email_key = ?'),
    insertUser: db.prepare(`INSERT INTO users (id, email, email_key, password_hash, email_verified_at, status, operator, totp_secret,
      totp_enabled_at, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (email_key) DO NOTHING`),
    insertMember: db.prepare(`INSERT INTO members (account_id, user_id, role, created_at)
      SELECT a.id, u.id, ?, ? FROM accounts a, users u WHERE a.id = ? AND u.id = ?
      ON CONFLICT (account_id, user_id) DO NOTHING`),
    role: db.prepare('SELECT role FROM members WHERE account_id = ? AND user_id = ?'),
    owners: db.prepare("SELECT count(*) AS n FROM members WHERE account_id = ? AND role = 'owner'"),
    setRole: db.prepare('UPDATE members SET role = ? WHERE account_id = ? AND user_id = ?'),
    removeMember: db.prepare('DELETE FROM members WHERE account_id = ? AND user_id = ?'),
    members: db.prepare(`SELECT m.account_id, m.user_id, m.role, m.created_at, u.email FROM members m JOIN users u ON u.id = m.user_id
      WHERE m.account_id = ? ORDER BY m.created_at, m.user_id`),
    memberships: db.prepare(`SELECT m.account_id, a.name AS account_name, a.status AS account_status, m.role, m.created_at
      FROM members m JOIN accounts a ON a.id = m.account_id WHERE m.user_id = ? ORDER BY m.created_at, m.account_id`),
    insertSession: db.prepare(`INSERT INTO sessions (id_hash, user_id, created_at, expires_at, last_seen_at, two_factor_pending, ip, user_agent,
      sso_provider_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING *`),
    session: db.prepare(`SELECT s.id_hash AS s_id_hash, s.user_id AS s_user_id, s.created_at AS s_created_at, s.expires_at AS s_expires_at,
      s.last_seen_at AS s_last_seen_at, s.two_factor_pending AS s_two_factor_pending, s.ip AS s_ip, s.user_agent AS s_user_agent,
      s.sso_provider_id AS s_sso_provider_id, u.*
      FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.id_hash = ? AND s.expires_at > ?`),
    touch: db.prepare(`UPDATE sessions SET last_seen_at = ?, expires_at = max(expires_at, ?)
      WHERE id_hash = ? AND expires_at > ?`),
    complete: db.prepare(`UPDATE sessions SET two_factor_pending = 0, id_hash = coalesce(?, id_hash)
      WHERE id_hash = ? AND two_factor_pending = 1`),
    deleteSession: db.prepare('DELETE FROM sessions WHERE id_hash = ?'),
    deleteSessionsOf: db.prepare('DELETE FROM sessions WHERE user_id = ? AND id_hash IS NOT ?'),
    deleteSessionOf: db.prepare('DELETE FROM sessions WHERE user_id = ? AND id_hash = ?'),
    pruneSessions: db.prepare('DELETE FROM sessions WHERE expires_at <= ?'),
    replaceTokens: db.prepare(`DELETE FROM email_tokens WHERE used_at IS NULL AND purpose = ? AND account_id IS ?
      AND CASE WHEN ? IS NOT NULL THEN user_id = ? ELSE email = ? END`),
    insertToken: db.prepare(`INSERT INTO email_tokens (token_hash, purpose, email, user_id, account_id, role, created_at, expires_at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING *`),
    consume: db.prepare(`UPDATE email_tokens SET used_at = ?
      WHERE token_hash = ? AND purpose = ? AND used_at IS NULL AND expires_at > ? RETURNING *`),
    invites: db.prepare(`SELECT * FROM email_tokens WHERE account_id = ? AND purpose = 'invite' AND used_at IS NULL AND expires_at > ?
      ORDER BY created_at, token_hash`),
    findToken: db.prepare('SELECT * FROM email_tokens WHERE token_hash = ? AND purpose = ? AND used_at IS NULL AND expires_at > ?'),
    pendingPassword: db.prepare('UPDATE users SET password_hash = ?, updated_at = ? WHERE id = ? AND email_verified_at IS NULL'),
    unconfirmed: db.prepare(`SELECT id FROM users u WHERE email_verified_at IS NULL AND created_at <= ?
      AND NOT EXISTS (SELECT 1 FROM email_tokens t WHERE t.user_id = u.id AND t.used_at IS NULL AND t.expires_at > ?) ORDER BY created_at LIMIT 500`),
    loneAccounts: db.prepare(`SELECT m.account_id AS id FROM members m WHERE m.user_id = ?
      AND NOT EXISTS (SELECT 1 FROM members o WHERE o.account_id = m.account_id AND o.user_id <> m.user_id)
      ${HOLDS_NOTHING}`),
    purgeUser: [
      'DELETE FROM sessions WHERE user_id = ?',
      'DELETE FROM sso_requests WHERE link_user_id = ?',
      'DELETE FROM sso_identities WHERE user_id = ?',
      'DELETE FROM recovery_codes WHERE user_id = ?',
      'DELETE FROM email_tokens WHERE user_id = ?',
      'DELETE FROM members WHERE user_id = ?',
      'DELETE FROM users WHERE id = ?',
    ].map((sql) => db.prepare(sql)),
    purgeAccount: ['DELETE FROM email_tokens WHERE account_id = ?', 'DELETE FROM accounts WHERE id = ?'].map((sql) => db.prepare(sql)),
    deleteToken: db.prepare('DELETE FROM email_tokens WHERE token_hash = ?'),
    pruneTokens: db.prepare('DELETE FROM email_tokens WHERE expires_at <= ? OR used_at IS NOT NULL'),
    deleteCodes: db.prepare('DELETE FROM recovery_codes WHERE user_id = ?'),
    insertCode: db.prepare('INSERT INTO recovery_codes (user_id, code_hash) VALUES (?, ?) ON CONFLICT DO NOTHING'),
    useCode: db.prepare('UPDATE recovery_codes SET used_at = ? WHERE user_id = ? AND code_hash = ? AND used_at IS NULL'),
    codesLeft: db.prepare('SELECT count(*) AS n FROM recovery_codes WHERE user_id = ? AND used_at IS NULL'),
  }
}

/** Portal: what the PortalStore's builders share. */
type Portal = Part<ReturnType<typeof portalStatements>>

export function portalStore(db: DatabaseSync, batch: GroupCommit, stamps: Stamps): PortalStore {
  const p = part(db, batch, stamps, portalStatements(db))
  return { ...userOps(p), ...changeOps(p), ...unconfirmedOps(p), ...memberOps(p), ...sessionOps(p), ...tokenOps(p), ...recoveryOps(p), ...ssoOps(p) }
}

/** replaceCodes replaces a user's recovery codes by a new set, unused; call it inside an atomic step. */
function replaceCodes(q: Portal['q'], userId: string, codeHashes: readonly string[]): void {
  q.deleteCodes.run(userId)
  for (const hash of codeHashes) q.insertCode.run(userId, hash)
}

/** endSessions ends the sessions of a user a change names; returns how many. Call it inside an atomic step. */
function endSessions(q: Portal['q'], userId: string, sessions: SessionsToEnd): number {
  if (sessions === 'all') return Number(q.deleteSessionsOf.run(userId, null).changes)
  if ('only' in sessions) return Number(q.deleteSessionOf.run(userId, sessions.only).changes)
  return Number(q.deleteSessionsOf.run(userId, sessions.except).changes)
}

/**
 * changeOps: a change of a user's sign-in, its fields, recovery codes, sessions and events,
 * in the one synchronous function handed to the group commit: all or nothing.
 */
function changeOps({ db, q, batch, stamps, audit }: Portal): Pick<PortalStore, 'changeUser'> {
  return {
    async changeUser(id, change) {
      const { sets, values } = userSets(change.patch ?? {})
      return batch.atomic(() => {
        const row =
          change.patch === undefined
            ? q.user.get(id)
            : db.prepare(`UPDATE users SET ${[...sets, 'updated_at = ?'].join(', ')} WHERE id = ? RETURNING *`).get(...values, stamps.iso(), id)
        if (row === undefined) return null
        if (change.recoveryCodes !== undefined) replaceCodes(q, id, change.recoveryCodes)
        const sessionsEnded = change.sessions === undefined ? 0 : endSessions(q, id, change.sessions)
        for (const event of change.audits(sessionsEnded)) audit(event)
        return { user: toUser(row), sessionsEnded }
      })
    },
  }
}

/** userOps: users, each created (unless the email is taken) or changed with its event in one step. */
function userOps({
  db,
  q,
  batch,
  stamps,
  audit,
}: Portal): Pick<PortalStore, 'createUser' | 'findUserByEmail' | 'getUser' | 'updateUser' | 'resealTotpSecret' | 'listUsers'> {
  return {
    async createUser(user, event) {
      return batch.atomic(() => {
        const r = q.insertUser.run(...newUserValues(user, flag), user.createdAt)
        if (Number(r.changes) === 0) return false
        audit(event)
        return true
      })
    },
    async findUserByEmail(email) {
      const row = q.userByEmail.get(emailKey(email))
      return row ? toUser(row) : null
    },
    async getUser(id) {
      const row = q.user.get(id)
      return row ? toUser(row) : null
    },
    async updateUser(id, patch, event) {
      const { sets, values } = userSets(patch)
      return batch.atomic(() => {
        const row = db.prepare(`UPDATE users SET ${[...sets, 'updated_at = ?'].join(', ')} WHERE id = ? RETURNING *`).get(...values, stamps.iso(), id)
        if (row === undefined) return null
        if (event !== null) audit(event)
        return toUser(row)
      })
    },
    async resealTotpSecret(id, from, to) {
      const r = await batch.run(() => q.reseal.run(to, id, from))
      return Number(r.changes) > 0
    },
    async listUsers({ status, email, cursor, limit }) {
      const values: unknown[] = []
      const param = (value: unknown) => {
        values.push(value)
        return '?'
      }
      const sql = createdOrderPage('users', { cursor, limit }, param, false, () => [
        status === undefined ? null : `status = ${param(status)}`,
        // The key is lowercased already: a lowercased pattern matches any case.
        email === undefined || email === '' ? null : `email_key LIKE ${param(likePattern(emailKey(email)))} ESCAPE '\\'`,
      ])
      return pageOf(db.prepare(sql).all(...(values as (string | number)[])), limit, toUser)
    },
  }
}

/** unconfirmedOps: sign-ups not confirmed yet; a new password only while unconfirmed, and the purge of those left too long. */
function unconfirmedOps({ q, batch, stamps, audit }: Portal): Pick<PortalStore, 'setPendingPassword' | 'purgeUnconfirmed'> {
  return {
    async setPendingPassword(id, passwordHash, event) {
      return batch.atomic(() => {
        if (Number(q.pendingPassword.run(passwordHash, stamps.iso(), id).changes) === 0) return false
        audit(event)
        return true
      })
    },
    async purgeUnconfirmed(beforeIso, nowIso) {
      return batch.atomic(() => {
        const users = q.unconfirmed.all(beforeIso, nowIso).map((r) => String(r.id))
        for (const id of users) {
          const accounts = q.loneAccounts.all(id).map((r) => String(r.id))
          for (const statement of q.purgeUser) statement.run(id)
          for (const account of accounts) for (const statement of q.purgeAccount) statement.run(account)
        }
        return users.length
      })
    },
  }
}

/** memberOps: an account's members; no change leaves an account without an owner. */
function memberOps({ q, batch, stamps, audit }: Portal): Pick<PortalStore, 'addMember' | 'listMembers' | 'membershipsOf' | 'setRole' | 'removeMember'> {
  /**
   * keepsOwner throws LastOwnerError when taking `userId`'s owner role away would leave the
   * account without one. Called inside the write step, before the change.
   */
  const keepsOwner = (accountId: string, userId: string) => {
    if (q.role.get(accountId, userId)?.role === 'owner' && Number(q.owners.get(accountId)?.n) <= 1) throw new LastOwnerError()
  }

  return {
    async addMember(accountId, userId, role, event) {
      return batch.atomic(() => {
        const r = q.insertMember.run(role, stamps.iso(), accountId, userId)
        if (Number(r.changes) === 0) return false
        audit(event)
        return true
      })
    },
    async listMembers(accountId) {
      return q.members.all(accountId).map(toMember)
    },
    async membershipsOf(userId) {
      return q.memberships.all(userId).map(toMembership)
    },
    async setRole(accountId, userId, role, event) {
      return batch.atomic(() => {
        if (role !== 'owner') keepsOwner(accountId, userId)
        const r = q.setRole.run(role, accountId, userId)
        if (Number(r.changes) === 0) return false
        audit(event)
        return true
      })
    },
    async removeMember(accountId, userId, event) {
      return batch.atomic(() => {
        keepsOwner(accountId, userId)
        const r = q.removeMember.run(accountId, userId)
        if (Number(r.changes) === 0) return false
        audit(event)
        return true
      })
    },
  }
}

/** sessionOps: sign-in sessions, found by the hash of their id. */
function sessionOps({
  q,
  batch,
  stamps,
  audit,
}: Portal): Pick<PortalStore, 'createSession' | 'findSession' | 'touchSession' | 'completeTwoFactor' | 'deleteSession' | 'deleteSessionsOf' | 'pruneSessions'> {
  return {
    async createSession(session, events = []) {
      const now = stamps.iso()
      const row = await batch.atomic(() => {
        const made = q.insertSession.get(
          session.idHash,
          session.userId,
          now,
          session.expiresAt,
          now,
          flag(session.twoFactorPending),
          session.ip,
          session.userAgent,
          session.ssoProviderId ?? null,
        )!
        for (const event of events) audit(event)
        return made
      })
      return toSession(row)
    },
    async findSession(idHash, nowIso) {
      const row = q.session.get(idHash, nowIso)
      return row ? { session: toSession(row, 's_'), user: toUser(row) } : null
    },
    async touchSession(idHash, lastSeenIso, newExpiresIso) {
      const r = await batch.run(() => q.touch.run(lastSeenIso, newExpiresIso, idHash, lastSeenIso))
      return Number(r.changes) > 0
    },
    async completeTwoFactor(idHash, newIdHash, events = []) {
      return batch.atomic(() => {
        if (Number(q.complete.run(newIdHash ?? null, idHash).changes) === 0) return false
        for (const event of events) audit(event)
        return true
      })
    },
    async deleteSession(idHash) {
      return Number((await batch.run(() => q.deleteSession.run(idHash))).changes) > 0
    },
    async deleteSessionsOf(userId, exceptIdHash) {
      return Number((await batch.run(() => q.deleteSessionsOf.run(userId, exceptIdHash ?? null))).changes)
    },
    async pruneSessions(nowIso) {
      return Number((await batch.run(() => q.pruneSessions.run(nowIso))).changes)
    },
  }
}

/** tokenOps: single-use email tokens; a new one replaces the unused ones of its purpose, and is consumed once. */
function tokenOps({
  q,
  batch,
  stamps,
  audit,
}: Portal): Pick<PortalStore, 'createToken' | 'consumeToken' | 'findToken' | 'pendingInvites' | 'deleteTokens' | 'pruneTokens'> {
  return {
    async createToken(token, events = []) {
      const [userId, accountId] = [token.userId ?? null, token.accountId ?? null]
      const row = await batch.atomic(() => {
        q.replaceTokens.run(token.purpose, accountId, userId, userId, token.email)
        const made = q.insertToken.get(token.tokenHash, token.purpose, token.email, userId, accountId, token.role ?? null, stamps.iso(), token.expiresAt)!
        for (const event of events) audit(event)
        return made
      })
      return toEmailToken(row)
    },
    async consumeToken(tokenHash, purpose, nowIso) {
      const row = await batch.run(() => q.consume.get(nowIso, tokenHash, purpose, nowIso))
      return row ? toEmailToken(row) : null
    },
    async findToken(tokenHash, purpose, nowIso) {
      const row = q.findToken.get(tokenHash, purpose, nowIso)
      return row ? toEmailToken(row) : null
    },
    async pendingInvites(accountId, nowIso) {
      return q.invites.all(accountId, nowIso).map(toEmailToken)
    },
    async deleteTokens(tokenHashes, event) {
      return batch.atomic(() => {
        let deleted = 0
        for (const hash of tokenHashes) deleted += Number(q.deleteToken.run(hash).changes)
        if (deleted > 0 && event !== undefined) audit(event)
        return deleted
      })
    },
    async pruneTokens(nowIso) {
      return Number((await batch.run(() => q.pruneTokens.run(nowIso))).changes)
    },
  }
}

/** recoveryOps: a portal user's recovery codes, each used once. */
function recoveryOps({ q, batch, stamps }: Portal): Pick<PortalStore, 'setRecoveryCodes' | 'useRecoveryCode' | 'recoveryCodesLeft'> {
  return {
    async setRecoveryCodes(userId, codeHashes) {
      await batch.atomic(() => replaceCodes(q, userId, codeHashes))
    },
    async useRecoveryCode(userId, codeHash) {
      const r = await batch.run(() => q.useCode.run(stamps.iso(), userId, codeHash))
      return Number(r.changes) > 0
    },
    async recoveryCodesLeft(userId) {
      return Number(q.codesLeft.get(userId)?.n ?? 0)
    },
  }
}

/** userSets: the SET clauses and values of a patch (fields left out stay as they are). */
function userSets(patch: UserPatch): { sets: string[]; values: (string | number | null)[] } {
  const sets: string[] = []
  const values: (string | number | null)[] = []
  for (const [field, column] of Object.entries(USER_COLUMNS) as [keyof UserPatch, string][]) {
    const value = patch[field]
    if (value === undefined) continue
    sets.push(`${column} = ?`)
    values.push(typeof value === 'boolean' ? flag(value) : value)
  }
  return { sets, values }
}
