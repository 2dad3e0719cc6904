/**
 * `node bench/portal.ts`: the developer portal's account pages against the issue's target,
 * every page under 100 ms p95, for a large account: 1 000 keys, 50 members, 90 days of usage
 * of every key (several groups and regions), a few thousand audit events.
 *
 * For each store, the embedded SQLite always and PostgreSQL when BENCH_DATABASE_URL (or
 * TEST_DATABASE_URL) is set (a scratch database, dropped after): it seeds the store through
 * the accounts layer and the store's own ports, starts the real server (src/server.ts) on it,
 * signs an owner in through the sign-in form (a real session), and fetches each page
 * BENCH_PORTAL_REQUESTS times (default 60), one request at a time on a keep-alive connection,
 * each timed by the client from the request to the last byte of its body (so the figure
 * includes sending the page, not just making it). Pages this branch does not have yet answer
 * 404 and are printed as "missing", not failed. GET /totp/ping, measured the same way in the
 * same run (before and after the pages), is the baseline every figure is also given against.
 *
 * It prints a table per store and a PASS/FAIL line per page, and exits 0 either way: a bench,
 * not a test. Answers are checked (the usage page's and the CSV's totals are the seeded ones)
 * so that a figure is never the time of an error.
 */
import { randomBytes } from 'node:crypto'
import type { ChildProcess } from 'node:child_process'
import pg from 'pg'
import { onEachStore } from './stores.ts'
import { generator } from './admin.ts'
import { loadConfig, type Config } from '../src/config/config.ts'
import { resolvePepper } from '../src/config/pepper.ts'
import { openStore } from '../src/storage/factory.ts'
import { Accounts } from '../src/services/accounts.ts'
import { isFailure } from '../src/services/outcome.ts'
import { SYSTEM, type AuditDraft } from '../src/domain/accounts.ts'
import { GROUPS, REGIONS, groupServedIn, type Group, type Region } from '../src/domain/regions.ts'
import type { Role, User } from '../src/domain/portal.ts'
import type { Store } from '../src/storage/ports.ts'
import type { UsageRow } from '../src/domain/usage.ts'
import { Passwords } from '../src/services/users/passwords.ts'
import { freePort, median, pinned, serve } from './load.ts'

const KEYS = 1_000
const MEMBERS = 50
const DAYS = 90
/** Audit events written besides those the seeding itself makes (a key.create per key, a member.add per member, …). */
const EXTRA_EVENTS = 2_000
const REQUESTS = Number(process.env.BENCH_PORTAL_REQUESTS ?? 60)
const TARGET_MS = 100
const PEPPER = randomBytes(24).toString('hex')
const PASSWORD = 'correct horse battery staple'
const DAY = 86_400_000
const hex = (bytes: number) => randomBytes(bytes).toString('hex')
const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10)

interface Seeded {
  readonly accountId: string
  readonly ownerEmail: string
  /** A key for the baseline (GET /totp/ping). */
  readonly apiKey: string
  /** Calls seeded per UTC day. */
  readonly callsByDay: ReadonlyMap<string, number>
  readonly events: number
}

/** inBatches runs `work` for every item, `size` at a time (the stores group concurrent commits). */
async function inBatches<T>(items: readonly T[], size: number, work: (item: T, index: number) => Promise<unknown>): Promise<void> {
  for (let i = 0; i < items.length; i += size) await Promise.all(items.slice(i, i + size).map((item, j) => work(item, i + j)))
}

