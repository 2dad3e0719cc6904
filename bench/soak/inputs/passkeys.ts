/**
 * The soak's inputs for passkeys (/totp/users/{userID}/passkeys/…, /totp/passkeys/…): registration and sign-in
 * with a software authenticator (test/support/soft-authenticator.ts) for the relying party the
 * soak's accounts are set up with, and credentials bent or broken: another origin, a replayed
 * counter, a challenge never issued, JSON nested deep or of the wrong shape.
 */
import type { PublicKeyCredentialCreationOptionsJSON, PublicKeyCredentialRequestOptionsJSON } from '@simplewebauthn/server'
import { SoftAuthenticator } from '../../../test/support/soft-authenticator.ts'
import { ORIGIN, RP_ID } from '../accounts.ts'
import type { Case, Ctx, Request, Table } from '../types.ts'
import { bodyJson, form, hostileId, hostileText, json, keep, take } from './common.ts'

const seg = encodeURIComponent

function authenticator(ctx: Ctx): SoftAuthenticator {
  const held = ctx.kept.get('authenticator')?.[0] as SoftAuthenticator | undefined
  if (held !== undefined) return held
  const made = new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID })
  ctx.kept.set('authenticator', [made])
  return made
}

async function registrationOptions(ctx: Ctx, userID: string): Promise<PublicKeyCredentialCreationOptionsJSON> {
  const a = await ctx.call('passkeyRegistrationOptions', { params: { userID: seg(userID) }, ...json({ userName: userID }) })
  const options = bodyJson<{ options: PublicKeyCredentialCreationOptionsJSON }>(a.body)?.options
  if (a.status !== 200 || options === undefined) throw new Error(`passkeyRegistrationOptions ${a.status}`)
  return options
}

/**
 * passkeyUser gives a user with a passkey for this case alone (a kept one, or one registered now):
 * two sign-ins of one credential at once would sign counters the server may see out of order.
 * The case's `after` gives it back (`release`).
 */
async function passkeyUser(ctx: Ctx): Promise<string> {
  const kept = take<string>(ctx.kept, 'passkey users')
  if (kept !== undefined) return kept
  const userID = `pk-${ctx.account.index}-${ctx.next()}`
  const credential = authenticator(ctx).register(await registrationOptions(ctx, userID))
  const a = await ctx.call('registerPasskey', { params: { userID: seg(userID) }, ...json({ credential }) })
  if (a.status !== 201) throw new Error(`registerPasskey ${a.status}`)
  return userID
}

/** release gives a passkey user back for later cases (its ID is the request's note). */
const release = (ctx: Ctx, _a: unknown, r: Request) => {
  if (r.note !== undefined) keep(ctx.kept, 'passkey users', r.note, 50)
}

async function authenticationOptions(ctx: Ctx, userID: string): Promise<PublicKeyCredentialRequestOptionsJSON> {
  const a = await ctx.call('passkeyAuthenticationOptions', { params: { userID: seg(userID) }, ...json({}) })
  const options = bodyJson<{ options: PublicKeyCredentialRequestOptionsJSON }>(a.body)?.options
  if (a.status !== 200 || options === undefined) throw new Error(`passkeyAuthenticationOptions ${a.status}`)
  return options
}

/**
 * discoverable gives a credential ID of a passkey for this case alone (a kept one, or one registered now, for a user of its
 * own): a sign-in without a user ID signs with it. The case's `after` gives it back (`releaseCredential`).
 */
async function discoverable(ctx: Ctx): Promise<string> {
  const kept = take<string>(ctx.kept, 'discoverable credentials')
  if (kept !== undefined) return kept
  const userID = `dpk-${ctx.account.index}-${ctx.next()}`
  const credential = authenticator(ctx).register(await registrationOptions(ctx, userID))
  const a = await ctx.call('registerPasskey', { params: { userID: seg(userID) }, ...json({ credential }) })
  if (a.status !== 201) throw new Error(`registerPasskey ${a.status}`)
  return credential.id
}

const releaseCredential = (ctx: Ctx, _a: unknown, r: Request) => {
  if (r.note !== undefined) keep(ctx.kept, 'discoverable credentials', r.note, 50)
}

async function discoverableOptions(ctx: Ctx): Promise<PublicKeyCredentialRequestOptionsJSON> {
  const a = await ctx.call('passkeyDiscoverableOptions', json({}))
  const options = bodyJson<{ options: PublicKeyCredentialRequestOptionsJSON }>(a.body)?.options
  if (a.status !== 200 || options === undefined) throw new Error(`passkeyDiscoverableOptions ${a.status}`)
  return options
}

/** JSON nested `depth` arrays deep: a parser that recurses may run out of stack. */
const deep = (depth: number) => `{"credential":${'['.repeat(depth)}${']'.repeat(depth)}}`

