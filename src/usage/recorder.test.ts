import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { UsageRow, UsageStore } from '../storage/ports.ts'
import { UsageRecorder } from './recorder.ts'

test('usage counts are kept per day, account and group, and a failed save keeps them for the next', async () => {
  let up = false
  const saved: UsageRow[] = []
  const store: UsageStore = {
    async add(rows) {
      if (!up) throw new Error('store away')
      saved.push(...rows)
    },
    list: async () => [],
    total: async () => 0,
  }
  let now = Date.UTC(2026, 10, 21, 23, 59, 59)
  const recorder = new UsageRecorder(store, () => now)
  recorder.count('a', 'totp')
  recorder.count('a', 'totp')
  recorder.count('a', 'converter')
  recorder.count('b', 'totp')
  now += 1000
  recorder.count('a', 'totp')
  assert.equal(recorder.pending('a', '2026-11-21', '2026-11-21'), 3)
  assert.equal(recorder.pending('a', '2026-11-01', '2026-11-30'), 4)
  await assert.rejects(recorder.flush(), /store away/)
  recorder.count('a', 'totp')
  assert.equal(recorder.pending('a', '2026-11-22', '2026-11-22'), 2, 'kept, and added to')
  up = true
  await recorder.flush()
  assert.deepEqual(saved.sort((x, y) => `${x.day}${x.accountId}${x.group}`.localeCompare(`${y.day}${y.accountId}${y.group}`)), [
    { accountId: 'a', day: '2026-11-21', group: 'converter', count: 1 },
    { accountId: 'a', day: '2026-11-21', group: 'totp', count: 2 },
    { accountId: 'b', day: '2026-11-21', group: 'totp', count: 1 },
    { accountId: 'a', day: '2026-11-22', group: 'totp', count: 2 },
  ])
  assert.equal(recorder.pending('a', '2000-01-01', '2999-12-31'), 0)
})
