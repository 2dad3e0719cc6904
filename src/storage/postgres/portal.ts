/**
 * The PostgreSQL portal store: users, members, sessions, email tokens and recovery codes.
 * As in accounts.ts, every write is one statement: a change and its audit event commit
 * together, and every single-use or limit rule is decided by the statement's own row locks
 * (READ COMMITTED re-checks a locked row's conditions on its committed version), never by a
 * read and a write in two round trips. The one exception is changeUser, several tables'
 * rows and events whose drafts wait for a count: one transaction, the user's row locked first.
 *
 * PortalStore is assembled from builders by concern (users, unconfirmed sign-ups, members,
 * sessions, email tokens, recovery codes) over one Part (part.ts says why not a class); each
 * keeps its change and its event in one statement.
 */
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
import { auditInsert, type Part } from './part.ts'
import { ssoOps } from './sso.ts'

/**
 * OWNERS locks the account's owners, in one order (no deadlock between two changes), before
 * a change that could take an owner away. A row another change holds is read again once that
 * change commits: an owner demoted or removed meanwhile is no longer counted, so of two
 * owners demoted at once the second finds one owner left and changes nothing. (An owner
 * added meanwhile is not counted either: a refusal then errs on the side of keeping owners.)
 */
const OWNERS = `owners AS (SELECT user_id FROM members WHERE account_id = $1 AND role = 'owner' ORDER BY user_id FOR UPDATE)`
/** KEEPS_OWNER: the member $2 is not an owner (now), or is not the last. */
const KEEPS_OWNER = '(NOT EXISTS (SELECT 1 FROM owners o WHERE o.user_id = $2) OR (SELECT count(*) FROM owners) > 1)'
/** OUTCOME: whether the change was made, and whether $2 is the account's last owner (why it was refused, if it was). */
const OUTCOME = (change: string) => `SELECT (SELECT count(*) FROM ${change})::int AS changed,
  (EXISTS (SELECT 1 FROM owners o WHERE o.user_id = $2) AND (SELECT count(*) FROM owners) <= 1) AS last_owner`

/** memberChange reads OUTCOME: true when changed, LastOwnerError when refused for the last owner, false when no such member. */
function memberChange(row: Record<string, unknown> | undefined, demotes: boolean): boolean {
  if (Number(row?.changed) > 0) return true
  if (demotes && row?.last_owner === true) throw new LastOwnerError()
  return false
}

/**
 * SET_CODES replaces user $1's recovery codes by the set $2, unused. One statement: the codes
 * not in the new set go, the new set is there unused. The two parts touch different rows (a
 * CTE and the main statement see one snapshot).
 */
const SET_CODES = `
  WITH d AS (DELETE FROM recovery_codes WHERE user_id = $1 AND code_hash <> ALL ($2::text[]))
  INSERT INTO recovery_codes (user_id, code_hash, used_at) SELECT DISTINCT $1::text, h, NULL::timestamptz FROM unnest($2::text[]) AS h
  ON CONFLICT (user_id, code_hash) DO UPDATE SET used_at = NULL`

/** END_SESSIONS ends user $1's sessions: all but $2 (when not null), only $3 (when not null). */
const END_SESSIONS = 'DELETE FROM sessions WHERE user_id = $1 AND id_hash IS DISTINCT FROM $2::text AND ($3::text IS NULL OR id_hash = $3::text)'

/** sessionsParams: END_SESSIONS's $2 and $3 for the sessions a change ends. */
const sessionsParams = (sessions: SessionsToEnd): [string | null, string | null] =>
  sessions === 'all' ? [null, null] : 'only' in sessions ? [null, sessions.only] : [sessions.except, null]

/** portalStore: times the store stamps itself (updated_at, a member's or session's start, a code's use) are parameters from its clock. */
export function portalStore(p: Part): PortalStore {
  return { ...userOps(p), ...changeOps(p), ...unconfirmedOps(p), ...memberOps(p), ...sessionOps(p), ...tokenOps(p), ...recoveryOps(p), ...ssoOps(p) }
}

