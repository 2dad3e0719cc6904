/**
 * The mailer against a real SMTP server (smtp-server, in this process, on a free port), with
 * and without authentication; the raw MIME it receives is checked part by part.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createServer, type AddressInfo, type Socket } from 'node:net'
import { once } from 'node:events'
import { smtp } from '../../support/smtp.ts'
import { MailError, openMailer, type MailLog } from '../../../src/mail/mailer.ts'
import { duration, escapeHtml, invitation, resetPassword, signupAwaitingApproval, signupToApprove, verifyEmail } from '../../../src/mail/templates.ts'

/** A log that keeps its entries, to check what is and is not written. */
function memoryLog(): MailLog & { lines: string[] } {
  const lines: string[] = []
  const write = (fields: object, message: string) => {
    lines.push(JSON.stringify({ ...fields, msg: message }))
  }
  return { lines, info: write, warn: write }
}

const dev = { nodeEnv: 'development' as const, mailFrom: 'Tessera <no-reply@localhost>' }

/** headersOf reads a MIME entity's headers (unfolded), by lower-case name. */
function split(entity: string): { headers: Map<string, string>; body: string } {
  const at = entity.indexOf('\r\n\r\n')
  const head = entity.slice(0, at).replace(/\r\n[ \t]+/g, ' ')
  const headers = new Map<string, string>()
  for (const line of head.split('\r\n')) {
    const colon = line.indexOf(':')
    headers.set(line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim())
  }
  return { headers, body: entity.slice(at + 4) }
}

/** decodeWords decodes RFC 2047 encoded words (=?UTF-8?Q?…?= and =?UTF-8?B?…?=), joining adjacent ones. */
function decodeWords(value: string): string {
  return value.replace(/(\?=)\s+(=\?)/g, '$1$2').replace(/=\?utf-8\?([QB])\?([^?]*)\?=/gi, (_, kind: string, data: string) =>
    kind.toUpperCase() === 'B'
      ? Buffer.from(data, 'base64').toString('utf8')
      : Buffer.from(
          data.replace(/_/g, ' ').replace(/=([0-9A-F]{2})/gi, (_m, h: string) => String.fromCharCode(parseInt(h, 16))),
          'latin1',
        ).toString('utf8'),
  )
}

/** decodeBody undoes a part's Content-Transfer-Encoding. */
function decodeBody(body: string, encoding: string | undefined): string {
  if (encoding === 'base64') return Buffer.from(body.replace(/\s+/g, ''), 'base64').toString('utf8')
  if (encoding === 'quoted-printable') {
    return Buffer.from(
      body.replace(/=\r\n/g, '').replace(/=([0-9A-F]{2})/gi, (_m, h: string) => String.fromCharCode(parseInt(h, 16))),
      'latin1',
    ).toString('utf8')
  }
  return body
}

/** parse reads a multipart/alternative message: its top headers and its parts, decoded, by content type. */
function parse(raw: string): { headers: Map<string, string>; parts: Map<string, { headers: Map<string, string>; text: string }> } {
  const top = split(raw)
  const type = top.headers.get('content-type') ?? ''
  assert.match(type, /^multipart\/alternative;/, 'one message with two alternatives')
  const boundary = /boundary="?([^";]+)"?/.exec(type)![1]!
  const parts = new Map<string, { headers: Map<string, string>; text: string }>()
  for (const chunk of top.body.split(`--${boundary}`).slice(1, -1)) {
    const part = split(chunk.replace(/^\r\n/, ''))
    const partType = part.headers.get('content-type')!.split(';')[0]!
    parts.set(partType, { headers: part.headers, text: decodeBody(part.body.replace(/\r\n$/, ''), part.headers.get('content-transfer-encoding')) })
  }
  return { headers: top.headers, parts }
}

