import { test } from 'node:test'
import assert from 'node:assert/strict'
import { loadConfig } from '../../../src/config/config.ts'
import { pepperKey } from '../../../src/crypto/keyed.ts'
import { openSqliteStore } from '../../../src/storage/sqlite/store.ts'
import type { Store, VerificationStore } from '../../../src/storage/ports.ts'
import { ADDRESS_WINDOW_MS, SignInThrottle, sourceOf } from '../../../src/services/users/throttle.ts'
import { openSqliteWithRedis, openTestPostgres, skipUnless } from '../../support/services.ts'
import { startApp } from '../../support/helper.ts'
import { PortalClient, portalUser } from '../../support/portal-helper.ts'

const START = Date.parse('2030-01-01T00:00:00Z')
const PEPPER = pepperKey('p'.repeat(32))

const stores: [string, () => Promise<Store>, false | string][] = [
  ['sqlite', async () => openSqliteStore({ path: ':memory:' }), false],
  ['postgres', () => openTestPostgres(), skipUnless('TEST_DATABASE_URL')],
  ['sqlite+redis', openSqliteWithRedis, skipUnless('TEST_REDIS_URL')],
]

/** onEachStore runs a test on every store, with a throttle on a clock the test moves. */
function onEachStore(title: string, env: Record<string, string>, body: (th: SignInThrottle, clock: { ms: number }, store: Store) => Promise<void>): void {
  for (const [name, open, skip] of stores) {
    test(`${name}: ${title}`, { skip }, async (t) => {
      const store = await open()
      t.after(() => store.close())
      const clock = { ms: START }
      await body(new SignInThrottle(store, loadConfig(env), () => clock.ms, PEPPER), clock, store)
    })
  }
}

/** attempt: one sign-in as the form makes it; 'checked' when the password was looked at. */
async function attempt(th: SignInThrottle, email: string, ip: string, ok: boolean): Promise<{ checked: boolean; wait: number }> {
  const wait = await th.blocked(email, ip)
  if (wait > 0) return { checked: false, wait }
  return { checked: true, wait: await th.settle(email, ip, ok) }
}

test('sourceOf: IPv4 as it is, IPv4-mapped as IPv4, IPv6 by its /64 however written', () => {
  assert.equal(sourceOf('192.0.2.7'), '192.0.2.7')
  assert.equal(sourceOf('::ffff:192.0.2.7'), '192.0.2.7')
  const net = '2001:db8:0:1::/64'
  for (const ip of ['2001:db8:0:1::1', '2001:0DB8:0000:0001:ffff:0:0:9', '2001:db8:0:1:0:0:192.0.2.1', '2001:db8:0:1::1%eth0']) {
    assert.equal(sourceOf(ip), net, ip)
  }
  assert.notEqual(sourceOf('2001:db8:0:2::1'), net)
  assert.equal(sourceOf('::1'), '0:0:0:0::/64')
  assert.equal(sourceOf(''), '', 'not an address: as it is')
})

onEachStore('an email gets SIGNIN_MAX_FAILURES tries, then waits a doubling delay; a success ends its run', {}, async (th, clock) => {
  for (let i = 1; i <= 4; i++) assert.deepEqual(await attempt(th, 'jane@example.com', '192.0.2.1', false), { checked: true, wait: 0 }, `failure ${i}`)
  assert.deepEqual(await attempt(th, 'jane@example.com', '192.0.2.2', false), { checked: true, wait: 1 }, 'the fifth: wait 1 s, from any address')
  assert.deepEqual(await attempt(th, 'jane@example.com', '192.0.2.3', true), { checked: false, wait: 1 }, 'even the right password waits')
  assert.equal(await th.blocked('other@example.com', '192.0.2.1'), 0, 'another email')
  await th.settle('other@example.com', '192.0.2.1', false)
  clock.ms += 1000
  assert.deepEqual(await attempt(th, 'jane@example.com', '192.0.2.1', false), { checked: true, wait: 2 }, 'doubled')
  clock.ms += 2000
  assert.deepEqual(await attempt(th, 'jane@example.com', '192.0.2.1', false), { checked: true, wait: 4 })
  clock.ms += 4000
  assert.deepEqual(await attempt(th, 'jane@example.com', '192.0.2.1', true), { checked: true, wait: 0 })
  for (let i = 1; i <= 4; i++) assert.deepEqual(await attempt(th, 'jane@example.com', '192.0.2.1', false), { checked: true, wait: 0 }, 'a new run')
})

