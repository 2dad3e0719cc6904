/**
 * The single sign-on block of the storage contract (storeContract runs it on every store): a
 * provider saved once and replaced by its id; a source's requests in flight capped under
 * parallel starts; a request taken once however many callbacks race; a subject bound to one
 * user and a user to one subject per provider, under races too; a user made with their
 * identity or not at all; a provider's deletion taking its identities, requests and sessions.
 */
import assert from 'node:assert/strict'
import type { AuditDraft } from '../../../src/domain/accounts.ts'
import type { NewSsoProvider, NewSsoRequest, NewUser } from '../../../src/domain/portal.ts'
import type { Store } from '../../../src/storage/ports.ts'
import { newId } from '../../../src/domain/ids.ts'

type WithStore = (title: string, body: (s: Store) => Promise<void>) => void

const event = (action: string): AuditDraft => ({
  actor: 'cli',
  action,
  target: { type: 'sso-provider', id: 'p' },
  accountId: null,
  ip: null,
  outcome: 'success',
  detail: {},
})

const later = (ms: number) => new Date(Date.now() + ms).toISOString()

const provider = (id: string, extra: Partial<NewSsoProvider> = {}): NewSsoProvider => ({
  id,
  name: `Provider ${id}`,
  issuer: `https://${id}.example.com`,
  clientId: 'tessera',
  clientSecret: 'v1.sealed',
  domains: ['example.com', 'example.org'],
  joinAccountId: null,
  joinRole: null,
  mfa: 'portal',
  passwordAllowed: true,
  ...extra,
})

const request = (providerId: string, stateHash: string, ip = '192.0.2.7', extra: Partial<NewSsoRequest> = {}): NewSsoRequest => ({
  stateHash,
  providerId,
  browserHash: 'b',
  nonce: 'n',
  verifier: 'v',
  next: '/portal/home',
  linkUserId: null,
  ip,
  expiresAt: later(600_000),
  ...extra,
})

const newUser = (email: string): NewUser => ({
  id: newId('usr'),
  email,
  passwordHash: null,
  emailVerifiedAt: new Date().toISOString(),
  status: 'active',
  operator: false,
  totpSecret: null,
  totpEnabledAt: null,
  createdAt: new Date().toISOString(),
})

