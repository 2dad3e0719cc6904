/**
 * Portal upkeep: sessions and email tokens past their time are refused anyway (the store
 * compares expiries on every lookup); deleting them keeps the tables to the live ones, and
 * leaves no hashes of dead sessions and links lying about. Every node may run it: deleting
 * what has expired is idempotent.
 */
import type { Store } from '../storage/ports.ts'

/** How often expired sessions and tokens are looked for. */
export const TIDY_EVERY_MS = 3_600_000

/**
 * keepPortalTidy deletes expired sessions, and expired or used email tokens, now and then
 * every `everyMs` (the timer holds no process open); failures go to `report`, one part's
 * failure not stopping the other. Returns the stop function, which waits for a pass under way
 * (call it before the store closes).
 */
export function keepPortalTidy(store: Store, now: () => number, report: (error: Error) => void, everyMs = TIDY_EVERY_MS): () => Promise<void> {
  let running: Promise<void> | null = null
  const tidy = () => {
    // A slow pass is not overlapped by the next.
    if (running !== null) return
    const nowIso = new Date(now()).toISOString()
    running = Promise.all([
      store.portal.pruneSessions(nowIso).catch(report),
      store.portal.pruneTokens(nowIso).catch(report),
    ]).then(() => { running = null })
  }
  tidy()
  const timer = setInterval(tidy, everyMs).unref()
  return async () => {
    clearInterval(timer)
    await running
  }
}
