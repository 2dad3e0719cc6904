/**
 * The SQLite accounts repository: accounts, keys, subscriptions and plans (AccessStore),
 * the audit trail and admin tokens. Every change and its audit event are one SAVEPOINT
 * within the group commit (batch.ts): both or neither.
 *
 * AccessStore is assembled from builders by concern (accounts, keys, a key's end, grants,
 * subscriptions, plans, change listeners) over one Part (part.ts says why not a class). Each
 * write keeps its check, its change and its event in the one synchronous function it hands
 * the group commit: SQLite's atomic step is that turn, and no other write comes between.
 */
import type { DatabaseSync, StatementSync } from 'node:sqlite'
import type { AccessStore, AdminTokenStore, AuditStore } from '../ports.ts'
import type { KeyGrant } from '../../domain/accounts.ts'
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
  type Row,
  createdOrderPage,
  pageOf,
} from '../rows.ts'
import type { GroupCommit } from './batch.ts'
import { INSERT_EVENT, part, type Part } from './part.ts'
import { eventIdBefore, type Stamps } from '../stamps.ts'

/** page cuts `limit + 1` rows to a page and its cursor. */
function page<T>(rows: readonly Row[], limit: number, map: (r: Row) => T, cursor: (item: T) => string): Page<T> {
  const items = rows.slice(0, limit).map(map)
  return { items, next: rows.length > limit && items.length > 0 ? cursor(items.at(-1)!) : null }
}

