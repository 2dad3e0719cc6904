/**
 * FACTORS_PER_ACCOUNT over HTTP (issue 40): an account keeps at most its cap of managed factors
 * across its users, however many creations come at once; one past it is 409 FACTORS_PER_ACCOUNT
 * (a creation, an import), a deletion gives room back, and a bulk import through the admin API
 * reports each line past the cap as refused with that code and goes on to the last line.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { codes, createCaller, post, testClock } from '../../support/helper.ts'
import { startAdmin } from '../../support/admin-helper.ts'
import { createDatabase, skipUnless, type StoreEnv as Env } from '../../support/services.ts'
import { createFactor, path } from '../../support/factors.ts'
import { toBase32 } from '../../../src/totp/otp.ts'

const T0 = Date.UTC(2026, 0, 1, 12, 0, 15)

const stores: [string, Env, false | string][] = [
  ['sqlite', async () => ({}), false],
  ['postgres', async (t) => ({ DATABASE_URL: await createDatabase(t) }), skipUnless('TEST_DATABASE_URL')],
]

/** tally counts answers by status and code. */
async function tally(answers: Response[]): Promise<Record<string, number>> {
  const out: Record<string, number> = {}
  for (const r of answers) {
    const key = r.status < 300 ? String(r.status) : `${r.status} ${(await codes(r)).join(',')}`
    out[key] = (out[key] ?? 0) + 1
  }
  return out
}

for (const [name, env, skip] of stores) {
  test(`${name}: 40 factor creations at once for 40 users keep FACTORS_PER_ACCOUNT (12), the rest 409; imports, deletions, another account`, {
    skip,
  }, async (t) => {
    const a = await startAdmin(t, { PLAN_RATE: '0', FACTORS_PER_ACCOUNT: '12', ...(await env(t)) }, testClock(T0))
    const app = a.pub
    const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => post(app.url, path(`u${i}`, '/factors'), app.key, { applicationID: 'Acme' })))
    assert.deepEqual(await tally(answers), { 201: 12, '409 FACTORS_PER_ACCOUNT': 28 })
    const refused = await post(app.url, path('more', '/factors/import'), app.key, { secret: toBase32(randomBytes(20)), applicationID: 'Acme' })
    assert.equal(refused.status, 409)
    const body = (await refused.json()) as { code: string; message: string }[]
    assert.deepEqual(
      body.map((p) => [p.code, p.message]),
      [['FACTORS_PER_ACCOUNT', 'The account keeps 12 managed factors, the most it may; delete some first.']],
    )

    // Another account has a cap of its own; a user deleted with their factor gives room back.
    const other = await createCaller(app.accounts)
    await createFactor(app, 'someone', {}, other.apiKey)
    const made = answers.findIndex((r) => r.status === 201)
    const gone = await fetch(app.url + path(`u${made}`), { method: 'DELETE', headers: { 'x-api-key': app.key } })
    assert.equal(gone.status, 204)

    // A bulk import of 5 lines with room for one: one goes in, each other line is reported refused, to the last.
    const csv = Array.from({ length: 5 }, (_, i) => `csv-${i},${toBase32(randomBytes(20))},`).join('\n')
    const res = await fetch(`${a.url}/admin/v1/accounts/${app.accountId}/factors/import?applicationID=Acme`, {
      method: 'POST',
      headers: { authorization: `Bearer ${a.write.secret}`, 'content-type': 'text/csv' },
      body: csv,
    })
    assert.equal(res.status, 200)
    const report = (await res.text())
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>)
    // Lines are imported several at once: which one takes the room is not fixed, that each is reported, in order, is.
    const lines = report.slice(0, -1)
    assert.deepEqual(
      lines.map((r) => r.line),
      [1, 2, 3, 4, 5],
    )
    assert.equal(lines.filter((r) => r.outcome === 'imported').length, 1)
    assert.deepEqual(
      lines.filter((r) => r.outcome !== 'imported').map((r) => [r.outcome, r.code]),
      Array.from({ length: 4 }, () => ['refused', 'FACTORS_PER_ACCOUNT']),
    )
    assert.deepEqual(report.at(-1), { done: true, lines: 5, imported: 1, exists: 0, refused: 4, skipped: 0, stopped: null })
    assert.deepEqual(await codes(await post(app.url, path('late', '/factors'), app.key, { applicationID: 'Acme' })), ['FACTORS_PER_ACCOUNT'])
  })
}
