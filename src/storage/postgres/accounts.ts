/**
 * The PostgreSQL accounts repository, audit trail and admin tokens. Every change is one
 * statement: the change in a data-modifying CTE and its audit event inserted from the CTE's
 * rows, so both commit together (one round trip, no transaction to hold open), a change that
 * finds nothing writes no event, and a change that fails (a duplicate id or hash) takes its
 * event with it.
 *
 * AccessStore is assembled from builders by concern (accounts, keys, a key's end, grants,
 * subscriptions, plans) over one Part (part.ts says why not a class); each keeps its change and
 * its event in one statement, and only a change that must lock and count first (an account
 * within its owner's limit, a key within its account's) runs in a transaction.
 */
import type { AccessStore, AdminTokenStore, AuditStore } from '../ports.ts'
import type { Account, KeyGrant } from '../../domain/accounts.ts'
import type { Page } from '../../domain/lists.ts'
import {
  likePattern,
  readEventCursor,
  readSubscriptionCursor,
  scopeColumns,
  toScope,
  subscriptionCursor,
  toAccount,
  toAdminToken,
  toAuditEvent,
  toKey,
  toPlan,
  toSubscription,
  createdOrderPage,
  pageOf,
} from '../rows.ts'
import { auditInsert, type Part, type Query } from './part.ts'

export interface AccessParts {
  readonly access: AccessStore
  readonly audit: AuditStore
  readonly adminTokens: AdminTokenStore
}

/**
 * PRUNE_ENDED deletes the account's ($1) ended keys (revoked, or expired at $2) past the newest
 * $3 by the time they ended (the earlier of the two times; LEAST skips a null). Run after the
 * account's row lock, so that it counts what every creation and roll before it ended.
 */
const PRUNE_ENDED = `DELETE FROM api_keys WHERE id IN (SELECT id FROM api_keys
  WHERE account_id = $1 AND (revoked_at IS NOT NULL OR expires_at <= $2::timestamptz)
  ORDER BY LEAST(revoked_at, expires_at) DESC, created_at DESC, id DESC OFFSET $3)`

/** Access: what the AccessStore's builders share. */
interface Access extends Part {
  /** committed tells the listeners of a change, once PostgreSQL has committed it. */
  readonly committed: () => void
}

/**
 * accessParts: accounts, keys, subscriptions, plans, the audit trail and admin tokens. Times
 * the store stamps itself (updated_at, revoked_at) are parameters from its clock, never now().
 */
export function accessParts(p: Part): AccessParts {
  const changeListeners = new Set<() => void>()
  const commitListeners = new Set<() => void>()
  // Called once PostgreSQL has committed a change (the statement has returned).
  const committed = () => {
    for (const l of commitListeners) l()
    for (const l of changeListeners) l()
  }
  const a: Access = { ...p, committed }
  const access: AccessStore = {
    ...accountOps(a),
    ...keyOps(a),
    ...keyEndOps(a),
    ...grantOps(a),
    ...subscriptionOps(a),
    ...planOps(a),
    onChange(listener) {
      changeListeners.add(listener)
      return () => changeListeners.delete(listener)
    },
    onCommit(listener) {
      commitListeners.add(listener)
      return () => commitListeners.delete(listener)
    },
  }
  return { access, audit: auditStore(p), adminTokens: adminTokenStore(p) }
}

