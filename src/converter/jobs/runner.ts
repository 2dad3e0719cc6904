/**
 * JobRunner runs conversion jobs on this node: every JOB_POLL_MS (or at once when nudged by a
 * submission here) it claims queued jobs from the store while it runs fewer than JOB_WORKERS,
 * and runs each through the conversion pool as a background conversion; the rest of the pool
 * stays with the synchronous routes, which take back a worker that helps a job at its next page.
 *
 * A claim is a lease: the runner renews it at a third of JOB_LEASE_SECONDS and at each page
 * (at most twice a second), and a renewal refused (the job was cancelled, or this node was so
 * slow another took it) stops the conversion at its next page. The result is written to the
 * store in pieces as the engine makes it, under the lease, never whole in memory; the zip and
 * the names are the synchronous route's (output.ts), so the bytes are the same. When the
 * result is complete it is uploaded to the job's resultUrl, if any, and the job ends with its
 * event (conversion.succeeded or conversion.failed), which feeds the webhook outbox in the
 * same step.
 *
 * A worker that dies on a job gives it back to the queue, as an attempt; a job whose node dies
 * is claimed again once its lease has run out; after JOB_MAX_ATTEMPTS claims it fails (a
 * poison document), which any node's runner decides. A node that closes gives its jobs back
 * at once, not as attempts.
 */
import { Writable } from 'node:stream'
import { finished } from 'node:stream/promises'
import type { Config } from '../../config/config.ts'
import { SealError, type Keyring } from '../../crypto/keyring.ts'
import { SYSTEM, actorName, type AuditDraft } from '../../domain/accounts.ts'
import { JOB_CHUNK_BYTES, secretsContext, type ConversionJob, type JobError, type JobResultInfo, type JobSecrets } from '../../domain/jobs.ts'
import { render, type ErrorCode } from '../../errors/catalogue.ts'
import type { Log } from '../../logging/late.ts'
import type { JobEndStatus, Metrics } from '../../metrics/metrics.ts'
import type { ClaimedJob, JobEnd, JobStore } from '../../storage/ports.ts'
import type { Lookup } from '../../webhooks/address.ts'
import { compressLimit, pagesOutput, partName, pdfName, singleName, splitOutput, textOutput, type PagesOutput } from '../output.ts'
import { editSpecOf, isJobEdit } from '../edit-options.ts'
import { unbundle } from '../../domain/bundle.ts'
import { imageSpec } from '../image-options.ts'
import { IMAGE_TYPES, type ImageFormat } from '../../domain/images.ts'
import { parsePages } from '../pages.ts'
import { PoolError, shared, type ConversionPool, type Running } from '../pool.ts'
import { Spool, release } from '../spool.ts'
import type { Job, JobCommon } from '../protocol.ts'
import { isPdf } from '../upload.ts'
import { fetchSource, putResult } from './transfer.ts'
import { Poller } from '../../ops/poller.ts'
import { begin, inSpan, record } from '../../tracing/tracing.ts'

type RunnerConfig = Pick<
  Config,
  | 'jobWorkers'
  | 'jobMaxPages'
  | 'jobTimeoutMs'
  | 'jobMaxDocumentBytes'
  | 'jobMaxOutputBytes'
  | 'jobResultTtlSeconds'
  | 'jobRetentionDays'
  | 'jobMaxRunningPerAccount'
  | 'jobStoragePerAccountMb'
  | 'jobLeaseSeconds'
  | 'jobMaxAttempts'
  | 'jobPollMs'
  | 'jobTransferTimeoutMs'
  | 'webhookAllowPrivate'
  | 'maxPageMegapixels'
  | 'workerMaxMemoryMb'
  | 'publicBaseUrl'
  | 'conversionPageTimeoutMs'
>

export interface RunnerOptions {
  readonly store: JobStore
  readonly pool: ConversionPool
  readonly keyring: Keyring
  readonly config: RunnerConfig
  /** This node's name in the store (who holds a lease). */
  readonly node: string
  readonly log: Log
  readonly metrics?: Pick<Metrics, 'jobEnded' | 'jobLeaseExpired' | 'jobsPoisoned'>
  /** Told when a job ended with an event, so that this node's webhook worker looks at once. */
  readonly onEvent?: () => void
  readonly now?: () => number
  /** The outbound transfers' extra trusted certificates and name lookup (tests). */
  readonly transfer?: { readonly ca?: string | Buffer; readonly lookup?: Lookup }
}

