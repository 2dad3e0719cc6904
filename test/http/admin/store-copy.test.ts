/**
 * From one node to the cluster with `npm run admin -- store copy` (issue 42), as docs/deploy.md walks it: a node on
 * SQLite serves every kind of record (keys, a plan, an onboarding record, a managed TOTP factor with recovery codes,
 * a passkey, an Idempotency-Key, a conversion job whose result is kept, webhook events waiting for a receiver that
 * is down, usage and a refusal, a portal user signed in, an admin token); it stops; the copy into a fresh PostgreSQL
 * database is cut with SIGKILL part way (no node, nor the CLI, opens the half copy) and run again, and its check
 * finds every table the same; a second copy is refused; the copy back into an empty DATA_DIR has the same checksums.
 * Then a node on PostgreSQL and Redis, with the same PEPPER and ENCRYPTION_KEYS, answers the same key, verifies the
 * factor (codes from oathtool) and a recovery code, signs the passkey in, serves the job's result byte for byte, knows
 * the portal user and their session, and delivers the waiting events once the receiver is up.
 */
import { test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { createHash, randomBytes } from 'node:crypto'
import { execFile, spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { DatabaseSync } from 'node:sqlite'
import { join } from 'node:path'
import { promisify } from 'node:util'
import pg from 'pg'
import type { PublicKeyCredentialCreationOptionsJSON, PublicKeyCredentialRequestOptionsJSON } from '@simplewebauthn/server'
import { get, post, startApp, tempDir, testClock, type Running } from '../../support/helper.ts'
import { admin } from '../../support/admin-helper.ts'
import { createFactor, path } from '../../support/factors.ts'
import { runJob } from '../../support/convert.ts'
import { textPages } from '../../support/hostile.ts'
import { listening, waitFor, type Receiver } from '../../support/receiver.ts'
import { PortalClient, portalUser } from '../../support/portal-helper.ts'
import { createDatabase, redisEnv, skipUnless, toolSkip } from '../../support/services.ts'
import { SoftAuthenticator } from '../../support/soft-authenticator.ts'
import { CLI, SYSTEM } from '../../../src/domain/accounts.ts'
import { isFailure } from '../../../src/services/outcome.ts'
import type { CopyReport } from '../../../src/services/store-copy.ts'

const run = promisify(execFile)
const CLI_SCRIPT = new URL('../../../src/admin/cli.ts', import.meta.url).pathname
const ORIGIN = 'http://localhost:1234'
const SECRETS = { PEPPER: randomBytes(48).toString('base64'), ENCRYPTION_KEYS: `1:${randomBytes(32).toString('base64')}` }
/** One conversion worker, no throttle, usage flushed at once, webhooks retried often (to a receiver on loopback). */
const NODE = {
  ...SECRETS,
  CONVERTER_WORKERS: '1',
  JOB_WORKERS: '1',
  PLAN_RATE: '0',
  USAGE_FLUSH_MS: '100',
  WEBHOOK_ALLOW_PRIVATE: 'true',
  WEBHOOK_POLL_MS: '50',
  WEBHOOK_BACKOFF_MS: '200',
  WEBHOOK_BACKOFF_MAX_MS: '1000',
  WEBHOOK_TIMEOUT_MS: '1000',
}
const ALICE = 'alice@example.com'

async function oathtool(secret: string, atMs: number): Promise<string> {
  const { stdout } = await run('oathtool', ['--totp', '-b', `--now=@${Math.floor(atMs / 1000)}`, secret])
  return stdout.trim()
}

function send(app: Running, to: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(app.url + to, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': app.key, ...headers },
    body: JSON.stringify(body),
  })
}

async function passkeySignIn(app: Running, auth: SoftAuthenticator, user: string): Promise<number> {
  const options = (await (await send(app, path(user, '/passkeys/authentication/options'), {})).json()) as { options: PublicKeyCredentialRequestOptionsJSON }
  const res = await send(app, path(user, '/passkeys/authentication'), { credential: auth.authenticate(options.options) })
  await res.arrayBuffer()
  return res.status
}

const sha256 = async (res: Response) =>
  createHash('sha256')
    .update(Buffer.from(await res.arrayBuffer()))
    .digest('hex')

interface Served {
  readonly secret: string
  readonly recoveryCode: string
  readonly auth: SoftAuthenticator
  readonly jobId: string
  readonly result: string
  readonly portal: { readonly email: string; readonly password: string; readonly cookie: string }
  readonly receiver: Receiver
}

/** serve makes on node A a record of every kind, through its API and services, with its webhook receiver down. */
async function serve(t: TestContext, a: Running): Promise<Served> {
  const receiver = await listening(a, t)
  await receiver.stop()
  assert.ok(!isFailure(await a.factors.updateSettings({ actor: SYSTEM }, a.accountId, { rpId: 'localhost', rpName: 'Acme', origins: [ORIGIN] })))
  assert.ok(!isFailure(await a.accounts.setPlan({ actor: CLI }, a.accountId, { rate: 0, quota: 1_000_000, period: 'month' })))
  assert.ok(!isFailure(await a.accounts.createAdminToken({ actor: CLI }, { name: 'ops', scope: 'read' })))

  const factor = await createFactor(a, ALICE)
  const activated = await post(a.url, path(ALICE, `/factors/${factor.factorID}/activate`), a.key, { token: await oathtool(factor.secretKey, a.clock.now()) })
  assert.equal(activated.status, 200, await activated.text())
  a.clock.advance(30_000)
  const verified = await post(a.url, path(ALICE, '/verify'), a.key, { token: await oathtool(factor.secretKey, a.clock.now()) })
  assert.equal(verified.status, 200, await verified.text())
  const codes = await post(a.url, path(ALICE, '/recovery-codes'), a.key, {})
  assert.equal(codes.status, 201)
  const { recoveryCodes } = (await codes.json()) as { recoveryCodes: string[] }
  assert.equal((await post(a.url, path(ALICE, '/recover'), a.key, { code: recoveryCodes[0]! })).status, 200)
  const again = await post(a.url, path('carol', '/factors'), a.key, { applicationID: 'Acme' }, { 'idempotency-key': 'carol-1' })
  assert.equal(again.status, 201)
  const onboarded = await post(a.url, '/totp/onboardUser', a.key, { userID: 'dave', applicationID: 'Acme', algorithm: 'SHA256', tokenLength: '8' })
  assert.equal(onboarded.status, 200, await onboarded.text())

  const auth = new SoftAuthenticator({ origin: ORIGIN, rpId: 'localhost' })
  const options = (await (await send(a, path('bob', '/passkeys/registration/options'), { userName: 'bob@example.com' })).json()) as {
    options: PublicKeyCredentialCreationOptionsJSON
  }
  const registered = await send(a, path('bob', '/passkeys/registration'), { credential: auth.register(options.options), label: 'Laptop' })
  assert.equal(registered.status, 201, await registered.text())
  assert.equal(await passkeySignIn(a, auth, 'bob'), 200)

  const form = new FormData()
  form.append('operation', 'image')
  form.append('pdfDocument', new Blob([new Uint8Array(textPages(2))], { type: 'application/pdf' }), 'report.pdf')
  const job = await runJob(a, form)
  assert.equal(job.view.status, 'succeeded', JSON.stringify(job.view))

  // A key for TOTP alone, refused at the converter: a refusal counted.
  const scoped = await a.accounts.issueKey({ actor: CLI }, a.accountId, { name: 'totp only', scope: { groups: ['totp'] } })
  assert.ok(!isFailure(scoped))
  const refused = await get(a.url, `/converter/jobs/${job.view.jobID}`, scoped.apiKey)
  assert.equal(refused.status, 403)
  await refused.arrayBuffer()

  const user = await portalUser(a)
  const client = new PortalClient(a.url)
  await client.signIn(user.email, user.password)
  return {
    secret: factor.secretKey,
    recoveryCode: recoveryCodes[1]!,
    auth,
    jobId: job.view.jobID,
    result: await sha256(job.result!),
    portal: { email: user.email, password: user.password, cookie: client.cookieHeader },
    receiver,
  }
}

/**
 * deploy: the `store copy` commands of docs/deploy.md (run there in the cluster's container, the password from its environment),
 * as the CLI's arguments with the test's database in place of the cluster's.
 */
const deploy = (() => {
  const page = readFileSync(new URL('../../../docs/deploy.md', import.meta.url), 'utf8')
  const command = (flag: string) => {
    const m = new RegExp(`node src/admin/cli\\.ts (store copy ${flag}) "postgres://[^"]+"`).exec(page)
    assert.ok(m, `docs/deploy.md runs store copy ${flag}`)
    return (url: string) => [...m[1]!.split(' '), url]
  }
  return { to: command('--to'), from: command('--from') }
})()

/** cutCopy runs `store copy --to url --batch 1` and kills it (SIGKILL) once it has printed `lines` progress lines. */
function cutCopy(dataDir: string, url: string, lines: number): Promise<{ printed: number; signal: string | null }> {
  const child = spawn(process.execPath, [CLI_SCRIPT, 'store', 'copy', '--to', url, '--batch', '1'], {
    env: { ...process.env, ...SECRETS, DATA_DIR: dataDir, NODE_ENV: 'test' },
    stdio: ['ignore', 'ignore', 'pipe'],
  })
  let printed = 0
  child.stderr.on('data', (d: Buffer) => {
    printed += d
      .toString()
      .split('\n')
      .filter((l) => l.startsWith('store copy: ')).length
    if (printed >= lines) child.kill('SIGKILL')
  })
  return new Promise((resolve) => child.on('exit', (_code, signal) => resolve({ printed, signal })))
}

async function query(url: string, text: string): Promise<pg.QueryResult> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return await client.query(text)
  } finally {
    await client.end()
  }
}