/** accountOps: accounts; one created for an owner is counted against the owner's limit under the owner's row lock. */
function accountOps({
  query,
  transaction,
  stamps,
  audited,
  committed,
}: Access): Pick<AccessStore, 'createAccount' | 'getAccount' | 'listAccounts' | 'countAccounts' | 'updateAccount'> {
  return {
    async createAccount(account, audit, owner) {
      const insert = (q: Query) =>
        q(
          'account-create',
          `
        WITH a AS (INSERT INTO accounts (id, name, status, created_at, updated_at) VALUES ($1, $2, $3, $4, $4) RETURNING id)
        ${auditInsert(5, 'a')}`,
          [account.id, account.name, account.status, account.createdAt, ...audited(audit)],
        )
      if (owner === undefined) {
        await insert(query)
        committed()
        return true
      }
      const made = await transaction(async (tx) => {
        // The user's row lock orders parallel creations: each counts after the one before committed.
        const user = await tx('account-lock-owner', 'SELECT 1 FROM users WHERE id = $1 FOR UPDATE', [owner.userId])
        if (user.rows.length === 0) return false
        const owned = await tx('account-owned', "SELECT count(*) AS n FROM members WHERE user_id = $1 AND role = 'owner'", [owner.userId])
        if (Number(owned.rows[0]?.n) >= owner.max) return false
        await insert(tx)
        await tx(
          'account-owner',
          `
          WITH m AS (INSERT INTO members (account_id, user_id, role, created_at) VALUES ($1, $2, 'owner', $3) RETURNING 1)
          ${auditInsert(4, 'm')}`,
          [account.id, owner.userId, account.createdAt, ...audited(owner.audit)],
        )
        return true
      })
      if (made) committed()
      return made
    },
    async getAccount(id) {
      const { rows } = await query('account-get', 'SELECT * FROM accounts WHERE id = $1', [id])
      return rows[0] ? toAccount(rows[0]) : null
    },
    async listAccounts({ status, name, cursor, limit }): Promise<Page<Account>> {
      const values: unknown[] = []
      const param = (value: unknown) => `$${values.push(value)}`
      const sql = createdOrderPage('accounts', { cursor, limit }, param, true, () => [
        status === undefined ? null : `status = ${param(status)}`,
        name === undefined ? null : `name ILIKE ${param(likePattern(name))} ESCAPE '\\'`,
      ])
      return pageOf((await query(null, sql, values)).rows, limit, toAccount)
    },
    async countAccounts() {
      return Number((await query('account-count', 'SELECT count(*) AS n FROM accounts')).rows[0]?.n)
    },
    async updateAccount(id, patch, audit) {
      const { rows } = await query(
        'account-update',
        `
        WITH u AS (UPDATE accounts SET name = COALESCE($2::text, name), status = COALESCE($3::text, status), updated_at = $14::timestamptz
          WHERE id = $1 RETURNING *),
        e AS (${auditInsert(4, 'u')})
        SELECT * FROM u`,
        [id, patch.name ?? null, patch.status ?? null, ...audited(audit), stamps.iso()],
      )
      if (rows[0] === undefined) return null
      committed()
      return toAccount(rows[0])
    },
  }
}

/** keyOps: API keys; one created within a limit is counted, and the ended keys past those kept deleted, under the account's row lock. */
function keyOps({ query, transaction, audited, committed }: Access): Pick<AccessStore, 'createKey' | 'getKey' | 'listKeys'> {
  return {
    async createKey(key, audit, limit) {
      const insert = (q: Query) =>
        q(
          'key-create',
          `
        WITH k AS (INSERT INTO api_keys (id, account_id, name, key_hash, hint, created_at, expires_at, scope_groups, scope_regions)
          VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id)
        ${auditInsert(10, 'k')}`,
          [key.id, key.accountId, key.name, key.hash, key.hint, key.createdAt, key.expiresAt, ...scopeColumns(key.scope), ...audited(audit)],
        )
      if (limit === undefined) {
        await insert(query)
        committed()
        return true
      }
      const made = await transaction(async (tx) => {
        // The account's row lock orders parallel creations: each counts after the one before committed
        // (a count in the insert's own statement would read the snapshot from before the lock).
        const account = await tx('key-lock-account', 'SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE', [key.accountId])
        if (account.rows.length === 0) return false
        const active = await tx(
          'key-count',
          `SELECT count(*) AS n FROM api_keys
          WHERE account_id = $1 AND revoked_at IS NULL AND rolled_to IS NULL AND (expires_at IS NULL OR expires_at > $2)`,
          [key.accountId, limit.nowIso],
        )
        if (Number(active.rows[0]?.n) >= limit.max) return false
        await insert(tx)
        if (limit.endedKept !== undefined) await tx('key-prune', PRUNE_ENDED, [key.accountId, limit.nowIso, limit.endedKept])
        return true
      })
      if (made) committed()
      return made
    },
    async getKey(id) {
      const { rows } = await query('key-get', 'SELECT * FROM api_keys WHERE id = $1', [id])
      return rows[0] ? toKey(rows[0]) : null
    },
    async listKeys(accountId) {
      const r =
        accountId === undefined
          ? await query(null, 'SELECT * FROM api_keys ORDER BY created_at, id')
          : await query('key-list', 'SELECT * FROM api_keys WHERE account_id = $1 ORDER BY created_at, id', [accountId])
      return r.rows.map(toKey)
    },
  }
}

