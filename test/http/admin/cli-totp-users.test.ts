/**
 * The CLI's totp-user commands against a running server on the same SQLite store: a user
 * locked by parallel wrong codes is shown locked, unlocked from the CLI and verifies at once;
 * a deleted user's codes stop working; people's output, --json, and one-line errors.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { post, startApp, tempDir } from '../../support/helper.ts'
import { admin, adminJson } from '../../support/admin-helper.ts'
import { codeOf, enroll, path, wrong } from '../../support/factors.ts'

test("totp-user list/show/unlock/delete: a locked user is shown locked, unlocked and verifies at once; a deleted user's codes stop working", async (t) => {
  const dataDir = tempDir(t)
  const app = await startApp(t, { DATA_DIR: dataDir, OTP_MAX_FAILURES: '5', PLAN_RATE: '0' })
  const user = 'dana@example.com'
  const f = await enroll(app, user)
  app.clock.advance(30_000)
  const guesses = await Promise.all(Array.from({ length: 12 }, () => post(app.url, path(user, '/verify'), app.key, { token: wrong(f, app.clock.now()) })))
  assert.equal(guesses.filter((r) => r.status === 429).length, 7)
  const right = () => post(app.url, path(user, '/verify'), app.key, { token: codeOf(f, app.clock.now()) })
  assert.equal((await right()).status, 429)
  const account = ['--account', app.accountId]

  const shown = await adminJson<{
    userID: string
    locked: boolean
    lockedUntil: string
    factors: { factorID: string; status: string }[]
    recoveryCodesLeft: number
  }>(dataDir, ['totp-user', 'show', ...account, '--user', user])
  assert.equal(shown.userID, user)
  assert.equal(shown.locked, true)
  assert.deepEqual(
    shown.factors.map((x) => [x.factorID, x.status]),
    [[f.factorID, 'active']],
  )
  assert.ok(!JSON.stringify(shown).includes(f.secretKey))
  const human = await admin(dataDir, ['totp-user', 'show', ...account, '--user', user])
  assert.match(human.stdout, new RegExp(`^User dana@example\\.com of account ${app.accountId}: locked until \\S+; 0 recovery code\\(s\\) left\\n`))
  assert.match(human.stdout, new RegExp(`${f.factorID}\\s+active\\s+Acme\\s+universal\\s+SHA1 6 digits 30 s`))
  const list = await admin(dataDir, ['totp-user', 'list', ...account])
  assert.match(list.stdout, /^userID\s+active\s+pending\s+codesLeft\s+locked\s+createdAt\ndana@example\.com\s+1\s+0\s+0\s+\d{4}-/)

  assert.deepEqual(await adminJson(dataDir, ['totp-user', 'unlock', ...account, '--user', user]), { accountId: app.accountId, userID: user, cleared: true })
  assert.equal((await right()).status, 200, 'verifies at once')
  assert.equal((await adminJson<{ items: { lockedUntil: string | null }[] }>(dataDir, ['totp-user', 'list', ...account])).items[0]!.lockedUntil, null)

  const deleted = await admin(dataDir, ['totp-user', 'delete', ...account, '--user', user])
  assert.equal(deleted.stdout, `Deleted user ${user}'s factors and recovery codes in account ${app.accountId}\n`)
  app.clock.advance(30_000)
  assert.equal((await right()).status, 404, 'the user is gone')
  const events = (await app.accounts.auditEvents({ accountId: app.accountId, actor: 'cli', limit: 10 })).items
  assert.deepEqual(
    events.map((e) => [e.action, e.outcome]),
    [
      ['factor.deleted', 'success'],
      ['factor-lockout.clear', 'success'],
    ],
  )
  assert.deepEqual(events[0]!.detail, { userID: user, factorID: null, user: true, by: 'operator' })

  const gone = await admin(dataDir, ['totp-user', 'show', ...account, '--user', user])
  assert.deepEqual([gone.code, gone.stderr], [1, `error: no TOTP user ${user} in account ${app.accountId}\n`])
  assert.equal((await admin(dataDir, ['totp-user', 'unlock', '--account', 'acc_none', '--user', user])).stderr, 'error: no account acc_none\n')
  for (const id of ['a:b', '..', '.', 'evil\u202egnp', 'zero\u200bwidth', 'iso\u2066late']) {
    const bad = await admin(dataDir, ['totp-user', 'show', ...account, '--user', id])
    assert.equal(bad.code, 1, id)
    assert.match(
      bad.stderr,
      /^error: userID must be 1 to 256 characters \(compared in Unicode NFC\), not blank, not "\." or "\.\.", without ":", control, format/,
      id,
    )
  }
  const missing = await admin(dataDir, ['totp-user', 'show', ...account])
  assert.equal(missing.code, 2)
  assert.match(missing.stderr, /^error: missing --user\n/)
  assert.equal((await admin(dataDir, ['totp-user', 'list', ...account, '--after', 'not-a-cursor'])).code, 1)
  assert.equal((await admin(dataDir, ['totp-user', 'purge', ...account])).code, 2)
})
