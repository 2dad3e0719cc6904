/**
 * The PostgreSQL factor store: managed TOTP factors and their users' recovery codes. A change
 * that is one row is one statement with its audit event (a data-modifying CTE, as in
 * accounts.ts); a change that must first count or replace (a factor within the user's limit,
 * a new set of recovery codes) is one transaction that locks the user's row first, so
 * parallel changes of one user queue behind each other and each sees what the one before
 * committed (READ COMMITTED takes a fresh snapshot per statement).
 *
 * A factor added or removed (a user removed with theirs) is a transaction of two statements,
 * the change then its event: the change's trigger takes the account's factors tally, the
 * event's outbox trigger its pending webhook deliveries' tally, always in that order, so that
 * two such changes of one account never deadlock. (In one statement with a CTE, PostgreSQL fires
 * the event's row trigger first, while a creation's drop of expired factors, a statement before,
 * takes the factors tally first: the two orders met.)
 *
 * FactorStore is assembled from builders by concern (factors, changes of one factor, users and
 * their codes, key rotation) over one Part (part.ts says why not a class).
 */
import type { AuditDraft } from '../../domain/accounts.ts'
import type { Factor, FactorSettings } from '../../domain/factors.ts'
import type { FactorStore } from '../ports.ts'
import { FACTOR_COLUMNS, factorValues, NO_USER, readUserCursor, toChallenge, toFactor, toFactorSettings, toTotpUser, userCursor } from '../rows.ts'
import { auditInsert, type Part, type Query } from './part.ts'
import { batchedReads } from './read-batch.ts'

const LIVE = "(status = 'active' OR expires_at > $3)"
const FACTOR_COUNT = FACTOR_COLUMNS.split(',').length
const FACTOR_VALUES = Array.from({ length: FACTOR_COUNT }, (_, i) => `$${i + 1}`).join(', ')

/** lockUser locks the user's row for the transaction; false when there is no such user. */
const lockUser = async (q: Query, accountId: string, userId: string) =>
  (await q('totp-user-lock', 'SELECT 1 FROM totp_users WHERE account_id = $1 AND user_id = $2 FOR UPDATE', [accountId, userId])).rows.length > 0

/** oneRow: a statement that answers whether it returned a row (a change made, with its event). */
const oneRow = (query: Query) => async (name: string, text: string, values: unknown[]) => (await query(name, text, values)).rows.length > 0

/** accountFactors: the account's managed factors, from its tally. */
const accountFactors = async (q: Query, accountId: string) =>
  Number((await q('factor-tally', "SELECT row_count AS n FROM record_tallies WHERE owner = $1 AND kind = 'factors'", [accountId])).rows[0]!.n)

/** overAccount: whether the account keeps more than `max` factors, its expired pending ones dropped first when it seems to. */
async function overAccount(q: Query, accountId: string, max: number, nowIso: string): Promise<boolean> {
  if ((await accountFactors(q, accountId)) <= max) return false
  // Rows another transaction holds (its user's own expired ones, being dropped) are skipped, never waited for: that one may be
  // waiting for this one's tally row.
  await q(
    'factor-drop-account-expired',
    `DELETE FROM totp_factors WHERE id IN (SELECT id FROM totp_factors WHERE account_id = $1 AND status = 'pending' AND expires_at <= $2
      FOR UPDATE SKIP LOCKED)`,
    [accountId, nowIso],
  )
  return (await accountFactors(q, accountId)) > max
}

/** AccountFull: thrown inside the creating transaction to roll back a factor the account has no room for. */
class AccountFull extends Error {
  constructor() {
    super('the account keeps as many managed factors as it may')
  }
}

export function factorStore(p: Part): FactorStore {
  return { ...factorOps(p), ...factorChangeOps(p), ...userOps(p), ...sealOps(p), ...passkeyOps(p) }
}

/**
 * attemptingRows: a user's live factors with the account's settings on each row (the attempt limits need them), the user's
 * row first (is there such a user?); `which` is the condition on the account's users `u` that names one ($1: the account, $3: now).
 */
