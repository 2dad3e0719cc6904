/**
 * Backups you can restore (issue 41), by the procedure of docs/operating.md ("Backups and
 * restore"): a node serves with a key, a managed TOTP factor, a passkey and a conversion job's
 * result; a backup is taken while requests write to the store (`npm run admin -- backup` on
 * SQLite, pg_dump on PostgreSQL); a new node started on the restored copy, with the same PEPPER
 * and ENCRYPTION_KEYS, answers the same key, verifies the same factors (codes from oathtool, an
 * assertion of the same authenticator) and serves the same result, byte for byte. What came after
 * the backup is not in it. And `backup`'s refusals: a file that exists, a PostgreSQL store.
 */
import { test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { createHash, randomBytes } from 'node:crypto'
import { execFile } from 'node:child_process'
import { copyFile, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import type { PublicKeyCredentialCreationOptionsJSON, PublicKeyCredentialRequestOptionsJSON } from '@simplewebauthn/server'
import { get, post, startApp, tempDir, testClock, type Clock, type Running } from '../../support/helper.ts'
import { admin } from '../../support/admin-helper.ts'
import { createFactor, path } from '../../support/factors.ts'
import { runJob } from '../../support/convert.ts'
import { textPages } from '../../support/hostile.ts'
import { createDatabase, skipUnless, toolSkip } from '../../support/services.ts'
import { SoftAuthenticator } from '../../support/soft-authenticator.ts'
import { SYSTEM } from '../../../src/domain/accounts.ts'
import { isFailure } from '../../../src/services/outcome.ts'

const run = promisify(execFile)
const ORIGIN = 'http://localhost:1234'
/** The secrets a restore needs besides the backup, kept apart from it. */
const SECRETS = { PEPPER: randomBytes(48).toString('base64'), ENCRYPTION_KEYS: `1:${randomBytes(32).toString('base64')}` }
/** One conversion worker, the account's plan without a throttle: the load below is about writes, not limits. */
const NODE = { ...SECRETS, CONVERTER_WORKERS: '1', JOB_WORKERS: '1', PLAN_RATE: '0' }

/** oathtool's code for a base32 secret at a time (ms): an implementation that is not ours. */
async function oathtool(secret: string, atMs: number): Promise<string> {
  const { stdout } = await run('oathtool', ['--totp', '-b', `--now=@${Math.floor(atMs / 1000)}`, secret])
  return stdout.trim()
}

function send(app: Running, to: string, body: unknown): Promise<Response> {
  return fetch(app.url + to, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': app.key }, body: JSON.stringify(body) })
}

/** passkeySignIn: authentication options for `user`, answered by the authenticator, sent: the answer's status. */
async function passkeySignIn(app: Running, auth: SoftAuthenticator, user: string): Promise<number> {
  const options = (await (await send(app, path(user, '/passkeys/authentication/options'), {})).json()) as { options: PublicKeyCredentialRequestOptionsJSON }
  const res = await send(app, path(user, '/passkeys/authentication'), { credential: auth.authenticate(options.options) })
  await res.arrayBuffer()
  return res.status
}

interface Served {
  readonly secret: string
  readonly auth: SoftAuthenticator
  readonly jobId: string
  readonly result: string
}

/** serve gives node A what a restore must bring back: a TOTP factor verified once, a passkey signed in with once, a job's result. */
async function serve(app: Running): Promise<Served> {
  const set = await app.factors.updateSettings({ actor: SYSTEM }, app.accountId, { rpId: 'localhost', rpName: 'Acme', origins: [ORIGIN] })
  assert.ok(!isFailure(set))
  const factor = await createFactor(app, 'alice@example.com')
  const activated = await post(app.url, path('alice@example.com', `/factors/${factor.factorID}/activate`), app.key, {
    token: await oathtool(factor.secretKey, app.clock.now()),
  })
  assert.equal(activated.status, 200, await activated.text())
  app.clock.advance(30_000)
  const verified = await post(app.url, path('alice@example.com', '/verify'), app.key, { token: await oathtool(factor.secretKey, app.clock.now()) })
  assert.equal(verified.status, 200, await verified.text())

  const auth = new SoftAuthenticator({ origin: ORIGIN, rpId: 'localhost' })
  const options = (await (await send(app, path('bob', '/passkeys/registration/options'), { userName: 'bob@example.com' })).json()) as {
    options: PublicKeyCredentialCreationOptionsJSON
  }
  const registered = await send(app, path('bob', '/passkeys/registration'), { credential: auth.register(options.options), label: 'Laptop' })
  assert.equal(registered.status, 201, await registered.text())
  assert.equal(await passkeySignIn(app, auth, 'bob'), 200)

  const form = new FormData()
  form.append('operation', 'image')
  form.append('pdfDocument', new Blob([new Uint8Array(textPages(2))], { type: 'application/pdf' }), 'report.pdf')
  const job = await runJob(app, form)
  assert.equal(job.view.status, 'succeeded', JSON.stringify(job.view))
  const result = createHash('sha256')
    .update(Buffer.from(await job.result!.arrayBuffer()))
    .digest('hex')
  return { secret: factor.secretKey, auth, jobId: job.view.jobID, result }
}

/** underLoad runs `backup` while requests write to the store (factors made, keys' calls counted): how many writes were answered while it ran. */
async function underLoad(app: Running, backup: () => Promise<void>): Promise<{ writes: number }> {
  let done = false
  let writes = 0
  const writer = async (n: number) => {
    for (let i = 0; !done; i++) {
      const res = await post(app.url, path(`load-${n}-${i}`, '/factors'), app.key, { applicationID: 'Acme' })
      assert.equal(res.status, 201, await res.text())
      writes++
      assert.equal((await get(app.url, '/totp/ping', app.key)).status, 200)
    }
  }
  const writers = [0, 1, 2].map(writer)
  // The load runs before the backup starts, and until it has ended.
  while (writes < 10) await new Promise((resolve) => setTimeout(resolve, 10))
  const before = writes
  let after = before
  try {
    await backup()
    after = writes
  } finally {
    done = true
    await Promise.all(writers)
  }
  return { writes: after - before }
}

/** checkRestored: node B, on the restored copy, answers as A did; what A made after the backup is not there. */
async function checkRestored(a: Running, b: Running, served: Served, clockB: Clock): Promise<void> {
  assert.equal((await get(b.url, '/totp/ping', a.key)).status, 200, "A's key answers on B")
  assert.equal((await get(b.url, '/totp/ping', `${a.key.slice(0, -4)}AAAA`)).status, 403, 'and not any key does')
  clockB.set(a.clock.now() + 60_000)
  const code = await oathtool(served.secret, clockB.now())
  const wrong = await post(b.url, path('alice@example.com', '/verify'), a.key, { token: code === '000000' ? '000001' : '000000' })
  assert.notEqual(wrong.status, 200, 'a wrong code is refused')
  await wrong.arrayBuffer()
  const right = await post(b.url, path('alice@example.com', '/verify'), a.key, { token: code })
  assert.equal(right.status, 200, `the TOTP factor verifies on B: ${await right.text()}`)
  assert.equal(await passkeySignIn({ ...b, key: a.key }, served.auth, 'bob'), 200, 'the passkey signs in on B')
  const result = await get(b.url, `/converter/jobs/${served.jobId}/result`, a.key)
  assert.equal(result.status, 200)
  assert.equal(
    createHash('sha256')
      .update(Buffer.from(await result.arrayBuffer()))
      .digest('hex'),
    served.result,
    'the same result, byte for byte',
  )
  const late = await get(b.url, path('late-user', '/factors'), a.key)
  assert.equal(late.status, 404, 'what A made after the backup is not in it')
  await late.arrayBuffer()
}

/** madeAfter: a factor A makes once the backup has ended. */
async function madeAfter(a: Running): Promise<void> {
  await createFactor(a, 'late-user')
}

test('sqlite: npm run admin -- backup while the node serves; a new node on the restored file answers the same key, factors and job result', {
  skip: toolSkip('oathtool', 'oathtool'),
  timeout: 180_000,
}, async (t: TestContext) => {
  const dirA = tempDir(t)
  const a = await startApp(t, { ...NODE, DATA_DIR: dirA }, testClock())
  const served = await serve(a)
  const file = join(tempDir(t), 'tessera-backup.sqlite')
  let printed = ''
  const { writes } = await underLoad(a, async () => {
    const made = await admin(dirA, ['backup', file], SECRETS)
    assert.equal(made.code, 0, made.stderr)
    printed = made.stdout
  })
  assert.ok(writes > 0, `writes went on during the backup (${writes})`)
  t.diagnostic(`writes answered during the backup: ${writes}`)
  const bytes = (await stat(file)).size
  assert.equal(
    printed.trim(),
    `Backed up the SQLite store to ${file}: ${bytes} bytes, integrity ok, schema version ${/schema version (\d+)/.exec(printed)?.[1]}`,
  )
  assert.equal((await stat(file)).mode & 0o777, 0o600, 'as private as the store')
  await madeAfter(a)

  const again = await admin(dirA, ['backup', file], SECRETS)
  assert.equal(again.code, 1)
  assert.match(again.stderr, /exists: give --force to replace it/)
  assert.equal((await stat(file)).size, bytes, 'the backup there is left as it was')

  // The restore: the file as DATA_DIR/tessera.sqlite of a new node, with the same PEPPER and ENCRYPTION_KEYS.
  const dirB = tempDir(t)
  await copyFile(file, join(dirB, 'tessera.sqlite'))
  const clockB = testClock()
  const b = await startApp(t, { ...NODE, DATA_DIR: dirB }, clockB)
  await checkRestored(a, b, served, clockB)
})

test('postgres: pg_dump while the node serves, pg_restore into a fresh database; a new node there answers the same key, factors and job result', {
  skip: skipUnless('TEST_DATABASE_URL') || toolSkip('pg_dump', 'postgresql-client') || toolSkip('oathtool', 'oathtool'),
  timeout: 180_000,
}, async (t: TestContext) => {
  const urlA = await createDatabase(t)
  const dirA = tempDir(t)
  const a = await startApp(t, { ...NODE, DATA_DIR: dirA, DATABASE_URL: urlA }, testClock())
  const served = await serve(a)
  const refused = await admin(dirA, ['backup', join(dirA, 'x.sqlite')], { ...SECRETS, DATABASE_URL: urlA })
  assert.equal(refused.code, 1)
  assert.match(refused.stderr, /keeps its data in PostgreSQL \(DATABASE_URL\): back it up with pg_dump --format=custom/)

  const dump = join(tempDir(t), 'tessera.dump')
  const { writes } = await underLoad(a, async () => {
    await run('pg_dump', ['--format=custom', `--file=${dump}`, urlA])
  })
  assert.ok(writes > 0, `writes went on during the backup (${writes})`)
  t.diagnostic(`writes answered during the backup: ${writes}`)
  await madeAfter(a)

  const urlB = await createDatabase(t)
  await run('pg_restore', ['--no-owner', '--exit-on-error', `--dbname=${urlB}`, dump])
  const clockB = testClock()
  const b = await startApp(t, { ...NODE, DATA_DIR: tempDir(t), DATABASE_URL: urlB }, clockB)
  await checkRestored(a, b, served, clockB)
})