/** seed fills a migrated store with the large account, through the accounts layer and the store's ports. */
export async function seed(store: Store, accounts: Accounts, config: Config, nowMs: number): Promise<Seeded> {
  const ctx = { actor: SYSTEM }
  const account = await accounts.createAccount(ctx, { name: 'Globex Platform Ltd' })
  if (isFailure(account)) throw new Error(account.message)
  for (const region of REGIONS) {
    for (const group of GROUPS) if (groupServedIn(group, region)) await accounts.setSubscription(ctx, account.id, region, group, 'active')
  }
  // No throttle in the way of the baseline; a monthly quota, so that the usage page shows one.
  await accounts.setPlan(ctx, account.id, { rate: 0, quota: 1e12, period: 'month' })

  const users: User[] = []
  const iso = new Date(nowMs).toISOString()
  const cheap = new Passwords({ params: { ln: 10, r: 8, p: 1 } })
  const ownerHash = await cheap.hash(PASSWORD)
  for (let i = 0; i < MEMBERS; i++) {
    users.push({
      id: `usr_${hex(8)}`,
      email: `member-${i}@globex.example`,
      passwordHash: i === 0 ? ownerHash : null,
      emailVerifiedAt: iso,
      status: 'active',
      operator: false,
      totpSecret: null,
      totpEnabledAt: null,
      createdAt: iso,
      updatedAt: iso,
    })
  }
  const roles: Role[] = ['owner', 'admin', 'developer', 'viewer']
  await inBatches(users, 25, async (user, i) => {
    const draft: AuditDraft = {
      actor: 'cli',
      action: 'user.create',
      target: { type: 'user', id: user.id },
      accountId: null,
      ip: null,
      outcome: 'success',
      detail: {},
    }
    if (!(await store.portal.createUser(user, draft))) throw new Error(`user ${user.email} not created`)
    const role = i === 0 ? 'owner' : roles[i % roles.length]!
    await store.portal.addMember(account.id, user.id, role, {
      ...draft,
      action: 'member.add',
      target: { type: 'member', id: user.id },
      accountId: account.id,
      detail: { role },
    })
  })

  const keyIds: string[] = []
  await inBatches(
    Array.from({ length: KEYS }, (_, k) => k),
    100,
    async (k) => {
      const by = { actor: { type: 'portal-user' as const, id: users[k % 10]!.id }, ip: `10.0.0.${k % 250}` }
      const issued = await accounts.issueKey(by, account.id, { name: `service ${k + 1}` })
      if (isFailure(issued)) throw new Error(issued.message)
      keyIds[k] = issued.key.id
    },
  )
  // The baseline's key, of another account: its calls count in that account's usage, not in the one measured.
  const other = await accounts.createAccount(ctx, { name: 'Baseline' })
  if (isFailure(other)) throw new Error(other.message)
  await accounts.setSubscription(ctx, other.id, config.region, 'totp', 'active')
  await accounts.setPlan(ctx, other.id, { rate: 0, quota: 0 })
  const baselineKey = await accounts.issueKey(ctx, other.id, { name: 'baseline' })
  if (isFailure(baselineKey)) throw new Error(baselineKey.message)
  const apiKey = baselineKey.apiKey

  const rand = generator(13)
  const actors = [...users.slice(0, 10).map((u) => `portal-user:${u.id}`), `admin-token:adm_${hex(8)}`, 'cli']
  const actions: [string, 'key' | 'subscription' | 'user'][] = [
    ['key.roll', 'key'],
    ['subscription.set', 'subscription'],
    ['user.sign-in', 'user'],
    ['key.revoke', 'key'],
  ]
  await inBatches(
    Array.from({ length: EXTRA_EVENTS }, (_, i) => i),
    100,
    async (i) => {
      const [action, type] = actions[i % actions.length]!
      const actor = actors[Math.floor(rand() * actors.length)]!
      await store.audit.append({
        actor,
        action,
        target: { type, id: type === 'key' ? keyIds[i % KEYS]! : type === 'user' ? users[i % MEMBERS]!.id : `${account.id}/eu/totp` },
        accountId: account.id,
        ip: actor === 'cli' ? null : `10.1.${i % 256}.${Math.floor(rand() * 256)}`,
        outcome: i % 17 === 0 ? 'failure' : 'success',
        detail:
          action === 'key.roll'
            ? { graceSeconds: 3600, newKeyId: `key_${hex(8)}` }
            : action === 'subscription.set'
              ? { region: 'eu', group: 'totp', status: 'active', was: 'inactive' }
              : {},
      })
    },
  )

  // 90 days of every key's use, as the gateway's flushes leave it: totp in the key's home region
  // (and a second region for one key in five), the conversion group (eu, units by pages) for one in three.
  const callsByDay = new Map<string, number>()
  const useRand = generator(7)
  for (let d = 0; d < DAYS; d++) {
    const day = dayOf(nowMs - d * DAY)
    const rows: UsageRow[] = []
    const row = (keyId: string, region: Region, group: Group, count: number, units: number) => {
      rows.push({ accountId: account.id, keyId, region, day, group, count, units })
      callsByDay.set(day, (callsByDay.get(day) ?? 0) + count)
    }
    keyIds.forEach((keyId, k) => {
      const totp = 20 + Math.floor(useRand() * 5000)
      row(keyId, REGIONS[k % 3]!, 'totp', totp, totp)
      if (k % 5 === 0) row(keyId, REGIONS[(k + 1) % 3]!, 'totp', 1 + Math.floor(useRand() * 500), 1)
      if (k % 3 === 0) {
        const calls = 1 + Math.floor(useRand() * 200)
        row(keyId, 'eu', 'converter', calls, calls * (1 + Math.floor(useRand() * 20)))
      }
    })
    await store.usage.add(rows)
  }
  const events = await countEvents(store, account.id)
  return { accountId: account.id, ownerEmail: users[0]!.email, apiKey, callsByDay, events }
}

