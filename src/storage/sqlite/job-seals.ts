/**
 * The SQLite jobs' sealed secrets as a key rotation sees them (`encryption status` and
 * `rotate`): counted per key version, listed by job, and re-sealed compare-and-set, so a job
 * that ended meanwhile (its secrets cleared) is left as it is. Kept apart from jobs.ts: the
 * runner never calls these.
 */
import type { DatabaseSync } from 'node:sqlite'
import type { JobStore } from '../ports.ts'
import type { GroupCommit } from './batch.ts'
import { SEALED_VERSION_SQLITE } from './seal-sql.ts'

export function jobSealOps(db: DatabaseSync, batch: GroupCommit): Pick<JobStore, 'sealedSecrets' | 'resealSecret' | 'sealVersions'> {
  const q = {
    sealed: db.prepare('SELECT id, account_id, sealed FROM conversion_jobs WHERE sealed IS NOT NULL AND id > ? ORDER BY id LIMIT ?'),
    reseal: db.prepare('UPDATE conversion_jobs SET sealed = ? WHERE id = ? AND sealed = ?'),
    versions: db.prepare(`SELECT ${SEALED_VERSION_SQLITE('sealed')} AS v, count(*) AS n FROM conversion_jobs WHERE sealed IS NOT NULL GROUP BY v`),
  }
  return {
    async sealedSecrets(afterId, limit) {
      return q.sealed.all(afterId, limit).map((r) => ({ row: { id: String(r.id), accountId: String(r.account_id) }, sealed: String(r.sealed) }))
    },
    async resealSecret(id, from, to) {
      const r = await batch.run(() => q.reseal.run(to, id, from))
      return Number(r.changes) > 0
    },
    async sealVersions() {
      return new Map(q.versions.all().map((r) => [Number(r.v), Number(r.n)]))
    },
  }
}