/**
 * changeOps: a change of a user's sign-in, its fields, recovery codes, sessions and events, in
 * one transaction: several rows of several tables change, and the events' drafts wait for the
 * count of sessions ended. The user's row is locked first (updated, or read FOR UPDATE), so
 * that changes of one user are made one after the other.
 */
function changeOps({ transaction, stamps, audited }: Part): Pick<PortalStore, 'changeUser'> {
  return {
    changeUser(id, change) {
      const { sets, values } = userSets(change.patch ?? {}, 3)
      return transaction(async (tx) => {
        const { rows } =
          change.patch === undefined
            ? await tx('portal-user-lock', 'SELECT * FROM users WHERE id = $1 FOR UPDATE', [id])
            : await tx(null, `UPDATE users SET ${[...sets, 'updated_at = $2::timestamptz'].join(', ')} WHERE id = $1 RETURNING *`, [
                id,
                stamps.iso(),
                ...values,
              ])
        if (rows[0] === undefined) return null
        if (change.recoveryCodes !== undefined) await tx('portal-codes-set', SET_CODES, [id, change.recoveryCodes])
        const sessionsEnded =
          change.sessions === undefined ? 0 : ((await tx('portal-sessions-end', END_SESSIONS, [id, ...sessionsParams(change.sessions)])).rowCount ?? 0)
        for (const event of change.audits(sessionsEnded)) await tx('portal-user-event', auditInsert(1, null), audited(event))
        return { user: toUser(rows[0]), sessionsEnded }
      })
    },
  }
}

/** userOps: users, each created (unless the email is taken) or changed with its event in one statement. */
function userOps({
  query,
  stamps,
  audited,
}: Part): Pick<PortalStore, 'createUser' | 'findUserByEmail' | 'getUser' | 'updateUser' | 'resealTotpSecret' | 'listUsers'> {
  return {
    async createUser(user, audit) {
      const r = await query(
        'portal-user-create',
        `
        WITH u AS (INSERT INTO users (id, email, email_key, password_hash, email_verified_at, status, operator, totp_secret,
            totp_enabled_at, created_at, updated_at)
          VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10) ON CONFLICT (email_key) DO NOTHING RETURNING id)
        ${auditInsert(11, 'u')}`,
        [...newUserValues(user, (b) => b), ...audited(audit)],
      )
      return (r.rowCount ?? 0) > 0
    },
    async findUserByEmail(email) {
      const { rows } = await query('portal-user-by-email', 'SELECT * FROM users WHERE email_key = $1', [emailKey(email)])
      return rows[0] ? toUser(rows[0]) : null
    },
    async getUser(id) {
      const { rows } = await query('portal-user-get', 'SELECT * FROM users WHERE id = $1', [id])
      return rows[0] ? toUser(rows[0]) : null
    },
    async updateUser(id, patch, audit) {
      const { sets, values } = userSets(patch, 3)
      const update = `UPDATE users SET ${[...sets, 'updated_at = $2::timestamptz'].join(', ')} WHERE id = $1 RETURNING *`
      const { rows } =
        audit === null
          ? await query(null, update, [id, stamps.iso(), ...values])
          : await query(null, `WITH u AS (${update}), e AS (${auditInsert(3 + values.length, 'u')}) SELECT * FROM u`, [
              id,
              stamps.iso(),
              ...values,
              ...audited(audit),
            ])
      return rows[0] ? toUser(rows[0]) : null
    },
    async resealTotpSecret(id, from, to) {
      const r = await query('user-reseal', 'UPDATE users SET totp_secret = $1 WHERE id = $2 AND totp_secret = $3', [to, id, from])
      return (r.rowCount ?? 0) > 0
    },
    async listUsers({ status, email, cursor, limit }) {
      const values: unknown[] = []
      const param = (value: unknown) => `$${values.push(value)}`
      const sql = createdOrderPage('users', { cursor, limit }, param, true, () => [
        status === undefined ? null : `status = ${param(status)}`,
        // The key is lowercased already: a lowercased pattern matches any case.
        email === undefined || email === '' ? null : `email_key LIKE ${param(likePattern(emailKey(email)))} ESCAPE '\\'`,
      ])
      return pageOf((await query(null, sql, values)).rows, limit, toUser)
    },
  }
}

