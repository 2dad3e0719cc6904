/**
 * Whether a body read to its end is whole, as far as its format lets one tell: a PNG ends with
 * its IEND chunk, a JPEG with EOI, a WebP's RIFF size is its length, a TIFF's directories and
 * strips lie inside it, a PDF ends with %%EOF, PostScript too, a zip's end of central directory
 * is there and every entry it lists is inside and whole itself, and JSON parses. A streamed
 * answer cut short by the server would fail these even when its framing looked right.
 */

const PNG_END = Buffer.from([0, 0, 0, 0, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82])

/** incomplete gives why `body` of media type `type` is not whole, or null when it is (or cannot be told). */
export function incomplete(type: string, body: Buffer): string | null {
  const media = type.split(';')[0]!.trim().toLowerCase()
  switch (media) {
    case 'image/png':
      return body.subarray(-12).equals(PNG_END) ? null : 'PNG without its IEND chunk at the end'
    case 'image/jpeg':
      return body[0] === 0xff && body[1] === 0xd8 && body.at(-2) === 0xff && body.at(-1) === 0xd9 ? null : 'JPEG without SOI and EOI'
    case 'image/webp':
      return body.length >= 12 && body.toString('latin1', 0, 4) === 'RIFF' && body.readUInt32LE(4) + 8 === body.length
        ? null
        : 'WebP whose RIFF size is not its length'
    case 'image/tiff':
      return tiff(body)
    case 'application/pdf':
    case 'application/postscript':
      return /%%EOF\s*$/.test(body.subarray(-64).toString('latin1')) ? null : `${media} without %%EOF at the end`
    case 'application/zip':
      return zip(body)
    case 'application/json':
      try {
        JSON.parse(body.toString('utf8'))
        return null
      } catch {
        return 'JSON that does not parse'
      }
    case 'application/x-ndjson': {
      const text = body.toString('utf8')
      if (text !== '' && !text.endsWith('\n')) return 'NDJSON whose last line does not end'
      try {
        for (const line of text.split('\n')) if (line !== '') JSON.parse(line)
        return null
      } catch {
        return 'NDJSON with a line that does not parse'
      }
    }
    default:
      return null
  }
}

/** zip checks the end of central directory, then each entry the directory lists: inside the file, and whole by its own name's format. */
function zip(body: Buffer): string | null {
  const eocd = body.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]))
  if (eocd < 0 || eocd + 22 > body.length) return 'zip without its end of central directory'
  const count = body.readUInt16LE(eocd + 10)
  let at = body.readUInt32LE(eocd + 16)
  for (let i = 0; i < count; i++) {
    if (at + 46 > body.length || body.readUInt32LE(at) !== 0x02014b50) return `zip whose central directory entry ${i + 1} is not there`
    const method = body.readUInt16LE(at + 10)
    const size = body.readUInt32LE(at + 20)
    const nameLength = body.readUInt16LE(at + 28)
    const local = body.readUInt32LE(at + 42)
    const name = body.toString('utf8', at + 46, at + 46 + nameLength)
    if (local + 30 > body.length || body.readUInt32LE(local) !== 0x04034b50) return `zip entry ${name}: no local header`
    const dataAt = local + 30 + body.readUInt16LE(local + 26) + body.readUInt16LE(local + 28)
    if (dataAt + size > body.length) return `zip entry ${name}: its data runs past the end`
    // Stored entries (the service's PNGs and PDFs are stored) are checked as what their names say.
    if (method === 0) {
      const inner = incomplete(typeOfName(name), body.subarray(dataAt, dataAt + size))
      if (inner !== null) return `zip entry ${name}: ${inner}`
    }
    at += 46 + nameLength + body.readUInt16LE(at + 30) + body.readUInt16LE(at + 32)
  }
  return null
}

function typeOfName(name: string): string {
  const ext = name.slice(name.lastIndexOf('.') + 1).toLowerCase()
  return (
    { png: 'image/png', jpg: 'image/jpeg', jpeg: 'image/jpeg', webp: 'image/webp', tif: 'image/tiff', tiff: 'image/tiff', pdf: 'application/pdf' }[ext] ??
    'application/octet-stream'
  )
}

/** tiff walks the directory chain: every directory, and every strip or tile it points at, inside the file. */
function tiff(body: Buffer): string | null {
  const order = body.toString('latin1', 0, 2)
  if (order !== 'II' && order !== 'MM') return 'TIFF without a byte-order mark'
  const le = order === 'II'
  const u16 = (at: number) => (le ? body.readUInt16LE(at) : body.readUInt16BE(at))
  const u32 = (at: number) => (le ? body.readUInt32LE(at) : body.readUInt32BE(at))
  let ifd = u32(4)
  for (let page = 1; ifd !== 0; page++) {
    if (ifd + 2 > body.length) return `TIFF directory ${page} past the end`
    const n = u16(ifd)
    if (ifd + 2 + n * 12 + 4 > body.length) return `TIFF directory ${page} runs past the end`
    const offsets: number[] = []
    const counts: number[] = []
    for (let i = 0; i < n; i++) {
      const e = ifd + 2 + i * 12
      const tag = u16(e)
      const type = u16(e + 2)
      const count = u32(e + 4)
      const size = type === 3 ? 2 : 4
      const values = count * size <= 4 ? e + 8 : u32(e + 8)
      if (values + count * size > body.length) return `TIFF directory ${page}: tag ${tag}'s values past the end`
      const list = Array.from({ length: count }, (_, k) => (size === 2 ? u16(values + k * 2) : u32(values + k * 4)))
      if (tag === 273 || tag === 324) offsets.push(...list)
      if (tag === 279 || tag === 325) counts.push(...list)
    }
    for (let k = 0; k < offsets.length; k++) if (offsets[k]! + (counts[k] ?? 0) > body.length) return `TIFF page ${page}: strip ${k + 1} past the end`
    ifd = u32(ifd + 2 + n * 12)
    if (page > 100_000) return 'TIFF directories in a loop'
  }
  return null
}
