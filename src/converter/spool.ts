/**
 * Spool: how the main thread hands pages (and pieces of PostScript) to an answer or a job's
 * store without keeping them. The workers transfer each page to the main thread in a buffer of
 * its own, often allocated outside V8's heap (libvips' TIFF, JPEG and WebP buffers): V8 does not
 * count those, so nothing makes it collect them on an idle node, and a 600-dpi page is 100 MB.
 * Left to the garbage collector, a node kept gigabytes of pages after the answers that held
 * them were over.
 *
 * So a page is never passed down a stream as it is: the spool copies it out in small pieces
 * as its reader asks (the socket's or the store writer's backpressure reaches it through
 * `pipe`), and releases the page (detaches its buffer, which frees it at once) as soon as its
 * last byte is copied, or when the stream is destroyed: on every path, success, failure or a
 * client gone. `taken` then tells the pool that the page is off its hands, and the workers may
 * render further: what the main thread holds of a conversion is the pages not yet copied out.
 */
import { Readable } from 'node:stream'

/** How much the spool copies out at a time (and keeps ahead of its reader). */
const PIECE_BYTES = 256 * 1024

/**
 * release frees a page's buffer now rather than at the next garbage collection (it is detached:
 * any view of it reads as empty). Only for buffers the caller owns whole: a page a worker
 * transferred; never a view into a shared or pooled buffer.
 */
export function release(bytes: Uint8Array): void {
  const buffer = bytes.buffer
  if (buffer instanceof ArrayBuffer && !buffer.detached && bytes.byteOffset === 0 && bytes.byteLength === buffer.byteLength) buffer.transfer(0)
}

interface Item {
  /** What to copy out, in order (views into `owner`, or small buffers of their own). */
  readonly parts: readonly Uint8Array[]
  /** The page the parts come from: released once they are copied out (null: nothing to release). */
  readonly owner: Uint8Array | null
  readonly taken: () => void
  part: number
  offset: number
}

export class Spool extends Readable {
  readonly #queue: Item[] = []
  #wanted = false
  #ending = false
  /** Bytes put and not yet copied out. */
  #held = 0

  constructor() {
    super({ highWaterMark: PIECE_BYTES })
  }

  /** of: a spool of one page's bytes, ended (a one-page answer). */
  static of(bytes: Uint8Array, taken: () => void = () => undefined): Spool {
    const spool = new Spool()
    spool.put([bytes], bytes, taken)
    spool.finish()
    return spool
  }

  /** Bytes waiting to be copied out. */
  get heldBytes(): number {
    return this.#held
  }

  /**
   * put queues `parts` (in order), which the spool now owns: `owner` is released and `taken`
   * called once they are all copied out, or at once if the stream is over.
   */
  put(parts: readonly Uint8Array[], owner: Uint8Array | null, taken: () => void): void {
    if (this.destroyed || this.#ending) {
      if (owner !== null) release(owner)
      taken()
      return
    }
    for (const part of parts) this.#held += part.byteLength
    this.#queue.push({ parts, owner, taken, part: 0, offset: 0 })
    this.#pump()
  }

  /** finish ends the stream once everything put is copied out. */
  finish(): void {
    this.#ending = true
    this.#pump()
  }

  override _read(): void {
    this.#wanted = true
    this.#pump()
  }

  #pump(): void {
    while (this.#wanted) {
      const item = this.#queue[0]
      if (item === undefined) {
        if (this.#ending) {
          this.#wanted = false
          this.push(null)
        }
        return
      }
      const part = item.parts[item.part]
      let piece: Buffer | null = null
      if (part !== undefined) {
        const n = Math.min(PIECE_BYTES, part.byteLength - item.offset)
        // A copy: the page itself never goes down the stream, so it can be released once read through.
        if (n > 0) piece = Buffer.from(part.subarray(item.offset, item.offset + n))
        item.offset += n
        this.#held -= n
        if (item.offset >= part.byteLength) {
          item.part++
          item.offset = 0
        }
      }
      // Read through: released now, not when the reader next asks.
      if (item.part >= item.parts.length) {
        this.#queue.shift()
        this.#done(item)
      }
      if (piece !== null && !this.push(piece)) this.#wanted = false
    }
  }

  #done(item: Item): void {
    if (item.owner !== null) release(item.owner)
    item.taken()
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    for (const item of this.#queue.splice(0)) this.#done(item)
    this.#held = 0
    callback(error)
  }
}

/**
 * Copier does what a spool does for a stream that another library writes: it reads `source`
 * one chunk at a time, as its own reader asks, and copies each out in small pieces. A chunk
 * registered with `own` (a page the library was given and writes down as it is: yazl writes
 * each zip entry's buffer whole) is released, and its `taken` called, once copied through,
 * or when the copier is destroyed before that.
 */
export class Copier extends Readable {
  readonly #source: Readable
  readonly #owned = new Map<Uint8Array, () => void>()
  #chunk: Uint8Array | null = null
  #offset = 0
  #wanted = false
  #ended = false

  constructor(source: Readable) {
    super({ highWaterMark: PIECE_BYTES })
    this.#source = source
    source.on('data', (chunk: Uint8Array) => {
      source.pause()
      this.#chunk = chunk
      this.#offset = 0
      this.#pump()
    })
    source.once('end', () => {
      this.#ended = true
      this.#pump()
    })
    source.once('error', (error) => this.destroy(error))
    source.pause()
  }

  /** own registers `bytes`, which the source will give as one chunk (the same object): released once copied through. */
  own(bytes: Uint8Array, taken: () => void): void {
    if (this.destroyed) {
      release(bytes)
      taken()
    } else this.#owned.set(bytes, taken)
  }

  override _read(): void {
    this.#wanted = true
    this.#pump()
  }

  #pump(): void {
    while (this.#wanted) {
      const chunk = this.#chunk
      if (chunk === null) {
        if (this.#ended) {
          this.#wanted = false
          this.push(null)
        } else this.#source.resume()
        return
      }
      const n = Math.min(PIECE_BYTES, chunk.byteLength - this.#offset)
      const piece = n > 0 ? Buffer.from(chunk.subarray(this.#offset, this.#offset + n)) : null
      this.#offset += n
      if (this.#offset >= chunk.byteLength) {
        this.#chunk = null
        const taken = this.#owned.get(chunk)
        if (taken !== undefined) {
          this.#owned.delete(chunk)
          // Not at once: the writer may still be inside its write() of this chunk, and read it after (yazl counts its length).
          queueMicrotask(() => {
            release(chunk)
            taken()
          })
        }
      }
      if (piece !== null && !this.push(piece)) this.#wanted = false
    }
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.#source.destroy()
    for (const [bytes, taken] of this.#owned) {
      release(bytes)
      taken()
    }
    this.#owned.clear()
    this.#chunk = null
    callback(error)
  }
}
