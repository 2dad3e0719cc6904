/**
 * Bulk import, line by line (issue 40, finding 2): a file of 1 000 lines, hostile ones among
 * them (a line past the 8 KiB bound at line 2 and a 100 KB one, an unclosed quote, a quote inside
 * a field, text after a closing quote, too few and too many fields, a NUL, a byte order mark past
 * the file's start, bytes that are not UTF-8, a stray CR, CRLF and LF mixed, blank lines, a user
 * with more factors than FACTOR_MAX_PER_USER allows), through the admin API on every store and
 * through the CLI. Each line is reported exactly once, in order, with its number and a catalogue
 * code; every other line goes in (and verifies); the summary adds up; the CLI exits 3 when a line
 * is refused and 0 when every line went in or was there already. Before, csv-parse read nothing
 * after the long line (`lines:3`) and reported an unreadable line twice.
 */
import { test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { post, startApp, tempDir, testClock } from '../../support/helper.ts'
import { admin, startAdmin } from '../../support/admin-helper.ts'
import { createDatabase, redisEnv, skipUnless, type StoreEnv as Env } from '../../support/services.ts'
import { codeOf, path } from '../../support/factors.ts'
import { toBase32 } from '../../../src/totp/otp.ts'
import { ERROR_CODES } from '../../../src/errors/catalogue.ts'

const T0 = Date.UTC(2026, 0, 1, 12, 0, 15)
const LINES = 1000
const MAX_PER_USER = 10

interface File {
  /** The bytes of the file. */
  readonly body: Buffer
  /** Each reported line's expected outcome: `imported`, or the refusal's code. */
  readonly expected: Map<number, string>
  /** The users and secrets of lines expected to go in (a sample is verified). */
  readonly good: Map<number, { user: string; secret: string }>
  /** The user with more lines than FACTOR_MAX_PER_USER, and their lines. */
  readonly crowded: { user: string; lines: number[] }
}

const secret = () => toBase32(randomBytes(20))

/**
 * hostileFile: a byte order mark and a header, then 1 000 lines (numbers 2 to 1001) of users with
 * bare secrets, ends alternating LF and CRLF, the last without one; the hostile lines replace
 * good ones at fixed numbers.
 */
function hostileFile(tag: string): File {
  const expected = new Map<number, string>()
  const good = new Map<number, { user: string; secret: string }>()
  const lines: Buffer[] = [Buffer.from('\ufeffuserID,secret,label')]
  const hostile = new Map<number, [Buffer | string, string | null]>([
    [2, [`${tag}-2,${secret()},${'x'.repeat(9000)}`, 'CSV_LINE_TOO_LONG']],
    [10, [`"${tag}-10,${secret()},unclosed`, 'CSV_LINE_INVALID']],
    [20, [`${tag}"20,${secret()},`, 'CSV_LINE_INVALID']],
    [25, [`"${tag}-25"x,${secret()},`, 'CSV_LINE_INVALID']],
    [30, [`${tag}-30,${secret()},label,extra`, 'CSV_LINE_INVALID']],
    [40, [`${tag}-40`, 'CSV_LINE_INVALID']],
    [50, [`${tag}\u0000-50,${secret()},`, 'CSV_LINE_INVALID']],
    [60, [`\ufeff${tag}-60,${secret()},`, 'CSV_LINE_INVALID']],
    [70, [Buffer.concat([Buffer.from(`${tag}-70`), Buffer.from([0xff, 0xfe]), Buffer.from(`,${secret()},`)]), 'CSV_LINE_INVALID']],
    [80, [`${tag}-80,${secret()}\r,label`, 'CSV_LINE_INVALID']],
    [90, [`${'u'.repeat(257)},${secret()},`, 'USER_ID_INVALID']],
    [100, [`${tag}-100,${secret()},${'y'.repeat(100_000)}`, 'CSV_LINE_TOO_LONG']],
    [110, [`${tag}-110,${secret()},${'z'.repeat(65)}`, 'LABEL_INVALID']],
    [120, [`${tag}-120,not base32!,`, 'SECRET_INVALID']],
    [130, ['', null]],
    [131, [' \t ', null]],
  ])
  const crowded = { user: `${tag}-crowded`, lines: Array.from({ length: 15 }, (_, i) => 200 + i) }
  for (let n = 2; n <= LINES + 1; n++) {
    const bad = hostile.get(n)
    if (bad !== undefined) {
      lines.push(typeof bad[0] === 'string' ? Buffer.from(bad[0]) : bad[0])
      if (bad[1] !== null) expected.set(n, bad[1])
      continue
    }
    const user = crowded.lines.includes(n) ? crowded.user : n % 7 === 0 ? `${tag} ${n}, "quoted"` : `${tag}-${n}@example.com`
    const s = secret()
    lines.push(Buffer.from(`"${user.replaceAll('"', '""')}",${s},Phone ${n}`))
    expected.set(n, 'imported')
    if (!crowded.lines.includes(n)) good.set(n, { user, secret: s })
  }
  const parts: Buffer[] = []
  lines.forEach((l, i) => {
    parts.push(l)
    if (i < lines.length - 1) parts.push(Buffer.from(i % 2 === 0 ? '\n' : '\r\n'))
  })
  return { body: Buffer.concat(parts), expected, good, crowded }
}

type Item = Record<string, unknown> & { line?: number; outcome?: string; code?: string; message?: string; done?: boolean }

/** accountFor checks that the report names every non-blank line once, in order, with its expected outcome, and that the summary adds up. */
function accountFor(file: File, report: Item[], exists = false): void {
  const summary = report.at(-1)!
  const items = report.slice(0, -1)
  assert.deepEqual(
    items.map((r) => r.line),
    [...file.expected.keys()],
    'every line but the blank ones and the header, once, in order',
  )
  const crowdedLimited = items.filter((r) => file.crowded.lines.includes(r.line!) && r.code === 'FACTOR_LIMIT')
  for (const r of items) {
    const want = file.expected.get(r.line!)!
    if (file.crowded.lines.includes(r.line!)) continue
    if (want === 'imported') assert.equal(r.outcome, exists ? 'exists' : 'imported', `line ${r.line}: ${JSON.stringify(r)}`)
    else {
      assert.equal(r.outcome, 'refused', `line ${r.line}`)
      assert.equal(r.code, want, `line ${r.line}: ${r.message}`)
      assert.ok(ERROR_CODES.includes(r.code as never), `${r.code} is a catalogue code`)
      assert.equal(typeof r.message, 'string')
    }
  }
  // The crowded user: FACTOR_MAX_PER_USER of the 15 went in (or were there), the rest are FACTOR_LIMIT, eight lines in flight at once.
  assert.equal(crowdedLimited.length, file.crowded.lines.length - MAX_PER_USER, 'the per-user cap holds under the in-flight lines')
  const counts = { imported: 0, exists: 0, refused: 0, skipped: 0 }
  for (const r of items) counts[r.outcome as keyof typeof counts]++
  assert.deepEqual(summary, { done: true, lines: items.length, ...counts, stopped: null })
  assert.equal(summary.lines, counts.imported + counts.exists + counts.refused + counts.skipped)
  const refusals = [...file.expected.values()].filter((v) => v !== 'imported').length + crowdedLimited.length
  assert.equal(counts.refused, refusals)
}

const ndjson = (text: string) =>
  text
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Item)

