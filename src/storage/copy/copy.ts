/**
 * store copy: every table of one store into another (SQLite into PostgreSQL, or back), then both
 * checked table by table. Each table is read in primary-key order in batches (so many rows, or so
 * many bytes for conversion_job_pieces' 1 MiB pieces: memory stays bounded), and each batch is
 * written in one transaction of the target with its progress, the key of its last row, in the
 * progress table (marker.ts): a copy cut short (a kill, a lost connection) goes on from the last
 * batch committed when run again, and a batch replayed is harmless (rows are upserted by key).
 *
 * The target's triggers do not fire on copied rows (each end says how): the tallies and the
 * webhook outbox are copied as they are. The progress table is dropped, and the store made whole,
 * only once the check has found every table the same (or the copy was forced into a store that held
 * rows of its own, which the check then shows); until then no node opens the target.
 *
 * The check (also `store verify`) reads both stores in key order and hashes each row's canonical
 * values (values.ts): rows and a SHA-256 per table, the same on both ends for the same data
 * whatever each end's types.
 */
import { createHash } from 'node:crypto'
import { migrations } from '../migrations.ts'
import type { End, Limits } from './end.ts'
import { openSqliteEnd } from './sqlite-end.ts'
import { SETTINGS, shapes, type Shape } from './tables.ts'
import { canonical, keyFromCanonical, type Portable } from './values.ts'

/** BATCH_BYTES: a batch ends once it holds this much (conversion_job_pieces' pieces are 1 MiB each). */
export const BATCH_BYTES = 16 * 1048576
export const DEFAULT_BATCH_ROWS = 1000

/** CopyRefused: a copy or a check that will not run, with what to do about it. */
export class CopyRefused extends Error {
  override name = 'CopyRefused'
}

/** TableCheck: one table on both ends: its rows, and the SHA-256 of its canonical rows in key order. */
export interface TableCheck {
  readonly table: string
  readonly sourceRows: number
  readonly targetRows: number
  readonly sourceSha256: string
  readonly targetSha256: string
  readonly same: boolean
}

export interface CopyReport {
  readonly source: string
  readonly target: string
  /** Rows written by this run (a resumed copy's earlier runs not counted). */
  readonly copied: number
  /** Rows an earlier, cut-short run had copied already (0: this run started the copy). */
  readonly resumedAfter: number
  readonly seconds: number
  /** Of which the check, both stores read again. */
  readonly checkSeconds: number
  readonly tables: readonly TableCheck[]
  /** Every table the same. */
  readonly same: boolean
  /** The target made whole and open to nodes: every table the same, or told to (--force, whose target held rows of its own). */
  readonly finished: boolean
}

/** Progress: told after each batch committed. */
export interface Progress {
  readonly table: string
  readonly rows: number
  readonly total: number
}

export interface CopyOptions {
  readonly batchRows: number
  /** A batch ends once it holds this many bytes (default BATCH_BYTES). */
  readonly batchBytes?: number
  /** Into a store that holds data (rows with the same key are replaced, others stay), or over another copy's unfinished one. */
  readonly force: boolean
  readonly onProgress?: (progress: Progress) => void
}

const LATEST = migrations.at(-1)!.version

/** seconds since `start` (performance.now()), to the ms. */
const seconds = (start: number) => Math.round(performance.now() - start) / 1000

/** checkSource refuses a source that is not a whole store of this version. */
async function checkSource(source: End): Promise<void> {
  const version = await source.version()
  if (version === null) throw new CopyRefused(`${source.description} holds no Tessera store (it has no schema_migrations table)`)
  if (version < LATEST) {
    throw new CopyRefused(
      `the source store is at schema version ${version} and this version of Tessera at ${LATEST}: ` +
        'apply the migrations to it first (npm run admin -- migrate, with the settings of the node it belongs to), then copy',
    )
  }
  if (version > LATEST)
    throw new CopyRefused(
      `the source store is at schema version ${version}, newer than this version of Tessera (${LATEST}): copy with the version that wrote it`,
    )
  if (await source.marker()) throw new CopyRefused(`the source store is itself the target of a store copy that has not finished: finish that copy first`)
}

/** shapesOf: the tables' shapes on these two ends (one of them PostgreSQL, whose types say each column's kind). */
async function shapesOf(a: End, b: End): Promise<Shape[]> {
  const [la, lb] = [await a.layout(), await b.layout()]
  const typed = a.kind === 'postgres' ? la : b.kind === 'postgres' ? lb : null
  if (typed === null) throw new CopyRefused('a store copy or check needs a PostgreSQL store on one side')
  try {
    return shapes(la, lb, typed)
  } catch (error) {
    throw new CopyRefused((error as Error).message)
  }
}

const keyOf = (shape: Shape, row: readonly Portable[]): string =>
  JSON.stringify(shape.key.map((k, i) => canonical(shape.keyKinds[i]!, row[shape.columns.findIndex((c) => c.name === k)]!)))

const keyFrom = (shape: Shape, after: string): Portable[] => (JSON.parse(after) as string[]).map((v, i) => keyFromCanonical(shape.keyKinds[i]!, v))

/** lines: every row of a table as its canonical line, in key order (inside a snapshot). */
async function* lines(end: End, shape: Shape): AsyncGenerator<string> {
  for await (const batch of end.batches(shape, null, { rows: DEFAULT_BATCH_ROWS, bytes: BATCH_BYTES })) {
    for (const row of batch) yield JSON.stringify(row.map((v, i) => canonical(shape.columns[i]!.kind, v)))
  }
}