async function countEvents(store: Store, accountId: string): Promise<number> {
  let n = 0
  let cursor: string | null = null
  do {
    const page = await store.audit.list({ accountId, limit: 1000, ...(cursor === null ? {} : { cursor }) })
    n += page.items.length
    cursor = page.next
  } while (cursor !== null)
  return n
}

// Measuring -------------------------------------------------------------------------------

const p95 = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.ceil(s.length * 0.95) - 1)]!
}

/** Browser: one signed-in browser's cookies, without a browser, on fetch's keep-alive connections. */
class Browser {
  readonly base: string
  readonly #cookies = new Map<string, string>()

  constructor(base: string) {
    this.base = base
  }

  async request(path: string, init: RequestInit = {}): Promise<{ ms: number; status: number; body: string; location: string | null }> {
    const headers = new Headers(init.headers)
    if (this.#cookies.size > 0) headers.set('cookie', [...this.#cookies].map(([k, v]) => `${k}=${v}`).join('; '))
    const t0 = performance.now()
    const res = await fetch(this.base + path, { ...init, headers, redirect: 'manual' })
    const body = await res.text()
    const ms = performance.now() - t0
    for (const line of res.headers.getSetCookie()) {
      const [pair] = line.split(';')
      const eq = pair!.indexOf('=')
      this.#cookies.set(pair!.slice(0, eq), pair!.slice(eq + 1))
    }
    return { ms, status: res.status, body, location: res.headers.get('location') }
  }

  /** signIn posts the sign-in form with the CSRF token of the page it came from, as a browser does. */
  async signIn(email: string, password: string): Promise<void> {
    const form = await this.request('/portal/sign-in')
    const csrf = /name="_csrf" value="([^"]+)"/.exec(form.body)?.[1]
    if (csrf === undefined) throw new Error('the sign-in page has no form')
    const res = await this.request('/portal/sign-in', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: this.base },
      body: new URLSearchParams({ _csrf: csrf, email, password }).toString(),
    })
    if (res.status !== 303 || res.location !== '/portal/home') throw new Error(`sign-in answered ${res.status}: ${res.body.slice(0, 200)}`)
  }
}

interface Row {
  name: string
  path: string
  times: number[]
  status: number
  bytes: number
}