/** unconfirmedOps: sign-ups not confirmed yet; a new password only while unconfirmed, and the purge of those left too long. */
function unconfirmedOps({ query, stamps, audited }: Part): Pick<PortalStore, 'setPendingPassword' | 'purgeUnconfirmed'> {
  return {
    async setPendingPassword(id, passwordHash, audit) {
      // The row lock orders it with a confirmation: once that commits, the re-read row is confirmed and nothing changes.
      const r = await query(
        'portal-user-pending-password',
        `
        WITH u AS (UPDATE users SET password_hash = $2, updated_at = $13::timestamptz WHERE id = $1 AND email_verified_at IS NULL RETURNING id)
        ${auditInsert(3, 'u')}`,
        [id, passwordHash, ...audited(audit), stamps.iso()],
      )
      return (r.rowCount ?? 0) > 0
    },
    async purgeUnconfirmed(beforeIso, nowIso) {
      // One statement: every part sees the same users, and the foreign keys are checked at its end, when all is gone.
      const { rows } = await query(
        null,
        `
        WITH doomed AS (SELECT id FROM users u WHERE email_verified_at IS NULL AND created_at <= $1
            AND NOT EXISTS (SELECT 1 FROM email_tokens t WHERE t.user_id = u.id AND t.used_at IS NULL AND t.expires_at > $2)
            ORDER BY created_at LIMIT 500 FOR UPDATE SKIP LOCKED),
          lone AS (SELECT DISTINCT m.account_id AS id FROM members m JOIN doomed d ON d.id = m.user_id
            WHERE NOT EXISTS (SELECT 1 FROM members o WHERE o.account_id = m.account_id AND o.user_id <> m.user_id) ${HOLDS_NOTHING}),
          s AS (DELETE FROM sessions WHERE user_id IN (SELECT id FROM doomed)),
          c AS (DELETE FROM recovery_codes WHERE user_id IN (SELECT id FROM doomed)),
          r AS (DELETE FROM sso_requests WHERE link_user_id IN (SELECT id FROM doomed)),
          i AS (DELETE FROM sso_identities WHERE user_id IN (SELECT id FROM doomed)),
          t AS (DELETE FROM email_tokens WHERE user_id IN (SELECT id FROM doomed) OR account_id IN (SELECT id FROM lone)),
          m AS (DELETE FROM members WHERE user_id IN (SELECT id FROM doomed)),
          a AS (DELETE FROM accounts WHERE id IN (SELECT id FROM lone)),
          u AS (DELETE FROM users WHERE id IN (SELECT id FROM doomed) RETURNING id)
        SELECT count(*)::int AS n FROM u`,
        [beforeIso, nowIso],
      )
      return Number(rows[0]?.n ?? 0)
    },
  }
}

