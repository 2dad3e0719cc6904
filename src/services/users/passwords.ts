/**
 * Portal passwords: scrypt (node:crypto, RFC 7914) with one of OWASP's equal-strength
 * settings (N=2^15, r=8, p=3: 32 MiB a hash; N=2^17, r=8, p=1 needs 128 MiB for the same
 * work). It runs in libuv's thread pool, never on the event loop, and at most `concurrency`
 * hashes run at once (more wait in a bounded queue, then are refused): a burst of sign-ins
 * cannot take every pool thread (files, DNS, zlib share them) nor the memory.
 *
 * Hashes are stored with their parameters, PHC style: `$scrypt$ln=15,r=8,p=3$<salt>$<hash>`
 * (base64 without padding), so that a later, stronger setting can verify the old ones and
 * rehash them at the next sign-in (`needsRehash`).
 */
import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto'
import { availableParallelism } from 'node:os'

export interface ScryptParams {
  /** log2 of N, the CPU/memory cost. */
  readonly ln: number
  readonly r: number
  readonly p: number
}

export const DEFAULT_PARAMS: ScryptParams = Object.freeze({ ln: 15, r: 8, p: 3 })
/** The shortest password accepted (NIST SP 800-63B asks for at least 8; a portal guarding API keys asks more). */
export const MIN_PASSWORD_LENGTH = 12
/** The longest: any passphrase fits, and a megabyte of "password" is refused before any work. */
export const MAX_PASSWORD_LENGTH = 1024

const KEY_BYTES = 32
const SALT_BYTES = 16
const ENCODED = /^\$scrypt\$ln=(\d{1,2}),r=(\d{1,2}),p=(\d{1,2})\$([A-Za-z0-9+/]{22})\$([A-Za-z0-9+/]{43})$/

/** PasswordsBusy: the queue of hashes is full; the caller answers 503 with Retry-After. */
export class PasswordsBusy extends Error {
  constructor() {
    super('too many password checks at once')
    this.name = 'PasswordsBusy'
  }
}

/** checkPassword says what is wrong with a new password, or null. */
export function checkPassword(password: string): string | null {
  const length = [...password].length
  if (length < MIN_PASSWORD_LENGTH) return `at least ${MIN_PASSWORD_LENGTH} characters`
  if (length > MAX_PASSWORD_LENGTH) return `at most ${MAX_PASSWORD_LENGTH} characters`
  return null
}

function derive(password: string, salt: Buffer, params: ScryptParams): Promise<Buffer> {
  const N = 2 ** params.ln
  return new Promise((resolve, reject) => {
    scrypt(password.normalize('NFKC'), salt, KEY_BYTES, { N, r: params.r, p: params.p, maxmem: 256 * N * params.r }, (error, key) => {
      if (error) reject(error)
      else resolve(key)
    })
  })
}

/**
 * Lane: whose hash it is. `sign-in` (signing in, and a signed-in user's own password checks
 * and changes) and `sign-up` (new sign-ups: anyone can send them) each have slots and a queue
 * of their own: a flood of sign-ups fills only its own queue (then is refused, writing
 * nothing), a sign-in never queues behind one, and no sign-up hash starts while a sign-in
 * hashes or waits (so a sign-in shares the cores with at most the one sign-up hash it found
 * running).
 */
export type Lane = 'sign-in' | 'sign-up'

export interface PasswordsOptions {
  readonly params?: ScryptParams
  /**
   * Sign-in hashes at once (default: half the CPUs, at least 1, at most 2 (half of libuv's
   * default pool of 4)): each hash is 32 MiB and a core's worth of work for tens of
   * milliseconds, and the event loop must keep a core (bench/signin.ts: with two at once on
   * two cores, /totp/ping's p99 under a storm of sign-ins was 306 ms against 79 ms with one).
   */
  readonly concurrency?: number
  /** Sign-in hashes that may wait (default 64); past that, PasswordsBusy. */
  readonly queue?: number
  /** Sign-up hashes at once (default 1: sign-ups are few, and SIGNUP_MAX bounds them an hour). */
  readonly signUpConcurrency?: number
  /** Sign-up hashes that may wait (default 16); past that, PasswordsBusy for the sign-up (which writes nothing). */
  readonly signUpQueue?: number
}

/**
 * Slots: at most `concurrency` pieces of work at once, `queue` more waiting in order, the
 * rest refused; and none started while `yieldTo` says another lane is busy (`resume` starts
 * what waited, once it is not).
 */
