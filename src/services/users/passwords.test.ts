import { test } from 'node:test'
import assert from 'node:assert/strict'
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

test('passwords: an unknown user is checked against a dummy hash, as slowly as a real one', async () => {
  const passwords = new Passwords()
  const hash = await passwords.hash('correct horse battery staple')
  await passwords.verify('warm-up', null)
  const time = async (encoded: string | null) => {
    const t = performance.now()
    assert.equal(await passwords.verify('a wrong password!', encoded), false)
    return performance.now() - t
  }
  const known: number[] = []
  const unknown: number[] = []
  for (let i = 0; i < 3; i++) {
    known.push(await time(hash))
    unknown.push(await time(null))
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[1]!
  assert.ok(median(unknown) > 0.7 * median(known), `unknown ${median(unknown).toFixed(0)} ms, known ${median(known).toFixed(0)} ms`)
})

test('passwords: hashing runs off the event loop (its delay stays under half a hash), and a full queue is refused at once', async () => {
  const passwords = new Passwords({ concurrency: 2, queue: 8 })
  const t = performance.now()
  await passwords.hash('one hash, timed')
  const oneHash = performance.now() - t
  // A timer every 5 ms records how late each tick comes while 8 hashes run (a hash on the loop would make one tick late by all of them).
  const late: number[] = []
  let due = performance.now() + 5
  const ticker = setInterval(() => {
    late.push(performance.now() - due)
    due = performance.now() + 5
  }, 5)
  await Promise.all(Array.from({ length: 8 }, (_, i) => passwords.hash(`password number ${i}`)))
  await new Promise((resolve) => setTimeout(resolve, 20))
  clearInterval(ticker)
  const sorted = [...late].sort((a, b) => a - b)
  const p99 = sorted[Math.min(sorted.length - 1, Math.ceil(0.99 * sorted.length) - 1)]!
  assert.ok(
    late.length > 10 && p99 < oneHash / 2,
    `${late.length} ticks, lateness p99 ${p99.toFixed(1)} ms while hashing; one hash takes ${oneHash.toFixed(0)} ms`,
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

  // Twenty sign-ups waiting: a sign-in takes a hash's time, not theirs.
  const roomy = new Passwords({ concurrency: 1, signUpQueue: 50, params: { ln: 12, r: 8, p: 1 } })
  const t = performance.now()
  const flood = Promise.all(Array.from({ length: 20 }, (_, i) => roomy.hash(`flood ${i}`, 'sign-up')))
  assert.equal(await roomy.verify('the right one', stored), true)
  const signInMs = performance.now() - t
  await flood
  const floodMs = performance.now() - t
  assert.ok(signInMs < floodMs / 4, `the sign-in took ${signInMs.toFixed(0)} ms, the 20 sign-ups ${floodMs.toFixed(0)} ms`)
})
