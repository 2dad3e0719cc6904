/**
 * The SQLite factor store: managed TOTP factors and their users' recovery codes. Writes go
 * through the group commit (batch.ts); each check and its write run in one synchronous step
 * inside the write transaction, so no other write, of this process or another, comes between
 * them (the factor limit, a recovery code used once). A change with its audit event is one
 * SAVEPOINT: both or neither.
 *
 * FactorStore is assembled from builders by concern (factors, changes of one factor, users and
 * their codes, key rotation) over one Part (part.ts says why not a class); each check, change
 * and event stays in the one synchronous function handed to the group commit.
 */
import type { DatabaseSync } from 'node:sqlite'
import type { FactorStore } from '../ports.ts'
import type { TotpUser } from '../../domain/factors.ts'
import { FACTOR_COLUMNS, factorValues, NO_USER, readUserCursor, toChallenge, toFactor, toFactorSettings, toTotpUser, userCursor } from '../rows.ts'
import type { GroupCommit } from './batch.ts'
import { part, type Part } from './part.ts'
import type { Stamps } from '../stamps.ts'

/** factorStatements: the FactorStore's statements, prepared once. */
function factorStatements(db: DatabaseSync) {
  const live = "(status = 'active' OR expires_at > $now)"
  return {
    user: db.prepare('SELECT 1 FROM totp_users WHERE account_id = ? AND user_id = ?'),
    insertUser: db.prepare('INSERT INTO totp_users (account_id, user_id, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING'),
    dropExpired: db.prepare("DELETE FROM totp_factors WHERE account_id = ? AND user_id = ? AND status = 'pending' AND expires_at <= ?"),
    count: db.prepare('SELECT count(*) AS n FROM totp_factors WHERE account_id = ? AND user_id = ?'),
    accountFactors: db.prepare("SELECT row_count AS n FROM record_tallies WHERE owner = ? AND kind = 'factors'"),
    dropAccountExpired: db.prepare("DELETE FROM totp_factors WHERE account_id = ? AND status = 'pending' AND expires_at <= ?"),
    byId: db.prepare('SELECT 1 FROM totp_factors WHERE id = ?'),
    // DO NOTHING on any unique conflict: an id taken, or a passkey's credential the account has already.
    insert: db.prepare(
      `INSERT INTO totp_factors (${FACTOR_COLUMNS}) VALUES (${FACTOR_COLUMNS.split(',')
        .map(() => '?')
        .join(', ')}) ON CONFLICT DO NOTHING`,
    ),
    factors: db.prepare(`SELECT * FROM totp_factors WHERE account_id = $accountId AND user_id = $userId AND ${live} ORDER BY created_at, id`),
    // By the unique index totp_factors_credential (account_id, credential_digest): one row at most, of this account only.
    credentialUser: db.prepare("SELECT user_id FROM totp_factors WHERE account_id = ? AND credential_digest = ? AND type = 'passkey' AND status = 'active'"),
    activate: db.prepare(`UPDATE totp_factors SET status = 'active', expires_at = NULL, activated_at = ?
      WHERE id = ? AND account_id = ? AND user_id = ? AND status = 'pending' AND expires_at > ?`),
    drift: db.prepare(`UPDATE totp_factors SET drift = $drift WHERE id = $id AND account_id = $accountId AND user_id = $userId AND ${live}`),
    remove: db.prepare('DELETE FROM totp_factors WHERE id = ? AND account_id = ? AND user_id = ?'),
    removeUser: db.prepare('DELETE FROM totp_users WHERE account_id = ? AND user_id = ?'),
    clearCodes: db.prepare('DELETE FROM totp_recovery_codes WHERE account_id = ? AND user_id = ?'),
    insertCode: db.prepare('INSERT INTO totp_recovery_codes (account_id, user_id, code_hash, created_at) VALUES (?, ?, ?, ?)'),
    useCode: db.prepare(`UPDATE totp_recovery_codes SET used_at = ?
      WHERE account_id = ? AND user_id = ? AND code_hash = ? AND used_at IS NULL`),
    codesLeft: db.prepare('SELECT count(*) AS n FROM totp_recovery_codes WHERE account_id = ? AND user_id = ? AND used_at IS NULL'),
    users: db.prepare(`SELECT u.account_id, u.user_id, u.created_at,
        (SELECT count(*) FROM totp_factors f WHERE f.account_id = u.account_id AND f.user_id = u.user_id AND f.status = 'active') AS active,
        (SELECT count(*) FROM totp_factors f WHERE f.account_id = u.account_id AND f.user_id = u.user_id AND f.status = 'pending' AND f.expires_at > $now) AS pending,
        (SELECT count(*) FROM totp_recovery_codes c WHERE c.account_id = u.account_id AND c.user_id = u.user_id AND c.used_at IS NULL) AS codes_left
      FROM totp_users u WHERE u.account_id = $accountId AND u.user_id > $after ORDER BY u.user_id LIMIT $limit`),
    stale: db.prepare('SELECT id, account_id, user_id, sealed FROM totp_factors WHERE key_version <> ? AND id > ? ORDER BY id LIMIT ?'),
    reseal: db.prepare('UPDATE totp_factors SET sealed = ?, key_version = ? WHERE id = ? AND sealed = ?'),
    versions: db.prepare('SELECT key_version, count(*) AS n FROM totp_factors GROUP BY key_version'),
    prune: db.prepare("DELETE FROM totp_factors WHERE status = 'pending' AND expires_at <= ?"),
    pruneChallenges: db.prepare('DELETE FROM passkey_challenges WHERE expires_at <= ?'),
    useCredential: db.prepare(`UPDATE totp_factors SET sign_count = $to
      WHERE id = $id AND account_id = $accountId AND user_id = $userId AND type = 'passkey' AND sign_count = $from`),
    dropUserChallenges: db.prepare(`DELETE FROM passkey_challenges WHERE account_id = $accountId AND user_id = $userId
      AND (expires_at <= $now OR digest IN (SELECT digest FROM passkey_challenges WHERE account_id = $accountId AND user_id = $userId
        ORDER BY created_at DESC, digest LIMIT -1 OFFSET $keep))`),
    dropAccountChallenges: db.prepare('DELETE FROM passkey_challenges WHERE account_id = ? AND expires_at <= ?'),
    openChallenges: db.prepare(`SELECT (SELECT row_count FROM record_tallies WHERE owner = $accountId AND kind = 'passkey_challenges') AS n,
      (SELECT min(expires_at) FROM passkey_challenges WHERE account_id = $accountId AND expires_at > $now) AS first`),
    insertChallenge: db.prepare(`INSERT INTO passkey_challenges (digest, account_id, user_id, purpose, user_verification, created_at, expires_at)
      VALUES (?, ?, ?, ?, ?, ?, ?)`),
    takeChallenge: db.prepare('DELETE FROM passkey_challenges WHERE digest = ? AND account_id = ? RETURNING *'),
    settings: db.prepare('SELECT * FROM factor_settings WHERE account_id = ?'),
    setSettings: db.prepare(`INSERT INTO factor_settings (account_id, rp_id, rp_name, origins, user_limit, key_limit, limit_window_seconds, updated_at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (account_id) DO UPDATE SET rp_id = excluded.rp_id, rp_name = excluded.rp_name,
      origins = excluded.origins, user_limit = excluded.user_limit, key_limit = excluded.key_limit,
      limit_window_seconds = excluded.limit_window_seconds, updated_at = excluded.updated_at`),
  }
}

