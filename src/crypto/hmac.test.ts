import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createHmac, randomBytes } from 'node:crypto'
import { hmacBytes, hmacText } from './hmac.ts'

test('hmac gives the bytes createHmac gives, for short, block-sized and long keys and messages', () => {
  for (const algorithm of ['sha1', 'sha256', 'sha512'] as const) {
    for (const keyLength of [0, 1, 16, 20, 32, 63, 64, 65, 127, 128, 129, 300]) {
      // 4096 fills the shared scratch exactly; 4097 and 10000 take a buffer of their own.
      for (const messageLength of [0, 8, 100, 4096, 4097, 10_000]) {
        const key = randomBytes(keyLength)
        const message = randomBytes(messageLength)
        const expected = createHmac(algorithm, key).update(message).digest()
        const label = `${algorithm} key ${keyLength} message ${messageLength}`
        assert.deepEqual(Buffer.from(hmacBytes(algorithm, key, message)), expected, label)
        assert.equal(hmacText(algorithm, key, message, 'hex'), expected.toString('hex'), label)
        assert.equal(hmacText(algorithm, key, message, 'base64url'), expected.toString('base64url'), label)
      }
    }
  }
})

test('a string message is taken as UTF-8', () => {
  const key = randomBytes(32)
  for (const message of ['', 'ascii only', 'héllo wörld ✓ 𝄞', 'x'.repeat(5000), 'é'.repeat(3000)]) {
    assert.equal(hmacText('sha256', key, message, 'base64url'), createHmac('sha256', key).update(message, 'utf8').digest('base64url'))
  }
})

test('one call does not disturb the next: results stay right when calls interleave', () => {
  const a = randomBytes(20)
  const b = randomBytes(200)
  const first = Buffer.from(hmacBytes('sha1', a, Buffer.from('one')))
  hmacText('sha512', b, 'y'.repeat(6000), 'hex')
  const again = Buffer.from(hmacBytes('sha1', a, Buffer.from('one')))
  assert.deepEqual(first, again)
  assert.deepEqual(first, createHmac('sha1', a).update('one').digest())
})

test('RFC 4231 test case 2 (HMAC-SHA-256, key "Jefe")', () => {
  const out = hmacText('sha256', Buffer.from('Jefe'), Buffer.from('what do ya want for nothing?'), 'hex')
  assert.equal(out, '5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843')
})