test('a message arrives with its text and HTML parts and its headers, names and subject encoded', async (t) => {
  const server = await smtp(t)
  const log = memoryLog()
  const mailer = openMailer({ ...dev, smtpUrl: `smtp://127.0.0.1:${server.port}`, mailFrom: 'Zoë Ops <ops@example.com>' }, log)
  t.after(() => mailer.close())
  const link = 'https://portal.example.com/portal/invitations/accept?token=tok_secret_1&x=1'
  const email = invitation({
    accountName: 'Ünïcode Crew <script>alert(1)</script>',
    role: 'developer',
    inviter: 'Jürgen "J" Müller',
    link,
    validForMs: 7 * 86_400_000,
  })
  await mailer.send({ to: { name: 'Łukasz Żółw', address: 'lukasz@example.net' }, ...email })

  assert.equal(server.received.length, 1)
  const got = server.received[0]!
  assert.equal(got.from, 'ops@example.com', "envelope sender is MAIL_FROM's address")
  assert.deepEqual(got.to, ['lukasz@example.net'])
  assert.doesNotMatch(got.raw.split('\r\n\r\n')[0]!, /[^\x20-\x7e\r\n\t]/, 'headers are 7-bit: non-ASCII is encoded')
  const { headers, parts } = parse(got.raw)
  assert.equal(decodeWords(headers.get('from')!), 'Zoë Ops <ops@example.com>')
  assert.equal(decodeWords(headers.get('to')!), 'Łukasz Żółw <lukasz@example.net>')
  assert.equal(decodeWords(headers.get('subject')!), 'Jürgen "J" Müller invited you to Ünïcode Crew <script>alert(1)</script> on Tessera')
  assert.equal(headers.get('mime-version'), '1.0')
  assert.match(headers.get('message-id')!, /^<.+@.+>$/)

  const text = parts.get('text/plain')
  const html = parts.get('text/html')
  assert.ok(text && html, `both parts: ${[...parts.keys()].join(', ')}`)
  assert.match(text.headers.get('content-type')!, /charset=utf-8/i)
  assert.match(html.headers.get('content-type')!, /charset=utf-8/i)
  assert.equal(text.text.replaceAll('\r\n', '\n'), email.text, 'the text part arrives as written (lines end in CRLF on the wire)')
  assert.equal(html.text.replaceAll('\r\n', '\n'), email.html, 'the HTML part arrives as written')
  assert.ok(text.text.includes(link) && text.text.includes('7 days'))
  assert.ok(html.text.includes('Ünïcode Crew &#60;script&#62;alert(1)&#60;/script&#62;'), 'the account name arrives escaped')
  assert.doesNotMatch(html.text, /<script/i)
  assert.ok(html.text.includes(`href="${escapeHtml(link)}"`), "the link's & escaped in the attribute")

  assert.equal(log.lines.length, 1)
  assert.match(log.lines[0]!, /"email sent"/)
  assert.ok(!log.lines[0]!.includes('tok_secret_1'), 'the body (and its single-use link) is never logged')
  mailer.close()
})

test('a line break in a subject or name cannot add a header or a recipient', async (t) => {
  const server = await smtp(t)
  const mailer = openMailer({ ...dev, smtpUrl: `smtp://127.0.0.1:${server.port}` }, memoryLog())
  await mailer.send({
    to: { name: 'Eve\r\nBcc: x@evil.example', address: 'eve@example.com' },
    subject: 'Hi\r\nBcc: y@evil.example',
    text: 't',
    html: '<p>t</p>',
  })
  mailer.close()
  const got = server.received[0]!
  assert.deepEqual(got.to, ['eve@example.com'])
  assert.doesNotMatch(got.raw.split('\r\n\r\n')[0]!, /^bcc:/im)
})