/** memberOps: an account's members; no change leaves an account without an owner (OWNERS, KEEPS_OWNER). */
function memberOps({ query, stamps, audited }: Part): Pick<PortalStore, 'addMember' | 'listMembers' | 'membershipsOf' | 'setRole' | 'removeMember'> {
  return {
    async addMember(accountId, userId, role, audit) {
      const r = await query(
        'portal-member-add',
        `
        WITH m AS (INSERT INTO members (account_id, user_id, role, created_at)
          SELECT a.id, u.id, $3::text, $14::timestamptz FROM accounts a, users u WHERE a.id = $1 AND u.id = $2
          ON CONFLICT (account_id, user_id) DO NOTHING RETURNING 1)
        ${auditInsert(4, 'm')}`,
        [accountId, userId, role, ...audited(audit), stamps.iso()],
      )
      return (r.rowCount ?? 0) > 0
    },
    async listMembers(accountId) {
      const { rows } = await query(
        'portal-members',
        `
        SELECT m.account_id, m.user_id, m.role, m.created_at, u.email FROM members m JOIN users u ON u.id = m.user_id
        WHERE m.account_id = $1 ORDER BY m.created_at, m.user_id COLLATE "C"`,
        [accountId],
      )
      return rows.map(toMember)
    },
    async membershipsOf(userId) {
      const { rows } = await query(
        'portal-memberships',
        `
        SELECT m.account_id, a.name AS account_name, a.status AS account_status, m.role, m.created_at
        FROM members m JOIN accounts a ON a.id = m.account_id WHERE m.user_id = $1 ORDER BY m.created_at, m.account_id COLLATE "C"`,
        [userId],
      )
      return rows.map(toMembership)
    },
    async setRole(accountId, userId, role, audit) {
      const { rows } = await query(
        'portal-member-role',
        `
        WITH ${OWNERS},
        c AS (UPDATE members SET role = $3::text WHERE account_id = $1 AND user_id = $2 AND ($3::text = 'owner' OR ${KEEPS_OWNER})
          RETURNING 1),
        e AS (${auditInsert(4, 'c')})
        ${OUTCOME('c')}`,
        [accountId, userId, role, ...audited(audit)],
      )
      return memberChange(rows[0], role !== 'owner')
    },
    async removeMember(accountId, userId, audit) {
      const { rows } = await query(
        'portal-member-remove',
        `
        WITH ${OWNERS},
        c AS (DELETE FROM members WHERE account_id = $1 AND user_id = $2 AND ${KEEPS_OWNER} RETURNING 1),
        e AS (${auditInsert(3, 'c')})
        ${OUTCOME('c')}`,
        [accountId, userId, ...audited(audit)],
      )
      return memberChange(rows[0], true)
    },
  }
}

