/**
 * store copy on crafted stores (the CLI and a real node's records: test/http/admin/store-copy.test.ts): a SQLite
 * store with every kind of value (booleans, big integers, floats, times, JSON whose keys PostgreSQL reorders,
 * bytes past a batch's budget, NULL beside '', keys whose order differs between byte order and a language's)
 * copied into PostgreSQL and back gives the same rows and checksums; the target's triggers fire on none of
 * the copied rows; a copy cut short goes on from its last batch, and no store opens on a half-copied target;
 * the refusals (a target that holds data, schema versions, an unknown table, another copy's leftovers); a
 * source written to during the copy fails the check and leaves the target closed; and the check finds a row changed.
 */
import { test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import pg from 'pg'
import { copyStore, CopyRefused, verifyStores, type CopyOptions, type Progress } from '../../src/storage/copy/copy.ts'
import type { End } from '../../src/storage/copy/end.ts'
import { openPostgresEnd } from '../../src/storage/copy/postgres-end.ts'
import { openSqliteEnd } from '../../src/storage/copy/sqlite-end.ts'
import { UnfinishedCopyError } from '../../src/storage/copy/marker.ts'
import { openSqliteDatabase, openSqliteStore } from '../../src/storage/sqlite/store.ts'
import { openPostgresStore } from '../../src/storage/postgres/store.ts'
import { migrations } from '../../src/storage/migrations.ts'
import { Stamps } from '../../src/storage/stamps.ts'
import { tempDir } from '../support/helper.ts'
import { createDatabase, databaseUrl, skipUnless, uniqueName } from '../support/services.ts'

const skip = skipUnless('TEST_DATABASE_URL')
const PIECE = 300 * 1024
const BUDGET = 512 * 1024

/** crafted: a SQLite store holding every kind of value, made with the store's own triggers live (as a node's would be). */
function crafted(t: TestContext): { path: string; pieces: Buffer[] } {
  const path = join(tempDir(t), 'tessera.sqlite')
  const db = openSqliteDatabase(path, new Stamps())
  const at = '2026-11-29T12:00:00.120Z'
  // Byte order puts 'acc_B' and 'acc_Z' before 'acc_a'; a language's order does not.
  for (const id of ['acc_a', 'acc_B', 'acc_é', 'acc_Z']) db.prepare("INSERT INTO accounts VALUES (?, ?, 'active', ?, ?)").run(id, `Name ${id}`, at, at)
  db.prepare(
    `INSERT INTO api_keys (id, account_id, name, key_hash, hint, created_at, scope_groups) VALUES
    ('key_1', 'acc_a', 'k', 'h1', 'tsr_…', ?, ''), ('key_2', 'acc_a', 'k', 'h2', 'tsr_…', ?, NULL)`,
  ).run(at, at)
  db.prepare("INSERT INTO plans VALUES ('acc_a', 0.1, 3, 9007199254740993, 'month', ?, 2, 1)").run(at)
  db.prepare("INSERT INTO otp_state VALUES ('k', 1099511627776, 2, 0, 1795900000000)").run()
  db.prepare("INSERT INTO onboarding VALUES ('acc_a', 'app', 'u', 'SHA256', 8, 30, 'fp', ?, ?, 1)").run(at, at)
  db.prepare(
    `INSERT INTO users (id, email, email_key, status, operator, created_at, updated_at) VALUES
    ('usr_1', 'A@example.com', 'a@example.com', 'active', 1, ?, ?), ('usr_2', 'b@example.com', 'b@example.com', 'active', 0, ?, ?)`,
  ).run(at, at, at, at)
  db.prepare(
    "INSERT INTO sso_providers VALUES ('kc', 'Keycloak', 'https://id.example/realms/a', 'tessera', 'v1.sealed', 'example.com,example.org', 'acc_a', 'developer', 'amr', 0, ?, ?)",
  ).run(at, at)
  db.prepare("INSERT INTO sso_identities VALUES ('kc', 'f:1b2c', 'usr_2', 'b@example.com', ?, ?)").run(at, at)
  db.prepare("INSERT INTO sso_requests VALUES ('st', 'kc', 'bh', 'nonce', 'verifier', '/portal/home', NULL, '192.0.2.1', ?, ?)").run(at, at)
  db.prepare("INSERT INTO sessions VALUES ('s1', 'usr_1', ?, ?, ?, 1, NULL, 'agent', NULL), ('s2', 'usr_2', ?, ?, ?, 0, NULL, NULL, 'kc')").run(
    at,
    at,
    at,
    at,
    at,
    at,
  )
  db.prepare('INSERT INTO factor_settings (account_id, origins, updated_at) VALUES (\'acc_a\', \'["https://b.example","https://a.example"]\', ?)').run(at)
  // An endpoint, then an event for it: the SQLite trigger writes its message, delivery and tally. The delivery is then given up
  // and the tally set to what no trigger would make: the copy must keep both as they are.
  db.prepare("INSERT INTO webhook_endpoints VALUES ('whe_1', 'acc_a', 'https://hooks.example/in', NULL, 'sealed', ?, NULL)").run(at)
  db.prepare(
    `INSERT INTO audit_events VALUES ('evt_1', ?, 'system', 'factor.created', 'factor', 'fct_1', 'acc_a', NULL, 'success', '{"z":1,"userID":"u","a":{"y":2,"b":[1]}}', '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01')`,
  ).run(at)
  db.prepare("UPDATE webhook_deliveries SET status = 'failed' WHERE message_id = 'evt_1'").run()
  db.prepare("INSERT INTO record_tallies VALUES ('acc_a', 'webhook_dropped', 41, 0) ON CONFLICT DO UPDATE SET row_count = 41").run()
  // A challenge whose tally row is gone: a trigger firing on the copied challenge would make one.
  db.prepare("INSERT INTO passkey_challenges VALUES ('dg', 'acc_a', 'u', 'authentication', 'preferred', ?, ?)").run(at, at)
  db.prepare("DELETE FROM record_tallies WHERE kind = 'passkey_challenges'").run()
  db.prepare(
    `INSERT INTO conversion_jobs (id, account_id, key_id, status, operation, options, basename, source, has_result_url, created_at, result_gone)
    VALUES ('job_1', 'acc_a', 'key_1', 'succeeded', 'image', '{"format":"png","dpi":150}', 'report', 'upload', 0, ?, 1)`,
  ).run(at)
  const pieces = [0, 1, 2, 3, 4].map(() => randomBytes(PIECE))
  for (const [seq, data] of pieces.entries()) db.prepare("INSERT INTO conversion_job_pieces VALUES ('job_1', 'result', ?, ?)").run(seq, data)
  db.prepare("UPDATE store_settings SET value = 250 WHERE name = 'webhook_pending_per_account'").run()
  db.close()
  return { path, pieces }
}

async function sql(url: string, text: string, values: unknown[] = []): Promise<pg.QueryResult> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return await client.query(text, values)
  } finally {
    await client.end()
  }
}

