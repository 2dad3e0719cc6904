/**
 * The portal's operator pages through the real app: hidden from everyone but operators,
 * sign-ups and subscription requests approved (once, however many approvals arrive at
 * once), accounts suspended, plans changed, the whole audit trail read. In a browser, by
 * labels, with axe on every page: test/browser/portal-operator.test.ts.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { get, startApp, type Running } from '../../support/helper.ts'
import { askedFor, linkIn, mails, PortalClient, portalUser, signedInClient, waitForMail } from '../../support/portal-helper.ts'
import { isFailure } from '../../../src/services/outcome.ts'
import { SYSTEM } from '../../../src/domain/accounts.ts'

const ENV = { SIGNUP_MODE: 'approval', SUBSCRIPTION_APPROVAL: 'operator' }

const PAGES = ['/portal/operator', '/portal/operator/accounts', '/portal/operator/sign-ups', '/portal/operator/subscriptions', '/portal/operator/audit']

/** operator: a signed-in operator who belongs to no account. */
async function operator(app: Running) {
  return signedInClient(app, { operator: true, accountId: null })
}

test('operator pages are a 404 to everyone but operators, for reading and for posting; signed out, they lead to sign-in', async (t) => {
  const app = await startApp(t, ENV)
  const { client: owner } = await signedInClient(app, { role: 'owner' })
  const { client: op } = await operator(app)
  const account = `/portal/operator/accounts/${app.accountId}`
  for (const path of [...PAGES, account]) {
    assert.equal((await owner.get(path)).status, 404, path)
    assert.doesNotMatch(owner.last!.text, /operator/i, `${path}: nothing tells the page exists`)
    assert.equal((await op.get(path)).status, 200, path)
  }
  await owner.get('/portal/home')
  for (const [path, fields] of [
    [`${account}/status`, { status: 'suspended' }],
    [`${account}/plan`, { quota: '5' }],
    [`${account}/plan/reset`, {}],
    ['/portal/operator/subscriptions/decide', { accountId: app.accountId, region: 'eu', group: 'totp', decision: 'refuse' }],
    ['/portal/operator/sign-ups/usr_x/approve', {}],
    ['/portal/operator/sign-ups/usr_x/refuse', {}],
  ] as const) {
    assert.equal((await owner.post(path, fields, { from: '/portal/home' })).status, 404, path)
  }
  assert.equal((await app.accounts.getAccount(app.accountId))?.status, 'active', 'nothing changed')
  const anonymous = await new PortalClient(app.url).get('/portal/operator/audit')
  assert.equal(anonymous.status, 303)
  assert.equal(anonymous.location, '/portal/sign-in?next=%2Fportal%2Foperator%2Faudit')
  assert.match((await op.get('/portal/home')).text, /<a href="\/portal\/operator">Operator<\/a>/, "the operator's menu leads there")
})

