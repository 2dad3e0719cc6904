/**
 * ConversionPool runs conversions in worker threads, never on the event loop: a fixed
 * number of workers started on first use, one job each at a time, a bounded queue, a time
 * limit per job (the worker is terminated and replaced), and recycling of a worker after a
 * number of jobs, when its WebAssembly memory has grown past a threshold (it never shrinks),
 * after an engine failure, or when it dies.
 *
 * The time limit counts the engine's time, not the time a worker waits for a slow client
 * to take output; a client that takes nothing for `stallTimeoutMs` is given up on and its
 * worker replaced. A worker may use `maxMemoryBytes` in all: its engines' heaps are capped,
 * its JS heap is bounded by `resourceLimits`, and it checks the whole while it works.
 *
 * Why not piscina: it has no per-worker job limit, and a worker that exits by itself after
 * answering races with the delivery of its answer. The pool is small enough to own.
 */
import { Worker } from 'node:worker_threads'
import { IN_FLIGHT, type FromWorker, type Job, type JobResult, type ToWorker, type WorkerData } from './protocol.ts'
import type { PoolGauges, ReplacementReason } from '../metrics/metrics.ts'

export interface PoolOptions {
  readonly size: number
  readonly maxQueue: number
  readonly timeoutMs: number
  readonly maxJobsPerWorker: number
  readonly maxMemoryBytes: number
  /** How long a worker may wait for its consumer to take output before the job is given up on. */
  readonly stallTimeoutMs: number
  /** Told when a worker is replaced: why, as one of a closed set (the metrics), and in words (the log). */
  readonly onRecycle?: (reason: ReplacementReason, detail: string) => void
  /** Told how long each job waited in the queue for a worker, in seconds. */
  readonly onQueueWait?: (seconds: number) => void
}

export type PoolFailure = 'queue-full' | 'timeout' | 'stalled' | 'crashed' | 'failed' | 'cancelled' | 'closed'

export class PoolError extends Error {
  override name = 'PoolError'
  readonly reason: PoolFailure

  constructor(reason: PoolFailure, message: string) {
    super(message)
    this.reason = reason
  }
}

export interface Handlers {
  /** Rendering starts: the result will hold `pages` pages of a `pageCount`-page document. */
  onStart?(pages: number, pageCount: number): void
  /** One page, in order. Call `ack` once it has been taken, to let the worker render further. */
  onPage?(page: number, png: Uint8Array): void
  /** One piece of PostScript, in order; `ack` it once taken, as a page. */
  onChunk?(bytes: Uint8Array): void
}

/** What a job took, for the log and the metrics: read once it has settled. */
export interface JobStats {
  /** The worker's thread id (null: it never ran). */
  readonly worker: number | null
  /** Time in the queue, ms. */
  readonly queuedMs: number
  /** Time the engine ran, ms: from the job's start to its end, less the pauses for a slow client. */
  readonly engineMs: number
}

export interface Running {
  readonly result: Promise<JobResult>
  stats(): JobStats
  /** ack tells the worker that a page or piece has been taken. */
  ack(): void
  /** cancel gives up on the job (the client went away): queued, it is dropped; running, its worker is replaced. */
  cancel(): void
}

/** A place in the pool, taken before the job is known. */
export interface Reservation {
  /** run queues the job in the reserved place. */
  run(job: Job, handlers?: Handlers): Running
  /** release gives the place back (the upload was refused); a no-op after run. */
  release(): void
}

interface Entry {
  readonly id: number
  readonly job: Job
  readonly handlers: Handlers
  resolve(result: JobResult): void
  reject(error: PoolError): void
  slot?: Slot
  timer?: NodeJS.Timeout
  /** Engine time left (ms) when the worker paused for the client. */
  remaining?: number
  deadline?: number
  readonly queuedAt: number
  startedAt?: number
  pausedAt?: number
  pausedMs: number
  endedAt?: number
  worker?: number
}

interface Slot {
  readonly worker: Worker
  /** Pieces of output sent and not yet taken (shared with the worker, which waits on it). */
  readonly inFlight: Int32Array
  ready: boolean
  busy: Entry | null
  jobs: number
  retiring: boolean
}

const WORKER_URL = new URL('./worker.ts', import.meta.url)

export class ConversionPool {
  readonly #options: PoolOptions
  readonly #slots = new Set<Slot>()
  readonly #queue: Entry[] = []
  #nextId = 1
  #reserved = 0
  #closed = false

  constructor(options: PoolOptions) {
    this.#options = options
  }

