/**
 * The chaos run's verdict: what must hold after nodes were killed and PostgreSQL and Redis
 * restarted under load, each as a check that passes or fails with its figures. The numbers it
 * holds the service to are the documented ones (docs/configuration.md, docs/factors.md,
 * docs/errors.md, docs/deployment.md), read from the nodes' settings.
 */
import type { Delivery } from '../../test/support/receiver.ts'
import type { Call } from './client.ts'
import type { Fault } from './faults.ts'
import type { Ledger } from './loads.ts'

export interface Check {
  readonly name: string
  readonly ok: boolean
  readonly detail: string
}

/** The documented numbers the checks hold the service to. */
export interface Limits {
  readonly usageFlushMs: number
  readonly otpMaxFailures: number
  readonly otpLockBaseSeconds: number
  readonly otpLockMaxSeconds: number
  readonly factorUserLimit: number
  readonly factorWindowSeconds: number
  /** How long after PostgreSQL or Redis is back a 503 SERVICE_UNAVAILABLE is still taken (reconnection), ms. */
  readonly graceMs: number
}

/** The documented 503s (docs/errors.md): a dependency away, and back-pressure that is answered at any time. */
const OUTAGE_CODES = new Set(['SERVICE_UNAVAILABLE'])
const BACK_PRESSURE = new Set(['QUEUE_FULL', 'QR_BUSY', 'JOB_UPLOADS_BUSY'])

export interface JobEnd {
  readonly id: string
  readonly status: string
  readonly resultSize: number | null
}

export interface Inputs {
  readonly calls: readonly Call[]
  readonly ledger: Ledger
  readonly faults: readonly Fault[]
  readonly deliveries: readonly Delivery[]
  readonly jobEnds: ReadonlyMap<string, JobEnd | null>
  /** Admitted calls of the load account as the admin API reports them, summed over the run's days. */
  readonly usageReported: number
  readonly crashes: readonly string[]
  readonly shutdownCodes: readonly (number | null)[]
  readonly limits: Limits
}

const inWindow = (c: Call, from: number, to: number) => c.start <= to && c.end >= from

/** cutByKill: a call without an answer that was under way on its node when the run killed it. */
export function cutByKill(c: Call, faults: readonly Fault[]): boolean {
  return c.status === 0 && faults.some((f) => f.kind === 'node' && f.target === c.node && c.start <= f.at + 50 && c.end >= f.at - 50)
}

function outageOf(c: Call, faults: readonly Fault[], graceMs: number): Fault | undefined {
  return faults.find((f) => f.kind !== 'node' && inWindow(c, f.at, (Number.isNaN(f.backAt) ? Date.now() : f.backAt) + graceMs))
}

function fiveHundreds(i: Inputs): Check[] {
  const bad: string[] = []
  const outside: string[] = []
  let during = 0
  let backPressure = 0
  const five = i.calls.filter((c) => c.status >= 500)
  for (const c of five) {
    const what = `${c.node} ${c.loop}:${c.op} ${c.status} ${c.code ?? '(no code)'}`
    const documented = c.status === 503 && c.retryAfter !== null && (OUTAGE_CODES.has(c.code ?? '') || BACK_PRESSURE.has(c.code ?? '') || c.loop === 'portal')
    if (!documented) {
      const during = outageOf(c, i.faults, 0)
      bad.push(`${what} retry-after=${c.retryAfter ?? 'none'}${during ? ` while ${during.target} was away` : ''} ${c.message ?? ''}`.trim())
      continue
    }
    if (BACK_PRESSURE.has(c.code ?? '')) {
      backPressure++
      continue
    }
    if (outageOf(c, i.faults, i.limits.graceMs) === undefined) outside.push(`${what} at ${new Date(c.start).toISOString()}`)
    else during++
  }
  const sample = (xs: string[]) => xs.slice(0, 8).join('; ')
  return [
    {
      name: 'every 5xx is a documented 503 with Retry-After',
      ok: bad.length === 0,
      detail: `${five.length} 5xx: ${during} SERVICE_UNAVAILABLE during an outage, ${backPressure} back-pressure${bad.length ? `; not documented: ${bad.length}: ${sample(bad)}` : ''}`,
    },
    {
      name: `503 SERVICE_UNAVAILABLE only while PostgreSQL or Redis is away (+${i.limits.graceMs / 1000} s)`,
      ok: outside.length === 0,
      detail: outside.length === 0 ? `${during} within the outages` : `${outside.length} outside: ${sample(outside)}`,
    },
  ]
}

