/**
 * Managed-factor user IDs of every length the rule takes, 1 to 256 characters (issue 40, finding
 * 8), on SQLite and on PostgreSQL + Redis: Fastify's router refused a path parameter past 100
 * characters (its default `maxParamLength`) with a 400 PATH_INVALID about UTF-8, so IDs of 101 to
 * 256 characters, which the bulk import took, could never verify. Through HTTP: each boundary
 * (ASCII, multi-byte, percent-escaped, decomposed) is enrolled, activated and verified; every
 * `/totp/users/{userID}/…` route of the served document takes a 256-character ID; 257 is
 * USER_ID_INVALID naming the limit on every route; a path segment past the router's bound is
 * PATH_INVALID naming that bound; the admin API and the operator pages show the user; a
 * 200-character ID imported in bulk verifies.
 */
import { test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { request } from 'node:http'
import { codes, get, post, testClock } from '../../support/helper.ts'
import { startAdmin } from '../../support/admin-helper.ts'
import { signedInClient } from '../../support/portal-helper.ts'
import { createDatabase, redisEnv, skipUnless, type StoreEnv as Env } from '../../support/services.ts'
import { codeOf, enroll, path } from '../../support/factors.ts'
import { toBase32 } from '../../../src/totp/otp.ts'
import { MAX_USER_ID_PATH_LENGTH } from '../../../src/domain/user-ids.ts'

const T0 = Date.UTC(2026, 0, 1, 12, 0, 15)

/** The IDs the rule takes at and around its bounds, as [name, ID]. */
const ACCEPTED: [string, string][] = [
  ['1 character', 'a'],
  ['100 ASCII characters', 'b'.repeat(100)],
  ['101 ASCII characters', 'c'.repeat(101)],
  ['256 ASCII characters', 'd'.repeat(256)],
  // 4 bytes each in UTF-8: 3 072 characters once percent-escaped.
  ['256 four-byte characters', '\u{1F600}'.repeat(256)],
  ['256 two- and three-byte characters', 'ü€'.repeat(128)],
  // Characters that must be escaped in a path (space, %, /, ?, #): 256 characters, 512 escaped.
  ['256 characters that need percent-escapes', ' %/?#&+='.repeat(32)],
]
// 256 characters in NFC, 512 code points as sent (each é decomposed): the same user as its NFC spelling.
const NFC_256 = '\u00e9'.repeat(256)
const NFD_256 = 'e\u0301'.repeat(256)

/** raw sends a path exactly as written (no URL parser in between) and gives the status and body. */
function raw(url: string, target: string, headers: Record<string, string>, method = 'GET', body?: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const { hostname, port } = new URL(url)
    const req = request(
      { hostname, port, path: target, method, headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' } },
      (res) => {
        let text = ''
        res
          .setEncoding('utf8')
          .on('data', (d) => {
            text += d
          })
          .on('end', () => resolve({ status: res.statusCode!, text }))
      },
    )
    req.on('error', reject)
    req.end(body)
  })
}

const problems = (text: string) => {
  const body = (text === '' ? null : JSON.parse(text)) as unknown
  return Array.isArray(body) ? (body as { code: string; message: string }[]) : []
}

const stores: [string, Env, false | string][] = [
  ['sqlite', async () => ({}), false],
  ['postgres+redis', async (t) => ({ DATABASE_URL: await createDatabase(t), ...(await redisEnv(t)) }), skipUnless('TEST_DATABASE_URL', 'TEST_REDIS_URL')],
]

