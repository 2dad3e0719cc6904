/**
 * The PostScript engine: Ghostscript's `ps2write` device from a WebAssembly build
 * (`@bentopdf/gs-wasm`, chosen over `@okathira/ghostpdl-wasm`, which traps with "memory
 * access out of bounds" on a 117-page file of the corpus). ps2write keeps text and vector
 * art as vectors and writes DSC-conformant Level 2 PostScript. The module is loaded once
 * per worker and called once per job on its in-memory file system; -dSAFER all the same.
 *
 * ps2write keeps each page in scratch files until the end, then writes the output in one
 * pass. The output never lands in the file system: each write goes to the job's sink (which
 * streams it to the client, waiting while the client is behind), and the scratch files count
 * against the job's budget, so that a document whose PostScript would be too large is
 * refused before a byte is sent.
 */
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

interface FsStream {
  readonly path: string
  readonly node: Record<string, unknown>
  position: number
}

interface GhostscriptFs {
  writeFile(path: string, data: Uint8Array): void
  readFile(path: string): Uint8Array
  unlink(path: string): void
  open(path: string, flags: string): FsStream
  close(stream: FsStream): void
  /** Every write of the program goes through here (Emscripten's FS.write), so it can be replaced. */
  write(stream: FsStream, buffer: Uint8Array, offset: number, length: number, position?: number, canOwn?: boolean): number
}

interface GhostscriptModule {
  callMain(args: string[]): number
  FS: GhostscriptFs
}

type Factory = (options: object) => Promise<GhostscriptModule>

/** The package exports a browser loader; Node takes the Emscripten module beside it, with the wasm read from disk. */
const ASSETS = new URL('../assets/', import.meta.resolve('@bentopdf/gs-wasm'))
import type { OutputBudget, OutputSink, PdfEngine, PostScriptOptions, PostScriptOutcome } from './engine.ts'
import { instantiateGuarded, type HeapGuard } from './heap.ts'

const INPUT = '/in.pdf'
const OUTPUT = '/out.ps'
/** How many scratch bytes may be written between two checks of the worker's memory. */
const CHECK_EVERY = 1 << 20

/**
 * Stopped is thrown from inside a write to stop a run at once: it unwinds through the
 * WebAssembly frames and out of callMain. Ghostscript's own error path (a failed write) would
 * go on through every remaining page first. The instance's state is lost with its stack,
 * so the engine refuses further runs and the worker is replaced.
 */
class Stopped extends Error {
  override name = 'Stopped'
  readonly reason: 'output' | 'memory' | 'seek'

  constructor(reason: 'output' | 'memory' | 'seek') {
    super(`stopped: ${reason}`)
    this.reason = reason
  }
}

export class GhostscriptError extends Error {
  override name = 'GhostscriptError'
  /** fatal: the instance cannot be used again (the worker is replaced). */
  readonly fatal: boolean

  constructor(message: string, fatal = false) {
    super(message)
    this.fatal = fatal
  }
}

/** pageList writes 1-based pages as Ghostscript's -sPageList (ranges collapsed). */
export function pageList(pages: readonly number[]): string {
  const parts: string[] = []
  for (let i = 0; i < pages.length; i++) {
    const start = pages[i]!
    while (i + 1 < pages.length && pages[i + 1] === pages[i]! + 1) i++
    parts.push(start === pages[i] ? String(start) : `${start}-${pages[i]}`)
  }
  return parts.join(',')
}

export interface LoadedGhostscript {
  readonly module: GhostscriptModule
  /** The WebAssembly memory, which the build does not export. */
  memory(): WebAssembly.Memory | undefined
}

/** The (minified) names of a file node's contents (a Uint8Array with spare room) and of its used length. */
interface NodeKeys {
  readonly contents: string
  readonly used: string
}

/** nodeKeys finds the names of a file node's fields by writing a probe file and seeing which fields change. */
function nodeKeys(fs: GhostscriptFs): NodeKeys {
  const stream = fs.open('/probe', 'w+')
  try {
    const node = stream.node
    fs.write(stream, new Uint8Array(5), 0, 5, 0)
    const fives = Object.keys(node).filter((k) => node[k] === 5)
    fs.write(stream, new Uint8Array(2), 0, 2, 5)
    const used = fives.find((k) => node[k] === 7)
    const contents = Object.keys(node).find((k) => ArrayBuffer.isView(node[k]))
    if (used === undefined || contents === undefined) throw new Error('the Ghostscript file system has no recognisable file node')
    return { contents, used }
  } finally {
    fs.close(stream)
    fs.unlink('/probe')
  }
}

