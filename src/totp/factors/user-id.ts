/**
 * resolveUserId: which stored user an ID given at any door names. The rule is the domain's
 * (canonicalUserId); new users are stored under their NFC form. Users stored before IDs were
 * normalised keep working under the exact form they were created with: when the NFC form
 * names no user and the given form differs from it, a user stored under the given form is
 * that user. The fallback costs a read only for an ID that is not already canonical (never
 * for ASCII), and a row is never renamed: its sealed secrets are bound to its ID.
 */
import { canonicalUserId } from '../../domain/user-ids.ts'
import type { FactorStore } from '../../storage/ports.ts'

export async function resolveUserId(factors: Pick<FactorStore, 'factors'>, accountId: string, raw: unknown, nowIso: string): Promise<string | null> {
  const id = canonicalUserId(raw)
  if (id === raw) return id
  if (!couldBeStored(raw)) return id
  const exists = async (userId: string) => (await factors.factors(accountId, userId, nowIso)) !== null
  if (id !== null && await exists(id)) return id
  // A user created before the rule, under this exact form (not NFC, or an ID the rule now refuses).
  if (await exists(raw)) return raw
  return id
}

/** couldBeStored: the IDs the earlier rule took (no ':' or C0 control, not blank, at most 256 characters): no other is looked up. */
function couldBeStored(raw: unknown): raw is string {
  return typeof raw === 'string' && raw.isWellFormed() && raw.trim() !== '' && [...raw].length <= 256 && !/[:\u0000-\u001f\u007f]/.test(raw)
}