/** accessStatements: the AccessStore's statements, prepared once. */
function accessStatements(db: DatabaseSync) {
  return {
    grant: db.prepare(`
      SELECT k.id, k.account_id, k.revoked_at, k.expires_at, k.scope_groups, k.scope_regions, a.status,
        (SELECT group_concat(s.region || ':' || s.api_group) FROM subscriptions s
          WHERE s.account_id = k.account_id AND s.status = 'active'
            AND (k.scope_groups IS NULL OR instr(',' || k.scope_groups || ',', ',' || s.api_group || ',') > 0)
            AND (k.scope_regions IS NULL OR instr(',' || k.scope_regions || ',', ',' || s.region || ',') > 0)) AS subs,
        EXISTS (SELECT 1 FROM onboarding o WHERE o.account_id = k.account_id
          AND o.params_marked = 0 AND (o.algorithm <> 'SHA1' OR o.digits <> 6 OR o.period <> 30)) AS unmarked_params,
        p.rate, p.burst, p.quota, p.period, p.weight_totp, p.weight_converter
      FROM api_keys k JOIN accounts a ON a.id = k.account_id LEFT JOIN plans p ON p.account_id = k.account_id
      WHERE k.key_hash = ?`),
    dataVersion: db.prepare('PRAGMA data_version'),
    account: db.prepare('SELECT * FROM accounts WHERE id = ?'),
    key: db.prepare('SELECT * FROM api_keys WHERE id = ?'),
    insertKey: db.prepare(`INSERT INTO api_keys (id, account_id, name, key_hash, hint, created_at, expires_at, scope_groups, scope_regions)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
    insertAccount: db.prepare('INSERT INTO accounts (id, name, status, created_at, updated_at) VALUES (?, ?, ?, ?, ?)'),
    insertOwner: db.prepare("INSERT INTO members (account_id, user_id, role, created_at) VALUES (?, ?, 'owner', ?)"),
    owned: db.prepare("SELECT count(*) AS n FROM members WHERE user_id = ? AND role = 'owner'"),
    activeKeys: db.prepare(`SELECT count(*) AS n FROM api_keys
      WHERE account_id = ? AND revoked_at IS NULL AND rolled_to IS NULL AND (expires_at IS NULL OR expires_at > ?)`),
    // A key in its grace ends it (its expiry set to now) when the key it was rolled to is rolled or revoked in turn.
    endGrace: db.prepare('UPDATE api_keys SET expires_at = ? WHERE rolled_to = ? AND revoked_at IS NULL AND expires_at > ?'),
    // The account's ended keys (revoked, or expired at ?) past the newest ? by the time they ended, the earlier of the two times.
    pruneEnded: db.prepare(`DELETE FROM api_keys WHERE id IN (SELECT id FROM api_keys
      WHERE account_id = ? AND (revoked_at IS NOT NULL OR expires_at <= ?)
      ORDER BY min(coalesce(revoked_at, expires_at), coalesce(expires_at, revoked_at)) DESC, created_at DESC, id DESC LIMIT -1 OFFSET ?)`),
    touch: db.prepare(`UPDATE api_keys SET last_used_at = ?, last_used_region = ?
      WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)`),
  }
}

/** Access: what the AccessStore's builders share. */
interface Access extends Part<ReturnType<typeof accessStatements>> {
  /** write runs a change and its event as one; `changed` follows the commit when the change happened. */
  write<T>(work: () => T, happened?: (result: T) => boolean): Promise<T>
}

/** insertKey inserts a key (created or rolled to); called inside the write step. */
function insertKey(a: Access, key: Parameters<AccessStore['createKey']>[0]) {
  return a.q.insertKey.run(key.id, key.accountId, key.name, key.hash, key.hint, key.createdAt, key.expiresAt, ...scopeColumns(key.scope))
}

export function accessStore(db: DatabaseSync, batch: GroupCommit, stamps: Stamps, changePollMs: number, timers: Set<NodeJS.Timeout>): AccessStore {
  const listeners = new Set<() => void>()
  const committers = new Set<() => void>()
  const changed = () => {
    for (const l of committers) l()
    for (const l of listeners) l()
  }
  const shared = part(db, batch, stamps, accessStatements(db))
  const a: Access = {
    ...shared,
    write: async <T>(work: () => T, happened: (result: T) => boolean = () => true): Promise<T> => {
      const result = await batch.atomic(work)
      if (happened(result)) changed()
      return result
    },
  }
  return {
    ...accountOps(a),
    ...keyOps(a),
    ...keyEndOps(a),
    ...grantOps(a),
    ...subscriptionOps(a),
    ...planOps(a),
    ...changeOps(a, listeners, committers, changePollMs, timers),
  }
}

/** accountOps: accounts, each created with its owner (within the owner's limit) in one step. */
function accountOps({
  db,
  q,
  stamps,
  audit,
  write,
}: Access): Pick<AccessStore, 'createAccount' | 'getAccount' | 'listAccounts' | 'countAccounts' | 'updateAccount'> {
  return {
    async createAccount(account, event, owner) {
      // The count, the account and its owner are one synchronous step of the write transaction: no parallel creation comes between.
      return write(
        () => {
          if (owner !== undefined && Number(q.owned.get(owner.userId)?.n) >= owner.max) return false
          q.insertAccount.run(account.id, account.name, account.status, account.createdAt, account.createdAt)
          audit(event)
          if (owner !== undefined) {
            q.insertOwner.run(account.id, owner.userId, account.createdAt)
            audit(owner.audit)
          }
          return true
        },
        (made) => made,
      )
    },
    async getAccount(id) {
      const row = q.account.get(id)
      return row ? toAccount(row) : null
    },
    async listAccounts({ status, name, cursor, limit }) {
      const values: unknown[] = []
      const param = (value: unknown) => {
        values.push(value)
        return '?'
      }
      // LIKE is case-insensitive for ASCII letters. lower() on both sides added nothing to
      // that (without ICU, as node:sqlite is built, it folds ASCII only too) but its cost: a
      // search that matches nothing reads every row, 44 ms for 100 000 accounts (bench/admin.ts).
      // Non-ASCII letters match their own case only here; PostgreSQL's ILIKE folds them.
      const sql = createdOrderPage('accounts', { cursor, limit }, param, false, () => [
        status === undefined ? null : `status = ${param(status)}`,
        name === undefined || name === '' ? null : `name LIKE ${param(likePattern(name))} ESCAPE '\\'`,
      ])
      return pageOf(db.prepare(sql).all(...(values as (string | number)[])), limit, toAccount)
    },
    async countAccounts() {
      return Number(db.prepare('SELECT count(*) AS n FROM accounts').get()?.n)
    },
    async updateAccount(id, patch, event) {
      return write(
        () => {
          const row = db
            .prepare(`UPDATE accounts SET name = coalesce(?, name), status = coalesce(?, status), updated_at = ?
          WHERE id = ? RETURNING *`)
            .get(patch.name ?? null, patch.status ?? null, stamps.iso(), id)
          if (row === undefined) return null
          audit(event)
          return toAccount(row)
        },
        (account) => account !== null,
      )
    },
  }
}

/** keyOps: API keys; a creation within the account's limit is one step (count, key, event, the ended keys past those kept). */
function keyOps(a: Access): Pick<AccessStore, 'createKey' | 'getKey' | 'listKeys'> {
  const { db, q, audit, write } = a
  return {
    async createKey(key, event, limit) {
      return write(
        () => {
          if (limit !== undefined && Number(q.activeKeys.get(key.accountId, limit.nowIso)?.n) >= limit.max) return false
          insertKey(a, key)
          audit(event)
          if (limit?.endedKept !== undefined) q.pruneEnded.run(key.accountId, limit.nowIso, limit.endedKept)
          return true
        },
        (made) => made,
      )
    },
    async getKey(id) {
      const row = q.key.get(id)
      return row ? toKey(row) : null
    },
    async listKeys(accountId) {
      const rows =
        accountId === undefined
          ? db.prepare('SELECT * FROM api_keys ORDER BY created_at, id').all()
          : db.prepare('SELECT * FROM api_keys WHERE account_id = ? ORDER BY created_at, id').all(accountId)
      return rows.map(toKey)
    },
  }
}

/**
 * keyEndOps: a key's end, rolled to a new key or revoked; the check and the change are one step, so of parallel ones one wins.
 * Either ends the grace of the key rolled to this one, if it is still in it: a chain of rolls has at most two working keys,
 * the live one and the one rolled to it, so an account's working keys stay within twice its active ones.
 */
function keyEndOps(a: Access): Pick<AccessStore, 'rollKey' | 'revokeKey'> {
  const { db, q, stamps, audit, write } = a
  return {
    async rollKey(oldId, next, nowIso, graceEndsAt, event, endedKept) {
      return write(
        () => {
          // One synchronous step in the write transaction: no other roll comes between the check and the change.
          const changed =
            graceEndsAt === null
              ? db
                  .prepare(`UPDATE api_keys SET revoked_at = ?, rolled_to = ?
              WHERE id = ? AND revoked_at IS NULL AND rolled_to IS NULL AND (expires_at IS NULL OR expires_at > ?)`)
                  .run(nowIso, next.id, oldId, nowIso)
              : db
                  .prepare(`UPDATE api_keys SET expires_at = CASE WHEN expires_at IS NULL OR expires_at > ? THEN ? ELSE expires_at END, rolled_to = ?
              WHERE id = ? AND revoked_at IS NULL AND rolled_to IS NULL AND (expires_at IS NULL OR expires_at > ?)`)
                  .run(graceEndsAt, graceEndsAt, next.id, oldId, nowIso)
          if (Number(changed.changes) === 0) return false
          q.endGrace.run(nowIso, oldId, nowIso)
          insertKey(a, next)
          audit(event)
          if (endedKept !== undefined) q.pruneEnded.run(next.accountId, nowIso, endedKept)
          return true
        },
        (rolled) => rolled,
      )
    },
    async revokeKey(keyId, event) {
      return write(
        () => {
          const at = stamps.iso()
          const r = db.prepare('UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL').run(at, keyId)
          if (Number(r.changes) === 0) return false
          q.endGrace.run(at, keyId, at)
          audit(event)
          return true
        },
        (revoked) => revoked,
      )
    },
  }
}

/** grantOps: the request path, a key's grant looked up by its hash and its uses recorded in batches. */
function grantOps({ q, batch }: Access): Pick<AccessStore, 'findGrant' | 'touchKeys'> {
  return {
    async findGrant(keyHash) {
      const r = q.grant.get(keyHash)
      if (!r) return null
      const grant: KeyGrant = {
        keyId: String(r.id),
        accountId: String(r.account_id),
        revoked: r.revoked_at !== null,
        accountActive: r.status === 'active',
        expiresAt: r.expires_at === null ? Infinity : Date.parse(String(r.expires_at)),
        subscriptions: new Set(r.subs ? String(r.subs).split(',') : []),
        scope: toScope(r),
        plan: r.rate === null ? null : toPlan(r),
        // Only when true (KeyGrant: absent is false), so that the usual grant keeps its one shape.
        ...(Number(r.unmarked_params) === 1 ? { unmarkedParams: true } : {}),
      }
      return grant
    },
    async touchKeys(uses) {
      if (uses.length === 0) return
      await batch.run(() => {
        for (const u of uses) {
          const at = new Date(u.atMs).toISOString()
          q.touch.run(at, u.region, u.keyId, at)
        }
      })
    },
  }
}

/** subscriptionOps: subscriptions; a move from a given status is checked and made in one step. */
function subscriptionOps({ db, stamps, audit, write }: Access): Pick<AccessStore, 'setSubscription' | 'listSubscriptions' | 'listPendingSubscriptions'> {
  return {
    async setSubscription(accountId, region, group, status, event, from) {
      return write(
        () => {
          // With `from`, the check and the change are one synchronous step of the write transaction.
          const r =
            from === undefined
              ? db
                  .prepare(`INSERT INTO subscriptions (account_id, region, api_group, status, updated_at) VALUES (?, ?, ?, ?, ?)
              ON CONFLICT (account_id, region, api_group) DO UPDATE SET status = excluded.status, updated_at = excluded.updated_at`)
                  .run(accountId, region, group, status, stamps.iso())
              : db
                  .prepare('UPDATE subscriptions SET status = ?, updated_at = ? WHERE account_id = ? AND region = ? AND api_group = ? AND status = ?')
                  .run(status, stamps.iso(), accountId, region, group, from)
          if (Number(r.changes) === 0) return false
          audit(event)
          return true
        },
        (set) => set,
      )
    },
    async listSubscriptions(accountId) {
      return db.prepare('SELECT * FROM subscriptions WHERE account_id = ? ORDER BY region, api_group').all(accountId).map(toSubscription)
    },
    async listPendingSubscriptions({ cursor, limit }) {
      const after = cursor === undefined ? null : readSubscriptionCursor(cursor)
      const rows = db
        .prepare(`SELECT s.*, a.name AS account_name FROM subscriptions s JOIN accounts a ON a.id = s.account_id
        WHERE s.status = 'pending'${after === null ? '' : ' AND (s.updated_at, s.account_id, s.region, s.api_group) > (?, ?, ?, ?)'}
        ORDER BY s.updated_at, s.account_id, s.region, s.api_group LIMIT ?`)
        .all(...(after === null ? [] : [after.updatedAt, after.accountId, after.region, after.group]), limit + 1)
      return page(rows, limit, (r) => ({ ...toSubscription(r), accountName: String(r.account_name) }), subscriptionCursor)
    },
  }
}

/** planOps: an account's plan, set or removed only for an account that exists. */
function planOps({ db, q, stamps, audit, write }: Access): Pick<AccessStore, 'setPlan' | 'getPlan'> {
  return {
    async setPlan(accountId, plan, event) {
      return write(
        () => {
          if (q.account.get(accountId) === undefined) return false
          if (plan === null) db.prepare('DELETE FROM plans WHERE account_id = ?').run(accountId)
          else {
            db.prepare(`INSERT INTO plans (account_id, rate, burst, quota, period, weight_totp, weight_converter, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (account_id) DO UPDATE SET rate = excluded.rate, burst = excluded.burst, quota = excluded.quota,
              period = excluded.period, weight_totp = excluded.weight_totp, weight_converter = excluded.weight_converter,
              updated_at = excluded.updated_at`).run(
              accountId,
              plan.rate,
              plan.burst,
              plan.quota,
              plan.period,
              plan.weights.totp,
              plan.weights.converter,
              stamps.iso(),
            )
          }
          audit(event)
          return true
        },
        (set) => set,
      )
    },
    async getPlan(accountId) {
      const row = db.prepare('SELECT * FROM plans WHERE account_id = ?').get(accountId)
      return row ? toPlan(row) : null
    },
  }
}

/**
 * changeOps: listeners of changes. This process's own commits reach them through `write`;
 * other processes' (the admin CLI) through a poll of data_version, started with the first listener.
 */
function changeOps(
  { q }: Access,
  listeners: Set<() => void>,
  committers: Set<() => void>,
  changePollMs: number,
  timers: Set<NodeJS.Timeout>,
): Pick<AccessStore, 'onChange' | 'onCommit'> {
  let poller: NodeJS.Timeout | undefined
  let lastVersion = Number(q.dataVersion.get()?.data_version)
  return {
    onChange(listener) {
      listeners.add(listener)
      if (poller === undefined) {
        // data_version moves when another connection (the admin CLI) commits.
        poller = setInterval(() => {
          const version = Number(q.dataVersion.get()?.data_version)
          if (version !== lastVersion) {
            lastVersion = version
            for (const l of listeners) l()
          }
        }, changePollMs).unref()
        timers.add(poller)
      }
      return () => listeners.delete(listener)
    },
    onCommit(listener) {
      committers.add(listener)
      return () => committers.delete(listener)
    },
  }
}

/** auditStore: the audit trail, appended to on its own (changes insert their events in their own step) and pruned in chunks. */
export function auditStore(db: DatabaseSync, batch: GroupCommit, stamps: Stamps): AuditStore {
  const insert = db.prepare(INSERT_EVENT)
  // Ids begin with their time: the prefix of `before` bounds the old ones, along the primary key.
  const prune = db.prepare('DELETE FROM audit_events WHERE id IN (SELECT id FROM audit_events WHERE id < ? ORDER BY id LIMIT 1000)')
  const statements = new Map<string, StatementSync>()
  return {
    async append(draft) {
      const { event, values } = stamps.audit(draft)
      await batch.run(() => insert.run(...values))
      return event
    },
    async list({ accountId, actor, action, cursor, limit }) {
      const where: string[] = []
      const values: string[] = []
      if (cursor !== undefined) {
        where.push('id < ?')
        values.push(readEventCursor(cursor))
      }
      if (accountId !== undefined) {
        where.push('account_id = ?')
        values.push(accountId)
      }
      if (actor !== undefined) {
        where.push('actor = ?')
        values.push(actor)
      }
      if (action !== undefined) {
        where.push('action = ?')
        values.push(action)
      }
      const text = `SELECT * FROM audit_events ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id DESC LIMIT ?`
      let statement = statements.get(text)
      if (statement === undefined) {
        statement = db.prepare(text)
        statements.set(text, statement)
      }
      return page(statement.all(...values, limit + 1), limit, toAuditEvent, (e) => e.id)
    },
    async prune(beforeIso) {
      // In chunks, each its own commit: a large backlog never holds the write lock long.
      let total = 0
      for (;;) {
        const n = Number((await batch.run(() => prune.run(eventIdBefore(beforeIso)))).changes)
        total += n
        if (n < 1000) return total
      }
    },
  }
}

/** adminTokenStore: the admin API's tokens, each created or revoked with its event in one step. */
export function adminTokenStore(db: DatabaseSync, batch: GroupCommit, stamps: Stamps): AdminTokenStore {
  const insertEvent = db.prepare(INSERT_EVENT)
  return {
    async create(token, event) {
      await batch.atomic(() => {
        db.prepare('INSERT INTO admin_tokens (id, name, scope, token_hash, created_at) VALUES (?, ?, ?, ?, ?)').run(
          token.id,
          token.name,
          token.scope,
          token.hash,
          token.createdAt,
        )
        insertEvent.run(...stamps.audit(event).values)
      })
    },
    async find(hash) {
      const row = db.prepare('SELECT * FROM admin_tokens WHERE token_hash = ? AND revoked_at IS NULL').get(hash)
      return row ? toAdminToken(row) : null
    },
    async list() {
      return db.prepare('SELECT * FROM admin_tokens ORDER BY created_at, id').all().map(toAdminToken)
    },
    async revoke(id, event) {
      return batch.atomic(() => {
        const r = db.prepare('UPDATE admin_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL').run(stamps.iso(), id)
        if (Number(r.changes) === 0) return false
        insertEvent.run(...stamps.audit(event).values)
        return true
      })
    },
  }
}
