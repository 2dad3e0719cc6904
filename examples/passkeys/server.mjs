/**
 * A relying party's backend for passkeys with Tessera: it serves the page (index.html, passkeys.js)
 * and relays the page's ceremonies to Tessera with the API key, which never reaches the browser.
 * It keeps who is signed in (a session cookie, in memory) and which ceremony a session has under
 * way, so that the browser names a user only where the page asks for one.
 *
 *   TESSERA_URL=http://localhost:3000 TESSERA_API_KEY=tsr_… node examples/passkeys/server.mjs
 *
 * Node 18 or later, node:http and fetch only. Settings (environment):
 *   TESSERA_URL       Tessera's base URL (required)
 *   TESSERA_API_KEY   an API key of the account whose relying party is this site (required)
 *   PORT              where to listen (default 4000; 0: any free port); HOST (default 127.0.0.1)
 *   COOKIE_SECURE     "true" behind HTTPS, so the session cookie is sent over HTTPS only
 *
 * A stand-in for your app: registration here takes the user ID the page gives. In your app,
 * register a passkey for the user your session already knows, never for one the browser names.
 */
import { randomBytes } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import http from 'node:http'

const TESSERA_URL = required('TESSERA_URL').replace(/\/+$/, '')
const API_KEY = required('TESSERA_API_KEY')
const PORT = Number(process.env.PORT ?? 4000)
const HOST = process.env.HOST ?? '127.0.0.1'
const COOKIE_SECURE = process.env.COOKIE_SECURE === 'true'
/** The largest body the page sends (an authenticator's answer is a few KB). */
const MAX_BODY = 64 * 1024
/** Sessions idle this long are forgotten. */
const SESSION_MS = 30 * 60 * 1000
const MAX_SESSIONS = 10_000

const FILES = {
  '/': ['index.html', 'text/html; charset=utf-8'],
  '/passkeys.js': ['passkeys.js', 'text/javascript; charset=utf-8'],
}

/**
 * Sessions by their cookie: who is signed in, and the ceremonies under way by their challenge (a page may have two at once:
 * the autofill sign-in waiting in the background, and a button's).
 * @type {Map<string, { userId: string | null, ceremonies: Map<string, { kind: string, userId: string | null }>, seen: number }>}
 */
const sessions = new Map()

function required(name) {
  const value = process.env[name]
  if (value === undefined || value === '') {
    process.stderr.write(`${name} is not set\n`)
    process.exit(2)
  }
  return value
}

/** session: the request's session, made (with its cookie) when it has none. */
function session(req, res) {
  const sid = /(?:^|;\s*)sid=([A-Za-z0-9_-]{43})(?:;|$)/.exec(req.headers.cookie ?? '')?.[1]
  const now = Date.now()
  const found = sid === undefined ? undefined : sessions.get(sid)
  if (found !== undefined && now - found.seen < SESSION_MS) {
    found.seen = now
    return found
  }
  for (const [key, s] of sessions) if (now - s.seen >= SESSION_MS || sessions.size >= MAX_SESSIONS) sessions.delete(key)
  const made = { userId: null, ceremonies: new Map(), seen: now }
  const id = randomBytes(32).toString('base64url')
  sessions.set(id, made)
  res.setHeader('set-cookie', `sid=${id}; Path=/; HttpOnly; SameSite=Strict${COOKIE_SECURE ? '; Secure' : ''}`)
  return made
}

/** tessera posts JSON to Tessera with the key: its status and JSON body. */
async function tessera(path, body) {
  const res = await fetch(TESSERA_URL + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': API_KEY },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(10_000),
  })
  return { status: res.status, body: await res.json().catch(() => null) }
}

/** failure: Tessera's refusal as the page sees it: the status, and the first catalogue code and message. */
function failure(answer) {
  const first = Array.isArray(answer.body) ? answer.body[0] : answer.body
  return { status: answer.status, body: { error: first?.code ?? 'UNAVAILABLE', message: first?.message ?? 'Tessera did not answer.' } }
}

const users = (userId, rest) => `/totp/users/${encodeURIComponent(userId)}${rest}`
const text = (value) => (typeof value === 'string' && value.length > 0 && value.length <= 256 ? value : null)

