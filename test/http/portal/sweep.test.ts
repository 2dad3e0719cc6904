/**
 * The portal's edge sweep: every page, signed in as an operator who owns the account (so that
 * every handler runs past its guard), sent hostile queries and hostile bodies of every
 * content type, with a genuine CSRF token and without. No answer is a 5xx, and every error
 * is an HTML page (or, for a download, plain text).
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { startApp } from '../../support/helper.ts'
import { PortalClient, portalUser } from '../../support/portal-helper.ts'
import { FORM_LIMIT } from '../../../src/portal/web/plugin.ts'

const GETS = [
  '/',
  '/home',
  '/sign-in',
  '/sign-up',
  '/reset',
  '/reset/confirm',
  '/verify-email',
  '/two-factor',
  '/two-factor/recovered',
  '/invitations/accept',
  '/security',
  '/security/two-factor/setup',
  '/accounts/:a',
  '/accounts/:a/overview',
  '/accounts/:a/start',
  '/accounts/:a/keys',
  '/accounts/:a/keys/:k',
  '/accounts/:a/keys/:k/roll',
  '/accounts/:a/keys/:k/revoke',
  '/accounts/:a/subscriptions',
  '/accounts/:a/team',
  '/accounts/:a/usage',
  '/accounts/:a/usage.csv',
  '/accounts/:a/usage/keys',
  '/accounts/:a/audit',
  '/operator',
  '/operator/accounts',
  '/operator/accounts/:a',
  '/operator/audit',
  '/operator/sign-ups',
  '/operator/subscriptions',
  '/operator/sso',
  '/sso/kc/callback',
  '/sso/%2e%2e/callback',
]

// Sign-out and the security forms that end sessions come last in their turn: the client signs in again before each path.
const POSTS = [
  '/sign-in',
  '/sign-up',
  '/verify-email',
  '/reset',
  '/reset/confirm',
  '/two-factor',
  '/invitations/accept',
  '/accounts',
  '/security/password',
  '/security/recovery-codes',
  '/security/sign-out-others',
  '/security/two-factor/enable',
  '/security/two-factor/off',
  '/security/two-factor/setup',
  '/security/sso-link',
  '/security/sso-unlink',
  '/sso/kc/start',
  '/accounts/:a/keys',
  '/accounts/:a/keys/:k/roll',
  '/accounts/:a/keys/:k/revoke',
  '/accounts/:a/subscriptions',
  '/accounts/:a/team/invite',
  '/accounts/:a/team/role',
  '/accounts/:a/team/remove',
  '/accounts/:a/team/cancel',
  '/accounts/:a/team/leave',
  '/operator/accounts/:a/plan',
  '/operator/accounts/:a/plan/reset',
  '/operator/accounts/:a/status',
  '/operator/subscriptions/decide',
  '/sign-out',
]

/** Queries no page expects: lone surrogates, bad escapes, arrays, huge values, other sites. */
const QUERIES = [
  '?token=%ED%A0%80',
  '?token=%',
  '?token=a&token=b',
  `?token=${'A'.repeat(5000)}`,
  '?next=https://evil.example',
  '?next=%0d%0aSet-Cookie:x=1',
  '?days=abc',
  '?days=-1',
  '?days=99999999999999999999',
  '?from=2026-02-30&to=1999-01-01',
  '?by=everything',
  '?cursor=%FF%FE',
  '?cursor=bm90IGEgY3Vyc29y',
  '?page=-3',
  '?page=1e309',
  '?action=%00',
  '?status=%ED%B0%80',
  '?name=%25%5F%5C',
  '?account=acc_%27%22',
]

/** Form fields every handler might read, each given hostile values. */
const FIELDS = [
  'email',
  'password',
  'provider',
  'sso-link-proof',
  'sso-unlink-proof',
  'account',
  'name',
  'token',
  'code',
  'recovery',
  'current',
  'role',
  'userId',
  'region',
  'group',
  'action',
  'grace',
  'expires',
  'date',
  'groups',
  'regions',
  'status',
  'rate',
  'burst',
  'quota',
  'period',
  'weightTotp',
  'weightConverter',
  'accountId',
  'decision',
  'confirm',
  'next',
  'everywhere',
  'back',
]

const HOSTILE_VALUES = ['', '\ud800', 'a'.repeat(3000), '-1', '1e309', 'NaN', '<script>alert(1)</script>', '../../etc/passwd', 'owner', 'approve', '\u0000']

