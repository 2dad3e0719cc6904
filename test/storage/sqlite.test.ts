import { test } from 'node:test'
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { statSync } from 'node:fs'
import { DatabaseSync } from 'node:sqlite'
import { draft, limiterContract, storeContract } from '../support/storage/contract.ts'
import { LocalLimiter } from '../../src/usage/local.ts'
import { openSqliteStore } from '../../src/storage/sqlite/store.ts'
import { migrations } from '../../src/storage/migrations.ts'
import { tempDir } from '../support/helper.ts'

storeContract('sqlite', async (clock) => openSqliteStore({ path: ':memory:', ...(clock === undefined ? {} : { clock }) }))
limiterContract('in-process', async (clock) => ({ limiter: new LocalLimiter(clock), close: async () => undefined }))

const POLICY = { maxFailures: 5, baseSeconds: 60, maxSeconds: 3600 }

test("sqlite: migrations are recorded and applied once; another connection's commit is announced", async (t) => {
  const path = join(tempDir(t), 'db.sqlite')
  const store = openSqliteStore({ path, changePollMs: 20 })
  await store.close()
  const again = openSqliteStore({ path, changePollMs: 20 })
  t.after(() => again.close())
  const db = new DatabaseSync(path)
  t.after(() => db.close())
  const versions = db
    .prepare('SELECT version FROM schema_migrations ORDER BY version')
    .all()
    .map((r) => Number(r.version))
  assert.deepEqual(
    versions,
    migrations.map((m) => m.version),
  )

  let changed = 0
  again.access.onChange(() => {
    changed++
  })
  db.prepare("INSERT INTO accounts (id, name, status, created_at, updated_at) VALUES ('acc_x', 'x', 'active', 'now', 'now')").run()
  const start = Date.now()
  while (changed === 0 && Date.now() - start < 2000) await new Promise((r) => setTimeout(r, 10))
  assert.ok(changed > 0, 'a commit by another connection is seen by polling')
})

test('sqlite: writes are durable once answered, and many in one turn share a commit', async (t) => {
  const path = join(tempDir(t), 'db.sqlite')
  const store = openSqliteStore({ path })
  const keys = Array.from({ length: 200 }, (_, i) => `k${i}`)
  const results = await Promise.all(keys.map((k) => store.verification.settle(k, 7, 1000, POLICY)))
  assert.ok(results.every((r) => r.kind === 'accepted'))
  const other = new DatabaseSync(path)
  assert.equal(Number(other.prepare('SELECT count(*) AS n FROM otp_state').get()?.n), 200, 'committed before the callers were answered')
  other.close()
  await store.close()
  const again = openSqliteStore({ path })
  t.after(() => again.close())
  assert.deepEqual(await again.verification.settle('k3', 7, 2000, POLICY), { kind: 'reused' }, 'the accepted step survived a restart')
})

/** until polls `check` every 10 ms for up to `ms`; it returns whether check came true. */
async function until(check: () => boolean, ms = 3000): Promise<boolean> {
  const start = Date.now()
  while (!check()) {
    if (Date.now() - start > ms) return false
    await new Promise((r) => setTimeout(r, 10))
  }
  return true
}

test('sqlite: the maintenance thread checkpoints the write-ahead log beside the server', async (t) => {
  // Rows in the log only reach the database file at a checkpoint; the server's own
  // connection checkpoints past 10 000 pages (1 000 without the thread), and these few
  // hundred rows make a few dozen.
  const fileGrows = async (maintenance: boolean, waitMs: number) => {
    const path = join(tempDir(t), 'db.sqlite')
    const store = openSqliteStore({ path, maintenance })
    try {
      await new Promise((r) => setTimeout(r, 300)) // the migrations' pages settle first
      const before = statSync(path).size
      await Promise.all(Array.from({ length: 500 }, (_, i) => store.verification.settle(`key-${i}`, 1, Date.now(), POLICY)))
      return await until(() => statSync(path).size > before, waitMs)
    } finally {
      await store.close()
    }
  }
  assert.equal(await fileGrows(false, 500), false, 'without the thread the rows stay in the log')
  assert.equal(await fileGrows(true, 3000), true, 'the thread moved them to the database file')
})

