/**
 * The PostgreSQL jobs' sealed secrets as a key rotation sees them (`encryption status` and
 * `rotate`): counted per key version, listed by job, and re-sealed compare-and-set, so a job
 * that ended meanwhile (its secrets cleared) is left as it is. Kept apart from jobs.ts: the
 * runner never calls these.
 */
import type { JobStore } from '../ports.ts'
import { SEALED_VERSION_POSTGRES } from './seal-sql.ts'
import type { Query } from './part.ts'

export function jobSealOps(query: Query): Pick<JobStore, 'sealedSecrets' | 'resealSecret' | 'sealVersions'> {
  return {
    async sealedSecrets(afterId, limit) {
      const { rows } = await query(
        'job-sealed',
        'SELECT id, account_id, sealed FROM conversion_jobs WHERE sealed IS NOT NULL AND id COLLATE "C" > $1 ORDER BY id COLLATE "C" LIMIT $2',
        [afterId, limit],
      )
      return rows.map((r) => ({ row: { id: String(r.id), accountId: String(r.account_id) }, sealed: String(r.sealed) }))
    },
    async resealSecret(id, from, to) {
      const r = await query('job-reseal', 'UPDATE conversion_jobs SET sealed = $3 WHERE id = $1 AND sealed = $2', [id, from, to])
      return (r.rowCount ?? 0) > 0
    },
    async sealVersions() {
      const { rows } = await query(
        'job-seal-versions',
        `SELECT ${SEALED_VERSION_POSTGRES('sealed')} AS v, count(*) AS n FROM conversion_jobs WHERE sealed IS NOT NULL GROUP BY v`,
      )
      return new Map(rows.map((r) => [Number(r.v), Number(r.n)]))
    },
  }
}
