/**
 * WEBHOOK_PENDING_PER_ACCOUNT over HTTP (issue 40): with its receiver down, an account's events
 * past the cap of pending deliveries are kept (the factors made, the audit trail whole), only
 * their deliveries are not written; the node counts them in tessera_webhook_deliveries_dropped_total
 * and notes the account once in the log, without the endpoint's secret.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { post, startApp, testClock } from '../../support/helper.ts'
import { waitFor } from '../../support/receiver.ts'
import { createDatabase, skipUnless, type StoreEnv as Env } from '../../support/services.ts'
import { path } from '../../support/factors.ts'
import { Webhooks } from '../../../src/services/webhooks.ts'
import { resolveKeyring } from '../../../src/config/encryption.ts'
import { isFailure } from '../../../src/services/outcome.ts'
import { SYSTEM } from '../../../src/domain/accounts.ts'

const TOKEN = 'm'.repeat(32)

const stores: [string, Env, false | string][] = [
  ['sqlite', async () => ({}), false],
  ['postgres', async (t) => ({ DATABASE_URL: await createDatabase(t) }), skipUnless('TEST_DATABASE_URL')],
]

for (const [name, env, skip] of stores) {
  test(`${name}: past WEBHOOK_PENDING_PER_ACCOUNT (5) an event's delivery is dropped, counted and noted once; the events are kept`, { skip }, async (t) => {
    const app = await startApp(
      t,
      {
        ...(await env(t)),
        PLAN_RATE: '0',
        WEBHOOK_PENDING_PER_ACCOUNT: '5',
        WEBHOOK_ALLOW_PRIVATE: 'true',
        WEBHOOK_POLL_MS: '50',
        METRICS_TOKEN: TOKEN,
      },
      testClock(),
    )
    // A receiver that is down: nothing listens on the discard port, so every attempt fails and is retried later (on the
    // clock of now: the retry window runs from the event).
    const made = await new Webhooks({ store: app.store, keyring: resolveKeyring(app.config), config: app.config }).create({ actor: SYSTEM }, app.accountId, {
      url: 'http://127.0.0.1:9/hooks',
    })
    assert.ok(!isFailure(made))
    const created = await Promise.all(Array.from({ length: 20 }, (_, i) => post(app.url, path(`u${i}`, '/factors'), app.key, { applicationID: 'Acme' })))
    assert.deepEqual(
      created.map((r) => r.status),
      Array.from({ length: 20 }, () => 201),
    )
    assert.equal(await app.store.webhooks.pending(), 5)
    assert.equal((await app.store.audit.list({ accountId: app.accountId, action: 'factor.created', limit: 100 })).items.length, 20)

    const dropped = async () => {
      const text = await (await fetch(`${app.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).text()
      return Number(/^tessera_webhook_deliveries_dropped_total(?:\{[^}]*\})? (\d+)$/m.exec(text)?.[1])
    }
    await waitFor(async () => (await dropped()) === 15, 5000, '15 dropped deliveries counted')
    const notes = () => app.logs.filter((l) => l.includes('webhook deliveries dropped'))
    assert.equal(notes().length, 1)
    const note = JSON.parse(notes()[0]!) as Record<string, unknown>
    assert.deepEqual([note.level, note.accountId, note.limit], [40, app.accountId, 5])
    // The worker may have taken the first drops while the creations were still coming: the note has those, at least one.
    assert.ok(Number(note.dropped) >= 1 && Number(note.dropped) <= 15, String(note.dropped))
    assert.ok(!notes()[0]!.includes(made.secret.slice(6)), 'no secret in the note')

    // More within the hour: counted, not noted again.
    await Promise.all(Array.from({ length: 3 }, (_, i) => post(app.url, path(`v${i}`, '/factors'), app.key, { applicationID: 'Acme' })))
    await waitFor(async () => (await dropped()) === 18, 5000, '18 dropped deliveries counted')
    assert.equal(notes().length, 1)
  })
}
