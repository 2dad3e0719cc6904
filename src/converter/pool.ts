/**
 * ConversionPool runs conversions in worker threads, never on the event loop: a fixed
 * number of workers started on first use, a bounded queue, a time limit per job (its workers
 * are terminated and replaced), and recycling of a worker after a number of jobs, when its
 * WebAssembly memory has grown (it never shrinks: see `check`, run after every part whatever
 * its outcome), after an engine trap, or when it dies.
 *
 * A job runs on one worker (its lead) and, when it is a page-by-page job (images, text) of several pages and no other
 * job waits, on every other free worker too (helpers): each opens the same bytes (shared, not
 * copied) and claims pages one at a time, and the pool hands the pages to the consumer in
 * order. A job that arrives while workers help another takes one of them: the helper stops at
 * its next page boundary, so one document never starves another behind it. Everything else
 * is the job's, whatever the number of its parts: one time limit, one output limit counted
 * in page order, and one end: a timeout, a trap, a dead worker or a client that goes away ends
 * the whole job with the same error, and replaces every worker still on it.
 *
 * The time limit counts the engine's time, not the time the workers wait for a slow client
 * to take output; a client that takes nothing for `stallTimeoutMs` is given up on and its
 * workers replaced. A worker may use `maxMemoryBytes` in all: its engines' heaps grow only
 * within it (a job that needs more is refused CONVERSION_MEMORY_EXCEEDED and its worker
 * replaced), and its JS heap is bounded by `resourceLimits`.
 *
 * Waiting jobs wait in one line per account (fair.ts): a free worker goes to the account with
 * the fewest jobs running, and an account holds at most `maxPerAccount` places. A worker that
 * works on one page for `pageTimeoutMs` without a word ends its job as the time limit does:
 * neither engine can be stopped mid-page, so a page that would draw for ever is cut there.
 *
 * Why not piscina: it has no per-worker job limit, and a worker that exits by itself after
 * answering races with the delivery of its answer. The pool is small enough to own.
 */
import { Worker } from 'node:worker_threads'
// The workers encode pages with libvips (encode.ts): on glibc the main thread must load it first, so that
// its shared libraries stay loaded while workers come and go (sharp's documentation, "worker threads").
import 'sharp'
import {
  HELD_KIB,
  JOB_COUNTERS,
  NEXT,
  STOP,
  TAKEN,
  pageWork,
  type FromWorker,
  type Job,
  type JobResult,
  type Refusal,
  type ToWorker,
  type WorkerData,
} from './protocol.ts'
import type { PoolGauges, ReplacementReason } from '../metrics/metrics.ts'
import { FairQueue } from './fair.ts'
import { release } from './spool.ts'
import { outsideTraces, record, traceparent } from '../tracing/tracing.ts'

/** A performance.now() reading as epoch milliseconds (what a span's times are). */
const epoch = (at: number): number => performance.timeOrigin + at

export interface PoolOptions {
  readonly size: number
  /** Let free workers help with a running page-by-page job's pages (default true). */
  readonly splitPages?: boolean
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
  /** Most conversions one account may have running, waiting and being uploaded at once (default: no limit). */
  readonly maxPerAccount?: number
  /**
   * Longest a worker may work on one page without a word (a page rendered, a page begun), ms:
   * its job then ends and its workers are replaced (default: only the job's time limit).
   */
  readonly pageTimeoutMs?: number
}

export type PoolFailure = 'queue-full' | 'account-busy' | 'timeout' | 'page-timeout' | 'stalled' | 'crashed' | 'failed' | 'cancelled' | 'closed'

export class PoolError extends Error {
  override name = 'PoolError'
  readonly reason: PoolFailure

  constructor(reason: PoolFailure, message: string) {
    super(message)
    this.reason = reason
  }
}

export interface Handlers {
  /** Rendering starts: the result will hold `pages` pages of a `pageCount`-page document (a split: `labels` name its parts by their pages). */
  onStart?(pages: number, pageCount: number, labels?: readonly string[]): void
  /** One page in the job's format, in order. Call `ack` once it has been taken, to let the workers render further. */
  onPage?(page: number, bytes: Uint8Array): void
  /** One piece of PostScript, in order; `ack` it once taken, as a page. */
  onChunk?(bytes: Uint8Array): void
  /** Ghostscript begins a page of a PostScript job (its only word of progress). */
  onProgress?(): void
}

/** What a job took, for the log and the metrics: read once it has settled. */
export interface JobStats {
  /** The lead worker's thread id (null: it never ran). */
  readonly worker: number | null
  /** How many workers rendered it (the lead and its helpers). */
  readonly workers: number
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
  /** cancel gives up on the job (the client went away): queued, it is dropped; running, its workers are replaced. */
  cancel(): void
}

