/**
 * A merge job keeps its documents as one, in the order they go: a bundle, which the store
 * holds in pieces as any job's document. Its layout: the magic `TSRB`, the number of documents
 * and each one's length (32-bit big-endian numbers), then the documents one after another.
 * A bundle never starts like a PDF, so it is never taken for one.
 */
const MAGIC = Buffer.from('TSRB')

/** bundle puts documents in one. */
export function bundle(documents: readonly Uint8Array[]): Uint8Array {
  const head = Buffer.alloc(4 + 4 + 4 * documents.length)
  MAGIC.copy(head)
  head.writeUInt32BE(documents.length, 4)
  for (const [i, document] of documents.entries()) head.writeUInt32BE(document.byteLength, 8 + 4 * i)
  return Buffer.concat([head, ...documents])
}

/** isBundle: whether stored bytes are a bundle. */
export const isBundle = (bytes: Uint8Array): boolean => bytes.byteLength >= 8 && Buffer.from(bytes.buffer, bytes.byteOffset, 4).equals(MAGIC)

/** unbundle gives a bundle's documents (views into it), or null when it is not a whole bundle. */
export function unbundle(bytes: Uint8Array): Uint8Array[] | null {
  if (!isBundle(bytes)) return null
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const count = view.getUint32(4)
  let at = 8 + 4 * count
  if (at > bytes.byteLength) return null
  const documents: Uint8Array[] = []
  for (let i = 0; i < count; i++) {
    const length = view.getUint32(8 + 4 * i)
    if (at + length > bytes.byteLength) return null
    documents.push(bytes.subarray(at, at + length))
    at += length
  }
  return at === bytes.byteLength ? documents : null
}