test('store copy: a node on SQLite to PostgreSQL and Redis, cut and resumed, refused the second time, back again; the new node answers as the old one', {
  skip: skipUnless('TEST_DATABASE_URL', 'TEST_REDIS_URL') || toolSkip('oathtool', 'oathtool'),
  timeout: 240_000,
}, async (t) => {
  const dirA = tempDir(t)
  const a = await startApp(t, { ...NODE, DATA_DIR: dirA }, testClock())
  const served = await serve(t, a)
  await waitFor(async () => (await a.store.webhooks.pending()) >= 4, 10_000, 'events waiting for the receiver')
  // The node stops (its usage counted, its worker's claims given back) before the copy.
  await a.app.close()
  await a.store.close()
  const file = new DatabaseSync(join(dirA, 'tessera.sqlite'), { readOnly: true })
  const pending = file
    .prepare("SELECT message_id FROM webhook_deliveries WHERE status = 'pending'")
    .all()
    .map((r) => String(r.message_id))
  const filled = file
    .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT IN ('schema_migrations')")
    .all()
    .map((r) => String(r.name))
    .filter((name) => file.prepare(`SELECT 1 FROM ${name} LIMIT 1`).get() !== undefined)
  file.close()
  t.diagnostic(`tables with rows in the node's store: ${filled.length}: ${filled.join(', ')}`)
  for (const table of ['api_keys', 'plans', 'onboarding', 'usage_daily', 'refusals_daily', 'totp_factors', 'totp_recovery_codes', 'idempotency_records']) {
    assert.ok(filled.includes(table), `the node made rows of ${table}`)
  }
  for (const table of ['users', 'sessions', 'admin_tokens', 'webhook_deliveries', 'webhook_attempts', 'conversion_job_pieces', 'record_tallies']) {
    assert.ok(filled.includes(table), `the node made rows of ${table}`)
  }

  const url = await createDatabase(t)
  const cut = await cutCopy(dirA, url, 10)
  assert.equal(cut.signal, 'SIGKILL', 'the copy was cut, not finished')
  const progress = await query(url, "SELECT sum(rows)::int AS rows FROM store_copy_progress WHERE kind = 'table'")
  assert.ok(progress.rows[0].rows >= 10, `batches were committed before the cut (${progress.rows[0].rows} rows)`)
  const refused = await admin(tempDir(t), ['key', 'list'], { ...SECRETS, DATABASE_URL: url })
  assert.equal(refused.code, 1, 'nothing opens a half-copied store')
  assert.match(refused.stderr, /target of a store copy that has not finished/)

  const started = performance.now()
  const resumed = await admin(dirA, [...deploy.to(url), '--json'], SECRETS)
  const seconds = (performance.now() - started) / 1000
  assert.equal(resumed.code, 0, resumed.stderr)
  const report = JSON.parse(resumed.stdout) as CopyReport
  assert.ok(report.same, JSON.stringify(report.tables.filter((c) => !c.same)))
  assert.equal(report.resumedAfter, progress.rows[0].rows, 'it went on from where the cut left it')
  const rows = report.tables.reduce((n, c) => n + c.sourceRows, 0)
  assert.equal(report.copied + report.resumedAfter, rows, 'each row copied once')
  t.diagnostic(`resumed copy: ${report.copied} rows (after ${report.resumedAfter}) of ${rows}, ${seconds.toFixed(2)} s with the CLI's start`)

  const verified = await admin(dirA, ['store', 'verify', '--against', url, '--json'], SECRETS)
  assert.equal(verified.code, 0, verified.stderr)
  assert.deepEqual(
    (JSON.parse(verified.stdout) as CopyReport).tables.map((c) => c.targetSha256),
    report.tables.map((c) => c.sourceSha256),
  )
  const human = await admin(dirA, ['store', 'verify', '--against', url], SECRETS)
  assert.equal(human.code, 0, human.stderr)
  assert.match(human.stdout, /^table +source rows +target rows +sha256 \(source\) +sha256 \(target\)\naccounts +\d+ +\d+ +[0-9a-f]{16} +[0-9a-f]{16} +same\n/)
  assert.match(human.stdout, /\nEvery table is the same in .*tessera\.sqlite and postgres:\/\/[^:@]*@/, 'the URL shown without its password')
  const twice = await admin(dirA, deploy.to(url), SECRETS)
  assert.equal(twice.code, 1)
  assert.match(twice.stderr, /^error: the target store already holds data \(in accounts, /)

  const dirC = tempDir(t)
  const back = await admin(dirC, deploy.from(url), SECRETS)
  assert.equal(back.code, 0, back.stderr)
  const [first, ...rest] = back.stdout.trimEnd().split('\n')
  assert.match(first!, /^Copied \d+ rows from postgres:\/\/\S+ to \S+tessera\.sqlite in [\d.]+ s \(the check [\d.]+ s\)\.$/, 'as deploy.md shows it')
  assert.equal(rest.at(-1), 'Every table is the same: the copy is whole, and nodes may start on it.')
  assert.deepEqual(
    rest.slice(1, -1).map((line) => line.split(/ +/).slice(0, 5)),
    report.tables.map((c) => [c.table, String(c.sourceRows), String(c.sourceRows), c.sourceSha256.slice(0, 16), c.sourceSha256.slice(0, 16)]),
    'back on SQLite: the rows and checksums of the node store',
  )

  const clockB = testClock(a.clock.now() + 60_000)
  const b = await startApp(t, { ...NODE, DATA_DIR: tempDir(t), DATABASE_URL: url, ...(await redisEnv(t)) }, clockB)
  assert.equal(b.store.kind, 'postgres+redis')
  assert.equal((await get(b.url, '/totp/ping', a.key)).status, 200, "A's key answers on B")
  const code = await oathtool(served.secret, clockB.now())
  const right = await post(b.url, path(ALICE, '/verify'), a.key, { token: code })
  assert.equal(right.status, 200, `the factor verifies on B: ${await right.text()}`)
  assert.equal((await post(b.url, path(ALICE, '/recover'), a.key, { code: served.recoveryCode })).status, 200, 'a recovery code left')
  assert.equal(await passkeySignIn({ ...b, key: a.key }, served.auth, 'bob'), 200, 'the passkey signs in on B')
  const result = await get(b.url, `/converter/jobs/${served.jobId}/result`, a.key)
  assert.equal(result.status, 200)
  assert.equal(await sha256(result), served.result, 'the same result, byte for byte')
  const portal = async (headers: Record<string, string>) => {
    const res = await fetch(`${b.url}/portal`, { headers, redirect: 'manual' })
    await res.arrayBuffer()
    return `${res.status} ${res.headers.get('location') ?? ''}`
  }
  assert.match(await portal({}), /sign-in/, 'signed out, the portal asks to sign in')
  assert.doesNotMatch(await portal({ cookie: served.portal.cookie }), /sign-in/, 'the portal session of A is one on B')
  await new PortalClient(b.url).signIn(served.portal.email, served.portal.password)

  await served.receiver.start()
  await waitFor(() => pending.every((id) => served.receiver.ids().has(id)), 30_000, 'the events that waited, delivered by B')
  const types = served.receiver.deliveries.filter((d) => d.payload !== null).map((d) => d.payload!.type)
  assert.ok(types.includes('conversion.succeeded') && types.includes('factor.activated'), types.join(', '))
})

test('store copy and verify refuse: a node on PostgreSQL, no SQLite store, a URL that is not PostgreSQL, both directions at once', async (t) => {
  const dir = tempDir(t)
  const onPostgres = await admin(dir, ['store', 'copy', '--to', 'postgres://db.example/tessera'], { DATABASE_URL: 'postgres://db.example/tessera' })
  assert.equal(onPostgres.code, 1)
  assert.match(onPostgres.stderr, /^error: this node's store is PostgreSQL \(DATABASE_URL\); store copy copies the SQLite store of DATA_DIR/)
  const none = await admin(dir, ['store', 'verify', '--against', 'postgres://db.example/tessera'])
  assert.equal(none.code, 1)
  assert.match(none.stderr, /^error: there is no SQLite store at .*tessera\.sqlite \(check DATA_DIR\)/)
  const notPostgres = await admin(dir, ['store', 'copy', '--to', 'mysql://db.example/tessera'])
  assert.equal(notPostgres.code, 1)
  assert.match(notPostgres.stderr, /^error: --to must be a PostgreSQL URL/)
  const both = await admin(dir, ['store', 'copy', '--to', 'postgres://a/b', '--from', 'postgres://a/b'])
  assert.equal(both.code, 2)
  assert.match(
    both.stderr,
    /^error: give one of --to postgres:\/\/… and --from postgres:\/\/…\nUsage: npm run admin -- <command> \[options\] \[--json\]\n\n {2}store copy --to/,
  )
  const batch = await admin(dir, ['store', 'copy', '--to', 'postgres://a/b', '--batch', '0'])
  assert.equal(batch.code, 2)
  assert.match(batch.stderr, /--batch must be a whole number from 1 to 100000/)
})
