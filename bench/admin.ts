/**
 * BENCH_ONLY=admin (or `node bench/admin.ts` alone): the admin API against the issue's
 * figures: GET /admin/v1/accounts pages through 100 000 accounts at under 50 ms p95 a page,
 * and usage reports over 90 days for an account with 1 000 keys answer under 100 ms p95.
 *
 * For each store, the embedded SQLite always and PostgreSQL when BENCH_DATABASE_URL (or
 * TEST_DATABASE_URL) is set (a scratch database, dropped after): it seeds the store, starts
 * the real server (src/server.ts) on it, and asks the admin API over HTTP, one request at a
 * time on a keep-alive connection (undici), each timed from the request to the last byte of
 * its body. Every figure is also given as a ratio to a baseline measured in the same run:
 * GET /admin/v1/accounts/{id}, one row by primary key behind the same token check and framing.
 *
 * It prints a table per store and a PASS/FAIL line per target, and exits 0 either way: a
 * bench, not a test (a missed target is printed loudly, with its figure). Answers are
 * checked too (every status 200, paging sees every account once, the three kinds of usage
 * report add up to the same units), so that a figure is never the time of an error.
 */
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import type { ChildProcess } from 'node:child_process'
import pg from 'pg'
import { onEachStore } from './stores.ts'
import { loadConfig } from '../src/config/config.ts'
import { resolvePepper } from '../src/config/pepper.ts'
import { openStore, SQLITE_FILE } from '../src/storage/factory.ts'
import { Accounts } from '../src/services/accounts.ts'
import { isFailure } from '../src/services/outcome.ts'
import { SYSTEM } from '../src/domain/accounts.ts'
import type { Region, Group } from '../src/domain/regions.ts'
import type { UsageRow } from '../src/domain/usage.ts'
import { freePort, median, pinned, serve } from './load.ts'

const ACCOUNTS = Number(process.env.BENCH_ADMIN_ACCOUNTS ?? 100_000)
const KEYS = 1_000
/** Requests per usage figure (and for the baseline, several times that). */
const USAGE_REQUESTS = Number(process.env.BENCH_ADMIN_REQUESTS ?? 60)
const PAGE_TARGET_MS = 50
const USAGE_TARGET_MS = 100
const PEPPER = randomBytes(24).toString('hex')
const DAY = 86_400_000

/**
 * The usage account's days of use: whole months, so that both windows below lie inside them.
 * TYPICAL is "the last 90 days" as an operator asks on 22 October: 7 days of daily rows, two
 * whole months from the monthly rollup, 22 days of daily rows. WORST is the worst a 90-day
 * window gets from the rollup: from the 2nd of a month to the 29th of the month after next
 * (30 + 29 days of daily rows around one whole month).
 */
const USAGE_FROM = '2026-07-01'
const USAGE_TO = '2026-10-31'
const WINDOWS = [
  { name: 'typical', from: '2026-07-25', to: '2026-10-22' },
  { name: 'worst', from: '2026-07-02', to: '2026-09-29' },
] as const

// Seeding ---------------------------------------------------------------------------------