const attemptingRows = (which: string) => `SELECT u.user_id AS known, f.*, s.rp_id AS s_rp_id, s.rp_name AS s_rp_name, s.origins AS s_origins,
    s.user_limit AS s_user_limit, s.key_limit AS s_key_limit, s.limit_window_seconds AS s_limit_window_seconds, s.updated_at AS s_updated_at
  FROM totp_users u
  LEFT JOIN factor_settings s ON s.account_id = u.account_id
  LEFT JOIN totp_factors f ON f.account_id = u.account_id AND f.user_id = u.user_id AND (f.status = 'active' OR f.expires_at > $3)
  WHERE u.account_id = $1 AND ${which}
  ORDER BY f.created_at, f.id`

/**
 * ATTEMPTING_MANY: attemptingRows for many (account, user, now) at once, each row with the index `b_i` (from 1) of the
 * one it answers: one round trip for the reads of a turn's verifications (read-batch.ts).
 */
const ATTEMPTING_MANY = `SELECT q.b_i, u.user_id AS known, f.*, s.rp_id AS s_rp_id, s.rp_name AS s_rp_name, s.origins AS s_origins,
    s.user_limit AS s_user_limit, s.key_limit AS s_key_limit, s.limit_window_seconds AS s_limit_window_seconds, s.updated_at AS s_updated_at
  FROM unnest($1::text[], $2::text[], $3::timestamptz[]) WITH ORDINALITY AS q(b_account, b_user, b_now, b_i)
  JOIN totp_users u ON u.account_id = q.b_account AND u.user_id = q.b_user
  LEFT JOIN factor_settings s ON s.account_id = u.account_id
  LEFT JOIN totp_factors f ON f.account_id = u.account_id AND f.user_id = u.user_id AND (f.status = 'active' OR f.expires_at > q.b_now)
  ORDER BY q.b_i, f.created_at, f.id`

interface Attempt {
  readonly accountId: string
  readonly userId: string
  readonly nowIso: string
}

/** attemptingReads: FactorStore.attempting, the reads of one turn in one round trip. */
function attemptingReads(query: Query): FactorStore['attempting'] {
  const read = batchedReads<Attempt, { factors: Factor[]; settings: FactorSettings } | null>(
    async ({ accountId, userId, nowIso }) => {
      const view = attemptingView((await query('factors-attempting', attemptingRows('u.user_id = $2'), [accountId, userId, nowIso])).rows)
      return view === null ? null : { factors: view.factors, settings: view.settings }
    },
    async (keys) => {
      const { rows } = await query('factors-attempting-many', ATTEMPTING_MANY, [
        keys.map((k) => k.accountId),
        keys.map((k) => k.userId),
        keys.map((k) => k.nowIso),
      ])
      const byIndex = new Map<number, Record<string, unknown>[]>()
      for (const row of rows) {
        const i = Number(row.b_i) - 1
        const mine = byIndex.get(i)
        if (mine === undefined) byIndex.set(i, [row])
        else mine.push(row)
      }
      return keys.map((_, i) => {
        const view = attemptingView(byIndex.get(i) ?? [])
        return view === null ? null : { factors: view.factors, settings: view.settings }
      })
    },
  )
  return (accountId, userId, nowIso) => read({ accountId, userId, nowIso })
}

/** attemptingView reads attemptingRows: the user's factors and the account's settings; null without a row. */
function attemptingView(rows: Record<string, unknown>[]): { userId: string; factors: Factor[]; settings: FactorSettings } | null {
  if (rows.length === 0) return null
  const r = rows[0]!
  const settings = toFactorSettings(
    r.s_updated_at === null
      ? undefined
      : {
          rp_id: r.s_rp_id,
          rp_name: r.s_rp_name,
          origins: r.s_origins,
          user_limit: r.s_user_limit,
          key_limit: r.s_key_limit,
          limit_window_seconds: r.s_limit_window_seconds,
          updated_at: r.s_updated_at,
        },
  )
  return { userId: String(r.known), factors: rows.filter((x) => x.id !== null).map(toFactor), settings }
}

