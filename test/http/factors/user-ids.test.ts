/**
 * Managed-factor user IDs through every door (the API, the admin API, the operator pages; the
 * CLI's are in cli-totp-users.test.ts), on SQLite and on PostgreSQL + Redis: `.` and `..` are
 * refused however they are spelled in the path, bidi and zero-width characters too, with the
 * catalogue's 400; `é` precomposed and decomposed is one user; a user stored before IDs were
 * normalised keeps working under the exact form it was created with.
 */
import { test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { request } from 'node:http'
import { codes, get, post, testClock } from '../../support/helper.ts'
import { startAdmin } from '../../support/admin-helper.ts'
import { signedInClient } from '../../support/portal-helper.ts'
import { createDatabase, redisEnv, skipUnless, type StoreEnv as Env } from '../../support/services.ts'
import { codeOf, createFactor, enroll, path } from '../../support/factors.ts'
import { resolveKeyring } from '../../../src/config/encryption.ts'
import { newSecret } from '../../../src/totp/otp.ts'
import { sealContext } from '../../../src/totp/factors/core.ts'

const T0 = Date.UTC(2026, 0, 1, 12, 0, 15)
const NFC = 'ren\u00e9'
const NFD = 'rene\u0301'

/** raw sends the path as written (fetch and URL resolve `..` and `%2E%2E` away). */
function raw(url: string, path: string, headers: Record<string, string>, method = 'GET', body?: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const { hostname, port } = new URL(url)
    const req = request({ hostname, port, path, method, headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' } }, (res) => {
      let text = ''
      res
        .setEncoding('utf8')
        .on('data', (d) => {
          text += d
        })
        .on('end', () => resolve({ status: res.statusCode!, text }))
    })
    req.on('error', reject)
    req.end(body)
  })
}

const stores: [string, Env, false | string][] = [
  ['sqlite', async () => ({}), false],
  ['postgres+redis', async (t) => ({ DATABASE_URL: await createDatabase(t), ...(await redisEnv(t)) }), skipUnless('TEST_DATABASE_URL', 'TEST_REDIS_URL')],
]

