/**
 * The canary: an account of its own making light, valid requests while the load runs, one at a
 * time, one every CANARY_EVERY_MS: /totp/ping, /totp/verifyOTP with the right code, and a one-page
 * conversion to PNG, in turn. Each must answer 200 (its body whole), after waiting as a 503's
 * Retry-After asks (twice at most); its latencies, by kind, are what a customer beside the load would see.
 */
import type { Agent } from 'node:http'
import { exchange, agent } from './http.ts'
import { incomplete } from './complete.ts'
import { DOCS } from './documents.ts'
import { code, form, multipart, newSecret, pdf } from './inputs/common.ts'
import type { Account } from './run.ts'
import type { Request } from './types.ts'

export const CANARY_EVERY_MS = 250

export type CanaryKind = 'ping' | 'verifyOTP' | 'conversion'

export interface CanaryFigures {
  /** Each request's time to its answer, from its first try (a wait a 503's Retry-After asked for included). */
  readonly ms: Record<CanaryKind, number[]>
  /** Tries answered 503 with Retry-After (then tried again). */
  readonly refused: Record<CanaryKind, number>
  readonly failures: string[]
}

const KINDS: readonly { kind: CanaryKind; method: string; path: string; make: () => Request }[] = [
  { kind: 'ping', method: 'GET', path: '/totp/ping', make: () => ({}) },
  {
    kind: 'verifyOTP',
    method: 'POST',
    path: '/totp/verifyOTP',
    make: () => {
      const secret = newSecret()
      return form({ secret, token: code(secret) })
    },
  },
  { kind: 'conversion', method: 'POST', path: '/converter/generateImage', make: () => multipart([pdf(DOCS.one), { name: 'dpi', value: '72' }]) },
]

function send(url: string, account: Account, own: Agent, k: (typeof KINDS)[number]) {
  const r = k.make()
  return exchange({
    origin: url,
    path: k.path,
    method: k.method,
    headers: { 'x-api-key': account.key, ...r.headers },
    body: r.body,
    mode: 'read',
    agent: own,
    timeoutMs: 120_000,
    stallMs: 0,
  })
}

/** runCanary runs until `until()` is true and gives the latencies and failures. */
export async function runCanary(url: string, account: Account, until: () => boolean): Promise<CanaryFigures> {
  const own = agent()
  const figures: CanaryFigures = { ms: { ping: [], verifyOTP: [], conversion: [] }, refused: { ping: 0, verifyOTP: 0, conversion: 0 }, failures: [] }
  for (let i = 0; !until(); i++) {
    const due = performance.now() + CANARY_EVERY_MS
    const k = KINDS[i % KINDS.length]!
    const started = performance.now()
    let a = await send(url, account, own, k)
    // A 503 with Retry-After is back-pressure: the canary does as a client should, waits as told and tries again (twice at most); the wait counts.
    for (let retry = 0; retry < 2 && a.status === 503 && a.headers['retry-after'] !== undefined; retry++) {
      figures.refused[k.kind]++
      await new Promise((r) => setTimeout(r, Math.min(10, Number(a.headers['retry-after']) || 1) * 1000))
      a = await send(url, account, own, k)
    }
    const broken = a.body === null ? 'no whole body' : incomplete(String(a.headers['content-type'] ?? ''), a.body)
    if (a.status !== 200 || broken !== null) {
      if (figures.failures.length < 50)
        figures.failures.push(`${k.kind}: ${a.status} ${a.error ?? ''} ${broken ?? ''} ${(a.body?.toString('utf8') ?? '').slice(0, 200)}`)
    }
    figures.ms[k.kind].push(performance.now() - started)
    const wait = due - performance.now()
    if (wait > 0) await new Promise((r) => setTimeout(r, wait))
  }
  own.destroy()
  return figures
}