/** A place in the pool, taken before the job is known. */
export interface Reservation {
  /** run queues the job in the reserved place. */
  run(job: Job, handlers?: Handlers): Running
  /** release gives the place back (the upload was refused); a no-op after run. */
  release(): void
}

/**
 * A job splits only while this many of its pages are still to be claimed: a helper's own
 * opening of the document costs more than it saves on the last page.
 */
const MIN_PAGES_TO_HELP = 2
/** How many pages a job may have rendered and not yet taken, per worker it may run on. */
const PAGES_AHEAD_PER_WORKER = 2
/**
 * A worker whose memory has grown this much over what it held fresh is replaced once it has
 * been idle IDLE_RETIRE_MS: an idle node gives back what its jobs grew (WebAssembly memory
 * never shrinks), and a busy one keeps its workers.
 */
const IDLE_SLACK_BYTES = 64 * 1048576
const IDLE_RETIRE_MS = 5000
/**
 * How long a conversion job's run keeps its workers before it gives way, at its next page, to
 * another account's conversion waiting for one: fairness at the grain the work is done in (pages),
 * not only at the claim. Giving way costs the next worker an opening of the document.
 */
const SLICE_MS = 1000

type Outcome = { readonly result: JobResult } | { readonly error: PoolError }

interface Entry {
  readonly id: number
  /** The account it is for ('' for none): the queue takes turns between accounts. */
  readonly account: string
  /** A conversion job's run: it holds no place of the queue's or the account's. */
  readonly background: boolean
  /** Its time limit (engine time), ms. */
  readonly timeoutMs: number
  readonly job: Job
  readonly handlers: Handlers
  /** The job's shared counters (NEXT, TAKEN): see protocol.ts. */
  readonly counters: Int32Array
  settle(outcome: Outcome): void
  settled: boolean
  /** The slots running a part of it. */
  readonly parts: Set<Slot>
  /** Every worker that has run a part, for the stats. */
  readonly workers: Set<number>
  /** The resolved page list, once the lead has started a page-by-page job. */
  pages?: readonly number[]
  /** The lead's result, kept until every part has ended. */
  result?: JobResult
  /** Pages come in out of order: held here until those before them have come. */
  readonly held: Map<number, { page: number; bytes: Uint8Array }>
  /** The index of the next page to hand over. */
  next: number
  /**
   * What was handed over and not yet taken, in order: the KiB of each page (counted in the job's HELD_KIB) or piece of
   * PostScript (which waits in the worker's window of pieces, not HELD_KIB).
   */
  readonly handed: { readonly kib: number; readonly page: boolean }[]
  /** A conversion job's run asked to give way at its next page (another account waits): it waits its turn again with its pages left. */
  yielding: boolean
  /** It gave way, and waits in the queue: its next worker goes on from the pages left. */
  yielded: boolean
  /** When it last took a worker (its time slice starts there). */
  sliceStart: number
  outputBytes: number
  timer?: NodeJS.Timeout
  /** Engine time left (ms) when every part paused for the client. */
  remaining?: number
  deadline?: number
  readonly queuedAt: number
  /** The traceparent of the span the job was queued under (its request's conversion, or its job's run); undefined when not traced. */
  readonly trace: string | undefined
  startedAt?: number
  pausedAt?: number
  pausedMs: number
  endedAt?: number
  worker?: number
}

interface Part {
  readonly entry: Entry
  readonly lead: boolean
  /** When this worker took it (performance.now()). */
  readonly begunAt: number
  /** Waiting for the consumer to take output. */
  paused: boolean
  /** Asked to stop at its next page boundary. */
  stopping: boolean
}

interface Slot {
  readonly worker: Worker
  /** The worker's STOP flag (shared with it). */
  readonly control: Int32Array
  ready: boolean
  part: Part | null
  jobs: number
  retiring: boolean
  /** What the worker held fresh (engines' memory and JS heap), once ready. */
  freshBytes: number
  /** Replaces the worker once it has been idle IDLE_RETIRE_MS holding memory its jobs grew. */
  idle?: NodeJS.Timeout
  /** Runs out when the part has worked on one page for `pageTimeoutMs`. */
  pageTimer?: NodeJS.Timeout
}

const WORKER_URL = new URL('./worker.ts', import.meta.url)

/**
 * shared gives the PDF's bytes in a SharedArrayBuffer, which every part of the job reads
 * without a copy of its own (uploads are read into one at once: then it copies nothing).
 */
