/**
 * The lines of an uploaded file, split before any CSV is parsed, so that one malformed line is
 * one refusal and never takes the lines after it (issue 40: csv-parse, fed the whole stream, read
 * no further after a line past its record bound, and an unclosed quote ran to the end of the file).
 * No field of an import may hold a line break (user IDs, secrets and labels refuse control
 * characters), so a line of the file is a record.
 *
 * Streaming and bounded: at most `maxLine` bytes of a line are kept (a longer one is reported
 * once, by its number, and the rest of it is passed over), and no more than `maxBytes` of the
 * file are read. A line ends at LF; a CR before it is dropped (CRLF, LF and a mix of both).
 * A UTF-8 byte order mark at the very start of the file is dropped.
 */

export type FileLine =
  | { readonly kind: 'line'; readonly line: number; readonly bytes: Buffer }
  | { readonly kind: 'too-long'; readonly line: number }
  /** The file ended early for the reader: too large, or the stream failed. The lines before were all given. */
  | { readonly kind: 'stopped'; readonly why: string }

const LF = 0x0a
const CR = 0x0d
const BOM = Buffer.from([0xef, 0xbb, 0xbf])

/** fileLines yields each line of `input` with its 1-based number, in order, then a `stopped` item if the file was not read to its end. */
export async function* fileLines(input: AsyncIterable<Buffer | string>, maxLine: number, maxBytes: number): AsyncGenerator<FileLine> {
  let number = 0
  let kept: Buffer[] = []
  let keptBytes = 0
  // The line being read is past maxLine: it was reported, and its bytes up to the next LF are passed over.
  let passing = false
  let read = 0

  /** end closes the line read so far (its LF seen, or the file ended after it). */
  const end = (): FileLine => {
    number++
    if (passing) {
      passing = false
      return { kind: 'too-long', line: number }
    }
    let bytes = kept.length === 1 ? kept[0]! : Buffer.concat(kept, keptBytes)
    kept = []
    keptBytes = 0
    if (bytes.length > 0 && bytes[bytes.length - 1] === CR) bytes = bytes.subarray(0, -1)
    if (number === 1 && bytes.subarray(0, 3).equals(BOM)) bytes = bytes.subarray(3)
    return bytes.length > maxLine ? { kind: 'too-long', line: number } : { kind: 'line', line: number, bytes }
  }
  /** keep adds bytes of the line being read, or passes them over once it is too long (one byte for the CR of a CRLF). */
  const keep = (bytes: Buffer) => {
    if (passing || bytes.length === 0) return
    if (keptBytes + bytes.length > maxLine + 1) {
      passing = true
      kept = []
      keptBytes = 0
      return
    }
    kept.push(bytes)
    keptBytes += bytes.length
  }

  let stopped: string | null = null
  try {
    for await (const piece of input) {
      let chunk = typeof piece === 'string' ? Buffer.from(piece) : piece
      if (read + chunk.length > maxBytes) {
        // What fits is read; the line it cuts is not given (nor is anything after it).
        chunk = chunk.subarray(0, maxBytes - read)
        stopped = `the file is larger than ${maxBytes} bytes: lines after the last reported were not read`
      }
      read += chunk.length
      let at = 0
      for (let lf = chunk.indexOf(LF, at); lf !== -1; lf = chunk.indexOf(LF, at)) {
        keep(chunk.subarray(at, lf))
        yield end()
        at = lf + 1
      }
      keep(chunk.subarray(at))
      if (stopped !== null) break
    }
  } catch (error) {
    stopped = `the file could not be read to its end (${(error as Error).message}): lines after the last reported were not read`
  }
  if (stopped !== null) {
    yield { kind: 'stopped', why: stopped }
    return
  }
  if (passing || keptBytes > 0) yield end()
}