/** factorOps: a user's factors; one is created within the user's limit, counted under the user's row lock, and the account's, under its tally's. */
function factorOps({ query, transaction, audited }: Part): Pick<FactorStore, 'create' | 'factors' | 'attempting' | 'attemptingCredential' | 'prune'> {
  return {
    create(f, maxPerUser, maxPerAccount, nowIso, audit: AuditDraft) {
      return transaction(async (q) => {
        // The no-op update takes the row lock even when the user exists already.
        await q(
          'totp-user-upsert',
          `INSERT INTO totp_users (account_id, user_id, created_at) VALUES ($1, $2, $3)
          ON CONFLICT (account_id, user_id) DO UPDATE SET created_at = totp_users.created_at`,
          [f.accountId, f.userId, nowIso],
        )
        await q('factor-drop-expired', `DELETE FROM totp_factors WHERE account_id = $1 AND user_id = $2 AND status = 'pending' AND expires_at <= $3`, [
          f.accountId,
          f.userId,
          nowIso,
        ])
        const { rows } = await q('factor-count', 'SELECT count(*) AS n, bool_or(id = $3) AS taken FROM totp_factors WHERE account_id = $1 AND user_id = $2', [
          f.accountId,
          f.userId,
          f.id,
        ])
        // An id is the user's (an import's is derived from account, user and secret): under the user's lock, none can come between.
        if (rows[0]!.taken === true) return 'exists' as const
        if (Number(rows[0]!.n) >= maxPerUser) return 'limit' as const
        // DO NOTHING on any unique conflict: a passkey's credential the account has already (another user's is not under this lock).
        const inserted = await q(
          'factor-insert',
          `INSERT INTO totp_factors (${FACTOR_COLUMNS}) VALUES (${FACTOR_VALUES}) ON CONFLICT DO NOTHING RETURNING id`,
          factorValues(f),
        )
        if (inserted.rows.length === 0) return 'exists' as const
        // The insert's trigger moved the account's tally (record_tallies) and holds its row until this transaction ends, so
        // parallel creations of one account queue there and each reads the one before's count: over the cap, roll back.
        if (await overAccount(q, f.accountId, maxPerAccount, nowIso)) throw new AccountFull()
        // The event after the factor, in a statement of its own: its outbox trigger takes the account's pending-deliveries
        // tally, always after the factors tally (as a user's removal does), so that the two never deadlock.
        await q('factor-created-event', auditInsert(1, null), audited(audit))
        return 'created' as const
      }).catch((error: unknown) => {
        if (error instanceof AccountFull) return 'account_limit' as const
        throw error
      })
    },
    async factors(accountId, userId, nowIso) {
      // One round trip: the user's row (is there such a user?) joined to their live factors.
      const { rows } = await query(
        'factors-of',
        `SELECT u.user_id AS known, f.* FROM totp_users u
        LEFT JOIN totp_factors f ON f.account_id = u.account_id AND f.user_id = u.user_id AND (f.status = 'active' OR f.expires_at > $3)
        WHERE u.account_id = $1 AND u.user_id = $2 ORDER BY f.created_at, f.id`,
        [accountId, userId, nowIso],
      )
      if (rows.length === 0) return null
      return rows.filter((r) => r.id !== null).map(toFactor)
    },
    // The same round trip as factors, with the account's settings on each row; the reads of one turn go together.
    attempting: attemptingReads(query),
    async attemptingCredential(accountId, credentialDigest, nowIso) {
      // The passkey's user by the unique index totp_factors_credential (account_id, credential_digest), in this account only.
      const { rows } = await query(
        'factors-attempting-credential',
        attemptingRows(`u.user_id = (SELECT user_id FROM totp_factors
          WHERE account_id = $1 AND credential_digest = $2 AND type = 'passkey' AND status = 'active')`),
        [accountId, credentialDigest, nowIso],
      )
      return attemptingView(rows)
    },
    async prune(nowIso) {
      await query('challenge-prune', 'DELETE FROM passkey_challenges WHERE expires_at <= $1', [nowIso])
      const r = await query('factor-prune', "DELETE FROM totp_factors WHERE status = 'pending' AND expires_at <= $1", [nowIso])
      return r.rowCount ?? 0
    },
  }
}