test("with authentication on: the URL's credentials are used, and wrong ones fail with the server's reply", async (t) => {
  const logins: string[] = []
  const server = await smtp(t, {
    authOptional: false,
    authMethods: ['PLAIN', 'LOGIN'],
    onAuth(auth, _session, callback) {
      logins.push(auth.username ?? '')
      if (auth.username === 'mailer' && auth.password === 'p@ss w0rd') callback(null, { user: auth.username })
      else callback(new Error('Invalid username or password'))
    },
  })
  const good = openMailer({ ...dev, smtpUrl: `smtp://mailer:${encodeURIComponent('p@ss w0rd')}@127.0.0.1:${server.port}` }, memoryLog())
  t.after(() => good.close())
  await good.send({ to: 'dev@example.com', ...verifyEmail({ link: 'https://x.example/v?t=1', validForMs: 86_400_000 }) })
  assert.equal(server.received.length, 1)
  assert.deepEqual(logins, ['mailer'])

  const bad = openMailer({ ...dev, smtpUrl: `smtp://mailer:wrong@127.0.0.1:${server.port}` }, memoryLog())
  t.after(() => bad.close())
  await assert.rejects(
    bad.send({ to: 'dev@example.com', ...verifyEmail({ link: 'https://x.example/v?t=2', validForMs: 86_400_000 }) }),
    (e: unknown) =>
      e instanceof MailError &&
      /^Could not send the email "Confirm your email address for Tessera" to dev@example.com: .*535/.test(e.message) &&
      !e.message.includes('wrong'),
  )
  // verify (readyz's check) signs in as sending does, and fails the same way.
  await good.verify!()
  await assert.rejects(bad.verify!(), (e: unknown) => e instanceof MailError && /535/.test(e.message) && !e.message.includes('wrong'))
  assert.deepEqual(logins, ['mailer', 'mailer', 'mailer', 'mailer'])
  const none = openMailer({ ...dev, smtpUrl: `smtp://127.0.0.1:${server.port}` }, memoryLog())
  t.after(() => none.close())
  await assert.rejects(none.send({ to: 'dev@example.com', ...verifyEmail({ link: 'https://x.example/v?t=3', validForMs: 86_400_000 }) }), MailError)
  assert.equal(server.received.length, 1, 'nothing more accepted')
  for (const m of [good, bad, none]) m.close()
})

test("a recipient the server refuses (550) rejects the promise with the server's reply", async (t) => {
  const server = await smtp(t, {
    onRcptTo(address, _session, callback) {
      if (address.address === 'gone@example.com') callback(Object.assign(new Error('5.1.1 No such user here'), { responseCode: 550 }))
      else callback()
    },
  })
  const mailer = openMailer({ ...dev, smtpUrl: `smtp://127.0.0.1:${server.port}` }, memoryLog())
  t.after(() => mailer.close())
  await assert.rejects(
    mailer.send({ to: 'gone@example.com', ...resetPassword({ link: 'https://x.example/r?t=1', validForMs: 3_600_000 }) }),
    (e: unknown) => e instanceof MailError && e.responseCode === 550 && /to gone@example.com: .*550.*No such user here/.test(e.message),
  )
  // The pool goes on: the next message is sent.
  await mailer.send({ to: 'here@example.com', ...resetPassword({ link: 'https://x.example/r?t=2', validForMs: 3_600_000 }) })
  assert.deepEqual(
    server.received.map((r) => r.to),
    [['here@example.com']],
  )
  mailer.close()
})

test('a server that never answers fails within the timeout; a closed port at once', async (t) => {
  const sockets = new Set<Socket>()
  const silent = createServer((socket) => {
    sockets.add(socket)
  })
  silent.listen(0, '127.0.0.1')
  await once(silent, 'listening')
  t.after(() => {
    for (const s of sockets) s.destroy()
    silent.close()
  })
  const port = (silent.address() as AddressInfo).port

  const mailer = openMailer({ ...dev, smtpUrl: `smtp://127.0.0.1:${port}` }, memoryLog(), { timeoutMs: 500 })
  t.after(() => mailer.close())
  const started = performance.now()
  await assert.rejects(
    mailer.send({ to: 'dev@example.com', ...verifyEmail({ link: 'https://x.example/v', validForMs: 86_400_000 }) }),
    (e: unknown) => e instanceof MailError && /Greeting never received|timeout/i.test(e.message),
  )
  const took = performance.now() - started
  assert.ok(took >= 450 && took < 3000, `failed after ${Math.round(took)} ms (timeout 500 ms)`)
  const checked = performance.now()
  await assert.rejects(mailer.verify!(), (e: unknown) => e instanceof MailError && /Greeting never received|timeout|no answer within/i.test(e.message))
  assert.ok(performance.now() - checked < 1500, 'verify is bounded by the same timeout')

  // A port nobody listens on: the one just closed.
  const closed = createServer()
  closed.listen(0, '127.0.0.1')
  await once(closed, 'listening')
  const closedPort = (closed.address() as AddressInfo).port
  await new Promise<void>((resolve) => closed.close(() => resolve()))
  const refused = openMailer({ ...dev, smtpUrl: `smtp://127.0.0.1:${closedPort}` }, memoryLog(), { timeoutMs: 5000 })
  t.after(() => refused.close())
  const start2 = performance.now()
  await assert.rejects(
    refused.send({ to: 'dev@example.com', ...verifyEmail({ link: 'https://x.example/v', validForMs: 86_400_000 }) }),
    (e: unknown) => e instanceof MailError && /ECONNREFUSED/.test(e.message),
  )
  assert.ok(performance.now() - start2 < 2000)
})

