/**
 * Portal test helpers: portal users made through the users service (a cheap scrypt setting,
 * which the portal verifies like any other: parameters travel with each hash), a cookie-keeping
 * HTTP client that fills in each form's CSRF token from the page it came from (as a browser
 * does), and the emails the log mailer wrote (no SMTP_URL: each email's text is logged).
 * Also the set-ups and codes that a portal area's HTTP tests and its browser tests share
 * (test/http/portal/ and test/browser/): written once here rather than in each tier.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import type { Running } from './helper.ts'
import { Passwords } from '../../src/services/users/passwords.ts'
import { Users } from '../../src/services/users.ts'
import { isFailure } from '../../src/services/outcome.ts'
import { SYSTEM } from '../../src/domain/accounts.ts'
import type { Role, User } from '../../src/domain/portal.ts'
import type { UsageRow } from '../../src/domain/usage.ts'
import { codeAt, parseSecret, stepAt, totpParams } from '../../src/totp/otp.ts'
import { utcDay } from '../../src/usage/windows.ts'

const cheap = new Passwords({ params: { ln: 10, r: 8, p: 1 } })

/** The users service of each app, over its store and clock, hashing cheaply. */
const usersOf = new WeakMap<Running, Users>()

function users(app: Running): Users {
  let made = usersOf.get(app)
  if (made === undefined) {
    made = new Users({ store: app.store, config: app.config, pepper: app.pepper, accounts: app.accounts, passwords: cheap, now: app.clock.now })
    usersOf.set(app, made)
  }
  return made
}

export interface PortalUserInput {
  readonly email?: string
  readonly password?: string
  readonly operator?: boolean
  /** Made a member of this account (default: the app's own test account) with this role; null: of none. */
  readonly accountId?: string | null
  readonly role?: Role
}

export interface PortalUser {
  readonly user: User
  readonly email: string
  readonly password: string
}

/** portalUser creates an active, confirmed user (and membership) through the users service. */
export async function portalUser(app: Running, input: PortalUserInput = {}): Promise<PortalUser> {
  const email = input.email ?? `user-${randomBytes(4).toString('hex')}@example.com`
  const password = input.password ?? 'correct horse battery staple'
  const accountId = input.accountId === undefined ? app.accountId : input.accountId
  const user = await users(app).admin.createUser(
    { actor: SYSTEM },
    { email, password, operator: input.operator ?? false },
    accountId === null ? undefined : { accountId, role: input.role ?? 'owner' },
  )
  assert.ok(!isFailure(user), isFailure(user) ? user.message : '')
  return { user, email, password }
}

export interface Answer {
  readonly status: number
  readonly text: string
  readonly headers: Headers
  /** Where a redirect leads (the Location header), or null. */
  readonly location: string | null
}

/**
 * PortalClient: one browser's worth of cookies, without a browser. `post` takes the CSRF
 * token from the last page fetched (or from `from`, fetched first), as a form would carry it.
 */
export class PortalClient {
  readonly #base: string
  readonly #cookies = new Map<string, string>()
  last: Answer | null = null

  constructor(base: string) {
    this.#base = base
  }

  get cookieHeader(): string {
    return [...this.#cookies].map(([k, v]) => `${k}=${v}`).join('; ')
  }

  cookie(name: string): string | undefined {
    return this.#cookies.get(name)
  }

  async #fetch(path: string, init: RequestInit = {}): Promise<Answer> {
    const headers = new Headers(init.headers)
    if (this.#cookies.size > 0) headers.set('cookie', this.cookieHeader)
    const res = await fetch(`${this.#base}${path}`, { ...init, headers, redirect: 'manual' })
    for (const line of res.headers.getSetCookie()) {
      const [pair] = line.split(';')
      const eq = pair!.indexOf('=')
      const name = pair!.slice(0, eq)
      const value = pair!.slice(eq + 1)
      if (/Max-Age=0/i.test(line) || value === '') this.#cookies.delete(name)
      else this.#cookies.set(name, value)
    }
    const answer = { status: res.status, text: await res.text(), headers: res.headers, location: res.headers.get('location') }
    this.last = answer
    return answer
  }

  get(path: string): Promise<Answer> {
    return this.#fetch(path)
  }

  /** follow: GET, then follow redirects (at most 5) to the page they lead to. */
  async follow(path: string): Promise<Answer> {
    let answer = await this.get(path)
    for (let i = 0; i < 5 && answer.location !== null; i++) answer = await this.get(answer.location.replace(this.#base, ''))
    return answer
  }

  /** csrf: the CSRF token of the last page (its first form's). */
  csrf(): string {
    const m = /name="_csrf" value="([^"]+)"/.exec(this.last?.text ?? '')
    assert.ok(m, 'the page has a form with a CSRF token')
    return m[1]!
  }

  /** post sends a form (urlencoded) from this site, with the CSRF token of `from` (fetched first) or of the last page. */
  async post(path: string, fields: Record<string, string>, options: { from?: string; csrf?: boolean; origin?: string } = {}): Promise<Answer> {
    if (options.from !== undefined) await this.get(options.from)
    const body = new URLSearchParams(options.csrf === false ? fields : { _csrf: this.csrf(), ...fields })
    return this.#fetch(path, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: options.origin ?? this.#base },
      body: body.toString(),
    })
  }

  /** signIn signs in through the form; asserts it worked (a redirect away from sign-in). */
  async signIn(email: string, password: string): Promise<Answer> {
    const answer = await this.post('/portal/sign-in', { email, password }, { from: '/portal/sign-in' })
    assert.equal(answer.status, 303, `signed in as ${email}: ${answer.text.slice(0, 300)}`)
    return answer
  }
}

