import { test } from 'node:test'
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import { limiterContract, storeContract } from '../contract.ts'
import { LocalLimiter } from '../../usage/local.ts'
import { openSqliteStore } from './store.ts'
import { migrations } from '../migrations.ts'
import { tempDir } from '../../../test/helper.ts'

storeContract('sqlite', async () => openSqliteStore({ path: ':memory:' }))
limiterContract('in-process', async (clock) => ({ limiter: new LocalLimiter(clock), close: async () => undefined }))

test('sqlite: migrations are recorded and applied once; another connection\'s commit is announced', async (t) => {
  const path = join(tempDir(t), 'db.sqlite')
  const store = openSqliteStore({ path, changePollMs: 20 })
  await store.close()
  const again = openSqliteStore({ path, changePollMs: 20 })
  t.after(() => again.close())
  const db = new DatabaseSync(path)
  t.after(() => db.close())
  const versions = db.prepare('SELECT version FROM schema_migrations ORDER BY version').all().map((r) => Number(r.version))
  assert.deepEqual(versions, migrations.map((m) => m.version))

  let changed = 0
  again.access.onChange(() => { changed++ })
  db.prepare("INSERT INTO accounts (id, name, status, created_at, updated_at) VALUES ('acc_x', 'x', 'active', 'now', 'now')").run()
  const start = Date.now()
  while (changed === 0 && Date.now() - start < 2000) await new Promise((r) => setTimeout(r, 10))
  assert.ok(changed > 0, 'a commit by another connection is seen by polling')
})

test('sqlite: writes are durable once answered, and many in one turn share a commit', async (t) => {
  const path = join(tempDir(t), 'db.sqlite')
  const store = openSqliteStore({ path })
  const keys = Array.from({ length: 200 }, (_, i) => `k${i}`)
  const results = await Promise.all(keys.map((k) => store.verification.accept(k, 7, 1000)))
  assert.ok(results.every((r) => r === 'accepted'))
  const other = new DatabaseSync(path)
  assert.equal(Number(other.prepare('SELECT count(*) AS n FROM otp_state').get()?.n), 200, 'committed before the callers were answered')
  other.close()
  await store.close()
  const again = openSqliteStore({ path })
  t.after(() => again.close())
  assert.equal(await again.verification.accept('k3', 7, 2000), 'reused', 'the accepted step survived a restart')
})