/** How often the poison jobs are looked for, at most; and the results and records pruned. */
const SWEEP_MS = 5000
const PRUNE_MS = 3_600_000
/** Tries of an upload to the resultUrl, and the waits between them. */
const UPLOAD_WAITS_MS = [0, 2000, 8000]
/** How long a closing node waits for its jobs to stop before it gives them back all the same. */
const CLOSE_WAIT_MS = 10_000

/** Why a run stopped short of an end: the lease is gone (cancelled, taken), or the job goes back to the queue. */
class Stop extends Error {
  readonly how: 'lost' | 'release' | 'release-attempt'
  constructor(how: 'lost' | 'release' | 'release-attempt', message: string) {
    super(message)
    this.how = how
  }
}

/** A job's failure with a catalogue error. */
class Failed extends Error {
  readonly error: JobError
  constructor(code: ErrorCode, params: Record<string, string | number> = {}) {
    super(code)
    this.error = { code, params }
  }
}

/** One job's run on this node. */
interface Run {
  readonly claimed: ClaimedJob
  readonly done: Promise<void>
  running: Running | null
  closing: boolean
  lost: boolean
  pagesDone: number
  pagesTotal: number | null
}

export class JobRunner {
  readonly #o: RunnerOptions
  readonly #now: () => number
  readonly #runs = new Map<string, Run>()
  readonly #poller: Poller
  #lastSweep = 0
  #lastPrune = 0

  constructor(options: RunnerOptions) {
    this.#o = options
    this.#now = options.now ?? Date.now
    this.#poller = new Poller(() => this.#claimAll(), options.config.jobPollMs)
  }

