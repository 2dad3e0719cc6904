/**
 * Poller runs a background pass every `intervalMs`, or at once when nudged: one pass at a
 * time (a nudge during a pass runs another right after it), never keeping the process alive
 * on its own (the server's handles do), and `close` waits for the pass under way. The webhook
 * worker and the conversion job runner are made of one each.
 */
import { outsideTraces } from '../tracing/tracing.ts'

export class Poller {
  readonly #pass: () => Promise<void>
  readonly #intervalMs: number
  #timer: NodeJS.Timeout | undefined
  #running: Promise<void> | null = null
  #again = false
  #closed = false

  constructor(pass: () => Promise<void>, intervalMs: number) {
    this.#pass = pass
    this.#intervalMs = intervalMs
  }

  get closed(): boolean {
    return this.#closed
  }

  start(): void {
    this.#schedule(0)
  }

  /** nudge: work may be waiting; run a pass now (or right after the one under way) rather than at the next interval. */
  nudge(): void {
    if (this.#running !== null) this.#again = true
    else this.#schedule(0)
  }

  /** close stops the passes and waits for the one under way. */
  async close(): Promise<void> {
    this.#closed = true
    clearTimeout(this.#timer)
    await this.#running
  }

  #schedule(ms: number): void {
    clearTimeout(this.#timer)
    if (this.#closed) return
    // A pass belongs to no trace, whoever nudged it (a request, a job's end): what it claims starts traces of its own.
    // (The timer too: set from a nudge's context, it would keep that request's context alive until it fires.)
    this.#timer = outsideTraces(() =>
      setTimeout(() => {
        this.#running = this.#pass().finally(() => {
          this.#running = null
          const again = this.#again
          this.#again = false
          this.#schedule(again ? 0 : this.#intervalMs)
        })
      }, ms),
    )
    this.#timer.unref()
  }
}
