import { CLI } from '../../../src/domain/accounts.ts'
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { Secret, TOTP } from 'otpauth'
import { createCaller, get, post, startApp, tempDir } from '../../support/helper.ts'
import { startServer, type ServerProcess } from '../../support/process.ts'
import { createRequire } from 'node:module'
import { logDestination, logFormatOf } from '../../../src/logging/format.ts'

test('logs carry request ids and key ids, never keys, secrets, codes or bodies', async (t) => {
  const app = await startApp(t, { LOG_LEVEL: 'trace' })
  const revoked = await createCaller(app.accounts)
  await app.accounts.revokeKey({ actor: CLI }, revoked.keyId)

  const userID = 'log-probe-user@example.com'
  const onboard = (await (await post(app.url, '/totp/onboardUser', app.key, { userID, applicationID: 'LogProbeApp' })).json()) as Record<string, string>
  const secret = new Secret().base32
  const code = new TOTP({ secret: Secret.fromBase32(secret) }).generate({ timestamp: app.clock.now() })
  const got = (await (await post(app.url, '/totp/getOTP', app.key, { secret })).json()) as { otp: string }
  await post(app.url, '/totp/verifyOTP', app.key, { secret, token: code })
  await post(app.url, '/totp/verifyOTP', app.key, { secret, token: code })
  await post(app.url, '/totp/verifyOTP', app.key, { secret: onboard.secretKey!, token: '99999999' })
  await post(app.url, '/totp/generateQRCode', app.key, { data: 'qr-probe-payload-4711' })
  await post(app.url, '/totp/getOTP', app.key, { secret: 'lowercase-probe' })
  await get(app.url, '/totp/ping', revoked.apiKey)
  await get(app.url, '/totp/ping', 'tsr_probe_unknown_key')
  await get(app.url, '/totp/ping?secret=query-probe', app.key)

  // The line is written once the response has gone out: give the last one a moment.
  const done = () => app.logs.filter((l) => l.includes('"request completed"')).length >= 10
  for (let i = 0; i < 100 && !done(); i++) await new Promise((r) => setTimeout(r, 10))
  const text = app.logs.join('')
  const lines = app.logs.map((l) => JSON.parse(l) as Record<string, unknown>)
  const completed = lines.filter((l) => l.msg === 'request completed')
  assert.equal(completed.length, 10, 'one line per request')
  for (const l of completed) {
    assert.equal(typeof l.reqId, 'string')
    assert.match((l.req as { path: string }).path, /^\/totp\//)
    assert.equal(typeof l.responseTime, 'number')
  }
  assert.ok(
    completed.some((l) => (l.res as Record<string, string>).keyId !== undefined && (l.res as Record<string, string>).accountId === app.accountId),
    'the caller is logged by key id',
  )
  assert.ok(lines.some((l) => l.msg === 'access denied' && l.reason === 'revoked key' && l.keyId === revoked.keyId))

  const forbidden = [
    app.key,
    app.key.slice(4),
    revoked.apiKey,
    'tsr_probe_unknown_key',
    secret,
    onboard.secretKey!,
    onboard.otpURL!,
    userID,
    'LogProbeApp',
    'qr-probe-payload-4711',
    'lowercase-probe',
    'query-probe',
  ]
  for (const s of forbidden) assert.ok(!text.includes(s), `logs contain ${s.slice(0, 12)}…: ${app.logs.find((l) => l.includes(s))}`)
  // Numbers are matched whole: a response time may hold the same run of digits.
  for (const otp of [code, got.otp, onboard.otp!, '99999999']) {
    assert.ok(!new RegExp(`(?<![\\d.])${otp}(?![\\d])`).test(text), `logs contain the code ${otp}`)
  }
})

/** until waits (up to `ms`) for `probe` to hold: a request's line is written once its answer has gone. */
async function until(probe: () => boolean, ms = 5000): Promise<void> {
  for (const end = Date.now() + ms; Date.now() < end && !probe(); ) await new Promise((r) => setTimeout(r, 20))
}

/** demoKey: the demo account's key, from the banner a fresh development server prints. */
function demoKey(server: ServerProcess): string {
  const key = /API key is shown this once: (tsr_[0-9a-f]{40})/.exec(server.output())?.[1]
  assert.ok(key, server.output())
  return key
}

test('LOG_FORMAT=pretty: one readable line per request with its id, method, path, status and caller, and no secret; auto through a pipe: JSON', async (t) => {
  const pretty = startServer({ DATA_DIR: tempDir(t), NODE_ENV: 'development', LOG_FORMAT: 'pretty', ADMIN_LISTEN: '127.0.0.1:0' }, t)
  const auto = startServer({ DATA_DIR: tempDir(t), NODE_ENV: 'development', LOG_FORMAT: 'auto' }, t)
  const [{ url }, { url: autoUrl }] = await Promise.all([pretty.ready, auto.ready])
  const key = demoKey(pretty)

  const secret = new Secret().base32
  assert.equal((await get(url, '/totp/ping', key, { 'x-request-id': 'pretty-probe-1' })).status, 200)
  const got = await post(url, '/totp/getOTP', key, { secret }, { 'x-request-id': 'pretty-probe-2' })
  const { otp } = (await got.json()) as { otp: string }
  assert.equal((await get(url, '/totp/ping?secret=query-probe', 'tsr_probe_unknown_key', { 'x-request-id': 'pretty-probe-3' })).status, 403)
  const admin = /\(admin\): Admin API listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(pretty.output())?.[1]
  assert.ok(admin, pretty.output())
  const token = await fetch(`${admin}/admin/v1/accounts`, { headers: { authorization: 'Bearer adm_probe_token', 'x-request-id': 'admin-probe' } })
  assert.equal(token.status, 401)
  await until(() => pretty.output().includes('[pretty-probe-3] GET') && pretty.output().includes('[admin-probe] GET'))

  const lines = pretty.output().split('\n')
  const line = (id: string) => lines.find((l) => l.includes(`[${id}] GET`) || l.includes(`[${id}] POST`)) ?? ''
  assert.match(
    line('pretty-probe-1'),
    /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: \[pretty-probe-1\] GET \/totp\/ping 200 \d+\.\d ms request completed keyId=key_[0-9a-f]+ accountId=acc_[0-9a-f]+$/,
  )
  assert.match(line('pretty-probe-2'), /^\[[\d:.]+\] INFO: \[pretty-probe-2\] POST \/totp\/getOTP 200 \d+\.\d ms request completed keyId=/)
  assert.match(line('pretty-probe-3'), /^\[[\d:.]+\] INFO: \[pretty-probe-3\] GET \/totp\/ping 403 \d+\.\d ms request completed$/)
  assert.match(
    line('admin-probe'),
    /^\[[\d:.]+\] INFO \(admin\): \[admin-probe\] GET \/admin\/v1\/accounts 401 \d+\.\d ms request completed$/,
    'the admin listener writes the same format',
  )
  assert.ok(
    lines.some((l) => /^\[[\d:.]+\] INFO: \[pretty-probe-3\] access denied \{"reason":"unknown key"\}$/.test(l)),
    'a line of the request names its id too',
  )
  assert.ok(
    lines.every((l) => !l.startsWith('{')),
    'no JSON line',
  )
  assert.doesNotMatch(pretty.output(), /\u001b\[/, 'no colours through a pipe')

  const text = pretty.output()
  assert.equal(text.split(key).length - 1, 2, 'the key is printed in the banner and the curl line only')
  for (const s of [secret, 'tsr_probe_unknown_key', 'query-probe', 'adm_probe_token']) assert.ok(!text.includes(s), `the logs contain ${s.slice(0, 12)}…`)
  assert.doesNotMatch(text, new RegExp(`(?<![\\d.])${otp}(?![\\d])`), 'the logs contain the code')

  const refused = await get(autoUrl, '/totp/ping', undefined, { 'x-request-id': 'auto-probe' })
  await until(() => auto.output().includes('"reqId":"auto-probe","req"'))
  const entry = JSON.parse(
    auto
      .output()
      .split('\n')
      .find((l) => l.includes('"reqId":"auto-probe","req"')) ?? 'null',
  ) as Record<string, unknown>
  assert.equal(entry.msg, 'request completed')
  assert.deepEqual(entry.req, { method: 'GET', path: '/totp/ping', ip: '127.0.0.1' })
  assert.deepEqual(entry.res, { statusCode: refused.status })
  assert.ok(
    auto
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .every((l) => JSON.parse(l)),
    'every log line is JSON',
  )
})

const hasScript = spawnSync('script', ['--version']).status === 0

test('LOG_FORMAT=auto on a terminal: pretty and coloured in development, JSON in production', {
  skip: hasScript ? false : 'needs script(1) (util-linux) for a pseudo-terminal',
  timeout: 60_000,
}, async (t) => {
  /** onTerminal runs the server with its standard output on a pseudo-terminal (script(1)) until it has said it serves. */
  const onTerminal = async (env: Record<string, string>): Promise<string> => {
    const child = spawn('script', ['-qec', `${JSON.stringify(process.execPath)} src/server.ts`, '/dev/null'], {
      cwd: new URL('../../..', import.meta.url).pathname,
      env: { ...process.env, PORT: '0', ADMIN_LISTEN: 'off', DATA_DIR: tempDir(t), LOG_LEVEL: 'info', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    t.after(() => {
      if (child.exitCode === null) child.kill('SIGKILL')
    })
    let out = ''
    child.stdout.on('data', (d) => {
      out += d
    })
    child.stderr.on('data', (d) => {
      out += d
    })
    // A start-up on a loaded machine takes seconds: the other process tests wait for it as long.
    await until(() => /serving/.test(out), 45_000)
    child.kill('SIGTERM')
    return out
  }
  const [development, production] = await Promise.all([
    onTerminal({ NODE_ENV: 'development', LOG_FORMAT: 'auto' }),
    onTerminal({
      NODE_ENV: 'production',
      LOG_FORMAT: 'auto',
      PEPPER: 'p'.repeat(40),
      SIGNUP_MODE: 'closed',
      ENCRYPTION_KEYS: `1:${Buffer.alloc(32, 1).toString('base64')}`,
    }),
  ])
  assert.match(development, /\] \u001b\[32mINFO\u001b\[39m: \u001b\[36mServer listening at http:\/\/127\.0\.0\.1:\d+/, development)
  assert.match(production, /^\{"level":30,.*"msg":"Server listening at http:\/\/127\.0\.0\.1:\d+"\}\r?$/m, production)
})

test('LOG_FORMAT: auto is pretty only in development on a terminal; json and pretty are taken as they are', () => {
  assert.equal(logFormatOf('auto', 'development', true), 'pretty')
  assert.equal(logFormatOf('auto', 'development', false), 'json')
  assert.equal(logFormatOf('auto', 'production', true), 'json')
  assert.equal(logFormatOf('auto', 'test', true), 'json')
  assert.equal(logFormatOf('json', 'development', true), 'json')
  assert.equal(logFormatOf('pretty', 'production', false), 'pretty')
})

test('pino-pretty is loaded only when the pretty format is chosen', async () => {
  const loaded = () => Object.keys(createRequire(import.meta.url).cache).some((path) => path.includes('/node_modules/pino-pretty/'))
  assert.deepEqual(await logDestination({ logFormat: 'json', nodeEnv: 'development' }), {})
  assert.deepEqual(await logDestination({ logFormat: 'auto', nodeEnv: 'production' }), {})
  const given = { write: () => undefined }
  assert.equal((await logDestination({ logFormat: 'pretty', nodeEnv: 'development' }, given)).stream, given, 'a stream given (tests) wins')
  assert.equal(loaded(), false)
  assert.ok((await logDestination({ logFormat: 'pretty', nodeEnv: 'production' })).stream)
  assert.equal(loaded(), true)
})
