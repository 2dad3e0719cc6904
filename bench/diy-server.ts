/**
 * The second baseline of the benchmarks: the TOTP routes as a developer would write them
 * without Tessera, in an afternoon. Fastify, the `otpauth` and `qrcode` packages, form
 * bodies decoded as @fastify/formbody does (fast-querystring), one API key checked against
 * a set, and one SQLite upsert per verification (node:sqlite, WAL) so that a code is taken
 * once per time step. No logger, no metrics, no usage, no lockout, no scopes.
 *
 * It answers the same paths and fields as the real service, so one load drives both.
 * PORT sets its port, DIY_KEY the key it takes (default `diy`).
 */
import { createHash } from 'node:crypto'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import Fastify from 'fastify'
import { parse } from 'fast-querystring'
import { Secret, TOTP } from 'otpauth'
import QRCode from 'qrcode'

const keys = new Set([process.env.DIY_KEY ?? 'diy'])
const db = new DatabaseSync(join(mkdtempSync(join(tmpdir(), 'diy-')), 'diy.db'))
db.exec('PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL')
db.exec('CREATE TABLE used (secret TEXT PRIMARY KEY, step INTEGER NOT NULL)')
db.exec('CREATE TABLE users (app TEXT NOT NULL, user TEXT NOT NULL, secret TEXT NOT NULL, PRIMARY KEY (app, user))')
// Taken only when the step is newer than the last one used: the replay check and the write in one statement.
const take = db.prepare('INSERT INTO used (secret, step) VALUES (?, ?) ON CONFLICT (secret) DO UPDATE SET step = excluded.step WHERE used.step < excluded.step')
const enrol = db.prepare('INSERT INTO users (app, user, secret) VALUES (?, ?, ?) ON CONFLICT (app, user) DO UPDATE SET secret = excluded.secret')

const app = Fastify({ logger: false })
app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) => done(null, parse(body as string)))
app.addHook('onRequest', (request, reply, done) => {
  if (!keys.has(String(request.headers['x-api-key']))) reply.code(403).send({ type: 'Error', message: 'Access denied' })
  else done()
})

type Body = Record<string, string | undefined>
const totpOf = (secret: string) => new TOTP({ secret: Secret.fromBase32(secret), algorithm: 'SHA1', digits: 6, period: 30 })

app.get('/totp/ping', async () => ({ type: 'Success', message: 'Ping successful' }))

app.post<{ Body: Body }>('/totp/getOTP', async (request, reply) => {
  const secret = request.body.secret
  if (!secret) return reply.code(400).send({ type: 'Error', message: 'secret is required' })
  const otp = totpOf(secret).generate()
  const expiresIn = 30 - (Math.floor(Date.now() / 1000) % 30)
  return { type: 'Success', otp, expiresIn, currentToken: otp, timeUsed: 30 - expiresIn }
})

app.post<{ Body: Body }>('/totp/verifyOTP', async (request, reply) => {
  const { secret, token } = request.body
  if (!secret || !token) return reply.code(400).send({ type: 'Error', message: 'secret and token are required' })
  const delta = totpOf(secret).validate({ token, window: 1 })
  if (delta === null) return reply.code(400).send({ type: 'Error', message: 'Invalid OTP' })
  const step = Math.floor(Date.now() / 30000) + delta
  const hash = createHash('sha256').update(secret).digest('hex')
  if (take.run(hash, step).changes === 0) return reply.code(400).send({ type: 'Error', message: 'OTP already used' })
  return { type: 'Success', valid: true, message: 'OTP verified' }
})

app.post<{ Body: Body }>('/totp/onboardUser', async (request, reply) => {
  const { userID, applicationID } = request.body
  if (!userID || !applicationID) return reply.code(400).send({ type: 'Error', message: 'userID and applicationID are required' })
  const totp = new TOTP({ issuer: applicationID, label: userID, secret: new Secret({ size: 20 }) })
  const otpURL = totp.toString()
  const QRCodeUrl = await QRCode.toDataURL(otpURL)
  enrol.run(applicationID, userID, totp.secret.base32)
  const otp = totp.generate()
  const expiresIn = 30 - (Math.floor(Date.now() / 1000) % 30)
  return { secretKey: totp.secret.base32, otpURL, QRCode: QRCodeUrl, otp, token: otp, tokenValidity: 30, tokenLength: 6, algorithm: 'SHA1', expiresIn }
})

await app.listen({ port: Number(process.env.PORT ?? 0), host: '127.0.0.1' })
const address = app.server.address()
process.stdout.write(`listening ${typeof address === 'object' && address ? address.port : ''}\n`)
process.on('SIGTERM', () => {
  void app.close().then(() => process.exit(0))
})
