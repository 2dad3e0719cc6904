/**
 * sealedPortal keeps portal users' TOTP secrets sealed in the store (the keyring, bound to the
 * user's id), and gives the portal's code users whose `totpSecret` is the secret itself, as
 * before: the one place that knows. A secret written before sealing (plain base32) is read as
 * it is and sealed by the next `encryption rotate`. A sealed secret that does not open fails
 * the request (closed: never read as "no second factor").
 */
import type { PortalStore } from '../../storage/ports.ts'
import type { SsoProvider, User, UserPatch } from '../../domain/portal.ts'
import { resealValue, type Keyring } from '../../crypto/keyring.ts'

const SEALED = /^v\d{1,9}\./

export const portalSecretContext = (userId: string): string[] => ['portal-user-totp', userId]
export const ssoSecretContext = (providerId: string): string[] => ['sso-client-secret', providerId]

/** isSealed tells a sealed secret from one written before sealing. */
export const isSealed = (stored: string): boolean => SEALED.test(stored)

export function sealedPortal(portal: PortalStore, keyring: Keyring): PortalStore {
  const seal = (userId: string, secret: string | null | undefined) =>
    secret === null || secret === undefined ? secret : keyring.seal(Buffer.from(secret, 'utf8'), portalSecretContext(userId))
  const sealPatch = (userId: string, patch: UserPatch): UserPatch => ('totpSecret' in patch ? { ...patch, totpSecret: seal(userId, patch.totpSecret) } : patch)
  const open = <T extends User | null>(user: T): T => {
    if (user === null || user.totpSecret === null || !isSealed(user.totpSecret)) return user
    return { ...user, totpSecret: keyring.open(user.totpSecret, portalSecretContext(user.id)).toString('utf8') }
  }
  const openProvider = (p: SsoProvider): SsoProvider =>
    p.clientSecret === null ? p : { ...p, clientSecret: keyring.open(p.clientSecret, ssoSecretContext(p.id)).toString('utf8') }
  return {
    ...portal,
    createUser: (user, audit) => portal.createUser({ ...user, totpSecret: seal(user.id, user.totpSecret) ?? null }, audit),
    findUserByEmail: async (email) => open(await portal.findUserByEmail(email)),
    getUser: async (id) => open(await portal.getUser(id)),
    updateUser: async (id, patch, audit) => open(await portal.updateUser(id, sealPatch(id, patch), audit)),
    changeUser: async (id, change) => {
      const changed = await portal.changeUser(id, change.patch === undefined ? change : { ...change, patch: sealPatch(id, change.patch) })
      return changed === null ? null : { ...changed, user: open(changed.user) }
    },
    listUsers: async (query) => {
      const page = await portal.listUsers(query)
      return { ...page, items: page.items.map(open) }
    },
    findSsoIdentity: async (providerId, subject) => {
      const found = await portal.findSsoIdentity(providerId, subject)
      return found === null ? null : { ...found, user: open(found.user) }
    },
    createSsoUser: (user, identity, audit) => portal.createSsoUser({ ...user, totpSecret: seal(user.id, user.totpSecret) ?? null }, identity, audit),
    // A provider's client secret, sealed bound to its id; opened when one provider is read for its flow (a secret that does
    // not open fails that sign-in), never by a list: the sign-in page lists every provider, and one unreadable secret must not
    // take every sign-in (a password's too) down with it. A listed provider's `clientSecret` is the sealed value.
    saveSsoProvider: (provider, audit) =>
      portal.saveSsoProvider(
        {
          ...provider,
          clientSecret: provider.clientSecret === null ? null : keyring.seal(Buffer.from(provider.clientSecret, 'utf8'), ssoSecretContext(provider.id)),
        },
        audit,
      ),
    getSsoProvider: async (id) => {
      const found = await portal.getSsoProvider(id)
      return found === null ? null : openProvider(found)
    },
    findSession: async (idHash, nowIso) => {
      const found = await portal.findSession(idHash, nowIso)
      return found === null ? null : { ...found, user: open(found.user) }
    },
  }
}

/** resealPortalSecrets seals every user's TOTP secret under the active key version (a plain one too); returns how many, and those that do not open. */
export async function resealPortalSecrets(portal: PortalStore, keyring: Keyring): Promise<{ resealed: number; unreadable: { id: string; reason: string }[] }> {
  let resealed = 0
  const unreadable: { id: string; reason: string }[] = []
  let cursor: string | undefined
  do {
    const page = await portal.listUsers({ limit: 500, ...(cursor === undefined ? {} : { cursor }) })
    for (const user of page.items) {
      const stored = user.totpSecret
      if (stored === null || (isSealed(stored) && keyring.versionOf(stored) === keyring.active)) continue
      const context = portalSecretContext(user.id)
      // One kept plain (before sealing) is sealed as it is.
      const next = isSealed(stored) ? resealValue(keyring, stored, context) : { sealed: keyring.seal(Buffer.from(stored, 'utf8'), context) }
      if ('unreadable' in next) unreadable.push({ id: user.id, reason: next.unreadable })
      else if (await portal.resealTotpSecret(user.id, stored, next.sealed)) resealed++
    }
    cursor = page.next ?? undefined
  } while (cursor !== undefined)
  // Single sign-on providers' client secrets, under the same key.
  for (const provider of await portal.listSsoProviders()) {
    const stored = provider.clientSecret
    if (stored === null || keyring.versionOf(stored) === keyring.active) continue
    const next = resealValue(keyring, stored, ssoSecretContext(provider.id))
    if ('unreadable' in next) unreadable.push({ id: `sso-provider:${provider.id}`, reason: next.unreadable })
    else if (await portal.resealSsoSecret(provider.id, stored, next.sealed)) resealed++
  }
  return { resealed, unreadable }
}
