/**
 * A column's values on their way between the two stores, and their canonical form for the checksums.
 * A column is known by its PostgreSQL type, the richer of the two schemas (SQLite's INTEGER is
 * PostgreSQL's integer, bigint or boolean; its TEXT is text, timestamptz or jsonb): each end turns
 * what its driver reads into one portable value, and a portable value into what its driver binds.
 */
import { createHash } from 'node:crypto'

export type Kind = 'text' | 'integer' | 'float' | 'boolean' | 'time' | 'json' | 'bytes'

const KINDS: Readonly<Record<string, Kind>> = {
  text: 'text',
  integer: 'integer',
  bigint: 'integer',
  smallint: 'integer',
  'double precision': 'float',
  real: 'float',
  boolean: 'boolean',
  'timestamp with time zone': 'time',
  jsonb: 'json',
  json: 'json',
  bytea: 'bytes',
}

/** kindOf: the kind of a PostgreSQL column type (information_schema's data_type); null for a type the copy does not know. */
export const kindOf = (postgresType: string): Kind | null => KINDS[postgresType] ?? null

/**
 * Portable: null, or by kind: text, time and json a string (a time as `toISOString` writes it, which every stored time is;
 * json as stored), integer a bigint, float a number, boolean a boolean, bytes a Uint8Array.
 */
export type Portable = null | string | bigint | number | boolean | Uint8Array

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
/** PostgreSQL's text of a timestamptz under TimeZone UTC and DateStyle ISO: `2026-11-29 12:00:00.123+00`, the fraction trimmed. */
const PG_TIME = /^(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2})(?:\.(\d{1,6}))?\+00$/

/** timeOfSqlite: a stored time in ISO form; one in another form that Date reads, in ISO form; else as it is (the target then refuses it). */
export function timeOfSqlite(text: string): string {
  if (ISO.test(text)) return text
  const ms = Date.parse(text)
  return Number.isNaN(ms) ? text : new Date(ms).toISOString()
}

/** timeOfPostgres: PostgreSQL's text of a time in ISO form, to the microsecond when it has one (a time no store of ours wrote). */
export function timeOfPostgres(text: string): string {
  const m = PG_TIME.exec(text)
  if (m === null) return text
  const fraction = (m[3] ?? '').padEnd(6, '0')
  return `${m[1]}T${m[2]}.${fraction.endsWith('000') ? fraction.slice(0, 3) : fraction}Z`
}

/** fromSqlite: what node:sqlite read (integers as bigint) as a portable value of `kind`. */
export function fromSqlite(kind: Kind, value: unknown): Portable {
  if (value === null || value === undefined) return null
  switch (kind) {
    case 'boolean':
      return typeof value === 'bigint' ? value !== 0n : Boolean(value)
    case 'float':
      return typeof value === 'bigint' ? Number(value) : (value as Portable)
    case 'time':
      return typeof value === 'string' ? timeOfSqlite(value) : (value as Portable)
    default:
      return value as Portable
  }
}

/** toSqlite: a portable value as node:sqlite binds it (booleans as 0 and 1). */
export function toSqlite(value: Portable): null | string | bigint | number | Uint8Array {
  if (typeof value === 'boolean') return value ? 1 : 0
  return value
}

/** fromPostgres: what pg read (times and JSON as PostgreSQL's text, bigint as a string) as a portable value of `kind`. */
export function fromPostgres(kind: Kind, value: unknown): Portable {
  if (value === null || value === undefined) return null
  switch (kind) {
    case 'integer':
      return BigInt(value as string | number)
    case 'time':
      return timeOfPostgres(value as string)
    default:
      return value as Portable
  }
}

/** toPostgres: a portable value as pg binds it (integers as decimal text, bytes as a Buffer). */
export function toPostgres(value: Portable): null | string | number | boolean | Buffer {
  if (typeof value === 'bigint') return value.toString()
  if (value instanceof Uint8Array) return Buffer.isBuffer(value) ? value : Buffer.from(value.buffer, value.byteOffset, value.byteLength)
  return value
}

/** sorted: a JSON value with every object's keys in order (PostgreSQL's jsonb keeps them in an order of its own). */
function sorted(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sorted)
  if (value === null || typeof value !== 'object') return value
  const out: Record<string, unknown> = {}
  for (const key of Object.keys(value).sort()) out[key] = sorted((value as Record<string, unknown>)[key])
  return out
}

/**
 * canonical: a value as both ends give it for the checksum, whatever their types: integers and floats as decimal text, booleans
 * as 0 and 1, times in ISO form (UTC, to the ms), JSON with its keys sorted, bytes as their SHA-256; null stays null, apart from ''.
 */
export function canonical(kind: Kind, value: Portable): string | null {
  if (value === null) return null
  switch (kind) {
    case 'integer':
      return typeof value === 'bigint' ? value.toString() : String(value)
    case 'float':
      return String(Number(value))
    case 'boolean':
      return value === true || value === 1 || value === 1n ? '1' : '0'
    case 'json':
      try {
        return JSON.stringify(sorted(JSON.parse(String(value))))
      } catch {
        return `unparsed:${String(value)}`
      }
    case 'bytes':
      return value instanceof Uint8Array ? `sha256:${createHash('sha256').update(value).digest('hex')}` : `not-bytes:${String(value)}`
    default:
      return String(value)
  }
}

/** keyFromCanonical: a key column's canonical value back as a portable one (keys are text or integers: checked when the copy starts). */
export const keyFromCanonical = (kind: Kind, value: string): Portable => (kind === 'integer' ? BigInt(value) : value)

/** sizeOf: about how many bytes a row holds in memory, to bound a batch. */
export function sizeOf(row: readonly Portable[]): number {
  let bytes = 0
  for (const v of row) bytes += v instanceof Uint8Array ? v.byteLength : typeof v === 'string' ? v.length : 8
  return bytes
}
