/**
 * What the server leaves on disk (issue 11, finding 8): a pepper file held to PEPPER's rule,
 * DATA_DIR created 0700, the SQLite files (WAL and shared memory included) 0600.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { chmodSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { tempDir } from '../../support/helper.ts'
import { startServer } from '../../support/process.ts'
import { openSqliteStore } from '../../../src/storage/sqlite/store.ts'

const mode = (path: string) => (statSync(path).mode & 0o777).toString(8)

for (const [what, content] of [
  ['an empty', ''],
  ['a 5-byte', 'abcde'],
  ['a 31-character', `${'p'.repeat(31)}\n`],
] as const) {
  test(`${what} pepper file stops start-up with a message naming the file`, async (t) => {
    const dataDir = tempDir(t)
    const file = join(dataDir, 'pepper')
    writeFileSync(file, content, { mode: 0o600 })
    const server = startServer({ DATA_DIR: dataDir, PEPPER: '' }, t)
    await assert.rejects(server.ready, /exited 1/)
    assert.match(server.errors(), new RegExp(`Invalid pepper file ${file}: it must hold at least 32 characters`))
    assert.doesNotMatch(server.errors(), /\n\s+at /, 'one line, no stack trace')
  })
}

test('a pepper file of 32 characters is used', async (t) => {
  const dataDir = tempDir(t)
  writeFileSync(join(dataDir, 'pepper'), `${'p'.repeat(32)}\n`, { mode: 0o600 })
  const server = startServer({ DATA_DIR: dataDir, PEPPER: '' }, t)
  await server.ready
  assert.equal(await server.stop(), 0)
})

test('DATA_DIR is created 0700, the pepper file and the SQLite files (WAL and shared memory included) 0600', async (t) => {
  const dataDir = join(tempDir(t), 'data')
  const server = startServer({ DATA_DIR: dataDir, PEPPER: '' }, t)
  await server.ready // the demo account has been written: the WAL and shared-memory files exist
  assert.equal(mode(dataDir), '700')
  assert.equal(mode(join(dataDir, 'pepper')), '600')
  for (const name of ['tessera.sqlite', 'tessera.sqlite-wal', 'tessera.sqlite-shm']) assert.equal(mode(join(dataDir, name)), '600', name)
  assert.equal(await server.stop(), 0)
})

test('with PEPPER set, the store creates DATA_DIR 0700 itself; files an older version made 0644 are narrowed to 0600', async (t) => {
  const dataDir = join(tempDir(t), 'nested', 'data')
  const path = join(dataDir, 'tessera.sqlite')
  const first = openSqliteStore({ path })
  await first.close()
  assert.equal(mode(dataDir), '700')
  assert.equal(mode(path), '600')
  chmodSync(path, 0o644)
  writeFileSync(`${path}-wal`, '', { mode: 0o644 })
  chmodSync(`${path}-wal`, 0o644)
  const again = openSqliteStore({ path })
  t.after(() => again.close())
  assert.equal(mode(path), '600')
  assert.equal(mode(`${path}-wal`), '600')
})
