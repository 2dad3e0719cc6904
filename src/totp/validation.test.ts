import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Secret } from 'otpauth'
import { post, startApp, codes } from '../../test/helper.ts'

const secret = new Secret().base32

test('every problem of a request is reported at once, in field order', async (t) => {
  const app = await startApp(t)
  const cases: [string, Record<string, string>, string[]][] = [
    ['/totp/onboardUser', {}, ['USER_ID_REQUIRED', 'APPLICATION_ID_REQUIRED']],
    ['/totp/onboardUser', { userID: '  ', applicationID: '' }, ['USER_ID_REQUIRED', 'APPLICATION_ID_REQUIRED']],
    ['/totp/onboardUser', { userID: 'a:b', applicationID: 'x'.repeat(257), tokenValidity: '14', tokenLength: '11', algorithm: 'MD5' },
      ['USER_ID_INVALID', 'APPLICATION_ID_INVALID', 'TOKEN_VALIDITY_INVALID', 'TOKEN_LENGTH_INVALID', 'ALGORITHM_INVALID']],
    ['/totp/onboardUser', { userID: 'u', applicationID: 'a', tokenValidity: '3601', tokenLength: '5' }, ['TOKEN_VALIDITY_INVALID', 'TOKEN_LENGTH_INVALID']],
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
    ['/totp/verifyOTP', { secret: 'nope', token: '', tokenValidity: '0', algorithm: 'x' }, ['SECRET_INVALID', 'TOKEN_REQUIRED', 'TOKEN_VALIDITY_INVALID', 'ALGORITHM_INVALID']],
    ['/totp/generateQRCode', {}, ['DATA_REQUIRED']],
    ['/totp/generateQRCode', { data: '' }, ['DATA_REQUIRED']],
    ['/totp/generateQRCode', { data: 'x', format: 'gif', size: '20', ecc: 'X', margin: '17', color: 'red', bgcolor: '#12345' },
      ['FORMAT_INVALID', 'SIZE_INVALID', 'ECC_INVALID', 'MARGIN_INVALID', 'COLOR_INVALID', 'BGCOLOR_INVALID']],
    ['/totp/generateQRCode', { data: 'x', size: '999999' }, ['SIZE_INVALID']],
  ]
  for (const [path, fields, expected] of cases) {
    const res = await post(app.url, path, app.key, fields)
    assert.equal(res.status, 400, `${path} ${JSON.stringify(fields).slice(0, 80)}`)
    const body = await res.json() as { type: string; code: string; message: string }[]
    assert.deepEqual(body.map((e) => e.code), expected, `${path} ${JSON.stringify(fields).slice(0, 80)}`)
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
  const plain = await fetch(`${app.url}/totp/getOTP`, { method: 'POST', headers: { 'x-api-key': app.key, 'content-type': 'text/plain' }, body: `secret=${secret}` })
  assert.equal(plain.status, 415)
  assert.deepEqual(await codes(plain), ['UNSUPPORTED_MEDIA_TYPE'])

  const xml = await fetch(`${app.url}/totp/getOTP`, { method: 'POST', headers: { 'x-api-key': app.key, 'content-type': 'application/xml' }, body: '<a/>' })
  assert.equal(xml.status, 415)

  const big = await post(app.url, '/totp/generateQRCode', app.key, { data: 'x'.repeat(3000) })
  assert.equal(big.status, 413)
  const bigBody = await big.json() as { code: string; message: string }[]
  assert.equal(bigBody[0]!.code, 'BODY_TOO_LARGE')
  assert.match(bigBody[0]!.message, /2048 bytes/)

  const broken = await fetch(`${app.url}/totp/getOTP`, { method: 'POST', headers: { 'x-api-key': app.key, 'content-type': 'application/json' }, body: '{"secret":' })
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