/** mulberry32: a small seeded generator, so that every run seeds the same names and counts. */
export function generator(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const FIRST = [
  'Acme',
  'Northwind',
  'Globex',
  'Initech',
  'Umbrella',
  'Stark',
  'Wayne',
  'Wonka',
  'Tyrell',
  'Cyberdyne',
  'Soylent',
  'Hooli',
  'Vandelay',
  'Pied Piper',
  'Aperture',
  'Black Mesa',
  'Oscorp',
  'Gringotts',
  'Monarch',
  'Blue Sun',
  'Nakatomi',
  'Dunder',
  'Sterling',
  'Prestige',
  'Bluth',
  'Krusty',
  'Duff',
  'Gekko',
  'Massive',
  'Octan',
  'Zorg',
  'Rekall',
  'Buy n Large',
  'Virtucon',
  'Spacely',
  'Cogswell',
  'Ollivander',
  'Genco',
  'Wernham',
  'Lunar',
  'Polar',
  'Cedar',
  'Granite',
  'Harbor',
  'Summit',
  'Falcon',
  'Meridian',
  'Atlas',
  'Orion',
  'Vertex',
  'Nimbus',
  'Beacon',
  'Crescent',
  'Evergreen',
  'Silverline',
  'Redwood',
  'Ironbridge',
  'Müller',
  'Søren',
  'Café Olé',
  'Łódź',
  'Zürich',
  'São Paulo',
  'Kraków',
  'Île',
  'Ōsaka',
  'Björk',
  'Niño',
  'Åland',
  'Élan',
]
const SECOND = [
  'Logistics',
  'Labs',
  'Systems',
  'Analytics',
  'Payments',
  'Health',
  'Media',
  'Robotics',
  'Energy',
  'Foods',
  'Travel',
  'Insurance',
  'Software',
  'Consulting',
  'Security',
  'Capital',
  'Retail',
  'Studios',
  'Networks',
  'Bank',
  'Telecom',
  'Pharma',
  'Motors',
  'Aerospace',
  'Holdings',
  'Partners',
  'Digital',
  'Cloud',
  'Data',
  'Games',
  'Education',
  'Legal',
  'Realty',
  'Shipping',
  'Textiles',
  'Farms',
  'Brewing',
  'Records',
  'Clinic',
  'Foundation',
]
const SUFFIX = [' Ltd', ' GmbH', ' Inc.', ' SAS', ' BV', ' LLC', ' AB', ' Oy', ' S.p.A.', ' & Co', '', '', '']
/** A word no other name has: a name filter that matches a handful of accounts out of all of them. */
const RARE = 'Quetzalcoatl'

interface SeedAccount {
  id: string
  name: string
  status: 'active' | 'suspended'
  createdAt: string
  updatedAt: string
}
interface SeedKey {
  id: string
  accountId: string
  name: string
  hash: string
  hint: string
  createdAt: string
  lastUsedAt: string
  lastUsedRegion: Region
}
interface SeedEvent {
  id: string
  at: string
  actor: string
  action: string
  targetType: string
  targetId: string
  accountId: string | null
  ip: string | null
  detail: string
}

interface Seed {
  accounts: SeedAccount[]
  keys: SeedKey[]
  events: SeedEvent[]
  usageAccount: SeedAccount
  /** An account id for the baseline, and a few more to spread its reads. */
  sample: string[]
  counts: { suspended: number; logistics: number; rare: number }
}

const hex = (bytes: number) => randomBytes(bytes).toString('hex')
const isoOf = (ms: number) => new Date(ms).toISOString()

/**
 * makeSeed: the accounts (created over three years, about 10% suspended since, some created in
 * the same millisecond as a bulk import would), the usage account's keys, and the audit trail
 * a store would hold after that: the events of the last 390 days (retention, 400 by default,
 * has removed the older ones; the server would prune them at start-up, amid the measurements).
 */
function makeSeed(nowMs: number): Seed {
  const rand = generator(20261123)
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(rand() * xs.length)]!
  const start = nowMs - 3 * 365 * DAY
  const end = nowMs - DAY
  // Gaps drawn from an exponential (arrivals), one in 2 000 starting a burst of 25 in one millisecond.
  const gaps: number[] = []
  let burst = 0
  for (let i = 0; i < ACCOUNTS; i++) {
    if (burst > 0) {
      burst--
      gaps.push(0)
      continue
    }
    if (rand() < 1 / 2000) burst = 24
    gaps.push(-Math.log(1 - rand()))
  }
  const scale = (end - start) / gaps.reduce((s, g) => s + g, 0)
  const usageIndex = Math.floor(ACCOUNTS * 0.4)
  const rareAt = new Set([Math.floor(ACCOUNTS * 0.05), Math.floor(ACCOUNTS * 0.5), Math.floor(ACCOUNTS * 0.95)])
  const accounts: SeedAccount[] = []
  const events: SeedEvent[] = []
  const admins = [`admin-token:adm_${hex(8)}`, `admin-token:adm_${hex(8)}`, 'cli']
  const since = nowMs - 390 * DAY
  const event = (atMs: number, actor: string, action: string, targetType: string, targetId: string, accountId: string | null, detail: object) => {
    if (atMs >= since) {
      events.push({
        id: '',
        at: isoOf(atMs),
        actor,
        action,
        targetType,
        targetId,
        accountId,
        ip: actor === 'cli' ? null : `10.0.${Math.floor(rand() * 256)}.${Math.floor(rand() * 256)}`,
        detail: JSON.stringify(detail),
      })
    }
  }
  let t = start
  const counts = { suspended: 0, logistics: 0, rare: 0 }
  for (let i = 0; i < ACCOUNTS; i++) {
    t += gaps[i]! * scale
    const createdMs = Math.min(Math.floor(t), end)
    let name = `${pick(FIRST)} ${pick(SECOND)}${pick(SUFFIX)}`
    if (i === usageIndex) name = 'Globex Platform Ltd'
    if (rareAt.has(i)) {
      name = `${RARE} Orbital Foundry`
      counts.rare++
    }
    if (/logistics/i.test(name)) counts.logistics++
    const suspended = i !== usageIndex && rand() < 0.1
    const suspendedMs = suspended ? createdMs + Math.floor(rand() * (nowMs - createdMs)) : createdMs
    if (suspended) counts.suspended++
    const account: SeedAccount = {
      id: `acc_${hex(8)}`,
      name,
      status: suspended ? 'suspended' : 'active',
      createdAt: isoOf(createdMs),
      updatedAt: isoOf(suspendedMs),
    }
    accounts.push(account)
    const actor = pick(admins)
    event(createdMs, actor, 'account.create', 'account', account.id, account.id, { name })
    if (suspended) event(suspendedMs, pick(admins), 'account.suspend', 'account', account.id, account.id, { status: 'suspended' })
    // Some accounts get a plan or a subscription later on: the rest of a trail.
    if (rand() < 0.05) {
      const at = createdMs + Math.floor(rand() * (nowMs - createdMs))
      if (rand() < 0.5) event(at, pick(admins), 'plan.set', 'plan', account.id, account.id, { rate: 10, burst: 20, quota: 100000, period: 'month' })
      else
        event(at, pick(admins), 'subscription.set', 'subscription', `${account.id}:eu:totp`, account.id, {
          region: 'eu',
          group: 'totp',
          status: 'active',
          was: null,
        })
    }
  }
  const usageAccount = accounts[usageIndex]!
  const regions: Region[] = ['eu', 'us', 'apac']
  const keys: SeedKey[] = []
  for (let k = 0; k < KEYS; k++) {
    // Keys made over the 300 days before the usage starts (all of them used every day of it).
    const createdMs = Date.parse(`${USAGE_FROM}T00:00:00Z`) - Math.floor(rand() * 300 * DAY)
    const key: SeedKey = {
      id: `key_${hex(8)}`,
      accountId: usageAccount.id,
      name: `service ${k + 1}`,
      hash: randomBytes(32).toString('base64url'),
      hint: randomBytes(3).toString('base64url'),
      createdAt: isoOf(createdMs),
      lastUsedAt: `${USAGE_TO}T23:59:00.000Z`,
      lastUsedRegion: regions[k % 3]!,
    }
    keys.push(key)
    event(createdMs, pick(admins), 'key.create', 'key', key.id, usageAccount.id, {
      name: key.name,
      expiresAt: null,
      scope: { groups: null, regions: null },
      hint: key.hint,
    })
  }
  // Ids as the store makes them (eventId): the millisecond, a sequence within it, 6 random hex digits.
  events.sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0))
  let lastMs = -1
  let seq = 0
  for (const e of events) {
    const ms = Date.parse(e.at)
    seq = ms === lastMs ? seq + 1 : 0
    lastMs = ms
    e.id = `evt_${ms.toString(16).padStart(12, '0')}${seq.toString(16).padStart(4, '0')}${hex(3)}`
  }
  const sample = Array.from({ length: 64 }, () => accounts[Math.floor(rand() * accounts.length)]!.id)
  return { accounts, keys, events, usageAccount, sample, counts }
}

