/**
 * The chaos run's figures: for each fault, how long what it took down stayed down and when each
 * affected operation served again; the load's totals by operation; the summary table and one
 * JSON line of everything.
 */
import type { Call } from './client.ts'
import type { Fault } from './faults.ts'
import type { Check } from './verdict.ts'
import { cutByKill } from './verdict.ts'

/** The operations whose success means the path serves (replays and wrong guesses are refused by design). */
const SERVING = new Set([
  'stateless:getOTP',
  'stateless:verifyOTP',
  'managed:verify',
  'passkey:options',
  'passkey:sign-in',
  'convert:generateImage',
  'jobs:submit',
  'portal:sign-in page',
  'portal:sign-in',
  'portal:home (other node)',
])

const ok = (c: Call) => c.status >= 200 && c.status < 400
const failed = (c: Call) => c.status >= 500 || c.status === 0

export interface Recovery {
  readonly fault: string
  readonly at: string
  /** The node ready again, or the server taking connections again, after the fault began. */
  readonly downMs: number
  /** The node killed: its first answer that served, after the kill. Else null. */
  readonly nodeServedMs: number | null
  /** Failed calls on the other nodes while it was down (node faults), not counting those it cut. */
  readonly othersFailed: number
  /** Operations that failed during the fault: when each served again, after the server was back (and after the fault began). */
  readonly ops: { op: string; failed: number; afterBackMs: number | null; afterFaultMs: number | null }[]
}

const op = (c: Call) => `${c.loop}:${c.op}`

export function recoveries(calls: readonly Call[], faults: readonly Fault[], start: number): Recovery[] {
  return faults.map((f) => {
    const back = Number.isNaN(f.backAt) ? f.at : f.backAt
    const label = `${f.kind === 'node' ? `${f.target} killed` : `${f.target} restarted`} at ${((f.at - start) / 1000).toFixed(1)} s`
    if (f.kind === 'node') {
      const first = calls.filter((c) => c.node === f.target && c.start >= f.at && ok(c)).sort((a, b) => a.end - b.end)[0]
      const others = calls.filter((c) => c.node !== f.target && c.start <= back && c.end >= f.at && failed(c) && !cutByKill(c, faults))
      return {
        fault: label,
        at: new Date(f.at).toISOString(),
        downMs: back - f.at,
        nodeServedMs: first ? first.end - f.at : null,
        othersFailed: others.length,
        ops: [],
      }
    }
    // Up to a minute after, or to the next fault of PostgreSQL or Redis, whose failures are its own.
    const next = Math.min(...faults.filter((g) => g.kind !== 'node' && g.at > f.at).map((g) => g.at), back + 60_000)
    const window = calls.filter((c) => SERVING.has(op(c)) && c.end >= f.at && c.start <= next && c.end < next)
    const names = [...new Set(window.filter(failed).map(op))].sort()
    const ops = names.map((name) => {
      const mine = window.filter((c) => op(c) === name && !cutByKill(c, faults))
      const lastFail = Math.max(...mine.filter(failed).map((c) => c.end), f.at)
      const served = mine.filter((c) => ok(c) && c.start >= lastFail - 1).sort((a, b) => a.end - b.end)[0]
      return {
        op: name,
        failed: mine.filter(failed).length,
        afterBackMs: served ? Math.max(0, served.end - back) : null,
        afterFaultMs: served ? served.end - f.at : null,
      }
    })
    return { fault: label, at: new Date(f.at).toISOString(), downMs: back - f.at, nodeServedMs: null, othersFailed: 0, ops }
  })
}

export interface Totals {
  readonly op: string
  readonly calls: number
  readonly statuses: string
  readonly p50: number
  readonly p99: number
}

const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length === 0 ? 0 : s[Math.min(s.length - 1, Math.ceil(s.length * q) - 1)]!
}

export function totals(calls: readonly Call[]): Totals[] {
  const by = new Map<string, Call[]>()
  for (const c of calls) by.set(op(c), [...(by.get(op(c)) ?? []), c])
  return [...by]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, cs]) => {
      const statuses = new Map<string, number>()
      for (const c of cs) {
        const k = c.status === 0 ? `no answer` : `${c.status}${c.code ? ` ${c.code}` : ''}`
        statuses.set(k, (statuses.get(k) ?? 0) + 1)
      }
      const answered = cs.filter((c) => c.status !== 0).map((c) => c.end - c.start)
      return {
        op: name,
        calls: cs.length,
        statuses: [...statuses]
          .sort((a, b) => b[1] - a[1])
          .map(([k, n]) => `${k} ×${n}`)
          .join(', '),
        p50: quantile(answered, 0.5),
        p99: quantile(answered, 0.99),
      }
    })
}

const s = (ms: number | null) => (ms === null ? 'never' : `${(ms / 1000).toFixed(2)} s`)

export function printReport(out: (line: string) => void, t: Totals[], r: Recovery[], checks: Check[], figures: Record<string, unknown>): void {
  out('')
  out('| operation | calls | answers | p50 ms | p99 ms |')
  out('| --- | --- | --- | --- | --- |')
  for (const x of t) out(`| ${x.op} | ${x.calls} | ${x.statuses} | ${x.p50} | ${x.p99} |`)
  out('')
  out('| fault | down | served again |')
  out('| --- | --- | --- |')
  for (const x of r) {
    const again =
      x.nodeServedMs !== null || x.ops.length === 0
        ? `the node's first answer ${s(x.nodeServedMs)} after the kill; the other nodes: ${x.othersFailed} failed calls`
        : x.ops.map((o) => `${o.op}: ${s(o.afterBackMs)} after it was back (${s(o.afterFaultMs)} after the fault), ${o.failed} failed`).join('; ')
    out(`| ${x.fault} | ${s(x.downMs)} | ${again} |`)
  }
  out('')
  out('| check | result | figures |')
  out('| --- | --- | --- |')
  for (const c of checks) out(`| ${c.name} | ${c.ok ? 'pass' : '**FAIL**'} | ${c.detail} |`)
  out('')
  out(JSON.stringify(figures))
}
