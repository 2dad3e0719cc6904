import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { createRequire } from 'node:module'
import { test } from 'node:test'
import yazl from 'yazl'
import { nativeCrc32 } from './zip-crc.ts'

const fromYazl = createRequire(import.meta.resolve('yazl'))

test('yazl computes its CRC-32 with the native function once installed', () => {
  const module = fromYazl('buffer-crc32') as { unsigned: unknown }
  assert.equal(module.unsigned, nativeCrc32)
})

test('the native CRC-32 gives buffer-crc32 values, whole and in pieces', () => {
  // The reference: buffer-crc32's own loop, kept as signed.
  const reference = fromYazl('buffer-crc32') as { signed: (buffer: Buffer, previous?: number) => number }
  for (const size of [0, 1, 7, 4096, 180 * 1024]) {
    const bytes = randomBytes(size)
    assert.equal(nativeCrc32(bytes), reference.signed(bytes) >>> 0)
    const half = Math.floor(size / 2)
    assert.equal(nativeCrc32(bytes.subarray(half), nativeCrc32(bytes.subarray(0, half))), reference.signed(bytes) >>> 0)
  }
  assert.equal(nativeCrc32(Buffer.from('123456789')), 0xcbf43926)
})

test("a zip written by yazl carries each entry's CRC-32 in its local header and central directory", async () => {
  const page = randomBytes(50_000)
  const zip = new yazl.ZipFile()
  zip.addBuffer(page, 'a.png', { compress: false })
  zip.end()
  const chunks: Buffer[] = []
  for await (const chunk of zip.outputStream) chunks.push(chunk as Buffer)
  const bytes = Buffer.concat(chunks)
  const expected = nativeCrc32(page)
  assert.equal(bytes.readUInt32LE(0), 0x04034b50)
  assert.equal(bytes.readUInt32LE(14), expected)
  const central = bytes.indexOf(Buffer.from([0x50, 0x4b, 0x01, 0x02]))
  assert.ok(central > 0)
  assert.equal(bytes.readUInt32LE(central + 16), expected)
})