  get #leaseMs(): number {
    return this.#o.config.jobLeaseSeconds * 1000
  }

  start(): void {
    this.#poller.start()
  }

  /** nudge: a job may be waiting (a submission here, a job ended); look now rather than at the next poll. */
  nudge(): void {
    this.#poller.nudge()
  }

  /** close stops claiming, stops the jobs under way and gives them back to the queue (not as attempts). */
  async close(): Promise<void> {
    await this.#poller.close()
    const runs = [...this.#runs.values()]
    for (const run of runs) {
      run.closing = true
      run.running?.cancel()
    }
    let timer: NodeJS.Timeout | undefined
    await Promise.race([Promise.all(runs.map((r) => r.done)), new Promise((resolve) => (timer = setTimeout(resolve, CLOSE_WAIT_MS)))])
    clearTimeout(timer)
    // A run still fetching or uploading is given back now: whatever it does after, its lease is gone.
    await Promise.all([...this.#runs.values()].map((r) => this.#o.store.release(r.claimed.job.id, r.claimed.lease, false).catch(() => false)))
  }

  /** claimAll fails the poison jobs, prunes, and claims jobs while this node has places. */
  async #claimAll(): Promise<void> {
    const { store, config, log } = this.#o
    try {
      const now = this.#now()
      if (now - this.#lastSweep >= SWEEP_MS) {
        this.#lastSweep = now
        await this.#failSpent(now)
      }
      if (now - this.#lastPrune >= PRUNE_MS) {
        this.#lastPrune = now
        const pruned = await store.prune(new Date(now).toISOString(), new Date(now - config.jobRetentionDays * 86_400_000).toISOString())
        if (pruned.results + pruned.jobs > 0) log.info(pruned, 'conversion job results and records pruned')
      }
      // Past its places (as many again at most), a node takes the first job of an account that has none running anywhere: the
      // pool shares its workers page by page (a job's run gives way at its next page to another account's), so one account's long
      // jobs never hold another account's first one behind them for their whole time.
      for (const [places, perAccount] of [
        [config.jobWorkers, config.jobMaxRunningPerAccount],
        [2 * config.jobWorkers, 1],
      ] as const) {
        while (!this.#poller.closed && this.#runs.size < places) {
          const claimed = await store.claim(this.#o.node, this.#now(), this.#leaseMs, perAccount, config.jobMaxAttempts)
          if (claimed === null) break
          if (claimed.reclaimed) this.#o.metrics?.jobLeaseExpired()
          this.#launch(claimed)
        }
      }
    } catch (error) {
      log.warn({ err: error, dependency: 'conversion jobs' }, 'conversion jobs not claimed')
    }
  }

  async #failSpent(now: number): Promise<void> {
    const { store, config } = this.#o
    const error = { code: 'CONVERSION_FAILED', params: { attempts: config.jobMaxAttempts } }
    const failed = await store.failSpent(now, config.jobMaxAttempts, new Date(now).toISOString(), error, (job) =>
      this.#event(job, { status: 'failed', error }, new Date(now).toISOString()),
    )
    if (failed.length === 0) return
    this.#o.metrics?.jobsPoisoned(failed.length)
    for (const job of failed)
      this.#o.log.warn({ jobId: job.id, accountId: job.accountId, attempts: job.attempts }, 'conversion job failed: its runs kept dying')
    this.#o.onEvent?.()
  }

  #launch(claimed: ClaimedJob): void {
    const run: Run = { claimed, done: Promise.resolve(), running: null, closing: false, lost: false, pagesDone: 0, pagesTotal: null }
    const { job } = claimed
    // The run is a span of the submission's trace, whichever node submitted it; its conversion, pieces and end are under it.
    const parent = claimed.traceParent ?? undefined
    if (parent !== undefined && job.attempts === 1) record('job.queue', Date.parse(job.createdAt), this.#now(), { 'tessera.job.id': job.id }, parent)
    const span = begin(
      'job.attempt',
      {
        'tessera.job.id': job.id,
        'tessera.account.id': job.accountId,
        'tessera.operation': job.operation,
        'tessera.attempt': job.attempts,
        'tessera.reclaimed': claimed.reclaimed,
      },
      parent,
    )
    ;(run as { done: Promise<void> }).done = span
      .within(() => this.#run(run))
      .then(
        (status) => {
          span.set({ 'tessera.status': status, 'tessera.pages': run.pagesDone })
          span.end(status === 'failed' ? { code: 'failed' } : undefined)
        },
        (error: unknown) => {
          span.end(error)
          throw error
        },
      )
      // The store away at the end: the job stays claimed until its lease runs out, then another run takes it.
      .catch((error: unknown) => this.#o.log.error({ err: error, jobId: claimed.job.id }, 'conversion job not ended: the store failed'))
      .finally(() => {
        this.#runs.delete(claimed.job.id)
        this.nudge()
      })
    this.#runs.set(claimed.job.id, run)
  }

  async #run(run: Run): Promise<JobEndStatus> {
    const { job, lease } = run.claimed
    const { store, log } = this.#o
    const started = this.#now()
    let renewing: Promise<void> | null = null
    let lastRenew = started
    const renew = () => {
      if (renewing !== null || run.lost) return
      lastRenew = this.#now()
      renewing = store
        .renew(job.id, lease, lastRenew, this.#leaseMs, run.pagesDone, run.pagesTotal)
        .then(
          (ok) => {
            if (ok) return
            run.lost = true
            run.running?.cancel()
          },
          (error: unknown) => log.warn({ err: error, jobId: job.id }, 'conversion job lease not renewed'),
        )
        .finally(() => {
          renewing = null
        })
    }
    const heartbeat = setInterval(renew, this.#leaseMs / 3)
    const onPage = () => {
      run.pagesDone++
      if (this.#now() - lastRenew >= 500) renew()
    }
    let status: JobEndStatus
    try {
      const end = await this.#convert(run, onPage)
      clearInterval(heartbeat)
      await renewing
      status = (await this.#finish(run, end)) ? end.status : 'cancelled'
    } catch (error) {
      clearInterval(heartbeat)
      await renewing
      status = await this.#stopped(run, error)
    }
    this.#o.metrics?.jobEnded(status, (this.#now() - started) / 1000)
    log.info(
      { jobId: job.id, accountId: job.accountId, status, pages: run.pagesDone, attempt: job.attempts, ms: this.#now() - started },
      'conversion job run ended',
    )
    return status
  }

  /** stopped handles a run that did not reach an end of its own: given back, or lost (cancelled, taken). */
  async #stopped(run: Run, error: unknown): Promise<JobEndStatus> {
    const { job, lease } = run.claimed
    const { store, config, log } = this.#o
    if (error instanceof Failed) return (await this.#finish(run, { status: 'failed', error: error.error })) ? 'failed' : 'cancelled'
    if (!(error instanceof Stop)) log.error({ err: error, jobId: job.id }, 'conversion job run failed')
    const how = error instanceof Stop ? error.how : 'release-attempt'
    if (how === 'lost') return 'cancelled'
    if (how === 'release-attempt' && job.attempts >= config.jobMaxAttempts) {
      this.#o.metrics?.jobsPoisoned(1)
      const failed = await this.#finish(run, { status: 'failed', error: { code: 'CONVERSION_FAILED', params: { attempts: job.attempts } } })
      return failed ? 'failed' : 'cancelled'
    }
    await store.release(job.id, lease, how === 'release-attempt').catch((e: unknown) => log.warn({ err: e, jobId: job.id }, 'conversion job not given back'))
    return 'released'
  }

  /** convert makes the result: the document, the conversion in the pool into pieces, the upload. */
  async #convert(run: Run, onPage: () => void): Promise<JobEnd> {
    const { job, sealed } = run.claimed
    const secrets = this.#secrets(job, sealed)
    const pdf = await this.#document(job, secrets)
    if (run.lost) throw new Stop('lost', 'cancelled')
    const writer = new PieceWriter(this.#o.store, job, run.claimed.lease, {
      maxBytes: this.#o.config.jobMaxOutputBytes,
      storageLimit: this.#o.config.jobStoragePerAccountMb * 1048576,
    })
    const info = await this.#render(run, pdf, secrets, writer, onPage)
    const result = { ...info, bytes: writer.written }
    const expiresAt = new Date(this.#now() + this.#o.config.jobResultTtlSeconds * 1000).toISOString()
    if (secrets.resultUrl !== undefined) {
      const failure = await this.#upload(run, secrets.resultUrl, result)
      if (failure !== null) return { status: 'failed', error: { code: 'RESULT_UPLOAD_FAILED', params: { reason: failure } }, result, expiresAt }
    }
    return { status: 'succeeded', result, expiresAt }
  }

  /** secrets: the job's sealed part opened; one that does not open (its key version removed) fails the job, as no retry will open it. */
  #secrets(job: ConversionJob, sealed: string | null): JobSecrets {
    if (sealed === null) return {}
    try {
      return JSON.parse(this.#o.keyring.open(sealed, secretsContext(job.accountId, job.id)).toString('utf8')) as JobSecrets
    } catch (error) {
      if (!(error instanceof SealError)) throw error
      this.#o.log.error({ jobId: job.id, reason: error.message }, 'conversion job secrets do not open')
      throw new Failed('CONVERSION_FAILED')
    }
  }

  /** document: the job's PDF, from its pieces or its sourceUrl, in one shared buffer for the workers. */
  async #document(job: ConversionJob, secrets: JobSecrets): Promise<Uint8Array> {
    const { config, store } = this.#o
    if (job.source === 'upload') {
      const pieces = await store.documentPieces(job.id)
      const total = pieces.reduce((n, p) => n + p.byteLength, 0)
      const pdf = new Uint8Array(new SharedArrayBuffer(total))
      let at = 0
      for (const p of pieces) {
        pdf.set(p, at)
        at += p.byteLength
      }
      return pdf
    }
    // The URL is a secret of the job's (it may carry a token): never an attribute.
    const fetched = await inSpan('job.fetch', {}, () =>
      fetchSource(secrets.sourceUrl!, {
        timeoutMs: config.jobTransferTimeoutMs,
        maxBytes: config.jobMaxDocumentBytes,
        allowPrivate: config.webhookAllowPrivate,
        ...this.#o.transfer,
      }),
    )
    if (!fetched.ok) {
      if (fetched.reason === 'too-large') throw new Failed('FILE_TOO_LARGE', { limit: config.jobMaxDocumentBytes })
      throw new Failed('SOURCE_FETCH_FAILED', { reason: fetched.detail })
    }
    if (!isPdf(fetched.bytes)) throw new Failed('SOURCE_FETCH_FAILED', { reason: 'what it answered is not a PDF' })
    return shared(fetched.bytes)
  }

  /** render runs the conversion in the pool and streams its output into the writer; the result's type, name and pages. */
  async #render(run: Run, pdf: Uint8Array, secrets: JobSecrets, writer: PieceWriter, onPage: () => void): Promise<Omit<JobResultInfo, 'bytes'>> {
    const { job } = run.claimed
    const { config, pool } = this.#o
    const common = {
      pdf,
      color: job.options.colorMode,
      pages: job.options.pages === null ? null : parsePages(job.options.pages),
      limits: {
        maxPages: config.jobMaxPages,
        maxPixels: config.maxPageMegapixels * 1e6,
        maxOutputBytes: config.jobMaxOutputBytes,
        maxMemoryBytes: config.workerMaxMemoryMb * 1048576,
      },
      ...(secrets.password === undefined ? {} : { password: secrets.password }),
    }
    const spec: Job =
      job.operation === 'merge'
        ? mergeSpec(job, pdf, secrets, common)
        : job.operation === 'image'
          ? { op: 'image', image: imageSpec(job.options.image ?? { format: 'png' }, job.options.dpi), ...common }
          : job.operation === 'text'
            ? { op: 'text', text: job.options.text ?? { format: 'json' }, ...common }
            : isJobEdit(job.operation)
              ? { op: 'edit', edit: editSpecOf(job.operation, job.options.edit ?? {}), ...common }
              : job.operation === 'compress'
                ? {
                    op: 'ps',
                    compress: job.options.compress?.preset ?? 'ebook',
                    ...common,
                    pages: null,
                    limits: { ...common.limits, maxOutputBytes: compressLimit(pdf.byteLength, common.limits.maxOutputBytes) },
                  }
                : { op: 'ps', ...common }
    const out = new Output(job.basename, writer, spec)
    const ack = () => {
      if (writer.writableNeedDrain) writer.once('drain', () => run.running?.ack())
      else run.running?.ack()
    }
    const taken = () => run.running?.ack()
    const running = pool.background(
      spec,
      {
        onStart: (pages, pageCount, labels) => {
          run.pagesTotal = pages
          out.start(pages, pageCount, labels)
        },
        onPage: (page, bytes) => {
          onPage()
          out.page(page, bytes, taken)
        },
        onChunk: (bytes) => {
          if (out.chunk(bytes)) ack()
          else {
            writer.write(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength))
            ack()
          }
        },
        // PostScript's pages are counted as Ghostscript begins them: a cancel reaches it at its next page too.
        onProgress: onPage,
      },
      job.accountId,
      config.jobTimeoutMs,
    )
    run.running = running
    // A writer that fails (the lease lost, the account's room used up, the output too large) stops the conversion at once.
    const writing = finished(writer)
    writing.catch(() => running.cancel())
    let result: Awaited<Running['result']>
    try {
      result = await running.result
    } catch (error) {
      out.dispose()
      throw writer.errored ?? this.#poolStop(run, error)
    }
    // A compression stopped past its limit keeps the document itself, as the route answers it.
    if (!result.ok && !(result.code === 'OUTPUT_TOO_LARGE' && out.keepsDocument())) {
      out.dispose()
      throw new Failed(result.code, result.params)
    }
    const pages = result.ok ? result.pages : (run.pagesTotal ?? 0)
    run.pagesDone = pages
    const info = out.end(pages)
    await writing
    return info
  }

  /** poolStop: what a conversion the pool ended short means for the job. */
  #poolStop(run: Run, error: unknown): Error {
    if (!(error instanceof PoolError)) return error as Error
    const { config } = this.#o
    switch (error.reason) {
      case 'timeout':
        return new Failed('CONVERSION_TIMEOUT', { seconds: config.jobTimeoutMs / 1000 })
      case 'page-timeout':
        return new Failed('CONVERSION_PAGE_TIMEOUT', { seconds: config.conversionPageTimeoutMs / 1000 })
      case 'crashed':
        return new Stop('release-attempt', error.message)
      case 'failed':
        return new Failed('CONVERSION_FAILED')
      case 'cancelled':
        return run.lost ? new Stop('lost', 'cancelled') : new Stop('release', 'the node is closing')
      default:
        return new Stop('release', error.message)
    }
  }

  /** upload sends the result to its resultUrl, three tries at most; null when it arrived, else why not. */
  async #upload(run: Run, url: string, result: JobResultInfo): Promise<string | null> {
    const { store, config } = this.#o
    const { job } = run.claimed
    const count = Math.ceil(result.bytes / JOB_CHUNK_BYTES)
    const azure = new URL(url).hostname.endsWith('.blob.core.windows.net')
    let last = ''
    for (const wait of UPLOAD_WAITS_MS) {
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait))
      if (run.lost || run.closing) throw new Stop(run.lost ? 'lost' : 'release', 'stopped before its upload')
      const sent = await inSpan('job.upload', { 'tessera.bytes': result.bytes }, () =>
        putResult(
          url,
          {
            size: result.bytes,
            contentType: result.type,
            ...(azure ? { headers: { 'x-ms-blob-type': 'BlockBlob' } } : {}),
            chunks: async function* () {
              for (let seq = 0; seq < count; seq++) {
                const piece = await store.resultPiece(job.id, seq)
                if (piece === null) throw new Error('the result went while it was uploaded')
                yield piece
              }
            },
          },
          { timeoutMs: config.jobTransferTimeoutMs, allowPrivate: config.webhookAllowPrivate, ...this.#o.transfer },
        ),
      )
      if (sent.error === null) return null
      last = sent.error
      // A refusal by the address rules does not change with another try.
      if (last.startsWith('refused')) break
    }
    return last
  }

  /** finish ends the job with its event; false when the lease was gone (cancelled meanwhile). */
  async #finish(run: Run, end: JobEnd): Promise<boolean> {
    const { job, lease } = run.claimed
    const nowIso = new Date(this.#now()).toISOString()
    const done = await this.#o.store.finish(job.id, lease, end, nowIso, this.#event(job, end, nowIso))
    if (done) this.#o.onEvent?.()
    return done
  }

  /** event: the audit event of a job's end, whose detail is the webhook's data (never a URL the customer gave). */
  #event(job: ConversionJob, end: JobEnd, finishedAt: string): AuditDraft {
    const base = this.#o.config.publicBaseUrl
    const result =
      end.result === undefined
        ? undefined
        : {
            url: `${base}/converter/jobs/${job.id}/result`,
            size: end.result.bytes,
            type: end.result.type,
            name: end.result.name,
            pages: end.result.pages,
            expiresAt: end.expiresAt,
          }
    const error = end.status === 'failed' ? { code: end.error.code, message: render(end.error.code as ErrorCode, end.error.params) } : undefined
    return {
      actor: actorName(SYSTEM),
      action: end.status === 'succeeded' ? 'conversion.succeeded' : 'conversion.failed',
      target: { type: 'job', id: job.id },
      accountId: job.accountId,
      ip: null,
      outcome: end.status === 'succeeded' ? 'success' : 'failure',
      detail: {
        jobID: job.id,
        status: end.status,
        operation: job.operation,
        metadata: job.metadata,
        submittedAt: job.createdAt,
        finishedAt,
        ...(result === undefined ? {} : { result }),
        ...(error === undefined ? {} : { error }),
      },
    }
  }
}