test('sqlite: the maintenance thread prunes all old verification state, chunk after chunk, and keeps locks and recent state', async (t) => {
  const path = join(tempDir(t), 'db.sqlite')
  const seed = openSqliteStore({ path, maintenance: false })
  const now = Date.now()
  const old = now - 60_000
  // 2 500 stale rows: ten chunks of 250.
  await Promise.all(Array.from({ length: 2500 }, (_, i) => seed.verification.settle(`stale-${i}`, 1, old, POLICY)))
  await seed.verification.settle('recent', 1, now, POLICY)
  const policy = { maxFailures: 1, baseSeconds: 3600, maxSeconds: 3600 }
  await seed.verification.settle('locked', null, old, policy)
  await seed.close()

  const errors: Error[] = []
  const store = openSqliteStore({ path, stateRetentionMs: 30_000, pruneMs: 50, onBackgroundError: (e) => errors.push(e) })
  t.after(() => store.close())
  const db = new DatabaseSync(path)
  t.after(() => db.close())
  const keys = () =>
    db
      .prepare('SELECT key FROM otp_state ORDER BY key')
      .all()
      .map((r) => String(r.key))
  assert.ok(await until(() => keys().length === 2), `left: ${keys().length} rows`)
  assert.deepEqual(keys(), ['locked', 'recent'])
  assert.deepEqual(
    await store.verification.settle('locked', null, now, policy),
    { kind: 'locked', lockedUntil: old + 3_600_000 },
    'the lock outlived the retention',
  )
  assert.deepEqual(errors, [])
})

test('sqlite: an audit event cannot be changed, even with SQL on the file', async (t) => {
  const path = join(tempDir(t), 'db.sqlite')
  const store = openSqliteStore({ path, maintenance: false })
  t.after(() => store.close())
  const event = await store.audit.append(draft('account.create'))
  const db = new DatabaseSync(path)
  t.after(() => db.close())
  assert.throws(() => db.prepare("UPDATE audit_events SET outcome = 'failure' WHERE id = ?").run(event.id), /audit events cannot be changed/)
  assert.equal((await store.audit.list({ limit: 1 })).items[0]?.outcome, 'success')
})

test('sqlite: an event rolled back after its insert takes its outbox rows with it; committed, they stay', async (t) => {
  const path = join(tempDir(t), 'db.sqlite')
  const store = openSqliteStore({ path, maintenance: false })
  t.after(() => store.close())
  await store.access.createAccount({ id: 'acc_w', name: 'w', status: 'active', createdAt: new Date().toISOString() }, draft('account.create'))
  await store.webhooks.createEndpoint(
    { id: 'whe_1', accountId: 'acc_w', url: 'https://x.example', eventTypes: null, createdAt: new Date().toISOString(), sealedSecret: 's' },
    10,
    draft('webhook.create'),
  )
  const db = new DatabaseSync(path)
  t.after(() => db.close())
  const insert = (id: string) =>
    db
      .prepare(`INSERT INTO audit_events (id, at, actor, action, target_type, target_id, account_id, ip, outcome, detail)
    VALUES (?, ?, 'system', 'factor.created', 'factor', 'fac_1', 'acc_w', NULL, 'success', '{"userID":"u"}')`)
      .run(id, new Date().toISOString())
  const count = () => Number(db.prepare('SELECT (SELECT count(*) FROM webhook_messages) + (SELECT count(*) FROM webhook_deliveries) AS n').get()?.n)
  db.exec('BEGIN IMMEDIATE')
  insert('evt_000000000000000000rb')
  assert.equal(count(), 2, 'the message and its delivery, in the transaction')
  db.exec('ROLLBACK')
  assert.equal(count(), 0)
  insert('evt_000000000000000000ok')
  assert.equal(count(), 2)
})
