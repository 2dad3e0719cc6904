/**
 * GroupCommit's failure paths: a turn's writes whose COMMIT fails, the connection closed under
 * them, are each answered with the error, never left waiting (a job runner's close once hung on a
 * claim caught so); and the store's close commits the writes begun while it stopped.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { DatabaseSync } from 'node:sqlite'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { GroupCommit } from './batch.ts'
import { openSqliteStore } from './store.ts'

test('writes whose connection closes before their commit are rejected, not left waiting, and nothing throws outside them', async () => {
  const db = new DatabaseSync(':memory:')
  db.exec('CREATE TABLE t (n INTEGER)')
  const batch = new GroupCommit(db)
  const writes = [1, 2, 3].map((n) => batch.run(() => db.prepare('INSERT INTO t VALUES (?)').run(n)))
  db.close()
  const settled = await Promise.race([Promise.allSettled(writes), new Promise((resolve) => setTimeout(() => resolve('still waiting'), 2000))])
  assert.notEqual(settled, 'still waiting')
  assert.deepEqual(
    (settled as PromiseSettledResult<unknown>[]).map((s) => s.status),
    ['rejected', 'rejected', 'rejected'],
  )
})

test('a write begun while the store closes is committed before the connection goes, and answered', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-batch-'))
  const path = join(dir, 'store.db')
  const store = openSqliteStore({ path, maintenance: false })
  const closing = store.close()
  // The close flushes, then yields (to its maintenance thread's stop, none here): a write begun in that yield is the case.
  const written = store.access.createAccount(
    { id: 'acc_late', name: 'late', status: 'active', createdAt: new Date().toISOString() },
    { actor: 'cli', action: 'account.create', target: { type: 'account', id: 'acc_late' }, accountId: 'acc_late', ip: null, outcome: 'success', detail: {} },
  )
  await closing
  await written
  const again = openSqliteStore({ path })
  // After hooks run in the order given: the store closes before its folder goes.
  t.after(() => again.close())
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  assert.equal((await again.access.getAccount('acc_late'))?.name, 'late')
})
