/**
 * TRUST_PROXY through real HTTP: whose X-Forwarded-For the node believes decides which address
 * the per-source sign-in limit counts. The test's client reaches the node from 127.0.0.1, as a
 * client that gets past the proxy to the node's port would, and forges a new address in the
 * header at every attempt: `true` (what the deploy docs used to say) lets it escape the limit,
 * a list of the proxy's addresses that does not name it does not; `loopback` names it, so the
 * header is believed, but only its last hop, which a proxy that appends cannot have forged.
 */
import { test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { startApp, type Running } from '../../support/helper.ts'
import { PortalClient } from '../../support/portal-helper.ts'

/** Three failures from one source an hour, then a wait; emails never repeat, so only the source limit meets them. */
const LIMITED = { SIGNIN_IP_MAX_FAILURES: '3', SIGNIN_MAX_FAILURES: '100' }

let emails = 0

/** signIns: the statuses of wrong-password sign-ins, one at a time, each with the X-Forwarded-For `forwarded(i)` gives. */
async function signIns(app: Running, count: number, forwarded: (i: number) => string | null): Promise<number[]> {
  const client = new PortalClient(app.url)
  await client.get('/portal/sign-in')
  const csrf = client.csrf()
  const statuses: number[] = []
  for (let i = 0; i < count; i++) {
    const header = forwarded(i)
    const res = await fetch(`${app.url}/portal/sign-in`, {
      method: 'POST',
      redirect: 'manual',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        cookie: client.cookieHeader,
        origin: app.url,
        ...(header === null ? {} : { 'x-forwarded-for': header }),
      },
      body: new URLSearchParams({ _csrf: csrf, email: `nobody-${emails++}@example.com`, password: 'a wrong password, surely' }).toString(),
    })
    await res.arrayBuffer()
    statuses.push(res.status)
  }
  return statuses
}

const start = (t: TestContext, trust: string) => startApp(t, { ...LIMITED, TRUST_PROXY: trust, LOG_LEVEL: 'warn' })
const forged = (i: number) => `198.51.100.${i + 1}`

test('TRUST_PROXY=true: a client that reaches the node forges a new X-Forwarded-For each time and escapes the per-source limit', async (t) => {
  const app = await start(t, 'true')
  assert.deepEqual(await signIns(app, 6, forged), [401, 401, 401, 401, 401, 401], 'each forged address counted as a client of its own')
})

test('TRUST_PROXY naming only the proxy (10.9.9.9/32): a client that reaches the node is counted by its own address, whatever it forges', async (t) => {
  const app = await start(t, '10.9.9.9/32')
  assert.deepEqual(await signIns(app, 5, forged), [401, 401, 401, 429, 429])
  // The same with a list of every kind of entry, as proxy-addr compiles it: none names 127.0.0.1.
  const other = await start(t, 'linklocal,uniquelocal,10.9.9.9,192.0.2.0/24,2001:db8::/32,fc00::1')
  assert.deepEqual(await signIns(other, 5, (i) => `${forged(i)}, 10.9.9.9`), [401, 401, 401, 429, 429])
})

test('TRUST_PROXY=loopback: the proxy on loopback is believed, for the hop it adds only', async (t) => {
  const app = await start(t, 'loopback')
  // Each client the proxy names is a source of its own.
  assert.deepEqual(await signIns(app, 4, forged), [401, 401, 401, 401])
  // What a client forged comes before the address the proxy appends: the appended one is counted.
  assert.deepEqual(await signIns(app, 5, (i) => `${forged(i)}, 192.0.2.7`), [401, 401, 401, 429, 429])
  assert.deepEqual(await signIns(app, 1, () => '192.0.2.8'), [401], 'another client of the proxy is not held')
  // Without the header the proxy's own address is the source, counted as any other.
  assert.deepEqual(await signIns(app, 4, () => null), [401, 401, 401, 429])
})

test('TRUST_PROXY=true warns at start in production; a list does not', async (t) => {
  const production = {
    NODE_ENV: 'production',
    PEPPER: 'p'.repeat(32),
    ENCRYPTION_KEYS: `1:${Buffer.alloc(32, 7).toString('base64')}`,
    SIGNUP_MODE: 'closed',
    LOG_LEVEL: 'warn',
  }
  const warned = (app: Running) => app.logs.some((line) => line.includes('TRUST_PROXY=true'))
  assert.ok(warned(await startApp(t, { ...production, TRUST_PROXY: 'true' })))
  assert.ok(!warned(await startApp(t, { ...production, TRUST_PROXY: 'loopback,uniquelocal' })))
  assert.ok(!warned(await startApp(t, { TRUST_PROXY: 'true', LOG_LEVEL: 'warn' })), 'outside production: tests and development use it')
})