/**
 * usageRows: every key's use, every day from USAGE_FROM to USAGE_TO, as the gateway would
 * flush it: totp in the key's home region (and a second region for one key in five), the
 * conversion group (eu only, units by pages) for one key in three.
 */
function* usageRows(accountId: string, keys: readonly SeedKey[]): Generator<UsageRow[]> {
  const rand = generator(7)
  const regions: Region[] = ['eu', 'us', 'apac']
  for (let d = Date.parse(`${USAGE_FROM}T00:00:00Z`); d <= Date.parse(`${USAGE_TO}T00:00:00Z`); d += DAY) {
    const day = isoOf(d).slice(0, 10)
    const rows: UsageRow[] = []
    keys.forEach((key, k) => {
      const row = (region: Region, group: Group, count: number, units: number) => rows.push({ accountId, keyId: key.id, region, day, group, count, units })
      const totp = 20 + Math.floor(rand() * 5000)
      row(regions[k % 3]!, 'totp', totp, totp)
      if (k % 5 === 0) {
        const more = 1 + Math.floor(rand() * 500)
        row(regions[(k + 1) % 3]!, 'totp', more, more)
      }
      if (k % 3 === 0) {
        const calls = 1 + Math.floor(rand() * 200)
        row('eu', 'converter', calls, calls * (1 + Math.floor(rand() * 20)))
      }
    })
    yield rows
  }
}