function connections(i: Inputs): Check {
  const failed = i.calls.filter((c) => c.status === 0)
  const cut = failed.filter((c) => cutByKill(c, i.faults))
  const other = failed.filter((c) => !cutByKill(c, i.faults))
  const kinds = new Map<string, number>()
  for (const c of other) kinds.set(`${c.node} ${c.loop}:${c.op} ${c.error}`, (kinds.get(`${c.node} ${c.loop}:${c.op} ${c.error}`) ?? 0) + 1)
  return {
    name: 'no request without an answer but those a kill cut (no hang, no reset elsewhere)',
    ok: other.length === 0,
    detail: `${cut.length} cut by a kill; ${other.length} other${other.length ? `: ${[...kinds].map(([k, n]) => `${k} ×${n}`).join('; ')}` : ''}`,
  }
}

function afterRestart(i: Inputs): Check {
  const r = i.ledger.afterRestart
  const answers = [...r.answers].map(([k, n]) => `${k} ×${n}`).join(', ')
  return {
    name: "Redis's restart (AOF) kept the replay marks: codes accepted in the 20 s before it, sent again after, all refused",
    ok: r.accepted === 0 && r.sent > 0,
    detail: `${r.sent} sent again, ${r.accepted} accepted (${answers || 'none'})`,
  }
}

function replays(i: Inputs): Check[] {
  const kinds = [
    ['stateless', 'TOTP (verifyOTP): no code accepted twice'],
    ['managed', 'managed factors: no code accepted twice'],
    ['passkey', 'passkeys: no assertion accepted twice'],
  ] as const
  return kinds.map(([kind, name]) => {
    const r = i.ledger.replays[kind]
    const twice = [...i.ledger.accepted[kind].values()].filter((n) => n > 1).length
    const answers = [...r.answers].map(([k, n]) => `${k} ×${n}`).join(', ')
    return {
      name,
      ok: r.accepted === 0 && twice === 0 && i.ledger.accepted[kind].size > 0,
      detail: `${i.ledger.accepted[kind].size} accepted; ${r.sent} replayed on another node, ${r.accepted} accepted again (${answers || 'none'})`,
    }
  })
}

/** lockout: the wrong-guess user's evaluated guesses (OTP_INVALID) never come sooner than the lock that the ones before called for. */
function lockout(i: Inputs): Check[] {
  const l = i.limits
  const guesses = i.calls.filter((c) => c.loop === 'guess').sort((a, b) => a.start - b.start)
  const evaluated = guesses.filter((c) => c.status === 400)
  const early: string[] = []
  for (let n = l.otpMaxFailures; n < evaluated.length; n++) {
    // The (n+1)th failure comes after the lock the nth started: base·2^(n−max) seconds, capped.
    const lockMs = Math.min(l.otpLockBaseSeconds * 2 ** (n - l.otpMaxFailures), l.otpLockMaxSeconds) * 1000
    const gap = evaluated[n]!.end - evaluated[n - 1]!.start
    if (gap < lockMs - 250) early.push(`failure ${n + 1} ${gap} ms after failure ${n} (lock ${lockMs} ms)`)
  }
  const statuses = new Map<string, number>()
  for (const c of guesses)
    statuses.set(`${c.status || 'no answer'} ${c.code ?? ''}`.trim(), (statuses.get(`${c.status || 'no answer'} ${c.code ?? ''}`.trim()) ?? 0) + 1)
  // Attempts the window took: evaluated, or refused by the lock after it counted (429 OTP_LOCKED); ATTEMPTS_LIMITED took nothing.
  const windowMs = l.factorWindowSeconds * 1000
  const taken = guesses.filter((c) => c.status === 400 || c.code === 'OTP_LOCKED' || c.status === 200)
  const perWindow = new Map<number, number>()
  for (const c of taken) {
    const w = Math.floor(c.start / windowMs)
    if (Math.floor(c.end / windowMs) === w) perWindow.set(w, (perWindow.get(w) ?? 0) + 1)
  }
  const most = Math.max(0, ...perWindow.values())
  const limited = guesses.filter((c) => c.code === 'ATTEMPTS_LIMITED').length
  return [
    {
      name: `lockout never exceeded (${l.otpMaxFailures} failures, then ${l.otpLockBaseSeconds} s doubling), across nodes in parallel`,
      ok: early.length === 0 && evaluated.length >= l.otpMaxFailures && guesses.some((c) => c.code === 'OTP_LOCKED'),
      detail: `${guesses.length} wrong guesses, ${evaluated.length} evaluated (${[...statuses].map(([k, n]) => `${k} ×${n}`).join(', ')})${early.length ? `; too soon: ${early.join('; ')}` : ''}`,
    },
    {
      name: `attempt limit never exceeded (${l.factorUserLimit} per user per ${l.factorWindowSeconds} s window)`,
      ok: most <= l.factorUserLimit && limited > 0,
      detail: `at most ${most} attempts taken in one window (${perWindow.size} windows); ${limited} refused ATTEMPTS_LIMITED`,
    },
  ]
}

