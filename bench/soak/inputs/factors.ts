/**
 * The soak's inputs for managed TOTP factors (/totp/users/{userID}/…): enrolment, import,
 * activation, verification, resync, recovery codes and deletion, each valid case on a user of its
 * own account made by the cases before it (what they leave is kept per account), and each path
 * tried with the hostile IDs.
 */
import type { Case, Ctx, Request, Table } from '../types.ts'
import { bodyJson, code, form, hostileId, hostileText, keep, newSecret, raw, stepNow, take } from './common.ts'

/** A factor the soak enrolled: where, its secret, and the last step a code of it was taken at. */
interface Factor {
  readonly userID: string
  readonly factorID: string
  readonly secret: string
  last: number
}

const uid = (ctx: Ctx, prefix = 'user') => `${prefix}-${ctx.account.index}-${ctx.next()}`
const seg = (userID: string) => encodeURIComponent(userID)

/** enrol creates a pending factor for a new user (through createFactor); throws when refused. */
async function enrol(ctx: Ctx): Promise<Factor> {
  const userID = uid(ctx)
  const a = await ctx.call('createFactor', { params: { userID: seg(userID) }, ...form({ applicationID: 'Soak' }) })
  const body = bodyJson<{ factorID: string; secretKey: string }>(a.body)
  if (a.status !== 201 || body === null) throw new Error(`createFactor ${a.status}`)
  return { userID, factorID: body.factorID, secret: body.secretKey, last: -1 }
}

/** active gives an active factor whose next step is free: a kept one, or one enrolled and activated now. */
async function active(ctx: Ctx): Promise<Factor> {
  const kept = take<Factor>(ctx.kept, 'active')
  if (kept !== undefined && kept.last < stepNow() + 1) return kept
  const f = await enrol(ctx)
  const step = stepNow()
  const a = await ctx.call('activateFactor', { params: { userID: seg(f.userID), factorID: f.factorID }, ...form({ token: code(f.secret, step) }) })
  if (a.status !== 200) throw new Error(`activateFactor ${a.status}`)
  return { ...f, last: step }
}

/** hostilePath: the next hostile IDs, for the user and the factor. */
const hostilePath = (ctx: Ctx): Request => ({ params: { userID: hostileId(ctx.next()), factorID: hostileId(ctx.next()) } })

/** Cases every route under /totp/users/{userID} gets: hostile IDs, a user nobody made, a factor of another user. */
function pathAbuse(body: () => Request = () => ({})): Case[] {
  return [
    { name: 'hostile user and factor IDs', kind: 'hostile', make: (c) => ({ ...body(), ...hostilePath(c) }) },
    { name: 'a user nobody made', kind: 'hostile', make: (c) => ({ ...body(), params: { userID: seg(uid(c, 'nobody')), factorID: 'fct_0000000000000000' } }) },
    { name: 'the longest user ID', kind: 'boundary', make: (c) => ({ ...body(), params: { userID: `${c.next()}-`.padEnd(256, 'l'), factorID: 'fct_1' } }) },
    { name: 'an ID past the router', kind: 'hostile', make: () => ({ ...body(), params: { userID: 'r'.repeat(13_000), factorID: 'f'.repeat(13_000) } }) },
    {
      name: 'no key',
      kind: 'hostile',
      expect: [403],
      make: (c) => ({ ...body(), params: { userID: seg(uid(c)), factorID: 'fct_1' }, headers: { ...body().headers, 'x-api-key': '' } }),
    },
  ]
}

const idem = (ctx: Ctx) => ({ 'idempotency-key': `soak-${ctx.account.index}-${ctx.next() % 50}` })