for (const [name, env, skip] of stores) {
  test(`${name}: user IDs of 1 to 256 characters work on every /totp/users/{userID}/… route; 257 is USER_ID_INVALID naming the limit`, {
    skip,
  }, async (t: TestContext) => {
    const a = await startAdmin(t, { PLAN_RATE: '0', ...(await env(t)) }, testClock(T0))
    const app = a.pub

    // Each boundary: created, activated with its first code, then verified with the next one; the list shows it under its own ID.
    for (const [what, id] of [...ACCEPTED, ['256 characters decomposed (512 code points)', NFD_256] as [string, string]]) {
      const f = await enroll(app, id)
      app.clock.advance(30_000)
      const verified = await post(app.url, path(id, '/verify'), app.key, { token: codeOf(f, app.clock.now()) })
      assert.equal(verified.status, 200, `${what}: ${await verified.clone().text()}`)
      const listed = await get(app.url, path(id, '/factors'), app.key)
      assert.equal(listed.status, 200, what)
      assert.equal(((await listed.json()) as { userID: string }).userID, id === NFD_256 ? NFC_256 : id, what)
    }
    // The decomposed spelling is the NFC user: one factor, reached by either.
    const nfc = (await (await get(app.url, path(NFC_256, '/factors'), app.key)).json()) as { factors: unknown[] }
    assert.equal(nfc.factors.length, 1)

    // Every route of the served document under /totp/users/{userID}: a 256-character ID (3 072 characters escaped) is never
    // refused for its length, and 257 ASCII characters are USER_ID_INVALID with the limit in the message.
    const doc = (await (await fetch(`${app.url}/openapi.json`)).json()) as { paths: Record<string, Record<string, unknown>> }
    const routes = Object.entries(doc.paths)
      .filter(([p]) => p.startsWith('/totp/users/{userID}'))
      .flatMap(([p, ops]) => Object.keys(ops).map((method) => [method.toUpperCase(), p] as const))
    assert.ok(routes.length >= 13, `${routes.length} routes`)
    const long = '\u{1F60E}'.repeat(256) // another user than the ones above: the sweep deletes it
    for (const [method, template] of routes) {
      const target = (id: string) => template.replace('{userID}', encodeURIComponent(id)).replace('{factorID}', 'fct_0000000000000000')
      const body = method === 'GET' || method === 'DELETE' ? undefined : '{}'
      const ok = await raw(app.url, target(long), { 'x-api-key': app.key }, method, body)
      assert.ok(ok.status < 500, `${method} ${template}: ${ok.status}`)
      const refused = problems(ok.text).map((p) => p.code)
      assert.ok(!refused.includes('PATH_INVALID') && !refused.includes('USER_ID_INVALID'), `${method} ${template} with 256 characters: ${ok.text}`)

      const over = await raw(app.url, target('e'.repeat(257)), { 'x-api-key': app.key }, method, body)
      assert.equal(over.status, 400, `${method} ${template} with 257: ${over.text}`)
      const found = problems(over.text).find((p) => p.code === 'USER_ID_INVALID')
      assert.ok(found !== undefined, `${method} ${template} with 257: ${over.text}`)
      assert.match(found.message, /at most 256 characters/)
    }

    // 257 characters of each kind, and an ID past the schema's bound on the work (1 025 code points): the same refusal.
    for (const id of ['f'.repeat(257), '\u{1F600}'.repeat(257), 'e\u0301'.repeat(257), 'g'.repeat(1025)]) {
      const res = await post(app.url, path(id, '/factors'), app.key, { applicationID: 'Acme' })
      assert.equal(res.status, 400, `${id.length} UTF-16 units`)
      assert.deepEqual(await codes(res), ['USER_ID_INVALID'])
    }
    // A segment past the router's bound (percent-escapes counted): PATH_INVALID naming the bound, not the UTF-8 message.
    const huge = raw(app.url, `/totp/users/${'h'.repeat(MAX_USER_ID_PATH_LENGTH + 1)}/factors`, { 'x-api-key': app.key })
    const tooLong = await huge
    assert.equal(tooLong.status, 400, tooLong.text)
    assert.deepEqual(
      problems(tooLong.text).map((p) => [p.code, p.message]),
      [
        [
          'PATH_INVALID',
          `The path is not valid: a segment is longer than ${MAX_USER_ID_PATH_LENGTH} characters, percent-escapes included (a user ID is at most 256 characters).`,
        ],
      ],
    )
    // A bad escape keeps its own reason.
    const badEscape = await raw(app.url, '/totp/users/%FF/factors', { 'x-api-key': app.key })
    assert.deepEqual(
      problems(badEscape.text).map((p) => [p.code, p.message]),
      [['PATH_INVALID', 'The path is not valid: its percent-escapes must encode UTF-8 text.']],
    )

    // The admin API: the 256-character user is shown, under the same rule.
    for (const [, id] of ACCEPTED) {
      const shown = await raw(a.url, `/admin/v1/accounts/${app.accountId}/totp-users/${encodeURIComponent(id)}`, {
        authorization: `Bearer ${a.read.secret}`,
      })
      assert.equal(shown.status, 200, shown.text)
      assert.equal((JSON.parse(shown.text) as { userID: string }).userID, id)
    }

    // The operator pages: the same users have their page.
    const { client: op } = await signedInClient(app, { operator: true, accountId: null })
    for (const [what, id] of ACCEPTED) {
      const page = await op.get(`/portal/operator/accounts/${app.accountId}/totp-users/${encodeURIComponent(id)}`)
      assert.equal(page.status, 200, what)
    }

    // The bulk import takes what the routes take, and nothing else: a 200-character and a 256-character ID go in and verify; 257 is refused.
    const imported = [
      { id: 'i'.repeat(200), secret: toBase32(randomBytes(20)) },
      { id: '\u{1F642}'.repeat(256), secret: toBase32(randomBytes(20)) },
    ]
    const csv = [...imported.map((u) => `${u.id},${u.secret},`), `${'j'.repeat(257)},${toBase32(randomBytes(20))},`].join('\n')
    const res = await fetch(`${a.url}/admin/v1/accounts/${app.accountId}/factors/import?applicationID=Acme`, {
      method: 'POST',
      headers: { authorization: `Bearer ${a.write.secret}`, 'content-type': 'text/csv' },
      body: `${csv}\n`,
    })
    const report = (await res.text())
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>)
    assert.deepEqual(
      report.map((r) => r.outcome ?? r.done),
      ['imported', 'imported', 'refused', true],
    )
    assert.equal(report[2]!.code, 'USER_ID_INVALID')
    app.clock.advance(30_000)
    for (const u of imported) {
      const token = codeOf({ secretKey: u.secret, algorithm: 'SHA1', tokenLength: 6, tokenValidity: 30 }, app.clock.now())
      const verified = await post(app.url, path(u.id, '/verify'), app.key, { token })
      assert.equal(verified.status, 200, `${[...u.id].length} characters: ${await verified.clone().text()}`)
    }
  })
}
