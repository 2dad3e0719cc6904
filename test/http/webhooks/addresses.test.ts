/**
 * The SSRF rule's refusals tell nothing of the server's own network, through real HTTP: an
 * endpoint is made through the admin API, and its deliveries are read back there. A local name
 * (however spelt) and the IPv6 forms of an IPv4 address are refused at creation; a name that
 * resolves (through the lookup the test gives the node, no DNS) to a private address is refused
 * at delivery, and neither the delivery's error nor the log says what it resolved to.
 */
import { test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { startApp, testClock } from '../../support/helper.ts'
import { checkAnswersFrom, type OpenApiDocument } from '../../support/conformance.ts'
import { waitFor } from '../../support/receiver.ts'
import { buildAdminApp } from '../../../src/admin/api/app.ts'
import { resolveKeyring } from '../../../src/config/encryption.ts'
import { Webhooks } from '../../../src/services/webhooks.ts'
import { CLI } from '../../../src/domain/accounts.ts'
import { isFailure } from '../../../src/services/outcome.ts'
import type { Lookup } from '../../../src/webhooks/address.ts'

const INTERNAL = '10.1.2.3'
/** What a refusal that WEBHOOK_ALLOW_PRIVATE lifts adds outside production (these nodes run under NODE_ENV=test). */
const HINT = ' (for development, WEBHOOK_ALLOW_PRIVATE=true on the server allows it)'

async function start(t: TestContext, lookup: Lookup, env: Record<string, string> = {}) {
  const pub = await startApp(t, { WEBHOOK_POLL_MS: '50', WEBHOOK_BACKOFF_MS: '100', WEBHOOK_BACKOFF_MAX_MS: '200', ...env }, testClock(), { lookup })
  const app = await buildAdminApp({
    config: pub.config,
    accounts: pub.accounts,
    factors: pub.factors,
    totp: pub.totp,
    idempotency: pub.idempotency,
    webhooks: new Webhooks({ store: pub.store, keyring: resolveKeyring(pub.config), config: pub.config }),
    logStream: { write: (line) => void pub.logs.push(line) },
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  t.after(() => app.close())
  const url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`
  const stop = checkAnswersFrom(url, () => app.swagger() as unknown as OpenApiDocument)
  t.after(() => {
    const mismatches = stop()
    if (mismatches.length > 0) throw new Error(`answers not described by the admin document:\n${mismatches.join('\n')}`)
  })
  const token = await pub.accounts.createAdminToken({ actor: CLI }, { name: 'write', scope: 'write' })
  if (isFailure(token)) throw new Error(token.message)
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(url + path, {
      method,
      headers: { authorization: `Bearer ${token.secret}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    })
    const text = await res.text()
    // biome-ignore lint/suspicious/noExplicitAny: each test reads the fields of the answer it expects
    return { status: res.status, text, body: text === '' ? null : (JSON.parse(text) as any) }
  }
  return { pub, call, base: `/admin/v1/accounts/${pub.accountId}/webhooks` }
}

test('webhook endpoints: local names with or without their trailing dot, and IPv6 forms of IPv4, are refused at creation, unlooked-up', async (t) => {
  const asked: string[] = []
  const a = await start(t, async (host) => {
    asked.push(host)
    return [{ address: '93.184.215.14', family: 4 }]
  })
  for (const url of [
    'https://localhost./hook',
    'https://api.localhost/hook',
    'https://example.internal/hook',
    'https://example.internal./hook',
    'https://printer.local/hook',
    'https://printer.local./hook',
    'https://router.home.arpa/hook',
    'https://intranet./hook',
  ]) {
    const res = await a.call('POST', a.base, { url })
    assert.equal(res.status, 400, url)
    assert.deepEqual([res.body[0].code, res.body[0].message], ['FIELD_INVALID', `Invalid url: must name a public host${HINT}.`], url)
  }
  for (const [url, kind] of [
    ['https://[::ffff:8.8.8.8]/hook', 'an IPv4-mapped'],
    ['https://[::ffff:0:808:808]/hook', 'an IPv4-translated'],
    ['https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/hook', 'a Teredo'],
    ['https://[2002:a01:203::1]/hook', 'a 6to4'],
    ['https://[64:ff9b::a01:203]/hook', 'a private (inside 64:ff9b::a01:203)'],
  ]) {
    const res = await a.call('POST', a.base, { url })
    assert.equal(res.status, 400, url)
    assert.equal(res.body[0].message, `Invalid url: must reach a public address, not ${kind} one${HINT}.`, url)
  }
  assert.equal((await a.call('POST', a.base, { url: 'https://[64:ff9b::808:808]/hook' })).status, 201, 'NAT64 of a public address')
  assert.equal((await a.call('POST', a.base, { url: 'https://hooks.example.com./hook' })).status, 201, 'a public name with its trailing dot')
  assert.deepEqual(asked, [], 'creation looks nothing up')
})