/**
 * mergeSpec: a merge job's documents (kept as one bundle) in their order, each with its pages and
 * password, each in a shared buffer of its own for the worker.
 */
function mergeSpec(job: ConversionJob, kept: Uint8Array, secrets: JobSecrets, common: Omit<JobCommon, 'password'>): Job {
  const documents = unbundle(kept)
  if (documents === null || documents.length < 2) throw new Failed('CONVERSION_FAILED')
  const pages = (i: number) => {
    const text = job.options.merge?.pages[i] ?? null
    return text === null ? null : parsePages(text)
  }
  const password = (i: number) => {
    const given = secrets.passwords?.[i] ?? null
    return given === null ? {} : { password: given }
  }
  const others = documents.slice(1).map((document, i) => ({ pdf: shared(document.slice()), pages: pages(i + 1), ...password(i + 1) }))
  return { ...common, op: 'edit', edit: { kind: 'merge', others }, pdf: shared(documents[0]!.slice()), pages: pages(0), ...password(0) }
}

/** Output turns the pool's pages or PostScript into the answer's bytes, as the synchronous route does. */
class Output {
  readonly #basename: string
  readonly #writer: PieceWriter
  /** The image format, or null for PostScript and text. */
  readonly #format: ImageFormat | null
  readonly #spec: Job
  #pageCount = 0
  #single: { page: number; bytes: Uint8Array; taken: () => void } | null = null
  #several: PagesOutput | null = null
  /** A split's parts, named by their pages. */
  #labels: readonly string[] = []
  /** A compression's output, held up to the document's size (past it, the document itself is the result), as the route does. */
  #held: Buffer[] = []
  #heldBytes = 0
  /** The compression's output went past the document's size (or was stopped there): the result is the document. */
  #larger = false

