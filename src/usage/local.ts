/**
 * LocalLimiter applies plans in process: the limiter of a single node, and every node's
 * fallback while the shared one (Redis) is unreachable. Same rules as the shared one: a
 * token bucket refilled continuously (one token a call), a quota of units per UTC window
 * seeded once from the durable usage counts (`cost` units a call), nothing consumed by a
 * refused call.
 */
import type { LimitDecision } from '../domain/usage.ts'
import type { Limiter } from '../storage/ports.ts'
import type { Plan } from '../domain/accounts.ts'
import { quotaWindow, type Window } from './windows.ts'

interface State {
  tokens: number
  at: number
  window: Window | null
  used: number
}

export class LocalLimiter implements Limiter {
  readonly #states = new Map<string, State>()
  readonly #now: () => number

  constructor(now: () => number) {
    this.#now = now
  }

  async take(accountId: string, plan: Plan, cost: number, seed: (start: number, end: number) => Promise<number>): Promise<LimitDecision> {
    const decision = this.takeNow(accountId, plan, cost)
    if (decision !== null) return decision
    const window = quotaWindow(this.#now(), plan.period)
    const used = await seed(window.start, window.end)
    this.#seed(accountId, plan, window, used)
    return this.takeNow(accountId, plan, cost) ?? { admitted: false, reason: 'quota', retryAfterMs: 1000 }
  }

  /**
   * takeNow decides synchronously, or returns null when the quota window needs seeding first
   * (a free call too: its `left` is the window's).
   */
  takeNow(accountId: string, plan: Plan, cost: number): LimitDecision | null {
    checkCost(cost)
    const now = this.#now()
    let state = this.#states.get(accountId)
    if (state === undefined) {
      state = { tokens: plan.burst, at: now, window: null, used: 0 }
      this.#states.set(accountId, state)
    }
    let left = Infinity
    let windowEndsMs = 0
    if (plan.quota > 0) {
      if (state.window === null || now >= state.window.end || now < state.window.start) return null
      // Seeded usage may pass the quota (a plan lowered mid-window): nothing is left then.
      left = Math.max(plan.quota - state.used, 0)
      if (cost > left) return { admitted: false, reason: 'quota', retryAfterMs: state.window.end - now }
      left -= cost
      windowEndsMs = state.window.end - now
    }
    let tokens = Infinity
    let refillMs = 0
    if (plan.rate > 0) {
      tokens = Math.min(plan.burst, state.tokens + (Math.max(now - state.at, 0) * plan.rate) / 1000)
      if (tokens < 1) return { admitted: false, reason: 'throttle', retryAfterMs: Math.ceil(((1 - tokens) * 1000) / plan.rate) }
      tokens -= 1
      state.tokens = tokens
      state.at = Math.max(now, state.at)
      refillMs = Math.ceil(((plan.burst - tokens) * 1000) / plan.rate)
    }
    if (plan.quota > 0) state.used += cost
    return { admitted: true, tokens: Math.floor(tokens), refillMs, left, windowEndsMs }
  }

  #seed(accountId: string, plan: Plan, window: Window, used: number): void {
    const state = this.#states.get(accountId) ?? { tokens: plan.burst, at: this.#now(), window: null, used: 0 }
    // Calls admitted here while the seed was read are in `used` already if the window was the same.
    if (state.window === null || state.window.start !== window.start) {
      state.window = window
      state.used = used
    }
    this.#states.set(accountId, state)
  }
}

/** checkCost refuses what no plan's weight can be: the quota counts whole units. */
function checkCost(cost: number): void {
  if (!Number.isSafeInteger(cost) || cost < 0) throw new RangeError(`a call's cost is a whole number of units >= 0, not ${cost}`)
}