/** Hostile cases of every passkey route: IDs, bodies nested deep, too large, of the wrong shape. */
function abuse(body: () => Request): Case[] {
  return [
    { name: 'hostile user IDs', kind: 'hostile', make: (c) => ({ ...body(), params: { userID: hostileId(c.next()) } }) },
    { name: 'JSON nested 100 000 deep', kind: 'hostile', make: (c) => ({ params: { userID: seg(`pk-${c.next()}`) }, ...json(deep(100_000)) }) },
    {
      name: 'JSON over the body limit',
      kind: 'hostile',
      expect: [413],
      make: (c) => ({ params: { userID: seg(`pk-${c.next()}`) }, ...json({ label: 'x'.repeat(40_000) }) }),
    },
    {
      name: 'JSON of the wrong shape',
      kind: 'hostile',
      make: (c) => ({ params: { userID: seg(`pk-${c.next()}`) }, ...json({ credential: 'x', userVerification: 7, __proto__: { a: 1 } }) }),
    },
    {
      name: 'no key',
      kind: 'hostile',
      expect: [403],
      make: (c) => ({ ...body(), params: { userID: seg(`pk-${c.next()}`) }, headers: { ...body().headers, 'x-api-key': '' } }),
    },
  ]
}

/** Hostile cases of the account's passkey routes (no user in the path): bodies nested deep, too large, of the wrong shape, no key. */
function accountAbuse(body: () => Request): Case[] {
  return [
    { name: 'JSON nested 100 000 deep', kind: 'hostile', make: () => json(deep(100_000)) },
    { name: 'JSON over the body limit', kind: 'hostile', expect: [413], make: () => json({ credential: { id: 'x'.repeat(40_000) } }) },
    { name: 'JSON of the wrong shape', kind: 'hostile', make: () => json({ credential: 'x', userVerification: 7, rateLimitKey: {}, __proto__: { a: 1 } }) },
    { name: 'hostile text', kind: 'hostile', make: (c) => json({ userVerification: hostileText(c.next()), rateLimitKey: hostileText(c.next()) }) },
    { name: 'no key', kind: 'hostile', expect: [403], make: () => ({ ...body(), headers: { ...body().headers, 'x-api-key': '' } }) },
  ]
}

