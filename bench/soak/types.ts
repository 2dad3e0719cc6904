/**
 * The soak's vocabulary: an operation of a served OpenAPI document, the cases the input table
 * gives for it, the request a case makes and the answer it got.
 */

/** Which listener serves an operation: the public API or the admin API. */
export type Api = 'public' | 'admin'

/** An operation as a served document lists it. */
export interface Operation {
  readonly api: Api
  readonly id: string
  readonly method: string
  /** The document's path template, `{name}` for each parameter. */
  readonly path: string
  /** The statuses the document lists for it. */
  readonly statuses: readonly string[]
}

/**
 * How the client treats the exchange: `read` takes the answer as fast as it comes; `slow-read`
 * takes it a few KB at a time with pauses; `stall` stops reading after the headers (and hangs up
 * once the server has had time to drop it); `abort-download` hangs up after the first bytes of
 * the answer; `abort-upload` hangs up halfway through the body; `slow-upload` sends the body in
 * small pieces with pauses.
 */
export type Mode = 'read' | 'slow-read' | 'stall' | 'abort-download' | 'abort-upload' | 'slow-upload'

export interface Request {
  /** Path parameters as they go on the wire (the case encodes them, or does not, on purpose). */
  readonly params?: Readonly<Record<string, string>>
  /** The query string, as it goes on the wire, without `?`. */
  readonly query?: string
  readonly headers?: Readonly<Record<string, string>>
  readonly body?: Buffer | string
  readonly mode?: Mode
  /** What the input was, for a failure's line (a fuzz seed, a document's name). */
  readonly note?: string
}

export interface Answer {
  /** 0 when no answer came (the client hung up first, or the connection failed). */
  readonly status: number
  readonly headers: Readonly<Record<string, string | string[] | undefined>>
  /** The whole body when it was read to its end, else null. */
  readonly body: Buffer | null
  /** The answer's bytes ended before the end its framing promised (content-length, the last chunk). */
  readonly cut: boolean
  /** Milliseconds from sending to the answer's end (or to giving up). */
  readonly ms: number
  /** What went wrong on the client's side, when something did: the client's own hang-up is `client-abort`. */
  readonly error?: string
}

/** What a case may need from the run: its account, the admin token, and calls of other operations. */
export interface Ctx {
  readonly account: { readonly id: string; readonly key: string; readonly index: number; readonly webhook?: string }
  /** Accounts the admin cases may change at will (suspend, re-plan, revoke keys of): never one that carries load. */
  readonly scratch: { readonly id: string; readonly key: string }
  readonly adminToken: string
  /** A local HTTP server of the harness: documents for `sourceUrl`, a `resultUrl` and a webhook receiver. */
  readonly receiver: string
  /** A number that grows with every call: fresh user IDs, fuzz seeds. */
  next(): number
  /** call makes a request of another operation (counted under that operation) and gives its answer, read in full. */
  call(operationId: string, request: Request): Promise<Answer>
  /** What earlier cases of this account left for later ones (job IDs, factors, passkeys), by name. */
  readonly kept: Map<string, unknown[]>
}

export type Kind = 'valid' | 'boundary' | 'hostile'

export interface Case {
  readonly name: string
  readonly kind: Kind
  /**
   * The statuses this case may get. 429 and a 503 with Retry-After are always taken (limits
   * and back-pressure under load are documented answers). Left out: any documented status below 500.
   */
  readonly expect?: readonly number[]
  /**
   * A 200 of this case may end short as docs/guide.md's "When an answer can end short" says: a
   * streamed answer (a zip of pages, a multi-page TIFF, text, PostScript) whose output passes
   * MAX_OUTPUT_BYTES once begun, or whose engine fails on a page's content after the answer began.
   */
  readonly mayCut?: boolean
  /**
   * A case that holds a conversion worker for long (a bomb the page clock stops, hundreds of
   * pages): heavy cases run on one lane of their own, one at a time, so that they never take
   * every worker from the rest of the table.
   */
  readonly heavy?: boolean
  make(ctx: Ctx): Promise<Request> | Request
  /** after sees the answer (read in full, or not) to the request made: to keep what later cases use. */
  after?(ctx: Ctx, answer: Answer, request: Request): void
}

/** The input table: every operation of both documents, by operationId, with its cases. */
export type Table = Readonly<Record<string, readonly Case[]>>
