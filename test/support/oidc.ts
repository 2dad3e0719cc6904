/**
 * A real OpenID provider for the single sign-on tests: `oidc-provider` (OpenID Certified), on
 * a free port, with a login page of its own (a form naming the account, and whether it "used
 * MFA"), consent granted by itself, and accounts the test changes as it goes (an address moved
 * to another person, an unverified one).
 *
 * In front of it, on the issuer's address, a pass-through that the test can turn into an
 * attacker on the token endpoint's answer: its ID token re-signed with another key (same
 * `kid`), or re-signed with the provider's own key but another nonce or issuer. The
 * provider's keys are made here, so the test holds what a real provider would never give away.
 */
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { createSign, generateKeyPairSync, type KeyObject } from 'node:crypto'
import type { TestContext } from 'node:test'
import assert from 'node:assert/strict'
import Provider from 'oidc-provider'
import type { Running } from './helper.ts'
import { Users, type SsoProviderInput } from '../../src/services/users.ts'
import { sealedPortal } from '../../src/services/users/sealed.ts'
import { resolveKeyring } from '../../src/config/encryption.ts'
import { SYSTEM } from '../../src/domain/accounts.ts'
import { isFailure } from '../../src/services/outcome.ts'

export interface OidcAccount {
  email: string
  email_verified: boolean
  name?: string
  /** The organisation's domain, as Google Workspace says it. */
  hd?: string
}

export interface OidcClient {
  readonly client_id: string
  readonly client_secret: string
  readonly redirect_uris: readonly string[]
}

/** What the pass-through does to the token endpoint's ID token. */
export type Tamper = 'none' | 'other-key' | 'wrong-nonce' | 'wrong-issuer' | 'hang'

export interface TestProvider {
  readonly issuer: string
  readonly accounts: Map<string, OidcAccount>
  tamper: Tamper
  /**
   * Sees the provider's redirect back to the portal (the callback URL, code and state): returns the URL to send the
   * browser to instead, or null to keep it from the browser (a page saying so is shown).
   */
  onCallback: ((location: string) => string | null) | null
  /** How many token requests reached the provider. */
  tokenRequests: number
  addClient(client: OidcClient): void
}

const b64url = (value: Buffer | string) => Buffer.from(value).toString('base64url')

