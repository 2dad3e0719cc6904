/**
 * Where a webhook may go (SSRF): an `https` URL whose host is, and resolves only to, public
 * addresses. The URL is checked when an endpoint is created (scheme, credentials, an address
 * or `localhost` as the host); the addresses its name resolves to are checked at every
 * delivery, and the connection goes to the address checked (see send.ts), never to a second
 * lookup's answer. WEBHOOK_ALLOW_PRIVATE lifts both rules (tests, development).
 */
import { BlockList, isIP } from 'node:net'
import { lookup as dnsLookup } from 'node:dns/promises'

/** The ranges no webhook may reach, with the name a refusal gives. */
const RANGES: readonly (readonly [string, number, 'ipv4' | 'ipv6', string])[] = [
  ['0.0.0.0', 8, 'ipv4', 'unspecified'],
  ['10.0.0.0', 8, 'ipv4', 'private'],
  ['100.64.0.0', 10, 'ipv4', 'shared (CGNAT)'],
  ['127.0.0.0', 8, 'ipv4', 'loopback'],
  ['169.254.0.0', 16, 'ipv4', 'link-local'],
  ['172.16.0.0', 12, 'ipv4', 'private'],
  ['192.0.0.0', 24, 'ipv4', 'reserved'],
  ['192.0.2.0', 24, 'ipv4', 'documentation'],
  ['192.88.99.0', 24, 'ipv4', 'reserved'],
  ['192.168.0.0', 16, 'ipv4', 'private'],
  ['198.18.0.0', 15, 'ipv4', 'benchmarking'],
  ['198.51.100.0', 24, 'ipv4', 'documentation'],
  ['203.0.113.0', 24, 'ipv4', 'documentation'],
  ['224.0.0.0', 4, 'ipv4', 'multicast'],
  ['240.0.0.0', 4, 'ipv4', 'reserved'],
  ['::', 128, 'ipv6', 'unspecified'],
  ['::1', 128, 'ipv6', 'loopback'],
  ['::', 96, 'ipv6', 'IPv4-compatible'],
  ['64:ff9b:1::', 48, 'ipv6', 'local NAT64'],
  ['100::', 64, 'ipv6', 'discard'],
  ['2001:db8::', 32, 'ipv6', 'documentation'],
  ['fc00::', 7, 'ipv6', 'unique-local'],
  ['fe80::', 10, 'ipv6', 'link-local'],
  ['fec0::', 10, 'ipv6', 'site-local'],
  ['ff00::', 8, 'ipv6', 'multicast'],
]

// One list per range, so that a refusal can name the kind; Node checks IPv4-mapped IPv6 (::ffff:a.b.c.d) against the IPv4 ranges.
const LISTS = RANGES.map(([network, prefix, family, kind]) => {
  const list = new BlockList()
  list.addSubnet(network, prefix, family)
  return { list, kind }
})

/** ipv4Within: the IPv4 address a NAT64 (64:ff9b::/96) or 6to4 (2002::/16) address carries, if any. */
function ipv4Within(address: string): string | null {
  const parts = expand(address)
  if (parts === null) return null
  const quad = (hi: number, lo: number) => [hi >> 8, hi & 255, lo >> 8, lo & 255].join('.')
  if (parts[0] === 0x64 && parts[1] === 0xff9b && parts.slice(2, 6).every((p) => p === 0)) return quad(parts[6]!, parts[7]!)
  if (parts[0] === 0x2002) return quad(parts[1]!, parts[2]!)
  return null
}

/** expand: an IPv6 address as its eight 16-bit groups. */
function expand(address: string): number[] | null {
  let text = address.toLowerCase()
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text)
  if (dotted) {
    const [a, b, c, d] = dotted[1]!.split('.').map(Number) as [number, number, number, number]
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`
  }
  const [head = '', tail] = text.split('::')
  const left = head === '' ? [] : head.split(':')
  const right = tail === undefined || tail === '' ? [] : tail.split(':')
  const missing = 8 - left.length - right.length
  if (tail === undefined ? missing !== 0 : missing < 0) return null
  return [...left, ...Array<string>(tail === undefined ? 0 : missing).fill('0'), ...right].map((g) => Number.parseInt(g, 16))
}

/** blockedKind names the kind of non-public address `address` is, or null for a public one. */
export function blockedKind(address: string): string | null {
  const family = isIP(address)
  if (family === 0) return 'not an address'
  const type = family === 4 ? 'ipv4' : 'ipv6'
  for (const { list, kind } of LISTS) if (list.check(address, type)) return kind
  if (family === 6) {
    const inner = ipv4Within(address)
    if (inner !== null) {
      const kind = blockedKind(inner)
      if (kind !== null) return `${kind} (inside ${address})`
    }
  }
  return null
}

/** The longest endpoint URL taken. */
export const MAX_URL_LENGTH = 2000
/**
 * The longest URL a conversion job takes (its sourceUrl, its resultUrl, a redirect): presigned
 * URLs carry their signature and, with temporary credentials, a session token of a thousand
 * characters or more.
 */
export const MAX_TRANSFER_URL_LENGTH = 8192

const bare = (hostname: string) => hostname.replace(/^\[(.*)\]$/, '$1')

/** checkEndpointUrl: the URL as it will be called, or why it is refused (a phrase that follows the field's name). */
export function checkEndpointUrl(raw: string, allowPrivate: boolean, maxLength = MAX_URL_LENGTH): { url: string } | { reason: string } {
  if (raw.length > maxLength) return { reason: `must be at most ${maxLength} characters` }
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return { reason: 'must be an absolute URL' }
  }
  if (url.protocol !== 'https:' && !(allowPrivate && url.protocol === 'http:')) {
    return { reason: allowPrivate ? 'must be an http or https URL' : 'must be an https URL' }
  }
  if (url.username !== '' || url.password !== '') return { reason: 'must not carry a user name or password' }
  if (url.hash !== '') return { reason: 'must not have a fragment (#…)' }
  if (allowPrivate) return { url: url.href }
  const host = bare(url.hostname)
  if (isIP(host) !== 0) {
    const kind = blockedKind(host)
    if (kind !== null) return { reason: `must reach a public address, not a ${kind} one` }
  } else if (host === 'localhost' || host.endsWith('.localhost') || !host.includes('.')) {
    return { reason: 'must name a public host' }
  }
  return { url: url.href }
}

export interface Target {
  readonly address: string
  readonly family: 4 | 6
}

export type Lookup = (hostname: string) => Promise<readonly { address: string; family: number }[]>

const systemLookup: Lookup = (hostname) => dnsLookup(hostname, { all: true, verbatim: true })

/**
 * resolveTarget: the address to connect to for `hostname` (the first its lookup gives), or
 * why none may be: every address the name resolves to must be public, so that a name that
 * answers a public and a private address cannot be steered to the private one.
 */
export async function resolveTarget(hostname: string, allowPrivate: boolean, lookup: Lookup = systemLookup): Promise<Target | { reason: string }> {
  const host = bare(hostname)
  const literal = isIP(host)
  const found = literal !== 0 ? [{ address: host, family: literal }] : await lookup(host)
  if (found.length === 0) return { reason: `${host} resolves to no address` }
  if (!allowPrivate) {
    for (const a of found) {
      const kind = blockedKind(a.address)
      if (kind !== null) return { reason: literal !== 0 ? `${host} is a ${kind} address` : `${host} resolves to ${a.address}, a ${kind} address` }
    }
  }
  const first = found[0]!
  return { address: first.address, family: first.family === 6 ? 6 : 4 }
}