export function ssoContract(withStore: WithStore): void {
  withStore('sso: providers saved, replaced by id, listed and read back', async ({ portal, access, audit }) => {
    const accountId = newId('acc')
    await access.createAccount({ id: accountId, name: 'a', status: 'active', createdAt: new Date().toISOString() }, event('account.create'))
    assert.equal(await portal.saveSsoProvider(provider('kc'), event('sso.provider-create')), true)
    assert.equal(await portal.saveSsoProvider(provider('ad', { domains: [] }), event('sso.provider-create')), true)
    const replaced = provider('kc', { name: 'Keycloak', joinAccountId: accountId, joinRole: 'developer', mfa: 'amr', passwordAllowed: false })
    assert.equal(await portal.saveSsoProvider(replaced, event('sso.provider-update')), false, 'the same id replaces')
    const got = await portal.getSsoProvider('kc')
    assert.deepEqual({ ...got, createdAt: undefined, updatedAt: undefined }, { ...replaced, createdAt: undefined, updatedAt: undefined })
    assert.deepEqual((await portal.getSsoProvider('ad'))?.domains, [])
    assert.deepEqual(
      (await portal.listSsoProviders()).map((p) => p.id),
      ['ad', 'kc'],
    )
    assert.equal(await portal.getSsoProvider('nope'), null)
    const actions = (await audit.list({ limit: 10 })).items.map((e) => e.action)
    assert.deepEqual(actions.filter((a) => a.startsWith('sso.')).sort(), ['sso.provider-create', 'sso.provider-create', 'sso.provider-update'])
  })

  withStore('sso: requests in flight capped per source under parallel starts, taken once, expired ones neither taken nor counted', async ({ portal }) => {
    await portal.saveSsoProvider(provider('kc'), event('sso.provider-create'))
    const now = new Date().toISOString()
    const limits = { perIp: 5, total: 8 }
    const made = await Promise.all(Array.from({ length: 30 }, (_, i) => portal.createSsoRequest(request('kc', `s${i}`), limits, now)))
    assert.equal(made.filter(Boolean).length, 5, 'five of thirty parallel starts from one source')
    assert.equal(await portal.createSsoRequest(request('kc', 'other', '198.51.100.9'), limits, now), true, 'another source has its own')
    const many = await Promise.all(Array.from({ length: 20 }, (_, i) => portal.createSsoRequest(request('kc', `m${i}`, `203.0.113.${i + 10}`), limits, now)))
    assert.ok(many.every(Boolean), 'at the total, the oldest give way')
    let live = 0
    for (const state of ['other', ...Array.from({ length: 30 }, (_, i) => `s${i}`), ...Array.from({ length: 20 }, (_, i) => `m${i}`)]) {
      if ((await portal.takeSsoRequest(state, now)) !== null) live++
    }
    assert.equal(live, 8, 'never more than the total')
    for (let i = 0; i < 5; i++) await portal.createSsoRequest(request('kc', `again${i}`), limits, now)
    const takes = await Promise.all(Array.from({ length: 10 }, () => portal.takeSsoRequest('again0', now)))
    assert.equal(takes.filter((t) => t !== null).length, 1, 'one of ten parallel callbacks')
    assert.equal(takes.find((t) => t !== null)?.nonce, 'n')
    await portal.createSsoRequest(request('kc', 'old', '203.0.113.1', { expiresAt: later(-1000) }), { perIp: 5, total: 100 }, later(-5000))
    assert.equal(await portal.takeSsoRequest('old', now), null, 'expired')
    assert.equal(await portal.pruneSsoRequests(now), 1)
  })

  withStore(
    'sso: a subject binds one user, a user one subject per provider, under races; a user made with their identity or not at all',
    async ({ portal }) => {
      await portal.saveSsoProvider(provider('kc'), event('sso.provider-create'))
      // With a password: unbinding their only identity leaves them a way in.
      const taken = { ...newUser('taken@example.com'), passwordHash: '$scrypt$ln=15,r=8,p=3$c2FsdA$aGFzaA' }
      assert.equal(await portal.createUser(taken, event('user.sign-up')), true)
      // Two callbacks of one new subject at once: one user.
      const tries = [newUser('new@example.com'), newUser('NEW@example.com'), newUser('new2@example.com')]
      const made = await Promise.all(tries.map((u) => portal.createSsoUser(u, { providerId: 'kc', subject: 'sub-1', email: u.email }, event('user.sign-up'))))
      assert.equal(made.filter(Boolean).length, 1, 'one user for one subject')
      const found = await portal.findSsoIdentity('kc', 'sub-1')
      assert.equal(found?.user.id, tries[made.indexOf(true)]!.id)
      assert.equal(found?.identity.subject, 'sub-1')
      // An address that is taken: nothing written.
      assert.equal(
        await portal.createSsoUser(newUser('Taken@example.com'), { providerId: 'kc', subject: 'sub-2', email: 'taken@example.com' }, event('user.sign-up')),
        false,
      )
      assert.equal(await portal.findSsoIdentity('kc', 'sub-2'), null)
      // Binding: of two subjects for one user at once, one; a bound subject never moves.
      const bound = await Promise.all(
        ['sub-3', 'sub-4'].map((subject) =>
          portal.bindSsoIdentity({ providerId: 'kc', subject, userId: taken.id, email: taken.email }, event('user.sso-link')),
        ),
      )
      assert.equal(bound.filter(Boolean).length, 1)
      assert.equal(
        await portal.bindSsoIdentity({ providerId: 'kc', subject: 'sub-1', userId: taken.id, email: 'x@example.com' }, event('user.sso-link')),
        false,
      )
      assert.equal((await portal.ssoIdentitiesOf(taken.id)).length, 1)
      await portal.touchSsoIdentity('kc', 'sub-1', 'renamed@example.com', new Date().toISOString())
      assert.equal((await portal.findSsoIdentity('kc', 'sub-1'))?.identity.email, 'renamed@example.com')
      assert.equal(await portal.unbindSsoIdentity(taken.id, 'kc', 'no-session', event('user.sso-unlink')), 'unbound')
      assert.equal(await portal.unbindSsoIdentity(taken.id, 'kc', 'no-session', event('user.sso-unlink')), 'none')
      // Bound to a provider that is gone: nothing written, no error.
      assert.equal(await portal.bindSsoIdentity({ providerId: 'gone', subject: 's', userId: taken.id, email: taken.email }, event('user.sso-link')), false)
      assert.equal(
        await portal.createSsoUser(newUser('x@example.com'), { providerId: 'gone', subject: 's', email: 'x@example.com' }, event('user.sign-up')),
        false,
      )
      assert.equal(await portal.findUserByEmail('x@example.com'), null)
      // The same issuer again keeps the identities; another issuer is another namespace of subjects: they go.
      await portal.saveSsoProvider(provider('kc', { name: 'Renamed' }), event('sso.provider-update'))
      assert.notEqual(await portal.findSsoIdentity('kc', 'sub-1'), null)
      await portal.saveSsoProvider(provider('kc', { issuer: 'https://elsewhere.example.com' }), event('sso.provider-update'))
      assert.equal(await portal.findSsoIdentity('kc', 'sub-1'), null)
    },
  )

  withStore(
    'sso: of two unlinks at once by a user without a password, one: a user keeps a way in; an unlink ends their other sessions through it',
    async ({ portal }) => {
      await portal.saveSsoProvider(provider('kc'), event('sso.provider-create'))
      await portal.saveSsoProvider(provider('ad'), event('sso.provider-create'))
      const user = newUser('two@example.com')
      await portal.createSsoUser(user, { providerId: 'kc', subject: 'k', email: user.email }, event('user.sign-up'))
      await portal.bindSsoIdentity({ providerId: 'ad', subject: 'a', userId: user.id, email: user.email }, event('user.sso-link'))
      const base = { userId: user.id, expiresAt: later(3_600_000), twoFactorPending: false, ip: null, userAgent: null }
      await portal.createSession({ ...base, idHash: 'via-kc-here', ssoProviderId: 'kc' })
      await portal.createSession({ ...base, idHash: 'via-kc-elsewhere', ssoProviderId: 'kc' })
      await portal.createSession({ ...base, idHash: 'via-ad', ssoProviderId: 'ad' })
      const both = await Promise.all([
        portal.unbindSsoIdentity(user.id, 'kc', 'via-kc-here', event('user.sso-unlink')),
        portal.unbindSsoIdentity(user.id, 'ad', 'via-kc-here', event('user.sso-unlink')),
      ])
      assert.deepEqual([...both].sort(), ['last', 'unbound'])
      assert.equal((await portal.ssoIdentitiesOf(user.id)).length, 1, 'one way in is left')
      const now = new Date().toISOString()
      const unbound = both[0] === 'unbound' ? 'kc' : 'ad'
      if (unbound === 'kc') {
        assert.notEqual(await portal.findSession('via-kc-here', now), null, 'the session that asked stays')
        assert.equal(await portal.findSession('via-kc-elsewhere', now), null, 'another session through it ends')
        assert.notEqual(await portal.findSession('via-ad', now), null)
      } else assert.equal(await portal.findSession('via-ad', now), null)
    },
  )

  withStore('sso: a session keeps its provider; deleting the provider ends its sessions and takes its identities and requests', async ({ portal }) => {
    await portal.saveSsoProvider(provider('kc'), event('sso.provider-create'))
    const user = newUser('a@example.com')
    await portal.createSsoUser(user, { providerId: 'kc', subject: 's', email: user.email }, event('user.sign-up'))
    const base = { userId: user.id, expiresAt: later(3_600_000), twoFactorPending: false, ip: null, userAgent: null }
    await portal.createSession({ ...base, idHash: 'sso-s', ssoProviderId: 'kc' })
    await portal.createSession({ ...base, idHash: 'pw-s' })
    const now = new Date().toISOString()
    assert.equal((await portal.findSession('sso-s', now))?.session.ssoProviderId, 'kc')
    assert.equal((await portal.findSession('pw-s', now))?.session.ssoProviderId, null)
    await portal.createSsoRequest(request('kc', 'st'), { perIp: 5, total: 100 }, now)
    assert.equal(await portal.deleteSsoProvider('kc', event('sso.provider-delete')), true)
    assert.equal(await portal.deleteSsoProvider('kc', event('sso.provider-delete')), false)
    assert.equal(await portal.findSession('sso-s', now), null, 'signed in through it: ended')
    assert.notEqual(await portal.findSession('pw-s', now), null, 'a password session stays')
    assert.equal(await portal.findSsoIdentity('kc', 's'), null)
    assert.equal(await portal.takeSsoRequest('st', now), null)
    assert.notEqual(await portal.getUser(user.id), null, 'the user stays')
  })
}