function signJwt(header: Record<string, unknown>, payload: Record<string, unknown>, key: KeyObject): string {
  const input = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(payload))}`
  return `${input}.${createSign('RSA-SHA256').update(input).sign(key).toString('base64url')}`
}

async function listen(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return (server.address() as AddressInfo).port
}

const readBody = async (stream: IncomingMessage): Promise<Buffer> => {
  const chunks: Buffer[] = []
  for await (const chunk of stream) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}

const htmlEscape = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

/** startProvider starts the provider and its pass-through; both close after the test. `claimsInIdToken` false: the address only from UserInfo. */
export async function startProvider(t: TestContext, opts: { readonly claimsInIdToken?: boolean } = {}): Promise<TestProvider> {
  const front = createServer()
  const frontPort = await listen(front)
  const issuer = `http://127.0.0.1:${frontPort}`
  const kid = 'k1'
  const own = generateKeyPairSync('rsa', { modulusLength: 2048 })
  const other = generateKeyPairSync('rsa', { modulusLength: 2048 })
  const accounts = new Map<string, OidcAccount>()
  const clients: OidcClient[] = []
  let provider: Provider | null = null

  const build = () => {
    provider = new Provider(issuer, {
      clients: clients.map((c) => ({
        ...c,
        redirect_uris: [...c.redirect_uris],
        grant_types: ['authorization_code'],
        response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_basic',
      })),
      jwks: { keys: [{ ...own.privateKey.export({ format: 'jwk' }), kid, alg: 'RS256', use: 'sig' }] },
      findAccount: async (_ctx, id) => (accounts.has(id) ? { accountId: id, claims: async () => ({ sub: id, ...accounts.get(id)! }) } : undefined),
      claims: { openid: ['sub', 'amr'], email: ['email', 'email_verified', 'hd'], profile: ['name'] },
      features: { devInteractions: { enabled: false } },
      interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
      pkce: { required: () => true },
      // Like Keycloak, Entra ID and Google: the scopes' claims (and amr) in the ID token; false: only in UserInfo, as Core 5.4 allows.
      conformIdTokenClaims: opts.claimsInIdToken === false,
      cookies: { keys: ['a test provider, not a secret'] },
      ttl: { AccessToken: 600, AuthorizationCode: 60, Grant: 600, IdToken: 600, Interaction: 600, Session: 600 },
    })
  }

  /** The login page: one form naming the account, and whether this sign-in used a second factor. */
  const interaction = async (req: IncomingMessage, res: ServerResponse) => {
    const p = provider!
    const details = await p.interactionDetails(req, res)
    if (req.method === 'GET' && details.prompt.name === 'login') {
      res.setHeader('content-type', 'text/html; charset=utf-8')
      res.end(`<!doctype html><html lang="en"><title>Test provider</title><main><h1>Test provider sign-in</h1>
<form method="post" action="/interaction/${htmlEscape(details.uid)}"><label for="account">Account</label><input id="account" name="account" required>
<label><input type="checkbox" name="mfa" value="1"> Used a second factor</label><button type="submit">Continue</button></form></main></html>`)
      return
    }
    if (req.method === 'POST' && details.prompt.name === 'login') {
      const form = new URLSearchParams((await readBody(req)).toString('utf8'))
      const accountId = form.get('account') ?? ''
      if (!accounts.has(accountId)) {
        await p.interactionFinished(req, res, { error: 'access_denied', error_description: 'no such account' }, { mergeWithLastSubmission: false })
        return
      }
      await p.interactionFinished(
        req,
        res,
        { login: { accountId, amr: form.get('mfa') === '1' ? ['pwd', 'mfa'] : ['pwd'] } },
        { mergeWithLastSubmission: false },
      )
      return
    }
    // Consent: everything asked for, granted.
    const grant = new p.Grant({ accountId: details.session!.accountId!, clientId: details.params.client_id as string })
    grant.addOIDCScope(String(details.params.scope))
    const grantId = await grant.save()
    await p.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true })
  }

  const inner = createServer((req, res) => {
    if (req.url?.startsWith('/interaction/')) {
      interaction(req, res).catch((error: Error) => {
        res.statusCode = 500
        res.end(error.message)
      })
      return
    }
    provider!.callback()(req, res)
  })
  const innerPort = await listen(inner)

  const state: TestProvider = {
    issuer,
    accounts,
    tamper: 'none',
    onCallback: null,
    tokenRequests: 0,
    addClient(client) {
      const i = clients.findIndex((c) => c.client_id === client.client_id)
      if (i >= 0) clients.splice(i, 1)
      clients.push(client)
      build()
    },
  }

  /** tampered: the token answer with its ID token re-signed as the tamper mode says. */
  const tampered = (body: Buffer): Buffer => {
    const answer = JSON.parse(body.toString('utf8')) as { id_token?: string }
    if (state.tamper === 'none' || answer.id_token === undefined) return body
    const [h, p] = answer.id_token.split('.')
    const header = JSON.parse(Buffer.from(h!, 'base64url').toString('utf8')) as Record<string, unknown>
    const payload = JSON.parse(Buffer.from(p!, 'base64url').toString('utf8')) as Record<string, unknown>
    if (state.tamper === 'wrong-nonce') payload.nonce = 'a-nonce-of-another-request'
    if (state.tamper === 'wrong-issuer') payload.iss = 'http://127.0.0.1:1/another-issuer'
    const key = state.tamper === 'other-key' ? other.privateKey : own.privateKey
    return Buffer.from(JSON.stringify({ ...answer, id_token: signJwt({ ...header, kid }, payload, key) }))
  }

  // The pass-through: every request to the provider as it came (Host kept: the provider's URLs are the issuer's).
  front.on('request', (req, res) => {
    const token = req.url?.startsWith('/token') === true
    if (token) state.tokenRequests++
    // A token endpoint that takes the request and never answers.
    if (token && state.tamper === 'hang') {
      req.resume()
      return
    }
    const out = httpRequest({ host: '127.0.0.1', port: innerPort, method: req.method, path: req.url, headers: req.headers }, async (answer) => {
      const location = answer.headers.location
      if (!token && typeof location === 'string' && location.includes('/portal/sso/') && state.onCallback !== null) {
        const instead = state.onCallback(location)
        answer.resume()
        if (instead === null) {
          res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
          res.end('<!doctype html><title>Kept</title><p>The callback was kept from the browser.</p>')
        } else {
          res.writeHead(answer.statusCode ?? 302, { ...answer.headers, location: instead })
          res.end()
        }
        return
      }
      if (!token) {
        res.writeHead(answer.statusCode ?? 502, answer.headers)
        answer.pipe(res)
        return
      }
      const body = tampered(await readBody(answer))
      const headers = { ...answer.headers, 'content-length': String(body.length) }
      delete headers['transfer-encoding']
      res.writeHead(answer.statusCode ?? 502, headers)
      res.end(body)
    })
    out.on('error', () => {
      res.statusCode = 502
      res.end()
    })
    req.pipe(out)
  })

  t.after(async () => {
    front.closeAllConnections()
    inner.closeAllConnections()
    await Promise.all([new Promise((r) => front.close(r)), new Promise((r) => inner.close(r))])
  })
  build()
  return state
}

