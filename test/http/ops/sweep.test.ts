/**
 * The edge sweep: every route, malformed bodies of every content type it might be sent.
 * No answer is a 5xx, and every answer is in a documented shape: a catalogue list
 * (`[{"type":"Error","code","message"}]`, status as the catalogue gives it) or a gateway
 * message (`{"message"}`), or the route's success.
 */
import { SYSTEM } from '../../../src/domain/accounts.ts'
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { catalogue, type ErrorCode } from '../../../src/errors/catalogue.ts'
import { startApp, testClock, type Running } from '../../support/helper.ts'

const SECRET = 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP'

/** multipart builds a multipart/form-data body by hand, so that it can be broken on purpose. */
function multipart(boundary: string, parts: [string, string][], end = true): Buffer {
  const text = parts.map(([name, value]) => `--${boundary}\r\ncontent-disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`).join('')
  return Buffer.from(text + (end ? `--${boundary}--\r\n` : ''), 'latin1')
}

const ct = {
  json: 'application/json',
  form: 'application/x-www-form-urlencoded',
  multipart: 'multipart/form-data; boundary=XyZ',
}

/** Malformed or hostile bodies: [label, content-type, body]. */
const BODIES: [string, string | undefined, string | Buffer][] = [
  ['json: empty', ct.json, ''],
  ['json: open brace', ct.json, '{'],
  ['json: cut short', ct.json, '{"secret":"JBSW'],
  ['json: null', ct.json, 'null'],
  ['json: array', ct.json, '[1,2]'],
  ['json: string', ct.json, '"text"'],
  ['json: number', ct.json, '1e999'],
  ['json: lone surrogates', ct.json, '{"userID":"\\ud800","applicationID":"\\udfff","data":"a\\ud800b","secret":"\\ud800","token":"\\ud800"}'],
  ['json: not UTF-8', ct.json, Buffer.from([0x7b, 0x22, 0x64, 0x61, 0x74, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d])],
  ['json: __proto__', ct.json, '{"__proto__":{"admin":true},"data":"x"}'],
  ['json: constructor.prototype', ct.json, '{"constructor":{"prototype":{"x":1}}}'],
  ['json: nested deep', ct.json, `${'['.repeat(4000)}${']'.repeat(4000)}`],
  ['json: objects as fields', ct.json, '{"userID":{},"applicationID":[],"data":{"a":1},"secret":[1],"token":{}}'],
  ['json: BOM', ct.json, '\ufeff{"data":"x"}'],
  ['form: lone surrogate escapes', ct.form, 'userID=%ED%A0%80&applicationID=a&data=%ED%A0%80&secret=%ED%A0%80&token=%ED%A0%80'],
  ['form: raw bytes not UTF-8', ct.form, Buffer.from('userID=\xff\xfe&applicationID=\xc3&data=\xe9', 'latin1')],
  ['form: broken escapes', ct.form, 'userID=%&applicationID=%zz&data=%E2%82&secret=%'],
  ['form: separators only', ct.form, '&&&===&'],
  ['form: repeated fields', ct.form, `secret=${SECRET}&secret=${SECRET}&token=1&token=2&data=a&data=b&userID=a&userID=b`],
  ['form: many fields', ct.form, Array.from({ length: 500 }, (_, i) => `f${i}=${i}`).join('&')],
  ['form: __proto__', ct.form, '__proto__=x&constructor=y&hasOwnProperty=z'],
  ['multipart: no boundary', 'multipart/form-data', 'xx'],
  ['multipart: empty boundary', 'multipart/form-data; boundary=', 'xx'],
  ['multipart: garbage', ct.multipart, 'garbage garbage garbage'],
  ['multipart: empty', ct.multipart, ''],
  ['multipart: part never closed', ct.multipart, multipart('XyZ', [['data', 'hello']], false).subarray(0, 60)],
  ['multipart: no end boundary', ct.multipart, multipart('XyZ', [['data', 'hello']], false)],
  ['multipart: other boundary', ct.multipart, multipart('Other', [['data', 'hello']])],
  [
    'multipart: lone surrogate bytes',
    ct.multipart,
    multipart('XyZ', [
      ['userID', '\xed\xa0\x80'],
      ['applicationID', 'a'],
      ['data', '\xed\xa0\x80'],
      ['secret', SECRET],
      ['token', '\xff'],
    ]),
  ],
  ['multipart: part without a name', ct.multipart, Buffer.from('--XyZ\r\ncontent-disposition: form-data\r\n\r\nv\r\n--XyZ--\r\n')],
  ['multipart: no headers', ct.multipart, Buffer.from('--XyZ\r\n\r\nv\r\n--XyZ--\r\n')],
  [
    'multipart: many parts',
    ct.multipart,
    multipart(
      'XyZ',
      Array.from({ length: 100 }, (_, i) => [`f${i}`, 'v'] as [string, string]),
    ),
  ],
  ['multipart: long header line', ct.multipart, Buffer.from(`--XyZ\r\ncontent-disposition: form-data; name="${'n'.repeat(12000)}"\r\n\r\nv\r\n--XyZ--\r\n`)],
  ['other: text/plain', 'text/plain', 'data=x'],
  ['other: xml', 'application/xml', '<data>x</data>'],
  ['other: no content-type', undefined, 'data=x'],
  ['other: content-type with odd parameters', 'application/json; charset=ebcdic; x="', '{"data":"x"}'],
  ['other: too large', ct.form, `data=${'x'.repeat(20000)}`],
]