test('without SMTP_URL: outside production the text (with its link) goes to the log; in production sending is refused', async () => {
  const log = memoryLog()
  assert.equal(openMailer({ ...dev, smtpUrl: '' }, log).verify, undefined, 'no server to verify')
  const email = verifyEmail({ link: 'https://portal.example.com/portal/verify?token=dev_token', validForMs: 86_400_000 })
  await openMailer({ ...dev, smtpUrl: '' }, log).send({ to: { name: 'Dev', address: 'dev@example.com' }, ...email })
  assert.equal(log.lines.length, 1)
  const entry = JSON.parse(log.lines[0]!) as { to: string; subject: string; text: string }
  assert.deepEqual([entry.to, entry.subject, entry.text], ['dev@example.com', email.subject, email.text])
  assert.ok(entry.text.includes('dev_token'))

  const prodLog = memoryLog()
  await assert.rejects(
    openMailer({ ...dev, nodeEnv: 'production', smtpUrl: '' }, prodLog).send({ to: 'dev@example.com', ...email }),
    (e: unknown) => e instanceof MailError && /SMTP_URL is not set/.test(e.message),
  )
  assert.deepEqual(prodLog.lines, [], 'and the link is not logged')
})

test('templates: subjects name what and the product; bodies give the link and its expiry; HTML is plain, escaped and has a lang', () => {
  const link = 'https://portal.example.com/portal/x?token=abc&next=%2F'
  const emails = {
    verify: verifyEmail({ link, validForMs: 24 * 3_600_000 }),
    reset: resetPassword({ link, validForMs: 30 * 60_000 }),
    invite: invitation({ accountName: 'Acme\r\nBcc: x@evil.example', role: 'admin', inviter: 'Ann <ann@acme.example>', link, validForMs: 7 * 86_400_000 }),
    pending: signupAwaitingApproval({ portalUrl: 'https://portal.example.com/portal' }),
    approve: signupToApprove({ email: 'new@example.com', accountName: 'New & Co', link }),
  }
  assert.equal(emails.verify.subject, 'Confirm your email address for Tessera')
  assert.equal(emails.reset.subject, 'Reset your Tessera password')
  assert.equal(emails.invite.subject, 'Ann <ann@acme.example> invited you to Acme Bcc: x@evil.example on Tessera', "a user's value stays on one line")
  assert.equal(emails.pending.subject, 'Your Tessera sign-up is awaiting approval')
  assert.equal(emails.approve.subject, 'New Tessera sign-up to approve: new@example.com')
  assert.match(emails.verify.text, /expires in 24 hours/)
  assert.match(emails.reset.text, /expires in 30 minutes/)
  assert.match(emails.invite.text, /expires in 7 days/)
  assert.match(emails.invite.text, /as admin\./)
  assert.match(emails.approve.html, /New &#38; Co/)
  for (const [name, email] of Object.entries(emails)) {
    assert.ok(!/[\r\n]/.test(email.subject), name)
    assert.match(email.html, /^<!doctype html>\n<html lang="en">/, name)
    assert.match(email.html, /<meta charset="utf-8">/, name)
    assert.doesNotMatch(email.html, /<img|<script|<style|\sstyle=|src=|<link/i, `${name}: nothing to load, nothing inline`)
    assert.match(email.text, /— Tessera\n$/, name)
    if (name !== 'pending') {
      assert.ok(email.text.includes(link), `${name}: the text has the link as it is`)
      assert.ok(email.html.includes(`<a href="${escapeHtml(link)}">`), `${name}: the HTML has it escaped`)
    }
  }
  assert.deepEqual(
    [duration(60_000), duration(90 * 60_000), duration(2 * 3_600_000), duration(36 * 3_600_000), duration(3 * 86_400_000)],
    ['1 minute', '90 minutes', '2 hours', '36 hours', '3 days'],
  )
})
