/**
 * backupSqlite copies the SQLite store while a node serves it: `VACUUM INTO` on a read-only
 * connection of its own, which reads one snapshot (a single read transaction: in WAL mode the
 * node's writes go on beside it and none of them is half in the copy) and writes it as a
 * compact database file. Chosen over the online backup API (sqlite3_backup_step), which
 * starts again whenever another connection writes the source between its steps, as the node's
 * does many times a second, and so may never finish under load unless it copies in one step,
 * which is what VACUUM INTO does without the restarts.
 *
 * The copy is written under a temporary name beside the target, checked (`PRAGMA
 * integrity_check`), flushed to the disk (fsync of the file, then of its folder after the
 * rename), and only then put under the target's name: renamed over it when told to replace it,
 * else linked there (which fails if a file took that name meanwhile: nothing is replaced
 * unasked). A crash or a failed check leaves the target as it was, and no half-written file
 * under its name.
 */
import { randomBytes } from 'node:crypto'
import { existsSync, realpathSync } from 'node:fs'
import { chmod, link, open, rename, rm, stat } from 'node:fs/promises'
import { basename, dirname, join, resolve } from 'node:path'
import { DatabaseSync } from 'node:sqlite'

/** What a backup made: the file, its size, its integrity check's answer and the schema version it holds. */
export interface SqliteBackup {
  readonly file: string
  readonly bytes: number
  /** `ok`, or what integrity_check found (the backup is not kept then). */
  readonly integrity: string
  readonly schemaVersion: number
}

/** BackupError: a backup refused or failed, with a message for the operator. */
export class BackupError extends Error {
  override name = 'BackupError'
}

/** How long the copy's read waits for a lock (a checkpoint that restarts the log), in ms. */
const BUSY_TIMEOUT_MS = 10_000

export async function backupSqlite(source: string, target: string, options: { readonly overwrite: boolean }): Promise<SqliteBackup> {
  const file = resolve(target)
  if (!existsSync(source)) throw new BackupError(`there is no SQLite store at ${source} (check DATA_DIR)`)
  if (existsSync(file)) {
    if (realpathSync(file) === realpathSync(source)) throw new BackupError(`${file} is the store itself`)
    if (!options.overwrite) throw new BackupError(`${file} exists: give --force to replace it`)
  }
  if (!existsSync(dirname(file))) throw new BackupError(`the folder ${dirname(file)} does not exist`)
  const temporary = join(dirname(file), `.${basename(file)}.${randomBytes(6).toString('hex')}.partial`)
  try {
    copy(source, temporary)
    const checked = check(temporary)
    if (checked.integrity !== 'ok') throw new BackupError(`the copy failed its integrity check (${checked.integrity}); nothing was written to ${file}`)
    // As private as the store: it holds the same hashes, sealed secrets and documents.
    await chmod(temporary, 0o600)
    await flush(temporary)
    if (options.overwrite) await rename(temporary, file)
    else
      await link(temporary, file).catch((error: NodeJS.ErrnoException) => {
        throw error.code === 'EEXIST' ? new BackupError(`${file} exists: give --force to replace it`) : error
      })
    await flush(dirname(file))
    return { file, bytes: (await stat(file)).size, ...checked }
  } finally {
    await rm(temporary, { force: true })
  }
}

/** copy writes one snapshot of `source` into `into` (a new file), reading through a read-only connection. */
function copy(source: string, into: string): void {
  const db = new DatabaseSync(source, { readOnly: true, timeout: BUSY_TIMEOUT_MS })
  try {
    db.prepare('VACUUM INTO ?').run(into)
  } catch (error) {
    throw new BackupError(`the copy failed: ${(error as Error).message}`)
  } finally {
    db.close()
  }
}

/** check opens the copy on its own and runs SQLite's full integrity check, and reads its schema version. */
function check(file: string): { integrity: string; schemaVersion: number } {
  const db = new DatabaseSync(file, { readOnly: true })
  try {
    const rows = db.prepare('PRAGMA integrity_check').all() as { integrity_check: string }[]
    const integrity = rows.map((r) => r.integrity_check).join('; ')
    const version = db.prepare('SELECT max(version) AS v FROM schema_migrations').get() as { v: number | null } | undefined
    return { integrity, schemaVersion: Number(version?.v ?? 0) }
  } finally {
    db.close()
  }
}

/** flush fsyncs a file or a folder (a folder: so that a rename in it survives a crash). */
async function flush(path: string): Promise<void> {
  const handle = await open(path, 'r')
  try {
    await handle.sync()
  } finally {
    await handle.close()
  }
}