/** Factors: what the FactorStore's builders share. */
type Factors = Part<ReturnType<typeof factorStatements>>

/** existsIn: whether the account has such a TOTP user. */
const existsIn = ({ q }: Factors, accountId: string, userId: string) => q.user.get(accountId, userId) !== undefined

export function factorStore(db: DatabaseSync, batch: GroupCommit, stamps: Stamps): FactorStore {
  const f = part(db, batch, stamps, factorStatements(db))
  return { ...factorOps(f), ...factorChangeOps(f), ...userOps(f), ...sealOps(f), ...passkeyOps(f) }
}

/** factorOps: a user's factors; one is created within the user's and the account's limits, in one step with the counts. */
function factorOps(f: Factors): Pick<FactorStore, 'create' | 'factors' | 'attempting' | 'attemptingCredential' | 'prune'> {
  const { q, batch, audit } = f
  const exists = (accountId: string, userId: string) => existsIn(f, accountId, userId)
  /** overAccount: whether the account keeps more than `max` factors, its expired pending ones dropped first when it seems to. */
  const overAccount = (accountId: string, max: number, nowIso: string) => {
    if (Number(q.accountFactors.get(accountId)!.n) <= max) return false
    q.dropAccountExpired.run(accountId, nowIso)
    return Number(q.accountFactors.get(accountId)!.n) > max
  }
  return {
    async create(f, maxPerUser, maxPerAccount, nowIso, event) {
      // One synchronous step: the factor comes, and the account's tally (record_tallies, kept by triggers) is read; over the
      // cap, the savepoint undoes it all (the user's row included).
      try {
        return await batch.atomic(() => {
          q.insertUser.run(f.accountId, f.userId, nowIso)
          q.dropExpired.run(f.accountId, f.userId, nowIso)
          if (q.byId.get(f.id) !== undefined) return 'exists' as const
          if (Number(q.count.get(f.accountId, f.userId)!.n) >= maxPerUser) return 'limit' as const
          if (Number(q.insert.run(...factorValues(f)).changes) === 0) return 'exists' as const
          if (overAccount(f.accountId, maxPerAccount, nowIso)) throw new AccountFull()
          audit(event)
          return 'created' as const
        })
      } catch (error) {
        if (error instanceof AccountFull) return 'account_limit' as const
        throw error
      }
    },
    async factors(accountId, userId, nowIso) {
      const rows = q.factors.all({ accountId, userId, now: nowIso })
      if (rows.length === 0 && !exists(accountId, userId)) return null
      return rows.map(toFactor)
    },
    async attempting(accountId, userId, nowIso) {
      const rows = q.factors.all({ accountId, userId, now: nowIso })
      if (rows.length === 0 && !exists(accountId, userId)) return null
      return { factors: rows.map(toFactor), settings: toFactorSettings(q.settings.get(accountId)) }
    },
    async attemptingCredential(accountId, credentialDigest, nowIso) {
      // Synchronous reads on one connection: no write comes between them.
      const owner = q.credentialUser.get(accountId, credentialDigest)
      if (owner === undefined) return null
      const userId = String(owner.user_id)
      const rows = q.factors.all({ accountId, userId, now: nowIso })
      return { userId, factors: rows.map(toFactor), settings: toFactorSettings(q.settings.get(accountId)) }
    },
    async prune(nowIso) {
      const r = await batch.run(() => {
        q.pruneChallenges.run(nowIso)
        return q.prune.run(nowIso)
      })
      return Number(r.changes)
    },
  }
}

