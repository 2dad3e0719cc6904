import { test } from 'node:test'
import assert from 'node:assert/strict'
import { blockedKind, checkEndpointUrl, localName, resolveTarget, type Lookup } from './address.ts'

test('blockedKind: the IPv6 forms that carry an IPv4 address are refused unless NAT64 of a public one; IPv4 is held to its own ranges', () => {
  const cases: [string, string | null][] = [
    ['93.184.215.14', null],
    ['8.8.8.8', null],
    ['2606:4700::1111', null],
    ['::ffff:8.8.8.8', 'IPv4-mapped'],
    ['::ffff:808:808', 'IPv4-mapped'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:10.1.2.3', 'private'],
    ['::ffff:0:808:808', 'IPv4-translated'],
    ['::ffff:0:10.1.2.3', 'IPv4-translated'],
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'Teredo'],
    ['2001::1', 'Teredo'],
    ['2001:2::1', 'benchmarking'],
    ['2002:808:808::1', '6to4'],
    ['2002:a01:203::1', '6to4'],
    ['64:ff9b::808:808', null],
    ['64:ff9b::8.8.8.8', null],
    ['64:ff9b::a01:203', 'private (inside 64:ff9b::a01:203)'],
    ['64:ff9b:1::808:808', 'local NAT64'],
    ['::1', 'loopback'],
    ['fd00::1', 'unique-local'],
  ]
  for (const [address, kind] of cases) assert.equal(blockedKind(address), kind, address)
})

test('localName: localhost, .local, .internal and home.arpa, with a trailing dot or not, and single labels', () => {
  for (const name of [
    'localhost',
    'localhost.',
    'LOCALHOST',
    'api.localhost.',
    'printer.local',
    'printer.local.',
    'example.internal',
    'example.internal.',
    'metadata.google.internal',
    'home.arpa',
    'router.home.arpa.',
    'intranet',
    'intranet.',
  ])
    assert.equal(localName(name), true, name)
  for (const name of ['example.com', 'example.com.', 'local.example.com', 'internal.example.com', 'localhost.example.com', 'arpa.example'])
    assert.equal(localName(name), false, name)
})

test('checkEndpointUrl refuses local names however spelt, and the IPv6 forms of IPv4, before any lookup', () => {
  for (const url of [
    'https://localhost./hook',
    'https://example.internal./hook',
    'https://printer.local/hook',
    'https://router.home.arpa/hook',
    'https://intranet./hook',
  ])
    assert.deepEqual(checkEndpointUrl(url, false), { reason: 'must name a public host', private: true }, url)
  assert.deepEqual(checkEndpointUrl('https://[::ffff:8.8.8.8]/', false), { reason: 'must reach a public address, not an IPv4-mapped one', private: true })
  assert.deepEqual(checkEndpointUrl('https://[2001::1]/', false), { reason: 'must reach a public address, not a Teredo one', private: true })
  assert.deepEqual(checkEndpointUrl('https://127.0.0.1./', false), { reason: 'must reach a public address, not a loopback one', private: true })
  assert.deepEqual(checkEndpointUrl('https://hooks.example.com./', false), { url: 'https://hooks.example.com./' })
  assert.deepEqual(checkEndpointUrl('http://localhost./', true), { url: 'http://localhost./' }, 'WEBHOOK_ALLOW_PRIVATE lifts the rule')
})

test('resolveTarget never says what a name resolved to, nor its kind; a local name is not looked up', async () => {
  const asked: string[] = []
  const names: Record<string, string[]> = {
    'internal.example.com': ['10.1.2.3'],
    'mixed.example.com': ['93.184.215.14', '169.254.169.254'],
    'mapped.example.com': ['::ffff:8.8.8.8'],
    'public.example.com': ['93.184.215.14'],
  }
  const lookup: Lookup = async (host) => {
    asked.push(host)
    return (names[host.replace(/\.$/, '')] ?? []).map((address) => ({ address, family: address.includes(':') ? 6 : 4 }))
  }
  const refused = async (host: string) => {
    const got = await resolveTarget(host, false, lookup)
    assert.ok('reason' in got, host)
    return got.reason
  }
  for (const host of ['internal.example.com', 'internal.example.com.', 'mixed.example.com', 'mapped.example.com'])
    assert.equal(await refused(host), `${host} resolves to an address that is not public`)
  assert.deepEqual(await resolveTarget('nowhere.example.com', false, lookup), { reason: 'nowhere.example.com resolves to no address', unresolved: true })
  assert.deepEqual(await resolveTarget('public.example.com.', false, lookup), { address: '93.184.215.14', family: 4 })
  asked.length = 0
  for (const host of ['localhost.', 'example.internal.', 'printer.local']) assert.equal(await refused(host), `${host} is not a public host name`)
  assert.deepEqual(asked, [], 'no local name was looked up')
  assert.equal(await refused('10.1.2.3'), '10.1.2.3 is a private address', "the caller's own address is named")
  assert.deepEqual(await resolveTarget('internal.example.com', true, lookup), { address: '10.1.2.3', family: 4 }, 'WEBHOOK_ALLOW_PRIVATE')
})
