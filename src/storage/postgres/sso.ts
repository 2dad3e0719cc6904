/**
 * The PostgreSQL side of single sign-on (part of the PortalStore): providers, the identities
 * bound to users, and authorization requests in flight. A request is taken by one DELETE …
 * RETURNING (once, whoever asks at the same time); the counts of live requests (a source's and
 * all) and the new one are made under one transaction-scoped advisory lock; a subject is bound
 * once and a user once per provider by the table's two unique keys.
 */
import type { SsoOps } from '../ports.ts'
import { toSsoIdentity, toSsoProvider, toSsoRequest, toUser, type Row, newUserValues } from '../rows.ts'
import { auditInsert, type Part } from './part.ts'

const prefixed = (row: Row, prefix: string): Row =>
  Object.fromEntries(Object.entries(row).flatMap(([k, v]) => (k.startsWith(prefix) ? [[k.slice(prefix.length), v]] : [])))

/** foreignKeyGone: PostgreSQL's foreign key violation (a provider deleted by another node as an identity was written for it). */
const foreignKeyGone = (error: unknown) => (error as { code?: string }).code === '23503'

/** Undo: thrown inside a transaction to roll it back when a later write of the step found its row taken. */
class Undo extends Error {}

export function ssoOps(p: Part): SsoOps {
  return { ...providerOps(p), ...requestOps(p), ...identityOps(p) }
}

function providerOps(d: Part): Pick<SsoOps, 'saveSsoProvider' | 'getSsoProvider' | 'listSsoProviders' | 'deleteSsoProvider' | 'resealSsoSecret'> {
  const { query, stamps, audited } = d
  return {
    async saveSsoProvider(p, event) {
      const { rows } = await query(
        null,
        `
        WITH old AS (SELECT issuer FROM sso_providers WHERE id = $1),
        -- Another issuer is another namespace of subjects: what was bound under the old one goes (OpenID Connect Core 5.7).
        moved AS (SELECT 1 FROM old WHERE issuer <> $3),
        r AS (DELETE FROM sso_requests WHERE provider_id = $1 AND EXISTS (SELECT 1 FROM moved)),
        i AS (DELETE FROM sso_identities WHERE provider_id = $1 AND EXISTS (SELECT 1 FROM moved)),
        s AS (DELETE FROM sessions WHERE sso_provider_id = $1 AND EXISTS (SELECT 1 FROM moved)),
        p AS (INSERT INTO sso_providers (id, name, issuer, client_id, client_secret, domains, join_account_id, join_role, mfa,
            password_allowed, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)
          ON CONFLICT (id) DO UPDATE SET name = excluded.name, issuer = excluded.issuer, client_id = excluded.client_id,
            client_secret = excluded.client_secret, domains = excluded.domains, join_account_id = excluded.join_account_id,
            join_role = excluded.join_role, mfa = excluded.mfa, password_allowed = excluded.password_allowed,
            updated_at = excluded.updated_at
          RETURNING (xmax = 0) AS created),
        e AS (${auditInsert(12, 'p')})
        SELECT created FROM p`,
        [
          p.id,
          p.name,
          p.issuer,
          p.clientId,
          p.clientSecret,
          p.domains.join(','),
          p.joinAccountId,
          p.joinRole,
          p.mfa,
          p.passwordAllowed,
          stamps.iso(),
          ...audited(event),
        ],
      )
      return rows[0]!.created === true
    },
    async getSsoProvider(id) {
      const { rows } = await query('sso-provider', 'SELECT * FROM sso_providers WHERE id = $1', [id])
      return rows[0] ? toSsoProvider(rows[0]) : null
    },
    async listSsoProviders() {
      const { rows } = await query('sso-providers', 'SELECT * FROM sso_providers ORDER BY id COLLATE "C"')
      return rows.map(toSsoProvider)
    },
    async deleteSsoProvider(id, event) {
      const { rows } = await query(
        null,
        `
        WITH r AS (DELETE FROM sso_requests WHERE provider_id = $1),
        i AS (DELETE FROM sso_identities WHERE provider_id = $1),
        s AS (DELETE FROM sessions WHERE sso_provider_id = $1),
        p AS (DELETE FROM sso_providers WHERE id = $1 RETURNING id),
        e AS (${auditInsert(2, 'p')})
        SELECT id FROM p`,
        [id, ...audited(event)],
      )
      return rows.length > 0
    },
    async resealSsoSecret(id, from, to) {
      return ((await query(null, 'UPDATE sso_providers SET client_secret = $3 WHERE id = $1 AND client_secret = $2', [id, from, to])).rowCount ?? 0) > 0
    },
  }
}