/**
 * makeRoom gives a scratch file room for `need` bytes in a resizable ArrayBuffer that grows in
 * place. Emscripten's own growth allocates a new array 1.125 times larger and copies: a 256 MB
 * file left gigabytes of old arrays for the collector, and two such runs took the process past
 * 1.2 GB. `max` is the largest a file may grow (the scratch budget).
 */
function makeRoom(node: Record<string, unknown>, keys: NodeKeys, need: number, max: number): void {
  // Contents written by the program are slices of its heap: an Int8Array, not a Uint8Array.
  const current = node[keys.contents] as Int8Array | Uint8Array | null | undefined
  const held = ArrayBuffer.isView(current) ? current : null
  if (held !== null && held.length >= need) return
  const size = Math.min(max, Math.max(need, 65536, Math.ceil((held?.length ?? 0) * 1.25)))
  const buffer = held?.buffer
  if (buffer instanceof ArrayBuffer && buffer.resizable && held!.byteOffset === 0 && buffer.maxByteLength >= size) {
    buffer.resize(size) // the view tracks the buffer's length
    return
  }
  // The same element type as before: copies between the file and the heap stay plain byte copies.
  const View = held?.constructor === Uint8Array ? Uint8Array : Int8Array
  const view = new View(new ArrayBuffer(size, { maxByteLength: max }))
  if (held !== null) view.set(held.subarray(0, node[keys.used] as number))
  node[keys.contents] = view
}

/** loadGhostscript instantiates one Ghostscript; `printErr` receives its error output, `print` its messages; `guard` caps its heap (engines/heap.ts). */
export async function loadGhostscript(
  printErr: (line: string) => void,
  guard?: HeapGuard,
  print: (line: string) => void = () => {},
): Promise<LoadedGhostscript> {
  let memory: WebAssembly.Memory | undefined
  const wasm = readFileSync(fileURLToPath(new URL('gs.wasm', ASSETS)))
  const factory = ((await import(new URL('gs.js', ASSETS).href)) as { default: Factory }).default
  const module = await factory({
    // Ghostscript writes its argv[0] into PostScript (`%%Invocation:`); Emscripten's default is the script that runs (a path of ours).
    thisProgram: 'gs',
    print,
    printErr,
    instantiateWasm: instantiateGuarded(wasm, guard, (m) => {
      memory = m
    }),
  })
  return { module, memory: () => memory }
}

/** Job: the run under way; its output goes to the sink, every other write counts against its budget. */
interface Job {
  readonly sink: OutputSink
  readonly budget: OutputBudget
  written: number
  scratch: number
  sinceCheck: number
}

/**
 * RunLog keeps what Ghostscript says during a run: its first error lines, and each page's start.
 * It exists before the module, which takes its callbacks when it is instantiated.
 */
class RunLog {
  errors: string[] = []
  /** Told as Ghostscript begins a page of the job being run. */
  onPage: (() => void) | undefined

  readonly printErr = (line: string): void => {
    if (this.errors.length < 20) this.errors.push(line)
  }

  // Without -dQUIET Ghostscript says "Page N" as it begins each page, from inside its run: the one word it gives of its progress.
  readonly print = (line: string): void => {
    if (line.startsWith('Page ')) this.onPage?.()
  }
}

/**
 * postscriptArgs: Ghostscript's command line for one job (ps2write, or pdfwrite with a preset to
 * compress; the pages, the colour, the password). pdfwrite gets what `gs -sDEVICE=pdfwrite
 * -dPDFSETTINGS=/ebook` gets from a user, so that our output is native Ghostscript's.
 */
function postscriptArgs(options: PostScriptOptions): string[] {
  // To compress, the XMP packet pdfwrite makes from the document's Info is left out (-dOmitXMP): it repeats the Info dictionary, and
  // was 1.5 KB of a 2.7 KB answer (Ghostscript 10.06 writes a larger one than 10.00 did).
  const device = options.compress === undefined ? ['-sDEVICE=ps2write'] : ['-sDEVICE=pdfwrite', `-dPDFSETTINGS=/${options.compress}`, '-dOmitXMP=true']
  const args = ['-dSAFER', '-dBATCH', '-dNOPAUSE', ...device, `-sOutputFile=${OUTPUT}`]
  if (options.pages.length !== options.pageCount) args.push(`-sPageList=${pageList(options.pages)}`)
  if (options.color === 'gray') args.push('-sColorConversionStrategy=Gray', '-sProcessColorModel=DeviceGray')
  if (options.password !== undefined) args.push(`-sPDFPassword=${options.password}`)
  args.push(INPUT)
  return args
}

/**
 * GhostscriptEngine runs jobs on one loaded Ghostscript. It replaces the module's FS.write, so
 * that the output streams to the job's sink and the scratch files grow in place within budget.
 */
