/**
 * The delivery worker against real receivers (plain HTTP, and HTTPS with a certificate the
 * test makes), on the embedded store: signatures verify with `standardwebhooks`, redirects
 * are not followed, slow and huge answers are cut at their bounds, failures are retried with
 * backoff and given up after the retry window, and what the SSRF rule refuses is never connected to.
 */
import { test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import http from 'node:http'
import { join } from 'node:path'
import { openSqliteStore } from '../../../src/storage/sqlite/store.ts'
import type { Store } from '../../../src/storage/ports.ts'
import { newId } from '../../../src/domain/ids.ts'
import { keyring as makeKeyring } from '../../../src/crypto/keyring.ts'
import { SYSTEM } from '../../../src/domain/accounts.ts'
import { loadConfig } from '../../../src/config/config.ts'
import { isFailure, Webhooks } from '../../../src/services/webhooks.ts'
import { backoffMs, WebhookWorker, type DeliveryOutcome } from '../../../src/webhooks/worker.ts'
import { sealSecret } from '../../../src/webhooks/secret.ts'
import { send } from '../../../src/webhooks/send.ts'
import { Receiver, waitFor } from '../../support/receiver.ts'
import { tempDir } from '../../support/helper.ts'
import { toolSkip } from '../../support/services.ts'

const keyring = makeKeyring(new Map([[1, Buffer.alloc(32, 9)]]))
const FAST = { WEBHOOK_POLL_MS: '20', WEBHOOK_BACKOFF_MS: '50', WEBHOOK_BACKOFF_MAX_MS: '200', WEBHOOK_TIMEOUT_MS: '1000', WEBHOOK_ALLOW_PRIVATE: 'true' }

async function setup(t: TestContext, env: Record<string, string> = {}, extra: Partial<ConstructorParameters<typeof WebhookWorker>[0]> = {}) {
  const config = loadConfig({ NODE_ENV: 'test', ...FAST, ...env })
  const store: Store = openSqliteStore({ path: ':memory:' })
  const accountId = newId('acc')
  await store.access.createAccount(
    { id: accountId, name: 'w', status: 'active', createdAt: new Date().toISOString() },
    { actor: 'system', action: 'account.create', target: { type: 'account', id: accountId }, accountId, ip: null, outcome: 'success', detail: {} },
  )
  const outcomes: DeliveryOutcome[] = []
  const errors: string[] = []
  const worker = new WebhookWorker({
    store: store.webhooks,
    keyring,
    config,
    onError: (e) => errors.push(e.message),
    onOutcome: (o) => outcomes.push(o),
    ...extra,
  })
  worker.start()
  t.after(async () => {
    await worker.close()
    await store.close()
  })
  const webhooks = new Webhooks({ store, keyring, config })
  const endpoint = async (url: string) => {
    const made = await webhooks.create({ actor: SYSTEM }, accountId, { url })
    if (isFailure(made)) throw new Error(made.message)
    return made
  }
  const event = (type = 'factor.created', detail: Record<string, unknown> = { userID: 'u1', factorID: 'fac_1' }) =>
    store.audit.append({ actor: 'system', action: type, target: { type: 'factor', id: 'fac_1' }, accountId, ip: null, outcome: 'success', detail })
  const log = async (endpointId: string) => (await store.webhooks.listDeliveries(endpointId, { limit: 50 })).items
  return { store, config, accountId, worker, webhooks, endpoint, event, log, outcomes, errors }
}

async function receiver(t: TestContext, tls?: { key: string; cert: string }): Promise<Receiver> {
  const r = await new Receiver(tls).start()
  t.after(() => r.stop())
  return r
}

test('worker: a delivery is POSTed once, signed as Standard Webhooks says, with the event as its payload', async (t) => {
  const s = await setup(t)
  const r = await receiver(t)
  const { endpoint, secret } = await s.endpoint(`http://127.0.0.1:${r.port}/in?x=1`)
  r.secret = secret
  assert.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/)
  const e = await s.event('factor.activated', { userID: 'u42', factorID: 'fac_9' })
  await waitFor(() => r.deliveries.length === 1 && s.outcomes.length === 1, 5000, 'the delivery')
  const [d] = r.deliveries
  assert.deepEqual(d!.payload, { type: 'factor.activated', timestamp: e.at, data: { userID: 'u42', factorID: 'fac_9' } })
  assert.equal(d!.id, e.id)
  assert.match(String(d!.headers['webhook-signature']), /^v1,[A-Za-z0-9+/]+=*$/)
  assert.ok(Math.abs(Number(d!.headers['webhook-timestamp']) - Date.now() / 1000) < 5)
  assert.equal(d!.headers['content-type'], 'application/json')
  const [logged] = await s.log(endpoint.id)
  assert.deepEqual([logged?.status, logged?.attempts.length, logged?.attempts[0]?.statusCode, logged?.attempts[0]?.error], ['delivered', 1, 204, null])
  await new Promise((r) => setTimeout(r, 200))
  assert.equal(r.deliveries.length, 1, 'once')
})