/**
 * seedStore fills a migrated store. Accounts, keys and audit events go in with bulk SQL into
 * the store's own tables (creating 100 000 accounts through the service, one commit each,
 * would take most of the bench's minutes and measure nothing it reports); usage goes through
 * the store's own UsageStore.add, a batch of days at a time, so that the daily, per-key,
 * monthly and per-region rollups agree as the gateway's flushes leave them.
 */
async function seedStore(kind: 'sqlite' | 'postgres', env: Record<string, string>, seed: Seed, dataDir: string): Promise<string> {
  const config = loadConfig({ NODE_ENV: 'test', PEPPER, ...env })
  const store = await openStore(config, { maintenance: false })
  try {
    if (kind === 'sqlite') {
      const db = new DatabaseSync(join(dataDir, SQLITE_FILE))
      db.exec('PRAGMA busy_timeout = 5000')
      db.exec('BEGIN IMMEDIATE')
      const account = db.prepare('INSERT INTO accounts (id, name, status, created_at, updated_at) VALUES (?, ?, ?, ?, ?)')
      for (const a of seed.accounts) account.run(a.id, a.name, a.status, a.createdAt, a.updatedAt)
      const key = db.prepare(`INSERT INTO api_keys (id, account_id, name, key_hash, hint, created_at, last_used_at, last_used_region)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?)`)
      for (const k of seed.keys) key.run(k.id, k.accountId, k.name, k.hash, k.hint, k.createdAt, k.lastUsedAt, k.lastUsedRegion)
      const event = db.prepare(`INSERT INTO audit_events (id, at, actor, action, target_type, target_id, account_id, ip, outcome, detail)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'success', ?)`)
      for (const e of seed.events) event.run(e.id, e.at, e.actor, e.action, e.targetType, e.targetId, e.accountId, e.ip, e.detail)
      db.exec('COMMIT')
      db.close()
    } else {
      const client = new pg.Client({ connectionString: env.DATABASE_URL })
      await client.connect()
      try {
        const chunks = <T>(xs: T[], n: number) => Array.from({ length: Math.ceil(xs.length / n) }, (_, i) => xs.slice(i * n, (i + 1) * n))
        for (const c of chunks(seed.accounts, 20_000)) {
          await client.query(
            `INSERT INTO accounts (id, name, status, created_at, updated_at)
            SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::timestamptz[])`,
            [c.map((a) => a.id), c.map((a) => a.name), c.map((a) => a.status), c.map((a) => a.createdAt), c.map((a) => a.updatedAt)],
          )
        }
        await client.query(
          `INSERT INTO api_keys (id, account_id, name, key_hash, hint, created_at, last_used_at, last_used_region)
          SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::timestamptz[], $8::text[])`,
          [
            seed.keys.map((k) => k.id),
            seed.keys.map((k) => k.accountId),
            seed.keys.map((k) => k.name),
            seed.keys.map((k) => k.hash),
            seed.keys.map((k) => k.hint),
            seed.keys.map((k) => k.createdAt),
            seed.keys.map((k) => k.lastUsedAt),
            seed.keys.map((k) => k.lastUsedRegion),
          ],
        )
        for (const c of chunks(seed.events, 20_000)) {
          await client.query(
            `INSERT INTO audit_events (id, at, actor, action, target_type, target_id, account_id, ip, outcome, detail)
            SELECT id, at, actor, action, target_type, target_id, account_id, ip, 'success', detail::jsonb
            FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[])
              AS t(id, at, actor, action, target_type, target_id, account_id, ip, detail)`,
            [
              c.map((e) => e.id),
              c.map((e) => e.at),
              c.map((e) => e.actor),
              c.map((e) => e.action),
              c.map((e) => e.targetType),
              c.map((e) => e.targetId),
              c.map((e) => e.accountId),
              c.map((e) => e.ip),
              c.map((e) => e.detail),
            ],
          )
        }
      } finally {
        await client.end()
      }
    }
    let batch: UsageRow[] = []
    for (const rows of usageRows(seed.usageAccount.id, seed.keys)) {
      batch.push(...rows)
      if (batch.length >= 15_000) {
        await store.usage.add(batch)
        batch = []
      }
    }
    if (batch.length > 0) await store.usage.add(batch)
    const accounts = new Accounts({ store, pepper: resolvePepper(config), config })
    const created = await accounts.createAdminToken({ actor: SYSTEM }, { name: 'bench', scope: 'read' })
    if (isFailure(created)) throw new Error(created.message)
    return created.secret
  } finally {
    await store.close()
  }
}

