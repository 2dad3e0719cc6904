/**
 * Words and small pieces the keys, subscriptions and getting-started pages share: what
 * each API group is called, where each region is served, and how a time reads.
 */
import type { Group, Region } from '../../domain/regions.ts'
import type { RefusalReason } from '../../domain/usage.ts'
import { html, type Html } from './html.ts'
import type { Kit } from './kit.ts'

/** GROUP_NAMES: each API group as people call it. */
export const GROUP_NAMES: Readonly<Record<Group, string>> = { totp: 'TOTP', converter: 'PDF conversion' }

/** regionBase: the base URL a region's API is called at (REGION_URLS), or null when not configured. */
export function regionBase(kit: Kit, region: Region): string | null {
  return kit.config.regionUrls[region] ?? null
}

/** when: a time as a `<time>` element reading `2025-01-31 14:05 UTC`, or the words for none. */
export function when(iso: string | null, none = 'never'): Html | string {
  if (iso === null) return none
  return html`<time datetime="${iso}">${iso.slice(0, 16).replace('T', ' ')} UTC</time>`
}

/** accountPath: the path of one of an account's portal pages. */
export function accountPath(accountId: string, page: string): string {
  return `/portal/accounts/${encodeURIComponent(accountId)}/${page}`
}

/** REFUSAL_WORDS: why a call with a key of the account was refused, as its status says it, for the reader who must fix it. */
export const REFUSAL_WORDS: Readonly<Record<RefusalReason, string>> = {
  revoked: '403: the key is revoked',
  expired: '403: the key has expired',
  suspended: '403: the account is suspended',
  'not subscribed': '403: the account is not subscribed to this group in this region',
  'out of scope': "403: the key's scope leaves this group or region out",
  throttled: "429: over the plan's rate",
  'over quota': '429: the quota is used up',
}