async function waitForPing(base: string, apiKey: string, child: ChildProcess): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if (child.exitCode !== null) throw new Error(`the server exited (${child.exitCode})`)
    try {
      const res = await fetch(`${base}/totp/ping`, { headers: { 'x-api-key': apiKey } })
      await res.arrayBuffer()
      if (res.ok) return
    } catch {
      /* not up yet */
    }
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error('the server did not come up')
}

async function measure(browser: Browser, seeded: Seeded, problems: string[]): Promise<{ rows: Row[]; baseline: number[] }> {
  const id = encodeURIComponent(seeded.accountId)
  const now = Date.now()
  const from90 = dayOf(now - (DAYS - 1) * DAY)
  const pages: [string, string][] = [
    ['home', '/portal/home'],
    ['start', `/portal/accounts/${id}/start`],
    ['keys', `/portal/accounts/${id}/keys`],
    ['subscriptions', `/portal/accounts/${id}/subscriptions`],
    ['usage, 90 days', `/portal/accounts/${id}/usage?days=90`],
    ['usage per key, 90 days (first 100 keys)', `/portal/accounts/${id}/usage/keys?days=90`],
    ['usage.csv (30 days by day)', `/portal/accounts/${id}/usage.csv`],
    ['usage.csv (90 days by key)', `/portal/accounts/${id}/usage.csv?from=${from90}&to=${dayOf(now)}&by=key`],
    ['audit', `/portal/accounts/${id}/audit`],
    ['audit, action=key.create', `/portal/accounts/${id}/audit?action=key.create`],
    ['team', `/portal/accounts/${id}/team`],
  ]
  const ping = async (n: number) => {
    const times: number[] = []
    for (let i = 0; i < n; i++) {
      const r = await browser.request('/totp/ping', { headers: { 'x-api-key': seeded.apiKey } })
      if (r.status !== 200) problems.push(`GET /totp/ping answered ${r.status}`)
      times.push(r.ms)
    }
    return times
  }
  // Warm-up: the JIT, prepared statements, the store's caches.
  await ping(200)
  for (const [, path] of pages) for (let i = 0; i < 5; i++) await browser.request(path)
  // The baseline in two halves, before and after the pages: a drift of the machine's speed shows in it.
  const baseline = await ping(250)
  const rows: Row[] = []
  for (const [name, path] of pages) {
    const times: number[] = []
    let last = { status: 0, body: '' }
    for (let i = 0; i < REQUESTS; i++) {
      const r = await browser.request(path)
      times.push(r.ms)
      last = r
      if (r.status !== 200 && r.status !== 404) problems.push(`${path} answered ${r.status}: ${r.body.slice(0, 200)}`)
    }
    rows.push({ name, path, times, status: last.status, bytes: Buffer.byteLength(last.body) })
    check(name, last.body, seeded, now, problems)
  }
  baseline.push(...(await ping(250)))
  return { rows, baseline }
}

/** check: the usage page and the CSV give the seeded totals. */
function check(name: string, body: string, seeded: Seeded, now: number, problems: string[]): void {
  const calls = (days: number) => [...seeded.callsByDay].reduce((s, [day, c]) => (day >= dayOf(now - (days - 1) * DAY) ? s + c : s), 0)
  if (name === 'usage, 90 days') {
    const shown = /\(UTC\): ([\d,]+) calls/.exec(body)?.[1]?.replace(/,/g, '')
    if (Number(shown) !== calls(DAYS)) problems.push(`the usage page shows ${shown} calls, not ${calls(DAYS)}`)
  }
  if (name.startsWith('usage.csv')) {
    const lines = body.trim().split('\r\n').slice(1)
    const sum = lines.reduce((s, l) => s + Number(l.split(',').at(-2)), 0)
    const expected = calls(name.includes('90') ? DAYS : 30)
    if (sum !== expected) problems.push(`${name} adds up to ${sum} calls, not ${expected}`)
  }
}

