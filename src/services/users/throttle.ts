/**
 * SignInThrottle slows password guessing on the portal's sign-in form, per account (the
 * email tried, known or not: the same limit either way, so it tells nothing about who has
 * an account) and per source address, in the store's VerificationStore: Redis when
 * configured, so every node shares one count; else SQLite or PostgreSQL.
 *
 * After OWASP's Authentication cheat sheet and The Copenhagen Book (login throttling):
 * - each attempt is counted before its password is checked, in the store's one atomic step
 *   (`settle`), so that 100 attempts sent at once get no more checks than the policy allows
 *   (a check, then a count after the hash, would let all of them through);
 * - while an email or an address is locked, no hash is computed, and the refusal only reads
 *   (`lockedUntil`): a flood against a locked account costs the store no write;
 * - the delay doubles with each failure past the threshold, up to a cap (a temporary lock:
 *   a permanent one would let anyone lock anyone out);
 * - a success ends the email's run; it does not end the address's run (an attacker with an
 *   account of their own could otherwise wipe the count between guesses): it is only not
 *   counted (`forgive`). Below its threshold that leaves an address as it was; past it, the
 *   success was waited for like any attempt, and the next attempt waits the run's delay again;
 * - the address's run is per clock hour, so that the users behind one shared address (a
 *   company's NAT) are not held back by failures of days ago;
 * - keys are keyed digests (HMAC under the pepper) of the email and of the address, never
 *   either in clear, in a namespace the TOTP verification keys cannot meet.
 */
import { createHash } from 'node:crypto'
import { isIPv4, isIPv6 } from 'node:net'
import type { LockPolicy, Verdict } from '../../domain/lockout.ts'
import type { Store } from '../../storage/ports.ts'
import type { Config } from '../../config/config.ts'
import { keyedDigest, type Pepper } from '../../crypto/keyed.ts'

/** The span of an address's run of failures (the email's run ends with a success). */
export const ADDRESS_WINDOW_MS = 3_600_000

interface Limit {
  readonly key: string
  readonly policy: LockPolicy
}

/** sourceOf: what an address limit applies to: an IPv4 address (also written IPv4-mapped), or an IPv6 address's /64, which any one subscriber holds whole. */
export function sourceOf(ip: string): string {
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(ip)
  if (mapped) return mapped[1]!
  if (isIPv4(ip) || !isIPv6(ip.split('%')[0]!)) return ip
  return `${hextets(ip).slice(0, 4).join(':')}::/64`
}

/** hextets: the eight groups of an IPv6 address, in one spelling (lowercase, no leading zeros). */
function hextets(ip: string): string[] {
  const bare = ip.split('%')[0]!.toLowerCase()
  const groups = (part: string) =>
    part === ''
      ? []
      : part.split(':').flatMap((g) => {
          if (!g.includes('.')) return [g]
          const [a, b, c, d] = g.split('.').map(Number) as [number, number, number, number]
          return [((a << 8) | b).toString(16), ((c << 8) | d).toString(16)]
        })
  const gap = bare.indexOf('::')
  const head = groups(gap < 0 ? bare : bare.slice(0, gap))
  const tail = gap < 0 ? [] : groups(bare.slice(gap + 2))
  const all = [...head, ...Array<string>(8 - head.length - tail.length).fill('0'), ...tail]
  return all.map((g) => parseInt(g, 16).toString(16))
}

const secondsFrom = (nowMs: number, untilMs: number) => Math.max(1, Math.ceil((untilMs - nowMs) / 1000))
const lockEnd = (verdict: Verdict) => (verdict.kind === 'locked' ? verdict.lockedUntil : 0)

export class SignInThrottle {
  readonly #store: Store
  readonly #now: () => number
  readonly #pepper: Pepper | null
  readonly #email: LockPolicy
  /** null: no limit per address (SIGNIN_IP_MAX_FAILURES=0). */
  readonly #address: LockPolicy | null

