/**
 * The soak's inputs for the admin API (/admin/v1/…, on ADMIN_LISTEN): reads of the load
 * accounts, changes made to the scratch account only (suspending it, re-planning it, revoking and
 * rolling its keys, its relying party), webhooks on the load accounts (their events then go to
 * the harness's receiver), CSV imports, usage in JSON and CSV; and hostile tokens, IDs, bodies,
 * cursors and queries.
 */
import type { Case, Ctx, Request, Table } from '../types.ts'
import { bodyJson, hostileId, json, keep, newSecret, take } from './common.ts'

const account = (c: Ctx): Request => ({ params: { id: c.account.id } })
const scratch = (c: Ctx): Request => ({ params: { id: c.scratch.id } })

/** Hostile cases every admin operation gets: no token, a wrong one, hostile IDs in every path parameter. */
function abuse(body: () => Request = () => ({})): Case[] {
  const ids = (c: Ctx) => ({
    id: hostileId(c.next()),
    userID: hostileId(c.next()),
    webhookID: hostileId(c.next()),
    deliveryID: hostileId(c.next()),
    jobID: hostileId(c.next()),
    region: hostileId(c.next()),
    group: hostileId(c.next()),
    providerID: hostileId(c.next()),
  })
  const plain = { id: 'acc_0', userID: 'u', webhookID: 'whk_0', deliveryID: 'dlv_0', jobID: 'job_0', region: 'eu', group: 'totp', providerID: 'soak-x' }
  return [
    { name: 'no token', kind: 'hostile', expect: [401], make: () => ({ ...body(), params: plain, headers: { ...body().headers, authorization: '' } }) },
    {
      name: 'a wrong token',
      kind: 'hostile',
      expect: [401],
      make: () => ({ ...body(), params: plain, headers: { ...body().headers, authorization: `Bearer tsa_${'x'.repeat(2000)}` } }),
    },
    { name: 'hostile IDs', kind: 'hostile', make: (c) => ({ ...body(), params: ids(c) }) },
  ]
}

