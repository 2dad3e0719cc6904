/**
 * The chaos run's mixed load: a few paced loops, each sending its requests round-robin to the
 * nodes that are up, and replaying what was accepted on another node to prove it is refused
 * there. What they learn goes in the ledger that the verdict reads; every request is in the
 * recorder.
 */
import { randomBytes, randomUUID } from 'node:crypto'
import { Secret } from 'otpauth'
import type { PublicKeyCredentialRequestOptionsJSON } from '@simplewebauthn/server'
import { codeOf, wrong } from '../../test/support/factors.ts'
import { textPages } from '../../test/support/hostile.ts'
import { form, json, jsonBody, type Recorder } from './client.ts'
import { sleep } from './infra.ts'
import type { ChaosNode, Cluster } from './nodes.ts'
import type { Provisioned } from './provision.ts'

/** A replay: what an accepted code or assertion got when sent again on another node (anything but 200 holds). */
export interface Replays {
  sent: number
  accepted: number
  /** Answers by status and code (`400 OTP_REUSED`, `no answer`). */
  readonly answers: Map<string, number>
}

export interface Ledger {
  /** Accepted codes (200), by kind: `stateless`, `managed`, `passkey`; each key a subject and time step (or challenge). */
  readonly accepted: Record<'stateless' | 'managed' | 'passkey', Map<string, number>>
  readonly replays: Record<'stateless' | 'managed' | 'passkey', Replays>
  /** Conversion jobs by Idempotency-Key: the job IDs its 202s named (one, always), and when the first came. */
  readonly jobs: Map<string, { ids: Set<string>; acceptedAt: number }>
  /** Synchronous conversions: whole PNGs, and 200s that were not a whole PNG. */
  conversions: { whole: number; broken: number }
  /** Portal sign-ins: signed in on one node and the session used on another. */
  portal: { signedIn: number; crossNode: number; crossRefused: number }
  /** Codes accepted lately (the last 40 s), to send again once Redis is back from its restart: its AOF must have kept their replay marks. */
  readonly recent: Accepted[]
  /** What those replays after Redis's restart got. */
  readonly afterRestart: Replays
}

/** An accepted code: the request that was accepted, and when. */
export interface Accepted {
  readonly kind: 'stateless' | 'managed'
  readonly path: string
  readonly fields: Record<string, string>
  readonly at: number
}

export function newLedger(): Ledger {
  const replays = (): Replays => ({ sent: 0, accepted: 0, answers: new Map() })
  return {
    accepted: { stateless: new Map(), managed: new Map(), passkey: new Map() },
    replays: { stateless: replays(), managed: replays(), passkey: replays() },
    jobs: new Map(),
    conversions: { whole: 0, broken: 0 },
    portal: { signedIn: 0, crossNode: 0, crossRefused: 0 },
    recent: [],
    afterRestart: replays(),
  }
}

const bump = (m: Map<string, number>, k: string) => m.set(k, (m.get(k) ?? 0) + 1)

/** remember keeps an accepted code for `replayRecent`, forgetting those older than 40 s. */
function remember(ledger: Ledger, accepted: Accepted): void {
  ledger.recent.push(accepted)
  const old = ledger.recent.findIndex((a) => a.at >= accepted.at - 40_000)
  if (old > 0) ledger.recent.splice(0, old)
}

/**
 * replayRecent sends again, once Redis is back, every code accepted in the 20 s before it went away (still within a code's window of a
 * step either side): all must be refused, or the restart lost replay marks that Redis had acknowledged.
 */
export async function replayRecent(ctx: LoadContext, downAt: number): Promise<void> {
  const codes = ctx.ledger.recent.filter((a) => a.at <= downAt && a.at >= downAt - 20_000)
  await Promise.all(
    codes.map(async (a) => {
      const node = ctx.cluster.pick()
      if (node === null) return
      const again = await ctx.rec.call({
        loop: a.kind,
        op: 'replay after Redis restart',
        node,
        path: a.path,
        ...withKey(form(a.fields), { 'x-api-key': ctx.p.key }),
      })
      tallyReplay(ctx.ledger.afterRestart, again?.status, again?.code)
    }),
  )
}

export interface LoadContext {
  readonly cluster: Cluster
  readonly rec: Recorder
  readonly p: Provisioned
  readonly ledger: Ledger
  /** Epoch ms at which the loops stop starting new work. */
  readonly until: number
}

/** paced runs `fn` again and again, each turn taking at least `intervalMs`, until the load ends. */
async function paced(ctx: LoadContext, intervalMs: number, fn: () => Promise<void>): Promise<void> {
  while (Date.now() < ctx.until) {
    const started = Date.now()
    try {
      await fn()
    } catch (error) {
      // A harness bug must not pass for the service's: stop the run loudly.
      throw new Error(`load loop failed: ${(error as Error).stack}`)
    }
    await sleep(Math.max(5, intervalMs - (Date.now() - started)))
  }
}

