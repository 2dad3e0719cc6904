/**
 * Where a webhook may go (SSRF): an `https` URL whose host is, and resolves only to, public
 * addresses. The URL is checked when an endpoint is created (scheme, credentials, an address
 * or a local name as the host); the addresses its name resolves to are checked at every
 * delivery, and the connection goes to the address checked (see send.ts), never to a second
 * lookup's answer. WEBHOOK_ALLOW_PRIVATE lifts both rules (tests, development).
 *
 * A refusal of a name never says what it resolved to, nor what kind of address that is: the
 * caller would otherwise map internal names through this server's resolver. Only an address
 * the caller wrote itself is named, with its kind.
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
  // An IPv4 address written as IPv6 whose IPv4 is public: no public host is named so, and the socket would reach the IPv4 one.
  ['::ffff:0:0', 96, 'ipv6', 'IPv4-mapped'],
  ['::ffff:0:0:0', 96, 'ipv6', 'IPv4-translated'],
  ['64:ff9b:1::', 48, 'ipv6', 'local NAT64'],
  ['100::', 64, 'ipv6', 'discard'],
  // Tunnels whose far end is an IPv4 address inside the IPv6 one (obfuscated in Teredo's case): no receiver needs them.
  ['2001::', 32, 'ipv6', 'Teredo'],
  ['2001:2::', 48, 'ipv6', 'benchmarking'],
  ['2001:db8::', 32, 'ipv6', 'documentation'],
  ['2002::', 16, 'ipv6', '6to4'],
  ['fc00::', 7, 'ipv6', 'unique-local'],
  ['fe80::', 10, 'ipv6', 'link-local'],
  ['fec0::', 10, 'ipv6', 'site-local'],
  ['ff00::', 8, 'ipv6', 'multicast'],
]

// One list per range, so that a refusal can name the kind. Node checks IPv4-mapped IPv6 (::ffff:a.b.c.d) against the IPv4
// ranges, and an IPv4 address against the IPv6 ones as if mapped: so an address is held to its own family's lists, and an
// IPv6 one to the IPv4 lists first (::ffff:127.0.0.1 is a loopback address before it is an IPv4-mapped one).
const LISTS = RANGES.map(([network, prefix, family, kind]) => {
  const list = new BlockList()
  list.addSubnet(network, prefix, family)
  return { list, family, kind }
})

/**
 * ipv4Within: the IPv4 address a NAT64 address of the well-known prefix (64:ff9b::/96) carries, if
 * any. Such an address is taken when that IPv4 address is public: DNS64 answers it on IPv6-only
 * networks, and the NAT64 gateway goes to the IPv4 address. (6to4 is refused outright, above.)
 */
function ipv4Within(address: string): string | null {
  const parts = expand(address)
  if (parts === null) return null
  const quad = (hi: number, lo: number) => [hi >> 8, hi & 255, lo >> 8, lo & 255].join('.')
  if (parts[0] === 0x64 && parts[1] === 0xff9b && parts.slice(2, 6).every((p) => p === 0)) return quad(parts[6]!, parts[7]!)
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
  for (const { list, family: of, kind } of LISTS) if ((type === 'ipv6' || of === 'ipv4') && list.check(address, type)) return kind
  if (family === 6) {
    const inner = ipv4Within(address)
    if (inner !== null) {
      const kind = blockedKind(inner)
      if (kind !== null) return `${kind} (inside ${address})`
    }
  }
  return null
}

/** a: a kind with its article ("an IPv4-mapped", "a loopback"). */
const a = (kind: string) => `${/^(IPv4|unspecified)/.test(kind) ? 'an' : 'a'} ${kind}`

/** The longest endpoint URL taken. */
export const MAX_URL_LENGTH = 2000
/**
 * The longest URL a conversion job takes (its sourceUrl, its resultUrl, a redirect): presigned
 * URLs carry their signature and, with temporary credentials, a session token of a thousand
 * characters or more.
 */
export const MAX_TRANSFER_URL_LENGTH = 8192

const bare = (hostname: string) => hostname.replace(/^\[(.*)\]$/, '$1')

/**
 * The names that are local by definition, refused before any lookup: `localhost` (RFC 6761),
 * `.local` (mDNS, RFC 6762), `.internal` (reserved for private use by ICANN in 2024) and
 * `home.arpa` (RFC 8375), with their subdomains.
 */
