/**
 * Deleted webhook endpoints are bounded, through the real app and its admin API on SQLite and
 * on PostgreSQL: a deletion removes, in its own store step, the account's deleted endpoints past
 * WEBHOOK_DELETED_KEPT_PER_ACCOUNT with their deliveries, attempts and messages, whatever runs
 * in parallel. What the API shows does not change: a live endpoint's delivery log, a deleted
 * one's 404, and every create and delete in the audit trail. Rows are counted in the store.
 */
import { test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import pg from 'pg'
import { startAdmin, type Admin } from '../../support/admin-helper.ts'
import type { Clock } from '../../support/helper.ts'
import { Receiver, waitFor } from '../../support/receiver.ts'
import { createDatabase, skipUnless, type StoreEnv as Env } from '../../support/services.ts'

const stores: [string, Env, false | string][] = [
  ['sqlite', async () => ({}), false],
  ['postgres', async (t) => ({ DATABASE_URL: await createDatabase(t) }), skipUnless('TEST_DATABASE_URL')],
]

// The real clock: deletions are dated by it, and the delivery worker's leases run by it.
const realClock: Clock = { now: () => Date.now(), set: () => undefined, advance: () => undefined }
const KEPT = 3
const MAX = 4

// biome-ignore lint/suspicious/noExplicitAny: each test reads the fields of the answer it expects
async function call(a: Admin, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(a.url + path, {
    method,
    headers: { authorization: `Bearer ${a.write.secret}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
  const text = await res.text()
  return { status: res.status, body: text === '' ? null : JSON.parse(text) }
}

/** store: runs one read on the app's store (SQLite or PostgreSQL), `$1` the account. */
async function store(a: Admin, q: string, accountId: string): Promise<Record<string, unknown>[]> {
  const args = q.includes('$1') ? [accountId] : []
  if (!a.pub.config.databaseUrl) {
    const db = new DatabaseSync(join(a.pub.config.dataDir, 'tessera.sqlite'), { readOnly: true })
    const rows = db.prepare(q.replace('$1', '?')).all(...args)
    db.close()
    return rows
  }
  const c = new pg.Client({ connectionString: a.pub.config.databaseUrl })
  await c.connect()
  const { rows } = await c.query(q, args)
  await c.end()
  return rows
}

/** counts: the account's endpoint rows (live and deleted) and what hangs off them, as the store holds them. */
async function counts(a: Admin, accountId: string) {
  const sql = {
    live: 'SELECT count(*) AS n FROM webhook_endpoints WHERE account_id = $1 AND disabled_at IS NULL',
    deleted: 'SELECT count(*) AS n FROM webhook_endpoints WHERE account_id = $1 AND disabled_at IS NOT NULL',
    deliveries: 'SELECT count(*) AS n FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id WHERE e.account_id = $1',
    messages: 'SELECT count(*) AS n FROM webhook_messages WHERE account_id = $1',
    pending: "SELECT count(*) AS n FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id WHERE e.account_id = $1 AND d.status = 'pending'",
    // What WEBHOOK_PENDING_PER_ACCOUNT is held to: it must stay the count of pending deliveries.
    pendingTally: "SELECT coalesce(sum(row_count), 0) AS n FROM record_tallies WHERE owner = $1 AND kind = 'webhook_pending'",
    orphanDeliveries: 'SELECT count(*) AS n FROM webhook_deliveries d WHERE NOT EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.id = d.endpoint_id)',
    orphanAttempts: 'SELECT count(*) AS n FROM webhook_attempts w WHERE NOT EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.id = w.endpoint_id)',
  }
  const out: Record<string, number> = {}
  for (const [k, q] of Object.entries(sql)) out[k] = Number((await store(a, q, accountId))[0]?.n)
  return out as {
    live: number
    deleted: number
    deliveries: number
    messages: number
    pending: number
    pendingTally: number
    orphanDeliveries: number
    orphanAttempts: number
  }
}

/** event: a factor.created event of the account, which each of its endpoints takes as a delivery. */
const event = (a: Admin, accountId: string, n: number) =>
  a.pub.store.audit.append({
    actor: 'system',
    action: 'factor.created',
    target: { type: 'factor', id: `fac_${n}` },
    accountId,
    ip: null,
    outcome: 'success',
    detail: { userID: 'u1', factorID: `fac_${n}` },
  })

for (const [name, env, skip] of stores) {
  const start = async (t: TestContext) => {
    const a = await startAdmin(
      t,
      {
        ...(await env(t)),
        WEBHOOK_ALLOW_PRIVATE: 'true',
        WEBHOOK_POLL_MS: '50',
        WEBHOOK_MAX_ENDPOINTS: String(MAX),
        WEBHOOK_DELETED_KEPT_PER_ACCOUNT: String(KEPT),
      },
      realClock,
    )
    const receiver = await new Receiver().start()
    t.after(() => receiver.stop())
    return { a, hook: `http://127.0.0.1:${receiver.port}/in`, base: `/admin/v1/accounts/${a.pub.accountId}/webhooks` }
  }

  test(`${name}: a loop of create, deliver and delete keeps at most WEBHOOK_DELETED_KEPT_PER_ACCOUNT deleted endpoints, the last deleted, and shows what it showed`, {
    skip,
  }, async (t) => {
    const { a, hook, base } = await start(t)
    const accountId = a.pub.accountId
    const live = await call(a, 'POST', base, { url: hook })
    assert.equal(live.status, 201, JSON.stringify(live.body))
    const log = `${base}/${live.body.id}/deliveries`
    const deleted: string[] = []
    for (let n = 0; n < 12; n++) {
      const made = await call(a, 'POST', base, { url: hook })
      assert.equal(made.status, 201, JSON.stringify(made.body))
      await event(a, accountId, n)
      await waitFor(async () => (await call(a, 'GET', `${base}/${made.body.id}/deliveries`)).body.items[0]?.status === 'delivered', 5000, 'delivered')
      assert.deepEqual((await call(a, 'DELETE', `${base}/${made.body.id}`)).body, { deleted: true })
      deleted.push(made.body.id)
      const c = await counts(a, accountId)
      assert.ok(c.deleted <= KEPT, `round ${n}: ${c.deleted} deleted endpoints kept, more than ${KEPT}`)
    }
    await waitFor(async () => (await call(a, 'GET', log)).body.items.every((d: { status: string }) => d.status === 'delivered'), 5000, 'all delivered')
    const c = await counts(a, accountId)
    assert.deepEqual(
      c,
      { live: 1, deleted: KEPT, deliveries: 12 + KEPT, messages: 12, pending: 0, pendingTally: 0, orphanDeliveries: 0, orphanAttempts: 0 },
      'the live endpoint keeps its 12 deliveries, each kept deleted endpoint its one; nothing of the pruned ones stays',
    )
    const kept = await store(a, 'SELECT id FROM webhook_endpoints WHERE account_id = $1 AND disabled_at IS NOT NULL', accountId)
    assert.deepEqual(kept.map((r) => String(r.id)).sort(), deleted.slice(-KEPT).sort(), 'the last deleted are kept')
    // What the API shows: the live endpoint's whole log, a deleted endpoint's 404, and every change in the trail.
    const items = (await call(a, 'GET', `${log}?limit=50`)).body.items
    assert.equal(items.length, 12)
    assert.ok(
      items.every((d: { attempts: unknown[] }) => d.attempts.length === 1),
      JSON.stringify(items),
    )
    for (const id of [deleted[0], deleted.at(-1)]) assert.equal((await call(a, 'GET', `${base}/${id}/deliveries`)).status, 404)
    const trail = (await call(a, 'GET', `/admin/v1/audit-events?account=${accountId}&limit=100`)).body.items.map((e: { action: string }) => e.action)
    assert.equal(trail.filter((x: string) => x === 'webhook.delete').length, 12)
    assert.equal(trail.filter((x: string) => x === 'webhook.create').length, 13)
  })

  test(`${name}: creations and deletions in parallel never keep more than WEBHOOK_MAX_ENDPOINTS live and WEBHOOK_DELETED_KEPT_PER_ACCOUNT deleted endpoints`, {
    skip,
  }, async (t) => {
    const { a, hook, base } = await start(t)
    const accountId = a.pub.accountId
    let made = 0
    for (let round = 0; round < 6; round++) {
      const live = (await call(a, 'GET', base)).body.items as { id: string }[]
      const answers = await Promise.all([
        ...live.map((e) => call(a, 'DELETE', `${base}/${e.id}`)),
        ...Array.from({ length: 2 * MAX }, () => call(a, 'POST', base, { url: hook })),
      ])
      made += answers.filter((r) => r.status === 201).length
      await event(a, accountId, round)
      const c = await counts(a, accountId)
      assert.ok(c.live <= MAX, `round ${round}: ${c.live} live endpoints`)
      assert.ok(c.deleted <= KEPT, `round ${round}: ${c.deleted} deleted endpoints kept, more than ${KEPT}`)
      assert.equal(c.orphanDeliveries, 0)
    }
    assert.ok(made > MAX + KEPT, `${made} endpoints made, enough to pass the bound`)
    await waitFor(async () => (await counts(a, accountId)).pending === 0, 5000, 'every delivery sent')
    const c = await counts(a, accountId)
    assert.deepEqual([c.pendingTally, c.orphanDeliveries, c.orphanAttempts], [0, 0, 0], 'the pending tally is back to 0; nothing of a pruned endpoint stays')
  })
}
