/**
 * HMAC (RFC 2104) built on `crypto.hash`, Node's one-shot digest, without allocating.
 *
 * It gives the bytes `createHmac` gives, for less: on Node 24, `createHmac` makes a native
 * object per call (and tells key kinds apart by throwing and catching), and every new
 * ArrayBuffer, which a Buffer result of `crypto.hash` or a fresh `Buffer.alloc` is, costs
 * about 1 µs on its own (measured on the 2-CPU machine of docs/performance.md's figures; a small
 * Uint8Array made inside V8's heap costs 70 ns). So the padded blocks are written into one
 * scratch buffer that every call reuses, and the digests travel as latin1 strings, which
 * V8 makes on its heap. The work is synchronous, so no two calls ever share the scratch.
 */
import { hash } from 'node:crypto'

export type HashName = 'sha1' | 'sha256' | 'sha512'

const BLOCK: Readonly<Record<HashName, number>> = { sha1: 64, sha256: 64, sha512: 128 }
const LENGTH: Readonly<Record<HashName, number>> = { sha1: 20, sha256: 32, sha512: 64 }
const IPAD = 0x36
const OPAD = 0x5c

/** Messages up to this length use the shared scratch; longer ones (none on a hot path) get a buffer of their own. */
const SCRATCH_MESSAGE = 4096
const scratch = Buffer.alloc(128 + SCRATCH_MESSAGE)
/** A key longer than a block is replaced by its digest (RFC 2104 §3), kept here. */
const longKey = Buffer.alloc(64)
/** The result of hmacBytes, overwritten by the next call. */
const result = Buffer.alloc(64)
const RESULT: Readonly<Record<HashName, Buffer>> = {
  sha1: result.subarray(0, 20),
  sha256: result.subarray(0, 32),
  sha512: result.subarray(0, 64),
}

function blockKey(algorithm: HashName, key: Uint8Array): Uint8Array {
  if (key.byteLength <= BLOCK[algorithm]) return key
  longKey.write(hash(algorithm, key, 'binary'), 0, 'latin1')
  return longKey.subarray(0, LENGTH[algorithm])
}

/** The ipad and opad blocks, copied in with TypedArray#set (cheaper than Buffer#fill, which checks its arguments). */
const PADS = {
  [IPAD]: { 64: new Uint8Array(64).fill(IPAD), 128: new Uint8Array(128).fill(IPAD) },
  [OPAD]: { 64: new Uint8Array(64).fill(OPAD), 128: new Uint8Array(128).fill(OPAD) },
} as Record<number, Record<number, Uint8Array>>

/** Views of the scratch from its start, by length, made once (subarray makes an object a call). */
const views: Buffer[] = []
function view(buffer: Buffer, length: number): Buffer {
  if (buffer !== scratch) return buffer.subarray(0, length)
  const made = views[length]
  if (made !== undefined) return made
  const fresh = scratch.subarray(0, length)
  views[length] = fresh
  return fresh
}

function pad(buffer: Buffer, block: number, key: Uint8Array, value: number): void {
  buffer.set(PADS[value]![block]!, 0)
  for (let i = 0; i < key.byteLength; i++) buffer[i]! ^= key[i]!
}

/** hmacText is the HMAC of `message` (bytes, or a string taken as UTF-8) in `encoding` ('binary' is latin1). */
export function hmacText(algorithm: HashName, key: Uint8Array, message: Uint8Array | string, encoding: 'binary' | 'hex' | 'base64url'): string {
  const block = BLOCK[algorithm]
  const k = blockKey(algorithm, key)
  const length = typeof message === 'string' ? Buffer.byteLength(message, 'utf8') : message.byteLength
  const buffer = length <= SCRATCH_MESSAGE ? scratch : Buffer.allocUnsafe(block + Math.max(length, LENGTH[algorithm]))
  pad(buffer, block, k, IPAD)
  if (typeof message === 'string') buffer.write(message, block, 'utf8')
  else buffer.set(message, block)
  const inner = hash(algorithm, view(buffer, block + length), 'binary')
  pad(buffer, block, k, OPAD)
  buffer.write(inner, block, 'latin1')
  return hash(algorithm, view(buffer, block + LENGTH[algorithm]), encoding)
}

/**
 * hmacBytes is the HMAC as bytes in a buffer that the next call overwrites: read it at
 * once (HOTP's dynamic truncation does) or copy it.
 */
export function hmacBytes(algorithm: HashName, key: Uint8Array, message: Uint8Array | string): Buffer {
  const out = RESULT[algorithm]
  out.write(hmacText(algorithm, key, message, 'binary'), 0, 'latin1')
  return out
}
