import { test } from 'node:test'
import assert from 'node:assert/strict'
import Fastify, { type FastifyInstance } from 'fastify'
import { pepperKey } from '../../crypto/keyed.ts'
import type { Role } from '../../domain/portal.ts'
import { caller, type Kit, pageRoute, whoIn } from './kit.ts'
import { newSessionToken } from './session.ts'

/** Ann is a viewer of acc_1, Olga an operator (an owner of every account); acc_2 is nobody's. */
const ann = newSessionToken()
const olga = newSessionToken()
const users = new Map([
  [ann.token, { id: 'usr_ann', email: 'ann@example.com', operator: false, memberships: [{ accountId: 'acc_1', role: 'viewer' as Role }] }],
  [olga.token, { id: 'usr_olga', email: 'olga@example.com', operator: true, memberships: [] }],
])

/** Just what the route hooks read of the kit: sessions, memberships, accounts, the pepper, the cookie's name and whether operators need SSO. */
const kit = {
  sessionCookie: 'tessera_session',
  config: { ssoOperatorsRequired: false },
  pepper: pepperKey('a test pepper of at least thirty-two characters'),
  users: {
    sessions: {
      find: async (token: string) => {
        const user = users.get(token)
        return user === undefined ? null : { session: { idHash: `hash-${user.id}`, twoFactorPending: false }, user }
      },
      membershipsOf: async (userId: string) => [...users.values()].find((u) => u.id === userId)?.memberships ?? [],
    },
  },
  accounts: { getAccount: async (id: string) => (id === 'acc_1' || id === 'acc_2' ? { id, name: `Account ${id}` } : null) },
} as unknown as Kit

async function app(): Promise<FastifyInstance> {
  const app = Fastify()
  app.get('/home', pageRoute(kit, 'signed-in'), async (request) => caller(request).user.email)
  app.get('/accounts/:accountId/keys', pageRoute(kit, 'viewer'), async (request) => `${whoIn(request).account.id} as ${whoIn(request).role}`)
  app.post('/accounts/:accountId/keys', pageRoute(kit, 'developer'), async (request) => whoIn(request).role)
  app.get('/operator', pageRoute(kit, 'operator'), async (request) => caller(request).user.email)
  app.get('/unchecked', { schema: { hide: true } }, async (request) => caller(request).user.email)
  await app.ready()
  return app
}

const as = (session: { token: string } | null) => (session === null ? {} : { cookie: `tessera_session=${session.token}` })

test('route hooks: a caller signed out is sent to sign in (a GET comes back to its page)', async () => {
  const a = await app()
  const get = await a.inject({ url: '/home?x=1' })
  assert.equal(get.statusCode, 303)
  assert.equal(get.headers.location, '/portal/sign-in?next=%2Fhome')
  const post = await a.inject({ method: 'POST', url: '/accounts/acc_1/keys' })
  assert.equal(post.statusCode, 303)
  assert.equal(post.headers.location, '/portal/sign-in')
  await a.close()
})

test('route hooks: the handler reads the caller the hook let through, with their account and role', async () => {
  const a = await app()
  assert.equal((await a.inject({ url: '/home', headers: as(ann) })).body, 'ann@example.com')
  assert.equal((await a.inject({ url: '/accounts/acc_1/keys', headers: as(ann) })).body, 'acc_1 as viewer')
  // An operator acts as an owner of every account.
  assert.equal((await a.inject({ url: '/accounts/acc_2/keys', headers: as(olga) })).body, 'acc_2 as owner')
  assert.equal((await a.inject({ method: 'POST', url: '/accounts/acc_2/keys', headers: as(olga) })).body, 'owner')
  assert.equal((await a.inject({ url: '/operator', headers: as(olga) })).body, 'olga@example.com')
  await a.close()
})

test("route hooks: someone else's account and the operator pages are 404s, a role too low a 403", async () => {
  const a = await app()
  const other = await a.inject({ url: '/accounts/acc_2/keys', headers: as(ann) })
  const missing = await a.inject({ url: '/accounts/acc_9/keys', headers: as(ann) })
  const operator = await a.inject({ url: '/operator', headers: as(ann) })
  for (const answer of [other, missing, operator]) {
    assert.equal(answer.statusCode, 404)
    assert.match(answer.body, /There is no such page, or it is not yours to see/)
  }
  const short = await a.inject({ method: 'POST', url: '/accounts/acc_1/keys', headers: as(ann) })
  assert.equal(short.statusCode, 403)
  assert.match(short.body, /Your role in Account acc_1 \(viewer\) does not allow this/)
  await a.close()
})

test('route hooks: a handler that reads a caller without a hook fails loudly (a programming error, never an anonymous caller)', async () => {
  const a = await app()
  const answer = await a.inject({ url: '/unchecked', headers: as(ann) })
  assert.equal(answer.statusCode, 500)
  await a.close()
})