/** copy runs one copy between two freshly opened ends, closing both. */
async function copy(from: () => Promise<End>, to: () => Promise<End>, options: Partial<CopyOptions> = {}) {
  const source = await from()
  const target = await to()
  try {
    return await copyStore(source, target, { batchRows: 2, batchBytes: BUDGET, force: false, ...options })
  } finally {
    await source.close()
    await target.close()
  }
}

const sqliteEnd =
  (path: string, write = false) =>
  async () =>
    openSqliteEnd(path, { write })
const postgresEnd = (url: string) => () => openPostgresEnd(url)

test('copy: SQLite into PostgreSQL and back, every table the same by its checksum; no trigger fires on copied rows; batches keep to their bytes', {
  skip,
}, async (t) => {
  const { path, pieces } = crafted(t)
  const url = await createDatabase(t)
  const batches: Progress[] = []
  const there = await copy(sqliteEnd(path), postgresEnd(url), { batchRows: 10, onProgress: (p: Progress) => batches.push(p) })
  assert.ok(there.same, JSON.stringify(there.tables.filter((c) => !c.same)))
  assert.equal(there.resumedAfter, 0)
  const piecesBatches = batches.filter((b) => b.table === 'conversion_job_pieces').map((b) => b.rows)
  assert.deepEqual(piecesBatches, [2, 4, 5], 'a batch of pieces ends once it holds the bytes given')

  const deliveries = await sql(url, 'SELECT message_id, status FROM webhook_deliveries')
  assert.deepEqual(deliveries.rows, [{ message_id: 'evt_1', status: 'failed' }], 'the outbox as it was: the audit trigger made no second delivery')
  const tallies = await sql(url, "SELECT kind, row_count FROM record_tallies WHERE owner = 'acc_a' ORDER BY kind")
  assert.deepEqual(
    tallies.rows,
    [
      { kind: 'webhook_dropped', row_count: '41' },
      { kind: 'webhook_pending', row_count: '0' },
    ],
    'the tallies as they were: none made for the copied challenge',
  )
  const plan = await sql(url, "SELECT rate, quota, updated_at::text AS at FROM plans WHERE account_id = 'acc_a'")
  assert.deepEqual(plan.rows[0], { rate: 0.1, quota: '9007199254740993', at: '2026-11-29 12:00:00.12+00' })
  const data = await sql(url, "SELECT data FROM conversion_job_pieces WHERE job_id = 'job_1' ORDER BY seq")
  assert.ok(
    data.rows.every((r, i) => Buffer.compare(r.data, pieces[i]!) === 0),
    'the pieces byte for byte',
  )
  const settings = await sql(url, 'SELECT value FROM store_settings')
  assert.equal(settings.rows[0].value, '250', "the source's settings, not the migration's")
  const triggers = await sql(url, "SELECT count(*)::int AS n FROM pg_trigger WHERE NOT tgisinternal AND tgenabled = 'O'")
  assert.equal(triggers.rows[0].n, 12, "every trigger enabled again (DISABLE TRIGGER was the batch's own)")
  assert.equal((await sql(url, "SELECT to_regclass('store_copy_progress') AS t")).rows[0].t, null, 'the progress table is gone')
  const store = await openPostgresStore({ url })
  await store.close()

  const back = join(tempDir(t), 'tessera.sqlite')
  const again = await copy(postgresEnd(url), sqliteEnd(back, true))
  assert.ok(again.same)
  assert.deepEqual(
    again.tables.map((c) => c.targetSha256),
    there.tables.map((c) => c.sourceSha256),
    'back in SQLite: the checksums of the store copied first',
  )
  const db = new DatabaseSync(back)
  assert.equal(db.prepare("SELECT count(*) AS n FROM sqlite_master WHERE type = 'trigger'").get()!.n, 12, 'the triggers made again')
  assert.equal(db.prepare("SELECT count(*) AS n FROM record_tallies WHERE kind = 'passkey_challenges'").get()!.n, 0, 'none fired on the copied rows')
  assert.equal(db.prepare("SELECT operator FROM users WHERE id = 'usr_1'").get()!.operator, 1)
  assert.deepEqual(
    db
      .prepare('SELECT scope_groups FROM api_keys ORDER BY id')
      .all()
      .map((r) => r.scope_groups),
    ['', null],
  )
  db.close()
  await openSqliteStore({ path: back, maintenance: false }).close()
})