const ROUTES = [
  '/totp/generateQRCode',
  '/totp/onboardUser',
  '/totp/getOTP',
  '/totp/verifyOTP',
  '/totp/ping',
  '/converter/generateImage',
  '/converter/generatePostscript',
  '/healthz',
  '/nope',
]

function assertShape(status: number, text: string, what: string): void {
  assert.ok(status < 500, `${what}: ${status} ${text.slice(0, 200)}`)
  if (status < 300) return
  const body = JSON.parse(text) as unknown
  if (Array.isArray(body)) {
    assert.ok(body.length > 0, what)
    for (const e of body as { type: string; code: ErrorCode; message: string }[]) {
      assert.deepEqual(Object.keys(e), ['type', 'code', 'message'], what)
      assert.equal(e.type, 'Error', what)
      assert.ok(e.code in catalogue, `${what}: ${e.code} is in the catalogue`)
      assert.doesNotMatch(e.message, /\{\w+\}/, `${what}: ${e.code}'s placeholders are filled`)
    }
    assert.equal(status, catalogue[(body as { code: ErrorCode }[])[0]!.code].status, `${what}: status of ${text}`)
  } else {
    assert.deepEqual(Object.keys(body as object), ['message'], `${what}: ${text}`)
  }
}

async function sweep(app: Running, routes: readonly string[]): Promise<Map<string, number>> {
  const seen = new Map<string, number>()
  for (const path of routes) {
    for (const [label, type, body] of BODIES) {
      for (const method of ['POST', 'PUT']) {
        const res = await fetch(app.url + path, {
          method,
          body: typeof body === 'string' ? body : new Uint8Array(body),
          headers: { 'x-api-key': app.key, ...(type === undefined ? {} : { 'content-type': type }) },
        })
        const text = await res.text()
        assertShape(res.status, text, `${method} ${path} ${label}`)
        seen.set(`${res.status}`, (seen.get(`${res.status}`) ?? 0) + 1)
      }
    }
  }
  return seen
}

test('sweep: malformed bodies of every type on every route give a 4xx in a documented shape, never a 5xx', async (t) => {
  const app = await startApp(t, { BODY_LIMIT_BYTES: '16384', PLAN_RATE: '0' }, testClock(Date.UTC(2026, 0, 1)))
  const seen = await sweep(app, ROUTES)
  assert.ok((seen.get('400') ?? 0) > 50, `mostly 400s: ${JSON.stringify([...seen])}`)
  // The node still answers afterwards.
  const ping = await fetch(`${app.url}/totp/ping`, { headers: { 'x-api-key': app.key } })
  assert.equal(ping.status, 200)
})

test('sweep: outside eu, the converter routes answer the eu-only 404 whatever the body', async (t) => {
  const app = await startApp(t, { REGION: 'us', PLAN_RATE: '0' })
  await sweep(app, ['/converter/generateImage', '/converter/generatePostscript'])
})

