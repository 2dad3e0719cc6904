/**
 * Moving a node's store between SQLite and PostgreSQL, for the CLI's `store copy` and `store verify`:
 * the embedded store of DATA_DIR copied into a PostgreSQL database (a node outgrowing one machine)
 * or a PostgreSQL store copied into the SQLite store of an empty DATA_DIR (leaving the cluster).
 * The copy itself, its resumption, the triggers and the check are storage/copy/. Nothing here
 * opens the node's store as a node does: the copy reads and writes the two stores on its own.
 */
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import type { Config } from '../config/config.ts'
import { SQLITE_FILE } from '../storage/factory.ts'
import { copyStore as copyBetween, CopyRefused, verifyStores, type CopyReport, type Progress, type TableCheck } from '../storage/copy/copy.ts'
import type { End } from '../storage/copy/end.ts'
import { openPostgresEnd } from '../storage/copy/postgres-end.ts'
import { openSqliteEnd } from '../storage/copy/sqlite-end.ts'
import { fail, type Failure } from './outcome.ts'

export type { CopyReport, Progress, TableCheck }
export { BATCH_BYTES, DEFAULT_BATCH_ROWS } from '../storage/copy/copy.ts'

export interface CopyRequest {
  /** Into this PostgreSQL database, from the SQLite store of DATA_DIR. */
  readonly to?: string
  /** From this PostgreSQL database, into the SQLite store of DATA_DIR. */
  readonly from?: string
  readonly force: boolean
  readonly batchRows: number
  readonly onProgress?: (progress: Progress) => void
}

const POSTGRES_URL = /^postgres(ql)?:\/\//

/** onSqlite: a Failure unless this node's store is the SQLite one, which a copy reads or writes. */
function onSqlite(config: Config, what: string): Failure | null {
  if (config.databaseUrl === '') return null
  return fail(
    'invalid',
    `this node's store is PostgreSQL (DATABASE_URL); ${what} the SQLite store of DATA_DIR: run it with the settings of the node on SQLite, without DATABASE_URL`,
  )
}

const badUrl = (flag: string, url: string): Failure | null =>
  POSTGRES_URL.test(url) ? null : fail('invalid', `--${flag} must be a PostgreSQL URL (postgres://user:password@host:5432/database)`, flag)

/** withEnds opens the two ends, runs `work`, closes them; a refusal is a Failure, as is a SQLite store that is not there. */
async function withEnds<T>(open: () => Promise<[End, End]>, work: (source: End, target: End) => Promise<T>): Promise<T | Failure> {
  let ends: [End, End] | null = null
  try {
    ends = await open()
    return await work(...ends)
  } catch (error) {
    if (error instanceof CopyRefused) return fail('conflict', error.message)
    throw error
  } finally {
    for (const end of ends ?? []) await end.close()
  }
}

/** withSqlite: the SQLite end, then the PostgreSQL one at `url` (the first closed if the second cannot be had). */
async function withSqlite(sqlite: End, url: string): Promise<[End, End]> {
  try {
    return [sqlite, await openPostgresEnd(url)]
  } catch (error) {
    await sqlite.close()
    throw error
  }
}

/** copyStore: `store copy --to URL` or `--from URL`; the report (whose `same` says whether the check passed), or a Failure. */
export async function copyStore(config: Config, request: CopyRequest): Promise<CopyReport | Failure> {
  const refused = onSqlite(config, 'store copy copies')
  if (refused !== null) return refused
  const file = join(config.dataDir, SQLITE_FILE)
  const options = { batchRows: request.batchRows, force: request.force, ...(request.onProgress === undefined ? {} : { onProgress: request.onProgress }) }
  if (request.to !== undefined) {
    const invalid = badUrl('to', request.to)
    if (invalid !== null) return invalid
    if (!existsSync(file)) return fail('not_found', `there is no SQLite store at ${file} (check DATA_DIR)`)
    const to = request.to
    return withEnds(
      async () => withSqlite(openSqliteEnd(file, { write: false }), to),
      (source, target) => copyBetween(source, target, options),
    )
  }
  if (request.from === undefined) return fail('invalid', 'give --to postgres://… (SQLite into PostgreSQL) or --from postgres://… (back)')
  const invalid = badUrl('from', request.from)
  if (invalid !== null) return invalid
  const from = request.from
  return withEnds(
    async () => {
      const postgres = await openPostgresEnd(from)
      try {
        return [postgres, openSqliteEnd(file, { write: true })]
      } catch (error) {
        await postgres.close()
        throw error
      }
    },
    (source, target) => copyBetween(source, target, options),
  )
}

/** verifyStore: `store verify --against URL`: the SQLite store of DATA_DIR and a PostgreSQL store, table by table. */
export async function verifyStore(
  config: Config,
  against: string,
): Promise<{ source: string; target: string; tables: readonly TableCheck[]; same: boolean } | Failure> {
  const refused = onSqlite(config, 'store verify checks')
  if (refused !== null) return refused
  const invalid = badUrl('against', against)
  if (invalid !== null) return invalid
  const file = join(config.dataDir, SQLITE_FILE)
  if (!existsSync(file)) return fail('not_found', `there is no SQLite store at ${file} (check DATA_DIR)`)
  return withEnds(
    async () => withSqlite(openSqliteEnd(file, { write: false }), against),
    async (source, target) => ({ source: source.description, target: target.description, ...(await verifyStores(source, target)) }),
  )
}
