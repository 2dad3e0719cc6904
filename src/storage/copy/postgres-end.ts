/**
 * The PostgreSQL end of a store copy: one connection, its times read as UTC text and its JSON as
 * text (a Date keeps no microseconds, a parsed object no number past 2^53), its tables in the
 * connection's schema (the URL's search_path, else public).
 *
 * A source is read through a cursor per table in one REPEATABLE READ transaction: one sort per
 * table, in "C" order (bytes, as SQLite compares), which the primary key's index, in the
 * database's own collation, may not give. A target's batch disables its table's user triggers
 * (the tallies, the outbox fed by audit_events, the audit trail's refusal of updates) inside the
 * batch's own transaction, and enables them again before it commits: a batch cut short leaves
 * them as they were. Foreign keys stay checked (hence the copy's order).
 */
import pg from 'pg'
import { migratePostgres } from '../postgres/store.ts'
import { Stamps } from '../stamps.ts'
import type { End, Limits, Marker } from './end.ts'
import { COPY_MARKER } from './marker.ts'
import type { Layout, Shape } from './tables.ts'
import { fromPostgres, toPostgres, type Portable } from './values.ts'

const q = (name: string) => pg.escapeIdentifier(name)

/** The types read as PostgreSQL's text: timestamp, timestamptz, json, jsonb. */
const AS_TEXT = new Set([1114, 1184, 114, 3802])
/** A statement takes at most this many parameters (PostgreSQL's protocol counts them in 16 bits). */
const MAX_PARAMETERS = 65_535
/** Any copy into a database takes this session lock first. */
const COPY_LOCK = 7274926102

/** describe: a PostgreSQL URL without its password, for messages and the marker. */
export function describe(url: string): string {
  try {
    const u = new URL(url)
    u.password = ''
    return u.href
  } catch {
    return 'postgres://…'
  }
}

/** openPostgresEnd connects to `url`. */
export async function openPostgresEnd(url: string): Promise<End> {
  const client = new pg.Client({
    connectionString: url,
    application_name: 'tessera store copy',
    types: {
      getTypeParser: ((oid: number, format?: 'text' | 'binary') => (AS_TEXT.has(oid) ? (v: string) => v : pg.types.getTypeParser(oid, format))) as never,
    },
  })
  // A dropped connection is its query's error; unheard, the client's own 'error' event would end the process.
  client.on('error', () => undefined)
  await client.connect()
  try {
    await client.query("SET TimeZone = 'UTC'; SET DateStyle = 'ISO, YMD'")
  } catch (error) {
    await client.end().catch(() => undefined)
    throw error
  }
  return new PostgresEnd(client, describe(url))
}

/** order: a key's columns as the copy orders them, text as bytes compare. */
const order = (shape: Shape) => shape.key.map((k, i) => (shape.keyKinds[i] === 'text' ? `${q(k)} COLLATE "C"` : q(k)))

class PostgresEnd implements End {
  readonly kind = 'postgres'
  readonly description: string
  readonly #client: pg.Client
  /** The tables with user triggers, read at the first write. */
  #triggered: Set<string> | null = null

  constructor(client: pg.Client, description: string) {
    this.#client = client
    this.description = description
  }

  async #one<T>(text: string, values: unknown[] = []): Promise<T | undefined> {
    return (await this.#client.query(text, values)).rows[0] as T | undefined
  }