test('sweep: the managed-factor routes, with hostile bodies and hostile user and factor ids, never a 5xx', async (t) => {
  const app = await startApp(t, { BODY_LIMIT_BYTES: '16384', PLAN_RATE: '0', OTP_MAX_FAILURES: '100' }, testClock(Date.UTC(2026, 0, 1)))
  const created = await fetch(`${app.url}/totp/users/u1/factors`, {
    method: 'POST',
    headers: { 'x-api-key': app.key, 'content-type': ct.form },
    body: 'applicationID=Acme',
  })
  assert.equal(created.status, 201)
  const { factorID } = (await created.json()) as { factorID: string }
  // Passkeys set up, so that what gets past validation reaches the ceremonies.
  await app.factors.updateSettings({ actor: SYSTEM }, app.accountId, { rpId: 'localhost', origins: ['http://localhost:3000'] })
  await sweep(app, [
    '/totp/users/u1/factors',
    '/totp/users/u1/factors/import',
    `/totp/users/u1/factors/${factorID}/activate`,
    `/totp/users/u1/factors/${factorID}/resync`,
    '/totp/users/u1/verify',
    '/totp/users/u1/recovery-codes',
    '/totp/users/u1/recover',
    '/totp/users/u1/passkeys/registration/options',
    '/totp/users/u1/passkeys/registration',
    '/totp/users/u1/passkeys/authentication/options',
    '/totp/users/u1/passkeys/authentication',
    '/totp/passkeys/authentication/options',
    '/totp/passkeys/authentication',
  ])
  // Idempotency-Key headers that are not keys: a 400, never a 5xx, nothing made.
  for (const key of ['', ' ', 'x'.repeat(256), 'caf\u00e9', '"', 'a\tb']) {
    const res = await fetch(`${app.url}/totp/users/u1/factors`, {
      method: 'POST',
      headers: { 'x-api-key': app.key, 'content-type': ct.form, 'idempotency-key': key },
      body: 'applicationID=Acme',
    })
    const text = await res.text()
    assertShape(res.status, text, `Idempotency-Key ${JSON.stringify(key).slice(0, 20)}`)
    assert.ok(
      res.status === 400 || (key === '"' && res.status === 201) || res.status === 409,
      `${JSON.stringify(key).slice(0, 20)}: ${res.status} ${text.slice(0, 100)}`,
    )
  }
  // Ids that are not text, or not ids (a 4xx), and odd ones that are (any answer but a 5xx).
  const bad = new Set(['%ED%A0%80', '%zz', '%', '%FF%FE', 'a%3Ab', '%20', 'x'.repeat(300), '%00', 'a%0Ab', '%7F'])
  const users = [...bad, '..', 'u1%2F..%2Fu2', '%C3%A9l%C3%A8ve', '%F0%9F%94%91']
  const factors = ['%ED%A0%80', '%zz', 'x'.repeat(300), factorID.toUpperCase(), '']
  for (const user of users) {
    for (const [method, rest, body] of [
      ['GET', '/factors', undefined],
      ['POST', '/factors', 'applicationID=A'],
      ['POST', '/verify', 'token=123456'],
      ['POST', '/recovery-codes', ''],
      ['POST', '/recover', 'code=aaaa-bbbb-cccc'],
      ['DELETE', '', undefined],
    ] as const) {
      const res = await fetch(`${app.url}/totp/users/${user}${rest}`, {
        method,
        headers: { 'x-api-key': app.key, ...(body === undefined ? {} : { 'content-type': ct.form }) },
        ...(body === undefined ? {} : { body }),
      })
      assertShape(res.status, await res.text(), `${method} user ${user.slice(0, 20)}${rest}`)
      if (bad.has(user)) assert.ok(res.status >= 400, `${method} ${user.slice(0, 20)}${rest}: ${res.status}`)
    }
  }
  for (const factor of factors) {
    for (const [method, rest, body] of [
      ['POST', '/activate', 'token=123456'],
      ['POST', '/resync', 'token=123456&nextToken=654321'],
      ['DELETE', '', undefined],
    ] as const) {
      const res = await fetch(`${app.url}/totp/users/u1/factors/${factor}${rest}`, {
        method,
        headers: { 'x-api-key': app.key, ...(body === undefined ? {} : { 'content-type': ct.form }) },
        ...(body === undefined ? {} : { body }),
      })
      assertShape(res.status, await res.text(), `${method} factor ${factor.slice(0, 20)}${rest}`)
    }
  }
  // The user's factor is still there and works.
  const list = await fetch(`${app.url}/totp/users/u1/factors`, { headers: { 'x-api-key': app.key } })
  assert.equal(list.status, 200)
})
