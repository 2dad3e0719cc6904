/**
 * rotateSeals re-seals every factor sealed under another key version than the keyring's
 * active one, in batches, while the service runs: each row is opened with its own version
 * and written back only if it is still what was read (compare-and-set), so a factor deleted
 * or re-sealed meanwhile is left as the other change left it. Verifications read either
 * form and open both (every version stays configured until the rotation is done). A row that
 * does not open is counted and left; the run goes on.
 */
import type { FactorStore } from '../../storage/ports.ts'
import { resealValue, type Keyring } from '../../crypto/keyring.ts'
import { sealContext } from './core.ts'

export interface Rotation {
  readonly resealed: number
  /** Changed by someone else between the read and the write (deleted, or re-sealed by another run). */
  readonly skipped: number
  /** Factors that do not open: their version is not configured, or the value was altered or moved. */
  readonly unreadable: readonly { readonly id: string; readonly reason: string }[]
}

export async function rotateSeals(
  store: FactorStore,
  keyring: Keyring,
  options: { batch?: number; onBatch?: (done: number) => void | Promise<void> } = {},
): Promise<Rotation> {
  const batch = options.batch ?? 500
  let after = ''
  let resealed = 0
  let skipped = 0
  const unreadable: { id: string; reason: string }[] = []
  for (;;) {
    const rows = await store.staleSeals(keyring.active, after, batch)
    if (rows.length === 0) break
    for (const row of rows) {
      const next = resealValue(keyring, row.sealed, sealContext(row.accountId, row.userId, row.id))
      if ('unreadable' in next) unreadable.push({ id: row.id, reason: next.unreadable })
      else if (await store.reseal(row.id, row.sealed, next.sealed, keyring.active)) resealed++
      else skipped++
    }
    after = rows.at(-1)!.id
    await options.onBatch?.(resealed)
  }
  return { resealed, skipped, unreadable }
}