function jobs(i: Inputs): Check[] {
  const doubled = [...i.ledger.jobs.values()].filter((j) => j.ids.size > 1)
  const ids = [...new Set([...i.ledger.jobs.values()].flatMap((j) => [...j.ids]))]
  const events = new Map<string, Delivery[]>()
  for (const d of i.deliveries) {
    const id = d.payload?.data.jobID
    if (typeof id === 'string' && d.payload!.type.startsWith('conversion.')) events.set(id, [...(events.get(id) ?? []), d])
  }
  const unended = ids.filter((id) => !['succeeded', 'failed'].includes(i.jobEnds.get(id)?.status ?? ''))
  const unheard = ids.filter((id) => !events.has(id))
  const twice: string[] = []
  const disagree: string[] = []
  for (const id of ids) {
    const heard = events.get(id) ?? []
    const distinct = new Map(heard.map((d) => [d.id, d]))
    if (distinct.size > 1) {
      const results = new Set([...distinct.values()].map((d) => JSON.stringify((d.payload!.data as { result?: { size?: number } }).result?.size ?? null)))
      twice.push(`${id}: ${distinct.size} events (${[...distinct.values()].map((d) => d.payload!.type).join(', ')}; ${results.size} results)`)
    }
    const end = i.jobEnds.get(id)
    for (const d of distinct.values()) {
      if (end && d.payload!.type !== `conversion.${end.status}`) disagree.push(`${id}: event ${d.payload!.type}, status ${end.status}`)
    }
  }
  const unverified = i.deliveries.filter((d) => d.payload === null).length
  const known = new Set(ids)
  const strangers = [...events.keys()].filter((id) => !known.has(id))
  const statuses = new Map<string, number>()
  for (const id of ids) statuses.set(i.jobEnds.get(id)?.status ?? 'unknown', (statuses.get(i.jobEnds.get(id)?.status ?? 'unknown') ?? 0) + 1)
  const list = (xs: string[]) => xs.slice(0, 6).join('; ')
  return [
    {
      name: 'jobs: one job per Idempotency-Key, however often it was sent',
      ok: doubled.length === 0 && ids.length > 0,
      detail: `${i.ledger.jobs.size} keys answered 202, ${ids.length} jobs${doubled.length ? `; ${doubled.length} keys with several jobs` : ''}`,
    },
    {
      name: 'jobs: every accepted job reached an end',
      ok: unended.length === 0,
      detail: `${[...statuses].map(([k, n]) => `${k} ${n}`).join(', ')}${unended.length ? `; not ended: ${list(unended)}` : ''}`,
    },
    {
      name: 'jobs: each ended once, its event arrived (at least once), never two ends',
      ok: unheard.length === 0 && twice.length === 0 && disagree.length === 0,
      detail: `${ids.length - unheard.length}/${ids.length} heard, ${i.deliveries.length} deliveries${unheard.length ? `; never heard: ${list(unheard)}` : ''}${twice.length ? `; ended twice: ${list(twice)}` : ''}${disagree.length ? `; event and status disagree: ${list(disagree)}` : ''}${strangers.length ? `; events of ${strangers.length} jobs the client never saw accepted` : ''}`,
    },
    {
      name: 'webhooks: every delivery signed (standardwebhooks verifies it)',
      ok: unverified === 0 && i.deliveries.length > 0,
      detail: `${i.deliveries.length} deliveries, ${unverified} not verified`,
    },
  ]
}