  /**
   * reserve takes a place for a job that is yet to be read (an upload): it throws
   * PoolError('queue-full') at once when there is none, so that a refused client is told
   * before it sends its body. The place is the job's when it runs, or freed by `release`.
   */
  reserve(): Reservation {
    if (this.#closed) throw new PoolError('closed', 'the conversion pool is closed')
    // Workers that are free, starting, or yet to start will take a job each before anyone waits.
    const free = [...this.#slots].filter((s) => s.busy === null && !s.retiring).length + Math.max(0, this.#options.size - this.#slots.size)
    if (this.#queue.length + this.#reserved >= this.#options.maxQueue + free) throw new PoolError('queue-full', 'the conversion queue is full')
    this.#reserved++
    let held = true
    const give = () => {
      if (!held) return false
      held = false
      this.#reserved--
      return true
    }
    return {
      run: (job, handlers = {}) => {
        if (!give()) throw new Error('a reservation runs one job')
        return this.#enqueue(job, handlers)
      },
      release: () => { give() },
    }
  }

  /** run queues a job; it throws PoolError('queue-full') at once when the queue is full. */
  run(job: Job, handlers: Handlers = {}): Running {
    return this.reserve().run(job, handlers)
  }

  #enqueue(job: Job, handlers: Handlers): Running {
    if (this.#closed) throw new PoolError('closed', 'the conversion pool is closed')
    let entry!: Entry
    const result = new Promise<JobResult>((resolve, reject) => {
      // Settling (either way) stamps the end: the engine time stops there.
      const end = () => { entry.endedAt ??= performance.now() }
      entry = {
        id: this.#nextId++, job, handlers, queuedAt: performance.now(), pausedMs: 0,
        resolve: (value) => { end(); resolve(value) }, reject: (error) => { end(); reject(error) },
      }
    })
    this.#queue.push(entry)
    this.#fill()
    this.#dispatch()
    return {
      result,
      stats: () => statsOf(entry),
      ack: () => this.#ack(entry),
      cancel: () => this.#cancel(entry),
    }
  }

  /** gauges: the queue and the workers as they are now (read at each metrics scrape). */
  gauges(): PoolGauges {
    let busy = 0
    for (const slot of this.#slots) if (slot.busy !== null) busy++
    // Waiting jobs and reserved places beyond the workers free to take them (as reserve counts them).
    const free = this.#slots.size - busy + Math.max(0, this.#options.size - this.#slots.size)
    return {
      queued: Math.max(0, this.#queue.length + this.#reserved - free),
      capacity: this.#options.maxQueue,
      alive: this.#slots.size,
      busy,
      size: this.#options.size,
    }
  }

  async close(): Promise<void> {
    this.#closed = true
    for (const entry of this.#queue.splice(0)) entry.reject(new PoolError('closed', 'the conversion pool is closed'))
    await Promise.all([...this.#slots].map((slot) => this.#retire(slot, 'closed')))
  }

  #fill(): void {
    while (!this.#closed && this.#slots.size < this.#options.size) this.#spawn()
  }

  #spawn(): void {
    const credit = new SharedArrayBuffer(4)
    const mb = Math.ceil(this.#options.maxMemoryBytes / 1048576)
    const worker = new Worker(WORKER_URL, {
      workerData: { credit, maxMemoryBytes: this.#options.maxMemoryBytes } satisfies WorkerData,
      // The JS heap holds little (the documents live in the engines' heaps): a quarter of the budget, 64 MiB at least.
      resourceLimits: { maxOldGenerationSizeMb: Math.max(64, Math.floor(mb / 4)), maxYoungGenerationSizeMb: 16 },
    })
    const slot: Slot = { worker, inFlight: new Int32Array(credit), ready: false, busy: null, jobs: 0, retiring: false }
    this.#slots.add(slot)
    worker.on('message', (message: FromWorker) => this.#onMessage(slot, message))
    worker.on('error', (error) => this.#onDeath(slot, `worker error: ${error.message}`))
    worker.on('exit', (code) => this.#onDeath(slot, `worker exited with code ${code}`))
  }

  #dispatch(): void {
    for (const slot of this.#slots) {
      if (!slot.ready || slot.busy !== null || slot.retiring) continue
      const entry = this.#queue.shift()
      if (entry === undefined) return
      slot.busy = entry
      entry.slot = slot
      entry.startedAt = performance.now()
      entry.worker = slot.worker.threadId
      this.#options.onQueueWait?.((entry.startedAt - entry.queuedAt) / 1000)
      this.#arm(slot, entry, this.#options.timeoutMs)
      const pdf = entry.job.pdf
      slot.worker.postMessage({ type: 'job', id: entry.id, job: entry.job } satisfies ToWorker, [pdf.buffer as ArrayBuffer])
    }
  }

  #onMessage(slot: Slot, message: FromWorker): void {
    if (message.type === 'ready') {
      slot.ready = true
      this.#dispatch()
      return
    }
    const entry = slot.busy
    if (entry === null || entry.id !== message.id) return
    switch (message.type) {
      case 'start':
        entry.handlers.onStart?.(message.pages, message.pageCount)
        return
      case 'page':
        entry.handlers.onPage?.(message.page, message.png)
        return
      case 'chunk':
        entry.handlers.onChunk?.(message.bytes)
        return
      case 'paused':
        entry.pausedAt = performance.now()
        clearTimeout(entry.timer)
        entry.remaining = Math.max(0, entry.deadline! - Date.now())
        entry.timer = setTimeout(() => this.#onTimeout(slot, entry, 'the client took nothing', this.#options.stallTimeoutMs), this.#options.stallTimeoutMs)
        return
      case 'resumed':
        if (entry.pausedAt !== undefined) entry.pausedMs += performance.now() - entry.pausedAt
        entry.pausedAt = undefined
        clearTimeout(entry.timer)
        this.#arm(slot, entry, entry.remaining ?? this.#options.timeoutMs)
        return
      case 'done': {
        this.#release(slot, entry)
        entry.resolve(message.result)
        if (message.spent) void this.#retire(slot, 'trap', 'engine stopped mid-run')
        else if (slot.jobs >= this.#options.maxJobsPerWorker) void this.#retire(slot, 'job count', `recycled after ${slot.jobs} jobs`)
        else if (message.memoryBytes > this.#options.maxMemoryBytes) {
          void this.#retire(slot, 'memory', `recycled at ${Math.round(message.memoryBytes / 1048576)} MiB of memory`)
        }
        break
      }
      case 'failed':
        this.#release(slot, entry)
        entry.reject(new PoolError('failed', message.message))
        // After a WebAssembly trap the engine's memory cannot be trusted: start afresh. An error the engine raised itself is an answer.
        if (message.fatal) void this.#retire(slot, 'trap', `engine trap: ${message.message.slice(0, 200)}`)
        break
    }
    this.#dispatch()
  }

  #release(slot: Slot, entry: Entry): void {
    clearTimeout(entry.timer)
    slot.busy = null
    slot.jobs++
  }

  #arm(slot: Slot, entry: Entry, ms: number): void {
    entry.deadline = Date.now() + ms
    entry.timer = setTimeout(() => this.#onTimeout(slot, entry, 'conversion'), ms)
  }

  #ack(entry: Entry): void {
    const slot = entry.slot
    // A late ack (the job is over) must not give credit to the worker's next job.
    if (slot === undefined || slot.busy !== entry) return
    Atomics.sub(slot.inFlight, IN_FLIGHT, 1)
    Atomics.notify(slot.inFlight, IN_FLIGHT)
  }

  #onTimeout(slot: Slot, entry: Entry, what: string, ms = this.#options.timeoutMs): void {
    if (slot.busy !== entry) return
    slot.busy = null
    entry.reject(new PoolError(what === 'conversion' ? 'timeout' : 'stalled', `${what} (${ms} ms)`))
    void this.#retire(slot, what === 'conversion' ? 'timeout' : 'stalled', what === 'conversion' ? 'conversion timed out' : 'the client took nothing')
  }

  #onDeath(slot: Slot, why: string): void {
    if (!this.#slots.has(slot)) return
    this.#slots.delete(slot)
    const entry = slot.busy
    if (entry !== null) {
      clearTimeout(entry.timer)
      entry.reject(new PoolError('crashed', why))
    }
    if (!slot.retiring) this.#options.onRecycle?.('death', why)
    this.#fill()
    this.#dispatch()
  }

  #cancel(entry: Entry): void {
    const queued = this.#queue.indexOf(entry)
    if (queued >= 0) {
      this.#queue.splice(queued, 1)
      entry.reject(new PoolError('cancelled', 'cancelled'))
    } else if (entry.slot?.busy === entry) {
      entry.slot.busy = null
      clearTimeout(entry.timer)
      entry.reject(new PoolError('cancelled', 'cancelled'))
      void this.#retire(entry.slot, 'cancelled', 'conversion cancelled by the client')
    }
  }

  /** retire stops a worker and starts its replacement (unless the pool is closing). */
  async #retire(slot: Slot, reason: ReplacementReason | 'closed', why: string = reason): Promise<void> {
    if (slot.retiring) return
    slot.retiring = true
    if (reason !== 'closed') this.#options.onRecycle?.(reason, why)
    this.#slots.delete(slot)
    this.#fill()
    this.#dispatch()
    await slot.worker.terminate()
  }
}

function statsOf(entry: Entry): JobStats {
  const end = entry.endedAt ?? performance.now()
  const paused = entry.pausedMs + (entry.pausedAt === undefined ? 0 : end - entry.pausedAt)
  return {
    worker: entry.worker ?? null,
    queuedMs: (entry.startedAt ?? end) - entry.queuedAt,
    engineMs: entry.startedAt === undefined ? 0 : Math.max(0, end - entry.startedAt - paused),
  }
}
