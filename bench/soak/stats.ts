/** The soak's tallies: per operation (and per case, to see that each ran), statuses, latencies, cuts and failures; and the summary table. */
import type { Answer } from './types.ts'
import type { Verdict } from './judge.ts'

export interface OpStats {
  requests: number
  statuses: Map<string, number>
  ms: number[]
  documentedCuts: number
  clientAborts: number
  stallDropped: number
  failures: number
}

const MAX_LINES = 200

export class Tally {
  readonly ops = new Map<string, OpStats>()
  /** How many times each case ran, by `operationId: case`. */
  readonly cases = new Map<string, number>()
  /** The longest each case took (ms). */
  readonly slowest = new Map<string, number>()
  /** The first failure lines, with what was sent. */
  readonly lines: string[] = []
  failures = 0

  add(opId: string, caseName: string, a: Answer, v: Verdict, what: string): void {
    const s: OpStats = this.ops.get(opId) ?? { requests: 0, statuses: new Map(), ms: [], documentedCuts: 0, clientAborts: 0, stallDropped: 0, failures: 0 }
    this.ops.set(opId, s)
    s.requests++
    const status = a.status === 0 ? (v.clientAbort ? 'hung up' : 'none') : String(a.status)
    s.statuses.set(status, (s.statuses.get(status) ?? 0) + 1)
    if (a.status !== 0 && !v.clientAbort && !v.stallDropped) s.ms.push(a.ms)
    if (v.documentedCut) s.documentedCuts++
    if (v.clientAbort) s.clientAborts++
    if (v.stallDropped) s.stallDropped++
    const key = `${opId}: ${caseName}`
    this.cases.set(key, (this.cases.get(key) ?? 0) + 1)
    this.slowest.set(key, Math.max(this.slowest.get(key) ?? 0, a.ms))
    if (v.failures.length > 0) {
      s.failures++
      this.failures++
      if (this.lines.length < MAX_LINES) this.lines.push(`${key}: ${v.failures.join('; ')} [${what}]`)
    }
  }
}

/** quantile (nearest rank) of unsorted values; 0 for none. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return 0
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!
}

/** table prints one row per operation: requests, statuses, p50 and p99 (ms), cuts (documented), hang-ups, failures. */
export function table(t: Tally, order: readonly string[]): string {
  const rows = order.map((id) => {
    const s = t.ops.get(id)
    if (s === undefined) return `| ${id} | 0 | | | | | | |`
    const statuses = [...s.statuses].sort(([a], [b]) => a.localeCompare(b)).map(([k, n]) => `${k}×${n}`)
    return `| ${id} | ${s.requests} | ${statuses.join(' ')} | ${quantile(s.ms, 0.5).toFixed(0)} | ${quantile(s.ms, 0.99).toFixed(0)} | ${s.documentedCuts} | ${s.clientAborts + s.stallDropped} | ${s.failures} |`
  })
  return [
    '| operation | requests | statuses | p50 ms | p99 ms | documented cuts | client hang-ups | failures |',
    '| --- | --- | --- | --- | --- | --- | --- | --- |',
    ...rows,
  ].join('\n')
}