for (const [name, env, skip] of stores) {
  test(`${name}: user IDs: dot segments, bidi and zero-width characters refused at every door; NFC and NFD are one user; users stored before keep working`, {
    skip,
  }, async (t: TestContext) => {
    const a = await startAdmin(t, { PLAN_RATE: '0', ...(await env(t)) }, testClock(T0))
    const app = a.pub

    // `.` and `..`, raw and escaped in any case: 400 USER_ID_INVALID, and no user made.
    for (const segment of ['..', '.', '%2E%2E', '%2e%2e', '%2E.', '.%2e', '%2E', '%2e']) {
      for (const [method, rest] of [
        ['POST', '/factors'],
        ['GET', '/factors'],
        ['POST', '/verify'],
      ] as const) {
        const res = await raw(
          app.url,
          `/totp/users/${segment}${rest}`,
          { 'x-api-key': app.key },
          method,
          method === 'POST' ? '{"applicationID":"Acme"}' : undefined,
        )
        assert.equal(res.status, 400, `${method} ${segment}${rest}: ${res.text}`)
        assert.deepEqual(
          (JSON.parse(res.text) as { code: string }[]).map((p) => p.code),
          ['USER_ID_INVALID'],
          `${method} ${segment}${rest}`,
        )
      }
    }
    // Format characters (bidi override and isolate, zero-width space, BOM) and other controls.
    for (const id of ['evil\u202egnp.exe', 'zero\u200bwidth', 'iso\u2066late\u2069', '\ufeffbom', 'c1\u0085ctl', 'line\u2028sep', '\u202e']) {
      const res = await post(app.url, path(id, '/factors'), app.key, { applicationID: 'Acme' })
      assert.equal(res.status, 400, JSON.stringify(id))
      assert.deepEqual(await codes(res), ['USER_ID_INVALID'], JSON.stringify(id))
    }
    const listed = (await (
      await fetch(`${a.url}/admin/v1/accounts/${app.accountId}/totp-users`, { headers: { authorization: `Bearer ${a.read.secret}` } })
    ).json()) as { items: unknown[] }
    assert.deepEqual(listed.items, [], 'no user was made')

    // Precomposed and decomposed: one user, stored and shown in NFC, reached by either spelling.
    const f = await enroll(app, NFD)
    assert.match(f.otpURL, new RegExp(`^otpauth://totp/Acme:${encodeURIComponent(NFC)}\\?`), 'the label is NFC')
    const viaNfc = await get(app.url, path(NFC, '/factors'), app.key)
    assert.equal(viaNfc.status, 200)
    const body = (await viaNfc.json()) as { userID: string; factors: { factorID: string }[] }
    assert.equal(body.userID, NFC)
    assert.deepEqual(
      body.factors.map((x) => x.factorID),
      [f.factorID],
    )
    app.clock.advance(30_000)
    assert.equal((await post(app.url, path(NFC, '/verify'), app.key, { token: codeOf(f, app.clock.now()) })).status, 200)
    const second = await createFactor(app, NFC)
    assert.equal(
      ((await (await get(app.url, path(NFD, '/factors'), app.key)).json()) as { factors: unknown[] }).factors.length,
      2,
      `${second.factorID}: the same user`,
    )

    // The admin API: the same rule, the same user.
    const admin = (id: string) => raw(a.url, `/admin/v1/accounts/${app.accountId}/totp-users/${id}`, { authorization: `Bearer ${a.read.secret}` })
    const shown = await admin(encodeURIComponent(NFD))
    assert.equal(shown.status, 200)
    assert.equal((JSON.parse(shown.text) as { userID: string }).userID, NFC)
    for (const id of ['..', '%2E%2E', '%2e', encodeURIComponent('evil\u202egnp'), encodeURIComponent('a\u200bb')]) {
      const res = await admin(id)
      assert.equal(res.status, 400, id)
      assert.deepEqual(
        (JSON.parse(res.text) as { code: string }[]).map((p) => p.code),
        ['FIELD_INVALID'],
        id,
      )
    }
    const users = (await (
      await fetch(`${a.url}/admin/v1/accounts/${app.accountId}/totp-users`, { headers: { authorization: `Bearer ${a.read.secret}` } })
    ).json()) as { items: { userID: string }[] }
    assert.deepEqual(
      users.items.map((u) => u.userID),
      [NFC],
      'one user',
    )

    // Users stored before the rule (an NFD ID, and `..`): still reached under their exact form.
    const keyring = resolveKeyring(app.config)
    const iso = new Date(app.clock.now()).toISOString()
    for (const [userId, id] of [
      ['leg\u0061\u0301cy', 'fct_00000000000000a1'],
      ['..', 'fct_00000000000000a2'],
    ] as const) {
      const secret = newSecret()
      assert.equal(
        await app.store.factors.create(
          {
            id,
            type: 'totp',
            accountId: app.accountId,
            userId,
            applicationId: 'Acme',
            label: null,
            profile: 'universal',
            status: 'pending',
            algorithm: 'SHA1',
            digits: 6,
            period: 30,
            drift: 0,
            sealed: keyring.seal(secret, sealContext(app.accountId, userId, id)),
            keyVersion: keyring.active,
            createdAt: iso,
            expiresAt: new Date(app.clock.now() + 600_000).toISOString(),
            activatedAt: null,
          },
          10,
          1_000_000,
          iso,
          { actor: 'system', action: 'factor.created', accountId: app.accountId, ip: null, outcome: 'success', target: { type: 'factor', id }, detail: {} },
        ),
        'created',
      )
    }
    const legacy = await get(app.url, path('leg\u0061\u0301cy', '/factors'), app.key)
    assert.equal(legacy.status, 200)
    assert.equal(((await legacy.json()) as { userID: string }).userID, 'leg\u0061\u0301cy', 'its stored form')
    const dots = await raw(app.url, '/totp/users/%2E%2E/factors', { 'x-api-key': app.key })
    assert.equal(dots.status, 200, dots.text)

    // The operator pages: the same user by either spelling; refused IDs are 404; `..` is listed without a link that would lead elsewhere.
    const { client: op } = await signedInClient(app, { operator: true, accountId: null })
    const base = `/portal/operator/accounts/${app.accountId}/totp-users`
    const page = await op.get(`${base}/${encodeURIComponent(NFD)}`)
    assert.equal(page.status, 200)
    assert.match(page.text, new RegExp(`TOTP user ${NFC}`))
    for (const id of ['evil\u202egnp', 'a\u200bb', 'x\u2066y'])
      assert.equal((await op.get(`${base}/${encodeURIComponent(id)}`)).status, 404, JSON.stringify(id))
    const list = await op.get(base)
    assert.ok(list.text.includes(`<a href="${base}/${encodeURIComponent(NFC)}">${NFC}</a>`), 'NFC user linked')
    assert.doesNotMatch(list.text, /href="[^"]*\/totp-users\/\.\."/, 'no link to ..')
    assert.match(list.text, /<td>\.\. <span class="hint">\(no page/)
  })
}
