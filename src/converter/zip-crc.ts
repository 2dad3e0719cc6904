/**
 * The zips' CRC-32 computed by zlib (native) instead of yazl's own JavaScript one.
 *
 * yazl computes each entry's CRC-32 with `buffer-crc32`, a byte-at-a-time loop in JavaScript on
 * the main thread: about 560 µs for a 180 KiB page here, where Node's `zlib.crc32` takes about 50
 * (same input, same value). Under the jobs bench it was the largest piece of the node's main
 * thread after garbage collection and socket writes. yazl calls `crc32.unsigned(buffer)` and
 * `crc32.unsigned(chunk, previous)` on the one module object it requires, so that function is
 * replaced by zlib's, which takes the same arguments (the CRC so far as a number) and gives the
 * same unsigned value; nothing else of the module is used.
 *
 * The module is reached by yazl's own resolution (it is yazl's dependency, not ours). When a
 * release of yazl stops using it, installation throws at start-up and `zip-crc.test.ts` fails,
 * rather than silently going back to the slower path.
 */
import { createRequire } from 'node:module'
import { crc32 } from 'node:zlib'

interface BufferCrc32 {
  unsigned: (buffer: Buffer, previous?: number) => number
}

/** The function that now answers yazl's CRC-32s. */
export function nativeCrc32(buffer: Buffer, previous?: number): number {
  return crc32(buffer, previous ?? 0)
}

/** installZipCrc32: makes yazl's CRC-32 zlib's. Idempotent. */
export function installZipCrc32(): void {
  const fromYazl = createRequire(import.meta.resolve('yazl'))
  const module = fromYazl('buffer-crc32') as BufferCrc32
  if (typeof module.unsigned !== 'function') throw new Error('yazl no longer computes its CRC-32 with buffer-crc32: see src/converter/zip-crc.ts')
  module.unsigned = nativeCrc32
}

installZipCrc32()