test('every portal page and form: hostile queries and bodies of every content type get a 4xx or a page, never a 5xx', async (t) => {
  const app = await startApp(t)
  const op = await portalUser(app, { operator: true })
  const client = new PortalClient(app.url)
  await client.signIn(op.email, op.password)
  // Signing in again after hostile forms: an hour later, past the throttle's locks (the sweep's
  // own sign-in and password forms count failures for its address and email, as they should).
  const again = async () => {
    app.clock.advance(3_600_000)
    await client.signIn(op.email, op.password)
  }
  const fill = (path: string) => `/portal${path.replace(':a', app.accountId).replace(':k', app.keyId)}`
  const failures: string[] = []
  const seen = new Map<number, number>()
  const check = async (what: string, res: Response) => {
    const body = await res.text()
    seen.set(res.status, (seen.get(res.status) ?? 0) + 1)
    if (res.status >= 500) failures.push(`${what}: ${res.status} ${body.slice(0, 200)}`)
    const type = res.headers.get('content-type') ?? ''
    if (res.status >= 400 && !/^text\/(html|plain|csv)/.test(type)) failures.push(`${what}: ${res.status} as ${type}`)
  }
  const send = (path: string, init: RequestInit = {}) =>
    fetch(`${app.url}${path}`, {
      ...init,
      redirect: 'manual',
      headers: { cookie: client.cookieHeader, origin: app.url, ...(init.headers as Record<string, string> | undefined) },
    })

  for (const path of GETS) {
    for (const query of ['', ...QUERIES]) await check(`GET ${path}${query.slice(0, 40)}`, await send(`${fill(path)}${query}`))
  }

  const formsOf = (csrf: string) => {
    const forms: [string, string, string | Buffer][] = []
    for (const value of HOSTILE_VALUES) {
      const fields = new URLSearchParams({ _csrf: csrf })
      for (const f of FIELDS) fields.append(f, value)
      forms.push([`form ${JSON.stringify(value.slice(0, 10))}`, 'application/x-www-form-urlencoded', fields.toString()])
    }
    const arrays = new URLSearchParams({ _csrf: csrf })
    for (const f of FIELDS) {
      arrays.append(f, 'a')
      arrays.append(f, 'b')
    }
    forms.push(['form: every field twice', 'application/x-www-form-urlencoded', arrays.toString()])
    forms.push(['form: bad escapes', 'application/x-www-form-urlencoded', `_csrf=${csrf}&email=%&password=%E0%A4%A&name=%ED%A0%80`])
    forms.push(['form: too large', 'application/x-www-form-urlencoded', `_csrf=${csrf}&name=${'x'.repeat(FORM_LIMIT)}`])
    forms.push(['form: no csrf', 'application/x-www-form-urlencoded', 'email=a%40b.example&password=x'])
    forms.push(['json', 'application/json', JSON.stringify({ _csrf: csrf, email: ['x'], password: { a: 1 }, name: null })])
    forms.push(['json: broken', 'application/json', '{"_csrf":'])
    forms.push(['multipart without boundary', 'multipart/form-data', '--x\r\n'])
    forms.push([
      'multipart',
      'multipart/form-data; boundary=XyZ',
      Buffer.from(`--XyZ\r\ncontent-disposition: form-data; name="_csrf"\r\n\r\n${csrf}\r\n--XyZ--\r\n`),
    ])
    forms.push(['text', 'text/plain', 'hello'])
    forms.push(['no type', '', 'hello'])
    return forms
  }

  for (const path of POSTS) {
    // Signed in afresh for each path: an earlier form may have changed the password or ended the session.
    if ((await client.get('/portal/home')).status !== 200) await again()
    await client.get('/portal/home')
    for (const [label, type, body] of formsOf(client.csrf())) {
      if ((await client.get('/portal/home')).status !== 200) await again()
      const headers: Record<string, string> = type === '' ? {} : { 'content-type': type }
      await check(`POST ${path} (${label})`, await send(fill(path), { method: 'POST', headers, body: typeof body === 'string' ? body : new Uint8Array(body) }))
    }
  }
  assert.deepEqual(failures, [])
  // The handlers ran past their guards: forms were refused for their fields, not only for their tokens.
  for (const status of [400, 403, 409, 413, 415, 422]) assert.ok((seen.get(status) ?? 0) > 0, `some answers were ${status}: ${JSON.stringify([...seen])}`)
})
