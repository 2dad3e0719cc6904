/**
 * What the admin tests share: a public node with the admin API beside it on a real port
 * (every answer checked against the admin document, a read and a write token), and the
 * admin CLI run as a process on a node's DATA_DIR.
 */
import { Users } from '../../src/services/users.ts'
import { sealedPortal } from '../../src/services/users/sealed.ts'
import { Idempotency } from '../../src/services/idempotency.ts'
import assert from 'node:assert/strict'
import type { TestContext } from 'node:test'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { startApp, testClock, type Clock, type Running } from './helper.ts'
import { checkAnswersFrom, type OpenApiDocument } from './conformance.ts'
import { buildAdminApp } from '../../src/admin/api/app.ts'
import { Webhooks } from '../../src/services/webhooks.ts'
import { Jobs } from '../../src/services/jobs.ts'
import { resolveKeyring } from '../../src/config/encryption.ts'
import { isFailure } from '../../src/services/outcome.ts'
import { CLI } from '../../src/domain/accounts.ts'
import { Team } from '../../src/services/team.ts'
import { openMailer } from '../../src/mail/mailer.ts'

export interface Admin {
  readonly pub: Running
  readonly url: string
  readonly clock: Clock
  readonly doc: () => OpenApiDocument
  readonly write: { id: string; secret: string }
  readonly read: { id: string; secret: string }
  readonly logs: string[]
}

/** startAdmin starts a public node (`env` on top of the defaults given) and its admin API, closed after the test. */
export async function startAdmin(t: TestContext, env: Record<string, string> = {}, clock = testClock()): Promise<Admin> {
  const pub = await startApp(t, { USAGE_FLUSH_MS: '100', ...env }, clock)
  const logs: string[] = []
  const webhooks = new Webhooks({ store: pub.store, keyring: resolveKeyring(pub.config), config: pub.config })
  const jobs = new Jobs({ store: pub.store, keyring: resolveKeyring(pub.config), config: pub.config })
  // The node's mailer, as the runtime's: SMTP_URL when the test gives one, else the log (into `logs`).
  const log = {
    info: (fields: object, msg: string) => logs.push(JSON.stringify({ ...fields, msg })),
    warn: (fields: object, msg: string) => logs.push(JSON.stringify({ ...fields, msg })),
  }
  const mailer = openMailer(pub.config, log, { timeoutMs: 2000 })
  t.after(() => mailer.close())
  const team = new Team({ store: pub.store, now: clock.now, sessionTtlMs: pub.config.sessionTtlHours * 3_600_000 })
  const app = await buildAdminApp({
    config: pub.config,
    accounts: pub.accounts,
    factors: pub.factors,
    totp: pub.totp,
    idempotency: new Idempotency({ store: pub.store, keyring: resolveKeyring(pub.config), config: pub.config, now: clock.now }),
    webhooks,
    jobs,
    operators: { team, mailer },
    sso: new Users({
      store: { ...pub.store, portal: sealedPortal(pub.store.portal, resolveKeyring(pub.config)) },
      config: pub.config,
      pepper: pub.pepper,
      accounts: pub.accounts,
      now: clock.now,
    }).sso,
    now: clock.now,
    logStream: {
      write: (line) => {
        logs.push(line)
      },
    },
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  t.after(() => app.close())
  const address = app.server.address()
  if (address === null || typeof address === 'string') throw new Error('no port')
  const url = `http://127.0.0.1:${address.port}`
  const doc = () => app.swagger() as unknown as OpenApiDocument
  const stop = checkAnswersFrom(url, doc)
  t.after(() => {
    const mismatches = stop()
    if (mismatches.length > 0) throw new Error(`admin answers not described by the admin OpenAPI document:\n${mismatches.join('\n')}`)
  })
  const token = async (scope: string) => {
    const made = await pub.accounts.createAdminToken({ actor: CLI }, { name: `${scope} token`, scope })
    if (isFailure(made)) throw new Error(made.message)
    return { id: made.token.id, secret: made.secret }
  }
  return { pub, url, clock, doc, write: await token('write'), read: await token('read'), logs }
}

const run = promisify(execFile)
const CLI_SCRIPT = new URL('../../src/admin/cli.ts', import.meta.url).pathname

/** admin runs `npm run admin -- …args` on a node's DATA_DIR (and `env`): its exit code and output. */
export async function admin(dataDir: string, args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [CLI_SCRIPT, ...args], { env: { ...process.env, DATA_DIR: dataDir, NODE_ENV: 'test', ...env } })
    return { code: 0, stdout, stderr }
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string }
    return { code: e.code, stdout: e.stdout, stderr: e.stderr }
  }
}

/** adminJson runs a CLI command with --json and gives its answer (it must succeed). */
export async function adminJson<T>(dataDir: string, args: string[]): Promise<T> {
  const r = await admin(dataDir, [...args, '--json'])
  assert.equal(r.code, 0, r.stderr)
  return JSON.parse(r.stdout) as T
}