test('copy: cut short, it goes on from its last batch; meanwhile no store opens on the target', { skip }, async (t) => {
  const { path } = crafted(t)
  const url = await createDatabase(t)
  let batches = 0
  const cut = copy(sqliteEnd(path), postgresEnd(url), {
    onProgress: () => {
      if (++batches === 5) throw new Error('cut')
    },
  })
  await assert.rejects(cut, /cut/)
  await assert.rejects(openPostgresStore({ url }), (e: Error) => e instanceof UnfinishedCopyError && /has not finished/.test(e.message))
  const progress = await sql(url, "SELECT name, rows FROM store_copy_progress WHERE kind = 'table' ORDER BY name")
  assert.ok(progress.rows.length > 0, 'progress kept')

  const committed = progress.rows.reduce((n, r) => n + Number(r.rows), 0)
  assert.ok(committed > 0)

  const resumed = await copy(sqliteEnd(path), postgresEnd(url))
  assert.ok(resumed.same)
  assert.equal(resumed.resumedAfter, committed, 'it went on from the batches committed before the cut')
  assert.equal(
    resumed.copied + committed,
    resumed.tables.reduce((n, c) => n + c.sourceRows, 0),
    'and copied the rest, each row once',
  )
  await assert.rejects(copy(sqliteEnd(path), postgresEnd(url)), /already holds data/, 'once finished, it is a store like any other')
})

