import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { KeyUse, UsageStore } from '../storage/ports.ts'
import type { RefusalRow, UsageRow } from '../domain/usage.ts'
import { UsageRecorder } from './recorder.ts'

function fakeStores() {
  const state = { up: false, saved: [] as UsageRow[], touched: [] as KeyUse[], refused: [] as RefusalRow[] }
  const usage: UsageStore = {
    async add(rows) {
      if (!state.up) throw new Error('store away')
      state.saved.push(...rows)
    },
    report: async () => [],
    total: async () => 0,
    async addRefusals(rows) {
      if (!state.up) throw new Error('store away')
      state.refused.push(...rows)
    },
    refusals: async () => [],
  }
  const access = {
    async touchKeys(uses: readonly KeyUse[]) {
      if (!state.up) throw new Error('store away')
      state.touched.push(...uses)
    },
  }
  return { state, usage, access }
}

test('usage is kept per day, key and group in calls and units, and a failed save keeps it for the next', async () => {
  const { state, usage, access } = fakeStores()
  let now = Date.UTC(2026, 10, 21, 23, 59, 59)
  const recorder = new UsageRecorder(usage, access, 'us', () => now)
  recorder.count('a', 'k1', 'totp', 2)
  recorder.count('a', 'k1', 'totp', 2)
  recorder.count('a', 'k2', 'converter', 1)
  recorder.count('b', 'k9', 'totp', 2)
  now += 1000
  recorder.count('a', 'k1', 'totp', 2)
  assert.equal(recorder.pending('a', '2026-11-21', '2026-11-21'), 5, 'in units')
  assert.equal(recorder.pending('a', '2026-11-01', '2026-11-30'), 7)
  assert.equal(recorder.lagMs(), 1000, 'the oldest count waits since the first call')
  await assert.rejects(recorder.flush(), /store away/)
  now += 4000
  recorder.count('a', 'k1', 'totp', 2)
  assert.equal(recorder.pending('a', '2026-11-22', '2026-11-22'), 4, 'kept, and added to')
  assert.equal(recorder.lagMs(), 5000, 'a failed save leaves the lag growing from the oldest count')
  state.up = true
  assert.equal(await recorder.flush(), 4, 'rows written')
  assert.equal(recorder.lagMs(), 0, 'nothing waits')
  assert.equal(await recorder.flush(), 0, 'nothing to write')
  const key = (r: UsageRow) => `${r.day}${r.keyId}${r.group}`
  assert.deepEqual(
    state.saved.sort((x, y) => key(x).localeCompare(key(y))),
    [
      { accountId: 'a', keyId: 'k1', region: 'us', day: '2026-11-21', group: 'totp', count: 2, units: 4 },
      { accountId: 'a', keyId: 'k2', region: 'us', day: '2026-11-21', group: 'converter', count: 1, units: 1 },
      { accountId: 'b', keyId: 'k9', region: 'us', day: '2026-11-21', group: 'totp', count: 1, units: 2 },
      { accountId: 'a', keyId: 'k1', region: 'us', day: '2026-11-22', group: 'totp', count: 2, units: 4 },
    ],
  )
  assert.equal(recorder.pending('a', '2000-01-01', '2999-12-31'), 0)
})

test("a key's last use is written at most once a minute, and its latest time is what is written", async () => {
  const { state, usage, access } = fakeStores()
  state.up = true
  let now = Date.UTC(2026, 10, 21, 12)
  const recorder = new UsageRecorder(usage, access, 'eu', () => now)
  recorder.count('a', 'k1', 'totp', 1)
  await recorder.flush()
  assert.deepEqual(state.touched, [{ keyId: 'k1', atMs: now, region: 'eu' }])
  for (let i = 0; i < 59; i++) {
    now += 1000
    recorder.count('a', 'k1', 'totp', 1)
    await recorder.flush()
  }
  assert.equal(state.touched.length, 1, 'not again within the minute')
  now += 1000
  recorder.count('a', 'k1', 'totp', 1)
  await recorder.flush()
  assert.deepEqual(state.touched.at(-1), { keyId: 'k1', atMs: now, region: 'eu' })
  assert.equal(state.touched.length, 2)
  now += 120_000
  await recorder.flush()
  assert.equal(state.touched.length, 2, 'no use, no write')
})

test('refused calls are kept per day, key, group and reason, a failed save keeps them, and they do not count as usage lag', async () => {
  const { state, usage, access } = fakeStores()
  let now = Date.UTC(2026, 10, 21, 23, 59, 59)
  const recorder = new UsageRecorder(usage, access, 'eu', () => now)
  for (let i = 0; i < 3; i++) recorder.refuse('a', 'k1', 'totp', 'not subscribed')
  recorder.refuse('a', 'k1', 'totp', 'over quota')
  now += 2000
  recorder.refuse('a', 'k1', 'totp', 'not subscribed')
  assert.equal(recorder.lagMs(), 0, 'no usage count waits')
  await assert.rejects(recorder.flush(), /store away/)
  recorder.refuse('b', 'k2', 'converter', 'revoked')
  state.up = true
  assert.equal(await recorder.flush(), 4)
  assert.deepEqual(
    state.refused.map((r) => [r.accountId, r.keyId, r.region, r.day, r.group, r.reason, r.count]).sort(),
    [
      ['a', 'k1', 'eu', '2026-11-21', 'totp', 'not subscribed', 3],
      ['a', 'k1', 'eu', '2026-11-21', 'totp', 'over quota', 1],
      ['a', 'k1', 'eu', '2026-11-22', 'totp', 'not subscribed', 1],
      ['b', 'k2', 'eu', '2026-11-22', 'converter', 'revoked', 1],
    ].sort(),
  )
  assert.equal(await recorder.flush(), 0, 'written once')
  assert.equal(state.saved.length, 0, 'no usage')
})