const SECRET = 'a client secret of the test, long enough to look like one'

/**
 * configure adds a provider as an operator would (the users service over the portal's sealed view, as the CLI's `sso add`),
 * registered with the test provider when one is given (null: an issuer that is not a test provider's).
 */
export async function configure(
  a: Running,
  provider: TestProvider | { readonly issuer: string },
  input: Partial<SsoProviderInput> & Pick<SsoProviderInput, 'id' | 'name'>,
): Promise<void> {
  const users = new Users({
    store: { ...a.store, portal: sealedPortal(a.store.portal, resolveKeyring(a.config)) },
    config: a.config,
    pepper: a.pepper,
    accounts: a.accounts,
    now: a.clock.now,
  })
  if ('addClient' in provider) provider.addClient({ client_id: `tessera-${input.id}`, client_secret: SECRET, redirect_uris: [users.sso.redirectUri(input.id)] })
  const saved = await users.sso.saveProvider(
    { actor: SYSTEM },
    {
      issuer: provider.issuer,
      clientId: `tessera-${input.id}`,
      clientSecret: SECRET,
      domains: [],
      joinAccountId: null,
      joinRole: null,
      mfa: 'portal',
      passwordAllowed: true,
      ...input,
    },
  )
  assert.ok(!isFailure(saved), isFailure(saved) ? saved.message : '')
}

/** A cookie jar of one origin's cookies (name=value; attributes ignored, an empty value deletes). */
export class Jar {
  readonly #cookies = new Map<string, string>()
  take(response: Response): void {
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(';')
      const eq = pair!.indexOf('=')
      const [name, value] = [pair!.slice(0, eq).trim(), pair!.slice(eq + 1).trim()]
      if (value === '') this.#cookies.delete(name)
      else this.#cookies.set(name, value)
    }
  }
  get(name: string): string | undefined {
    return this.#cookies.get(name)
  }
  header(): string {
    return [...this.#cookies].map(([k, v]) => `${k}=${v}`).join('; ')
  }
}

/**
 * throughProvider: a sign-in's way over plain HTTP, as a browser goes it: the portal's sign-in page (its pre-session and form
 * token), the start, then the provider's pages (login as `account`, consent) up to the redirect back, which is returned unopened.
 */
export async function throughProvider(a: Running, providerId: string, account: string, jar = new Jar()): Promise<{ callback: string; jar: Jar }> {
  const page = await fetch(`${a.url}/portal/sign-in`, { headers: { cookie: jar.header() } })
  jar.take(page)
  const csrf = /name="_csrf" value="([^"]+)"/.exec(await page.text())![1]!
  const started = await fetch(`${a.url}/portal/sso/${providerId}/start`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: a.url, cookie: jar.header() },
    body: new URLSearchParams({ _csrf: csrf }).toString(),
    redirect: 'manual',
  })
  assert.equal(started.status, 200, await started.text())
  let next = /^0;url=(.+)$/.exec(started.headers.get('refresh') ?? '')![1]!
  const at = new Jar()
  for (let hop = 0; hop < 12; hop++) {
    if (next.startsWith(a.url)) return { callback: next, jar }
    const answer = await fetch(next, { headers: { cookie: at.header() }, redirect: 'manual' })
    at.take(answer)
    const body = await answer.text()
    if (answer.status >= 300 && answer.status < 400) {
      next = new URL(answer.headers.get('location')!, next).href
      continue
    }
    const form = /<form method="post" action="([^"]+)"/.exec(body)
    assert.ok(form !== null, `a login page at ${next}: ${answer.status} ${body.slice(0, 300)}`)
    const login = await fetch(new URL(form[1]!, next), {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: at.header() },
      body: new URLSearchParams({ account }).toString(),
      redirect: 'manual',
    })
    at.take(login)
    next = new URL(login.headers.get('location')!, next).href
  }
  throw new Error('the provider never sent the browser back')
}
