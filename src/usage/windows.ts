/** Quota windows: UTC calendar days and months, as epoch milliseconds [start, end). */
import type { QuotaPeriod } from '../domain/accounts.ts'

const DAY = 86_400_000

export interface Window {
  readonly start: number
  readonly end: number
}

export function quotaWindow(nowMs: number, period: QuotaPeriod): Window {
  if (period === 'day') {
    const start = Math.floor(nowMs / DAY) * DAY
    return { start, end: start + DAY }
  }
  const d = new Date(nowMs)
  return { start: Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1), end: Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1) }
}

/** utcDay is the UTC date of an instant, YYYY-MM-DD (how usage is counted). */
export function utcDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10)
}