class GhostscriptEngine implements PdfEngine {
  readonly name = 'ghostscript'
  readonly #loaded: LoadedGhostscript
  readonly #log: RunLog
  readonly #fs: GhostscriptFs
  readonly #keys: NodeKeys
  /** Emscripten's own write, for what is not a job's. */
  readonly #write: GhostscriptFs['write']
  #job: Job | null = null
  /** A run was stopped mid-way: the instance's state is lost. */
  #spent = false

  constructor(loaded: LoadedGhostscript, log: RunLog) {
    this.#loaded = loaded
    this.#log = log
    const fs = loaded.module.FS
    this.#fs = fs
    this.#keys = nodeKeys(fs)
    this.#write = fs.write.bind(fs)
    fs.write = (stream, buffer, offset, length, position, canOwn) => this.#intercept(stream, buffer, offset, length, position, canOwn)
  }

  /** intercept is every write of the program: a job's output to its sink, its scratch within budget, the memory checked on the way. */
  #intercept(stream: FsStream, buffer: Uint8Array, offset: number, length: number, position?: number, canOwn?: boolean): number {
    const job = this.#job
    if (job === null) return this.#write(stream, buffer, offset, length, position, canOwn)
    const output = stream.path === OUTPUT
    if (!output) {
      job.scratch += length
      if (job.scratch > job.budget.maxScratchBytes) throw new Stopped('output')
    }
    job.sinceCheck += length
    // Memory is checked every CHECK_EVERY bytes written, and before the first byte of output:
    // a run that went over its budget (a refused malloc: Ghostscript goes on without it) is stopped while it can still be a 422.
    if (job.sinceCheck >= CHECK_EVERY || (output && job.written === 0)) {
      job.sinceCheck = 0
      if (job.budget.overMemory(job.scratch)) throw new Stopped('memory')
    }
    if (output) return writeOutput(job, stream, buffer, offset, length, position)
    const end = (position ?? stream.position) + length
    if (end > job.budget.maxScratchBytes) throw new Stopped('output')
    makeRoom(stream.node, this.#keys, end, job.budget.maxScratchBytes)
    return this.#write(stream, buffer, offset, length, position, canOwn)
  }

  postscript(pdf: Uint8Array, options: PostScriptOptions, sink: OutputSink, budget: OutputBudget): PostScriptOutcome {
    if (this.#spent) throw new GhostscriptError('this Ghostscript was stopped mid-run and cannot be used again', true)
    const log = this.#log
    log.errors = []
    log.onPage = options.onPage
    this.#fs.writeFile(INPUT, pdf)
    const job: Job = { sink, budget, written: 0, scratch: 0, sinceCheck: 0 }
    this.#job = job
    try {
      const args = postscriptArgs(options)
      let code: number
      try {
        code = this.#loaded.module.callMain(args)
      } catch (error) {
        if (!(error instanceof Stopped)) throw error
        this.#spent = true
        if (error.reason === 'seek') throw new GhostscriptError('ghostscript seeked in its output, which is streamed', true)
        return { ok: false, reason: error.reason, bytes: job.written }
      }
      if (code !== 0) throw new GhostscriptError(`ghostscript exited with ${code}: ${log.errors.join(' | ').slice(0, 500)}`)
      return { ok: true, bytes: job.written }
    } finally {
      this.#job = null
      log.onPage = undefined
      this.#removeFiles()
    }
  }

  /** removeFiles deletes a job's input and output, whichever were written. */
  #removeFiles(): void {
    for (const path of [INPUT, OUTPUT]) {
      try {
        this.#fs.unlink(path)
      } catch {
        /* not written */
      }
    }
  }

  memoryBytes(): number {
    return this.#loaded.memory()?.buffer.byteLength ?? 0
  }
}

/**
 * writeOutput sends a write of the output file to the job's sink. ps2write writes its output in
 * one pass at the end (the pages wait in scratch files): it goes straight to the client.
 */
function writeOutput(job: Job, stream: FsStream, buffer: Uint8Array, offset: number, length: number, position: number | undefined): number {
  if (position !== undefined && position !== stream.position) throw new Stopped('seek')
  if (job.written + length > job.budget.maxOutputBytes) throw new Stopped('output')
  job.written += length
  job.sink(buffer.subarray(offset, offset + length))
  stream.position += length
  return length
}

/** createGhostscriptEngine loads the engine; `guard` caps its heap: past it, malloc fails and Ghostscript stops with a VMerror. */
export async function createGhostscriptEngine(guard?: HeapGuard): Promise<PdfEngine> {
  const log = new RunLog()
  return new GhostscriptEngine(await loadGhostscript(log.printErr, guard, log.print), log)
}