test('copy: keys in byte order on a database whose collation orders otherwise, also when a copy out of it resumes mid-table', { skip }, async (t) => {
  const { path } = crafted(t)
  const name = uniqueName('tessera_icu')
  await sql(databaseUrl(), `CREATE DATABASE ${name} TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'`)
  t.after(() => sql(databaseUrl(), `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).then(() => undefined))
  const url = Object.assign(new URL(databaseUrl()), { pathname: `/${name}` }).href
  const ordered = await sql(url, "SELECT v FROM (VALUES ('acc_a'), ('acc_B')) x(v) ORDER BY v")
  assert.deepEqual(
    ordered.rows.map((r) => r.v),
    ['acc_a', 'acc_B'],
    'this database orders by language',
  )
  assert.ok((await copy(sqliteEnd(path), postgresEnd(url))).same)

  const back = join(tempDir(t), 'tessera.sqlite')
  let batches = 0
  await assert.rejects(
    copy(postgresEnd(url), sqliteEnd(back, true), {
      batchRows: 1,
      onProgress: (p: Progress) => {
        if (p.table === 'accounts' && ++batches === 2) throw new Error('cut')
      },
    }),
    /cut/,
  )
  assert.throws(() => openSqliteStore({ path: back, maintenance: false }), UnfinishedCopyError)
  const resumed = await copy(postgresEnd(url), sqliteEnd(back, true), { batchRows: 1 })
  assert.ok(resumed.same, JSON.stringify(resumed.tables.filter((c) => !c.same)))
  assert.equal(resumed.tables.find((c) => c.table === 'accounts')?.targetRows, 4)
})

test('copy refuses: a target holding data (unless --force), a source of another schema version, a target newer than the code, an unknown table, another copy left unfinished', {
  skip,
}, async (t) => {
  const { path } = crafted(t)
  const url = await createDatabase(t)
  // A node that only started there (its settings written) leaves it empty.
  const started = await openPostgresStore({ url })
  await started.webhooks.setPendingCap(500)
  await started.access.createAccount(
    { id: 'acc_x', name: 'x', status: 'active', createdAt: new Date().toISOString() },
    { actor: 'system', action: 'account.create', target: { type: 'account', id: 'acc_x' }, accountId: 'acc_x', ip: null, outcome: 'success', detail: {} },
  )
  await started.close()
  await assert.rejects(
    copy(sqliteEnd(path), postgresEnd(url)),
    (e: Error) => e instanceof CopyRefused && /already holds data \(in accounts, audit_events\)/.test(e.message),
  )
  const forced = await copy(sqliteEnd(path), postgresEnd(url), { force: true })
  assert.deepEqual(
    forced.tables.filter((c) => !c.same).map((c) => c.table),
    ['accounts', 'audit_events'],
    'forced: the rows already there stay, and the check says where',
  )
  assert.ok(forced.finished, 'and the store is whole: told to, the copy does not wait for a check it cannot pass')
  await (await openPostgresStore({ url })).close()

  const old = join(tempDir(t), 'old.sqlite')
  const db = new DatabaseSync(old)
  db.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)')
  for (const m of migrations.slice(0, -1)) {
    db.exec(m.sqlite)
    db.prepare('INSERT INTO schema_migrations VALUES (?, ?, ?)').run(m.version, m.name, 'x')
  }
  db.close()
  const fresh = await createDatabase(t)
  const latest = migrations.at(-1)!.version
  await assert.rejects(
    copy(sqliteEnd(old), postgresEnd(fresh)),
    new RegExp(`at schema version ${latest - 1} and this version of Tessera at ${latest}: apply the migrations to it first`),
  )

  await sql(fresh, 'CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL)')
  await sql(fresh, "INSERT INTO schema_migrations VALUES (99, 'later', now())")
  await assert.rejects(copy(sqliteEnd(path), postgresEnd(fresh)), /target store is at schema version 99, newer than this version of Tessera/)

  const odd = crafted(t).path
  const extra = new DatabaseSync(odd)
  extra.exec('CREATE TABLE widgets (id TEXT PRIMARY KEY)')
  extra.close()
  await assert.rejects(copy(sqliteEnd(odd), postgresEnd(await createDatabase(t))), /does not know how to copy the table widgets/)

  const half = await createDatabase(t)
  await assert.rejects(
    copy(sqliteEnd(path), postgresEnd(half), {
      onProgress: () => {
        throw new Error('cut')
      },
    }),
    /cut/,
  )
  const other = crafted(t).path
  await assert.rejects(copy(sqliteEnd(other), postgresEnd(half)), /holds an unfinished copy of another store .*give --force/)
  assert.ok((await copy(sqliteEnd(other), postgresEnd(half), { force: true })).same, 'forced over it: this copy, from the start')
})

test('copy: a source written to while it is copied (a node left running) fails the check, and the target stays closed to nodes', { skip }, async (t) => {
  const { path } = crafted(t)
  const url = await createDatabase(t)
  const node = new DatabaseSync(path)
  t.after(() => node.close())
  let wrote = false
  const report = await copy(sqliteEnd(path), postgresEnd(url), {
    onProgress: () => {
      if (wrote) return
      wrote = true
      node.prepare("INSERT INTO accounts VALUES ('acc_late', 'late', 'active', '2026-11-29T12:00:01.000Z', '2026-11-29T12:00:01.000Z')").run()
    },
  })
  assert.equal(report.same, false)
  assert.equal(report.finished, false)
  assert.deepEqual(
    report.tables.filter((c) => !c.same).map((c) => [c.table, c.sourceRows, c.targetRows]),
    [['accounts', 5, 4]],
    'the copy is of one snapshot; the check, of the source as it is after',
  )
  await assert.rejects(openPostgresStore({ url }), UnfinishedCopyError)
})

test('verify: a row changed in the target is a table that differs', { skip }, async (t) => {
  const { path } = crafted(t)
  const url = await createDatabase(t)
  assert.ok((await copy(sqliteEnd(path), postgresEnd(url))).same)
  await sql(url, 'UPDATE factor_settings SET origins = \'["https://a.example","https://b.example"]\'')
  const [a, b] = [openSqliteEnd(path, { write: false }), await openPostgresEnd(url)]
  t.after(async () => {
    await a.close()
    await b.close()
  })
  const checked = await verifyStores(a, b)
  assert.equal(checked.same, false)
  assert.deepEqual(
    checked.tables.filter((c) => !c.same).map((c) => [c.table, c.sourceRows, c.targetRows]),
    [['factor_settings', 1, 1]],
  )
})
