/**
 * The portal's usage and audit pages of an account, over HTTP through the real app (in a real
 * browser: test/browser/portal-usage.test.ts): the numbers shown (chart data, tables, quota, CSV) are those seeded in the
 * usage store; the trail lists the changes made through the accounts layer, by whom, a page
 * at a time, filtered by action; viewers read, other accounts' members get 404, bad queries 400.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { startApp } from '../../support/helper.ts'
import { PortalClient, portalUser, seedUsage, signedInClient } from '../../support/portal-helper.ts'
import { PORTAL_CSP } from '../../../src/portal/web/plugin.ts'
import { isFailure } from '../../../src/services/outcome.ts'
import { SYSTEM } from '../../../src/domain/accounts.ts'
import type { UsageRow } from '../../../src/domain/usage.ts'
import { quotaWindow, utcDay } from '../../../src/usage/windows.ts'
import { KEYS_PER_PAGE } from '../../../src/portal/pages/usage.ts'
import { PAGE_SIZE } from '../../../src/portal/pages/audit.ts'

const DAY = 86_400_000

/** unescapeHtml: an attribute's text as the browser reads it. */
const unescapeHtml = (s: string) =>
  s
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&')

/** tableRows: the body rows of the table with this caption, each as its cells' text. */
function tableRows(page: string, caption: RegExp): string[][] {
  const table = [...page.matchAll(/<table[^>]*>([\s\S]*?)<\/table>/g)].find((m) =>
    caption.test((/<caption[^>]*>([\s\S]*?)<\/caption>/.exec(m[1]!)?.[1] ?? '').replace(/<[^>]+>/g, '')),
  )
  assert.ok(table, `a table captioned ${caption}`)
  const body = /<tbody>([\s\S]*?)<\/tbody>/.exec(table[1]!)![1]!
  return [...body.matchAll(/<tr>([\s\S]*?)<\/tr>/g)].map((r) =>
    [...r[1]!.matchAll(/<t[hd][^>]*>([\s\S]*?)<\/t[hd]>/g)].map((c) => unescapeHtml(c[1]!.replace(/<[^>]+>/g, '')).trim()),
  )
}