  async #transaction(work: () => Promise<void>): Promise<void> {
    await this.#client.query('BEGIN')
    try {
      await work()
      await this.#client.query('COMMIT')
    } catch (error) {
      await this.#client.query('ROLLBACK').catch(() => undefined)
      throw error
    }
  }

  async #exists(table: string): Promise<boolean> {
    return (await this.#one<{ known: boolean }>('SELECT to_regclass($1) IS NOT NULL AS known', [table]))?.known === true
  }

  async version(): Promise<number | null> {
    if (!(await this.#exists('schema_migrations'))) return null
    return (await this.#one<{ v: number | null }>('SELECT max(version) AS v FROM schema_migrations'))?.v ?? null
  }

  async layout(): Promise<Map<string, Layout>> {
    const { rows } = await this.#client.query(`
      SELECT c.table_name, c.column_name, c.data_type, k.ordinal_position AS key_position
      FROM information_schema.columns c
      JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name AND t.table_type = 'BASE TABLE'
      LEFT JOIN information_schema.table_constraints tc
        ON tc.table_schema = c.table_schema AND tc.table_name = c.table_name AND tc.constraint_type = 'PRIMARY KEY'
      LEFT JOIN information_schema.key_column_usage k
        ON k.constraint_schema = tc.constraint_schema AND k.constraint_name = tc.constraint_name AND k.column_name = c.column_name
      WHERE c.table_schema = current_schema()
      ORDER BY c.table_name, c.ordinal_position`)
    const tables = new Map<string, { columns: { name: string; type: string }[]; key: [number, string][] }>()
    for (const r of rows) {
      const t = tables.get(r.table_name) ?? { columns: [], key: [] }
      tables.set(r.table_name, t)
      t.columns.push({ name: r.column_name, type: r.data_type })
      if (r.key_position !== null) t.key.push([Number(r.key_position), r.column_name])
    }
    const out = new Map<string, Layout>()
    for (const [name, t] of tables) out.set(name, { columns: t.columns, key: t.key.sort((a, b) => a[0] - b[0]).map(([, c]) => c) })
    return out
  }

  async count(table: string): Promise<number> {
    return Number((await this.#one<{ n: string }>(`SELECT count(*) AS n FROM ${q(table)}`))!.n)
  }

  async snapshot<T>(work: () => Promise<T>): Promise<T> {
    await this.#client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY')
    try {
      return await work()
    } finally {
      // Read only: ending it either way is the same, and an error of the work stays the error (not a lost connection's second one).
      await this.#client.query('ROLLBACK').catch(() => undefined)
    }
  }

  /** perFetch: rows a fetch takes; with bytes among them, as many as fit the batch's bytes by the largest value there is. */
  async #perFetch(shape: Shape, limits: Limits): Promise<number> {
    const blobs = shape.columns.filter((c) => c.kind === 'bytes').map((c) => `coalesce(max(octet_length(${q(c.name)})), 0)`)
    if (blobs.length === 0) return limits.rows
    const largest = Number((await this.#one<{ n: string }>(`SELECT ${blobs.join(' + ')} AS n FROM ${q(shape.table)}`))!.n)
    return largest === 0 ? limits.rows : Math.max(1, Math.min(limits.rows, Math.floor(limits.bytes / largest)))
  }

  async *batches(shape: Shape, after: readonly Portable[] | null, limits: Limits): AsyncGenerator<Portable[][]> {
    const perFetch = await this.#perFetch(shape, limits)
    const key = order(shape)
    const where = after === null ? '' : `WHERE (${key.join(', ')}) > (${key.map((_, i) => `$${i + 1}`).join(', ')})`
    await this.#client.query(
      `DECLARE copy_rows NO SCROLL CURSOR FOR
      SELECT ${shape.columns.map((c) => q(c.name)).join(', ')} FROM ${q(shape.table)} ${where} ORDER BY ${key.join(', ')}`,
      (after ?? []).map(toPostgres),
    )
    try {
      for (;;) {
        const { rows } = await this.#client.query<unknown[]>({ text: `FETCH ${perFetch} FROM copy_rows`, rowMode: 'array' })
        if (rows.length > 0) yield rows.map((r) => shape.columns.map((c, i) => fromPostgres(c.kind, r[i])))
        if (rows.length < perFetch) break
      }
    } finally {
      await this.#client.query('CLOSE copy_rows')
    }
  }

  async holdsRows(table: string): Promise<boolean> {
    return (await this.#one(`SELECT 1 FROM ${q(table)} LIMIT 1`)) !== undefined
  }

  async lock(): Promise<void> {
    const got = await this.#one<{ got: boolean }>('SELECT pg_try_advisory_lock($1) AS got', [COPY_LOCK])
    if (got?.got !== true) throw new Error(`another store copy into ${this.description} is running`)
  }

  async migrate(): Promise<void> {
    await migratePostgres(this.#client, undefined, new Stamps())
  }

  async marker(): Promise<Marker | null> {
    if (!(await this.#exists(COPY_MARKER))) return null
    const { rows } = await this.#client.query(`SELECT kind, name, value, rows FROM ${COPY_MARKER}`)
    const tables = new Map<string, { after: string; rows: number }>()
    for (const r of rows) if (r.kind === 'table' && r.value !== null) tables.set(r.name, { after: r.value, rows: Number(r.rows) })
    return { source: rows.find((r) => r.kind === 'source')?.value ?? null, tables }
  }

  async mark(source: string, restart: boolean): Promise<void> {
    await this.#transaction(async () => {
      await this.#client.query(`CREATE TABLE IF NOT EXISTS ${COPY_MARKER} (
        kind text NOT NULL, name text NOT NULL, value text, rows bigint NOT NULL DEFAULT 0, PRIMARY KEY (kind, name))`)
      if (restart) await this.#client.query(`DELETE FROM ${COPY_MARKER}`)
      await this.#client.query(
        `INSERT INTO ${COPY_MARKER} (kind, name, value) VALUES ('source', 'source', $1) ON CONFLICT (kind, name) DO UPDATE SET value = excluded.value`,
        [source],
      )
    })
  }

  async write(shape: Shape, rows: readonly (readonly Portable[])[], after: string): Promise<void> {
    this.#triggered ??= new Set(
      (
        await this.#client.query(`SELECT DISTINCT c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
          WHERE NOT t.tgisinternal AND c.relnamespace = current_schema()::regnamespace`)
      ).rows.map((r) => r.relname as string),
    )
    const triggered = this.#triggered.has(shape.table)
    const table = q(shape.table)
    const names = shape.columns.map((c) => q(c.name))
    const rest = shape.columns.filter((c) => !shape.key.includes(c.name)).map((c) => `${q(c.name)} = excluded.${q(c.name)}`)
    const conflict = `ON CONFLICT (${shape.key.map(q).join(', ')}) DO ${rest.length === 0 ? 'NOTHING' : `UPDATE SET ${rest.join(', ')}`}`
    const perStatement = Math.floor(MAX_PARAMETERS / names.length)
    await this.#transaction(async () => {
      if (triggered) await this.#client.query(`ALTER TABLE ${table} DISABLE TRIGGER USER`)
      for (let start = 0; start < rows.length; start += perStatement) {
        const chunk = rows.slice(start, start + perStatement)
        const tuples = chunk.map((_, r) => `(${names.map((_, c) => `$${r * names.length + c + 1}`).join(', ')})`)
        await this.#client.query(`INSERT INTO ${table} (${names.join(', ')}) VALUES ${tuples.join(', ')} ${conflict}`, chunk.flat().map(toPostgres))
      }
      if (triggered) await this.#client.query(`ALTER TABLE ${table} ENABLE TRIGGER USER`)
      await this.#client.query(
        `INSERT INTO ${COPY_MARKER} (kind, name, value, rows) VALUES ('table', $1, $2, $3)
        ON CONFLICT (kind, name) DO UPDATE SET value = excluded.value, rows = ${COPY_MARKER}.rows + excluded.rows`,
        [shape.table, after, rows.length],
      )
    })
  }

  async finish(): Promise<void> {
    await this.#client.query(`DROP TABLE ${COPY_MARKER}`)
  }

  async close(): Promise<void> {
    await this.#client.end().catch(() => undefined)
  }
}