/** factorChangeOps: changes of one factor, each in one step with its event. */
function factorChangeOps({ q, batch, audit }: Factors): Pick<FactorStore, 'activate' | 'setDrift' | 'remove'> {
  return {
    activate(accountId, userId, factorId, nowIso, event) {
      return batch.atomic(() => {
        if (Number(q.activate.run(nowIso, factorId, accountId, userId, nowIso).changes) === 0) return false
        audit(event)
        return true
      })
    },
    setDrift(accountId, userId, factorId, drift, nowIso, event) {
      return batch.atomic(() => {
        if (Number(q.drift.run({ drift, id: factorId, accountId, userId, now: nowIso }).changes) === 0) return false
        audit(event)
        return true
      })
    },
    remove(accountId, userId, factorId, event) {
      return batch.atomic(() => {
        if (Number(q.remove.run(factorId, accountId, userId).changes) === 0) return false
        audit(event)
        return true
      })
    },
  }
}

/** userOps: TOTP users and their recovery codes, each code used once. */
function userOps(f: Factors): Pick<FactorStore, 'removeUser' | 'setRecoveryCodes' | 'useRecoveryCode' | 'recoveryCodesLeft' | 'listUsers'> {
  const { q, batch, audit } = f
  const exists = (accountId: string, userId: string) => existsIn(f, accountId, userId)
  return {
    removeUser(accountId, userId, event) {
      return batch.atomic(() => {
        // Factors and codes go with the user (ON DELETE CASCADE).
        if (Number(q.removeUser.run(accountId, userId).changes) === 0) return false
        audit(event)
        return true
      })
    },
    setRecoveryCodes(accountId, userId, hashes, nowIso, event) {
      return batch.atomic(() => {
        if (!exists(accountId, userId)) return false
        q.clearCodes.run(accountId, userId)
        for (const hash of hashes) q.insertCode.run(accountId, userId, hash, nowIso)
        audit(event)
        return true
      })
    },
    useRecoveryCode(accountId, userId, hash, nowIso, event) {
      return batch.atomic(() => {
        if (Number(q.useCode.run(nowIso, accountId, userId, hash).changes) === 0) return null
        audit(event)
        return Number(q.codesLeft.get(accountId, userId)!.n)
      })
    },
    async recoveryCodesLeft(accountId, userId) {
      return Number(q.codesLeft.get(accountId, userId)!.n)
    },
    async listUsers(accountId, { cursor, limit, nowIso }) {
      const after = cursor === undefined ? '' : readUserCursor(cursor)
      const rows = q.users.all({ accountId, after, limit: limit + 1, now: nowIso })
      const items: TotpUser[] = rows.slice(0, limit).map(toTotpUser)
      return { items, next: rows.length > limit ? userCursor(items.at(-1)!.userId) : null }
    },
  }
}

