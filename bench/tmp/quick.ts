import { openSqliteStore } from '../../src/storage/sqlite/store.ts'
import { openPostgresStore } from '../../src/storage/postgres/store.ts'
import { DatabaseSync } from 'node:sqlite'
import pg from 'pg'
const kind = process.argv[2]
const N = 100_000
const p95 = (xs: number[]) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length * 0.95)]!.toFixed(1) }
const med = (xs: number[]) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length * 0.5)]!.toFixed(1) }
let store
if (kind === 'sqlite') {
  const path = '/tmp/b/q.sqlite'
  for (const f of [path, path + '-wal', path + '-shm']) try { (await import('node:fs')).rmSync(f) } catch {}
  store = openSqliteStore({ path, maintenance: false })
  const db = new DatabaseSync(path)
  db.exec('BEGIN')
  const ins = db.prepare('INSERT INTO accounts (id, name, status, created_at, updated_at) VALUES (?, ?, ?, ?, ?)')
  for (let i = 0; i < N; i++) { const t = new Date(Date.UTC(2025, 0, 1) + i * 1000).toISOString(); ins.run(`acc_${i.toString(16).padStart(16, '0')}`, `Customer ${i}`, i % 10 ? 'active' : 'suspended', t, t) }
  const u = db.prepare('INSERT INTO usage_keys VALUES (?, ?, ?, ?, ?, ?, ?)')
  const d = db.prepare('INSERT INTO usage_daily (account_id, day, api_group, count, units) VALUES (?, ?, ?, ?, ?)')
  for (let day = 0; day < 90; day++) {
    const ds = new Date(Date.UTC(2026, 7, 1) + day * 86400000).toISOString().slice(0, 10)
    for (let k = 0; k < 1000; k++) u.run('acc_big', ds, `key_${k}`, k % 3 ? 'eu' : 'us', 'totp', 5, 10)
    d.run('acc_big', ds, 'totp', 5000, 10000)
  }
  db.exec('COMMIT'); db.close()
} else {
  const schema = 'qbench'
  const c = new pg.Client('postgres://postgres@127.0.0.1:5432/tessera_test'); await c.connect()
  await c.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
  store = await openPostgresStore({ url: 'postgres://postgres@127.0.0.1:5432/tessera_test', schema })
  await c.query(`SET search_path=${schema}`)
  await c.query(`INSERT INTO accounts SELECT 'acc_' || lpad(to_hex(i), 16, '0'), 'Customer ' || i, CASE WHEN i % 10 = 0 THEN 'suspended' ELSE 'active' END, timestamptz '2025-01-01' + i * interval '1 second', now() FROM generate_series(0, ${N - 1}) i`)
  await c.query(`INSERT INTO usage_keys SELECT 'acc_big', to_char(date '2026-08-01' + d, 'YYYY-MM-DD'), 'key_' || k, CASE WHEN k % 3 = 0 THEN 'us' ELSE 'eu' END, 'totp', 5, 10 FROM generate_series(0, 89) d, generate_series(0, 999) k`)
  await c.query(`INSERT INTO usage_daily SELECT 'acc_big', to_char(date '2026-08-01' + d, 'YYYY-MM-DD'), 'totp', 5000, 10000 FROM generate_series(0, 89) d`)
  await c.query('ANALYZE'); await c.end()
}
const times: number[] = []
let cursor: string | undefined; let pages = 0
do {
  const t = performance.now()
  const page = await store.access.listAccounts({ limit: 50, ...(cursor ? { cursor } : {}) })
  times.push(performance.now() - t); cursor = page.next ?? undefined; pages++
} while (cursor && pages < 2000)
console.log(kind, 'list pages', pages, 'median', med(times), 'p95', p95(times))
const ft: number[] = []
for (let i = 0; i < 50; i++) { const t = performance.now(); await store.access.listAccounts({ limit: 50, status: 'suspended', name: 'customer 9' }); ft.push(performance.now() - t) }
console.log(kind, 'filtered median', med(ft), 'p95', p95(ft))
for (const by of ['day', 'key', 'region'] as const) {
  const ts: number[] = []
  for (let i = 0; i < 30; i++) { const t = performance.now(); const r = await store.usage.report('acc_big', '2026-08-01', '2026-10-29', by); ts.push(performance.now() - t); if (i === 0) console.log(by, r.length) }
  console.log(kind, 'usage', by, 'median', med(ts), 'p95', p95(ts))
}
await store.close()
