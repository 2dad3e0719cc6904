/**
 * What the chaos load needs, made as the tests and the soak make it: an admin token through the
 * accounts service (as the CLI makes one), the load account through the admin API of a node
 * (bench/soak/accounts.ts: subscribed, no plan limits, the passkey relying party set, a key), a
 * webhook endpoint at a real receiver that checks every signature (test/support/receiver.ts),
 * portal users through the users service (test/support/portal-helper.ts), and managed TOTP
 * factors and passkeys through the API (created, then activated with their first code, or
 * registered with the soft authenticator).
 */
import type { PublicKeyCredentialCreationOptionsJSON } from '@simplewebauthn/server'
import { loadConfig } from '../../src/config/config.ts'
import { resolvePepper } from '../../src/config/pepper.ts'
import { openStore } from '../../src/storage/factory.ts'
import { Accounts } from '../../src/services/accounts.ts'
import { isFailure } from '../../src/services/outcome.ts'
import { CLI } from '../../src/domain/accounts.ts'
import type { Running } from '../../test/support/helper.ts'
import { codeOf, type Created } from '../../test/support/factors.ts'
import { portalUser } from '../../test/support/portal-helper.ts'
import { listening, type Receiver } from '../../test/support/receiver.ts'
import { SoftAuthenticator } from '../../test/support/soft-authenticator.ts'
import { makeAccount, ORIGIN, RP_ID } from '../soak/accounts.ts'
import type { Cluster } from './nodes.ts'

export interface ManagedUser {
  readonly id: string
  readonly factor: Created
  /** The last time step whose code the run sent for this user (accepted or not): a code is tried once a step. */
  lastStep: number
}

export interface PasskeyUser {
  readonly id: string
  readonly authenticator: SoftAuthenticator
}

export interface Provisioned {
  readonly accountId: string
  readonly key: string
  readonly adminToken: string
  readonly receiver: Receiver
  readonly managed: ManagedUser[]
  /** The user the run guesses wrong codes for, to hold the lockout and the attempt limit to their numbers. */
  readonly guessed: ManagedUser
  readonly passkeys: PasskeyUser[]
  readonly portal: { email: string; password: string }[]
  /** Stops the receiver (at the very end). */
  close(): Promise<void>
}

async function must(res: Response, status: number, what: string): Promise<Response> {
  if (res.status !== status) throw new Error(`${what}: ${res.status} ${(await res.text()).slice(0, 300)}`)
  return res
}

/** enrol creates a managed TOTP factor for `userId` and activates it with its first code. */
async function enrol(base: string, key: string, userId: string): Promise<ManagedUser> {
  const headers = { 'x-api-key': key, 'content-type': 'application/x-www-form-urlencoded' }
  const path = `/totp/users/${encodeURIComponent(userId)}/factors`
  const created = await must(await fetch(base + path, { method: 'POST', headers, body: 'applicationID=Chaos' }), 201, `factor of ${userId}`)
  const factor = (await created.json()) as Created
  const now = Date.now()
  const token = codeOf(factor, now)
  await must(await fetch(`${base}${path}/${factor.factorID}/activate`, { method: 'POST', headers, body: `token=${token}` }), 200, `activation of ${userId}`)
  return { id: userId, factor, lastStep: Math.floor(now / 1000 / factor.tokenValidity) }
}

/** register gives `userId` one passkey through the API, made by a soft authenticator of the account's relying party. */
async function register(base: string, key: string, userId: string): Promise<PasskeyUser> {
  const authenticator = new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID })
  const headers = { 'x-api-key': key, 'content-type': 'application/json' }
  const at = `${base}/totp/users/${encodeURIComponent(userId)}/passkeys/registration`
  const asked = await must(await fetch(`${at}/options`, { method: 'POST', headers, body: '{}' }), 200, `passkey options of ${userId}`)
  const { options } = (await asked.json()) as { options: PublicKeyCredentialCreationOptionsJSON }
  const credential = authenticator.register(options)
  await must(await fetch(at, { method: 'POST', headers, body: JSON.stringify({ credential }) }), 201, `passkey of ${userId}`)
  return { id: userId, authenticator }
}

/** inBatches runs `make` for 0..count-1, `width` at a time. */
async function inBatches<T>(count: number, width: number, make: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = []
  for (let start = 0; start < count; start += width) {
    out.push(...(await Promise.all(Array.from({ length: Math.min(width, count - start) }, (_, j) => make(start + j)))))
  }
  return out
}

export interface Sizes {
  readonly managedUsers: number
  readonly passkeyUsers: number
  readonly portalUsers: number
}

export async function provision(env: Record<string, string>, dataDir: string, cluster: Cluster, sizes: Sizes): Promise<Provisioned> {
  const config = loadConfig({ ...env, DATA_DIR: dataDir })
  const store = await openStore(config)
  const cleanups: (() => unknown)[] = []
  try {
    const accounts = new Accounts({ store, pepper: resolvePepper(config), config })
    const token = await accounts.createAdminToken({ actor: CLI }, { name: 'chaos', scope: 'write' })
    if (isFailure(token)) throw new Error(token.message)
    const first = cluster.nodes[0]!
    const account = await makeAccount(first.adminUrl, token.secret, 'Chaos load', 0, false)
    const receiver = await listening({ store, config, accountId: account.id }, { after: (fn) => cleanups.push(fn) })
    // portalUser reads only these members of a running app: the store, settings, pepper, accounts service, clock and account.
    const app = { store, config, pepper: resolvePepper(config), accounts, clock: { now: Date.now }, accountId: account.id } as unknown as Running
    const portal = await inBatches(sizes.portalUsers, 4, async (i) => {
      const made = await portalUser(app, { email: `chaos-${i}@example.com`, role: 'owner' })
      return { email: made.email, password: made.password }
    })
    const base = (i: number) => cluster.nodes[i % cluster.nodes.length]!.url
    const managed = await inBatches(sizes.managedUsers, 10, (i) => enrol(base(i), account.key, `managed-${i}`))
    const guessed = await enrol(first.url, account.key, 'guessed')
    const passkeys = await inBatches(sizes.passkeyUsers, 10, (i) => register(base(i), account.key, `passkey-${i}`))
    return {
      accountId: account.id,
      key: account.key,
      adminToken: token.secret,
      receiver,
      managed,
      guessed,
      passkeys,
      portal,
      close: async () => {
        for (const fn of cleanups) await fn()
      },
    }
  } finally {
    await store.close()
  }
}