/**
 * keyEndOps: a key's end, rolled to a new key or revoked; of parallel ones, one changes the key and writes its event.
 * Either ends the grace of the key rolled to this one, if it is still in it (its expiry set to now), in the same
 * statement: a chain of rolls has at most two working keys, so an account's working keys stay within twice its active ones.
 */
function keyEndOps({ query, transaction, stamps, audited, committed }: Access): Pick<AccessStore, 'rollKey' | 'revokeKey'> {
  return {
    async rollKey(oldId, next, nowIso, graceEndsAt, audit, endedKept) {
      // The UPDATE's conditions are checked again on the committed row when another roll got
      // there first (READ COMMITTED re-evaluates them after the row lock): of parallel rolls,
      // exactly one finds the key live and unrolled; the others change, insert and log nothing.
      // The new key belongs to the old key's account, whatever `next` says.
      const roll = (tx: Query) =>
        tx(
          'key-roll',
          `
        WITH old AS (
          UPDATE api_keys SET rolled_to = $4::text,
            revoked_at = CASE WHEN $3::timestamptz IS NULL THEN $2::timestamptz ELSE revoked_at END,
            expires_at = CASE WHEN $3::timestamptz IS NULL THEN expires_at ELSE LEAST(expires_at, $3::timestamptz) END
          WHERE id = $1 AND revoked_at IS NULL AND rolled_to IS NULL AND (expires_at IS NULL OR expires_at > $2::timestamptz)
          RETURNING account_id),
        ended AS (
          UPDATE api_keys SET expires_at = $2::timestamptz
          WHERE rolled_to = $1 AND revoked_at IS NULL AND expires_at > $2::timestamptz AND EXISTS (SELECT 1 FROM old)),
        k AS (
          INSERT INTO api_keys (id, account_id, name, key_hash, hint, created_at, expires_at, scope_groups, scope_regions)
          SELECT $4::text, account_id, $5::text, $6::text, $7::text, $8::timestamptz, $9::timestamptz, $10::text, $11::text FROM old
          RETURNING id)
        ${auditInsert(12, 'k')}`,
          [
            oldId,
            nowIso,
            graceEndsAt,
            next.id,
            next.name,
            next.hash,
            next.hint,
            next.createdAt,
            next.expiresAt,
            ...scopeColumns(next.scope),
            ...audited(audit),
          ],
        )
      const rolled =
        endedKept === undefined
          ? ((await roll(query)).rowCount ?? 0) > 0
          : await transaction(async (tx) => {
              // The account's row lock orders its rolls and creations, so that the prune counts what each one before it ended.
              const account = await tx('key-roll-lock', 'SELECT a.id FROM accounts a JOIN api_keys k ON k.account_id = a.id WHERE k.id = $1 FOR UPDATE OF a', [
                oldId,
              ])
              const accountId = account.rows[0]?.id
              if (accountId === undefined || ((await roll(tx)).rowCount ?? 0) === 0) return false
              await tx('key-prune', PRUNE_ENDED, [accountId, nowIso, endedKept])
              return true
            })
      if (!rolled) return false
      committed()
      return true
    },
    async revokeKey(keyId, audit) {
      const r = await query(
        'key-revoke',
        `
        WITH k AS (UPDATE api_keys SET revoked_at = $12::timestamptz WHERE id = $1 AND revoked_at IS NULL RETURNING id),
        ended AS (
          UPDATE api_keys SET expires_at = $12::timestamptz
          WHERE rolled_to IN (SELECT id FROM k) AND revoked_at IS NULL AND expires_at > $12::timestamptz)
        ${auditInsert(2, 'k')}`,
        [keyId, ...audited(audit), stamps.iso()],
      )
      if ((r.rowCount ?? 0) === 0) return false
      committed()
      return true
    },
  }
}