/** signedInClient: a new client signed in as a new user of the app's test account (or as given). */
export async function signedInClient(app: Running, input: PortalUserInput = {}): Promise<{ client: PortalClient } & PortalUser> {
  const made = await portalUser(app, input)
  const client = new PortalClient(app.url)
  await client.signIn(made.email, made.password)
  return { client, ...made }
}

export interface LoggedMail {
  readonly to: string
  readonly subject: string
  readonly text: string
}

/** mails: the emails the log mailer wrote so far (to `to`, when given), oldest first. */
export function mails(app: Running, to?: string): LoggedMail[] {
  const out: LoggedMail[] = []
  for (const line of app.logs) {
    if (!line.includes('email not sent (SMTP_URL is unset)')) continue
    const entry = JSON.parse(line) as LoggedMail
    if (to === undefined || entry.to.toLowerCase() === to.toLowerCase()) out.push(entry)
  }
  return out
}

/** linkIn: the first portal link in an email's text (asserted to be there). */
export function linkIn(mail: LoggedMail | undefined): string {
  assert.ok(mail, 'an email was sent')
  const m = /https?:\/\/\S+\/portal\/\S+/.exec(mail.text)
  assert.ok(m, `the email has a portal link: ${mail.text}`)
  return m[0]
}

/** waitForMail waits (up to 2 s) for an email to `to` (emails are sent in the background). */
export async function waitForMail(app: Running, to: string, count = 1): Promise<LoggedMail> {
  for (let i = 0; i < 100; i++) {
    const found = mails(app, to)
    if (found.length >= count) return found[count - 1]!
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  throw new Error(`no email #${count} to ${to}`)
}

/** teamOf: the path of an account's team page (the test account's, unless given). */
export const teamOf = (app: Running, accountId = app.accountId) => `/portal/accounts/${accountId}/team`

/** askedFor: a fresh account with a key and a pending request for TOTP in eu (and us). */
export async function askedFor(app: Running, name: string) {
  const ctx = { actor: SYSTEM }
  const account = await app.accounts.createAccount(ctx, { name })
  assert.ok(!isFailure(account))
  for (const region of ['eu', 'us'] as const) assert.ok(!isFailure(await app.accounts.setSubscription(ctx, account.id, region, 'totp', 'pending')))
  const issued = await app.accounts.issueKey(ctx, account.id, { name: 'k' })
  assert.ok(!isFailure(issued))
  return { account, apiKey: issued.apiKey }
}

/** STEP_MS: the step of the portal's two-factor codes, by which a test moves the app's clock to the next code. */
export const STEP_MS = 30_000

/** codeOf: the code an authenticator app shows now (app time) for a secret as the page writes it. */
export function codeOf(app: Running, secret: string, offsetSteps = 0): string {
  return codeAt(totpParams(parseSecret(secret)!), stepAt(app.clock.now(), 30) + offsetSteps)
}

/** wrongCodeOf: six digits that are no code of the window around now. */
export function wrongCodeOf(app: Running, secret: string): string {
  const window = new Set([-1, 0, 1].map((s) => codeOf(app, secret, s)))
  for (let n = 0; ; n++) {
    const guess = String(n).padStart(6, '0')
    if (!window.has(guess)) return guess
  }
}

const DAY = 86_400_000

/** seedUsage: a second key, and usage over 100 days of both keys in two regions and both groups. */
export async function seedUsage(app: Running): Promise<{ rows: UsageRow[]; otherKeyId: string }> {
  const other = await app.accounts.issueKey({ actor: SYSTEM }, app.accountId, { name: '=HYPERLINK("http://evil.example")' })
  if (isFailure(other)) throw new Error(other.message)
  const today = app.clock.now()
  const rows: UsageRow[] = []
  for (const ago of [0, 1, 2, 6, 29, 30, 45, 89, 90, 120]) {
    const day = utcDay(today - ago * DAY)
    rows.push({ accountId: app.accountId, keyId: app.keyId, region: 'eu', day, group: 'totp', count: 100 + ago, units: 100 + ago })
    rows.push({ accountId: app.accountId, keyId: app.keyId, region: 'us', day, group: 'totp', count: 7, units: 7 })
    rows.push({ accountId: app.accountId, keyId: other.key.id, region: 'eu', day, group: 'converter', count: 3 + ago, units: 5 * (3 + ago) })
  }
  await app.store.usage.add(rows)
  return { rows, otherKeyId: other.key.id }
}