/** replay sends an accepted answer again and tallies what came back. */
function tallyReplay(r: Replays, status: number | undefined, code: string | null | undefined): void {
  r.sent++
  if (status === 200) r.accepted++
  bump(r.answers, status === undefined ? 'no answer' : `${status} ${code ?? ''}`.trim())
}

/** stateless: getOTP for a new secret on one node, verifyOTP of its code on another, the same code again on a third. */
async function stateless(ctx: LoadContext): Promise<void> {
  const { cluster, rec, p, ledger } = ctx
  const key = { 'x-api-key': p.key }
  const secret = new Secret({ buffer: new Uint8Array(randomBytes(20)).buffer }).base32
  const a = cluster.pick()
  if (a === null) return
  const got = await rec.call({ loop: 'stateless', op: 'getOTP', node: a, path: '/totp/getOTP', ...withKey(form({ secret }), key) })
  if (got?.status !== 200) return
  const { otp } = json<{ otp: string }>(got)
  const b = cluster.pick([a])
  if (b === null) return
  const verified = await rec.call({ loop: 'stateless', op: 'verifyOTP', node: b, path: '/totp/verifyOTP', ...withKey(form({ secret, token: otp }), key) })
  if (verified?.status !== 200) return
  bump(ledger.accepted.stateless, secret)
  remember(ledger, { kind: 'stateless', path: '/totp/verifyOTP', fields: { secret, token: otp }, at: Date.now() })
  const c = cluster.pick([a, b])
  if (c === null) return
  const again = await rec.call({ loop: 'stateless', op: 'verifyOTP replay', node: c, path: '/totp/verifyOTP', ...withKey(form({ secret, token: otp }), key) })
  tallyReplay(ledger.replays.stateless, again?.status, again?.code)
}

const withKey = (body: { headers: Record<string, string>; body: string }, key: Record<string, string>) => ({
  headers: { ...body.headers, ...key },
  body: body.body,
})

/** managed: the next user not yet tried in this time step verifies its code on one node; the accepted code is replayed on another. */
function managed(ctx: LoadContext): () => Promise<void> {
  let next = 0
  return async () => {
    const { cluster, rec, p, ledger } = ctx
    const now = Date.now()
    const users = p.managed
    let user = null
    for (let i = 0; i < users.length && user === null; i++) {
      const u = users[(next + i) % users.length]!
      if (u.lastStep < Math.floor(now / 1000 / u.factor.tokenValidity)) {
        user = u
        next = (next + i + 1) % users.length
      }
    }
    if (user === null) return void (await sleep(200))
    const step = Math.floor(now / 1000 / user.factor.tokenValidity)
    user.lastStep = step
    const token = codeOf(user.factor, now)
    const key = { 'x-api-key': p.key }
    const path = `/totp/users/${user.id}/verify`
    const a = cluster.pick()
    if (a === null) return
    const ok = await rec.call({ loop: 'managed', op: 'verify', node: a, path, ...withKey(form({ token }), key) })
    if (ok?.status !== 200) return
    bump(ledger.accepted.managed, `${user.id}@${step}`)
    remember(ledger, { kind: 'managed', path, fields: { token }, at: Date.now() })
    const b = cluster.pick([a])
    if (b === null) return
    const again = await rec.call({ loop: 'managed', op: 'verify replay', node: b, path, ...withKey(form({ token }), key) })
    tallyReplay(ledger.replays.managed, again?.status, again?.code)
  }
}

/** guesses: wrong codes for one user, one to each node at once, to hold the lockout and the attempt limit to their numbers across nodes. */
async function guesses(ctx: LoadContext): Promise<void> {
  const { cluster, rec, p } = ctx
  const user = p.guessed
  const token = wrong(user.factor, Date.now())
  const up = cluster.nodes.filter((n) => n.up)
  await Promise.all(
    up.map((node) =>
      rec.call({ loop: 'guess', op: 'verify (wrong code)', node, path: `/totp/users/${user.id}/verify`, ...withKey(form({ token }), { 'x-api-key': p.key }) }),
    ),
  )
}

/** passkeys: options on one node, the soft authenticator's answer on another; the accepted answer replayed on a third. */
function passkeys(ctx: LoadContext): () => Promise<void> {
  let next = 0
  return async () => {
    const { cluster, rec, p, ledger } = ctx
    const user = p.passkeys[next++ % p.passkeys.length]!
    const at = `/totp/users/${user.id}/passkeys/authentication`
    const key = { 'x-api-key': p.key }
    const a = cluster.pick()
    if (a === null) return
    const asked = await rec.call({ loop: 'passkey', op: 'options', node: a, path: `${at}/options`, ...withKey(jsonBody({}), key) })
    if (asked?.status !== 200) return
    const { options } = json<{ options: PublicKeyCredentialRequestOptionsJSON }>(asked)
    const credential = user.authenticator.authenticate(options)
    const b = cluster.pick([a])
    if (b === null) return
    const signed = await rec.call({ loop: 'passkey', op: 'sign-in', node: b, path: at, ...withKey(jsonBody({ credential }), key) })
    if (signed?.status !== 200) return
    bump(ledger.accepted.passkey, options.challenge)
    const c = cluster.pick([a, b])
    if (c === null) return
    const again = await rec.call({ loop: 'passkey', op: 'sign-in replay', node: c, path: at, ...withKey(jsonBody({ credential }), key) })
    tallyReplay(ledger.replays.passkey, again?.status, again?.code)
  }
}