/** sealOps: key rotation, the factors sealed under an older key version found and sealed again. */
function sealOps({ q, batch }: Factors): Pick<FactorStore, 'staleSeals' | 'reseal' | 'sealVersions'> {
  return {
    async staleSeals(version, afterId, limit) {
      return q.stale.all(version, afterId, limit).map((r) => ({
        id: String(r.id),
        accountId: String(r.account_id),
        userId: String(r.user_id),
        sealed: String(r.sealed),
      }))
    },
    async reseal(id, from, to, version) {
      const r = await batch.run(() => q.reseal.run(to, version, id, from))
      return Number(r.changes) > 0
    },
    async sealVersions() {
      return new Map(q.versions.all().map((r) => [Number(r.key_version), Number(r.n)]))
    },
  }
}

/** passkeyOps: a passkey's counter moved once per count, its ceremonies' challenges used once, and the account's settings. */
function passkeyOps({ q, batch, audit }: Factors): Pick<FactorStore, 'useCredential' | 'addChallenge' | 'takeChallenge' | 'settings' | 'setSettings'> {
  return {
    async useCredential(accountId, userId, factorId, from, to) {
      const r = await batch.run(() => q.useCredential.run({ to, id: factorId, accountId, userId, from }))
      return Number(r.changes) > 0
    },
    async addChallenge(c, maxPerUser, maxPerAccount, nowIso) {
      // One synchronous step: the account's expired challenges and the user's oldest go, the new one comes, and the account's
      // tally (record_tallies, kept by triggers) is read; over the cap, the savepoint undoes it all.
      try {
        return await batch.atomic(() => {
          // A challenge of no user (a discoverable sign-in's) ends no other: the account's cap alone holds them.
          if (c.userId !== null) q.dropUserChallenges.run({ accountId: c.accountId, userId: c.userId, now: nowIso, keep: maxPerUser - 1 })
          q.dropAccountChallenges.run(c.accountId, nowIso)
          q.insertChallenge.run(c.digest, c.accountId, c.userId ?? NO_USER, c.purpose, c.userVerification, c.createdAt, c.expiresAt)
          const open = q.openChallenges.get({ accountId: c.accountId, now: nowIso })!
          if (Number(open.n) > maxPerAccount) throw new Full(String(open.first))
          return { added: true as const }
        })
      } catch (error) {
        if (error instanceof Full) return { added: false as const, freesAt: error.freesAt }
        throw error
      }
    },
    async takeChallenge(accountId, digest, nowIso) {
      const row = await batch.run(() => q.takeChallenge.get(digest, accountId))
      if (row === undefined) return null
      const challenge = toChallenge(row)
      return challenge.expiresAt > nowIso ? challenge : null
    },
    async settings(accountId) {
      return toFactorSettings(q.settings.get(accountId))
    },
    async setSettings(accountId, s, nowIso, event) {
      await batch.atomic(() => {
        q.setSettings.run(accountId, s.rpId, s.rpName, JSON.stringify(s.origins), s.userLimit, s.keyLimit, s.limitWindowSeconds, nowIso)
        audit(event)
      })
    },
  }
}

/** Full: thrown inside an atomic step to undo a challenge the account has no room for. */
class Full extends Error {
  readonly freesAt: string
  constructor(freesAt: string) {
    super('the account keeps as many passkey challenges as it may')
    this.freesAt = freesAt
  }
}

/** AccountFull: thrown inside an atomic step to undo a factor the account has no room for. */
class AccountFull extends Error {
  constructor() {
    super('the account keeps as many managed factors as it may')
  }
}
