import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Secret } from 'otpauth'
import { request } from 'node:http'
import { post, startApp, codes } from '../../support/helper.ts'

const secret = new Secret().base32

test('every problem of a request is reported at once, in field order', async (t) => {
  const app = await startApp(t)
  const cases: [string, Record<string, string>, string[]][] = [
    ['/totp/onboardUser', {}, ['USER_ID_REQUIRED', 'APPLICATION_ID_REQUIRED']],
    ['/totp/onboardUser', { userID: '  ', applicationID: '' }, ['USER_ID_REQUIRED', 'APPLICATION_ID_REQUIRED']],
    [
      '/totp/onboardUser',
      { userID: 'a:b', applicationID: 'x'.repeat(257), tokenValidity: '14', tokenLength: '11', algorithm: 'MD5' },
      ['USER_ID_INVALID', 'APPLICATION_ID_INVALID', 'TOKEN_VALIDITY_INVALID', 'TOKEN_LENGTH_INVALID', 'ALGORITHM_INVALID'],
    ],
    ['/totp/onboardUser', { userID: 'u', applicationID: 'a', tokenValidity: '3601', tokenLength: '5' }, ['TOKEN_VALIDITY_INVALID', 'TOKEN_LENGTH_INVALID']],
    // A control character is nothing an app can show, and PostgreSQL refuses NUL in text (it was a 500 there).
    ['/totp/onboardUser', { userID: 'a\u0000b', applicationID: 'x\u001fy' }, ['USER_ID_INVALID', 'APPLICATION_ID_INVALID']],
    ['/totp/users/u/factors', { applicationID: 'a\u0000b', label: 'tab\there' }, ['APPLICATION_ID_INVALID', 'LABEL_INVALID']],
    ['/totp/onboardUser', { userID: 'u', applicationID: 'a', tokenValidity: '30.5', tokenLength: 'six' }, ['TOKEN_VALIDITY_INVALID', 'TOKEN_LENGTH_INVALID']],
    ['/totp/getOTP', {}, ['SECRET_REQUIRED']],
    ['/totp/getOTP', { secret: 'JBSWY3DPEHPK3PX' }, ['SECRET_INVALID']],
    ['/totp/getOTP', { secret: `${secret.slice(0, 30)}18` }, ['SECRET_INVALID']],
    ['/totp/getOTP', { secret: 'A'.repeat(1025) }, ['SECRET_INVALID']],
    ['/totp/getOTP', { secret, tokenLength: '12', algorithm: 'sha3' }, ['TOKEN_LENGTH_INVALID', 'ALGORITHM_INVALID']],
    ['/totp/verifyOTP', {}, ['SECRET_REQUIRED', 'TOKEN_REQUIRED']],
    ['/totp/verifyOTP', { secret, token: '12a456' }, ['TOKEN_INVALID']],
    ['/totp/verifyOTP', { secret, token: '12345' }, ['TOKEN_INVALID']],
    ['/totp/verifyOTP', { secret, token: '12345678901' }, ['TOKEN_INVALID']],
    [
      '/totp/verifyOTP',
      { secret: 'nope', token: '', tokenValidity: '0', algorithm: 'x' },
      ['SECRET_INVALID', 'TOKEN_REQUIRED', 'TOKEN_VALIDITY_INVALID', 'ALGORITHM_INVALID'],
    ],
    ['/totp/generateQRCode', {}, ['DATA_REQUIRED']],
    ['/totp/generateQRCode', { data: '' }, ['DATA_REQUIRED']],
    [
      '/totp/generateQRCode',
      { data: 'x', format: 'gif', size: '20', ecc: 'X', margin: '17', color: 'red', bgcolor: '#12345' },
      ['FORMAT_INVALID', 'SIZE_INVALID', 'ECC_INVALID', 'MARGIN_INVALID', 'COLOR_INVALID', 'BGCOLOR_INVALID'],
    ],
    ['/totp/generateQRCode', { data: 'x', size: '999999' }, ['SIZE_INVALID']],
  ]
  for (const [path, fields, expected] of cases) {
    const res = await post(app.url, path, app.key, fields)
    assert.equal(res.status, 400, `${path} ${JSON.stringify(fields).slice(0, 80)}`)
    const body = (await res.json()) as { type: string; code: string; message: string }[]
    assert.deepEqual(
      body.map((e) => e.code),
      expected,
      `${path} ${JSON.stringify(fields).slice(0, 80)}`,
    )
    for (const e of body) {
      assert.equal(e.type, 'Error')
      assert.ok(e.message.length > 0)
      assert.doesNotMatch(e.message, /\{\w+\}/, `every placeholder of ${e.code} is filled`)
    }
  }
})

test('the Renda.io messages for missing fields are kept', async (t) => {
  const app = await startApp(t)
  const onboard = await (await post(app.url, '/totp/onboardUser', app.key, {})).json()
  assert.deepEqual(onboard, [
    { type: 'Error', code: 'USER_ID_REQUIRED', message: 'User ID is mandatory' },
    { type: 'Error', code: 'APPLICATION_ID_REQUIRED', message: 'Application ID is mandatory' },
  ])
  const qr = await (await post(app.url, '/totp/generateQRCode', app.key, {})).json()
  assert.deepEqual(qr, [{ type: 'Error', code: 'DATA_REQUIRED', message: 'No Data provided to generate QR Code' }])
})

