/**
 * The SQLite end of a store copy: the store of DATA_DIR read (on a read-only connection) or written
 * (the reverse copy, into a store made and migrated as a node would make it).
 *
 * SQLite cannot disable a trigger: the target's triggers (the tallies of record_tallies, the outbox
 * fed by audit_events, the audit trail's refusal of updates) are dropped when the copy marks the
 * store, their SQL kept in the progress table, and made again from it by the copy's last
 * transaction, so that copied rows fire none of them and the tallies and outbox are copied as they are.
 */
import { resolve } from 'node:path'
import { DatabaseSync, type SQLInputValue, type StatementSync } from 'node:sqlite'
import { openSqliteDatabase } from '../sqlite/store.ts'
import { Stamps } from '../stamps.ts'
import type { End, Limits, Marker } from './end.ts'
import { COPY_MARKER } from './marker.ts'
import type { Layout, Shape } from './tables.ts'
import { fromSqlite, sizeOf, toSqlite, type Portable } from './values.ts'

const q = (name: string) => `"${name.replaceAll('"', '""')}"`

/** How long a statement waits for another connection's lock (ms). */
const BUSY_TIMEOUT_MS = 10_000

/** openSqliteEnd opens a store's file: read-only (a source, or a target only checked), or made and migrated if need be (a target). */
export function openSqliteEnd(path: string, options: { readonly write: boolean }): End {
  const db = options.write ? openSqliteDatabase(path, new Stamps()) : new DatabaseSync(path, { readOnly: true, timeout: BUSY_TIMEOUT_MS })
  if (options.write) db.exec(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`)
  return new SqliteEnd(db, path === ':memory:' ? path : resolve(path))
}

class SqliteEnd implements End {
  readonly kind = 'sqlite'
  readonly description: string
  readonly #db: DatabaseSync
  readonly #upserts = new Map<string, StatementSync>()

  constructor(db: DatabaseSync, description: string) {
    this.#db = db
    this.description = description
  }

  #transaction(work: () => void): void {
    this.#db.exec('BEGIN IMMEDIATE')
    try {
      work()
      this.#db.exec('COMMIT')
    } catch (error) {
      if (this.#db.isTransaction) this.#db.exec('ROLLBACK')
      throw error
    }
  }

  #has(type: 'table' | 'trigger', name: string): boolean {
    return this.#db.prepare('SELECT 1 FROM sqlite_master WHERE type = ? AND name = ?').get(type, name) !== undefined
  }

  async version(): Promise<number | null> {
    if (!this.#has('table', 'schema_migrations')) return null
    const row = this.#db.prepare('SELECT max(version) AS v FROM schema_migrations').get()
    return row?.v === null || row?.v === undefined ? null : Number(row.v)
  }

  async layout(): Promise<Map<string, Layout>> {
    const out = new Map<string, Layout>()
    for (const { name } of this.#db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").all()) {
      const info = this.#db.prepare(`PRAGMA table_info(${q(String(name))})`).all()
      out.set(String(name), {
        columns: info.map((c) => ({ name: String(c.name), type: String(c.type) })),
        key: info
          .filter((c) => Number(c.pk) > 0)
          .sort((a, b) => Number(a.pk) - Number(b.pk))
          .map((c) => String(c.name)),
      })
    }
    return out
  }

  async count(table: string): Promise<number> {
    return Number(this.#db.prepare(`SELECT count(*) AS n FROM ${q(table)}`).get()!.n)
  }

  async snapshot<T>(work: () => Promise<T>): Promise<T> {
    this.#db.exec('BEGIN')
    try {
      return await work()
    } finally {
      // A read transaction: ending it either way is the same, and a failed statement may have ended it already.
      if (this.#db.isTransaction) this.#db.exec('ROLLBACK')
    }
  }

  async *batches(shape: Shape, after: readonly Portable[] | null, limits: Limits): AsyncGenerator<Portable[][]> {
    const key = shape.key.map(q).join(', ')
    const where = after === null ? '' : `WHERE (${key}) > (${shape.key.map(() => '?').join(', ')})`
    const stmt = this.#db.prepare(`SELECT ${shape.columns.map((c) => q(c.name)).join(', ')} FROM ${q(shape.table)} ${where} ORDER BY ${key}`)
    stmt.setReadBigInts(true)
    stmt.setReturnArrays(true)
    let batch: Portable[][] = []
    let bytes = 0
    for (const raw of stmt.iterate(...((after ?? []).map(toSqlite) as SQLInputValue[]))) {
      const values = raw as unknown as unknown[]
      const row = shape.columns.map((c, i) => fromSqlite(c.kind, values[i]))
      batch.push(row)
      bytes += sizeOf(row)
      if (batch.length >= limits.rows || bytes >= limits.bytes) {
        yield batch
        batch = []
        bytes = 0
      }
    }
    if (batch.length > 0) yield batch
  }

  async holdsRows(table: string): Promise<boolean> {
    return this.#db.prepare(`SELECT 1 FROM ${q(table)} LIMIT 1`).get() !== undefined
  }

  async lock(): Promise<void> {
    // Held from the first write to the close: another copy (or a node) waits, then fails, rather than write beside this one.
    this.#db.exec('PRAGMA locking_mode = EXCLUSIVE')
    this.#transaction(() => undefined)
  }

  async migrate(): Promise<void> {
    // openSqliteDatabase has migrated it.
  }

  async marker(): Promise<Marker | null> {
    if (!this.#has('table', COPY_MARKER)) return null
    const rows = this.#db.prepare(`SELECT kind, name, value, rows FROM ${COPY_MARKER}`).all()
    const tables = new Map<string, { after: string; rows: number }>()
    for (const r of rows) if (r.kind === 'table' && r.value !== null) tables.set(String(r.name), { after: String(r.value), rows: Number(r.rows) })
    const source = rows.find((r) => r.kind === 'source')
    return { source: source === undefined ? null : String(source.value), tables }
  }

  async mark(source: string, restart: boolean): Promise<void> {
    this.#transaction(() => {
      this.#db.exec(`CREATE TABLE IF NOT EXISTS ${COPY_MARKER} (
        kind TEXT NOT NULL, name TEXT NOT NULL, value TEXT, rows INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (kind, name))`)
      // The triggers an earlier copy dropped stay recorded: they are made again at the end, whichever copy finishes.
      if (restart) this.#db.exec(`DELETE FROM ${COPY_MARKER} WHERE kind <> 'trigger'`)
      this.#db
        .prepare(`INSERT INTO ${COPY_MARKER} (kind, name, value) VALUES ('source', 'source', ?) ON CONFLICT DO UPDATE SET value = excluded.value`)
        .run(source)
      const keep = this.#db.prepare(`INSERT OR IGNORE INTO ${COPY_MARKER} (kind, name, value) VALUES ('trigger', ?, ?)`)
      for (const t of this.#db.prepare("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'").all()) {
        keep.run(String(t.name), String(t.sql))
        this.#db.exec(`DROP TRIGGER ${q(String(t.name))}`)
      }
    })
  }

  #upsert(shape: Shape): StatementSync {
    let stmt = this.#upserts.get(shape.table)
    if (stmt === undefined) {
      const names = shape.columns.map((c) => q(c.name))
      const rest = shape.columns.filter((c) => !shape.key.includes(c.name)).map((c) => `${q(c.name)} = excluded.${q(c.name)}`)
      stmt = this.#db.prepare(
        `INSERT INTO ${q(shape.table)} (${names.join(', ')}) VALUES (${names.map(() => '?').join(', ')})
        ON CONFLICT (${shape.key.map(q).join(', ')}) DO ${rest.length === 0 ? 'NOTHING' : `UPDATE SET ${rest.join(', ')}`}`,
      )
      this.#upserts.set(shape.table, stmt)
    }
    return stmt
  }

  async write(shape: Shape, rows: readonly (readonly Portable[])[], after: string): Promise<void> {
    const stmt = this.#upsert(shape)
    this.#transaction(() => {
      for (const row of rows) stmt.run(...(row.map(toSqlite) as SQLInputValue[]))
      this.#db
        .prepare(
          `INSERT INTO ${COPY_MARKER} (kind, name, value, rows) VALUES ('table', ?, ?, ?)
          ON CONFLICT DO UPDATE SET value = excluded.value, rows = rows + excluded.rows`,
        )
        .run(shape.table, after, rows.length)
    })
  }

  async finish(): Promise<void> {
    this.#transaction(() => {
      for (const t of this.#db.prepare(`SELECT value FROM ${COPY_MARKER} WHERE kind = 'trigger' ORDER BY name`).all()) this.#db.exec(String(t.value))
      this.#db.exec(`DROP TABLE ${COPY_MARKER}`)
    })
  }

  async close(): Promise<void> {
    if (this.#db.isOpen) this.#db.close()
  }
}