/** sessionOps: sign-in sessions, found by the hash of their id. */
function sessionOps({
  query,
  stamps,
  audited,
}: Part): Pick<PortalStore, 'createSession' | 'findSession' | 'touchSession' | 'completeTwoFactor' | 'deleteSession' | 'deleteSessionsOf' | 'pruneSessions'> {
  return {
    async createSession(session, audits = []) {
      // The session and its events from its row, in one statement.
      const { rows } = await query(
        audits.length === 0 ? 'portal-session-create' : null,
        `
        WITH s AS (INSERT INTO sessions (id_hash, user_id, created_at, expires_at, last_seen_at, two_factor_pending, ip, user_agent, sso_provider_id)
          VALUES ($1, $2, $7, $3, $7, $4, $5, $6, $8) RETURNING *)${eventsFrom(9, 's', audits.length)}
        SELECT * FROM s`,
        [
          session.idHash,
          session.userId,
          session.expiresAt,
          session.twoFactorPending,
          session.ip,
          session.userAgent,
          stamps.iso(),
          session.ssoProviderId ?? null,
          ...audits.flatMap(audited),
        ],
      )
      return toSession(rows[0]!)
    },
    async findSession(idHash, nowIso) {
      const { rows } = await query(
        'portal-session-find',
        `
        SELECT s.id_hash AS s_id_hash, s.user_id AS s_user_id, s.created_at AS s_created_at, s.expires_at AS s_expires_at,
          s.last_seen_at AS s_last_seen_at, s.two_factor_pending AS s_two_factor_pending, s.ip AS s_ip, s.user_agent AS s_user_agent,
          s.sso_provider_id AS s_sso_provider_id, u.*
        FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.id_hash = $1 AND s.expires_at > $2`,
        [idHash, nowIso],
      )
      return rows[0] ? { session: toSession(rows[0], 's_'), user: toUser(rows[0]) } : null
    },
    async touchSession(idHash, lastSeenIso, newExpiresIso) {
      const r = await query(
        'portal-session-touch',
        `
        UPDATE sessions SET last_seen_at = $2, expires_at = GREATEST(expires_at, $3::timestamptz)
        WHERE id_hash = $1 AND expires_at > $2`,
        [idHash, lastSeenIso, newExpiresIso],
      )
      return (r.rowCount ?? 0) > 0
    },
    async completeTwoFactor(idHash, newIdHash, audits = []) {
      // The events from the row completed: none when it was not pending (a parallel completion won).
      const { rows } = await query(
        audits.length === 0 ? 'portal-session-2fa' : null,
        `
        WITH c AS (UPDATE sessions SET two_factor_pending = false, id_hash = COALESCE($2::text, id_hash)
          WHERE id_hash = $1 AND two_factor_pending RETURNING 1)${eventsFrom(3, 'c', audits.length)}
        SELECT count(*)::int AS n FROM c`,
        [idHash, newIdHash ?? null, ...audits.flatMap(audited)],
      )
      return Number(rows[0]?.n ?? 0) > 0
    },
    async deleteSession(idHash) {
      return ((await query('portal-session-delete', 'DELETE FROM sessions WHERE id_hash = $1', [idHash])).rowCount ?? 0) > 0
    },
    async deleteSessionsOf(userId, exceptIdHash) {
      const r = await query('portal-sessions-delete', 'DELETE FROM sessions WHERE user_id = $1 AND id_hash IS DISTINCT FROM $2::text', [
        userId,
        exceptIdHash ?? null,
      ])
      return r.rowCount ?? 0
    },
    async pruneSessions(nowIso) {
      return (await query(null, 'DELETE FROM sessions WHERE expires_at <= $1', [nowIso])).rowCount ?? 0
    },
  }
}

/** eventsFrom: CTEs that insert `count` audit events per row of `source`, their values from `$first` on (auditInsert's order). */
const eventsFrom = (first: number, source: string, count: number): string =>
  Array.from({ length: count }, (_, i) => `, e${i} AS (${auditInsert(first + 10 * i, source)})`).join('')

/**
 * createToken: the statement that inserts a token ($1 to $8), withdraws the unused ones it
 * replaces, and inserts `events` audit events from the new row (their values from $9 on).
 * The tokens replaced, the new one and its events are different rows: one statement does all.
 */
const createToken = (events: number) => `
  WITH d AS (DELETE FROM email_tokens WHERE used_at IS NULL AND purpose = $2 AND account_id IS NOT DISTINCT FROM $5::text
    AND CASE WHEN $4::text IS NOT NULL THEN user_id = $4::text ELSE email = $3 END),
  t AS (INSERT INTO email_tokens (token_hash, purpose, email, user_id, account_id, role, created_at, expires_at)
    VALUES ($1, $2, $3, $4, $5, $6, $8, $7) RETURNING *)${eventsFrom(9, 't', events)}
  SELECT * FROM t`