/** factorChangeOps: changes of one factor, each one statement with its event. */
function factorChangeOps({ query, transaction, audited }: Part): Pick<FactorStore, 'activate' | 'setDrift' | 'remove'> {
  const one = oneRow(query)
  return {
    activate(accountId, userId, factorId, nowIso, audit) {
      return one(
        'factor-activate',
        `
        WITH f AS (UPDATE totp_factors SET status = 'active', expires_at = NULL, activated_at = $4
          WHERE id = $1 AND account_id = $2 AND user_id = $3 AND status = 'pending' AND expires_at > $4 RETURNING id)
        ${auditInsert(5, 'f')} RETURNING 1`,
        [factorId, accountId, userId, nowIso, ...audited(audit)],
      )
    },
    setDrift(accountId, userId, factorId, drift, nowIso, audit) {
      return one(
        'factor-drift',
        `
        WITH f AS (UPDATE totp_factors SET drift = $4 WHERE id = $1 AND account_id = $2 AND user_id = $5 AND ${LIVE} RETURNING id)
        ${auditInsert(6, 'f')} RETURNING 1`,
        [factorId, accountId, nowIso, drift, userId, ...audited(audit)],
      )
    },
    remove(accountId, userId, factorId, audit) {
      // Two statements, the event after the factor: the factors tally before the pending deliveries' (as in create).
      return transaction(async (q) => {
        const gone = await q('factor-remove', 'DELETE FROM totp_factors WHERE id = $1 AND account_id = $2 AND user_id = $3 RETURNING id', [
          factorId,
          accountId,
          userId,
        ])
        if (gone.rows.length === 0) return false
        await q('factor-removed-event', auditInsert(1, null), audited(audit))
        return true
      })
    },
  }
}

/** userOps: TOTP users and their recovery codes, each code used once. */
function userOps({
  query,
  transaction,
  audited,
}: Part): Pick<FactorStore, 'removeUser' | 'setRecoveryCodes' | 'useRecoveryCode' | 'recoveryCodesLeft' | 'listUsers'> {
  return {
    removeUser(accountId, userId, audit) {
      // Factors and codes go with the user (ON DELETE CASCADE); the event after them, as in create.
      return transaction(async (q) => {
        const gone = await q('totp-user-remove', 'DELETE FROM totp_users WHERE account_id = $1 AND user_id = $2 RETURNING user_id', [accountId, userId])
        if (gone.rows.length === 0) return false
        await q('totp-user-removed-event', auditInsert(1, null), audited(audit))
        return true
      })
    },
    setRecoveryCodes(accountId, userId, hashes, nowIso, audit) {
      return transaction(async (q) => {
        if (!(await lockUser(q, accountId, userId))) return false
        await q('codes-clear', 'DELETE FROM totp_recovery_codes WHERE account_id = $1 AND user_id = $2', [accountId, userId])
        await q(
          'codes-insert',
          `
          WITH c AS (INSERT INTO totp_recovery_codes (account_id, user_id, code_hash, created_at)
            SELECT $1, $2, h, $4 FROM unnest($3::text[]) AS h RETURNING 1)
          ${auditInsert(5, null)}`,
          [accountId, userId, hashes, nowIso, ...audited(audit)],
        )
        return true
      })
    },
    async useRecoveryCode(accountId, userId, hash, nowIso, audit) {
      // The count is read from the statement's snapshot, before this use: one less is what is left.
      const { rows } = await query(
        'code-use',
        `
        WITH c AS (UPDATE totp_recovery_codes SET used_at = $4
          WHERE account_id = $1 AND user_id = $2 AND code_hash = $3 AND used_at IS NULL RETURNING 1),
        e AS (${auditInsert(5, 'c')})
        SELECT (SELECT count(*) FROM c) AS used,
          (SELECT count(*) FROM totp_recovery_codes WHERE account_id = $1 AND user_id = $2 AND used_at IS NULL) AS before`,
        [accountId, userId, hash, nowIso, ...audited(audit)],
      )
      return Number(rows[0]!.used) === 0 ? null : Math.max(0, Number(rows[0]!.before) - 1)
    },
    async recoveryCodesLeft(accountId, userId) {
      const { rows } = await query('codes-left', 'SELECT count(*) AS n FROM totp_recovery_codes WHERE account_id = $1 AND user_id = $2 AND used_at IS NULL', [
        accountId,
        userId,
      ])
      return Number(rows[0]!.n)
    },
    async listUsers(accountId, { cursor, limit, nowIso }) {
      const after = cursor === undefined ? '' : readUserCursor(cursor)
      const { rows } = await query(
        'totp-users',
        `SELECT u.account_id, u.user_id, u.created_at,
          (SELECT count(*) FROM totp_factors f WHERE f.account_id = u.account_id AND f.user_id = u.user_id AND f.status = 'active') AS active,
          (SELECT count(*) FROM totp_factors f WHERE f.account_id = u.account_id AND f.user_id = u.user_id AND f.status = 'pending' AND f.expires_at > $3) AS pending,
          (SELECT count(*) FROM totp_recovery_codes c WHERE c.account_id = u.account_id AND c.user_id = u.user_id AND c.used_at IS NULL) AS codes_left
        FROM totp_users u WHERE u.account_id = $1 AND u.user_id COLLATE "C" > $2 ORDER BY u.user_id COLLATE "C" LIMIT $4`,
        [accountId, after, nowIso, limit + 1],
      )
      const items = rows.slice(0, limit).map(toTotpUser)
      return { items, next: rows.length > limit ? userCursor(items.at(-1)!.userId) : null }
    },
  }
}