  constructor(basename: string, writer: PieceWriter, spec: Job) {
    this.#basename = basename
    this.#writer = writer
    this.#spec = spec
    this.#format = spec.op === 'image' ? spec.image.format : null
  }

  start(pages: number, pageCount: number, labels: readonly string[] = []): void {
    this.#pageCount = pageCount
    this.#labels = labels
    const spec = this.#spec
    if (spec.op === 'text') this.#several = textOutput(spec.text.format, this.#basename)
    else if (spec.op === 'image' && pages > 1) this.#several = pagesOutput(spec.image.format, this.#basename, pages, pageCount)
    else if (spec.op === 'edit' && pages > 1) this.#several = splitOutput(this.#basename, labels)
    this.#several?.stream.pipe(this.#writer)
  }

  /** keepsDocument: a compression whose output went past the document's size, so that its result is the document. */
  keepsDocument(): boolean {
    const spec = this.#spec
    if (spec.op !== 'ps' || spec.compress === undefined) return false
    this.#larger = true
    return true
  }

  /** chunk holds a piece of a compression's output (true), or leaves a PostScript piece to be written (false). */
  chunk(bytes: Uint8Array): boolean {
    const spec = this.#spec
    if (spec.op !== 'ps' || spec.compress === undefined) return false
    if (this.#larger) {
      release(bytes)
      return true
    }
    if (this.#heldBytes + bytes.byteLength > spec.pdf.byteLength) {
      this.#larger = true
      for (const piece of this.#held.splice(0)) release(piece)
      release(bytes)
    } else {
      this.#held.push(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength))
      this.#heldBytes += bytes.byteLength
    }
    return true
  }

  /** page takes a page (or a split's PDF), which it owns from here: `taken` once it is off the main thread's hands. */
  page(page: number, bytes: Uint8Array, taken: () => void): void {
    if (this.#several !== null) this.#several.add(page, bytes, taken)
    else this.#single = { page, bytes, taken }
  }

  /** dispose releases what the output holds of a conversion that failed: its one page, or the pages its stream had yet to write. */
  dispose(): void {
    if (this.#single !== null) {
      release(this.#single.bytes)
      this.#single.taken()
    }
    this.#single = null
    this.#several?.stream.destroy()
    for (const piece of this.#held.splice(0)) release(piece)
  }

  /** write ends the writer with one page's bytes, copied out as it takes them and released then. */
  #write(bytes: Uint8Array, taken: () => void): void {
    const spool = Spool.of(bytes, taken)
    this.#writer.once('close', () => spool.destroy())
    spool.pipe(this.#writer)
  }

  /** end completes the output (the writer finishes once it has written it) and names it. */
  end(pages: number): Omit<JobResultInfo, 'bytes'> {
    if (this.#several !== null) {
      this.#several.end()
      // A split's zip holds PDFs: its pages are theirs, as the route's X-Page-Count says.
      return { type: this.#several.type, name: this.#several.name, pages: this.#spec.op === 'edit' ? this.#pageCount : pages }
    }
    if (this.#spec.op === 'edit') {
      const { bytes, taken } = this.#single!
      this.#single = null
      this.#write(bytes, taken)
      const { kind } = this.#spec.edit
      const name = kind === 'split' ? partName(this.#basename, this.#labels[0] ?? 'part-1') : pdfName(this.#basename, kind)
      return { type: 'application/pdf', name, pages: this.#pageCount }
    }
    if (this.#format !== null) {
      const { page, bytes, taken } = this.#single!
      this.#single = null
      const { type, extension } = IMAGE_TYPES[this.#format]
      this.#write(bytes, taken)
      return { type, name: singleName(this.#basename, page, this.#pageCount, extension), pages: 1 }
    }
    const spec = this.#spec
    if (spec.op === 'ps' && spec.compress !== undefined) {
      // The document is in shared memory (the workers read it): copied out for the store.
      this.#writer.end(this.#larger ? Buffer.from(spec.pdf) : Buffer.concat(this.#held, this.#heldBytes))
      for (const piece of this.#held.splice(0)) release(piece)
      return { type: 'application/pdf', name: pdfName(this.#basename, 'compress'), pages }
    }
    this.#writer.end()
    return { type: 'application/postscript', name: `${this.#basename}.ps`, pages }
  }
}

/**
 * PieceWriter writes a result into the store in pieces of JOB_CHUNK_BYTES under the job's
 * lease, each written before more is taken (the stream's backpressure reaches the workers).
 * It fails when the lease is gone, the result passes JOB_MAX_OUTPUT_BYTES, or the piece would
 * take the account's kept results past their limit: counted before each piece, with what the
 * account's other running jobs have written, so parallel jobs pass it by a piece each at most.
 */
class PieceWriter extends Writable {
  readonly #store: JobStore
  readonly #job: ConversionJob
  readonly #lease: string
  readonly #limits: { readonly maxBytes: number; readonly storageLimit: number }
  #held: Buffer[] = []
  #heldBytes = 0
  #seq = 0
  written = 0

  constructor(store: JobStore, job: ConversionJob, lease: string, limits: { readonly maxBytes: number; readonly storageLimit: number }) {
    super({ highWaterMark: JOB_CHUNK_BYTES })
    this.#store = store
    this.#job = job
    this.#lease = lease
    this.#limits = limits
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.written += chunk.byteLength
    if (this.written > this.#limits.maxBytes) callback(new Failed('OUTPUT_TOO_LARGE', { limit: this.#limits.maxBytes }))
    else {
      this.#held.push(chunk)
      this.#heldBytes += chunk.byteLength
      if (this.#heldBytes < JOB_CHUNK_BYTES) callback()
      else this.#flush(false).then(() => callback(), callback)
    }
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.#flush(true).then(() => callback(), callback)
  }

  /** flush writes every whole piece held (and the last, partial one at the end). */
  async #flush(last: boolean): Promise<void> {
    let all = Buffer.concat(this.#held)
    while (all.byteLength >= JOB_CHUNK_BYTES || (last && all.byteLength > 0)) {
      const piece = all.subarray(0, JOB_CHUNK_BYTES)
      const { storageLimit } = this.#limits
      if ((await this.#store.keptBytes(this.#job.accountId)) + piece.byteLength > storageLimit) throw new Failed('JOB_STORAGE_FULL', { limit: storageLimit })
      if (!(await this.#store.writePiece(this.#job.id, this.#lease, this.#seq, piece))) throw new Stop('lost', 'the lease is gone')
      this.#seq++
      all = all.subarray(piece.byteLength)
    }
    this.#held = all.byteLength > 0 ? [all] : []
    this.#heldBytes = all.byteLength
  }
}