onEachStore(
  'the delay is capped at SIGNIN_LOCK_MAX_SECONDS',
  { SIGNIN_MAX_FAILURES: '1', SIGNIN_LOCK_BASE_SECONDS: '2', SIGNIN_LOCK_MAX_SECONDS: '5' },
  async (th, clock) => {
    const waits: number[] = []
    for (let i = 0; i < 4; i++) {
      const { wait } = await attempt(th, 'jane@example.com', '192.0.2.1', false)
      waits.push(wait)
      clock.ms += wait * 1000
    }
    assert.deepEqual(waits, [2, 4, 5, 5])
  },
)

onEachStore(
  'an address gets SIGNIN_IP_MAX_FAILURES failures an hour, whatever the emails; its own successes do not end its run',
  { SIGNIN_IP_MAX_FAILURES: '10' },
  async (th, clock) => {
    for (let i = 0; i < 9; i++) assert.equal((await attempt(th, `user${i}@example.com`, '198.51.100.9', false)).wait, 0)
    // The attacker's own account, signed into between guesses, takes nothing off the count.
    for (let i = 0; i < 3; i++) assert.deepEqual(await attempt(th, 'mine@example.com', '198.51.100.9', true), { checked: true, wait: 0 })
    assert.deepEqual(await attempt(th, 'user9@example.com', '198.51.100.9', false), { checked: true, wait: 1 }, 'the tenth failure')
    assert.deepEqual(await attempt(th, 'fresh@example.com', '198.51.100.9', false), { checked: false, wait: 1 })
    assert.equal((await attempt(th, 'fresh@example.com', '198.51.100.10', false)).checked, true, 'another address')
    clock.ms += 1000
    assert.deepEqual(await attempt(th, 'mine@example.com', '198.51.100.9', true), { checked: true, wait: 0 }, 'a success after the wait')
    assert.deepEqual(
      await attempt(th, 'user10@example.com', '198.51.100.9', false),
      { checked: false, wait: 2 },
      'past the threshold a success is waited for too (not counted)',
    )
    clock.ms += 2000
    assert.deepEqual(await attempt(th, 'user10@example.com', '198.51.100.9', false), { checked: true, wait: 2 }, 'the eleventh failure: the run went on')
    clock.ms += 2000
    assert.deepEqual(await attempt(th, 'user11@example.com', '198.51.100.9', false), { checked: true, wait: 4 }, 'the twelfth: doubled')
    clock.ms = START + ADDRESS_WINDOW_MS
    assert.deepEqual(await attempt(th, 'user12@example.com', '198.51.100.9', false), { checked: true, wait: 0 }, 'the next hour: a new run')
  },
)

onEachStore('an IPv6 /64 is one address; SIGNIN_IP_MAX_FAILURES=0 turns the address limit off', { SIGNIN_IP_MAX_FAILURES: '2' }, async (th) => {
  await attempt(th, 'a@example.com', '2001:db8::1', false)
  assert.equal((await attempt(th, 'b@example.com', '2001:db8::ffff:2', false)).wait, 1)
  assert.equal(await th.blocked('c@example.com', '2001:db8:0:0:1::3'), 1)
  assert.equal(await th.blocked('c@example.com', '2001:db8:0:1::3'), 0, 'the next /64')
})

onEachStore('no address limit at SIGNIN_IP_MAX_FAILURES=0', { SIGNIN_IP_MAX_FAILURES: '0' }, async (th) => {
  for (let i = 0; i < 30; i++) assert.equal((await attempt(th, `user${i}@example.com`, '192.0.2.1', false)).wait, 0)
})

onEachStore(
  'an attempt one limit refuses is not counted by the other; release takes back an attempt never checked',
  { SIGNIN_IP_MAX_FAILURES: '3', SIGNIN_MAX_FAILURES: '3' },
  async (th) => {
    for (let i = 0; i < 3; i++) await attempt(th, `u${i}@example.com`, '192.0.2.66', false)
    for (let i = 0; i < 10; i++) assert.equal((await attempt(th, 'victim@example.com', '192.0.2.66', false)).checked, false)
    for (let i = 0; i < 2; i++)
      assert.equal((await attempt(th, 'victim@example.com', '192.0.2.1', false)).wait, 0, 'the refused ones did not count against the email')
    assert.equal(await th.blocked('victim@example.com', '192.0.2.1'), 0)
    await th.release('victim@example.com', '192.0.2.1')
    assert.equal((await attempt(th, 'victim@example.com', '192.0.2.1', false)).wait, 1, 'the released attempt was not counted: this is the third failure')
  },
)

