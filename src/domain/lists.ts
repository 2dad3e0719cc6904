/**
 * Lists in pages: one page of items and the cursor of the next. Nothing here imports anything of ours.
 */

/** One page of a list, and the cursor of the next page (null on the last). */
export interface Page<T> {
  readonly items: T[]
  readonly next: string | null
}