export const PASSKEYS: Table = {
  passkeyRegistrationOptions: [
    {
      name: 'a new user',
      kind: 'valid',
      expect: [200],
      make: (c) => ({ params: { userID: seg(`pk-${c.account.index}-${c.next()}`) }, ...json({ userName: 'jane' }) }),
    },
    {
      name: 'every option, as a form',
      kind: 'boundary',
      expect: [200],
      make: (c) => ({
        params: { userID: seg(`pk-${c.next()}`) },
        ...form({
          userName: 'n'.repeat(64),
          displayName: 'd'.repeat(64),
          userVerification: 'required',
          residentKey: 'required',
          authenticatorAttachment: 'platform',
        }),
      }),
    },
    {
      name: 'options over and over for one user (challenge caps)',
      kind: 'boundary',
      make: (c) => ({ params: { userID: seg(`pk-busy-${c.account.index}`) }, ...json({}) }),
    },
    {
      name: 'names of hostile text',
      kind: 'hostile',
      make: (c) => ({ params: { userID: seg(`pk-${c.next()}`) }, ...json({ userName: hostileText(c.next()), displayName: hostileText(c.next()) }) }),
    },
    ...abuse(() => json({})),
  ],
  registerPasskey: [
    {
      name: 'a new credential',
      kind: 'valid',
      expect: [201],
      make: async (c) => {
        const userID = `pk-${c.account.index}-${c.next()}`
        const credential = authenticator(c).register(await registrationOptions(c, userID))
        return { params: { userID: seg(userID) }, ...json({ credential, label: 'laptop' }), note: userID }
      },
      after: (c, a, r) => {
        if (a.status === 201 && r.note !== undefined) keep(c.kept, 'passkey users', r.note, 50)
      },
    },
    {
      name: 'another origin',
      kind: 'boundary',
      make: async (c) => {
        const userID = `pk-${c.next()}`
        return {
          params: { userID: seg(userID) },
          ...json({ credential: authenticator(c).register(await registrationOptions(c, userID), { origin: 'https://evil.example' }) }),
        }
      },
    },
    {
      name: 'a challenge never issued',
      kind: 'hostile',
      make: (c) => {
        const userID = `pk-${c.next()}`
        const options = { challenge: 'AAAA', rp: { id: RP_ID, name: 'x' }, user: { id: 'dXNlcg', name: 'u', displayName: 'u' }, pubKeyCredParams: [] }
        return { params: { userID: seg(userID) }, ...json({ credential: authenticator(c).register(options as PublicKeyCredentialCreationOptionsJSON) }) }
      },
    },
    ...abuse(() => json({ credential: {} })),
  ],
  passkeyAuthenticationOptions: [
    {
      name: 'a user with a passkey',
      kind: 'valid',
      expect: [200],
      make: async (c) => {
        const userID = await passkeyUser(c)
        return { params: { userID: seg(userID) }, ...json({}), note: userID }
      },
      after: release,
    },
    {
      name: 'as a form, user verification required',
      kind: 'boundary',
      expect: [200],
      make: async (c) => {
        const userID = await passkeyUser(c)
        return { params: { userID: seg(userID) }, ...form({ userVerification: 'required' }), note: userID }
      },
      after: release,
    },
    { name: 'a user without a passkey', kind: 'boundary', expect: [404], make: (c) => ({ params: { userID: seg(`nopk-${c.next()}`) }, ...json({}) }) },
    ...abuse(() => json({})),
  ],
  authenticatePasskey: [
    {
      name: 'a signed challenge',
      kind: 'valid',
      expect: [200],
      make: async (c) => {
        const userID = await passkeyUser(c)
        return {
          params: { userID: seg(userID) },
          ...json({ credential: authenticator(c).authenticate(await authenticationOptions(c, userID)), rateLimitKey: 'ip' }),
          note: userID,
        }
      },
      after: release,
    },
    {
      name: 'a counter that went back (a cloned authenticator)',
      kind: 'boundary',
      make: async (c) => {
        // A user of its own, never given back: its credential's counter is behind the server's after this.
        const userID = await passkeyUser(c)
        return {
          params: { userID: seg(userID) },
          ...json({ credential: authenticator(c).authenticate(await authenticationOptions(c, userID), { counter: 0 }) }),
        }
      },
    },
    {
      name: 'the same assertion twice',
      kind: 'hostile',
      make: async (c) => {
        const userID = await passkeyUser(c)
        const body = json({ credential: authenticator(c).authenticate(await authenticationOptions(c, userID)) })
        await c.call('authenticatePasskey', { params: { userID: seg(userID) }, ...body })
        return { params: { userID: seg(userID) }, ...body, note: userID }
      },
      after: release,
    },
    ...abuse(() => json({ credential: {} })),
  ],
  passkeyDiscoverableOptions: [
    { name: 'an empty JSON object', kind: 'valid', expect: [200], make: () => json({}) },
    { name: 'no body at all', kind: 'boundary', make: () => ({}) },
    { name: 'user verification required, as a form', kind: 'boundary', expect: [200], make: () => form({ userVerification: 'required' }) },
    ...accountAbuse(() => json({})),
  ],
  authenticateDiscoverablePasskey: [
    {
      name: 'a signed challenge',
      kind: 'valid',
      expect: [200],
      make: async (c) => {
        const id = await discoverable(c)
        return { ...json({ credential: authenticator(c).authenticate(await discoverableOptions(c), { credential: id }), rateLimitKey: 'ip' }), note: id }
      },
      after: releaseCredential,
    },
    {
      name: "a user handle that is not the passkey user's",
      kind: 'boundary',
      expect: [400],
      make: async (c) => {
        const id = await discoverable(c)
        const signed = authenticator(c).authenticate(await discoverableOptions(c), { credential: id })
        return { ...json({ credential: { ...signed, response: { ...signed.response, userHandle: 'AAAA' } } }), note: id }
      },
      after: releaseCredential,
    },
    {
      name: 'a credential the account does not have',
      kind: 'boundary',
      expect: [404],
      make: async (c) => {
        const stranger = new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID })
        stranger.register({ challenge: 'AAAA', rp: { id: RP_ID, name: 'x' }, user: { id: 'dXNlcg', name: 'u', displayName: 'u' }, pubKeyCredParams: [] })
        return json({ credential: stranger.authenticate(await discoverableOptions(c)) })
      },
    },
    {
      name: 'the same assertion twice',
      kind: 'hostile',
      make: async (c) => {
        const id = await discoverable(c)
        const body = json({ credential: authenticator(c).authenticate(await discoverableOptions(c), { credential: id }) })
        await c.call('authenticateDiscoverablePasskey', body)
        return { ...body, note: id }
      },
      after: releaseCredential,
    },
    {
      name: "a user's own challenge",
      kind: 'hostile',
      make: async (c) => {
        const userID = await passkeyUser(c)
        return { ...json({ credential: authenticator(c).authenticate(await authenticationOptions(c, userID)) }), note: userID }
      },
      after: release,
    },
    ...accountAbuse(() => json({ credential: {} })),
  ],
}
