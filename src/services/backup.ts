/**
 * Backups of the store, for the CLI's `backup`: the embedded SQLite store is copied while the
 * node serves it (storage/sqlite/backup.ts); a PostgreSQL store is PostgreSQL's to back up, with
 * pg_dump, which takes one consistent snapshot while the nodes serve, and whose version must
 * match the server's: the answer says so rather than run whichever pg_dump the host has.
 * Nothing here opens the store: a backup applies no migration and takes no write lock.
 */
import { join } from 'node:path'
import type { Config } from '../config/config.ts'
import { SQLITE_FILE } from '../storage/factory.ts'
import { backupSqlite, BackupError, type SqliteBackup } from '../storage/sqlite/backup.ts'
import { fail, type Failure } from './outcome.ts'

export type { SqliteBackup }

/** backupStore copies the node's SQLite store to `target`; a Failure for a PostgreSQL store, or a backup refused (the target exists, …). */
export async function backupStore(config: Config, target: string, options: { readonly overwrite: boolean }): Promise<SqliteBackup | Failure> {
  if (config.databaseUrl !== '') {
    return fail(
      'invalid',
      'this node keeps its data in PostgreSQL (DATABASE_URL): back it up with pg_dump --format=custom (see "Backups and restore" in docs/operating.md)',
    )
  }
  try {
    return await backupSqlite(join(config.dataDir, SQLITE_FILE), target, options)
  } catch (error) {
    if (error instanceof BackupError) return fail('conflict', error.message)
    throw error
  }
}