test('worker: failures are retried with backoff until a 2xx; past the retry window a delivery is failed', async (t) => {
  const s = await setup(t, { WEBHOOK_RETRY_SECONDS: '1' })
  const r = await receiver(t)
  r.status = 503
  const { endpoint, secret } = await s.endpoint(`http://127.0.0.1:${r.port}/`)
  r.secret = secret
  await s.event()
  await waitFor(() => r.deliveries.length >= 3, 5000, 'three attempts')
  r.status = 200
  await waitFor(async () => (await s.log(endpoint.id))[0]?.status === 'delivered', 5000, 'delivered')
  const attempts = (await s.log(endpoint.id))[0]!.attempts
  assert.deepEqual(
    attempts.slice(1).map((a) => a.error),
    attempts.slice(1).map(() => 'HTTP 503'),
  )
  const gaps = attempts
    .map((a) => Date.parse(a.at))
    .reverse()
    .map((at, i, all) => (i === 0 ? 0 : at - all[i - 1]!))
    .slice(1)
  assert.ok(
    gaps.every((g) => g >= 20),
    `backoff between attempts: ${gaps.join(', ')} ms`,
  )
  assert.ok(r.ids().size === 1, 'one event, one webhook-id in every attempt')

  r.status = 500
  await s.event('factor.deleted')
  await waitFor(async () => (await s.log(endpoint.id))[0]?.status === 'failed', 5000, 'given up')
  assert.equal(await s.store.webhooks.pending(), 0)
  assert.ok(s.outcomes.includes('failed') && s.outcomes.includes('retry') && s.outcomes.includes('delivered'))
  assert.ok((await s.log(endpoint.id))[0]!.attempts.length >= 2)
})

test('worker: no redirect is followed, a silent receiver times out, a huge answer is cut short', async (t) => {
  const s = await setup(t, { WEBHOOK_TIMEOUT_MS: '300', WEBHOOK_RETRY_SECONDS: '1' })
  let followed = 0
  const other = http.createServer((_req, res) => {
    followed++
    res.end()
  })
  const hung: http.ServerResponse[] = []
  const server = http.createServer((req, res) => {
    if (req.url === '/redirect') {
      res.writeHead(307, { location: `http://127.0.0.1:${(other.address() as { port: number }).port}/` })
      res.end()
      return
    }
    if (req.url === '/silent') {
      hung.push(res)
      return
    }
    res.writeHead(200)
    const chunk = Buffer.alloc(65536, 'x')
    let sent = 0
    const pump = () => {
      while (sent < 200 && res.write(chunk)) sent++
      if (sent < 200) res.once('drain', pump)
      else res.end()
    }
    pump()
  })
  for (const srv of [other, server]) await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve))
  t.after(async () => {
    for (const res of hung) res.destroy()
    server.closeAllConnections()
    await Promise.all([other, server].map((srv) => new Promise((resolve) => srv.close(resolve))))
  })
  const port = (server.address() as { port: number }).port
  const redirect = await s.endpoint(`http://127.0.0.1:${port}/redirect`)
  const silent = await s.endpoint(`http://127.0.0.1:${port}/silent`)
  const huge = await s.endpoint(`http://127.0.0.1:${port}/huge`)
  const started = Date.now()
  await s.event()
  await waitFor(
    async () =>
      (await s.log(redirect.endpoint.id))[0]?.status === 'failed' &&
      (await s.log(silent.endpoint.id))[0]?.status === 'failed' &&
      (await s.log(huge.endpoint.id))[0]?.status === 'delivered',
    10_000,
    'the three outcomes',
  )
  assert.equal(followed, 0, 'the redirect was not followed')
  assert.equal((await s.log(redirect.endpoint.id))[0]!.attempts[0]!.error, 'HTTP 307')
  const timedOut = (await s.log(silent.endpoint.id))[0]!.attempts[0]!
  assert.deepEqual([timedOut.statusCode, timedOut.error], [null, 'timed out after 300 ms'])
  assert.ok(timedOut.durationMs >= 280 && timedOut.durationMs < 2000, `${timedOut.durationMs} ms`)
  assert.equal((await s.log(huge.endpoint.id))[0]!.attempts[0]!.statusCode, 200)
  assert.ok(Date.now() - started < 9000)
})