/** The page's calls: each takes the session and the JSON body, and answers [status, body]. */
const API = {
  async 'POST /api/me'(s) {
    return [200, { userID: s.userId }]
  },
  async 'POST /api/sign-out'(s) {
    s.userId = null
    s.ceremonies.clear()
    return [200, { userID: null }]
  },
  async 'POST /api/register/options'(s, body) {
    const userId = text(body.userID)
    if (userId === null) return [400, { error: 'USER_ID_REQUIRED', message: 'Give a user ID.' }]
    const name = text(body.userName) ?? userId
    const answer = await tessera(users(userId, '/passkeys/registration/options'), { userName: name, residentKey: 'required', userVerification: 'required' })
    if (answer.status !== 200) return Object.values(failure(answer))
    begin(s, answer.body.options.challenge, 'registration', userId)
    return [200, { options: answer.body.options }]
  },
  async 'POST /api/register'(s, body) {
    const pending = take(s, 'registration', body.credential)
    if (pending === null) return [409, { error: 'NO_CEREMONY', message: 'Start again: ask for options first.' }]
    const answer = await tessera(users(pending.userId, '/passkeys/registration'), { credential: body.credential, label: text(body.label) ?? 'Passkey' })
    if (answer.status !== 201) return Object.values(failure(answer))
    s.userId = pending.userId
    return [201, { userID: pending.userId, factorID: answer.body.factor.factorID }]
  },
  async 'POST /api/sign-in/options'(s, body) {
    // With a user ID, that user's passkeys; without one, any passkey of this site (discoverable credentials).
    const userId = body.userID === undefined || body.userID === '' ? null : text(body.userID)
    if (body.userID !== undefined && body.userID !== '' && userId === null) return [400, { error: 'USER_ID_INVALID', message: 'A user ID is 1 to 256 characters.' }]
    const path = userId === null ? '/totp/passkeys/authentication/options' : users(userId, '/passkeys/authentication/options')
    const answer = await tessera(path, { userVerification: 'required' })
    if (answer.status !== 200) return Object.values(failure(answer))
    begin(s, answer.body.options.challenge, 'sign-in', userId)
    return [200, { options: answer.body.options }]
  },
  async 'POST /api/sign-in'(s, body, req) {
    const pending = take(s, 'sign-in', body.credential)
    if (pending === null) return [409, { error: 'NO_CEREMONY', message: 'Start again: ask for options first.' }]
    // The end user's address limits their attempts across users (FACTOR_KEY_LIMIT), besides each user's own lockout.
    const ask = { credential: body.credential, rateLimitKey: req.socket.remoteAddress ?? 'unknown' }
    const answer = await tessera(pending.userId === null ? '/totp/passkeys/authentication' : users(pending.userId, '/passkeys/authentication'), ask)
    if (answer.status !== 200) return Object.values(failure(answer))
    s.userId = answer.body.userID ?? pending.userId
    return [200, { userID: s.userId, factorID: answer.body.factorID }]
  },
}

/** begin keeps a ceremony the session has under way, by its challenge (the few newest only). */
function begin(s, challenge, kind, userId) {
  s.ceremonies.set(challenge, { kind, userId })
  for (const key of s.ceremonies.keys()) if (s.ceremonies.size > 4) s.ceremonies.delete(key)
}

/** take ends the session's ceremony an answer is to (by the challenge its clientDataJSON carries), if it is of that kind. */
function take(s, kind, credential) {
  let challenge
  try {
    challenge = JSON.parse(Buffer.from(credential.response.clientDataJSON, 'base64url').toString('utf8')).challenge
  } catch {
    return null
  }
  const pending = s.ceremonies.get(challenge)
  if (pending?.kind !== kind) return null
  s.ceremonies.delete(challenge)
  return pending
}

/** readJson reads a JSON object body of at most MAX_BODY bytes; null for anything else. */
async function readJson(req) {
  const chunks = []
  let size = 0
  for await (const chunk of req) {
    size += chunk.length
    if (size > MAX_BODY) return null
    chunks.push(chunk)
  }
  try {
    const value = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}')
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? value : null
  } catch {
    return null
  }
}

function send(res, status, body) {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end(JSON.stringify(body))
}

const server = http.createServer(async (req, res) => {
  const path = new URL(req.url ?? '/', 'http://relay').pathname
  try {
    if (req.method === 'GET' && Object.hasOwn(FILES, path)) {
      const [file, type] = FILES[path]
      const headers = { 'content-type': type, 'content-security-policy': "default-src 'self'; base-uri 'none'; frame-ancestors 'none'" }
      res.writeHead(200, headers).end(await readFile(new URL(file, import.meta.url)))
      return
    }
    const route = API[`${req.method} ${path}`]
    if (route === undefined) return send(res, 404, { error: 'NOT_FOUND', message: 'No such page.' })
    // JSON only: a form of another site cannot send it without the browser asking this one first (CORS), so no CSRF token is needed.
    if (!(req.headers['content-type'] ?? '').startsWith('application/json')) return send(res, 415, { error: 'JSON_ONLY', message: 'Send JSON.' })
    const body = await readJson(req)
    if (body === null) return send(res, 400, { error: 'BODY_INVALID', message: `Send a JSON object of at most ${MAX_BODY} bytes.` })
    const [status, answer] = await route(session(req, res), body, req)
    send(res, status, answer)
  } catch (error) {
    process.stderr.write(`${req.method} ${path}: ${error instanceof Error ? error.message : String(error)}\n`)
    if (!res.headersSent) send(res, 502, { error: 'UNAVAILABLE', message: 'Tessera did not answer.' })
  }
})

server.listen(PORT, HOST, () => {
  const { port } = server.address()
  process.stdout.write(`passkeys example on http://localhost:${port}/ (relaying to ${TESSERA_URL})\n`)
})
// On Ctrl-C or SIGTERM: the requests under way end, then the process. A browser keeps a connection open ahead of its next request,
// which would hold the close for about a minute: connections still open a second later are ended.
for (const signal of ['SIGINT', 'SIGTERM'])
  process.on(signal, () => {
    server.close(() => process.exit(0))
    setTimeout(() => server.closeAllConnections(), 1000).unref()
  })
