/**
 * The mark of a store that `store copy` is writing: its progress table, made in the target by the
 * copy's first step and dropped by its last, once the copy is verified. While it is there the store
 * is half a store (and on SQLite without its triggers), so no node opens it, nor the CLI.
 */

/** COPY_MARKER: the table that holds a copy's progress in its target (copy.ts says what is in it). */
export const COPY_MARKER = 'store_copy_progress'

/** UnfinishedCopyError: the store is the target of a copy that has not finished. */
export class UnfinishedCopyError extends Error {
  override name = 'UnfinishedCopyError'
}

export const unfinishedCopy = (): UnfinishedCopyError =>
  new UnfinishedCopyError(
    `this store is the target of a store copy that has not finished (it holds the table ${COPY_MARKER}): ` +
      'run the same `npm run admin -- store copy` again to finish it; no node opens a half-copied store',
  )