test('an operator approves a pending sign-up: the user is emailed and can sign in; a second approval changes nothing; a refused one cannot sign in', async (t) => {
  const app = await startApp(t, ENV)
  const newcomer = new PortalClient(app.url)
  const email = 'new.comer@example.com'
  const password = 'a long enough passphrase'
  assert.equal((await newcomer.post('/portal/sign-up', { email, password, account: 'Newco' }, { from: '/portal/sign-up' })).status, 200)
  const verify = new URL(linkIn(await waitForMail(app, email)))
  assert.equal(
    (await newcomer.post('/portal/verify-email', { token: verify.searchParams.get('token')!, password }, { from: `${verify.pathname}${verify.search}` }))
      .status,
    200,
  )
  const refused = await newcomer.post('/portal/sign-in', { email, password }, { from: '/portal/sign-in' })
  assert.equal(refused.status, 403, 'pending: no sign-in yet')

  const { client: op, user: opUser } = await operator(app)
  const queue = await op.get('/portal/operator/sign-ups')
  assert.match(queue.text, /new\.comer@example\.com<\/td><td>yes<\/td>/, 'listed, its address confirmed')
  assert.match(queue.text, />Newco<\/a>/, 'with its account')
  assert.match(queue.text, /<button type="submit">Approve new\.comer@example\.com<\/button>/)
  assert.match((await op.get('/portal/operator')).text, /<a href="\/portal\/operator\/sign-ups">1 sign-up waiting for approval<\/a>/, 'the summary counts it')
  const user = (await app.store.portal.findUserByEmail(email))!
  const approved = await op.post(`/portal/operator/sign-ups/${user.id}/approve`, {}, { from: '/portal/operator/sign-ups' })
  assert.equal(approved.status, 303)
  assert.equal(approved.location, '/portal/operator/sign-ups?done=user-approved')
  assert.match((await op.get(approved.location!)).text, /role="status">The sign-up is approved/)
  const told = await waitForMail(app, email, 3)
  assert.deepEqual(
    mails(app, email).map((m) => m.subject),
    ['Confirm your email address for Tessera', 'Your Tessera sign-up is awaiting approval', 'Your Tessera account is approved'],
  )
  assert.equal(linkIn(told), `${app.config.publicBaseUrl}/portal/sign-in`)
  await newcomer.signIn(email, password)
  assert.equal((await newcomer.follow('/portal/home')).status, 200)

  assert.equal((await op.post(`/portal/operator/sign-ups/${user.id}/approve`, {}, { from: '/portal/operator/sign-ups' })).status, 409, 'decided already')
  assert.equal((await op.post('/portal/operator/sign-ups/usr_nobody/approve', {}, { from: '/portal/operator/sign-ups' })).status, 404)
  const events = (await app.accounts.auditEvents({ action: 'user.approve', limit: 10 })).items
  assert.deepEqual(
    events.map((e) => [e.actor, e.target.id, e.outcome]),
    [[`portal-user:${opUser.id}`, user.id, 'success']],
  )
  assert.ok(events[0]!.accountId !== null, "in the account's trail too")

  const other = await portalUser(app, { email: 'other@example.com', accountId: null })
  await app.store.portal.updateUser(other.user.id, { status: 'pending' }, null)
  assert.equal((await op.post(`/portal/operator/sign-ups/${other.user.id}/refuse`, {}, { from: '/portal/operator/sign-ups' })).status, 303)
  assert.equal((await app.store.portal.getUser(other.user.id))?.status, 'disabled')
  const again = await new PortalClient(app.url).post('/portal/sign-in', { email: other.email, password: other.password }, { from: '/portal/sign-in' })
  assert.equal(again.status, 403)
})

test('an operator approves a pending subscription: of 20 approvals at once one applies, with one event; the key then works there; a refusal leaves it off', async (t) => {
  const app = await startApp(t, ENV)
  const { account, apiKey } = await askedFor(app, 'Queue & Co')
  assert.equal((await get(app.url, '/totp/ping', apiKey)).status, 403, 'pending allows nothing')
  const { client: op, user: opUser } = await operator(app)
  const queue = await op.get('/portal/operator/subscriptions')
  assert.match(queue.text, /<button type="submit">Approve TOTP in eu for Queue &amp; Co<\/button>/)
  assert.match(queue.text, /<button type="submit" class="secondary">Refuse TOTP in us for Queue &amp; Co<\/button>/)
  const fields = { accountId: account.id, region: 'eu', group: 'totp', decision: 'approve', back: 'queue' }
  const statuses = await Promise.all(Array.from({ length: 20 }, () => op.post('/portal/operator/subscriptions/decide', fields)))
  assert.deepEqual(statuses.map((s) => s.status).sort(), [303, ...Array(19).fill(409)])
  assert.equal(statuses.find((s) => s.status === 303)!.location, '/portal/operator/subscriptions?done=approved')
  const events = (await app.accounts.auditEvents({ action: 'subscription.approve', accountId: account.id, limit: 50 })).items
  assert.deepEqual(
    events.filter((e) => e.outcome === 'success').map((e) => e.actor),
    [`portal-user:${opUser.id}`],
    'one success event',
  )
  assert.equal((await get(app.url, '/totp/ping', apiKey)).status, 200, 'the key works in eu now')

  const refused = await op.post(
    '/portal/operator/subscriptions/decide',
    { ...fields, region: 'us', decision: 'refuse', back: 'account' },
    { from: `/portal/operator/accounts/${account.id}` },
  )
  assert.equal(refused.status, 303)
  assert.equal(refused.location, `/portal/operator/accounts/${account.id}?done=refused#subscriptions`)
  assert.deepEqual(
    (await app.accounts.listSubscriptions(account.id)).map((s) => `${s.region}:${s.status}`),
    ['eu:active', 'us:inactive'],
  )
  assert.match((await op.get('/portal/operator/subscriptions')).text, /No subscription request is waiting/)
  assert.equal(
    (await op.post('/portal/operator/subscriptions/decide', { ...fields, region: 'us', decision: 'refuse' }, { from: '/portal/operator/subscriptions' }))
      .status,
    409,
    'not pending',
  )
  assert.equal((await op.post('/portal/operator/subscriptions/decide', { ...fields, region: 'mars' })).status, 400)
  assert.equal((await op.post('/portal/operator/subscriptions/decide', { ...fields, decision: 'maybe' })).status, 400)
})

