/**
 * `node bench/pending.ts`: the operators' queue of pending subscriptions
 * (AccessStore.listPendingSubscriptions) over 100 000 accounts with 4 subscriptions each,
 * 1 % of them pending, in SQLite (always) and PostgreSQL (BENCH_DATABASE_URL or
 * TEST_DATABASE_URL: a scratch schema, dropped after). Each figure is a median of repeated
 * calls, with its ratio to a baseline measured in the same run: a page of listAccounts of
 * the same size. It also times the walk the port method replaces (a listSubscriptions per
 * account), over the first 2 000 accounts, and extrapolates it to all of them; and the
 * queue again with the partial index the lead may add as a migration (PENDING_INDEX).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import pg from 'pg'
import { openSqliteStore } from '../src/storage/sqlite/store.ts'
import { openPostgresStore } from '../src/storage/postgres/store.ts'
import type { Store } from '../src/storage/ports.ts'

const ACCOUNTS = Number(process.env.BENCH_PENDING_ACCOUNTS ?? 100_000)
const PAGE = 50
const RUNS = 40
const WALK = 2_000
/** The partial index proposed for the queue (the same text in both stores). */
export const PENDING_INDEX = "CREATE INDEX subscriptions_pending ON subscriptions (updated_at, account_id, region, api_group) WHERE status = 'pending'"
const SUBS = [
  ['eu', 'totp'],
  ['eu', 'converter'],
  ['us', 'totp'],
  ['apac', 'totp'],
] as const

async function median(work: () => Promise<unknown>, runs = RUNS): Promise<number> {
  await work()
  const times: number[] = []
  for (let i = 0; i < runs; i++) {
    const start = performance.now()
    await work()
    times.push(performance.now() - start)
  }
  return times.sort((a, b) => a - b)[Math.floor(times.length / 2)]!
}

/** The seeded rows: account i, created a second after i−1; every 100th account has a pending TOTP request in us. */
const accountId = (i: number) => `acc_${i.toString(16).padStart(16, '0')}`
const at = (i: number) => new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString()

async function measure(name: string, store: Store, addIndex: () => Promise<void>): Promise<void> {
  const baseline = await median(() => store.access.listAccounts({ limit: PAGE }))
  const first = await median(() => store.access.listPendingSubscriptions({ limit: PAGE }))
  const firstPage = await store.access.listPendingSubscriptions({ limit: PAGE })
  let cursor = firstPage.next!
  for (let i = 0; i < 15; i++) cursor = (await store.access.listPendingSubscriptions({ limit: PAGE, cursor })).next!
  const deep = await median(() => store.access.listPendingSubscriptions({ limit: PAGE, cursor }))
  const walkStart = performance.now()
  const accounts = await store.access.listAccounts({ limit: WALK })
  for (const a of accounts.items) await store.access.listSubscriptions(a.id)
  const walk = (performance.now() - walkStart) * (ACCOUNTS / WALK)
  await addIndex()
  const indexed = await median(() => store.access.listPendingSubscriptions({ limit: PAGE }))
  const indexedDeep = await median(() => store.access.listPendingSubscriptions({ limit: PAGE, cursor }))
  const row = (label: string, ms: number) =>
    `${name.padEnd(9)} ${label.padEnd(46)} ${ms.toFixed(2).padStart(10)} ms  ${(ms / baseline).toFixed(1).padStart(8)}×`
  console.log(
    [
      row(`baseline: listAccounts, ${PAGE} rows`, baseline),
      row(`listPendingSubscriptions, first ${PAGE}`, first),
      row(`listPendingSubscriptions, page 17 (cursor)`, deep),
      row(`with the partial index: first ${PAGE}`, indexed),
      row(`with the partial index: page 17 (cursor)`, indexedDeep),
      row(`walk: listSubscriptions × ${ACCOUNTS} (extrapolated)`, walk),
    ].join('\n'),
  )
}

async function sqlite(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-pending-'))
  try {
    const path = join(dir, 'tessera.db')
    await openSqliteStore({ path, maintenance: false }).close()
    const db = new DatabaseSync(path)
    db.exec('BEGIN')
    const account = db.prepare('INSERT INTO accounts (id, name, status, created_at, updated_at) VALUES (?, ?, ?, ?, ?)')
    const sub = db.prepare('INSERT INTO subscriptions (account_id, region, api_group, status, updated_at) VALUES (?, ?, ?, ?, ?)')
    for (let i = 0; i < ACCOUNTS; i++) {
      account.run(accountId(i), `Account ${i}`, 'active', at(i), at(i))
      for (const [region, group] of SUBS) sub.run(accountId(i), region, group, i % 100 === 0 && region === 'us' ? 'pending' : 'active', at(i))
    }
    db.exec('COMMIT')
    db.close()
    const store = openSqliteStore({ path, maintenance: false })
    await measure('sqlite', store, async () => {
      const db = new DatabaseSync(path)
      db.exec(PENDING_INDEX)
      db.close()
    })
    await store.close()
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

async function postgres(url: string): Promise<void> {
  const schema = `bench_pending_${process.pid}`
  const admin = new pg.Client({ connectionString: url })
  await admin.connect()
  try {
    await admin.query(`CREATE SCHEMA ${schema}`)
    const store = await openPostgresStore({ url, schema })
    await admin.query(`SET search_path = ${schema}`)
    await admin.query(
      `INSERT INTO accounts (id, name, status, created_at, updated_at)
      SELECT 'acc_' || lpad(to_hex(i), 16, '0'), 'Account ' || i, 'active', timestamptz '2026-01-01Z' + i * interval '1 second', now()
      FROM generate_series(0, $1 - 1) i`,
      [ACCOUNTS],
    )
    await admin.query(
      `INSERT INTO subscriptions (account_id, region, api_group, status, updated_at)
      SELECT 'acc_' || lpad(to_hex(i), 16, '0'), s.region, s.api_group,
        CASE WHEN i % 100 = 0 AND s.region = 'us' THEN 'pending' ELSE 'active' END, timestamptz '2026-01-01Z' + i * interval '1 second'
      FROM generate_series(0, $1 - 1) i, (VALUES ('eu', 'totp'), ('eu', 'converter'), ('us', 'totp'), ('apac', 'totp')) s(region, api_group)`,
      [ACCOUNTS],
    )
    await admin.query('ANALYZE')
    await measure('postgres', store, async () => {
      await admin.query(PENDING_INDEX)
    })
    await store.close()
  } finally {
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
    await admin.end()
  }
}

console.log(`${ACCOUNTS} accounts, ${SUBS.length} subscriptions each, ${ACCOUNTS / 100} pending; medians of ${RUNS} calls`)
await sqlite()
const url = process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL
if (url === undefined) console.log('postgres  skipped (set BENCH_DATABASE_URL or TEST_DATABASE_URL)')
else await postgres(url)
