/**
 * End: one side of a store copy, SQLite or PostgreSQL, as the copy reads it (the source, and the
 * target when it is checked) and writes it (the target). Rows travel as portable values
 * (values.ts), in primary-key order as bytes compare (SQLite's BINARY, PostgreSQL's "C"), so that
 * both ends give the rows of a table in the same order.
 */
import type { Layout, Shape } from './tables.ts'
import type { Portable } from './values.ts'

/** Limits: a batch ends at this many rows, or once it holds this many bytes (at least one row). */
export interface Limits {
  readonly rows: number
  readonly bytes: number
}

/** Marker: what the progress table of a copy under way holds. */
export interface Marker {
  /** The description of the store it copies from. */
  readonly source: string | null
  /** Each table begun: the canonical key of its last row copied (JSON), and how many rows were copied. */
  readonly tables: ReadonlyMap<string, { readonly after: string; readonly rows: number }>
}

export interface End {
  readonly kind: 'sqlite' | 'postgres'
  /** Where it is, for messages and the marker: a file's path, or a URL without its password. */
  readonly description: string
  /** The highest migration applied; null when it has no schema_migrations (no store of ours, or nothing yet). */
  version(): Promise<number | null>
  /** Every table (the progress table too, when there) with its columns and primary key. */
  layout(): Promise<Map<string, Layout>>
  count(table: string): Promise<number>
  /** snapshot runs `work` in one read transaction: every read in it sees the same committed state. */
  snapshot<T>(work: () => Promise<T>): Promise<T>
  /** batches reads a table's rows after `after` (a key, or null: from the first), in key order; inside `snapshot`. */
  batches(shape: Shape, after: readonly Portable[] | null, limits: Limits): AsyncGenerator<Portable[][]>
  /** holdsRows: whether the table has a row at all. */
  holdsRows(table: string): Promise<boolean>

  /** lock keeps any other copy from writing this store until it closes. */
  lock(): Promise<void>
  /** migrate applies the pending migrations. */
  migrate(): Promise<void>
  /** marker reads the progress of a copy into this store; null when there is none. */
  marker(): Promise<Marker | null>
  /** mark makes the store a copy's target (the progress table), from `source`; `restart` forgets what another copy made. */
  mark(source: string, restart: boolean): Promise<void>
  /** write upserts rows of a table and records `after` (the last one's canonical key) as its progress, in one transaction. */
  write(shape: Shape, rows: readonly (readonly Portable[])[], after: string): Promise<void>
  /** finish makes the store whole again: what mark undid is redone and the progress table dropped, in one transaction. */
  finish(): Promise<void>
  close(): Promise<void>
}