/** digest: a table's rows and the SHA-256 of its canonical lines. */
async function digest(end: End, shape: Shape): Promise<{ rows: number; sha256: string }> {
  const hash = createHash('sha256')
  let rows = 0
  for await (const line of lines(end, shape)) {
    hash.update(`${line}\n`)
    rows++
  }
  return { rows, sha256: hash.digest('hex') }
}

/** compare checks every table on both ends, each end in one snapshot, one table after another (one connection each). */
async function compare(source: End, target: End, tables: readonly Shape[]): Promise<TableCheck[]> {
  const digests = (end: End) =>
    end.snapshot(async () => {
      const out: { rows: number; sha256: string }[] = []
      for (const shape of tables) out.push(await digest(end, shape))
      return out
    })
  const a = await digests(source)
  const b = await digests(target)
  return tables.map((s, i) => ({
    table: s.table,
    sourceRows: a[i]!.rows,
    targetRows: b[i]!.rows,
    sourceSha256: a[i]!.sha256,
    targetSha256: b[i]!.sha256,
    same: a[i]!.rows === b[i]!.rows && a[i]!.sha256 === b[i]!.sha256,
  }))
}

/**
 * holdingData: the tables of `target` that hold a row a freshly migrated store would not (the event types and settings
 * migrations insert are not data), read in one snapshot.
 */
async function holdingData(target: End, tables: readonly Shape[]): Promise<string[]> {
  const fresh = openSqliteEnd(':memory:', { write: true })
  try {
    const seeded = new Map<string, Set<string>>()
    await fresh.snapshot(async () => {
      for (const shape of tables) {
        const set = new Set<string>()
        for await (const line of lines(fresh, shape)) set.add(line)
        if (set.size > 0) seeded.set(shape.table, set)
      }
    })
    return await target.snapshot(async () => {
      const holding: string[] = []
      for (const shape of tables) {
        if (SETTINGS.includes(shape.table)) continue
        const known = seeded.get(shape.table)
        if (known === undefined) {
          if (await target.holdsRows(shape.table)) holding.push(shape.table)
          continue
        }
        for await (const line of lines(target, shape)) {
          if (!known.has(line)) {
            holding.push(shape.table)
            break
          }
        }
      }
      return holding
    })
  } finally {
    await fresh.close()
  }
}

/** copyStore copies `source` into `target` and checks the copy; it throws CopyRefused for a copy it will not make. */
export async function copyStore(source: End, target: End, options: CopyOptions): Promise<CopyReport> {
  const started = performance.now()
  await checkSource(source)
  await target.lock()
  const version = await target.version()
  if (version !== null && version > LATEST) {
    throw new CopyRefused(
      `the target store is at schema version ${version}, newer than this version of Tessera (${LATEST}): copy with the version that wrote it`,
    )
  }
  await target.migrate()
  const tables = await shapesOf(source, target)
  const marker = await target.marker()
  const restart = marker !== null && marker.source !== source.description
  if (marker === null && !options.force) {
    const holding = await holdingData(target, tables)
    if (holding.length > 0) {
      throw new CopyRefused(
        `the target store already holds data (in ${holding.slice(0, 5).join(', ')}${holding.length > 5 ? ', …' : ''}): copy into an empty store, ` +
          'or give --force to copy into this one anyway (rows with the same key are replaced, the others stay, and the check then shows the tables that differ)',
      )
    }
  }
  if (restart && !options.force) {
    throw new CopyRefused(
      `the target store holds an unfinished copy of another store (${marker.source ?? 'unknown'}): finish that copy, or give --force to copy this one over it`,
    )
  }
  await target.mark(source.description, restart)
  const done = restart || marker === null ? new Map<string, { after: string; rows: number }>() : marker.tables
  const limits: Limits = { rows: options.batchRows, bytes: options.batchBytes ?? BATCH_BYTES }
  let copied = 0
  await source.snapshot(async () => {
    for (const shape of tables) {
      const from = done.get(shape.table)
      const total = await source.count(shape.table)
      let rows = from?.rows ?? 0
      for await (const batch of source.batches(shape, from === undefined ? null : keyFrom(shape, from.after), limits)) {
        await target.write(shape, batch, keyOf(shape, batch.at(-1)!))
        rows += batch.length
        copied += batch.length
        options.onProgress?.({ table: shape.table, rows, total })
      }
    }
  })
  // Checked against the source as it is now, not the snapshot copied: a node that wrote to it meanwhile shows as a difference.
  const checking = performance.now()
  const checked = await compare(source, target, tables)
  const checkSeconds = seconds(checking)
  const same = checked.every((t) => t.same)
  // Forced into a store that held data, its own rows stay beside the copied ones and the check shows them: finished all the same.
  const finished = same || options.force
  if (finished) await target.finish()
  return {
    source: source.description,
    target: target.description,
    copied,
    resumedAfter: [...done.values()].reduce((n, t) => n + t.rows, 0),
    seconds: seconds(started),
    checkSeconds,
    tables: checked,
    same,
    finished,
  }
}

/** verifyStores checks every table of two stores of the same schema (one of them PostgreSQL). */
export async function verifyStores(source: End, target: End): Promise<{ tables: readonly TableCheck[]; same: boolean }> {
  const tables = await compare(source, target, await shapesOf(source, target))
  return { tables, same: tables.every((t) => t.same) }
}