export const FACTORS: Table = {
  createFactor: [
    {
      name: 'a new user',
      kind: 'valid',
      expect: [201],
      make: (c) => ({ params: { userID: seg(uid(c)) }, ...form({ applicationID: 'Soak', label: 'phone' }) }),
    },
    {
      name: 'with an Idempotency-Key (some repeated)',
      kind: 'boundary',
      make: (c) => ({ params: { userID: seg(`idem-${c.account.index}`) }, ...form({ applicationID: 'Soak' }, idem(c)) }),
    },
    {
      name: 'past FACTOR_MAX_PER_USER',
      kind: 'boundary',
      expect: [201, 409],
      make: (c) => ({
        params: { userID: seg(`crowded-${c.account.index}`) },
        ...form({ applicationID: 'Soak', profile: 'any', tokenLength: '8', algorithm: 'SHA256' }),
      }),
    },
    {
      name: 'an Idempotency-Key of 10 KB',
      kind: 'hostile',
      make: (c) => ({ params: { userID: seg(uid(c)) }, ...form({ applicationID: 'Soak' }, { 'idempotency-key': 'k'.repeat(10_000) }) }),
    },
    {
      name: 'fields of hostile text',
      kind: 'hostile',
      make: (c) => ({ params: { userID: seg(uid(c)) }, ...form({ applicationID: hostileText(c.next()), label: hostileText(c.next()) }) }),
    },
    ...pathAbuse(() => form({ applicationID: 'Soak' })),
  ],
  importFactor: [
    {
      name: 'a base32 secret, active',
      kind: 'valid',
      expect: [201],
      make: (c) => ({ params: { userID: seg(uid(c)) }, ...form({ secret: newSecret(), applicationID: 'Soak', status: 'active' }) }),
    },
    {
      name: 'an otpauth URI, pending',
      kind: 'valid',
      expect: [201],
      make: (c) => ({
        params: { userID: seg(uid(c)) },
        ...form({ otpURL: `otpauth://totp/Soak:x?secret=${newSecret()}&issuer=Soak&digits=8`, status: 'pending' }),
      }),
    },
    {
      name: 'a URI of 4096',
      kind: 'boundary',
      make: (c) => ({ params: { userID: seg(uid(c)) }, ...form({ otpURL: `otpauth://totp/x?secret=${newSecret()}&p=`.padEnd(4096, 'p') }) }),
    },
    { name: 'neither secret nor URI', kind: 'hostile', expect: [400], make: (c) => ({ params: { userID: seg(uid(c)) }, ...form({ applicationID: 'Soak' }) }) },
    {
      name: 'a URI of another scheme',
      kind: 'hostile',
      make: (c) => ({ params: { userID: seg(uid(c)) }, ...form({ otpURL: 'javascript:alert(1)//otpauth://totp/x?secret=AAAA' }) }),
    },
    {
      name: 'a secret with a lone surrogate',
      kind: 'hostile',
      make: (c) => ({ params: { userID: seg(uid(c)) }, ...form({ secret: raw('JBSW%ED%A0%80Y3DP') }) }),
    },
    ...pathAbuse(() => form({ secret: newSecret() })),
  ],
  listFactors: [
    { name: 'a user with a factor', kind: 'valid', expect: [200], make: async (c) => ({ params: { userID: seg((await active(c)).userID) } }) },
    { name: 'a user of many factors', kind: 'boundary', make: (c) => ({ params: { userID: seg(`crowded-${c.account.index}`) } }) },
    ...pathAbuse(),
  ],
  activateFactor: [
    {
      name: "a pending factor's first code",
      kind: 'valid',
      expect: [200],
      make: async (c) => {
        const f = await enrol(c)
        return { params: { userID: seg(f.userID), factorID: f.factorID }, ...form({ token: code(f.secret) }), note: f.userID }
      },
    },
    {
      name: 'a wrong code, with a rateLimitKey',
      kind: 'boundary',
      make: async (c) => {
        const f = await enrol(c)
        return { params: { userID: seg(f.userID), factorID: f.factorID }, ...form({ token: '000000', rateLimitKey: `ip-${c.account.index}` }) }
      },
    },
    { name: 'a token of hostile text', kind: 'hostile', make: async (c) => ({ ...(await factorPath(c)), ...form({ token: hostileText(c.next()) }) }) },
    ...pathAbuse(() => form({ token: '123456' })),
  ],
  verifyUser: [
    {
      name: 'the right code',
      kind: 'valid',
      expect: [200],
      make: async (c) => {
        const f = await active(c)
        f.last = stepNow() + 1
        keep(c.kept, 'active', f)
        return { params: { userID: seg(f.userID) }, ...form({ token: code(f.secret, f.last) }) }
      },
    },
    {
      name: 'wrong codes for one user (attempt limit, lockout)',
      kind: 'boundary',
      make: async (c) => ({ params: { userID: seg(`target-${c.account.index}`) }, ...form({ token: '999999', rateLimitKey: 'attacker' }) }),
    },
    {
      name: 'a rateLimitKey of 257',
      kind: 'hostile',
      expect: [400, 404],
      make: async (c) => ({ params: { userID: seg(uid(c)) }, ...form({ token: '123456', rateLimitKey: 'k'.repeat(257) }) }),
    },
    ...pathAbuse(() => form({ token: '123456' })),
  ],
  resyncFactor: [
    {
      name: 'two codes ten minutes ahead',
      kind: 'valid',
      expect: [200],
      make: async (c) => {
        const f = await active(c)
        const s = stepNow() + 19
        return { params: { userID: seg(f.userID), factorID: f.factorID }, ...form({ token: code(f.secret, s), nextToken: code(f.secret, s + 1) }) }
      },
    },
    {
      name: 'codes out of order',
      kind: 'boundary',
      make: async (c) => {
        const f = await active(c)
        keep(c.kept, 'active', f)
        return {
          params: { userID: seg(f.userID), factorID: f.factorID },
          ...form({ token: code(f.secret, stepNow() + 3), nextToken: code(f.secret, stepNow() + 2) }),
        }
      },
    },
    {
      name: 'tokens of hostile text',
      kind: 'hostile',
      make: async (c) => ({ ...(await factorPath(c)), ...form({ token: hostileText(c.next()), nextToken: hostileText(c.next()) }) }),
    },
    ...pathAbuse(() => form({ token: '123456', nextToken: '654321' })),
  ],
  createRecoveryCodes: [
    {
      name: 'for a user with a factor',
      kind: 'valid',
      expect: [201],
      make: async (c) => {
        // The user is not put back among the active ones: another case making its codes again would void the ones kept here for recoverUser.
        const f = await active(c)
        return { params: { userID: seg(f.userID) }, note: f.userID }
      },
      after: (c, a, r) => {
        const codes = bodyJson<{ recoveryCodes: string[] }>(a.body)?.recoveryCodes
        if (a.status === 201 && codes !== undefined) keep(c.kept, 'codes', { userID: r.note, codes })
      },
    },
    {
      name: 'again, with an Idempotency-Key',
      kind: 'boundary',
      make: async (c) => ({ params: { userID: seg(`crowded-${c.account.index}`) }, headers: idem(c) }),
    },
    { name: 'a body it does not take', kind: 'hostile', make: async (c) => ({ params: { userID: seg(uid(c)) }, ...form({ pad: 'p'.repeat(20_000) }) }) },
    ...pathAbuse(),
  ],
  recoverUser: [
    {
      name: 'a recovery code',
      kind: 'valid',
      expect: [200],
      make: async (c) => {
        const r = take<{ userID: string; codes: string[] }>(c.kept, 'codes')
        if (r === undefined) throw new Error('no recovery codes kept yet')
        const one = r.codes.shift()!
        if (r.codes.length > 0) keep(c.kept, 'codes', r)
        return { params: { userID: seg(r.userID) }, ...form({ code: one }) }
      },
    },
    {
      name: 'a used or made-up code',
      kind: 'boundary',
      make: async (c) => ({ params: { userID: seg((await active(c)).userID) }, ...form({ code: 'AAAA-BBBB-CCCC' }) }),
    },
    { name: 'a code of 65', kind: 'hostile', expect: [400, 404], make: (c) => ({ params: { userID: seg(uid(c)) }, ...form({ code: 'c'.repeat(65) }) }) },
    ...pathAbuse(() => form({ code: 'AAAA-BBBB' })),
  ],
  deleteFactor: [
    {
      name: 'a pending factor',
      kind: 'valid',
      expect: [204],
      make: async (c) => {
        const f = await enrol(c)
        return { params: { userID: seg(f.userID), factorID: f.factorID } }
      },
    },
    {
      name: 'a factor of another user',
      kind: 'boundary',
      expect: [404],
      make: async (c) => ({ params: { userID: seg(uid(c)), factorID: (await enrol(c)).factorID } }),
    },
    ...pathAbuse(),
  ],
  deleteUser: [
    { name: 'a user with a factor', kind: 'valid', expect: [204], make: async (c) => ({ params: { userID: seg((await enrol(c)).userID) } }) },
    { name: 'the crowded user', kind: 'boundary', expect: [204, 404], make: (c) => ({ params: { userID: seg(`crowded-${c.account.index}`) } }) },
    ...pathAbuse(),
  ],
}

/** factorPath is a real user's pending factor, for the cases whose hostility is in the body. */
async function factorPath(ctx: Ctx): Promise<Request> {
  const f = await enrol(ctx)
  return { params: { userID: seg(f.userID), factorID: f.factorID } }
}