function table(title: string, rows: readonly Row[], baseline: readonly number[]): { text: string; verdicts: string[] } {
  const base = p95(baseline)
  const verdicts: string[] = []
  const lines = rows.map((r) => {
    if (r.status === 404) {
      verdicts.push(`missing ${r.name}: ${r.path} answers 404 in this branch`)
      return `| ${r.name} | missing (404) | | | | | |`
    }
    const p = p95(r.times)
    const pass = p < TARGET_MS
    verdicts.push(`${pass ? 'PASS' : '!!! FAIL'} ${r.name}: p95 ${p.toFixed(1)} ms (target < ${TARGET_MS} ms)`)
    return `| ${r.name} | ${r.times.length} | ${median(r.times).toFixed(2)} | ${p.toFixed(2)} | ${(p / base).toFixed(1)}× | ${(r.bytes / 1024).toFixed(0)} KiB | ${pass ? 'PASS' : '**FAIL**'} |`
  })
  const text = [
    title,
    '',
    '| page | requests | p50 ms | p95 ms | p95 ÷ baseline p95 | body | target p95 < 100 ms |',
    '| --- | --- | --- | --- | --- | --- | --- |',
    `| baseline: GET /totp/ping | ${baseline.length} | ${median([...baseline]).toFixed(2)} | ${base.toFixed(2)} | 1.0× | | |`,
    ...lines,
    '',
  ].join('\n')
  return { text, verdicts }
}

async function benchStore(label: string, env: Record<string, string>): Promise<string> {
  const t0 = performance.now()
  const config = loadConfig({ NODE_ENV: 'test', PEPPER, ...env })
  const store = await openStore(config, { maintenance: false })
  let seeded: Seeded
  try {
    seeded = await seed(store, new Accounts({ store, pepper: resolvePepper(config), config }), config, Date.now())
  } finally {
    await store.close()
  }
  if (env.DATABASE_URL !== undefined) {
    // A database filled over months has its statistics; one filled in seconds has them only after autovacuum's ANALYZE.
    const client = new pg.Client({ connectionString: env.DATABASE_URL })
    await client.connect()
    await client.query('ANALYZE')
    await client.end()
  }
  const seconds = (performance.now() - t0) / 1000
  const port = await freePort()
  const child = serve('src/server.ts', { ...env, NODE_ENV: 'test', LOG_LEVEL: 'warn', PEPPER, PORT: String(port), ADMIN_LISTEN: 'off' })
  try {
    const browser = new Browser(`http://127.0.0.1:${port}`)
    await waitForPing(browser.base, seeded.apiKey, child)
    await browser.signIn(seeded.ownerEmail, PASSWORD)
    const problems: string[] = []
    const { rows, baseline } = await measure(browser, seeded, problems)
    const title =
      `## Portal pages on ${label}: one account of ${KEYS.toLocaleString('en')} keys, ${MEMBERS} members, ${DAYS} days of usage of every key, ` +
      `${seeded.events.toLocaleString('en')} audit events (seeded in ${seconds.toFixed(1)} s); an owner signed in through the form; ` +
      `each page ${REQUESTS} times, one request at a time on a keep-alive connection, timed by the client to the last byte of the body ` +
      `(${pinned ? 'server pinned to CPU 0, this client to CPU 1' : 'not pinned'})`
    const { text, verdicts } = table(title, rows, baseline)
    return [text, ...verdicts, ...problems.slice(0, 20).map((p) => `!!! WRONG ANSWER on ${label}: ${p}`), ''].join('\n')
  } finally {
    child.kill('SIGTERM')
    await new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r(undefined) : child.once('exit', r)))
  }
}

/** portalBench runs the bench on every store it can reach, printing each store's table as it is done. */
export async function portalBench(): Promise<void> {
  await onEachStore('portal', (name, env) => benchStore(name, env))
}

if (import.meta.main) await portalBench()
