/**
 * Readiness checks that must not slow the probe down: a deadline for any check, and a cache
 * for a check that costs the other side something (the SMTP server's).
 */
import type { Store } from '../storage/ports.ts'

/** A dependency's state: `detail` is the reason it is down, for the log only. */
export interface CheckResult {
  readonly ok: boolean
  readonly detail: string
}

/**
 * The SMTP check's result is kept this long. A load balancer probes every few seconds, from
 * each of its nodes: asking the SMTP server each time would open a connection (TCP, greeting,
 * EHLO, TLS, sign-in) per probe, which mail providers count against a sender and may throttle
 * or block, for news that is not urgent (only the portal's emails wait on it).
 */
export const SMTP_CHECK_TTL_MS = 30_000

/** A dependency's state, and whether the node is unready without it. */
export interface Dependency extends CheckResult {
  readonly essential: boolean
}

/**
 * storeHealth asks each of the store's dependencies, waiting at most `timeoutMs`: the store
 * bounds each call by STORE_TIMEOUT_MS, but a PostgreSQL connection and its query may each take
 * that long. Past it, every part of the store (as `kind` names them) counts as down. Readiness
 * and the metrics' `tessera_dependency_up` both ask through here.
 */
export function storeHealth(store: Pick<Store, 'kind' | 'health'>, timeoutMs: number): Promise<Record<string, Dependency>> {
  return withinDeadline<Record<string, Dependency>>(store.health(), timeoutMs, () =>
    Object.fromEntries(store.kind.split('+').map((name, i) => [name, { ok: false, detail: `no answer within ${timeoutMs} ms`, essential: i === 0 }])),
  )
}

/** withinDeadline gives `work`'s value, or `late()` when it has not come within `ms`. */
export async function withinDeadline<T>(work: Promise<T>, ms: number, late: () => T): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const deadline = new Promise<T>((resolve) => {
    timer = setTimeout(() => resolve(late()), ms)
  })
  try {
    return await Promise.race([work, deadline])
  } finally {
    clearTimeout(timer)
  }
}

/**
 * cachedCheck runs `check` at most once per `ttlMs` (by `now`), one run at a time however many
 * probes ask. A probe that would wait longer than `waitMs` for a run gets the last result (or,
 * before the first, `unavailable`); the run goes on and its result serves the next probes.
 */
export function cachedCheck(check: () => Promise<void>, options: { ttlMs: number; now: () => number }): (waitMs: number) => Promise<CheckResult> {
  let last: { at: number; result: CheckResult } | undefined
  let running: Promise<CheckResult> | undefined
  return (waitMs) => {
    if (last !== undefined && options.now() - last.at < options.ttlMs) return Promise.resolve(last.result)
    running ??= check()
      .then(
        () => ({ ok: true, detail: 'ok' }),
        (error: Error) => ({ ok: false, detail: error.message }),
      )
      .then((result) => {
        last = { at: options.now(), result }
        running = undefined
        return result
      })
    return withinDeadline(running, waitMs, () => last?.result ?? { ok: false, detail: `no answer within ${waitMs} ms` })
  }
}