class Slots {
  readonly #concurrency: number
  readonly #queueLimit: number
  readonly #yieldTo: () => boolean
  readonly #waiting: (() => void)[] = []
  #running = 0

  constructor(concurrency: number, queue: number, yieldTo: () => boolean = () => false) {
    this.#concurrency = concurrency
    this.#queueLimit = queue
    this.#yieldTo = yieldTo
  }

  /** busy: work runs or waits here. */
  get busy(): boolean {
    return this.#running > 0 || this.#waiting.length > 0
  }

  async run<T>(work: () => Promise<T>, done: () => void): Promise<T> {
    if (this.#running >= this.#concurrency || this.#waiting.length > 0 || this.#yieldTo()) {
      if (this.#waiting.length >= this.#queueLimit) throw new PasswordsBusy()
      // Resolved by resume, which counts the slot as taken.
      await new Promise<void>((resolve) => this.#waiting.push(resolve))
    } else this.#running++
    try {
      return await work()
    } finally {
      this.#running--
      this.resume()
      done()
    }
  }

  /** resume starts waiting work while there are free slots and nothing to yield to. */
  resume(): void {
    while (this.#waiting.length > 0 && this.#running < this.#concurrency && !this.#yieldTo()) {
      this.#running++
      this.#waiting.shift()!()
    }
  }
}

export class Passwords {
  readonly #params: ScryptParams
  readonly #lanes: Readonly<Record<Lane, Slots>>
  /** A hash of nothing anyone knows, verified against when the email is unknown: the answer takes as long either way. */
  #dummy: Promise<string> | undefined

  constructor(opts: PasswordsOptions = {}) {
    this.#params = opts.params ?? DEFAULT_PARAMS
    const signIn = new Slots(opts.concurrency ?? Math.min(2, Math.max(1, Math.floor(availableParallelism() / 2))), opts.queue ?? 64)
    // A sign-up hash starts only while no sign-in hashes or waits: the cores are the sign-ins' first.
    const signUp = new Slots(opts.signUpConcurrency ?? 1, opts.signUpQueue ?? 16, () => signIn.busy)
    this.#lanes = { 'sign-in': signIn, 'sign-up': signUp }
  }

  #slot<T>(work: () => Promise<T>, lane: Lane): Promise<T> {
    // When a sign-in ends, sign-ups that yielded to it may start.
    return this.#lanes[lane].run(work, () => {
      if (lane === 'sign-in') this.#lanes['sign-up'].resume()
    })
  }

  /** hash makes the stored form of a password. */
  async hash(password: string, lane: Lane = 'sign-in'): Promise<string> {
    const salt = randomBytes(SALT_BYTES)
    const key = await this.#slot(() => derive(password, salt, this.#params), lane)
    const b64 = (b: Buffer) => b.toString('base64').replace(/=+$/, '')
    const { ln, r, p } = this.#params
    return `$scrypt$ln=${ln},r=${r},p=${p}$${b64(salt)}$${b64(key)}`
  }

  /**
   * verify checks a password against a stored hash (null: no such user, checked against a
   * dummy hash so that the time says nothing). False for a malformed hash.
   */
  async verify(password: string, encoded: string | null, lane: Lane = 'sign-in'): Promise<boolean> {
    if (password.length > MAX_PASSWORD_LENGTH * 4) return false
    if (encoded === null) {
      this.#dummy ??= this.hash(randomBytes(16).toString('hex'))
      await this.verify(password, await this.#dummy, lane)
      return false
    }
    const m = ENCODED.exec(encoded)
    if (m === null) return false
    const params = { ln: Number(m[1]), r: Number(m[2]), p: Number(m[3]) }
    if (params.ln < 10 || params.ln > 20 || params.r < 1 || params.p < 1) return false
    const expected = Buffer.from(m[5]!, 'base64')
    const key = await this.#slot(() => derive(password, Buffer.from(m[4]!, 'base64'), params), lane)
    return key.length === expected.length && timingSafeEqual(key, expected)
  }

  /** needsRehash: the hash was made with other parameters than today's (rehash it at a successful sign-in). */
  needsRehash(encoded: string): boolean {
    const m = ENCODED.exec(encoded)
    const { ln, r, p } = this.#params
    return m === null || Number(m[1]) !== ln || Number(m[2]) !== r || Number(m[3]) !== p
  }
}