/** grantOps: the request path, a key's grant looked up by its hash and its uses recorded in batches. */
function grantOps({ query }: Access): Pick<AccessStore, 'findGrant' | 'touchKeys'> {
  return {
    async findGrant(keyHash) {
      // The scope lists are nullable comma lists: null allows all, '' (an empty array) none.
      const { rows } = await query(
        'find-grant',
        `
        SELECT k.id, k.account_id, k.revoked_at IS NOT NULL AS revoked, k.expires_at, k.scope_groups, k.scope_regions, a.status,
          (SELECT string_agg(s.region || ':' || s.api_group, ',') FROM subscriptions s
            WHERE s.account_id = k.account_id AND s.status = 'active'
              AND (k.scope_groups IS NULL OR s.api_group = ANY (string_to_array(k.scope_groups, ',')))
              AND (k.scope_regions IS NULL OR s.region = ANY (string_to_array(k.scope_regions, ',')))) AS subs,
          EXISTS (SELECT 1 FROM onboarding o WHERE o.account_id = k.account_id
            AND NOT o.params_marked AND (o.algorithm <> 'SHA1' OR o.digits <> 6 OR o.period <> 30)) AS unmarked_params,
          p.rate, p.burst, p.quota, p.period, p.weight_totp, p.weight_converter
        FROM api_keys k JOIN accounts a ON a.id = k.account_id LEFT JOIN plans p ON p.account_id = k.account_id
        WHERE k.key_hash = $1`,
        [keyHash],
      )
      const r = rows[0]
      if (r === undefined) return null
      const grant: KeyGrant = {
        keyId: String(r.id),
        accountId: String(r.account_id),
        revoked: r.revoked === true,
        accountActive: r.status === 'active',
        expiresAt: r.expires_at === null ? Infinity : (r.expires_at as Date).getTime(),
        subscriptions: new Set(r.subs ? String(r.subs).split(',') : []),
        scope: toScope(r),
        plan: r.rate === null ? null : toPlan(r),
        // Only when true (KeyGrant: absent is false), so that the usual grant keeps its one shape.
        ...(r.unmarked_params === true ? { unmarkedParams: true } : {}),
      }
      return grant
    },
    async touchKeys(uses) {
      if (uses.length === 0) return
      // One statement for the batch; a key's latest use in it, and only when later than the stored one.
      // Rows another transaction holds are skipped, never waited for: a roll or a revocation locks a key and
      // then the key rolled to it, and a creation or roll deletes ended keys, so a batch that waited could
      // hold one of those rows while wanting another (a deadlock). A key skipped so shows its use of a minute
      // earlier until its next use is written (last use is a convenience, written at most once a minute anyway).
      await query(
        'key-touch',
        `
        UPDATE api_keys k SET last_used_at = u.at, last_used_region = u.region
        FROM (SELECT DISTINCT ON (id) id, at, region FROM unnest($1::text[], $2::timestamptz[], $3::text[]) AS t(id, at, region)
          ORDER BY id, at DESC) u
        WHERE k.id = u.id AND (k.last_used_at IS NULL OR k.last_used_at < u.at)
          AND k.id IN (SELECT id FROM api_keys WHERE id = ANY ($1::text[]) FOR UPDATE SKIP LOCKED)`,
        [uses.map((u) => u.keyId), uses.map((u) => new Date(u.atMs).toISOString()), uses.map((u) => u.region)],
      )
    },
  }
}

