import { mock, test } from 'node:test'
import assert from 'node:assert/strict'
import crypto from 'node:crypto'
import { syncBuiltinESMExports } from 'node:module'
import { checkPassword, DEFAULT_PARAMS, MAX_PASSWORD_LENGTH, Passwords, PasswordsBusy } from './passwords.ts'

test('passwords: scrypt hashes that carry their parameters; the right password only; other parameters still verify and ask for a rehash', async () => {
  const passwords = new Passwords()
  const hash = await passwords.hash('correct horse battery staple')
  assert.match(hash, /^\$scrypt\$ln=15,r=8,p=3\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$/)
  assert.notEqual(hash, await passwords.hash('correct horse battery staple'), 'a salt of its own')
  assert.equal(await passwords.verify('correct horse battery staple', hash), true)
  assert.equal(await passwords.verify('correct horse battery stapl', hash), false)
  assert.equal(await passwords.verify('', hash), false)
  assert.equal(passwords.needsRehash(hash), false)
  // The same text in another Unicode form (NFKC): the ligature "ﬁ" is "fi".
  const ligature = await passwords.hash('ﬁne print, ﬁne print')
  assert.equal(await passwords.verify('fine print, fine print', ligature), true)

  const weaker = new Passwords({ params: { ln: 12, r: 8, p: 1 } })
  const old = await weaker.hash('an older password hash')
  assert.equal(await passwords.verify('an older password hash', old), true, 'verified with its own parameters')
  assert.equal(passwords.needsRehash(old), true)
  for (const bad of ['', 'plain', '$scrypt$ln=99,r=8,p=1$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', hash.slice(0, -1)]) {
    assert.equal(await passwords.verify('correct horse battery staple', bad), false, `malformed: ${bad.slice(0, 20)}`)
  }
  assert.deepEqual(DEFAULT_PARAMS, { ln: 15, r: 8, p: 3 })
})

test('passwords: an unknown user is checked against a dummy hash, with the work of a real one', async () => {
  // Counted, not timed (two timings on a loaded machine tell nothing): the same derivation, with today's parameters, whether the user exists or not.
  const scrypt = mock.method(crypto, 'scrypt')
  syncBuiltinESMExports()
  try {
    const passwords = new Passwords()
    const hash = await passwords.hash('correct horse battery staple')
    await passwords.verify('warm-up', null) // the dummy hash is made once, at the first unknown user
    const derivations = async (encoded: string | null) => {
      const from = scrypt.mock.callCount()
      assert.equal(await passwords.verify('a wrong password!', encoded), false)
      // The password, the key's length, and N, r, p with their memory bound: all but the salt (argument 1).
      return scrypt.mock.calls.slice(from).map(({ arguments: [password, , length, options] }) => ({ password, length, options }))
    }
    const known = await derivations(hash)
    assert.equal(known.length, 1)
    assert.deepEqual(known[0]!.options, {
      N: 2 ** DEFAULT_PARAMS.ln,
      r: DEFAULT_PARAMS.r,
      p: DEFAULT_PARAMS.p,
      maxmem: 256 * 2 ** DEFAULT_PARAMS.ln * DEFAULT_PARAMS.r,
    })
    assert.deepEqual(await derivations(null), known)
  } finally {
    scrypt.mock.restore()
    syncBuiltinESMExports()
  }
})

test('passwords: hashing runs off the event loop (timers fire while hashes run), and a full queue is refused at once', async () => {
  const passwords = new Passwords({ concurrency: 2, queue: 8 })
  // Counted, not timed: a 5 ms timer fires while each pair of hashes runs; a hash on the loop would let it fire only after.
  let ticks = 0
  const ticker = setInterval(() => ticks++, 5)
  const during: number[] = []
  try {
    for (let round = 0; round < 4; round++) {
      const from = ticks
      await Promise.all([passwords.hash(`password number ${round}a`), passwords.hash(`password number ${round}b`)])
      during.push(ticks - from)
    }
  } finally {
    clearInterval(ticker)
  }
  assert.ok(
    during.every((n) => n > 0),
    `timer ticks while each pair of hashes ran: ${during.join(', ')}`,
  )

  const small = new Passwords({ concurrency: 1, queue: 2, params: { ln: 12, r: 8, p: 1 } })
  const results = await Promise.allSettled(Array.from({ length: 4 }, (_, i) => small.hash(`password number ${i}`)))
  assert.deepEqual(
    results.map((r) => r.status),
    ['fulfilled', 'fulfilled', 'fulfilled', 'rejected'],
  )
  assert.ok((results[3] as PromiseRejectedResult).reason instanceof PasswordsBusy)
  assert.match(await small.hash('the queue drained'), /^\$scrypt\$ln=12/)
})

test('passwords: a new password has 12 to 1024 characters', () => {
  assert.equal(checkPassword('short'), 'at least 12 characters')
  assert.equal(checkPassword('twelve chars'), null)
  assert.equal(checkPassword('🔑'.repeat(12)), null, 'characters, not UTF-16 units')
  assert.equal(checkPassword('x'.repeat(MAX_PASSWORD_LENGTH + 1)), 'at most 1024 characters')
})

test('passwords: sign-ups hash in a lane of their own: a sign-in waits for none of them, none starts while it hashes, and a full sign-up queue refuses only sign-ups', async () => {
  const stored = await new Passwords({ params: { ln: 12, r: 8, p: 1 } }).hash('the right one')
  const passwords = new Passwords({ concurrency: 1, queue: 4, signUpQueue: 3, params: { ln: 12, r: 8, p: 1 } })
  const done: string[] = []
  const signUps = Array.from({ length: 5 }, (_, i) =>
    passwords.hash(`sign-up ${i}`, 'sign-up').then(() => {
      done.push(`up${i}`)
    }),
  )
  const settled = Promise.allSettled(signUps)
  // One runs, three wait, the fifth is refused; a sign-in arriving then runs at once beside them.
  const signIn = passwords.verify('the right one', stored).then((ok) => {
    done.push(`in:${ok}`)
  })
  await Promise.all([settled, signIn])
  const results = await settled
  assert.deepEqual(
    results.map((r) => r.status),
    ['fulfilled', 'fulfilled', 'fulfilled', 'fulfilled', 'rejected'],
  )
  assert.ok((results[4] as PromiseRejectedResult).reason instanceof PasswordsBusy)
  assert.ok(done.indexOf('in:true') <= 1, `the sign-in did not wait for the sign-ups queued before it: ${done.join(', ')}`)
  assert.ok(done.indexOf('up1') > done.indexOf('in:true'), `no sign-up started while the sign-in hashed: ${done.join(', ')}`)

  // Twenty sign-ups waiting: a sign-in waits for none of them, so it ends before any but the one it found hashing.
  const roomy = new Passwords({ concurrency: 1, signUpQueue: 50, params: { ln: 12, r: 8, p: 1 } })
  let signedUp = 0
  const flood = Promise.all(Array.from({ length: 20 }, (_, i) => roomy.hash(`flood ${i}`, 'sign-up').then(() => signedUp++)))
  assert.equal(await roomy.verify('the right one', stored), true)
  const before = signedUp
  await flood
  assert.ok(before <= 1, `${before} of the 20 sign-ups ended before the sign-in`)
})