onEachStore('100 parallel wrong passwords for one email: SIGNIN_MAX_FAILURES are checked, the rest wait; from 100 addresses too', {}, async (th) => {
  for (const [email, ip] of [
    ['jane@example.com', () => '192.0.2.1'],
    ['ann@example.com', (i: number) => `198.51.100.${i}`],
  ] as const) {
    const results = await Promise.all(Array.from({ length: 100 }, (_, i) => attempt(th, email, ip(i), false)))
    assert.equal(results.filter((r) => r.checked).length, 5, email)
    assert.ok(
      results.every((r) => r.wait === 0 || r.wait === 1),
      'the wait is told to every one after the lock',
    )
  }
})

onEachStore('100 parallel attempts from one address for 100 emails: SIGNIN_IP_MAX_FAILURES are checked', { SIGNIN_IP_MAX_FAILURES: '20' }, async (th) => {
  const results = await Promise.all(Array.from({ length: 100 }, (_, i) => attempt(th, `user${i}@example.com`, '203.0.113.5', false)))
  assert.equal(results.filter((r) => r.checked).length, 20)
})

test('the store sees keyed digests under the pepper: neither the email nor the address in clear', async (t) => {
  const store = openSqliteStore({ path: ':memory:' })
  t.after(() => store.close())
  const seen: string[] = []
  const spy = new Proxy(store.verification, {
    get:
      (target, name: keyof VerificationStore) =>
      (key: string | string[], ...rest: never[]) => {
        seen.push(...[key].flat())
        return (target[name] as (...args: unknown[]) => unknown).call(target, key, ...rest)
      },
  })
  const keys = async (pepper?: Buffer) => {
    seen.length = 0
    await attempt(new SignInThrottle({ ...store, verification: spy }, loadConfig({}), () => START, pepper), 'jane@example.com', '192.0.2.1', false)
    return [...new Set(seen)].sort()
  }
  const peppered = await keys(PEPPER)
  assert.equal(peppered.length, 2)
  assert.ok(
    peppered.every((k) => /^signin:(email|ip):[\w-]{43}(:\d+)?$/.test(k)),
    peppered.join(' '),
  )
  assert.ok(peppered.every((k) => !k.includes('jane') && !k.includes('192.0.2.1')))
  assert.notDeepEqual(await keys(pepperKey('q'.repeat(32))), peppered, 'another pepper, other keys')
  assert.notDeepEqual(await keys(), peppered, 'without a pepper: SHA-256, other keys')
})

test('the sign-in form: 100 parallel wrong passwords get 5 answers of 401, the rest 429 with Retry-After; the right one waits too, then works', async (t) => {
  const app = await startApp(t)
  const jane = await portalUser(app)
  const client = new PortalClient(app.url)
  await client.get('/portal/sign-in')
  const answers = await Promise.all(
    Array.from({ length: 100 }, () => client.post('/portal/sign-in', { email: jane.email, password: 'a wrong password, surely' })),
  )
  const statuses = answers.map((a) => a.status)
  assert.equal(statuses.filter((s) => s === 401).length, 5, statuses.join(','))
  assert.equal(statuses.filter((s) => s === 429).length, 95)
  assert.ok(answers.filter((a) => a.status === 429).every((a) => a.headers.get('retry-after') === '1' && /Too many attempts/.test(a.text)))
  assert.equal((await client.post('/portal/sign-in', { email: jane.email, password: jane.password }, { from: '/portal/sign-in' })).status, 429)
  const unknown = await Promise.all(
    Array.from({ length: 20 }, () => client.post('/portal/sign-in', { email: 'nobody@example.com', password: 'a wrong password, surely' })),
  )
  assert.deepEqual([...new Set(unknown.map((a) => a.status))].sort(), [401, 429], 'an unknown email is throttled alike')
  assert.equal(unknown.filter((a) => a.status === 401).length, 5)
  app.clock.advance(1000)
  await client.signIn(jane.email, jane.password)
})