const DOC = textPages(2)
const IEND = Buffer.from('0000000049454e44ae426082', 'hex')

/** conversion: a synchronous conversion of the first page to PNG; a 200 must be a whole PNG. */
async function conversion(ctx: LoadContext): Promise<void> {
  const node = ctx.cluster.pick()
  if (node === null) return
  const body = new FormData()
  body.append('pdfDocument', new Blob([new Uint8Array(DOC)], { type: 'application/pdf' }), 'doc.pdf')
  body.append('dpi', '72')
  body.append('pages', '1')
  const got = await ctx.rec.call({
    loop: 'convert',
    op: 'generateImage',
    node,
    path: '/converter/generateImage',
    headers: { 'x-api-key': ctx.p.key },
    body,
    timeoutMs: 60_000,
  })
  if (got?.status !== 200) return
  if (got.body.subarray(-IEND.length).equals(IEND)) ctx.ledger.conversions.whole++
  else ctx.ledger.conversions.broken++
}

/** job: a conversion job with an Idempotency-Key; without an answer (or with a 503) the same submission goes to another node, as a careful client would. */
async function job(ctx: LoadContext): Promise<void> {
  const idempotencyKey = randomUUID()
  let last: ChaosNode | null = null
  for (let attempt = 0; attempt < 6; attempt++) {
    const node = ctx.cluster.pick(last === null ? [] : [last])
    if (node === null) return
    last = node
    const body = new FormData()
    body.append('pdfDocument', new Blob([new Uint8Array(DOC)], { type: 'application/pdf' }), 'doc.pdf')
    body.append('operation', 'image')
    body.append('dpi', '72')
    const got = await ctx.rec.call({
      loop: 'jobs',
      op: attempt === 0 ? 'submit' : 'submit again (same Idempotency-Key)',
      node,
      path: '/converter/jobs',
      headers: { 'x-api-key': ctx.p.key, 'idempotency-key': idempotencyKey },
      body,
    })
    if (got?.status === 202) {
      const { jobID } = json<{ jobID: string }>(got)
      const seen = ctx.ledger.jobs.get(idempotencyKey) ?? { ids: new Set<string>(), acceptedAt: Date.now() }
      seen.ids.add(jobID)
      ctx.ledger.jobs.set(idempotencyKey, seen)
      return
    }
    if (got !== null && got.status !== 503) return
    await sleep(1000)
  }
}

/** portal: a sign-in through the form on one node, then the session's home page on another. */
function portal(ctx: LoadContext): () => Promise<void> {
  let next = 0
  return async () => {
    const { cluster, rec, p, ledger } = ctx
    const who = p.portal[next++ % p.portal.length]!
    const a = cluster.pick()
    if (a === null) return
    const page = await rec.call({ loop: 'portal', op: 'sign-in page', node: a, path: '/portal/sign-in', keyed: false })
    if (page?.status !== 200) return
    const csrf = /name="_csrf" value="([^"]+)"/.exec(page.body.toString('utf8'))?.[1]
    if (csrf === undefined) throw new Error('the sign-in page has no CSRF token')
    const cookies = (h: Headers) =>
      h
        .getSetCookie()
        .map((c) => c.split(';')[0]!)
        .filter((c) => !c.endsWith('='))
    const jar = cookies(page.headers)
    const signed = await rec.call({
      loop: 'portal',
      op: 'sign-in',
      node: a,
      path: '/portal/sign-in',
      keyed: false,
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: a.url, cookie: jar.join('; ') },
      body: new URLSearchParams({ _csrf: csrf, email: who.email, password: who.password }).toString(),
    })
    if (signed?.status !== 303) return
    ledger.portal.signedIn++
    const session = [...jar, ...cookies(signed.headers)]
    const b = cluster.pick([a])
    if (b === null) return
    const home = await rec.call({
      loop: 'portal',
      op: 'home (other node)',
      node: b,
      path: '/portal/home',
      keyed: false,
      headers: { cookie: session.join('; ') },
    })
    if (home?.status === 200) ledger.portal.crossNode++
    else if (home?.status === 303) ledger.portal.crossRefused++
  }
}

/** runLoads runs every loop until `ctx.until`; each loop's pace is its turn's least length. */
export async function runLoads(ctx: LoadContext): Promise<void> {
  await Promise.all([
    paced(ctx, 50, () => stateless(ctx)),
    paced(ctx, 50, () => stateless(ctx)),
    paced(ctx, 50, managed(ctx)),
    paced(ctx, 50, managed(ctx)),
    paced(ctx, 1000, () => guesses(ctx)),
    paced(ctx, 300, passkeys(ctx)),
    paced(ctx, 1500, () => conversion(ctx)),
    paced(ctx, 3000, () => job(ctx)),
    paced(ctx, 2000, portal(ctx)),
  ])
}
