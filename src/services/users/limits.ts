/**
 * PortalLimits: how much one source, and everyone together, may make the portal do before
 * anyone has proved anything (sign-ups, and the emails they and password resets send). The
 * counts live in the store's VerificationStore, like the sign-in throttle's: Redis when
 * configured, so every node shares them; else SQLite or PostgreSQL.
 *
 * - A sign-up is counted against its source (an IPv4 address, or an IPv6 address's /64) and
 *   against the service's total, per clock hour, before any work: a refused one costs no
 *   password hash, writes no user or account and sends nothing.
 * - An email to an address that has not asked for it (a reset, a new confirmation link, "you
 *   already have an account") goes at most once per address per window, and resets at most
 *   `PORTAL_MAIL_IP_MAX` times an hour per source: an attacker cannot turn the portal into a
 *   mail cannon against one inbox, nor spray many. The pages say the same either way.
 *
 * Each count is the store's one atomic step (`settle`): however many requests arrive at once,
 * no more than the limit get through.
 */
import type { LockPolicy } from '../../domain/lockout.ts'
import type { Store } from '../../storage/ports.ts'
import type { Config } from '../../config/config.ts'
import { emailKey } from '../../domain/portal.ts'
import { keyedDigest, type Pepper } from '../../crypto/keyed.ts'
import { sourceOf } from './throttle.ts'

const HOUR_MS = 3_600_000

/** What an email is about: a window of its own each, so that signing up does not hold back a reset. */
export type MailKind = 'reset' | 'sign-up'

export class PortalLimits {
  readonly #store: Store
  readonly #config: Config
  readonly #now: () => number
  readonly #pepper: Pepper

  constructor(store: Store, config: Config, now: () => number, pepper: Pepper) {
    this.#store = store
    this.#config = config
    this.#now = now
    this.#pepper = pepper
  }

  /** signUp counts a sign-up from `ip`: 0 when it may go on, else the seconds until it may be tried again. */
  async signUp(ip: string): Promise<number> {
    const bySource = this.#hourly('signup-ip', sourceOf(ip), this.#config.signupIpMax)
    const byAll = this.#hourly('signup-all', 'all', this.#config.signupMax)
    // Spent allowances refuse on a read: a flood past them costs the store no write.
    const limits = [bySource, byAll].filter((l) => l !== null)
    const now = this.#now()
    if (
      limits.length > 0 &&
      (await this.#store.verification.lockedUntil(
        limits.map((l) => l.key),
        now,
      )) > now
    ) {
      return Math.max(1, Math.ceil((limits[0]!.endsAt - now) / 1000))
    }
    const wait = await this.#take(bySource)
    if (wait > 0) return wait
    const waitAll = await this.#take(byAll)
    // Refused by the total, the sign-up was not made: the source's count takes it back.
    if (waitAll > 0 && bySource !== null) await this.#store.verification.forgive(bySource.key, bySource.policy)
    return waitAll
  }

  /**
   * mail: whether an email of `kind` may go to `email` now (counted when it may). With `ip`,
   * the source's hourly allowance is counted first (a refused source does not use up the
   * address's window).
   */
  async mail(kind: MailKind, email: string, ip?: string): Promise<boolean> {
    if (ip !== undefined && (await this.#take(this.#hourly('mail-ip', sourceOf(ip), this.#config.portalMailIpMax))) > 0) return false
    const window = this.#config.portalMailWindowSeconds
    // One failure locks for the window (base and cap alike): the first call gets through, the rest wait for the window's end.
    const policy: LockPolicy = { maxFailures: 1, baseSeconds: window, maxSeconds: window }
    const key = `portal:mail:${kind}:${this.#digest(`mail-${kind}`, emailKey(email))}`
    const now = this.#now()
    // Within the window, a read refuses: a flood of requests for one address costs the store no write.
    if ((await this.#store.verification.lockedUntil([key], now)) > 0) return false
    return (await this.#store.verification.settle(key, null, now, policy)).kind !== 'locked'
  }

  /** An hourly allowance of `max` under a key of its own (null: no limit). */
  #hourly(kind: string, value: string, max: number): { key: string; policy: LockPolicy; endsAt: number } | null {
    if (max === 0) return null
    const hour = Math.floor(this.#now() / HOUR_MS)
    return {
      key: `portal:${kind}:${this.#digest(kind, value)}:${hour}`,
      policy: { maxFailures: max, baseSeconds: 3600, maxSeconds: 3600 },
      endsAt: (hour + 1) * HOUR_MS,
    }
  }

  /** #take counts one against an allowance: 0 when it was within it, else the seconds until its hour ends. */
  async #take(limit: { key: string; policy: LockPolicy; endsAt: number } | null): Promise<number> {
    if (limit === null) return 0
    const now = this.#now()
    const verdict = await this.#store.verification.settle(limit.key, null, now, limit.policy)
    return verdict.kind === 'locked' ? Math.max(1, Math.ceil((limit.endsAt - now) / 1000)) : 0
  }

  #digest(kind: string, value: string): string {
    return keyedDigest(this.#pepper, `portal-limit-${kind}`, value)
  }
}