// Measuring -------------------------------------------------------------------------------

interface Series {
  name: string
  times: number[]
  target?: number
  note?: string
}

const p95 = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.ceil(s.length * 0.95) - 1)]!
}

class Client {
  readonly base: string
  readonly #headers: Record<string, string>
  readonly problems: string[] = []

  constructor(base: string, token: string) {
    this.base = base
    this.#headers = { authorization: `Bearer ${token}` }
  }

  /** get times one request, from its start to the last byte of its body; a non-200 answer is a problem to report. */
  async get(path: string, accept = 'application/json'): Promise<{ ms: number; body: string }> {
    const t0 = performance.now()
    const res = await fetch(this.base + path, { headers: { ...this.#headers, accept } })
    const body = await res.text()
    const ms = performance.now() - t0
    if (res.status !== 200) this.problems.push(`${path} answered ${res.status}: ${body.slice(0, 200)}`)
    return { ms, body }
  }

  /** pages follows `next` from `path` to the last page; the items' ids and each page's time. */
  async pages(path: string, limit = Infinity): Promise<{ times: number[]; ids: string[] }> {
    const times: number[] = []
    const ids: string[] = []
    let after: string | null = null
    do {
      const sep = path.includes('?') ? '&' : '?'
      const { ms, body } = await this.get(after === null ? path : `${path}${sep}after=${encodeURIComponent(after)}`)
      times.push(ms)
      const page = JSON.parse(body) as { items?: { id: string }[]; next?: string | null }
      if (!Array.isArray(page.items)) break
      for (const item of page.items) ids.push(item.id)
      after = page.next ?? null
    } while (after !== null && times.length < limit)
    return { times, ids }
  }
}

async function waitForAdmin(client: Client, child: ChildProcess): Promise<void> {
  for (let i = 0; i < 400; i++) {
    if (child.exitCode !== null) throw new Error(`the server exited (${child.exitCode})`)
    try {
      const res = await fetch(`${client.base}/admin/v1/openapi.json`)
      await res.arrayBuffer()
      if (res.ok) return
    } catch {
      /* not up yet */
    }
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error('the admin API did not come up')
}

/** measure takes every figure of one server; `unitsByDay` is the units seeded each day, to check the reports by. */
async function measure(client: Client, seed: Seed, unitsByDay: ReadonlyMap<string, number>): Promise<Series[]> {
  const series: Series[] = []
  const check = (ok: boolean, what: string) => {
    if (!ok) client.problems.push(what)
  }
  const baseline = async (n: number) => {
    const times: number[] = []
    for (let i = 0; i < n; i++) times.push((await client.get(`/admin/v1/accounts/${seed.sample[i % seed.sample.length]}`)).ms)
    return times
  }
  // Warm-up: the JIT, the server's prepared statements and the store's caches.
  await baseline(200)
  await client.pages('/admin/v1/accounts?limit=50', 100)
  for (const w of WINDOWS)
    for (const by of ['day', 'key', 'region']) await client.get(`/admin/v1/accounts/${seed.usageAccount.id}/usage?from=${w.from}&to=${w.to}&by=${by}`)
  await client.pages('/admin/v1/audit-events?limit=50', 50)

  // The baseline is taken in two halves, before and after the rest, so that a drift of the machine's speed shows in it.
  const base = await baseline(250)

  for (const limit of [50, 200]) {
    const { times, ids } = await client.pages(`/admin/v1/accounts?limit=${limit}`)
    check(
      ids.length === seed.accounts.length && new Set(ids).size === ids.length,
      `paging at limit=${limit} saw ${ids.length} accounts (${new Set(ids).size} distinct) of ${seed.accounts.length}`,
    )
    series.push({ name: `accounts, limit=${limit}, all ${times.length} pages`, times, target: PAGE_TARGET_MS })
  }
  const filtered: [string, string, number][] = [
    ['status=suspended', 'status=suspended', seed.counts.suspended],
    ['name=logistics', 'name=logistics', seed.counts.logistics],
    ['status=active&name=logistics', 'status=active&name=logistics', -1],
    [`name=${RARE.toLowerCase()} (${seed.counts.rare} matches: every row read)`, `name=${RARE.toLowerCase()}`, seed.counts.rare],
    ['name=no-such-account (no match)', 'name=no-such-account', 0],
  ]
  for (const [label, query, expected] of filtered) {
    // One pass for the lists of many pages; repeated for those of one page, to have 50+ samples.
    const times: number[] = []
    let pages = 0
    do {
      const r = await client.pages(`/admin/v1/accounts?limit=50&${query}`)
      pages = r.times.length
      times.push(...r.times)
      check(expected < 0 || r.ids.length === expected, `${query} listed ${r.ids.length} accounts, not ${expected}`)
    } while (times.length < 50)
    series.push({ name: `accounts ${label}, limit=50${pages > 1 ? `, ${pages} pages` : ''}`, times, target: PAGE_TARGET_MS })
  }

  for (const w of WINDOWS) {
    const days = (Date.parse(w.to) - Date.parse(w.from)) / DAY + 1
    for (const by of ['day', 'key', 'region'] as const) {
      const path = `/admin/v1/accounts/${seed.usageAccount.id}/usage?from=${w.from}&to=${w.to}&by=${by}`
      for (const [format, accept] of [
        ['JSON', 'application/json'],
        ['CSV', 'text/csv'],
      ] as const) {
        const times: number[] = []
        let body = ''
        for (let i = 0; i < USAGE_REQUESTS; i++) {
          const r = await client.get(path, accept)
          times.push(r.ms)
          body = r.body
        }
        let lines = 0
        let total = 0
        if (format === 'JSON') {
          const items = (JSON.parse(body) as { items: { units: number }[] }).items
          lines = items.length
          total = items.reduce((s, l) => s + l.units, 0)
        } else {
          const rows = body.trim().split('\r\n').slice(1)
          lines = rows.length
          total = rows.reduce((s, l) => s + Number(l.split(',').at(-1)), 0)
        }
        // Inside the seeded months every report of a window adds up to the same units, by whatever it goes.
        const expected = [...unitsByDay].reduce((sum, [day, u]) => (day >= w.from && day <= w.to ? sum + u : sum), 0)
        check(total === expected, `usage ${w.name} by=${by} ${format} adds up to ${total} units, not ${expected}`)
        series.push({ name: `usage ${w.name} ${w.from}..${w.to} (${days} d), by=${by}, ${format}: ${lines} lines`, times, target: USAGE_TARGET_MS })
      }
    }
  }

  for (const limit of [50, 200]) {
    const { times, ids } = await client.pages(`/admin/v1/audit-events?limit=${limit}`)
    check(ids.length === seed.events.length + 1, `the trail paged ${ids.length} events, not ${seed.events.length + 1}`)
    series.push({ name: `audit events, limit=${limit}, all ${times.length} pages`, times })
  }
  const auditFilters: [string, string][] = [
    [`account=<usage account> (${KEYS + 1} events)`, `account=${seed.usageAccount.id}`],
    ['action=key.create', 'action=key.create'],
    ['action=account.suspend', 'action=account.suspend'],
    ['actor=cli', 'actor=cli'],
  ]
  for (const [label, query] of auditFilters) {
    const times: number[] = []
    let pages = 0
    do {
      const r = await client.pages(`/admin/v1/audit-events?limit=50&${query}`, 200)
      pages = r.times.length
      times.push(...r.times)
    } while (times.length < 50)
    series.push({ name: `audit events ${label}, limit=50, ${pages} pages`, times })
  }

  base.push(...(await baseline(250)))
  series.unshift({ name: 'baseline: GET /admin/v1/accounts/{id}', times: base })
  return series
}

function table(title: string, series: Series[]): { text: string; misses: string[]; passes: string[] } {
  const base = median(series[0]!.times)
  const misses: string[] = []
  const passes: string[] = []
  const rows = series.map((s) => {
    const m = median(s.times)
    const p = p95(s.times)
    let verdict = '—'
    if (s.target !== undefined) {
      verdict = p < s.target ? `PASS (< ${s.target} ms)` : `**FAIL** (≥ ${s.target} ms)`
      ;(p < s.target ? passes : misses).push(`${s.name}: p95 ${p.toFixed(1)} ms (target ${s.target} ms)`)
    }
    return `| ${s.name} | ${s.times.length} | ${m.toFixed(2)} | ${p.toFixed(2)} | ${Math.max(...s.times).toFixed(2)} | ${(m / base).toFixed(2)}× | ${(p / base).toFixed(2)}× | ${verdict} |`
  })
  const text = [
    title,
    '',
    '| request | requests | median ms | p95 ms | max ms | median ÷ baseline median | p95 ÷ baseline median | target (p95) |',
    '| --- | --- | --- | --- | --- | --- | --- | --- |',
    ...rows,
    '',
  ].join('\n')
  return { text, misses, passes }
}

async function benchStore(label: string, kind: 'sqlite' | 'postgres', env: Record<string, string>, seed: Seed, dataDir: string): Promise<string> {
  const t0 = performance.now()
  const token = await seedStore(kind, env, seed, dataDir)
  if (kind === 'postgres') {
    // A database filled over months has its statistics; one filled in seconds has them only after autovacuum's ANALYZE.
    const client = new pg.Client({ connectionString: env.DATABASE_URL })
    await client.connect()
    await client.query('ANALYZE')
    await client.end()
  }
  const seeded = (performance.now() - t0) / 1000
  const [port, adminPort] = [await freePort(), await freePort()]
  const child = serve('src/server.ts', {
    ...env,
    NODE_ENV: 'test',
    LOG_LEVEL: 'warn',
    PEPPER,
    PORT: String(port),
    ADMIN_LISTEN: `127.0.0.1:${adminPort}`,
  })
  try {
    const client = new Client(`http://127.0.0.1:${adminPort}`, token)
    await waitForAdmin(client, child)
    const t1 = performance.now()
    const series = await measure(client, seed, unitsByDay(seed))
    const measured = (performance.now() - t1) / 1000
    const title =
      `## Admin API on ${label}: ${seed.accounts.length.toLocaleString('en')} accounts (${seed.counts.suspended.toLocaleString('en')} suspended), ` +
      `an account of ${KEYS.toLocaleString('en')} keys used every day ${USAGE_FROM}..${USAGE_TO}, ${seed.events.length.toLocaleString('en')} audit events ` +
      `(seeded in ${seeded.toFixed(1)} s, measured in ${measured.toFixed(1)} s; one request at a time on a keep-alive connection, ` +
      `${pinned ? 'server pinned to CPU 0, this client to CPU 1' : 'not pinned'})`
    const { text, misses } = table(title, series)
    const out = [text]
    for (const p of client.problems.slice(0, 20)) out.push(`!!! WRONG ANSWER on ${label}: ${p}`)
    if (client.problems.length > 20) out.push(`!!! … and ${client.problems.length - 20} more wrong answers`)
    const pageRows = series.filter((s) => s.target === PAGE_TARGET_MS && s.name.startsWith('accounts, limit='))
    const worstPage = Math.max(...pageRows.map((s) => p95(s.times)))
    const usageRows = series.filter((s) => s.target === USAGE_TARGET_MS)
    const worstUsage = Math.max(...usageRows.map((s) => p95(s.times)))
    out.push(
      `${worstPage < PAGE_TARGET_MS ? 'PASS' : '!!! FAIL'} ${label}: paging through all accounts, worst p95 ${worstPage.toFixed(1)} ms a page (target < ${PAGE_TARGET_MS} ms)`,
    )
    out.push(
      `${worstUsage < USAGE_TARGET_MS ? 'PASS' : '!!! FAIL'} ${label}: 90-day usage reports over ${KEYS} keys, worst p95 ${worstUsage.toFixed(1)} ms (target < ${USAGE_TARGET_MS} ms)`,
    )
    for (const m of misses) out.push(`!!! TARGET MISSED on ${label}: ${m}`)
    return `${out.join('\n')}\n`
  } finally {
    child.kill('SIGTERM')
    await new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r(undefined) : child.once('exit', r)))
  }
}

function unitsByDay(seed: Seed): Map<string, number> {
  const units = new Map<string, number>()
  for (const rows of usageRows(seed.usageAccount.id, seed.keys)) for (const r of rows) units.set(r.day, (units.get(r.day) ?? 0) + r.units)
  return units
}

/** adminBench runs the bench on every store it can reach, printing each store's table as it is done. */
export async function adminBench(): Promise<void> {
  const seed = makeSeed(Date.now())
  await onEachStore('admin', (name, env, dataDir) => benchStore(name, name === 'SQLite' ? 'sqlite' : 'postgres', env, seed, dataDir))
}

if (import.meta.main) await adminBench()
