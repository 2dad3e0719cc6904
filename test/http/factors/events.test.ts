/**
 * A factor's life, as the account's webhook endpoint hears it: every event of issue 15
 * (created, activated, verification failed, lockout started, codes regenerated, recovery code
 * used, deleted) reaches a real receiver, signed (verified with `standardwebhooks`), once each,
 * with the user and factor and never a secret or a code; and each is in the audit trail.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { post, startApp, testClock } from '../../support/helper.ts'
import { listening, waitFor } from '../../support/receiver.ts'
import { codeOf, enroll, path, wrong } from '../../support/factors.ts'
import { EVENT_TYPES } from '../../../src/domain/events.ts'

const T0 = Date.UTC(2026, 0, 1, 12, 0, 15)

test("every factor event reaches the account's endpoint, signed, once, without a secret", async (t) => {
  const app = await startApp(t, { WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_POLL_MS: '50', OTP_MAX_FAILURES: '3', PLAN_RATE: '0' }, testClock(T0))
  const receiver = await listening(app, t)

  const f = await enroll(app, 'user-42')
  const { recoveryCodes } = (await (await post(app.url, path('user-42', '/recovery-codes'), app.key, {})).json()) as { recoveryCodes: string[] }
  assert.equal((await post(app.url, path('user-42', '/recover'), app.key, { code: recoveryCodes[0]! })).status, 200)
  app.clock.advance(30_000)
  for (let i = 0; i < 3; i++) await post(app.url, path('user-42', '/verify'), app.key, { token: wrong(f, app.clock.now()) })
  assert.equal((await fetch(app.url + path('user-42', `/factors/${f.factorID}`), { method: 'DELETE', headers: { 'x-api-key': app.key } })).status, 204)

  const expected = [
    'factor.created',
    'factor.activated',
    'recovery_codes.regenerated',
    'recovery_code.used',
    'factor.verification_failed',
    'factor.verification_failed',
    'factor.verification_failed',
    'factor.lockout_started',
    'factor.deleted',
  ]
  await waitFor(() => receiver.ids().size >= expected.length, 15_000, `${expected.length} deliveries`)
  assert.ok(
    receiver.deliveries.every((d) => d.payload !== null),
    'every delivery verifies',
  )
  const byTime = [...receiver.deliveries].sort((a, b) => a.id.localeCompare(b.id))
  assert.deepEqual(
    byTime.map((d) => d.payload!.type),
    expected,
  )
  assert.equal(receiver.ids().size, expected.length, 'once each')
  assert.deepEqual(new Set(expected), new Set(EVENT_TYPES.filter((type) => !type.startsWith('conversion.'))), 'every factor event type was heard')
  for (const d of byTime) {
    assert.equal(d.payload!.data.userID, 'user-42')
    for (const secret of [f.secretKey, ...recoveryCodes, codeOf(f, T0)]) assert.ok(!d.body.includes(secret), `${d.payload!.type} holds no secret or code`)
  }
  assert.equal(byTime[0]!.payload!.data.factorID, f.factorID)
  const trail = await app.store.audit.list({ accountId: app.accountId, limit: 100 })
  for (const type of EVENT_TYPES.filter((t) => !t.startsWith('conversion.')))
    assert.ok(
      trail.items.some((e) => e.action === type),
      `${type} is in the audit trail`,
    )
})