  /** `pepper` keys the digests; without one (tools, tests) they are plain SHA-256, as safe as the emails are hard to guess. */
  constructor(store: Store, config: Config, now: () => number, pepper?: Pepper) {
    this.#store = store
    this.#now = now
    this.#pepper = pepper ?? null
    const delays = { baseSeconds: config.signinLockBaseSeconds, maxSeconds: config.signinLockMaxSeconds }
    this.#email = { maxFailures: config.signinMaxFailures, ...delays }
    this.#address = config.signinIpMaxFailures === 0 ? null : { maxFailures: config.signinIpMaxFailures, ...delays }
  }

  /**
   * blocked: seconds until this email or address may try again, or 0. At 0 the attempt has
   * been counted (as a failure, until `settle` says otherwise): call `settle` or `release`
   * after it. No hash should be computed when it is not 0.
   */
  async blocked(email: string, ip: string): Promise<number> {
    const now = this.#now()
    const limits = this.#limits(email, ip, now)
    const v = this.#store.verification
    const locked = await this.#lockedUntil(limits, now)
    if (locked > 0) return secondsFrom(now, locked)
    const verdicts = await Promise.all(limits.map((l) => v.settle(l.key, null, now, l.policy)))
    const until = Math.max(...verdicts.map(lockEnd))
    if (until === 0) return 0
    // Refused by one limit, the attempt was not tried: the other limits take it back.
    await Promise.all(limits.filter((_, i) => verdicts[i]!.kind !== 'locked').map((l) => v.forgive(l.key, l.policy)))
    return secondsFrom(now, until)
  }

  /**
   * settle records the outcome of an attempt `blocked` let through (`ok`: the right password
   * of an existing user) and returns the seconds to wait before the next attempt, or 0.
   */
  async settle(email: string, ip: string, ok: boolean): Promise<number> {
    const now = this.#now()
    const limits = this.#limits(email, ip, now)
    const v = this.#store.verification
    if (ok) {
      const [byEmail, ...byAddress] = limits
      await Promise.all([v.clear(byEmail!.key), ...byAddress.map((l) => v.forgive(l.key, l.policy))])
      return 0
    }
    // The failure was counted by `blocked`: only the wait is left to tell.
    const until = await this.#lockedUntil(limits, now)
    return until > 0 ? secondsFrom(now, until) : 0
  }

  /** forget ends an email's run of failures and its lock (a password reset proved the address). */
  async forget(email: string): Promise<void> {
    const [byEmail] = this.#limits(email, '0.0.0.0', this.#now())
    await this.#store.verification.clear(byEmail!.key)
  }

  /** release takes back an attempt `blocked` counted that was never checked (the password queue was full). */
  async release(email: string, ip: string): Promise<void> {
    const v = this.#store.verification
    await Promise.all(this.#limits(email, ip, this.#now()).map((l) => v.forgive(l.key, l.policy)))
  }

  /** #lockedUntil: when the last lock of `limits` ends, or 0; one read of the store for all. */
  #lockedUntil(limits: readonly Limit[], now: number): Promise<number> {
    return this.#store.verification.lockedUntil(
      limits.map((l) => l.key),
      now,
    )
  }

  /**
   * The email's limit, then the address's (when on). The address's run is that of the hour
   * `now` falls in (an attempt that spans the hour's end is taken back from the next hour's
   * run, which has nothing to take: the old hour keeps one failure too many).
   */
  #limits(email: string, ip: string, now: number): Limit[] {
    const limits: Limit[] = [{ key: `signin:email:${this.#digest('signin-email', email)}`, policy: this.#email }]
    if (this.#address !== null) {
      const hour = Math.floor(now / ADDRESS_WINDOW_MS)
      limits.push({ key: `signin:ip:${this.#digest('signin-ip', sourceOf(ip))}:${hour}`, policy: this.#address })
    }
    return limits
  }

  #digest(kind: string, value: string): string {
    return this.#pepper === null ? createHash('sha256').update(`${kind}:${value}`).digest('base64url') : keyedDigest(this.#pepper, kind, value)
  }
}