test('wrong content type is 415, an oversized body 413, a broken JSON body 400', async (t) => {
  const app = await startApp(t, { BODY_LIMIT_BYTES: '2048' })
  const plain = await fetch(`${app.url}/totp/getOTP`, {
    method: 'POST',
    headers: { 'x-api-key': app.key, 'content-type': 'text/plain' },
    body: `secret=${secret}`,
  })
  assert.equal(plain.status, 415)
  assert.deepEqual(await codes(plain), ['UNSUPPORTED_MEDIA_TYPE'])

  const xml = await fetch(`${app.url}/totp/getOTP`, { method: 'POST', headers: { 'x-api-key': app.key, 'content-type': 'application/xml' }, body: '<a/>' })
  assert.equal(xml.status, 415)

  const big = await post(app.url, '/totp/generateQRCode', app.key, { data: 'x'.repeat(3000) })
  assert.equal(big.status, 413)
  const bigBody = (await big.json()) as { code: string; message: string }[]
  assert.equal(bigBody[0]!.code, 'BODY_TOO_LARGE')
  assert.match(bigBody[0]!.message, /2048 bytes/)

  const broken = await fetch(`${app.url}/totp/getOTP`, {
    method: 'POST',
    headers: { 'x-api-key': app.key, 'content-type': 'application/json' },
    body: '{"secret":',
  })
  assert.equal(broken.status, 400)
  assert.deepEqual(await codes(broken), ['MALFORMED_BODY'])

  const array = await fetch(`${app.url}/totp/getOTP`, { method: 'POST', headers: { 'x-api-key': app.key, 'content-type': 'application/json' }, body: '[1,2]' })
  assert.equal(array.status, 400)
  assert.ok((await codes(array)).includes('MALFORMED_BODY'))
})

test('a bad request from a caller without access gets the 403, not a 400 that would tell it about the body', async (t) => {
  const app = await startApp(t)
  const res = await post(app.url, '/totp/onboardUser', 'tsr_wrong', {})
  assert.equal(res.status, 403)
})

test('text that is not UTF-8, or a lone surrogate, is a 400 naming the field, in every body type', async (t) => {
  const app = await startApp(t)
  const send = (type: string, body: string | Buffer) =>
    fetch(`${app.url}/totp/onboardUser`, {
      method: 'POST',
      headers: { 'x-api-key': app.key, 'content-type': type },
      body: typeof body === 'string' ? body : new Uint8Array(body),
    })
  const bad: [string, string | Buffer][] = [
    ['application/json', '{"userID":"\\ud800","applicationID":"Acme"}'],
    ['application/x-www-form-urlencoded', 'userID=%ED%A0%80&applicationID=Acme'],
    ['application/x-www-form-urlencoded', Buffer.from('userID=\xff&applicationID=Acme', 'latin1')],
    [
      'multipart/form-data; boundary=b',
      Buffer.from(
        '--b\r\ncontent-disposition: form-data; name="userID"\r\n\r\n\xed\xa0\x80\r\n--b\r\ncontent-disposition: form-data; name="applicationID"\r\n\r\nAcme\r\n--b--\r\n',
        'latin1',
      ),
    ],
  ]
  for (const [type, body] of bad) {
    const res = await send(type, body)
    assert.equal(res.status, 400, type)
    assert.deepEqual(await codes(res), ['USER_ID_INVALID'], `${type}: ${String(body).slice(0, 40)}`)
  }
  const qr = await fetch(`${app.url}/totp/generateQRCode`, {
    method: 'POST',
    headers: { 'x-api-key': app.key, 'content-type': 'application/json' },
    body: '{"data":"a\\udc00","size":"x"}',
  })
  assert.deepEqual(await codes(qr), ['DATA_INVALID', 'SIZE_INVALID'], 'with every other problem at once')
  // Well-formed non-ASCII text is fine, escaped or raw.
  const ok = await send('application/x-www-form-urlencoded', Buffer.from('userID=J%C3%BCrgen&applicationID=Caf\xc3\xa9', 'latin1'))
  assert.equal(ok.status, 200)
  assert.match(((await ok.json()) as { otpURL: string }).otpURL, /^otpauth:\/\/totp\/Caf%C3%A9:J%C3%BCrgen\?/)
})