/** admitted: whether the gateway let the call in (and so counted it): true, false, or null when it cannot be told (no answer). */
export function admitted(c: Call): boolean | null {
  if (!c.keyed) return false
  if (c.status === 0) return null
  if (c.status === 403) return false
  if (c.status === 503 && (c.message ?? '').includes('key store')) return false
  if (c.status === 429 && (c.code === 'THROTTLED' || c.code === 'QUOTA_EXCEEDED' || c.message === 'Too Many Requests' || c.message === 'Limit Exceeded'))
    return false
  return true
}

/** usage: the reported count lies between what surely was admitted, less what a kill may lose (the flush window), and what may have been. */
export function usage(i: Inputs): Check & { lower: number; upper: number; allowance: number } {
  const flush = i.limits.usageFlushMs
  const sure = i.calls.filter((c) => admitted(c) === true)
  const maybe = i.calls.filter((c) => admitted(c) === null && c.keyed)
  let allowance = 0
  const counted = new Set<Call>()
  for (const k of i.faults.filter((f) => f.kind === 'node')) {
    let from = k.at - flush - 250
    // Counts wait in memory while PostgreSQL is away (docs/deployment.md): a kill then loses them since it went.
    for (const pgDown of i.faults.filter((f) => f.kind === 'postgres'))
      if (k.at >= pgDown.at && k.at <= pgDown.backAt + flush + 5000) from = Math.min(from, pgDown.at - flush - 250)
    for (const c of sure) {
      if (c.node === k.target && c.end >= from && c.start <= k.at && !counted.has(c)) {
        counted.add(c)
        allowance++
      }
    }
  }
  const lower = sure.length
  const upper = sure.length + maybe.length
  const reported = i.usageReported
  const lost = Math.max(0, lower - reported)
  return {
    name: `usage: loss within the flush window (USAGE_FLUSH_MS ${flush} ms before each kill), nothing counted twice`,
    ok: reported <= upper && reported >= lower - allowance,
    detail: `reported ${reported}; the client saw ${lower} admitted and ${maybe.length} without an answer (so ${lower}..${upper}); lost ${lost}, allowed ${allowance}${reported > upper ? `; ${reported - upper} MORE than could have been admitted` : ''}`,
    lower,
    upper,
    allowance,
  }
}

export function verdict(i: Inputs): Check[] {
  const convert = i.ledger.conversions
  return [
    ...jobs(i),
    ...replays(i),
    afterRestart(i),
    ...lockout(i),
    usage(i),
    ...fiveHundreds(i),
    connections(i),
    {
      name: 'synchronous conversions: every 200 a whole PNG',
      ok: convert.broken === 0 && convert.whole > 0,
      detail: `${convert.whole} whole, ${convert.broken} broken`,
    },
    {
      name: 'portal: sign-ins, the session good on another node',
      ok: i.ledger.portal.signedIn > 0 && i.ledger.portal.crossRefused === 0,
      detail: `${i.ledger.portal.signedIn} signed in, ${i.ledger.portal.crossNode} sessions used on another node, ${i.ledger.portal.crossRefused} refused there`,
    },
    {
      name: 'nodes: none exited but when killed',
      ok: i.crashes.length === 0,
      detail: i.crashes.length === 0 ? 'none' : i.crashes.map((c) => c.slice(0, 400)).join(' | '),
    },
    {
      name: 'nodes: each exits 0 on SIGTERM at the end',
      ok: i.shutdownCodes.every((c) => c === 0),
      detail: `exit codes ${i.shutdownCodes.join(', ')}`,
    },
  ]
}