test('an operator suspends and reactivates an account (its key is refused meanwhile) and changes its plan; bad plans are shown, not saved', async (t) => {
  const app = await startApp(t, ENV)
  const { client: op, user: opUser } = await operator(app)
  const page = `/portal/operator/accounts/${app.accountId}`
  assert.match((await op.get(page)).text, /<button type="submit" class="danger">Suspend test<\/button>/)
  const suspended = await op.post(`${page}/status`, { status: 'suspended' })
  assert.equal(suspended.status, 303)
  assert.equal(suspended.location, `${page}?done=suspended`)
  assert.equal((await get(app.url, '/totp/ping', app.key)).status, 403)
  const shown = await op.get(suspended.location!)
  assert.match(shown.text, /role="status">The account is suspended/)
  assert.match(shown.text, /<button type="submit">Reactivate test<\/button>/)
  assert.equal((await op.post(`${page}/status`, { status: 'active' })).status, 303)
  assert.equal((await get(app.url, '/totp/ping', app.key)).status, 200)
  assert.equal((await op.post(`${page}/status`, { status: 'deleted' }, { from: page })).status, 422)
  assert.equal((await op.get('/portal/operator/accounts/acc_nope')).status, 404)

  const bad = await op.post(
    `${page}/plan`,
    { rate: '10', burst: '0', quota: '100', period: 'day', 'weight-totp': '1', 'weight-converter': '1' },
    { from: page },
  )
  assert.equal(bad.status, 422)
  assert.match(bad.text, /role="alert" id="plan-error">The plan was not saved: burst must be a whole number from 1 to 1000000000\./)
  assert.match(
    bad.text,
    /id="plan-burst" name="burst" type="text" inputmode="decimal" required value="0" aria-invalid="true"/,
    'the value is kept, the field marked',
  )
  assert.equal((await app.accounts.getPlan(app.accountId))?.own, false, 'not saved')
  const good = await op.post(`${page}/plan`, { rate: '10', burst: '20', quota: '100', period: 'day', 'weight-totp': '3', 'weight-converter': '1' })
  assert.equal(good.location, `${page}?done=plan-set`)
  assert.deepEqual(await app.accounts.getPlan(app.accountId), {
    own: true,
    plan: { rate: 10, burst: 20, quota: 100, period: 'day', weights: { totp: 3, converter: 1 } },
  })
  assert.match((await op.get(page)).text, /This account has its own plan/)
  assert.equal((await op.post(`${page}/plan/reset`, {})).location, `${page}?done=plan-reset`)
  assert.equal((await app.accounts.getPlan(app.accountId))?.own, false)
  const trail = (await app.accounts.auditEvents({ accountId: app.accountId, actor: `portal-user:${opUser.id}`, limit: 20 })).items
  assert.deepEqual(
    trail.map((e) => `${e.action}:${e.outcome}`).reverse(),
    ['account.suspend:success', 'account.activate:success', 'plan.set:success', 'plan.reset:success'],
    "audited as the operator's",
  )
})