test('multipart/form-data (curl -F) works on the TOTP routes, with the same limits', async (t) => {
  const app = await startApp(t, { BODY_LIMIT_BYTES: '2048' })
  const form = new FormData()
  form.set('userID', 'jane@example.com')
  form.set('applicationID', 'Acme')
  form.set('tokenLength', '8')
  const onboard = await fetch(`${app.url}/totp/onboardUser`, { method: 'POST', headers: { 'x-api-key': app.key }, body: form })
  assert.equal(onboard.status, 200)
  const { secretKey, otp } = (await onboard.json()) as { secretKey: string; otp: string }
  assert.match(otp, /^\d{8}$/)

  const verify = new FormData()
  verify.set('secret', secretKey)
  verify.set('token', otp)
  assert.equal((await fetch(`${app.url}/totp/verifyOTP`, { method: 'POST', headers: { 'x-api-key': app.key }, body: verify })).status, 200)

  // A file part is taken as its field's text (curl -F data=@file.txt).
  const qr = new FormData()
  qr.set('data', new Blob(['https://example.com']), 'data.txt')
  const image = await fetch(`${app.url}/totp/generateQRCode`, { method: 'POST', headers: { 'x-api-key': app.key }, body: qr })
  assert.equal(image.status, 200)
  assert.equal(image.headers.get('content-type'), 'image/png')

  const big = new FormData()
  big.set('data', 'x'.repeat(3000))
  const tooLarge = await fetch(`${app.url}/totp/generateQRCode`, { method: 'POST', headers: { 'x-api-key': app.key }, body: big })
  assert.equal(tooLarge.status, 413)
  assert.deepEqual(await codes(tooLarge), ['BODY_TOO_LARGE'])

  const noBoundary = await fetch(`${app.url}/totp/getOTP`, {
    method: 'POST',
    headers: { 'x-api-key': app.key, 'content-type': 'multipart/form-data' },
    body: 'xx',
  })
  assert.equal(noBoundary.status, 400)
  const body = (await noBoundary.json()) as { code: string; message: string }[]
  assert.deepEqual(
    body.map((e) => e.code),
    ['MALFORMED_BODY'],
  )
  assert.match(body[0]!.message, /multipart\/form-data/)
})

test('an otpauth URL too long for a QR code is DATA_TOO_LONG from onboardUser, and leaves no record', async (t) => {
  const app = await startApp(t)
  // 4 UTF-8 bytes each, 12 characters escaped, twice in the URL (label and issuer): over 9000 characters.
  const userID = '😀'.repeat(256)
  const res = await post(app.url, '/totp/onboardUser', app.key, { userID, applicationID: '😀'.repeat(256) })
  assert.equal(res.status, 400)
  assert.deepEqual(await codes(res), ['DATA_TOO_LONG'])
  assert.equal(await app.store.onboarding.get(app.accountId, '😀'.repeat(256), userID), null)
})

/** raw posts with exactly these headers (fetch would add a type and a length of its own). */
function raw(url: string, headers: Record<string, string>, body?: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', headers }, (res) => {
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

test('an empty body (none at all, or no bytes of any type) is an empty set of fields on every TOTP route: the missing fields are named', async (t) => {
  const app = await startApp(t)
  const routes: [string, string[]][] = [
    ['/totp/onboardUser', ['USER_ID_REQUIRED', 'APPLICATION_ID_REQUIRED']],
    ['/totp/getOTP', ['SECRET_REQUIRED']],
    ['/totp/verifyOTP', ['SECRET_REQUIRED', 'TOKEN_REQUIRED']],
    ['/totp/generateQRCode', ['DATA_REQUIRED']],
    ['/totp/users/u/factors', ['APPLICATION_ID_REQUIRED']],
    ['/totp/users/u/factors/fct_0000000000000000/activate', ['TOKEN_REQUIRED']],
    ['/totp/users/u/verify', ['TOKEN_REQUIRED']],
    ['/totp/users/u/factors/fct_0000000000000000/resync', ['TOKEN_REQUIRED', 'NEXT_TOKEN_REQUIRED']],
    ['/totp/users/u/recover', ['RECOVERY_CODE_REQUIRED']],
  ]
  const types = [
    undefined,
    'application/json',
    'application/x-www-form-urlencoded',
    'multipart/form-data',
    'multipart/form-data; boundary=x',
    'text/plain',
    'application/octet-stream',
  ]
  for (const [path, expected] of routes) {
    const reference = await post(app.url, path, app.key, {})
    assert.deepEqual(await codes(reference), expected, `${path}: an empty form`)
    const none = await raw(`${app.url}${path}`, { 'x-api-key': app.key })
    assert.equal(none.status, 400, `${path}: no body`)
    assert.deepEqual(
      (JSON.parse(none.text) as { code: string }[]).map((p) => p.code),
      expected,
      `${path}: no body`,
    )
    for (const type of types) {
      const headers: Record<string, string> = { 'x-api-key': app.key, 'content-length': '0' }
      if (type !== undefined) headers['content-type'] = type
      const empty = await raw(`${app.url}${path}`, headers, '')
      assert.equal(empty.status, 400, `${path} ${type}`)
      assert.deepEqual(
        (JSON.parse(empty.text) as { code: string }[]).map((p) => p.code),
        expected,
        `${path} ${type ?? 'no type'}, length 0`,
      )
    }
  }
  // A body that is there and does not parse is still MALFORMED_BODY; one of a type the route does not take, 415.
  assert.equal((await raw(`${app.url}/totp/onboardUser`, { 'x-api-key': app.key, 'content-type': 'application/json' }, '{')).status, 400)
  assert.equal((await raw(`${app.url}/totp/onboardUser`, { 'x-api-key': app.key, 'content-type': 'text/plain' }, 'userID=u')).status, 415)
})