const LOCAL_SUFFIXES = ['localhost', 'local', 'internal', 'home.arpa'] as const

/** localName: whether `name` (an address is not one) is local: one of those, or a single label that a search domain would complete. */
export function localName(name: string): boolean {
  // `localhost.` is `localhost`: a trailing dot only says the name is complete.
  const host = name.toLowerCase().replace(/\.+$/, '')
  if (!host.includes('.')) return true
  return LOCAL_SUFFIXES.some((suffix) => host === suffix || host.endsWith(`.${suffix}`))
}

/** A refusal: why (a phrase that follows the field's name), and whether WEBHOOK_ALLOW_PRIVATE would have let the URL through. */
export interface Refusal {
  readonly reason: string
  readonly private?: true
}

/**
 * refusalText: the reason of a refusal as its caller reads it. Outside production, one that
 * WEBHOOK_ALLOW_PRIVATE lifts names the setting, so that a developer trying a receiver on their
 * own machine finds it; a production node never tells its callers how its SSRF rule is turned off.
 */
export function refusalText(refusal: Refusal, nodeEnv: string): string {
  return refusal.private === true && nodeEnv !== 'production'
    ? `${refusal.reason} (for development, WEBHOOK_ALLOW_PRIVATE=true on the server allows it)`
    : refusal.reason
}

/** checkEndpointUrl: the URL as it will be called, or why it is refused. */
export function checkEndpointUrl(raw: string, allowPrivate: boolean, maxLength = MAX_URL_LENGTH): { url: string } | Refusal {
  if (raw.length > maxLength) return { reason: `must be at most ${maxLength} characters` }
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return { reason: 'must be an absolute URL' }
  }
  if (url.protocol !== 'https:' && !(allowPrivate && url.protocol === 'http:')) {
    return allowPrivate || url.protocol !== 'http:'
      ? { reason: allowPrivate ? 'must be an http or https URL' : 'must be an https URL' }
      : { reason: 'must be an https URL', private: true }
  }
  if (url.username !== '' || url.password !== '') return { reason: 'must not carry a user name or password' }
  if (url.hash !== '') return { reason: 'must not have a fragment (#…)' }
  if (allowPrivate) return { url: url.href }
  const host = bare(url.hostname)
  if (isIP(host) !== 0) {
    const kind = blockedKind(host)
    if (kind !== null) return { reason: `must reach a public address, not ${a(kind)} one`, private: true }
  } else if (localName(host)) {
    return { reason: 'must name a public host', private: true }
  }
  return { url: url.href }
}

export interface Target {
  readonly address: string
  readonly family: 4 | 6
}

export type Lookup = (hostname: string) => Promise<readonly { address: string; family: number }[]>

const systemLookup: Lookup = (hostname) => dnsLookup(hostname, { all: true, verbatim: true })

/** Refused: why (a phrase for people, naming the host as given), and whether because the name resolved to no address at all. */
export interface Unreachable {
  readonly reason: string
  readonly unresolved?: true
}

/**
 * resolveTarget: the address to connect to for `hostname` (the first its lookup gives), or
 * why none may be: every address the name resolves to must be public, so that a name that
 * answers a public and a private address cannot be steered to the private one. A local name
 * is refused unlooked-up (endpoints made before that rule may still hold one).
 */
export async function resolveTarget(hostname: string, allowPrivate: boolean, lookup: Lookup = systemLookup): Promise<Target | Unreachable> {
  const host = bare(hostname)
  const literal = isIP(host)
  if (literal === 0 && !allowPrivate && localName(host)) return { reason: `${host} is not a public host name` }
  const found = literal !== 0 ? [{ address: host, family: literal }] : await lookup(host)
  if (found.length === 0) return { reason: `${host} resolves to no address`, unresolved: true }
  if (!allowPrivate) {
    for (const answer of found) {
      const kind = blockedKind(answer.address)
      if (kind === null) continue
      // The caller's own address is named; what a name resolved to never is (see the top of this file).
      return { reason: literal !== 0 ? `${host} is ${a(kind)} address` : `${host} resolves to an address that is not public` }
    }
  }
  const first = found[0]!
  return { address: first.address, family: first.family === 6 ? 6 : 4 }
}
