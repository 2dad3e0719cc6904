/**
 * Portal upkeep: sessions and email tokens past their time are refused anyway (the store
 * compares expiries on every lookup); deleting them keeps the tables to the live ones, and
 * leaves no hashes of dead sessions and links lying about. Sign-ups never confirmed within
 * their link's lifetime go too, with the accounts made for them: an address signed up by
 * someone else is free again, and nothing set up on it waits for its owner. Every node may
 * run it: deleting what has expired is idempotent.
 */
import type { Store } from '../../storage/ports.ts'

/** How often expired sessions and tokens are looked for. */
export const TIDY_EVERY_MS = 3_600_000

/**
 * keepPortalTidy deletes expired sessions, expired or used email tokens, single sign-on requests
 * never come back, and users whose
 * address was not confirmed within `confirmMs` (SIGNUP_CONFIRM_HOURS) and who have no live
 * link, now and then every `everyMs` (the timer holds no process open); failures go to
 * `report`, one part's failure not stopping the others. Returns the stop function, which
 * waits for a pass under way (call it before the store closes).
 */
export function keepPortalTidy(
  store: Store,
  now: () => number,
  report: (error: Error) => void,
  confirmMs: number,
  everyMs = TIDY_EVERY_MS,
): () => Promise<void> {
  let running: Promise<void> | null = null
  const tidy = () => {
    // A slow pass is not overlapped by the next.
    if (running !== null) return
    const nowIso = new Date(now()).toISOString()
    running = Promise.all([
      store.portal.pruneSessions(nowIso).catch(report),
      store.portal.pruneTokens(nowIso).catch(report),
      store.portal.pruneSsoRequests(nowIso).catch(report),
      store.portal.purgeUnconfirmed(new Date(now() - confirmMs).toISOString(), nowIso).catch(report),
    ]).then(() => {
      running = null
    })
  }
  tidy()
  const timer = setInterval(tidy, everyMs).unref()
  return async () => {
    clearInterval(timer)
    await running
  }
}
