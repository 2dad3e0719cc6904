/**
 * The SQLite side of single sign-on (part of the PortalStore): providers, the identities bound
 * to users, and authorization requests in flight. Each check and its write is one synchronous
 * function handed to the group commit (part.ts), so a request is taken once and a subject bound once.
 */
import type { DatabaseSync } from 'node:sqlite'
import type { SsoOps } from '../ports.ts'
import { toSsoIdentity, toSsoProvider, toSsoRequest, toUser, newUserValues } from '../rows.ts'
import type { Part } from './part.ts'

const flag = (value: boolean) => (value ? 1 : 0)

function ssoStatements(db: DatabaseSync) {
  return {
    saveProvider: db.prepare(`INSERT INTO sso_providers (id, name, issuer, client_id, client_secret, domains, join_account_id, join_role,
      mfa, password_allowed, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11)
      ON CONFLICT (id) DO UPDATE SET name = excluded.name, issuer = excluded.issuer, client_id = excluded.client_id,
        client_secret = excluded.client_secret, domains = excluded.domains, join_account_id = excluded.join_account_id,
        join_role = excluded.join_role, mfa = excluded.mfa, password_allowed = excluded.password_allowed,
        updated_at = excluded.updated_at`),
    provider: db.prepare('SELECT * FROM sso_providers WHERE id = ?'),
    providers: db.prepare('SELECT * FROM sso_providers ORDER BY id'),
    deleteProvider: [
      'DELETE FROM sso_requests WHERE provider_id = ?1',
      'DELETE FROM sso_identities WHERE provider_id = ?1',
      'DELETE FROM sessions WHERE sso_provider_id = ?1',
    ].map((sql) => db.prepare(sql)),
    deleteProviderRow: db.prepare('DELETE FROM sso_providers WHERE id = ?'),
    live: db.prepare('SELECT count(*) AS n FROM sso_requests WHERE expires_at > ?'),
    evictOldest: db.prepare('DELETE FROM sso_requests WHERE state_hash IN (SELECT state_hash FROM sso_requests ORDER BY expires_at, state_hash LIMIT ?)'),
    liveFrom: db.prepare('SELECT count(*) AS n FROM sso_requests WHERE ip = ? AND expires_at > ?'),
    insertRequest: db.prepare(`INSERT INTO sso_requests (state_hash, provider_id, browser_hash, nonce, verifier, next, link_user_id, ip,
      created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
    takeRequest: db.prepare('DELETE FROM sso_requests WHERE state_hash = ? AND expires_at > ? RETURNING *'),
    pruneRequests: db.prepare('DELETE FROM sso_requests WHERE expires_at <= ?'),
    identity: db.prepare(`SELECT i.provider_id AS i_provider_id, i.subject AS i_subject, i.user_id AS i_user_id, i.email AS i_email,
      i.created_at AS i_created_at, i.last_used_at AS i_last_used_at, u.*
      FROM sso_identities i JOIN users u ON u.id = i.user_id WHERE i.provider_id = ? AND i.subject = ?`),
    identitiesOf: db.prepare('SELECT * FROM sso_identities WHERE user_id = ? ORDER BY provider_id'),
    bind: db.prepare(`INSERT INTO sso_identities (provider_id, subject, user_id, email, created_at, last_used_at)
      VALUES (?1, ?2, ?3, ?4, ?5, ?5)
      ON CONFLICT DO NOTHING`),
    unbind: db.prepare('DELETE FROM sso_identities WHERE user_id = ? AND provider_id = ?'),
    passwordOf: db.prepare('SELECT password_hash FROM users WHERE id = ?'),
    endSessionsVia: db.prepare('DELETE FROM sessions WHERE user_id = ? AND sso_provider_id = ? AND id_hash <> ?'),
    reseal: db.prepare('UPDATE sso_providers SET client_secret = ? WHERE id = ? AND client_secret = ?'),
    touch: db.prepare('UPDATE sso_identities SET last_used_at = ?, email = ? WHERE provider_id = ? AND subject = ?'),
    subjectBound: db.prepare('SELECT 1 FROM sso_identities WHERE provider_id = ? AND subject = ?'),
    insertUser: db.prepare(`INSERT INTO users (id, email, email_key, password_hash, email_verified_at, status, operator, totp_secret,
      totp_enabled_at, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (email_key) DO NOTHING`),
  }
}

const prefixed = (row: Record<string, unknown>, prefix: string): Record<string, unknown> =>
  Object.fromEntries(Object.entries(row).flatMap(([k, v]) => (k.startsWith(prefix) ? [[k.slice(prefix.length), v]] : [])))

type Deps = Pick<Part<unknown>, 'batch' | 'stamps' | 'audit'> & { readonly q: ReturnType<typeof ssoStatements> }

export function ssoOps(p: Part<unknown>): SsoOps {
  const d: Deps = { ...p, q: ssoStatements(p.db) }
  return { ...providerOps(d), ...requestOps(d), ...identityOps(d) }
}

function providerOps(d: Deps): Pick<SsoOps, 'saveSsoProvider' | 'getSsoProvider' | 'listSsoProviders' | 'deleteSsoProvider' | 'resealSsoSecret'> {
  const { q, batch, stamps, audit } = d
  return {
    async saveSsoProvider(provider, event) {
      const now = stamps.iso()
      return batch.atomic(() => {
        const old = q.provider.get(provider.id)
        // Another issuer is another namespace of subjects: what was bound under the old one goes (OpenID Connect Core 5.7).
        if (old !== undefined && old.issuer !== provider.issuer) for (const statement of q.deleteProvider) statement.run(provider.id)
        q.saveProvider.run(
          provider.id,
          provider.name,
          provider.issuer,
          provider.clientId,
          provider.clientSecret,
          provider.domains.join(','),
          provider.joinAccountId,
          provider.joinRole,
          provider.mfa,
          flag(provider.passwordAllowed),
          now,
        )
        audit(event)
        return old === undefined
      })
    },
    async getSsoProvider(id) {
      const row = q.provider.get(id)
      return row ? toSsoProvider(row) : null
    },
    async listSsoProviders() {
      return q.providers.all().map(toSsoProvider)
    },
    async deleteSsoProvider(id, event) {
      return batch.atomic(() => {
        if (q.provider.get(id) === undefined) return false
        for (const statement of q.deleteProvider) statement.run(id)
        q.deleteProviderRow.run(id)
        audit(event)
        return true
      })
    },
    async resealSsoSecret(id, from, to) {
      return Number((await batch.run(() => q.reseal.run(to, id, from))).changes) > 0
    },
  }
}

function requestOps(d: Deps): Pick<SsoOps, 'createSsoRequest' | 'takeSsoRequest' | 'pruneSsoRequests'> {
  const { q, batch } = d
  return {
    async createSsoRequest(r, limits, nowIso) {
      return batch.atomic(() => {
        if (Number(q.liveFrom.get(r.ip, nowIso)!.n) >= limits.perIp) return false
        // At the total, the oldest give way (abandoned ones, most likely): a flood from many sources cannot shut every sign-in out.
        const live = Number(q.live.get(nowIso)!.n)
        if (live >= limits.total) q.evictOldest.run(live - limits.total + 1)
        q.insertRequest.run(r.stateHash, r.providerId, r.browserHash, r.nonce, r.verifier, r.next, r.linkUserId, r.ip, nowIso, r.expiresAt)
        return true
      })
    },
    async takeSsoRequest(stateHash, nowIso) {
      const row = await batch.run(() => q.takeRequest.get(stateHash, nowIso))
      return row ? toSsoRequest(row) : null
    },
    async pruneSsoRequests(nowIso) {
      return Number((await batch.run(() => q.pruneRequests.run(nowIso))).changes)
    },
  }
}

function identityOps(
  d: Deps,
): Pick<SsoOps, 'findSsoIdentity' | 'ssoIdentitiesOf' | 'bindSsoIdentity' | 'unbindSsoIdentity' | 'createSsoUser' | 'touchSsoIdentity'> {
  const { q, batch, stamps, audit } = d
  return {
    async findSsoIdentity(providerId, subject) {
      const row = q.identity.get(providerId, subject)
      return row ? { identity: toSsoIdentity(prefixed(row, 'i_')), user: toUser(row) } : null
    },
    async ssoIdentitiesOf(userId) {
      return q.identitiesOf.all(userId).map(toSsoIdentity)
    },
    async bindSsoIdentity(identity, event) {
      const now = stamps.iso()
      return batch.atomic(() => {
        if (q.provider.get(identity.providerId) === undefined) return false
        if (Number(q.bind.run(identity.providerId, identity.subject, identity.userId, identity.email, now).changes) === 0) return false
        audit(event)
        return true
      })
    },
    async unbindSsoIdentity(userId, providerId, keepSession, event) {
      return batch.atomic(() => {
        const identities = q.identitiesOf.all(userId)
        if (!identities.some((i) => i.provider_id === providerId)) return 'none'
        if (identities.length === 1 && q.passwordOf.get(userId)?.password_hash == null) return 'last'
        q.unbind.run(userId, providerId)
        q.endSessionsVia.run(userId, providerId, keepSession)
        audit(event)
        return 'unbound'
      })
    },
    async createSsoUser(user, identity, event) {
      return batch.atomic(() => {
        if (q.provider.get(identity.providerId) === undefined || q.subjectBound.get(identity.providerId, identity.subject) !== undefined) return false
        const made = q.insertUser.run(...newUserValues(user, flag), user.createdAt)
        if (Number(made.changes) === 0) return false
        q.bind.run(identity.providerId, identity.subject, user.id, identity.email, user.createdAt)
        audit(event)
        return true
      })
    },
    async touchSsoIdentity(providerId, subject, email, nowIso) {
      await batch.run(() => q.touch.run(nowIso, email, providerId, subject))
    },
  }
}
