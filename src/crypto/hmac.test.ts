import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createHmac, randomBytes } from 'node:crypto'
import { hmac } from './hmac.ts'

test('hmac gives the bytes createHmac gives, for short, block-sized and long keys', () => {
  for (const algorithm of ['sha1', 'sha256', 'sha512'] as const) {
    for (const keyLength of [0, 1, 16, 20, 32, 63, 64, 65, 127, 128, 129, 300]) {
      for (const messageLength of [0, 8, 100]) {
        const key = randomBytes(keyLength)
        const message = randomBytes(messageLength)
        assert.deepEqual(hmac(algorithm, key, message), createHmac(algorithm, key).update(message).digest(), `${algorithm} key ${keyLength} message ${messageLength}`)
      }
    }
  }
})

test('RFC 4231 test case 2 (HMAC-SHA-256, key "Jefe")', () => {
  const out = hmac('sha256', Buffer.from('Jefe'), Buffer.from('what do ya want for nothing?')).toString('hex')
  assert.equal(out, '5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843')
})