/** tokenOps: single-use email tokens; a new one replaces the unused ones of its purpose, and is consumed once. */
function tokenOps({
  query,
  stamps,
  audited,
}: Part): Pick<PortalStore, 'createToken' | 'consumeToken' | 'findToken' | 'pendingInvites' | 'deleteTokens' | 'pruneTokens'> {
  return {
    async createToken(token, audits = []) {
      const { rows } = await query(audits.length === 0 ? 'portal-token-create' : null, createToken(audits.length), [
        token.tokenHash,
        token.purpose,
        token.email,
        token.userId ?? null,
        token.accountId ?? null,
        token.role ?? null,
        token.expiresAt,
        stamps.iso(),
        ...audits.flatMap(audited),
      ])
      return toEmailToken(rows[0]!)
    },
    async consumeToken(tokenHash, purpose, nowIso) {
      // Of parallel consumptions, the first takes the row lock; the others, once it commits,
      // find used_at set on the row they re-read, and change (and return) nothing.
      const { rows } = await query(
        'portal-token-consume',
        `
        UPDATE email_tokens SET used_at = $3
        WHERE token_hash = $1 AND purpose = $2 AND used_at IS NULL AND expires_at > $3 RETURNING *`,
        [tokenHash, purpose, nowIso],
      )
      return rows[0] ? toEmailToken(rows[0]) : null
    },
    async findToken(tokenHash, purpose, nowIso) {
      const { rows } = await query(
        'portal-token-find',
        `
        SELECT * FROM email_tokens WHERE token_hash = $1 AND purpose = $2 AND used_at IS NULL AND expires_at > $3`,
        [tokenHash, purpose, nowIso],
      )
      return rows[0] ? toEmailToken(rows[0]) : null
    },
    async pendingInvites(accountId, nowIso) {
      const { rows } = await query(
        'portal-invites',
        `
        SELECT * FROM email_tokens WHERE account_id = $1 AND purpose = 'invite' AND used_at IS NULL AND expires_at > $2
        ORDER BY created_at, token_hash COLLATE "C"`,
        [accountId, nowIso],
      )
      return rows.map(toEmailToken)
    },
    async deleteTokens(tokenHashes, audit) {
      const deleted = 'DELETE FROM email_tokens WHERE token_hash = ANY ($1::text[])'
      if (audit === undefined) return (await query('portal-tokens-delete', deleted, [tokenHashes])).rowCount ?? 0
      // The event once, when anything was withdrawn.
      const { rows } = await query(
        'portal-tokens-delete-audited',
        `
        WITH d AS (${deleted} RETURNING 1), e AS (${auditInsert(2, '(SELECT 1 FROM d LIMIT 1) AS one')})
        SELECT count(*)::int AS n FROM d`,
        [tokenHashes, ...audited(audit)],
      )
      return Number(rows[0]?.n ?? 0)
    },
    async pruneTokens(nowIso) {
      return (await query(null, 'DELETE FROM email_tokens WHERE expires_at <= $1 OR used_at IS NOT NULL', [nowIso])).rowCount ?? 0
    },
  }
}

/** recoveryOps: a portal user's recovery codes, each used once. */
function recoveryOps({ query, stamps }: Part): Pick<PortalStore, 'setRecoveryCodes' | 'useRecoveryCode' | 'recoveryCodesLeft'> {
  return {
    async setRecoveryCodes(userId, codeHashes) {
      await query('portal-codes-set', SET_CODES, [userId, codeHashes])
    },
    async useRecoveryCode(userId, codeHash) {
      const r = await query(
        'portal-code-use',
        `
        UPDATE recovery_codes SET used_at = $3 WHERE user_id = $1 AND code_hash = $2 AND used_at IS NULL`,
        [userId, codeHash, stamps.iso()],
      )
      return (r.rowCount ?? 0) > 0
    },
    async recoveryCodesLeft(userId) {
      const { rows } = await query('portal-codes-left', 'SELECT count(*) AS n FROM recovery_codes WHERE user_id = $1 AND used_at IS NULL', [userId])
      return Number(rows[0]?.n ?? 0)
    },
  }
}

/** userSets: the SET clauses of a patch, its values numbered from `$first` (fields left out stay as they are). */
function userSets(patch: UserPatch, first: number): { sets: string[]; values: unknown[] } {
  const sets: string[] = []
  const values: unknown[] = []
  for (const [field, column] of Object.entries(USER_COLUMNS) as [keyof UserPatch, string][]) {
    if (patch[field] === undefined) continue
    values.push(patch[field])
    sets.push(`${column} = $${first + values.length - 1}`)
  }
  return { sets, values }
}