test('a name that resolves to a private address is refused at delivery, and neither the delivery log nor the node log says which', async (t) => {
  const asked: string[] = []
  const a = await start(t, async (host) => {
    asked.push(host)
    return host === 'hooks.example.com' ? [{ address: INTERNAL, family: 4 }] : []
  })
  const made = await a.call('POST', a.base, { url: 'https://hooks.example.com/in' })
  assert.equal(made.status, 201, made.text)
  await a.pub.store.audit.append({
    actor: 'system',
    action: 'factor.created',
    target: { type: 'factor', id: 'fac_1' },
    accountId: a.pub.accountId,
    ip: null,
    outcome: 'success',
    detail: { userID: 'u1', factorID: 'fac_1' },
  })
  const path = `${a.base}/${made.body.id}/deliveries`
  await waitFor(async () => ((await a.call('GET', path)).body.items[0]?.attempts.length ?? 0) > 0, 5000, 'an attempt')
  const log = await a.call('GET', path)
  assert.equal(log.body.items[0].attempts[0].error, 'refused: hooks.example.com resolves to an address that is not public')
  assert.deepEqual(asked.slice(0, 1), ['hooks.example.com'], 'the lookup the test gave was asked')
  assert.ok(!log.text.includes(INTERNAL) && !log.text.includes('private'), log.text)
  const logs = a.pub.logs.join('\n')
  assert.ok(!logs.includes(INTERNAL), 'the node log does not name it either')
})

test('a refusal that WEBHOOK_ALLOW_PRIVATE would lift names the setting on a development node, never on a production one', async (t) => {
  const lookup: Lookup = async () => [{ address: '93.184.215.14', family: 4 }]
  const production = {
    NODE_ENV: 'production',
    PEPPER: 'p'.repeat(40),
    SIGNUP_MODE: 'closed',
    ENCRYPTION_KEYS: `1:${Buffer.alloc(32, 1).toString('base64')}`,
  }
  for (const [env, named] of [
    [{ NODE_ENV: 'development' }, true],
    [production, false],
  ] as const) {
    const a = await start(t, lookup, env)
    const refused = async (url: string) => {
      const res = await a.call('POST', a.base, { url })
      assert.equal(res.status, 400, res.text)
      return res.body[0].message as string
    }
    const hint = named ? HINT : ''
    assert.equal(await refused('http://localhost:8080/hook'), `Invalid url: must be an https URL${hint}.`, env.NODE_ENV)
    assert.equal(await refused('https://localhost:8080/hook'), `Invalid url: must name a public host${hint}.`, env.NODE_ENV)
    assert.equal(await refused('https://192.168.1.20/hook'), `Invalid url: must reach a public address, not a private one${hint}.`, env.NODE_ENV)
    // A refusal the setting does not lift never names it.
    assert.equal(await refused('ftp://hooks.example.com/hook'), 'Invalid url: must be an https URL.', env.NODE_ENV)
    assert.equal(await refused('https://user:pw@hooks.example.com/hook'), 'Invalid url: must not carry a user name or password.', env.NODE_ENV)
    // A job's sourceUrl on the public API, under the same rule.
    const job = await fetch(`${a.pub.url}/converter/jobs`, {
      method: 'POST',
      headers: { 'x-api-key': a.pub.key, 'content-type': 'application/json' },
      body: JSON.stringify({ operation: 'image', sourceUrl: 'http://localhost:8080/doc.pdf' }),
    })
    assert.equal(job.status, 400)
    assert.deepEqual(
      ((await job.json()) as { code: string; message: string }[]).map((p) => [p.code, p.message]),
      [['SOURCE_URL_INVALID', `sourceUrl must be an https URL${hint}.`]],
      env.NODE_ENV,
    )
  }
})