function requestOps(d: Part): Pick<SsoOps, 'createSsoRequest' | 'takeSsoRequest' | 'pruneSsoRequests'> {
  const { query, transaction } = d
  return {
    async createSsoRequest(r, limits, nowIso) {
      return transaction(async (tx) => {
        // One lock for every start: the total is counted too (starts are few: a person's click each).
        await tx('sso-request-lock', "SELECT pg_advisory_xact_lock(hashtextextended('sso-requests', 0))")
        const { rows } = await tx(
          'sso-requests-live',
          'SELECT count(*) FILTER (WHERE ip = $1)::int AS n, count(*)::int AS total FROM sso_requests WHERE expires_at > $2',
          [r.ip, nowIso],
        )
        if (Number(rows[0]!.n) >= limits.perIp) return false
        // At the total, the oldest give way (abandoned ones, most likely): a flood from many sources cannot shut every sign-in out.
        const live = Number(rows[0]!.total)
        if (live >= limits.total)
          await tx(
            'sso-requests-evict',
            'DELETE FROM sso_requests WHERE state_hash IN (SELECT state_hash FROM sso_requests ORDER BY expires_at, state_hash COLLATE "C" LIMIT $1)',
            [live - limits.total + 1],
          )
        await tx(
          'sso-request-create',
          `INSERT INTO sso_requests (state_hash, provider_id, browser_hash, nonce, verifier, next, link_user_id, ip, created_at, expires_at)
          VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
          [r.stateHash, r.providerId, r.browserHash, r.nonce, r.verifier, r.next, r.linkUserId, r.ip, nowIso, r.expiresAt],
        )
        return true
      })
    },
    async takeSsoRequest(stateHash, nowIso) {
      const { rows } = await query('sso-request-take', 'DELETE FROM sso_requests WHERE state_hash = $1 AND expires_at > $2 RETURNING *', [stateHash, nowIso])
      return rows[0] ? toSsoRequest(rows[0]) : null
    },
    async pruneSsoRequests(nowIso) {
      return (await query(null, 'DELETE FROM sso_requests WHERE expires_at <= $1', [nowIso])).rowCount ?? 0
    },
  }
}

function identityOps(
  d: Part,
): Pick<SsoOps, 'findSsoIdentity' | 'ssoIdentitiesOf' | 'bindSsoIdentity' | 'unbindSsoIdentity' | 'createSsoUser' | 'touchSsoIdentity'> {
  const { query, transaction, stamps, audited } = d
  return {
    async findSsoIdentity(providerId, subject) {
      const { rows } = await query(
        'sso-identity',
        `SELECT i.provider_id AS i_provider_id, i.subject AS i_subject, i.user_id AS i_user_id, i.email AS i_email,
          i.created_at AS i_created_at, i.last_used_at AS i_last_used_at, u.*
        FROM sso_identities i JOIN users u ON u.id = i.user_id WHERE i.provider_id = $1 AND i.subject = $2`,
        [providerId, subject],
      )
      return rows[0] ? { identity: toSsoIdentity(prefixed(rows[0], 'i_')), user: toUser(rows[0]) } : null
    },
    async ssoIdentitiesOf(userId) {
      const { rows } = await query('sso-identities-of', 'SELECT * FROM sso_identities WHERE user_id = $1 ORDER BY provider_id COLLATE "C"', [userId])
      return rows.map(toSsoIdentity)
    },
    async bindSsoIdentity(identity, event) {
      try {
        const { rows } = await query(
          null,
          `
          WITH i AS (INSERT INTO sso_identities (provider_id, subject, user_id, email, created_at, last_used_at)
            VALUES ($1, $2, $3, $4, $5, $5) ON CONFLICT DO NOTHING RETURNING 1),
          e AS (${auditInsert(6, 'i')})
          SELECT 1 FROM i`,
          [identity.providerId, identity.subject, identity.userId, identity.email, stamps.iso(), ...audited(event)],
        )
        return rows.length > 0
      } catch (error) {
        if (foreignKeyGone(error)) return false
        throw error
      }
    },
    async unbindSsoIdentity(userId, providerId, keepSession, event) {
      return transaction(async (tx) => {
        // The user's row locked first: two unlinks of one user go one after the other, and the second sees the first's.
        const user = await tx('sso-unbind-lock', 'SELECT password_hash FROM users WHERE id = $1 FOR UPDATE', [userId])
        const { rows } = await tx('sso-unbind-identities', 'SELECT provider_id FROM sso_identities WHERE user_id = $1', [userId])
        if (!rows.some((r) => r.provider_id === providerId)) return 'none'
        if (rows.length === 1 && (user.rows[0]?.password_hash ?? null) === null) return 'last'
        await tx('sso-unbind', 'DELETE FROM sso_identities WHERE user_id = $1 AND provider_id = $2', [userId, providerId])
        await tx('sso-unbind-sessions', 'DELETE FROM sessions WHERE user_id = $1 AND sso_provider_id = $2 AND id_hash <> $3', [userId, providerId, keepSession])
        await tx(null, auditInsert(1, null), audited(event))
        return 'unbound'
      })
    },
    async createSsoUser(user, identity, event) {
      try {
        return await transaction(async (tx) => {
          const made = await tx(
            null,
            `INSERT INTO users (id, email, email_key, password_hash, email_verified_at, status, operator, totp_secret, totp_enabled_at, created_at,
              updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10) ON CONFLICT (email_key) DO NOTHING RETURNING id`,
            [...newUserValues(user, (b) => b)],
          )
          if (made.rows.length === 0) return false
          const bound = await tx(
            null,
            `INSERT INTO sso_identities (provider_id, subject, user_id, email, created_at, last_used_at)
            VALUES ($1, $2, $3, $4, $5, $5) ON CONFLICT DO NOTHING RETURNING 1`,
            [identity.providerId, identity.subject, user.id, identity.email, user.createdAt],
          )
          if (bound.rows.length === 0) throw new Undo()
          await tx(null, auditInsert(1, null), audited(event))
          return true
        })
      } catch (error) {
        if (error instanceof Undo || foreignKeyGone(error)) return false
        throw error
      }
    },
    async touchSsoIdentity(providerId, subject, email, nowIso) {
      await query('sso-identity-touch', 'UPDATE sso_identities SET last_used_at = $3, email = $4 WHERE provider_id = $1 AND subject = $2', [
        providerId,
        subject,
        nowIso,
        email,
      ])
    },
  }
}
