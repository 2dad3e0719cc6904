/**
 * planSymbol decides, before any symbol is built, whether a text fits in a QR code and how:
 * the cheapest split of the text into numeric, alphanumeric and byte segments (a linear
 * dynamic programme over the characters) and the smallest version that holds it.
 *
 * Why not `qrcode`'s own split: it runs Dijkstra over a graph of every segment, with a
 * priority queue that sorts on each push; on 15 KB of mixed text it took 100-150 ms of the
 * event loop before finding that the text did not fit. This plan costs microseconds per KB,
 * is exact (a text fits exactly when its cheapest encoding fits), and `qrcode` builds the
 * symbol from the segments it gives.
 */
import { createRequire } from 'node:module'
import type { Ecc } from './matrix.ts'

export type SegmentMode = 'numeric' | 'alphanumeric' | 'byte'

export interface Segment {
  readonly data: string
  readonly mode: SegmentMode
}

export interface Plan {
  readonly version: number
  readonly segments: readonly Segment[]
}

/** The data bits of each version (1-40) at each level, as `qrcode` counts them (its internals: no public API gives them). */
const require = createRequire(import.meta.url)
const qrVersion = require('qrcode/lib/core/version.js') as { getCapacity(version: number, ecc: unknown, mode: unknown): number }
const qrMode = require('qrcode/lib/core/mode.js') as { MIXED: unknown }
const qrLevel = require('qrcode/lib/core/error-correction-level.js') as { from(level: string): unknown }
const DATA_BITS = Object.fromEntries(
  (['L', 'M', 'Q', 'H'] as const).map((ecc) => [
    ecc,
    Array.from({ length: 41 }, (_, v) => (v === 0 ? 0 : qrVersion.getCapacity(v, qrLevel.from(ecc), qrMode.MIXED))),
  ]),
) as Record<Ecc, number[]>

const MODES: readonly SegmentMode[] = ['numeric', 'alphanumeric', 'byte']
const NUMERIC = 0
const ALPHANUMERIC = 1
const BYTE = 2

/** Character count indicator bits per mode, for versions 1-9, 10-26 and 27-40 (ISO/IEC 18004 table 3). */
const CLASSES = [
  { first: 1, last: 9, countBits: [10, 9, 8] },
  { first: 10, last: 26, countBits: [12, 11, 16] },
  { first: 27, last: 40, countBits: [14, 13, 16] },
] as const

/**
 * Costs are counted in sixths of a bit, so that a digit (10 bits for 3) and an alphanumeric
 * character (11 bits for 2) cost a whole number; a segment's cost is rounded up to whole
 * bits when it ends, which is exactly the encoders' count (ceil(10n/3), ceil(11n/2)).
 */
const SIXTHS_DIGIT = 20
const SIXTHS_ALNUM = 33
const SIXTHS_BYTE = 48
const MODE_BITS = 4

const ALNUM = ' $%*+-./:'

function charClass(code: number): number {
  if (code >= 48 && code <= 57) return NUMERIC
  if ((code >= 65 && code <= 90) || ALNUM.includes(String.fromCharCode(code))) return ALPHANUMERIC
  return BYTE
}

function utf8Length(codePoint: number): number {
  return codePoint < 0x80 ? 1 : codePoint < 0x800 ? 2 : codePoint < 0x10000 ? 3 : 4
}

const closeUp = (sixths: number) => Math.ceil(sixths / 6) * 6

/**
 * cheapest returns the fewest bits the text takes with these count indicator sizes, and the
 * segments that take them. `chars` are the text's code points (a surrogate pair is one).
 */
function cheapest(chars: readonly string[], countBits: readonly number[]): { bits: number; segments: Segment[] } {
  const n = chars.length
  // cost[m]: the cheapest encoding of the text so far whose last segment is in mode m and still open.
  let cost = [Infinity, Infinity, Infinity]
  // started[i * 3 + m]: the mode of the segment before a segment in mode m that starts at i (3: none, -1: no new segment).
  const started = new Int8Array(n * 3)
  for (let i = 0; i < n; i++) {
    const ch = chars[i]!
    const code = ch.codePointAt(0)!
    const cls = charClass(code)
    let bestClosed = i === 0 ? 0 : Infinity
    let bestFrom = 3
    for (let k = 0; k < 3; k++) {
      if (closeUp(cost[k]!) < bestClosed) {
        bestClosed = closeUp(cost[k]!)
        bestFrom = k
      }
    }
    const next = [Infinity, Infinity, Infinity]
    for (let m = cls; m < 3; m++) {
      const charCost = m === NUMERIC ? SIXTHS_DIGIT : m === ALPHANUMERIC ? SIXTHS_ALNUM : SIXTHS_BYTE * utf8Length(code)
      const open = cost[m]! + charCost
      const fresh = bestClosed + (MODE_BITS + countBits[m]!) * 6 + charCost
      if (open <= fresh) {
        next[m] = open
        started[i * 3 + m] = -1
      } else {
        next[m] = fresh
        started[i * 3 + m] = bestFrom
      }
    }
    cost = next
  }
  let mode = 0
  for (let m = 1; m < 3; m++) if (closeUp(cost[m]!) < closeUp(cost[mode]!)) mode = m
  const bits = closeUp(cost[mode]!) / 6
  const segments: Segment[] = []
  let end = n
  for (let i = n - 1; i >= 0; i--) {
    const from = started[i * 3 + mode]!
    if (from === -1) continue
    segments.push({ data: chars.slice(i, end).join(''), mode: MODES[mode]! })
    end = i
    mode = from
  }
  return { bits, segments: segments.reverse() }
}

/** The most characters any text may have to fit at a level: all digits, at 10 bits for 3. */
function mostCharacters(ecc: Ecc): number {
  return Math.floor(((DATA_BITS[ecc][40]! - MODE_BITS - 14) * 3) / 10)
}

/** planSymbol returns the segments and smallest version for the text, or null when no version holds it. */
export function planSymbol(text: string, ecc: Ecc): Plan | null {
  // Every character costs at least 10/3 bits: longer texts are refused before splitting them.
  if (text.length === 0 || text.length > 2 * mostCharacters(ecc)) return null
  const chars = Array.from(text)
  if (chars.length > mostCharacters(ecc)) return null
  for (const { first, last, countBits } of CLASSES) {
    // No segment outgrows its count indicator: the largest version of each class holds fewer characters than it counts.
    const { bits, segments } = cheapest(chars, countBits)
    if (bits > DATA_BITS[ecc][last]!) continue
    let version = first
    while (DATA_BITS[ecc][version]! < bits) version++
    return { version, segments }
  }
  return null
}