test('accounts are searched by name, filtered by status and paged; the audit trail is filtered and paged; bad cursors are a 400', async (t) => {
  const app = await startApp(t, ENV)
  for (let i = 0; i < 55; i++) assert.ok(!isFailure(await app.accounts.createAccount({ actor: SYSTEM }, { name: `Widget ${i}` })))
  const { client: op } = await operator(app)
  const first = await op.get('/portal/operator/accounts?name=widget')
  assert.equal((first.text.match(/>Manage Widget \d+</g) ?? []).length, 50)
  const next = /<a href="([^"]+)" rel="next">Next accounts<\/a>/.exec(first.text)
  assert.ok(next, 'a next page')
  const second = await op.get(next[1]!.replaceAll('&amp;', '&'))
  assert.equal((second.text.match(/>Manage Widget \d+</g) ?? []).length, 5)
  assert.doesNotMatch(second.text, /rel="next"/)
  assert.doesNotMatch((await op.get('/portal/operator/accounts?name=widget')).text, />Manage test</)
  assert.match(first.text, /<label for="name">Account name contains<\/label>/)

  const widget = (await app.accounts.listAccounts({ name: 'Widget 7', limit: 1 })).items[0]!
  await op.post(`/portal/operator/accounts/${widget.id}/status`, { status: 'suspended' }, { from: `/portal/operator/accounts/${widget.id}` })
  const suspended = await op.get('/portal/operator/accounts?status=suspended')
  assert.deepEqual(
    [...suspended.text.matchAll(/>Manage ([^<]+)</g)].map((m) => m[1]),
    ['Widget 7'],
  )

  const audit = await op.get('/portal/operator/audit?action=account.suspend')
  assert.equal((audit.text.match(/<td>account\.suspend<\/td>/g) ?? []).length, 1)
  assert.doesNotMatch(audit.text, /<td>account\.create<\/td>/)
  const created = await op.get('/portal/operator/audit?action=account.create&actor=system')
  assert.equal((created.text.match(/<td>account\.create<\/td>/g) ?? []).length, 50, 'a page of 50, newest first')
  assert.match(created.text, /Widget 54/)
  const older = /<a href="([^"]+)" rel="next">Older events<\/a>/.exec(created.text)
  assert.ok(older)
  assert.match(older[1]!, /actor=system&amp;action=account\.create&amp;after=evt_/, 'the filters are kept')
  const rest = await op.get(older[1]!.replaceAll('&amp;', '&'))
  assert.equal((rest.text.match(/<td>account\.create<\/td>/g) ?? []).length, 6, '56 accounts in all')
  const mine = await op.get(`/portal/operator/audit?account=${widget.id}`)
  assert.deepEqual(
    [...mine.text.matchAll(/<td>(account\.\w+)<\/td>/g)].map((m) => m[1]),
    ['account.suspend', 'account.create'],
  )
  for (const path of [
    '/portal/operator/audit?after=nope',
    '/portal/operator/accounts?after=nope',
    '/portal/operator/sign-ups?after=nope',
    '/portal/operator/subscriptions?after=nope',
  ]) {
    const res = await op.get(path)
    assert.equal(res.status, 400, path)
    assert.match(res.text, /role="alert">That page link is not valid/)
  }
})

test('operator forms without their CSRF token, or from another site, are refused with a 403 and change nothing', async (t) => {
  const app = await startApp(t, ENV)
  const { account } = await askedFor(app, 'Guarded')
  const { client: op } = await operator(app)
  const page = `/portal/operator/accounts/${account.id}`
  await op.get(page)
  const attempts = [
    () => op.post(`${page}/status`, { status: 'suspended' }, { csrf: false }),
    () => op.post(`${page}/status`, { status: 'suspended', _csrf: 'forged' }, { csrf: false }),
    () => op.post(`${page}/status`, { status: 'suspended' }, { from: page, origin: 'https://evil.example' }),
    () => op.post(`${page}/plan`, { quota: '1' }, { csrf: false }),
    () => op.post('/portal/operator/subscriptions/decide', { accountId: account.id, region: 'eu', group: 'totp', decision: 'approve' }, { csrf: false }),
  ]
  for (const attempt of attempts) {
    const res = await attempt()
    assert.equal(res.status, 403)
    assert.match(res.text, /role="alert">This form has expired/)
  }
  assert.equal((await app.accounts.getAccount(account.id))?.status, 'active')
  assert.equal((await app.accounts.getPlan(account.id))?.own, false)
  assert.ok((await app.accounts.listSubscriptions(account.id)).every((s) => s.status === 'pending'))
})