/** parseCsv: RFC 4180 rows (quoted fields with doubled quotes), without the header. */
function parseCsv(text: string): string[][] {
  assert.ok(text.endsWith('\r\n'))
  return text
    .slice(0, -2)
    .split('\r\n')
    .slice(1)
    .map((line) =>
      [...line.matchAll(/("(?:[^"]|"")*"|[^,]*)(,|$)/g)].slice(0, -1).map((m) => (m[1]!.startsWith('"') ? m[1]!.slice(1, -1).replace(/""/g, '"') : m[1]!)),
    )
}

const within = (rows: readonly UsageRow[], from: string, to: string) => rows.filter((r) => r.day >= from && r.day <= to)
const total = (rows: readonly UsageRow[], field: 'count' | 'units') => rows.reduce((s, r) => s + r[field], 0)
const n = (v: number) => v.toLocaleString('en')

test('the usage page shows the seeded calls per day, region and key, and the quota used; its CSV adds up to the same', async (t) => {
  const app = await startApp(t)
  const { rows, otherKeyId } = await seedUsage(app)
  const plan = await app.accounts.setPlan({ actor: SYSTEM }, app.accountId, { quota: 50_000, period: 'month' })
  assert.ok(!isFailure(plan))
  const { client } = await signedInClient(app)
  const today = utcDay(app.clock.now())
  const base = `/portal/accounts/${app.accountId}`

  for (const days of [7, 30, 90]) {
    const from = utcDay(app.clock.now() - (days - 1) * DAY)
    const page = await client.get(`${base}/usage${days === 30 ? '' : `?days=${days}`}`)
    assert.equal(page.status, 200)
    assert.equal(page.headers.get('content-security-policy'), PORTAL_CSP)
    const seen = within(rows, from, today)
    assert.match(page.text, new RegExp(`From ${from} to ${today} \\(UTC\\): ${n(total(seen, 'count'))} calls, ${n(total(seen, 'units'))} units\\.`))
    assert.match(page.text, new RegExp(`role="img" aria-label="Calls per day, last ${days} days: ${n(total(seen, 'count'))} in total"`))
    // The chart's numbers: one value per day of the period and group, summing to the calls of each group.
    const chart = JSON.parse(unescapeHtml(/data-chart="([^"]*)"/.exec(page.text)![1]!)) as { days: string[]; series: { label: string; values: number[] }[] }
    assert.equal(chart.days.length, days)
    assert.deepEqual([chart.days[0], chart.days.at(-1)], [from, today])
    assert.deepEqual(
      chart.series.map((s) => [s.label, s.values.reduce((a, b) => a + b, 0)]),
      [
        [
          'TOTP',
          total(
            seen.filter((r) => r.group === 'totp'),
            'count',
          ),
        ],
        [
          'Converter',
          total(
            seen.filter((r) => r.group === 'converter'),
            'count',
          ),
        ],
      ],
    )
    // The tables: a row a day (calls of the newest day), per region, per key (most used first).
    // Only the days with calls: 30 rows of zeros hid the few that mattered.
    const perDay = tableRows(page.text, /^Days with calls, .*; days without calls are left out$/)
    assert.equal(perDay.length, new Set(seen.map((r) => r.day)).size)
    assert.ok(perDay.length < days, 'days without calls are left out')
    const todays = rows.filter((r) => r.day === today)
    assert.deepEqual(perDay.at(-1), [today, n(107), n(3), n(110), n(107 + 15)].map(String))
    assert.equal(todays.length, 3)
    const perRegion = tableRows(page.text, /^Calls per region/)
    assert.deepEqual(
      perRegion.map((r) => [r[0], r[3]]),
      [
        [
          'eu',
          n(
            total(
              seen.filter((r) => r.region === 'eu'),
              'count',
            ),
          ),
        ],
        [
          'us',
          n(
            total(
              seen.filter((r) => r.region === 'us'),
              'count',
            ),
          ),
        ],
      ],
    )
    assert.match(
      page.text,
      new RegExp(`<a href="${base}/usage/keys\\?days=${days}" hx-get="${base}/usage/keys\\?days=${days}" hx-trigger="load"`),
      'the per-key table: loaded by htmx, a link without scripts',
    )
    const keysPage = await client.get(`${base}/usage/keys?days=${days}`)
    assert.equal(keysPage.status, 200)
    const perKey = tableRows(keysPage.text, /^Calls per key/)
    assert.deepEqual(
      perKey.map((r) => [r[0], r[3], r[4]]),
      [
        [
          `test key …${(await app.accounts.getKey(app.keyId))!.hint}`,
          n(
            total(
              seen.filter((r) => r.keyId === app.keyId),
              'count',
            ),
          ),
          n(
            total(
              seen.filter((r) => r.keyId === app.keyId),
              'units',
            ),
          ),
        ],
        [
          `=HYPERLINK("http://evil.example") …${(await app.accounts.getKey(otherKeyId))!.hint}`,
          n(
            total(
              seen.filter((r) => r.keyId === otherKeyId),
              'count',
            ),
          ),
          n(
            total(
              seen.filter((r) => r.keyId === otherKeyId),
              'units',
            ),
          ),
        ],
      ],
    )
    assert.match(page.text, new RegExp(`href="${base}/usage\\.csv\\?from=${from}&amp;to=${today}&amp;by=day" download>Download usage as CSV</a>`))
  }

  // The quota: the units of this UTC month, whatever the page's period.
  const w = quotaWindow(app.clock.now(), 'month')
  const used = total(within(rows, utcDay(w.start), utcDay(w.end - 1)), 'units')
  const page = await client.get(`${base}/usage?days=7`)
  assert.match(page.text, new RegExp(`${n(used)} of 50,000 units used this month \\(${(used / 500).toFixed(1)} %\\)\\.`))
  assert.match(page.text, /<dt>Rate<\/dt>/)

  // CSV: every kind of report parses back to the seeded totals.
  const from = utcDay(app.clock.now() - 119 * DAY)
  for (const by of ['day', 'region', 'key'] as const) {
    const res = await client.get(`${base}/usage.csv?from=${from}&to=${today}&by=${by}`)
    assert.equal(res.status, 200)
    assert.equal(res.headers.get('content-type'), 'text/csv; charset=utf-8')
    assert.equal(res.headers.get('content-disposition'), `attachment; filename="usage-${app.accountId}-${from}-${today}.csv"`)
    const lines = parseCsv(res.text)
    const seen = within(rows, from, today)
    assert.equal(
      lines.reduce((s, l) => s + Number(l.at(-2)), 0),
      total(seen, 'count'),
      `by=${by}: calls`,
    )
    assert.equal(
      lines.reduce((s, l) => s + Number(l.at(-1)), 0),
      total(seen, 'units'),
      `by=${by}: units`,
    )
    if (by === 'key') {
      assert.equal(res.text.split('\r\n')[0], '"keyId","keyName","group","count","units"')
      assert.ok(
        lines.some((l) => l[0] === otherKeyId && l[1] === '\'=HYPERLINK("http://evil.example")'),
        'a name a spreadsheet would run is quoted as text',
      )
    }
  }
  const defaults = await client.get(`${base}/usage.csv`)
  assert.equal(defaults.status, 200)
  assert.equal(
    parseCsv(defaults.text).reduce((s, l) => s + Number(l.at(-1)), 0),
    total(within(rows, utcDay(app.clock.now() - 29 * DAY), today), 'units'),
    'by day over the last 30 days by default',
  )
})

test('the usage CSV quotes every text field and guards every place a spreadsheet splitting on , ; or tab could start a formula', async (t) => {
  const app = await startApp(t)
  const names = [';=1+1', 'a,=1+1', 'x;@SUM(A1)', 'y; -2+3', '+3', '-4', 'plain "quoted";name']
  const rows: UsageRow[] = []
  const day = utcDay(app.clock.now())
  for (const name of names) {
    const key = await app.accounts.issueKey({ actor: SYSTEM }, app.accountId, { name })
    if (isFailure(key)) throw new Error(key.message)
    rows.push({ accountId: app.accountId, keyId: key.key.id, region: 'eu', day, group: 'totp', count: 1, units: 1 })
  }
  await app.store.usage.add(rows)
  const { client } = await signedInClient(app, { role: 'viewer' })
  const res = await client.get(`/portal/accounts/${app.accountId}/usage.csv?by=key`)
  assert.equal(res.status, 200)
  const lines = res.text.split('\r\n').slice(0, -1)
  assert.equal(lines[0], '"keyId","keyName","group","count","units"')
  for (const line of lines.slice(1)) {
    assert.match(line, /^"key_[^"]+","(?:[^"]|"")*","totp",1,1$/, 'text quoted, numbers not')
    // Excel in a ; locale splits on ; (a quote inside a field does not protect what follows), others on , or tab.
    for (const cell of line.split(/[,;\t]/)) assert.doesNotMatch(cell.replace(/^"/, ''), /^[ ]*[=+\-@]/, `${line}: a cell starts a formula`)
  }
  const parsed = parseCsv(res.text)
    .map((l) => l[1])
    .sort()
  assert.deepEqual(
    parsed,
    [";'=1+1", "a,'=1+1", "x;'@SUM(A1)", "y;' -2+3", "'+3", "'-4", 'plain "quoted";name'].sort(),
    'each name reads back, a quote before what would run',
  )
})

test('usage: viewers read it; members of another account and the signed-out do not; bad periods and dates are 400, not 500', async (t) => {
  const app = await startApp(t)
  await seedUsage(app)
  const base = `/portal/accounts/${app.accountId}`
  const { client: viewer } = await signedInClient(app, { role: 'viewer' })
  assert.equal((await viewer.get(`${base}/usage`)).status, 200)
  assert.equal((await viewer.get(`${base}/usage.csv?by=key`)).status, 200)

  const elsewhere = await app.accounts.createAccount({ actor: SYSTEM }, { name: 'elsewhere' })
  assert.ok(!isFailure(elsewhere))
  const { client: stranger } = await signedInClient(app, { accountId: elsewhere.id })
  for (const path of [`${base}/usage`, `${base}/usage/keys`, `${base}/usage.csv`, '/portal/accounts/acc_nosuch/usage'])
    assert.equal((await stranger.get(path)).status, 404, path)

  const signedOut = await new PortalClient(app.url).get(`${base}/usage`)
  assert.equal(signedOut.status, 303)
  assert.equal(signedOut.location, `/portal/sign-in?next=${encodeURIComponent(`${base}/usage`)}`)

  for (const query of ['days=31', 'days=abc', 'days=7&days=30', 'days=%2030', 'days=1e1']) {
    for (const path of ['usage', 'usage/keys']) {
      const res = await viewer.get(`${base}/${path}?${query}`)
      assert.equal(res.status, 400, query)
      assert.match(res.text, /role="alert">Choose a period of 7, 30, 90 days/)
    }
  }

  // The per-key report a page of KEYS_PER_PAGE keys at a time, most used first.
  const day = utcDay(app.clock.now())
  await app.store.usage.add(
    Array.from({ length: KEYS_PER_PAGE + 20 }, (_, i) => ({
      accountId: app.accountId,
      keyId: `key_gone${String(i).padStart(4, '0')}`,
      region: 'us' as const,
      day,
      group: 'totp' as const,
      count: 1000 + i,
      units: 1000 + i,
    })),
  )
  const first = await viewer.get(`${base}/usage/keys`)
  const firstRows = tableRows(first.text, /^Calls per key, last 30 days, most used first, 1 to 100 of 122$/)
  assert.equal(firstRows.length, KEYS_PER_PAGE)
  assert.deepEqual(firstRows[0]!.slice(0, 2), [`key_gone${String(KEYS_PER_PAGE + 19).padStart(4, '0')}`, n(1000 + KEYS_PER_PAGE + 19)])
  assert.doesNotMatch(first.text, /<tfoot>/, 'no total under a page of keys')
  const next = /href="([^"]+)" rel="next">Less used keys</.exec(first.text)?.[1]
  assert.equal(next, `${base}/usage/keys?days=30&amp;page=2`)
  const second = await viewer.get(unescapeHtml(next))
  assert.equal(tableRows(second.text, /1[01]1 to 122 of 122$/).length, 22)
  assert.match(second.text, /rel="prev">More used keys</)
  assert.doesNotMatch(second.text, /rel="next"/)
  for (const query of ['page=3', 'page=0', 'page=-1', 'page=x', 'page=1&page=2'])
    assert.equal((await viewer.get(`${base}/usage/keys?${query}`)).status, 400, query)
  for (const query of [
    'from=2026-13-01',
    'from=yesterday',
    'to=2026-02-30x',
    'by=month',
    'from=2026-05-01&to=2026-04-01',
    'from=2020-01-01&to=2026-01-01',
    'from=a&from=b',
    'by=day&by=key',
  ]) {
    const res = await viewer.get(`${base}/usage.csv?${query}`)
    assert.equal(res.status, 400, query)
    assert.match(res.headers.get('content-type') ?? '', /^text\/html/)
    assert.match(res.text, /role="alert"/)
  }
})

test("the audit page lists the account's events by whom, a page at a time, filtered by action; viewers read it, others get 404", async (t) => {
  const app = await startApp(t)
  const owner = await portalUser(app, { email: 'owner@example.com' })
  // Signed in first: the viewer's sign-in is an event of the account too (auth.ts), older than the changes below.
  const { client: viewer, email: viewerEmail } = await signedInClient(app, { role: 'viewer' })
  const as = { actor: { type: 'portal-user' as const, id: owner.user.id }, ip: '203.0.113.9' }
  // An operator acts as an owner of every account without being a member: shown by email too.
  const operator = await portalUser(app, { email: 'ops@example.com', operator: true, accountId: null })
  assert.ok(!isFailure(await app.accounts.setPlan({ actor: { type: 'portal-user', id: operator.user.id }, ip: '192.0.2.1' }, app.accountId, { quota: 1000 })))
  const keyIds: string[] = []
  for (let i = 0; i < 30; i++) {
    const issued = await app.accounts.issueKey(as, app.accountId, { name: `key ${i}` })
    assert.ok(!isFailure(issued))
    keyIds.push(issued.key.id)
  }
  for (const id of keyIds.slice(0, 25))
    assert.ok(!isFailure(await app.accounts.revokeKey({ actor: { type: 'admin-token', id: 'adm_ops' }, ip: '198.51.100.7' }, id)))
  assert.ok(isFailure(await app.accounts.revokeKey(as, keyIds[0]!)), 'a refused change leaves a failure event')
  // Another account's events never show here.
  const elsewhere = await app.accounts.createAccount({ actor: SYSTEM }, { name: 'elsewhere' })
  assert.ok(!isFailure(elsewhere))
  await app.accounts.issueKey(as, elsewhere.id, { name: 'not here' })

  const all: string[] = []
  let cursor: string | null = null
  do {
    const page = await app.store.audit.list({ accountId: app.accountId, limit: 500, ...(cursor === null ? {} : { cursor }) })
    all.push(...page.items.map((e) => e.action))
    cursor = page.next
  } while (cursor !== null)
  assert.ok(all.length > PAGE_SIZE)

  const base = `/portal/accounts/${app.accountId}/audit`
  const first = await viewer.get(base)
  assert.equal(first.status, 200)
  const rows = tableRows(first.text, /^Events, newest first$/)
  assert.equal(rows.length, PAGE_SIZE)
  const failed = rows.find((r) => r[2] === 'key.revoke' && r[4] === 'failure')
  assert.ok(failed, 'the refused revoke, newest')
  assert.deepEqual(rows[0]!.slice(1, 6), ['owner@example.com', 'key.revoke', `key ${keyIds[0]}`, 'failure', '203.0.113.9'])
  assert.match(rows[0]![6]!, /^reason=key key_\w+ is revoked already$/)
  assert.deepEqual(rows[1]!.slice(1, 6), ['admin-token:adm_ops', 'key.revoke', `key ${keyIds[24]}`, 'success', '198.51.100.7'])

  // Paging: every event once, in order, then no older link.
  const seen = [...rows]
  let next = /href="([^"]+)" rel="next">Older events</.exec(first.text)?.[1]
  while (next !== undefined) {
    const page = await viewer.get(unescapeHtml(next))
    assert.equal(page.status, 200)
    assert.match(page.text, /<a href="[^"]+\/audit">Newest events<\/a>/)
    seen.push(...tableRows(page.text, /^Events, older$/))
    next = /href="([^"]+)" rel="next">Older events</.exec(page.text)?.[1]
  }
  assert.deepEqual(
    seen.map((r) => r[2]),
    all,
  )
  assert.deepEqual(
    seen.filter((r) => r[2] === 'plan.set').map((r) => r.slice(1, 6)),
    [['ops@example.com', 'plan.set', `plan ${app.accountId}`, 'success', '192.0.2.1']],
  )
  assert.deepEqual(
    seen.filter((r) => r[2] === 'user.sign-in').map((r) => [r[1], r[4]]),
    [[viewerEmail, 'success']],
    "the viewer's sign-in, by their email",
  )

  // Filtered by action: only those, and every one of them.
  const creates = await viewer.get(`${base}?action=key.create`)
  const created = tableRows(creates.text, /key\.create events, newest first/)
  assert.equal(created.length, all.filter((a) => a === 'key.create').length)
  assert.ok(created.every((r) => r[2] === 'key.create' && r[1] === (r[3] === `key ${app.keyId}` ? 'system' : 'owner@example.com')))
  assert.match(creates.text, /<input id="action" name="action" type="text" list="actions" value="key.create"/)
  const none = await viewer.get(`${base}?action=plan.reset`)
  assert.match(none.text, /role="status">No plan.reset events\./)

  for (const query of ['action=%3Cscript%3E', 'action=a&action=b', 'cursor=evt_bad', `cursor=${'x'.repeat(300)}`]) {
    const res = await viewer.get(`${base}?${query}`)
    assert.equal(res.status, 400, query)
    assert.match(res.text, /role="alert"/)
  }
  const { client: stranger } = await signedInClient(app, { accountId: elsewhere.id })
  assert.equal((await stranger.get(base)).status, 404)
  assert.equal((await stranger.get(`/portal/accounts/${elsewhere.id}/audit`)).status, 200)
})