/** sealOps: key rotation, the factors sealed under an older key version found and sealed again. */
function sealOps({ query }: Part): Pick<FactorStore, 'staleSeals' | 'reseal' | 'sealVersions'> {
  return {
    async staleSeals(version, afterId, limit) {
      const { rows } = await query(
        'factor-stale',
        `SELECT id, account_id, user_id, sealed FROM totp_factors
        WHERE key_version <> $1 AND id COLLATE "C" > $2 ORDER BY id COLLATE "C" LIMIT $3`,
        [version, afterId, limit],
      )
      return rows.map((r) => ({ id: String(r.id), accountId: String(r.account_id), userId: String(r.user_id), sealed: String(r.sealed) }))
    },
    async reseal(id, from, to, version) {
      const r = await query('factor-reseal', 'UPDATE totp_factors SET sealed = $1, key_version = $2 WHERE id = $3 AND sealed = $4', [to, version, id, from])
      return (r.rowCount ?? 0) > 0
    },
    async sealVersions() {
      const { rows } = await query('factor-versions', 'SELECT key_version, count(*) AS n FROM totp_factors GROUP BY key_version', [])
      return new Map(rows.map((r) => [Number(r.key_version), Number(r.n)]))
    },
  }
}

/** passkeyOps: a passkey's counter moved once per count, its ceremonies' challenges used once, and the account's settings. */
function passkeyOps({ query, transaction, audited }: Part): Pick<FactorStore, 'useCredential' | 'addChallenge' | 'takeChallenge' | 'settings' | 'setSettings'> {
  return {
    async useCredential(accountId, userId, factorId, from, to) {
      const r = await query(
        'passkey-count',
        `UPDATE totp_factors SET sign_count = $5 WHERE id = $1 AND account_id = $2 AND user_id = $3 AND type = 'passkey' AND sign_count = $4`,
        [factorId, accountId, userId, from, to],
      )
      return (r.rowCount ?? 0) > 0
    },
    async addChallenge(c, maxPerUser, maxPerAccount, nowIso) {
      // One transaction, after the tally's row is taken (below). Then one statement: the account's expired challenges and the user's oldest go (those another
      // transaction holds are skipped, never waited for) as the new one comes; its triggers move the account's tally
      // (record_tallies) and hold its row, so parallel additions of one account queue there. Then the tally is read: over
      // the cap, the transaction is rolled back.
      const full = await transaction(async (q) => {
        // The tally's row is taken first, so that the expired challenges are dropped by one addition at a time: when each
        // deleted only those no other held (SKIP LOCKED), an addition queued behind another's tally update could read a tally
        // that still counted what that other was deleting, and was refused under the cap (30 additions after expiry: 11 of 25).
        await q(
          'challenge-tally-lock',
          `INSERT INTO record_tallies (owner, kind, row_count, byte_count) VALUES ($1, 'passkey_challenges', 0, 0)
            ON CONFLICT (owner, kind) DO UPDATE SET row_count = record_tallies.row_count`,
          [c.accountId],
        )
        const values = [c.digest, c.accountId, c.userId ?? NO_USER, c.purpose, c.userVerification, c.createdAt, c.expiresAt, nowIso]
        // A challenge of no user (a discoverable sign-in's) ends no other: the account's cap alone holds them.
        const usersOldest =
          c.userId === null
            ? null
            : `OR (user_id = $3 AND digest IN (SELECT digest FROM passkey_challenges WHERE account_id = $2 AND user_id = $3
              ORDER BY created_at DESC, digest COLLATE "C" OFFSET $9))`
        await q(
          usersOldest === null ? 'challenge-add-no-user' : 'challenge-add',
          `WITH gone AS (DELETE FROM passkey_challenges WHERE digest IN (SELECT digest FROM passkey_challenges WHERE account_id = $2
            AND (expires_at <= $8 ${usersOldest ?? ''})
            FOR UPDATE SKIP LOCKED))
          INSERT INTO passkey_challenges (digest, account_id, user_id, purpose, user_verification, created_at, expires_at)
          VALUES ($1, $2, $3, $4, $5, $6, $7)`,
          usersOldest === null ? values : [...values, maxPerUser - 1],
        )
        const { rows } = await q(
          'challenge-open',
          `SELECT (SELECT row_count FROM record_tallies WHERE owner = $1 AND kind = 'passkey_challenges') AS n,
            (SELECT min(expires_at) FROM passkey_challenges WHERE account_id = $1 AND expires_at > $2) AS first`,
          [c.accountId, nowIso],
        )
        if (Number(rows[0]!.n) > maxPerAccount) throw new Full(new Date(rows[0]!.first as Date).toISOString())
        return null
      }).catch((error: unknown) => {
        if (error instanceof Full) return error.freesAt
        throw error
      })
      return full === null ? { added: true } : { added: false, freesAt: full }
    },
    async takeChallenge(accountId, digest, nowIso) {
      const { rows } = await query('challenge-take', 'DELETE FROM passkey_challenges WHERE digest = $1 AND account_id = $2 RETURNING *', [digest, accountId])
      if (rows.length === 0) return null
      const challenge = toChallenge(rows[0]!)
      return challenge.expiresAt > nowIso ? challenge : null
    },
    async settings(accountId) {
      const { rows } = await query('factor-settings', 'SELECT * FROM factor_settings WHERE account_id = $1', [accountId])
      return toFactorSettings(rows[0])
    },
    async setSettings(accountId, s, nowIso, audit) {
      await query(
        'factor-settings-set',
        `WITH s AS (INSERT INTO factor_settings (account_id, rp_id, rp_name, origins, user_limit, key_limit, limit_window_seconds, updated_at)
          VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7, $8) ON CONFLICT (account_id) DO UPDATE SET rp_id = excluded.rp_id, rp_name = excluded.rp_name,
          origins = excluded.origins, user_limit = excluded.user_limit, key_limit = excluded.key_limit,
          limit_window_seconds = excluded.limit_window_seconds, updated_at = excluded.updated_at RETURNING 1)
        ${auditInsert(9, 's')}`,
        [accountId, s.rpId, s.rpName, JSON.stringify(s.origins), s.userLimit, s.keyLimit, s.limitWindowSeconds, nowIso, ...audited(audit)],
      )
    },
  }
}

/** Full: thrown inside a transaction to roll back a challenge the account has no room for. */
class Full extends Error {
  readonly freesAt: string
  constructor(freesAt: string) {
    super('the account keeps as many passkey challenges as it may')
    this.freesAt = freesAt
  }
}