test('worker: what the SSRF rule refuses is not connected to, whatever the endpoint row says', async (t) => {
  const s = await setup(t, { WEBHOOK_ALLOW_PRIVATE: 'false' })
  const r = await receiver(t)
  // Rows as if their names had resolved elsewhere at creation: the check at delivery is what holds.
  const urls = [
    `http://localhost:${r.port}/`,
    `https://example.internal.:${r.port}/`,
    `https://127.0.0.1:${r.port}/`,
    `https://[::ffff:127.0.0.1]:${r.port}/`,
    'https://10.0.0.1/',
    'https://169.254.169.254/latest',
  ]
  const ids: string[] = []
  for (const url of urls) {
    const id = newId('whe')
    ids.push(id)
    await s.store.webhooks.createEndpoint(
      {
        id,
        accountId: s.accountId,
        url,
        eventTypes: null,
        createdAt: new Date().toISOString(),
        sealedSecret: await sealSecret(keyring, 'whsec_AAAA', { accountId: s.accountId, endpointId: id }),
      },
      10,
      { actor: 'system', action: 'webhook.create', target: { type: 'webhook', id }, accountId: s.accountId, ip: null, outcome: 'success', detail: {} },
    )
  }
  await s.event()
  await waitFor(async () => (await Promise.all(ids.map((id) => s.log(id)))).every((l) => (l[0]?.attempts.length ?? 0) > 0), 5000, 'an attempt each')
  const errors = await Promise.all(ids.map(async (id) => (await s.log(id))[0]!.attempts[0]!.error))
  assert.deepEqual(errors, [
    'refused: localhost is not a public host name',
    'refused: example.internal. is not a public host name',
    'refused: 127.0.0.1 is a loopback address',
    'refused: ::ffff:7f00:1 is a loopback address',
    'refused: 10.0.0.1 is a private address',
    'refused: 169.254.169.254 is a link-local address',
  ])
  assert.equal(r.deliveries.length, 0, 'nothing reached the receiver')
})

test('send: a name that resolves to a public and a private address is refused; the address checked is the one connected to', async (t) => {
  const r = await receiver(t)
  const mixed = await send('https://hooks.example.com/', {}, '{}', {
    timeoutMs: 1000,
    allowPrivate: false,
    lookup: async () => [
      { address: '93.184.215.14', family: 4 },
      { address: '10.1.2.3', family: 4 },
    ],
  })
  assert.equal(mixed.error, 'refused: hooks.example.com resolves to an address that is not public')
  let lookups = 0
  // allowPrivate: the lookup's one answer is pinned: the name itself resolves nowhere, yet the receiver gets it with its Host.
  const pinned = await send(`http://receiver.invalid:${r.port}/`, {}, '{}', {
    timeoutMs: 1000,
    allowPrivate: true,
    lookup: async () => {
      lookups++
      return [{ address: '127.0.0.1', family: 4 }]
    },
  })
  assert.deepEqual([pinned.statusCode, lookups], [204, 1])
  assert.equal(r.deliveries[0]?.headers.host, `receiver.invalid:${r.port}`)
})

test('backoff doubles from the base, with jitter between half and all of it, capped', () => {
  assert.deepEqual(
    [1, 2, 3, 4, 10].map((n) => backoffMs(n, 1000, 5000, () => 1)),
    [1000, 2000, 4000, 5000, 5000],
  )
  assert.deepEqual(
    [1, 2, 3].map((n) => backoffMs(n, 1000, 5000, () => 0)),
    [500, 1000, 2000],
  )
  assert.equal(
    backoffMs(200, 1000, 3_600_000, () => 1),
    3_600_000,
  )
})

test("worker: an HTTPS receiver with the test's own certificate: verified TLS, SNI and Host are the name, not the address", {
  skip: toolSkip('openssl', 'openssl', ['version']),
}, async (t) => {
  const dir = tempDir(t)
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-days',
      '1',
      '-subj',
      '/CN=localhost',
      '-addext',
      'subjectAltName=DNS:localhost',
      '-keyout',
      join(dir, 'key.pem'),
      '-out',
      join(dir, 'cert.pem'),
    ],
    { stdio: 'ignore' },
  )
  const tls = { key: readFileSync(join(dir, 'key.pem'), 'utf8'), cert: readFileSync(join(dir, 'cert.pem'), 'utf8') }
  const r = await receiver(t, tls)
  const s = await setup(t, {}, { send: { ca: tls.cert } })
  const { endpoint, secret } = await s.endpoint(`https://localhost:${r.port}/hook`)
  r.secret = secret
  const e = await s.event('recovery_codes.regenerated', { userID: 'u7' })
  await waitFor(() => r.deliveries.length === 1, 5000, 'the HTTPS delivery')
  assert.deepEqual(r.deliveries[0]!.payload, { type: 'recovery_codes.regenerated', timestamp: e.at, data: { userID: 'u7' } })
  assert.equal(r.deliveries[0]!.servername, 'localhost')
  assert.equal(r.deliveries[0]!.headers.host, `localhost:${r.port}`)
  await waitFor(async () => (await s.log(endpoint.id))[0]?.status === 'delivered', 5000, 'delivered')

  // Without the test's CA the certificate is not trusted: the attempt fails and nothing arrives.
  const untrusted = await send(`https://localhost:${r.port}/hook`, {}, '{}', { timeoutMs: 1000, allowPrivate: true })
  assert.equal(untrusted.statusCode, null)
  assert.match(String(untrusted.error), /SELF_SIGNED|UNABLE_TO_VERIFY|CERT/)
  assert.equal(r.deliveries.length, 1)
})