/** subscriptionOps: subscriptions; a move from a given status is a conditional UPDATE. */
function subscriptionOps({
  query,
  stamps,
  audited,
  committed,
}: Access): Pick<AccessStore, 'setSubscription' | 'listSubscriptions' | 'listPendingSubscriptions'> {
  return {
    async setSubscription(accountId, region, group, status, audit, from) {
      // With `from`, a conditional UPDATE: of two approvals at once, the second finds the row no longer pending.
      const r =
        from === undefined
          ? await query(
              'subscription-set',
              `
          WITH s AS (INSERT INTO subscriptions (account_id, region, api_group, status, updated_at) VALUES ($1, $2, $3, $4, $15::timestamptz)
            ON CONFLICT (account_id, region, api_group) DO UPDATE SET status = excluded.status, updated_at = excluded.updated_at
            RETURNING 1)
          ${auditInsert(5, 's')}`,
              [accountId, region, group, status, ...audited(audit), stamps.iso()],
            )
          : await query(
              'subscription-move',
              `
          WITH s AS (UPDATE subscriptions SET status = $4, updated_at = $16::timestamptz
            WHERE account_id = $1 AND region = $2 AND api_group = $3 AND status = $15 RETURNING 1)
          ${auditInsert(5, 's')}`,
              [accountId, region, group, status, ...audited(audit), from, stamps.iso()],
            )
      if ((r.rowCount ?? 0) === 0) return false
      committed()
      return true
    },
    async listSubscriptions(accountId) {
      const { rows } = await query('subscription-list', 'SELECT * FROM subscriptions WHERE account_id = $1 ORDER BY region, api_group', [accountId])
      return rows.map(toSubscription)
    },
    async listPendingSubscriptions({ cursor, limit }) {
      const after = cursor === undefined ? null : readSubscriptionCursor(cursor)
      // The cursor keeps the time to the microsecond (rows stamped by PostgreSQL's now(), before the
      // store took the service's clock, have them), so that no row is met twice.
      const { rows } = await query(
        null,
        `SELECT s.*, a.name AS account_name,
          to_char(s.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS exact_at
        FROM subscriptions s JOIN accounts a ON a.id = s.account_id
        WHERE s.status = 'pending'${after === null ? '' : ' AND (s.updated_at, s.account_id, s.region, s.api_group) > ($2::timestamptz, $3::text, $4::text, $5::text)'}
        ORDER BY s.updated_at, s.account_id, s.region, s.api_group LIMIT $1`,
        [limit + 1, ...(after === null ? [] : [after.updatedAt, after.accountId, after.region, after.group])],
      )
      const items = rows.slice(0, limit).map((r) => ({ ...toSubscription(r), accountName: String(r.account_name) }))
      const last = rows[items.length - 1]
      return { items, next: rows.length > limit && last !== undefined ? subscriptionCursor(items.at(-1)!, String(last.exact_at)) : null }
    },
  }
}