const stores: [string, Env, false | string][] = [
  ['sqlite', async () => ({}), false],
  ['postgres', async (t) => ({ DATABASE_URL: await createDatabase(t) }), skipUnless('TEST_DATABASE_URL')],
  ['sqlite+redis', redisEnv, skipUnless('TEST_REDIS_URL')],
  ['postgres+redis', async (t) => ({ DATABASE_URL: await createDatabase(t), ...(await redisEnv(t)) }), skipUnless('TEST_DATABASE_URL', 'TEST_REDIS_URL')],
]

for (const [name, env, skip] of stores) {
  test(`${name}: the admin API's import reports each of 1 000 lines once, hostile ones refused alone, the rest imported`, {
    skip,
  }, async (t: TestContext) => {
    const a = await startAdmin(t, { PLAN_RATE: '0', ...(await env(t)) }, testClock(T0))
    const file = hostileFile('api')
    const send = async () => {
      const res = await fetch(`${a.url}/admin/v1/accounts/${a.pub.accountId}/factors/import?applicationID=Acme`, {
        method: 'POST',
        headers: { authorization: `Bearer ${a.write.secret}`, 'content-type': 'text/csv' },
        body: new Uint8Array(file.body),
      })
      assert.equal(res.status, 200)
      return ndjson(await res.text())
    }
    const report = await send()
    accountFor(file, report)
    // The line past the bound is the brief's: 9 000 bytes of label at line 2, and every line after it went in.
    assert.deepEqual(report[0], {
      line: 2,
      userID: null,
      outcome: 'refused',
      code: 'CSV_LINE_TOO_LONG',
      message: 'The line is longer than 8192 bytes: it was not read.',
    })
    // No message quotes the line (a secret could be in it).
    for (const r of report.filter((x) => x.outcome === 'refused')) assert.doesNotMatch(String(r.message), /[A-Z2-7]{32}/)

    // What went in verifies: the lines next to the hostile ones and the last (no line break after it).
    a.clock.advance(30_000)
    for (const n of [3, 9, 11, 49, 51, 61, 71, 81, 99, 101, 1001]) {
      const u = file.good.get(n)!
      const token = codeOf({ secretKey: u.secret, algorithm: 'SHA1', tokenLength: 6, tokenValidity: 30 }, a.clock.now())
      const res = await post(a.pub.url, path(u.user, '/verify'), a.pub.key, { token })
      assert.equal(res.status, 200, `line ${n}: ${await res.clone().text()}`)
    }
    // The crowded user has the most factors a user may have, not one more.
    const crowded = await fetch(`${a.url}/admin/v1/accounts/${a.pub.accountId}/totp-users/${encodeURIComponent(file.crowded.user)}`, {
      headers: { authorization: `Bearer ${a.read.secret}` },
    })
    assert.equal(((await crowded.json()) as { factors: unknown[] }).factors.length, MAX_PER_USER)

    // The same file again: what went in is there already, the same lines refused, nothing made twice.
    accountFor(file, await send(), true)
  })
}