export function shared(bytes: Uint8Array): Uint8Array {
  if (bytes.buffer instanceof SharedArrayBuffer) return bytes
  const copy = new Uint8Array(new SharedArrayBuffer(bytes.byteLength))
  copy.set(bytes)
  return copy
}

export class ConversionPool {
  readonly #options: PoolOptions
  readonly #slots = new Set<Slot>()
  readonly #queue = new FairQueue<Entry>()
  /** Jobs with at least one part running, in the order they started. */
  readonly #running = new Set<Entry>()
  /** Each account's conversions from their reservation until they settle. */
  readonly #held = new Map<string, number>()
  #nextId = 1
  #reserved = 0
  /** Conversion jobs' runs waiting in the queue: they take no place of it. */
  #backgroundWaiting = 0
  /** KiB of pages and pieces on the main thread: arrived from a worker and not yet taken (copied out, or released). */
  #heldKib = 0
  #closed = false
  /** Runs out when a conversion job's slice ends while another account waits (yieldJobs). */
  #sliceTimer: NodeJS.Timeout | undefined

  constructor(options: PoolOptions) {
    this.#options = options
  }

  /** A job's window: how many pages may be rendered ahead of the consumer, whatever the number of its parts. */
  get #window(): number {
    return PAGES_AHEAD_PER_WORKER * this.#options.size
  }

  /** free counts the workers a new job could have soon: idle, yet to start, or helping another job (they give way). */
  #free(): number {
    let free = Math.max(0, this.#options.size - this.#slots.size)
    for (const slot of this.#slots) if (!slot.retiring && (slot.part === null || !slot.part.lead)) free++
    return free
  }

  /**
   * reserve takes a place for a job that is yet to be read (an upload): it throws
   * PoolError('queue-full') at once when there is none, so that a refused client is told
   * before it sends its body. The place is the job's when it runs, or freed by `release`.
   */
  reserve(account = ''): Reservation {
    if (this.#closed) throw new PoolError('closed', 'the conversion pool is closed')
    // The account's own limit first: its client is told to slow down (429), not that the service is full.
    const limit = this.#options.maxPerAccount
    if (limit !== undefined && (this.#held.get(account) ?? 0) >= limit) throw new PoolError('account-busy', `the account has ${limit} conversions under way`)
    if (this.#queue.size - this.#backgroundWaiting + this.#reserved >= this.#options.maxQueue + this.#free())
      throw new PoolError('queue-full', 'the conversion queue is full')
    this.#reserved++
    this.#hold(account, 1)
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
        return this.#enqueue(account, job, handlers, { background: false, timeoutMs: this.#options.timeoutMs })
      },
      release: () => {
        if (!give()) return
        this.#hold(account, -1)
        this.#dispatch() // free workers may help again
      },
    }
  }

  /** run queues a job for `account`; it throws PoolError('queue-full' or 'account-busy') at once when it may not wait. */
  run(job: Job, handlers: Handlers = {}, account = ''): Running {
    return this.reserve(account).run(job, handlers)
  }

  /**
   * background queues the run of a conversion job (not a request's conversion): it takes no
   * place of the queue's or of the account's (the job runner keeps its own count of what it
   * runs), and has its own time limit. It waits its turn with the rest.
   */
  background(job: Job, handlers: Handlers, account: string, timeoutMs: number): Running {
    return this.#enqueue(account, job, handlers, { background: true, timeoutMs })
  }

  /** hold counts an account's conversions under way (its map keeps only accounts with some). */
  #hold(account: string, change: number): void {
    const n = (this.#held.get(account) ?? 0) + change
    if (n > 0) this.#held.set(account, n)
    else this.#held.delete(account)
  }

  /** runningFor counts the jobs of `account` that hold a worker. */
  #runningFor(account: string): number {
    let n = 0
    for (const entry of this.#running) if (entry.account === account) n++
    return n
  }

  #enqueue(account: string, job: Job, handlers: Handlers, kind: { readonly background: boolean; readonly timeoutMs: number }): Running {
    if (this.#closed) throw new PoolError('closed', 'the conversion pool is closed')
    let entry!: Entry
    const result = new Promise<JobResult>((resolve, reject) => {
      entry = {
        id: this.#nextId++,
        account,
        ...kind,
        job: { ...job, pdf: shared(job.pdf) },
        handlers,
        counters: new Int32Array(new SharedArrayBuffer(4 * JOB_COUNTERS)),
        settled: false,
        parts: new Set(),
        workers: new Set(),
        held: new Map(),
        next: 0,
        handed: [],
        yielding: false,
        yielded: false,
        sliceStart: 0,
        outputBytes: 0,
        queuedAt: performance.now(),
        trace: traceparent(),
        pausedMs: 0,
        settle: (outcome) => {
          if (entry.settled) return
          entry.settled = true
          if (!entry.background) this.#hold(account, -1)
          // Settling (either way) stamps the end: the engine time stops there.
          entry.endedAt ??= performance.now()
          if ('result' in outcome) resolve(outcome.result)
          else reject(outcome.error)
        },
      }
    })
    this.#queue.push(account, entry)
    if (entry.background) this.#backgroundWaiting++
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
    for (const slot of this.#slots) if (slot.part !== null) busy++
    return {
      // Waiting jobs and reserved places beyond the workers free to take them (as reserve counts them).
      queued: Math.max(0, this.#queue.size - this.#backgroundWaiting + this.#reserved - this.#free()),
      capacity: this.#options.maxQueue,
      alive: this.#slots.size,
      busy,
      size: this.#options.size,
      heldBytes: this.#heldKib * 1024,
    }
  }

  async close(): Promise<void> {
    this.#closed = true
    clearTimeout(this.#sliceTimer)
    this.#backgroundWaiting = 0
    for (const entry of this.#queue.drain()) entry.settle({ error: new PoolError('closed', 'the conversion pool is closed') })
    for (const entry of this.#running) {
      clearTimeout(entry.timer)
      entry.settle({ error: new PoolError('closed', 'the conversion pool is closed') })
    }
    await Promise.all([...this.#slots].map((slot) => this.#retire(slot, 'closed')))
  }

  #fill(): void {
    // Outside any trace: a worker's listeners keep the context they were added in for the worker's whole life, and the
    // request or job whose call made the worker is not the cause of what its later messages do.
    while (!this.#closed && this.#slots.size < this.#options.size) outsideTraces(() => this.#spawn())
  }

  #spawn(): void {
    const control = new SharedArrayBuffer(4)
    const mb = Math.ceil(this.#options.maxMemoryBytes / 1048576)
    const worker = new Worker(WORKER_URL, {
      workerData: { control, maxMemoryBytes: this.#options.maxMemoryBytes } satisfies WorkerData,
      // The JS heap holds little (the documents live in the engines' heaps): a quarter of the budget, 64 MiB at least.
      resourceLimits: { maxOldGenerationSizeMb: Math.max(64, Math.floor(mb / 4)), maxYoungGenerationSizeMb: 16 },
    })
    const slot: Slot = { worker, control: new Int32Array(control), ready: false, part: null, jobs: 0, retiring: false, freshBytes: 0 }
    this.#slots.add(slot)
    worker.on('message', (message: FromWorker) => this.#onMessage(slot, message))
    worker.on('error', (error) => this.#onDeath(slot, `worker error: ${error.message}`))
    worker.on('exit', (code) => this.#onDeath(slot, `worker exited with code ${code}`))
  }

  /**
   * dispatch gives each free worker the next queued job, or else a share of a running page-by-page
   * job with pages left to claim; then, while jobs still wait, it asks helpers to give way.
   */
  #dispatch(): void {
    let starting = 0
    for (const slot of this.#slots) {
      if (slot.retiring) continue
      if (!slot.ready) {
        starting++
        continue
      }
      if (slot.part !== null) continue
      const entry = this.#queue.shift((account) => this.#runningFor(account))
      if (entry?.yielded) this.#resume(slot, entry)
      else if (entry !== undefined) this.#lead(slot, entry)
      else {
        const job = this.#needsHelp()
        if (job !== undefined) this.#help(slot, job)
      }
    }
    // A helper gives way to a waiting job (one each), unless a worker on its way will take it.
    let wanted = this.#queue.size - starting
    const helpers = [...this.#slots].filter((slot) => slot.part !== null && !slot.part.lead && !slot.retiring)
    for (const slot of helpers) if (slot.part!.stopping) wanted--
    for (const slot of helpers) {
      if (wanted <= 0) break
      if (slot.part!.stopping) continue
      this.#stopPart(slot)
      wanted--
    }
    if (wanted > 0) this.#yieldJobs(wanted)
  }

  /**
   * yieldJobs asks conversion jobs' runs to give way at their next page, up to `wanted` of them,
   * to another account's conversions waiting for a worker, each once it has had its slice; a
   * run whose slice is still going is asked when it ends. A synchronous conversion never gives
   * way (its client waits, and its time is bounded); a job's run waits its turn again.
   */
  #yieldJobs(wanted: number): void {
    const now = performance.now()
    let soonest = Number.POSITIVE_INFINITY
    for (const entry of this.#running) {
      if (wanted <= 0) break
      if (!entry.background || entry.settled || entry.yielding || entry.pages === undefined || pageWork(entry.job) === null) continue
      if (!this.#queue.waitsBesides(entry.account)) continue
      const left = entry.sliceStart + SLICE_MS - now
      if (left > 0) {
        soonest = Math.min(soonest, left)
        continue
      }
      entry.yielding = true
      for (const slot of entry.parts) if (slot.part !== null && !slot.part.stopping) this.#stopPart(slot)
      wanted--
    }
    if (wanted > 0 && soonest !== Number.POSITIVE_INFINITY && this.#sliceTimer === undefined) {
      this.#sliceTimer = setTimeout(() => {
        this.#sliceTimer = undefined
        this.#dispatch()
      }, Math.ceil(soonest))
      this.#sliceTimer.unref()
    }
  }

  /** resume gives a run that gave way a worker again: it goes on from the pages left, as a helper would, and may give way again. */
  #resume(slot: Slot, entry: Entry): void {
    if (entry.background) this.#backgroundWaiting--
    entry.yielded = false
    entry.yielding = false
    this.#begin(slot, entry, true)
    entry.sliceStart = performance.now()
    this.#running.add(entry)
    this.#arm(entry, entry.remaining ?? entry.timeoutMs)
    const { job } = entry
    slot.worker.postMessage({
      type: 'help',
      id: entry.id,
      counters: entry.counters.buffer as SharedArrayBuffer,
      window: this.#window,
      share: { pdf: job.pdf, password: job.password, work: pageWork(job)!, color: job.color, pages: entry.pages! },
    } satisfies ToWorker)
  }

  /** requeue puts a run that gave way back in its account's line, its engine time kept for when it resumes. */
  #requeue(entry: Entry): void {
    const now = performance.now()
    if (entry.pausedAt !== undefined) {
      entry.pausedMs += now - entry.pausedAt
      entry.pausedAt = undefined
    } else entry.remaining = Math.max(0, entry.deadline! - Date.now())
    entry.yielding = false
    entry.yielded = true
    this.#queue.push(entry.account, entry)
    if (entry.background) this.#backgroundWaiting++
  }

  #lead(slot: Slot, entry: Entry): void {
    if (entry.background) this.#backgroundWaiting--
    this.#begin(slot, entry, true)
    entry.startedAt = performance.now()
    entry.sliceStart = entry.startedAt
    entry.worker = slot.worker.threadId
    this.#running.add(entry)
    this.#options.onQueueWait?.((entry.startedAt - entry.queuedAt) / 1000)
    if (entry.trace !== undefined)
      record('conversion.queue', epoch(entry.queuedAt), epoch(entry.startedAt), { 'tessera.worker': slot.worker.threadId }, entry.trace)
    this.#arm(entry, entry.timeoutMs)
    slot.worker.postMessage({
      type: 'job',
      id: entry.id,
      job: entry.job,
      counters: entry.counters.buffer as SharedArrayBuffer,
      window: this.#window,
    } satisfies ToWorker)
  }

  /**
   * needsHelp finds the running page-by-page job with the most pages left to claim, if any has enough
   * and no other conversion is on its way.
   */
  #needsHelp(): Entry | undefined {
    // A conversion whose upload is being read will want a worker in a moment: helping now would be undone at once.
    if (this.#options.splitPages === false || this.#reserved > 0) return undefined
    let best: Entry | undefined
    let most = MIN_PAGES_TO_HELP - 1
    for (const entry of this.#running) {
      if (entry.settled || entry.pages === undefined || pageWork(entry.job) === null) continue
      const left = entry.pages.length - Atomics.load(entry.counters, NEXT)
      if (left > most) {
        best = entry
        most = left
      }
    }
    return best
  }

  #help(slot: Slot, entry: Entry): void {
    const { job } = entry
    this.#begin(slot, entry, false)
    this.#setPaused(entry)
    slot.worker.postMessage({
      type: 'help',
      id: entry.id,
      counters: entry.counters.buffer as SharedArrayBuffer,
      window: this.#window,
      share: { pdf: job.pdf, password: job.password, work: pageWork(job)!, color: job.color, pages: entry.pages! },
    } satisfies ToWorker)
  }

  #begin(slot: Slot, entry: Entry, lead: boolean): void {
    clearTimeout(slot.idle)
    Atomics.store(slot.control, STOP, 0)
    slot.part = { entry, lead, paused: false, stopping: false, begunAt: performance.now() }
    entry.parts.add(slot)
    entry.workers.add(slot.worker.threadId)
    this.#watch(slot, true)
  }

  /**
   * watch starts a part's page clock again, or stops it (`working` false: the part waits for
   * the consumer, or is over). Any word from a working part is progress: a page begun or
   * rendered, a piece of output; a part silent for `pageTimeoutMs` is stuck on one page
   * (engines cannot be stopped from outside mid-page), and its job ends as at its time limit.
   */
  #watch(slot: Slot, working: boolean): void {
    clearTimeout(slot.pageTimer)
    const ms = this.#options.pageTimeoutMs
    const part = slot.part
    if (!working || ms === undefined || part === null) return
    slot.pageTimer = setTimeout(() => {
      if (slot.part !== part) return
      this.#fail(part.entry, new PoolError('page-timeout', `a page took longer than ${ms} ms`), 'timeout', `a page took longer than ${ms} ms`)
    }, ms)
  }

  /** stopPart asks a worker to end its part at its next page boundary (waking it if it waits for the consumer). */
  #stopPart(slot: Slot): void {
    slot.part!.stopping = true
    Atomics.store(slot.control, STOP, 1)
    Atomics.notify(slot.part!.entry.counters, TAKEN)
  }

  #onMessage(slot: Slot, message: FromWorker): void {
    if (message.type === 'ready') {
      slot.ready = true
      slot.freshBytes = message.memoryBytes
      this.#dispatch()
      return
    }
    const part = slot.part
    if (part === null || part.entry.id !== message.id) {
      // A page or piece of a job this worker is no longer on (it was ended, and the worker replaced): nobody takes it.
      if (message.type === 'page' || message.type === 'chunk') release(message.bytes)
      return
    }
    const entry = part.entry
    this.#watch(slot, message.type !== 'paused' && message.type !== 'done' && message.type !== 'failed')
    switch (message.type) {
      case 'start':
        entry.pages = message.pages
        if (!entry.settled) entry.handlers.onStart?.(message.pages.length, message.pageCount, message.labels)
        break // free workers may now help
      case 'page':
        if (entry.trace !== undefined) {
          const attributes = { 'tessera.page': message.page, 'tessera.worker': slot.worker.threadId, 'tessera.bytes': message.bytes.byteLength }
          record('conversion.page', message.from, message.to, attributes, entry.trace)
        }
        this.#onPage(entry, message.index, message.page, message.bytes)
        return
      case 'chunk':
        if (entry.settled) release(message.bytes)
        else {
          const k = kib(message.bytes)
          this.#heldKib += k
          entry.handed.push({ kib: k, page: false })
          entry.handlers.onChunk?.(message.bytes)
        }
        return
      case 'progress':
        if (!entry.settled) entry.handlers.onProgress?.()
        return
      case 'paused':
      case 'resumed':
        part.paused = message.type === 'paused'
        this.#setPaused(entry)
        return
      case 'done': {
        const result = message.result
        if (entry.trace !== undefined) this.#traceWorker(slot, part, result !== null && !result.ok ? result.code : undefined)
        // A part refused (a helper out of memory too) ends the whole job with its refusal.
        if (result !== null && !result.ok) this.#refuse(entry, result)
        else if (result !== null) entry.result = result
        this.#end(slot)
        const overBudget = result !== null && !result.ok && result.code === 'CONVERSION_MEMORY_EXCEEDED'
        if (message.spent) void this.#retire(slot, overBudget ? 'memory' : 'trap', overBudget ? 'the job ran out of its memory' : 'engine stopped mid-run')
        else this.#check(slot, message.memoryBytes)
        break
      }
      case 'failed':
        if (entry.trace !== undefined) this.#traceWorker(slot, part, 'failed')
        slot.part = null
        slot.jobs++
        entry.parts.delete(slot)
        // After a WebAssembly trap the engine's memory cannot be trusted: start afresh. An error the engine raised itself is an answer.
        if (message.fatal) void this.#retire(slot, 'trap', `engine trap: ${message.message.slice(0, 200)}`)
        else this.#check(slot, message.memoryBytes)
        // Any other part of the job is mid-page: its worker is replaced.
        this.#fail(entry, new PoolError('failed', message.message), 'cancelled', 'another part of its job failed')
        break
    }
    this.#dispatch()
  }

  /** traceWorker: the span of one worker's share of a traced job, from when it took it to its last word (its pages are spans of their own). */
  #traceWorker(slot: Slot, part: Part, error: string | undefined): void {
    const attributes = { 'tessera.worker': slot.worker.threadId, 'tessera.lead': part.lead }
    record('conversion.worker', epoch(part.begunAt), epoch(performance.now()), attributes, part.entry.trace, error)
  }

  /**
   * check runs after every part a worker ends, whatever its outcome: the worker is replaced
   * after its job limit, or when its memory (which never shrinks) has taken half of the room
   * its budget left it fresh, so that the next job has that room at least; one that has grown
   * less is replaced once it has been idle IDLE_RETIRE_MS.
   */
  #check(slot: Slot, memoryBytes: number): void {
    const { maxJobsPerWorker, maxMemoryBytes } = this.#options
    const grown = memoryBytes - slot.freshBytes
    const mib = Math.round(memoryBytes / 1048576)
    if (slot.jobs >= maxJobsPerWorker) void this.#retire(slot, 'job count', `recycled after ${slot.jobs} jobs`)
    else if (grown > (maxMemoryBytes - slot.freshBytes) / 2) void this.#retire(slot, 'grown', `recycled at ${mib} MiB of memory`)
    else if (grown > IDLE_SLACK_BYTES) {
      clearTimeout(slot.idle)
      slot.idle = setTimeout(() => {
        if (slot.part === null) void this.#retire(slot, 'grown', `recycled at ${mib} MiB of memory, idle`)
      }, IDLE_RETIRE_MS)
      slot.idle.unref()
    }
  }

  /** refuse settles a job with a refusal made mid-run: its other parts stop at their next page; the job's timer replaces any that does not. */
  #refuse(entry: Entry, refusal: Refusal): void {
    if (entry.settled) return
    this.#drop(entry)
    entry.settle({ result: refusal })
    for (const slot of entry.parts) if (slot.part !== null && !slot.part.stopping) this.#stopPart(slot)
  }

  /**
   * onPage takes a page from any part and hands over, in order, every page it completes; the
   * output limit counts them in that order. A page is counted in the job's HELD_KIB from its
   * arrival until it is taken; one that is not handed over (the job is over, or refused) is released at once.
   */
  #onPage(entry: Entry, index: number, page: number, bytes: Uint8Array): void {
    if (entry.settled) {
      release(bytes)
      return
    }
    Atomics.add(entry.counters, HELD_KIB, kib(bytes))
    this.#heldKib += kib(bytes)
    entry.held.set(index, { page, bytes })
    for (let next = entry.held.get(entry.next); next !== undefined; next = entry.held.get(entry.next)) {
      entry.held.delete(entry.next)
      entry.outputBytes += next.bytes.byteLength
      // The first page over the limit is refused before it is handed over: a single image never starts.
      if (entry.outputBytes > entry.job.limits.maxOutputBytes) {
        this.#heldKib -= kib(next.bytes)
        release(next.bytes)
        this.#refuse(entry, { ok: false, code: 'OUTPUT_TOO_LARGE', params: { limit: entry.job.limits.maxOutputBytes } })
        return
      }
      entry.next++
      entry.handed.push({ kib: kib(next.bytes), page: true })
      entry.handlers.onPage?.(next.page, next.bytes)
    }
  }

  /** drop releases the pages a job holds out of order: it is over, and they will never be handed over. */
  #drop(entry: Entry): void {
    for (const { bytes } of entry.held.values()) {
      this.#heldKib -= kib(bytes)
      release(bytes)
    }
    entry.held.clear()
  }

  /** end takes a finished part off its worker; the job settles once its last part has ended. */
  #end(slot: Slot): void {
    const entry = slot.part!.entry
    slot.part = null
    slot.jobs++
    entry.parts.delete(slot)
    if (entry.parts.size > 0) {
      this.#setPaused(entry)
      return
    }
    clearTimeout(entry.timer)
    this.#running.delete(entry)
    if (entry.settled) return
    const result = entry.result
    // It gave way with pages left to claim: it waits its turn again.
    if (entry.yielding && result?.ok === true && entry.pages !== undefined && Atomics.load(entry.counters, NEXT) < entry.pages.length) {
      this.#requeue(entry)
      return
    }
    if (result === undefined) entry.settle({ error: new PoolError('failed', 'the job ended without a result') })
    else if (result.ok && result.op !== 'ps' && entry.next !== result.pages) {
      entry.settle({ error: new PoolError('failed', `the job ended with ${entry.next} of its ${result.pages} pages`) })
    } else entry.settle({ result })
  }

  /**
   * setPaused stops the job's clock while every part waits for the consumer (the client's
   * time, not the engine's) and starts the stall limit instead; it starts the clock again as
   * soon as one part works.
   */
  #setPaused(entry: Entry): void {
    if (entry.settled || entry.parts.size === 0) return
    const waiting = [...entry.parts].every((slot) => slot.part!.paused)
    if (waiting && entry.pausedAt === undefined) {
      entry.pausedAt = performance.now()
      clearTimeout(entry.timer)
      entry.remaining = Math.max(0, entry.deadline! - Date.now())
      entry.timer = setTimeout(() => this.#onTimeout(entry, 'stalled'), this.#options.stallTimeoutMs)
    } else if (!waiting && entry.pausedAt !== undefined) {
      entry.pausedMs += performance.now() - entry.pausedAt
      entry.pausedAt = undefined
      clearTimeout(entry.timer)
      this.#arm(entry, entry.remaining ?? entry.timeoutMs)
    }
  }

  #arm(entry: Entry, ms: number): void {
    entry.deadline = Date.now() + ms
    entry.timer = setTimeout(() => this.#onTimeout(entry, 'timeout'), ms)
  }

  #ack(entry: Entry): void {
    // A late ack (the job is over) only counts on the job's own counters. Room in bytes first: a worker waiting on TAKEN then sees both.
    const handed = entry.handed.shift()
    if (handed !== undefined) {
      this.#heldKib -= handed.kib
      if (handed.page) Atomics.sub(entry.counters, HELD_KIB, handed.kib)
    }
    Atomics.add(entry.counters, TAKEN, 1)
    Atomics.notify(entry.counters, TAKEN)
  }

  #onTimeout(entry: Entry, reason: 'timeout' | 'stalled'): void {
    const [what, ms, why] =
      reason === 'timeout'
        ? ['conversion', entry.timeoutMs, 'conversion timed out']
        : ['the client took nothing', this.#options.stallTimeoutMs, 'the client took nothing']
    // A job already over (a part that did not stop when asked) only has its workers replaced.
    this.#fail(entry, new PoolError(reason, `${what} (${ms} ms)`), reason, why)
  }

  /** fail ends a job with `error` and replaces every worker still on it: their engines are mid-run. */
  #fail(entry: Entry, error: PoolError, reason: ReplacementReason, why: string): void {
    clearTimeout(entry.timer)
    entry.settle({ error })
    this.#drop(entry)
    this.#running.delete(entry)
    for (const slot of entry.parts) {
      slot.part = null
      void this.#retire(slot, reason, why)
    }
    entry.parts.clear()
  }

  #onDeath(slot: Slot, why: string): void {
    if (!this.#slots.has(slot)) return
    this.#slots.delete(slot)
    clearTimeout(slot.pageTimer)
    const entry = slot.part?.entry
    slot.part = null
    if (!slot.retiring) this.#options.onRecycle?.('death', why)
    if (entry !== undefined) {
      entry.parts.delete(slot)
      this.#fail(entry, new PoolError('crashed', why), 'cancelled', 'another part of its job failed')
    }
    this.#fill()
    this.#dispatch()
  }

  /**
   * cancel gives up on a job. Queued, it is dropped. Running page by page (images, text), its
   * parts stop at their next page, as for a refusal: a worker is not terminated mid-page, as
   * terminating one that is writing a page with libvips loses the page's native buffers for good
   * (100 MB at 600 dpi); the job's timers still replace a part that does not stop. Any other job
   * (PostScript, a page operation: one engine run, no page boundary) has its workers replaced.
   */
  #cancel(entry: Entry): void {
    const error = new PoolError('cancelled', 'cancelled')
    if (this.#queue.remove(entry.account, entry)) {
      if (entry.background) this.#backgroundWaiting--
      entry.settle({ error })
    } else if (entry.parts.size > 0 && pageWork(entry.job) !== null) {
      entry.settle({ error })
      this.#drop(entry)
      for (const slot of entry.parts) if (slot.part !== null && !slot.part.stopping) this.#stopPart(slot)
    } else if (entry.parts.size > 0) {
      this.#fail(entry, error, 'cancelled', 'conversion cancelled by the client')
    }
  }

  /** retire stops a worker and starts its replacement (unless the pool is closing). */
  async #retire(slot: Slot, reason: ReplacementReason | 'closed', why: string = reason): Promise<void> {
    if (slot.retiring) return
    slot.retiring = true
    clearTimeout(slot.idle)
    clearTimeout(slot.pageTimer)
    if (reason !== 'closed') this.#options.onRecycle?.(reason, why)
    this.#slots.delete(slot)
    this.#fill()
    this.#dispatch()
    await slot.worker.terminate()
  }
}

/** kib: a page's size as HELD_KIB counts it (rounded up: a page of a few bytes still counts). */
const kib = (bytes: Uint8Array) => Math.ceil(bytes.byteLength / 1024)

function statsOf(entry: Entry): JobStats {
  const end = entry.endedAt ?? performance.now()
  const paused = entry.pausedMs + (entry.pausedAt === undefined ? 0 : end - entry.pausedAt)
  return {
    worker: entry.worker ?? null,
    workers: entry.workers.size,
    queuedMs: (entry.startedAt ?? end) - entry.queuedAt,
    engineMs: entry.startedAt === undefined ? 0 : Math.max(0, end - entry.startedAt - paused),
  }
}
