/**
 * Ids of the service's own rows (accounts, keys, tokens, factors, webhooks): made where the
 * row is made, by whichever layer makes it (a service, a storage adapter, a test), so that
 * none of them needs another's module for it. Imports nothing of ours.
 */
import { randomBytes } from 'node:crypto'

/** newId: a prefix and 64 random bits (`acc_5b0c9e2a7d41f386`). */
export const newId = (prefix: string): string => `${prefix}_${randomBytes(8).toString('hex')}`