/** planOps: an account's plan, set or removed only for an account that exists. */
function planOps({ query, stamps, audited, committed }: Access): Pick<AccessStore, 'setPlan' | 'getPlan'> {
  return {
    async setPlan(accountId, plan, audit) {
      const r =
        plan === null
          ? // Removing a plan the account does not have is still a change asked of an account that exists.
            await query(
              'plan-delete',
              `
          WITH d AS (DELETE FROM plans WHERE account_id = $1), a AS (SELECT id FROM accounts WHERE id = $1)
          ${auditInsert(2, 'a')}`,
              [accountId, ...audited(audit)],
            )
          : await query(
              'plan-set',
              `
          WITH p AS (INSERT INTO plans (account_id, rate, burst, quota, period, weight_totp, weight_converter, updated_at)
            SELECT id, $2::double precision, $3::integer, $4::bigint, $5::text, $6::integer, $7::integer, $18::timestamptz FROM accounts WHERE id = $1
            ON CONFLICT (account_id) DO UPDATE SET rate = excluded.rate, burst = excluded.burst, quota = excluded.quota,
              period = excluded.period, weight_totp = excluded.weight_totp, weight_converter = excluded.weight_converter,
              updated_at = excluded.updated_at
            RETURNING 1)
          ${auditInsert(8, 'p')}`,
              [accountId, plan.rate, plan.burst, plan.quota, plan.period, plan.weights.totp, plan.weights.converter, ...audited(audit), stamps.iso()],
            )
      if ((r.rowCount ?? 0) === 0) return false
      committed()
      return true
    },
    async getPlan(accountId) {
      const { rows } = await query('plan-get', 'SELECT * FROM plans WHERE account_id = $1', [accountId])
      return rows[0] ? toPlan(rows[0]) : null
    },
  }
}

/** auditStore: the audit trail, appended to on its own (changes insert their events in their own statement). */
function auditStore({ query, stamps }: Part): AuditStore {
  return {
    async append(draft) {
      const { event, values } = stamps.audit(draft)
      await query('audit-append', auditInsert(1, null), values)
      return event
    },
    async list({ accountId, actor, action, cursor, limit }) {
      const where: string[] = []
      const values: unknown[] = []
      const param = (value: unknown) => `$${values.push(value)}`
      if (cursor !== undefined) where.push(`id < ${param(readEventCursor(cursor))}`)
      if (accountId !== undefined) where.push(`account_id = ${param(accountId)}`)
      if (actor !== undefined) where.push(`actor = ${param(actor)}`)
      if (action !== undefined) where.push(`action = ${param(action)}`)
      const { rows } = await query(
        null,
        `SELECT * FROM audit_events ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''}
        ORDER BY id DESC LIMIT ${param(limit + 1)}`,
        values,
      )
      const items = rows.slice(0, limit).map(toAuditEvent)
      return { items, next: rows.length > limit && items.length > 0 ? items.at(-1)!.id : null }
    },
    async prune(beforeIso) {
      return (await query(null, 'DELETE FROM audit_events WHERE at < $1', [beforeIso])).rowCount ?? 0
    },
  }
}

/** adminTokenStore: the admin API's tokens, each created or revoked with its event in one statement. */
function adminTokenStore({ query, audited, stamps }: Part): AdminTokenStore {
  return {
    async create(token, audit) {
      await query(
        'admin-token-create',
        `
        WITH t AS (INSERT INTO admin_tokens (id, name, scope, token_hash, created_at, revoked_at) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id)
        ${auditInsert(7, 't')}`,
        [token.id, token.name, token.scope, token.hash, token.createdAt, token.revokedAt, ...audited(audit)],
      )
    },
    async find(hash) {
      const { rows } = await query('admin-token-find', 'SELECT * FROM admin_tokens WHERE token_hash = $1 AND revoked_at IS NULL', [hash])
      return rows[0] ? toAdminToken(rows[0]) : null
    },
    async list() {
      return (await query(null, 'SELECT * FROM admin_tokens ORDER BY created_at, id')).rows.map(toAdminToken)
    },
    async revoke(id, audit) {
      const r = await query(
        'admin-token-revoke',
        `
        WITH t AS (UPDATE admin_tokens SET revoked_at = $12::timestamptz WHERE id = $1 AND revoked_at IS NULL RETURNING id)
        ${auditInsert(2, 't')}`,
        [id, ...audited(audit), stamps.iso()],
      )
      return (r.rowCount ?? 0) > 0
    },
  }
}