test('the CLI imports the same file: each line reported once, exit 3 when a line is refused or the file is cut at IMPORT_MAX_BYTES, 0 when every line went in or was there', async (t) => {
  const dataDir = tempDir(t)
  const app = await startApp(t, { DATA_DIR: dataDir, PLAN_RATE: '0' }, testClock(T0))
  const file = hostileFile('cli')
  const hostile = join(dataDir, 'hostile.csv')
  writeFileSync(hostile, file.body)
  const cli = (csv: string, ...more: string[]) =>
    admin(dataDir, ['totp-user', 'import', '--account', app.accountId, '--file', csv, '--application', 'Acme', ...more])

  const first = await cli(hostile, '--json')
  assert.equal(first.code, 3, first.stderr)
  accountFor(file, ndjson(first.stdout))
  // Without --json: each refused line named, and the counts.
  const again = await cli(hostile)
  assert.equal(again.code, 3)
  const refusedLines = again.stdout.split('\n').filter((l) => l.includes('refused ('))
  assert.match(again.stdout, /^line 2: refused \(CSV_LINE_TOO_LONG\)/m)
  const refusals = [...file.expected.values()].filter((v) => v !== 'imported').length + file.crowded.lines.length - MAX_PER_USER
  const total = file.expected.size
  assert.equal(total, LINES - 2, 'the two blank lines are not reported')
  assert.equal(refusedLines.length, refusals)
  assert.match(again.stdout, new RegExp(`^${total} line\\(s\\): 0 imported, ${total - refusals} there already, ${refusals} refused, 0 skipped$`, 'm'))

  // A clean file: 0 when every line went in, and 0 again when every line was there already.
  const clean = join(dataDir, 'clean.csv')
  const users = Array.from({ length: 20 }, (_, i) => ({ user: `clean-${i}`, secret: secret() }))
  writeFileSync(clean, `${users.map((u) => `${u.user},${u.secret},`).join('\r\n')}\r\n`)
  const fresh = await cli(clean)
  assert.equal(fresh.code, 0, fresh.stdout + fresh.stderr)
  assert.match(fresh.stdout, /20 line\(s\): 20 imported, 0 there already, 0 refused, 0 skipped/)
  const repeat = await cli(clean)
  assert.equal(repeat.code, 0)
  assert.match(repeat.stdout, /20 line\(s\): 0 imported, 20 there already, 0 refused/)
  // A file past IMPORT_MAX_BYTES: every whole line within the bound is reported, the summary says where it stopped, and the exit is 3.
  const big = join(dataDir, 'big.csv')
  const bigLines = Array.from({ length: 60 }, (_, i) => `big-${i},${secret()},`)
  writeFileSync(big, `${bigLines.join('\n')}\n`)
  const within =
    Buffer.from(`${bigLines.join('\n')}\n`)
      .subarray(0, 1024)
      .toString()
      .split('\n').length - 1
  const cut = await admin(dataDir, ['totp-user', 'import', '--account', app.accountId, '--file', big, '--application', 'Acme', '--json'], {
    IMPORT_MAX_BYTES: '1024',
  })
  assert.equal(cut.code, 3, cut.stderr)
  const cutReport = ndjson(cut.stdout)
  assert.deepEqual(
    cutReport.slice(0, -1).map((r) => [r.line, r.outcome]),
    Array.from({ length: within }, (_, i) => [i + 1, 'imported']),
  )
  assert.deepEqual(cutReport.at(-1), {
    done: true,
    lines: within,
    imported: within,
    exists: 0,
    refused: 0,
    skipped: 0,
    stopped: 'the file is larger than 1024 bytes: lines after the last reported were not read',
  })

  // A file that is not there is an error (1), not an import of nothing.
  const missing = await cli(join(dataDir, 'none.csv'))
  assert.equal(missing.code, 1)
  assert.match(missing.stderr, /^error: .*ENOENT/)

  // What the CLI imported verifies.
  app.clock.advance(30_000)
  for (const u of [file.good.get(3)!, file.good.get(1001)!, users[19]!]) {
    const token = codeOf({ secretKey: u.secret, algorithm: 'SHA1', tokenLength: 6, tokenValidity: 30 }, app.clock.now())
    const res = await post(app.url, path(u.user, '/verify'), app.key, { token })
    assert.equal(res.status, 200, await res.clone().text())
  }
})