/** Hostile bodies for the operations that take JSON. */
function bodies(target: (c: Ctx) => Request): Case[] {
  return [
    { name: 'broken JSON', kind: 'hostile', expect: [400], make: (c) => ({ ...target(c), ...json('{"name": ') }) },
    {
      name: 'not JSON',
      kind: 'hostile',
      expect: [415],
      make: (c) => ({ ...target(c), body: 'name=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } }),
    },
    { name: 'over the body limit', kind: 'hostile', expect: [413], make: (c) => ({ ...target(c), ...json({ name: 'n'.repeat(70_000) }) }) },
    { name: 'JSON nested deep', kind: 'hostile', make: (c) => ({ ...target(c), ...json(`{"name":${'['.repeat(20_000)}${']'.repeat(20_000)}}`) }) },
  ]
}

const idem = (c: Ctx) => ({ 'idempotency-key': `admin-${c.account.index}-${c.next() % 30}` })

/** scratchKey gives a key of the scratch account made now (through createKey), to revoke or roll. */
async function scratchKey(c: Ctx): Promise<string> {
  const id = bodyJson<{ id?: string }>((await c.call('createKey', { ...scratch(c), ...json({ name: `k${c.next()}` }) })).body)?.id
  if (id === undefined) throw new Error('createKey refused')
  return id
}

/** webhook gives a webhook of this account (kept, or made now through createWebhook). */
async function webhook(c: Ctx): Promise<string> {
  const kept = take<string>(c.kept, 'webhooks')
  if (kept !== undefined) {
    keep(c.kept, 'webhooks', kept, 5)
    return kept
  }
  const id = bodyJson<{ id?: string }>((await c.call('createWebhook', { ...account(c), ...json({ url: `${c.receiver}/hook/ok` }) })).body)?.id
  if (id === undefined) throw new Error('createWebhook refused')
  keep(c.kept, 'webhooks', id, 5)
  return id
}

const csv = (c: Ctx, lines: number) => Array.from({ length: lines }, (_, i) => `csv-${c.account.index}-${c.next()}-${i},${newSecret()},line ${i}`).join('\n')

/** A single sign-on provider's settings: the scratch account joined by its domain's first sign-ins (nothing is called at the issuer). */
const ssoSettings = (c: Ctx, extra: Record<string, unknown> = {}) => ({
  name: `Soak ${c.account.index}`,
  issuer: `https://id-${c.account.index}.example.com/realms/soak`,
  clientId: 'tessera-soak',
  clientSecret: newSecret(),
  domains: ['soak.example'],
  joinAccountId: c.scratch.id,
  joinRole: 'viewer',
  mfa: 'amr',
  ...extra,
})
/** A few ids an account's lane uses (20 in all, whatever SOAK_ACCOUNTS), so that the service's cap on providers is never what answers. */
const ssoId = (c: Ctx) => `soak-${c.account.index % 5}-${c.next() % 4}`

export const ADMIN: Table = {
  listSsoProviders: [{ name: 'every provider', kind: 'valid', expect: [200], make: () => ({}) }, ...abuse()],
  putSsoProvider: [
    { name: 'a provider, made or replaced', kind: 'valid', expect: [200, 201], make: (c) => ({ params: { providerID: ssoId(c) }, ...json(ssoSettings(c)) }) },
    {
      name: 'a public client with every default',
      kind: 'boundary',
      expect: [200, 201],
      make: (c) => ({ params: { providerID: ssoId(c) }, ...json({ name: 'P', issuer: 'https://p.example.com', clientId: 'c' }) }),
    },
    {
      name: 'bad settings: http issuer, a join without domains, bidi name, odd domain, an unknown account',
      kind: 'hostile',
      expect: [400, 404],
      make: (c) => {
        const bad = [
          { issuer: 'http://id.example.com' },
          { domains: [] },
          { name: 'x\u202e' },
          { domains: ['not a domain', '..'] },
          { joinAccountId: 'acc_0000000000000000' },
          { issuer: `https://${'a'.repeat(490)}.example.com` },
        ][c.next() % 6]!
        return { params: { providerID: ssoId(c) }, ...json(ssoSettings(c, bad)) }
      },
    },
    {
      name: 'hostile provider ids',
      kind: 'hostile',
      expect: [400, 404],
      // As they go on the wire (percent-encoded where a path needs it), as HOSTILE_IDS are.
      make: (c) => ({
        params: { providerID: ['UPPER', '-lead', 'x'.repeat(40), '%2e%2e', encodeURIComponent('a\u202eb'), '%00'][c.next() % 6]! },
        ...json(ssoSettings(c)),
      }),
    },
    ...bodies((c) => ({ params: { providerID: ssoId(c) } })),
    ...abuse(() => json({ name: 'x', issuer: 'https://x.example', clientId: 'c' })),
  ],
  deleteSsoProvider: [
    { name: "one of the lane's providers (there, or deleted already)", kind: 'valid', expect: [200, 404], make: (c) => ({ params: { providerID: ssoId(c) } }) },
    ...abuse(),
  ],
  inviteOperator: [
    { name: 'a new address', kind: 'valid', expect: [201], make: (c) => json({ email: `soak-operator-${c.next()}@example.com` }) },
    { name: 'one address again and again (each replaces the last)', kind: 'boundary', expect: [201], make: () => json({ email: 'soak-operator@example.com' }) },
    {
      name: 'the longest address',
      kind: 'boundary',
      expect: [201],
      make: (c) => json({ email: `${String(c.next() % 1000).padStart(64, 'a')}@${'b'.repeat(185)}.com` }),
    },
    {
      name: 'not an address, too long, control characters, not text',
      kind: 'hostile',
      expect: [400],
      make: (c) => json({ email: ['not an address', `${'a'.repeat(64)}@${'b'.repeat(186)}.com`, 'a\u0000@example.com', 42, ''][c.next() % 5] }),
    },
    ...bodies(() => ({})),
    ...abuse(() => json({ email: 'x@example.com' })),
  ],
  createAccount: [
    { name: 'an account', kind: 'valid', expect: [201], make: (c) => json({ name: `soak made ${c.next()}` }) },
    { name: 'with an Idempotency-Key (some repeated)', kind: 'boundary', make: (c) => json({ name: 'soak idem' }, idem(c)) },
    { name: 'the longest name', kind: 'boundary', expect: [201], make: () => json({ name: 'n'.repeat(200) }) },
    {
      name: 'a name of 201, of control characters',
      kind: 'hostile',
      expect: [400],
      make: (c) => json({ name: ['n'.repeat(201), '\u0000\u202e', ''][c.next() % 3] }),
    },
    ...bodies(() => ({})),
    ...abuse(() => json({ name: 'x' })),
  ],
  listAccounts: [
    { name: 'a page', kind: 'valid', expect: [200], make: () => ({ query: 'limit=20' }) },
    { name: 'by name and status, the next page', kind: 'boundary', expect: [200], make: () => ({ query: 'status=active&name=soak&limit=200' }) },
    {
      name: 'cursors and limits of junk',
      kind: 'hostile',
      expect: [400],
      make: (c) => ({ query: ['limit=0', 'limit=99999', 'after=%ED%A0%80', `after=${'z'.repeat(600)}`, 'status=gone'][c.next() % 5] }),
    },
    ...abuse(),
  ],
  getAccount: [{ name: 'a load account', kind: 'valid', expect: [200], make: account }, ...abuse()],
  updateAccount: [
    { name: 'rename the scratch account', kind: 'valid', expect: [200], make: (c) => ({ ...scratch(c), ...json({ name: `scratch ${c.next()}` }) }) },
    {
      name: 'suspend it and back',
      kind: 'boundary',
      expect: [200],
      make: (c) => ({ ...scratch(c), ...json({ status: c.next() % 2 ? 'suspended' : 'active' }) }),
    },
    { name: 'a status it does not know', kind: 'hostile', expect: [400], make: (c) => ({ ...scratch(c), ...json({ status: 'deleted' }) }) },
    ...bodies(scratch),
    ...abuse(() => json({ name: 'x' })),
  ],
  createKey: [
    { name: 'a key of the scratch account', kind: 'valid', expect: [201, 409], make: (c) => ({ ...scratch(c), ...json({ name: `k${c.next()}` }) }) },
    {
      name: 'expiring, scoped',
      kind: 'boundary',
      make: (c) => ({
        ...scratch(c),
        ...json({ name: 'scoped', expiresAt: new Date(Date.now() + 86_400_000).toISOString(), scope: { groups: ['totp'], regions: ['eu'] } }),
      }),
    },
    {
      name: 'an expiry in the past, a scope of junk',
      kind: 'hostile',
      expect: [400],
      make: (c) => ({ ...scratch(c), ...json({ expiresAt: '1970-01-01T00:00:00Z', scope: { groups: ['x'] } }) }),
    },
    ...bodies(scratch),
    ...abuse(() => json({ name: 'x' })),
  ],
  listKeys: [
    { name: "a load account's keys", kind: 'valid', expect: [200], make: account },
    { name: "the scratch account's many", kind: 'boundary', expect: [200], make: scratch },
    ...abuse(),
  ],
  getKey: [
    { name: 'a key', kind: 'valid', expect: [200], make: async (c) => ({ params: { id: await scratchKey(c) } }) },
    { name: 'a key ID nobody has', kind: 'boundary', expect: [404], make: () => ({ params: { id: 'key_0000000000000000' } }) },
    ...abuse(),
  ],
  revokeKey: [
    { name: 'a scratch key', kind: 'valid', expect: [200], make: async (c) => ({ params: { id: await scratchKey(c) } }) },
    {
      name: 'the same key twice',
      kind: 'boundary',
      expect: [409, 200],
      make: async (c) => {
        const id = await scratchKey(c)
        await c.call('revokeKey', { params: { id } })
        return { params: { id } }
      },
    },
    ...abuse(),
  ],
  rollKey: [
    {
      name: 'a scratch key, with grace',
      kind: 'valid',
      expect: [201],
      make: async (c) => ({ params: { id: await scratchKey(c) }, ...json({ graceSeconds: 60, name: 'rolled' }) }),
    },
    {
      name: 'no grace, the longest',
      kind: 'boundary',
      expect: [201],
      make: async (c) => ({ params: { id: await scratchKey(c) }, ...json({ graceSeconds: c.next() % 2 ? 0 : 604800 }) }),
    },
    {
      name: 'grace out of range',
      kind: 'hostile',
      expect: [400],
      make: async (c) => ({ params: { id: await scratchKey(c) }, ...json({ graceSeconds: 604801 }) }),
    },
    ...abuse(() => json({})),
  ],
  listSubscriptions: [{ name: "a load account's", kind: 'valid', expect: [200], make: account }, ...abuse()],
  setSubscription: [
    {
      name: 'the scratch account, converter',
      kind: 'valid',
      expect: [200],
      make: (c) => ({ params: { id: c.scratch.id, region: 'eu', group: 'converter' }, ...json({ status: c.next() % 2 ? 'active' : 'inactive' }) }),
    },
    {
      name: 'another region',
      kind: 'boundary',
      make: (c) => ({ params: { id: c.scratch.id, region: 'apac', group: 'totp' }, ...json({ status: 'pending' }) }),
    },
    {
      name: 'a group that is not served there',
      kind: 'hostile',
      make: (c) => ({ params: { id: c.scratch.id, region: 'us', group: 'converter' }, ...json({ status: 'active' }) }),
    },
    ...bodies((c) => ({ params: { id: c.scratch.id, region: 'eu', group: 'totp' } })),
    ...abuse(() => json({ status: 'active' })),
  ],
  getPlan: [{ name: "a load account's", kind: 'valid', expect: [200], make: account }, ...abuse()],
  setPlan: [
    {
      name: 'a plan for the scratch account',
      kind: 'valid',
      expect: [200],
      make: (c) => ({ ...scratch(c), ...json({ rate: 10, burst: 20, quota: 1000, period: 'day' }) }),
    },
    {
      name: 'the largest numbers, weights',
      kind: 'boundary',
      expect: [200],
      make: (c) => ({ ...scratch(c), ...json({ rate: 1e6, burst: 1e9, quota: 1e12, period: 'month', weights: { totp: 0, converter: 1000 } }) }),
    },
    {
      name: 'numbers out of range',
      kind: 'hostile',
      expect: [400],
      make: (c) => ({ ...scratch(c), ...json({ rate: -1, burst: 0, quota: 1e13, period: 'year', weights: { x: 1 } }) }),
    },
    ...bodies(scratch),
    ...abuse(() => json({ rate: 1 })),
  ],
  resetPlan: [{ name: 'the scratch account', kind: 'valid', expect: [200], make: scratch }, ...abuse()],
  getUsage: [
    { name: "a load account's, by day", kind: 'valid', expect: [200], make: (c) => ({ ...account(c), query: 'by=day' }) },
    { name: 'by key, as CSV', kind: 'valid', expect: [200], make: (c) => ({ ...account(c), query: 'by=key', headers: { accept: 'text/csv' } }) },
    { name: 'a range of years', kind: 'boundary', make: (c) => ({ ...account(c), query: 'from=1970-01-01&to=2999-12-31&by=region' }) },
    {
      name: 'dates of junk',
      kind: 'hostile',
      expect: [400],
      make: (c) => ({ ...account(c), query: ['from=2026-02-30', 'to=x', 'by=minute', 'from=2027-01-01&to=2026-01-01'][c.next() % 4] }),
    },
    ...abuse(),
  ],
  listAuditEvents: [
    { name: "a load account's", kind: 'valid', expect: [200], make: (c) => ({ query: `account=${c.account.id}&limit=50` }) },
    { name: 'the largest page, by action', kind: 'boundary', expect: [200], make: () => ({ query: 'limit=200&action=key.create', mode: 'slow-read' }) },
    {
      name: 'queries of junk',
      kind: 'hostile',
      expect: [400],
      make: (c) => ({ query: ['limit=201', `after=${'%ED%A0%80'.repeat(10)}`, `actor=${'a'.repeat(300)}`, 'account='][c.next() % 4] }),
    },
    ...abuse(),
  ],
  clearTotpLockout: [
    { name: 'a secret the load locks', kind: 'valid', expect: [200], make: (c) => ({ ...account(c), ...json({ secret: 'JBSWY3DPEHPK3PXP' }) }) },
    { name: 'by fingerprint, a period', kind: 'boundary', make: (c) => ({ ...account(c), ...json({ fingerprint: 'f'.repeat(43), period: 3600 }) }) },
    { name: 'neither, both', kind: 'hostile', expect: [400], make: (c) => ({ ...account(c), ...json(c.next() % 2 ? {} : { secret: 'A', fingerprint: 'B' }) }) },
    ...bodies(account),
    ...abuse(() => json({ secret: 'JBSWY3DPEHPK3PXP' })),
  ],
  listTotpUsers: [
    { name: "a load account's", kind: 'valid', expect: [200], make: (c) => ({ ...account(c), query: 'limit=200' }) },
    {
      name: 'cursors of junk',
      kind: 'hostile',
      expect: [400],
      make: (c) => ({ ...account(c), query: [`after=${'%ED%A0%80'.repeat(5)}`, 'limit=0', `after=${'a'.repeat(1367)}`][c.next() % 3] }),
    },
    ...abuse(),
  ],
  getTotpUser: [
    { name: 'a user of the load', kind: 'valid', make: (c) => ({ params: { id: c.account.id, userID: encodeURIComponent(`crowded-${c.account.index}`) } }) },
    { name: 'a user nobody made', kind: 'boundary', expect: [404], make: (c) => ({ params: { id: c.account.id, userID: `nobody-${c.next()}` } }) },
    ...abuse(),
  ],
  deleteTotpUser: [
    {
      name: 'a user of the load',
      kind: 'valid',
      expect: [200, 404],
      make: (c) => ({ params: { id: c.account.id, userID: encodeURIComponent(`target-${c.account.index}`) } }),
    },
    ...abuse(),
  ],
  clearTotpUserLockout: [
    {
      name: 'the user the load locks',
      kind: 'valid',
      expect: [200, 404],
      make: (c) => ({ params: { id: c.account.id, userID: encodeURIComponent(`target-${c.account.index}`) } }),
    },
    ...abuse(),
  ],
  getFactorSettings: [{ name: "a load account's", kind: 'valid', expect: [200], make: account }, ...abuse()],
  updateFactorSettings: [
    {
      name: "the scratch account's limits",
      kind: 'valid',
      expect: [200],
      make: (c) => ({ ...scratch(c), ...json({ userLimit: 5, keyLimit: null, limitWindowSeconds: 60 }) }),
    },
    {
      name: 'a relying party, many origins',
      kind: 'boundary',
      make: (c) => ({
        ...scratch(c),
        ...json({ rpId: 'scratch.example', rpName: 'S', origins: Array.from({ length: 50 }, (_, i) => `https://o${i}.scratch.example`) }),
      }),
    },
    {
      name: 'origins and limits of junk',
      kind: 'hostile',
      expect: [400],
      make: (c) => ({ ...scratch(c), ...json({ rpId: 'http://x', origins: ['javascript:1', 'x'.repeat(3000)], userLimit: 0, limitWindowSeconds: 86401 }) }),
    },
    ...bodies(scratch),
    ...abuse(() => json({ userLimit: 5 })),
  ],
  importFactors: [
    {
      name: 'a CSV of 50 users',
      kind: 'valid',
      expect: [200],
      make: (c) => ({ ...scratch(c), query: 'applicationID=Soak', body: csv(c, 50), headers: { 'content-type': 'text/csv' } }),
    },
    {
      name: 'pending, from a line',
      kind: 'boundary',
      expect: [200],
      make: (c) => ({ ...scratch(c), query: 'applicationID=Soak&status=pending&from=10', body: csv(c, 20), headers: { 'content-type': 'text/csv' } }),
    },
    {
      name: 'lines of junk, a line of 100 KB',
      kind: 'hostile',
      make: (c) => ({
        ...scratch(c),
        query: 'applicationID=Soak',
        body: `u1,not base32!,x\n"unclosed,${'A'.repeat(100_000)}\n\u202e,${newSecret()}\n,,,,\n`,
        headers: { 'content-type': 'text/csv' },
      }),
    },
    {
      name: 'hang up mid-upload',
      kind: 'hostile',
      make: (c) => ({ ...scratch(c), query: 'applicationID=Soak', body: csv(c, 500), headers: { 'content-type': 'text/csv' }, mode: 'abort-upload' }),
    },
    { name: 'not CSV', kind: 'hostile', expect: [415], make: (c) => ({ ...scratch(c), ...json({ a: 1 }) }) },
    ...abuse(() => ({ body: 'u,JBSWY3DPEHPK3PXP', headers: { 'content-type': 'text/csv' } })),
  ],
  createWebhook: [
    {
      name: 'an endpoint of a load account',
      kind: 'valid',
      expect: [201, 409],
      make: (c) => ({ ...account(c), ...json({ url: `${c.receiver}/hook/${c.next() % 2 ? 'ok' : 'fail'}`, eventTypes: null }) }),
      after: (c, a) => {
        const id = bodyJson<{ id?: string }>(a.body)?.id
        if (a.status === 201 && id !== undefined) keep(c.kept, 'webhooks', id, 5)
      },
    },
    {
      name: 'event types, an Idempotency-Key',
      kind: 'boundary',
      make: (c) => ({ ...scratch(c), ...json({ url: `${c.receiver}/hook/ok`, eventTypes: ['conversion.succeeded'] }, idem(c)) }),
    },
    {
      name: 'URLs of junk',
      kind: 'hostile',
      expect: [400, 422],
      make: (c) => ({
        ...scratch(c),
        ...json({ url: ['file:///etc/passwd', 'x'.repeat(2001), 'http://[::1', 'gopher://x'][c.next() % 4], eventTypes: ['no.such'] }),
      }),
    },
    ...bodies(scratch),
    ...abuse(() => json({ url: 'http://127.0.0.1/' })),
  ],
  listWebhooks: [{ name: "a load account's", kind: 'valid', expect: [200], make: account }, ...abuse()],
  deleteWebhook: [
    {
      name: 'an endpoint of a load account',
      kind: 'valid',
      expect: [200],
      make: async (c) => {
        const id = take<string>(c.kept, 'webhooks') ?? (await webhook(c))
        c.kept.set(
          'webhooks',
          (c.kept.get('webhooks') ?? []).filter((w) => w !== id),
        )
        return { params: { id: c.account.id, webhookID: id } }
      },
    },
    { name: 'one nobody made', kind: 'boundary', expect: [404], make: (c) => ({ params: { id: c.account.id, webhookID: 'whk_0000000000000000' } }) },
    ...abuse(),
  ],
  listWebhookDeliveries: [
    {
      name: "an endpoint's",
      kind: 'valid',
      expect: [200],
      make: async (c) => ({ params: { id: c.account.id, webhookID: await webhook(c) }, query: 'limit=100' }),
    },
    {
      name: 'cursors of junk',
      kind: 'hostile',
      expect: [400],
      make: async (c) => ({ params: { id: c.account.id, webhookID: await webhook(c) }, query: ['limit=0', 'after=%ED%A0%80'][c.next() % 2] }),
    },
    ...abuse(),
  ],
  resendWebhookDelivery: [
    {
      name: 'a delivery',
      kind: 'valid',
      expect: [200, 404, 409],
      make: async (c) => {
        // The endpoint made with the account has had the account's events from the start.
        for (const webhookID of [c.account.webhook, ...(c.kept.get('webhooks') ?? [])]) {
          if (typeof webhookID !== 'string') continue
          const items =
            bodyJson<{ items?: { id: string }[] }>((await c.call('listWebhookDeliveries', { params: { id: c.account.id, webhookID } })).body)?.items ?? []
          if (items.length > 0) return { params: { id: c.account.id, webhookID, deliveryID: items[c.next() % items.length]!.id } }
        }
        throw new Error('no delivery yet')
      },
    },
    {
      name: 'one nobody made',
      kind: 'boundary',
      expect: [404],
      make: async (c) => ({ params: { id: c.account.id, webhookID: await webhook(c), deliveryID: 'dlv_0000000000000000' } }),
    },
    ...abuse(),
  ],
  listJobs: [
    { name: "a load account's", kind: 'valid', expect: [200], make: (c) => ({ ...account(c), query: 'limit=100' }) },
    { name: 'by status', kind: 'boundary', expect: [200], make: (c) => ({ ...account(c), query: 'status=failed' }) },
    {
      name: 'queries of junk',
      kind: 'hostile',
      expect: [400],
      make: (c) => ({ ...account(c), query: ['limit=0', 'status=x', 'after=%ED%A0%80'][c.next() % 3] }),
    },
    ...abuse(),
  ],
  cancelJob: [
    {
      name: "a load account's job",
      kind: 'valid',
      expect: [200, 409],
      make: (c) => {
        const jobID = take<string>(c.kept, 'jobs')
        if (jobID === undefined) throw new Error('no job kept yet')
        return { params: { id: c.account.id, jobID } }
      },
    },
    { name: 'one nobody made', kind: 'boundary', expect: [404], make: (c) => ({ params: { id: c.account.id, jobID: 'job_00000000000000000000' } }) },
    ...abuse(),
  ],
}
