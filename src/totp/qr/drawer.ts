/**
 * QrDrawer draws QR codes without holding the event loop: the text is planned first (cheap,
 * exact: data that fits in no symbol is refused before anything is built), a symbol whose
 * drawing is estimated at INLINE_BUDGET_MS or less is drawn in place, and a larger one in a
 * small pool of worker threads (started on first use), with a bounded queue.
 *
 * Why: a version-40 symbol costs about 10 ms to build (mostly `qrcode` scoring the eight
 * masks) and a 2048-pixel PNG a few more; 40 clients asking for such symbols at once held
 * a ping for seconds when they were drawn on the event loop.
 */
import { Worker } from 'node:worker_threads'
import { drawCostMs, drawQr, type DrawJob } from './draw.ts'
import { planSymbol } from './segments.ts'

/** Drawings estimated at this many milliseconds or less are done on the event loop (a worker round trip costs about 0.1 ms). */
export const INLINE_BUDGET_MS = 1

export interface DrawerOptions {
  readonly workers: number
  /** Drawings that may wait per worker; past that, draw answers 'busy'. */
  readonly queuePerWorker: number
}

export type Drawn = { readonly kind: 'image'; readonly image: Uint8Array } | { readonly kind: 'too-long' } | { readonly kind: 'busy' }

/** Messages between the drawer and its workers. */
export type ToQrWorker = { readonly id: number; readonly job: DrawJob }
export type FromQrWorker = { readonly id: number; readonly image: Uint8Array } | { readonly id: number; readonly error: string }

interface Pending {
  readonly id: number
  readonly job: DrawJob
  resolve(image: Uint8Array): void
  reject(error: Error): void
}

interface Slot {
  readonly worker: Worker
  busy: Pending | null
}

const WORKER_URL = new URL('./worker.ts', import.meta.url)

export class QrDrawer {
  readonly #options: DrawerOptions
  readonly #slots = new Set<Slot>()
  readonly #queue: Pending[] = []
  #nextId = 1
  #closed = false

  constructor(options: DrawerOptions) {
    this.#options = options
  }

  async draw(job: DrawJob): Promise<Drawn> {
    const plan = planSymbol(job.text, job.ecc)
    if (plan === null) return { kind: 'too-long' }
    if (drawCostMs(job, plan) <= INLINE_BUDGET_MS) return { kind: 'image', image: drawQr(job, plan) }
    if (this.#closed) throw new Error('the QR drawer is closed')
    const idle = [...this.#slots].filter((s) => s.busy === null).length + (this.#options.workers - this.#slots.size)
    if (this.#queue.length >= this.#options.queuePerWorker * this.#options.workers + idle) return { kind: 'busy' }
    const image = await new Promise<Uint8Array>((resolve, reject) => {
      this.#queue.push({ id: this.#nextId++, job, resolve, reject })
      this.#fill()
      this.#dispatch()
    })
    return { kind: 'image', image }
  }

  async close(): Promise<void> {
    this.#closed = true
    for (const pending of this.#queue.splice(0)) pending.reject(new Error('the QR drawer is closed'))
    await Promise.all(
      [...this.#slots].map((slot) => {
        this.#slots.delete(slot)
        return slot.worker.terminate()
      }),
    )
  }

  #fill(): void {
    while (!this.#closed && this.#slots.size < this.#options.workers && this.#queue.length > 0) {
      const worker = new Worker(WORKER_URL)
      const slot: Slot = { worker, busy: null }
      this.#slots.add(slot)
      worker.on('message', (message: FromQrWorker) => this.#onMessage(slot, message))
      worker.on('error', (error) => this.#onDeath(slot, error))
      worker.on('exit', (code) => this.#onDeath(slot, new Error(`QR worker exited with code ${code}`)))
    }
  }

  #dispatch(): void {
    for (const slot of this.#slots) {
      if (slot.busy !== null) continue
      const pending = this.#queue.shift()
      if (pending === undefined) return
      slot.busy = pending
      slot.worker.postMessage({ id: pending.id, job: pending.job } satisfies ToQrWorker)
    }
  }

  #onMessage(slot: Slot, message: FromQrWorker): void {
    const pending = slot.busy
    if (pending === null || pending.id !== message.id) return
    slot.busy = null
    if ('image' in message) pending.resolve(message.image)
    else pending.reject(new Error(`QR worker: ${message.error}`))
    this.#dispatch()
  }

  /** onDeath fails the drawing the worker had (a fault: 500) and lets a new worker take the queue. */
  #onDeath(slot: Slot, error: Error): void {
    if (!this.#slots.delete(slot)) return
    slot.busy?.reject(error)
    this.#fill()
    this.#dispatch()
  }
}
