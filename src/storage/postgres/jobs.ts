/**
 * The PostgreSQL job store: conversion jobs, their documents and results in pieces (bytea,
 * stored uncompressed: PNG, zip and PDF are compressed already).
 *
 * Claims serialize on a transaction-scoped advisory lock: one claim at a time across every
 * node, each a short transaction (a claim starts a job, seconds of work), so the count of an
 * account's running jobs that the fair choice reads is exact when it writes; the row itself
 * is then taken FOR UPDATE SKIP LOCKED and re-checked, as a cancellation may hold it. Writes
 * under a lease check the lease in the same statement. Submissions lock the account's row
 * for the count of its active jobs, after the document's pieces are written, so the lock is
 * held for the count and the insert only; the Idempotency-Key's unique index makes parallel
 * duplicates one job.
 */
import { randomBytes } from 'node:crypto'
import type { JobStore } from '../ports.ts'
import { submittedMs, type ConversionJob } from '../../domain/jobs.ts'
import { JOB_INSERT_COLUMNS, jobInsertValues, readJobCursor, toJob, traceParentOf } from '../job-rows.ts'
import { auditInsert, type Part } from './part.ts'
import { jobSealOps } from './job-seals.ts'

/** The advisory lock key of claims ('tessera jobs'). */
const CLAIM_LOCK = 7_4657_3736

const CLAIMABLE = "(status = 'queued' OR (status = 'running' AND lease_until_ms <= $1 AND attempts < $2))"

/**
 * An account's kept bytes: its kept results, what its running jobs have written, and the documents its queued and running
 * jobs hold (a submission's own pieces, written before its job, are not among them: its check adds them).
 */
const KEPT = `SELECT coalesce(sum(CASE WHEN status <> 'running' AND NOT result_gone THEN coalesce(result_bytes, 0) ELSE 0 END), 0)
    + coalesce(sum(CASE WHEN status = 'running' THEN written_bytes ELSE 0 END), 0)
    + coalesce((SELECT sum(octet_length(p.data)) FROM conversion_job_pieces p JOIN conversion_jobs d ON d.id = p.job_id
        WHERE d.account_id = $1 AND d.status IN ('queued', 'running') AND p.kind = 'document'), 0) AS n
  FROM conversion_jobs WHERE account_id = $1`

export function jobStore(p: Part): JobStore {
  return { ...submitOps(p), ...claimOps(p), ...endOps(p), ...upkeepOps(p), ...jobSealOps(p.query) }
}

/** submitOps: a job submitted (an Idempotency-Key's earlier job, the account's limit, in one transaction), read and listed. */
function submitOps({ query, transaction }: Part): Pick<JobStore, 'submit' | 'get' | 'list'> {
  return {
    submit(job, document, idempotency, maxActive, maxBytes = Number.POSITIVE_INFINITY) {
      return transaction(async (tx) => {
        for (const [seq, bytes] of document.entries()) {
          await tx('job-piece', "INSERT INTO conversion_job_pieces (job_id, kind, seq, data) VALUES ($1, 'document', $2, $3)", [job.id, seq, bytes])
        }
        const account = await tx('job-lock-account', 'SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE', [job.accountId])
        if (account.rows.length === 0) throw new Error(`no account ${job.accountId}`)
        if (idempotency !== null) {
          await tx('job-forget-key', 'UPDATE conversion_jobs SET idempotency_key = NULL WHERE account_id = $1 AND idempotency_key = $2 AND created_at < $3', [
            job.accountId,
            idempotency.key,
            idempotency.sinceIso,
          ])
          const earlier = await tx('job-by-key', 'SELECT * FROM conversion_jobs WHERE account_id = $1 AND idempotency_key = $2', [
            job.accountId,
            idempotency.key,
          ])
          const row = earlier.rows[0]
          if (row !== undefined) {
            await tx('job-drop-pieces', 'DELETE FROM conversion_job_pieces WHERE job_id = $1', [job.id])
            return row.fingerprint === idempotency.fingerprint ? { replayed: toJob(row) } : { mismatch: toJob(row) }
          }
        }
        const active = await tx('job-active', "SELECT count(*) AS n FROM conversion_jobs WHERE account_id = $1 AND status IN ('queued', 'running')", [
          job.accountId,
        ])
        if (Number(active.rows[0]?.n) >= maxActive) {
          await tx('job-drop-pieces', 'DELETE FROM conversion_job_pieces WHERE job_id = $1', [job.id])
          return { limit: maxActive }
        }
        // The account's row is locked: no other submission of its counts the kept bytes meanwhile (this one's pieces are in them).
        const size = document.reduce((n, piece) => n + piece.byteLength, 0)
        if (size > 0 && Number((await tx('job-kept', KEPT, [job.accountId])).rows[0]?.n) + size > maxBytes) {
          await tx('job-drop-pieces', 'DELETE FROM conversion_job_pieces WHERE job_id = $1', [job.id])
          return { full: maxBytes }
        }
        const { rows } = await tx(
          'job-insert',
          `INSERT INTO conversion_jobs (${JOB_INSERT_COLUMNS}) VALUES ($1, $2, $3, 'queued', $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) RETURNING *`,
          jobInsertValues(job, idempotency, (flag) => flag),
        )
        return { created: toJob(rows[0]!) }
      })
    },
    async get(accountId, jobId) {
      const { rows } = await query('job-get', 'SELECT * FROM conversion_jobs WHERE account_id = $1 AND id = $2', [accountId, jobId])
      return rows[0] ? toJob(rows[0]) : null
    },
    async list(accountId, { status, cursor, limit }) {
      const before = cursor === undefined ? null : readJobCursor(cursor)
      const values: unknown[] = [accountId, limit + 1]
      const where = ['account_id = $1']
      if (status !== undefined) where.push(`status = $${values.push(status)}`)
      if (before !== null) where.push(`id COLLATE "C" < $${values.push(before)}`)
      const { rows } = await query(null, `SELECT * FROM conversion_jobs WHERE ${where.join(' AND ')} ORDER BY id COLLATE "C" DESC LIMIT $2`, values)
      const items = rows.slice(0, limit).map(toJob)
      return { items, next: rows.length > limit && items.length > 0 ? items.at(-1)!.id : null }
    },
  }
}

/** claimOps: the runner's side of a claim: taken fairly, renewed, its document read and its result written under the lease. */
function claimOps({ query, transaction }: Part): Pick<JobStore, 'claim' | 'renew' | 'documentPieces' | 'writePiece' | 'resultPiece' | 'release'> {
  return {
    claim(node, nowMs, leaseMs, maxRunning, maxAttempts) {
      const lease = randomBytes(12).toString('base64url')
      return transaction(async (tx) => {
        await tx('job-claim-lock', 'SELECT pg_advisory_xact_lock($1)', [CLAIM_LOCK])
        const next = await tx(
          'job-next',
          `WITH running AS (SELECT account_id, count(*) AS n FROM conversion_jobs
              WHERE status = 'running' AND lease_until_ms > $1 GROUP BY account_id),
            firsts AS (SELECT account_id, min(id COLLATE "C") AS id FROM conversion_jobs WHERE ${CLAIMABLE} GROUP BY account_id)
          SELECT f.id FROM firsts f LEFT JOIN running r ON r.account_id = f.account_id
            LEFT JOIN conversion_job_turns t ON t.account_id = f.account_id
          WHERE coalesce(r.n, 0) < $3 ORDER BY coalesce(r.n, 0), coalesce(t.claimed_ms, 0), f.id COLLATE "C" LIMIT 1`,
          [nowMs, maxAttempts, maxRunning],
        )
        const id = next.rows[0]?.id
        if (id === undefined) return null
        const locked = await tx('job-claim-row', `SELECT status FROM conversion_jobs WHERE id = $3 AND ${CLAIMABLE} FOR UPDATE SKIP LOCKED`, [
          nowMs,
          maxAttempts,
          id,
        ])
        const before = locked.rows[0]
        if (before === undefined) return null
        const { rows } = await tx(
          'job-take',
          `UPDATE conversion_jobs SET status = 'running', lease = $2, lease_until_ms = $3, node = $4, attempts = attempts + 1,
            started_at = coalesce(started_at, $5), pages_done = 0, written_bytes = 0
          WHERE id = $1 RETURNING *`,
          [id, lease, nowMs + leaseMs, node, new Date(nowMs).toISOString()],
        )
        await tx('job-drop-result', "DELETE FROM conversion_job_pieces WHERE job_id = $1 AND kind = 'result'", [id])
        const row = rows[0]!
        await tx(
          'job-turn',
          `INSERT INTO conversion_job_turns (account_id, claimed_ms) VALUES ($1, $2)
          ON CONFLICT (account_id) DO UPDATE SET claimed_ms = greatest(conversion_job_turns.claimed_ms + 1, excluded.claimed_ms)`,
          [row.account_id, nowMs],
        )
        return {
          job: toJob(row),
          sealed: row.sealed === null ? null : String(row.sealed),
          lease,
          reclaimed: before.status === 'running',
          traceParent: traceParentOf(row),
        }
      })
    },
    async renew(jobId, lease, nowMs, leaseMs, pagesDone, pagesTotal) {
      const r = await query(
        'job-renew',
        "UPDATE conversion_jobs SET lease_until_ms = $1, pages_done = $2, pages_total = $3 WHERE id = $4 AND lease = $5 AND status = 'running'",
        [nowMs + leaseMs, pagesDone, pagesTotal, jobId, lease],
      )
      return (r.rowCount ?? 0) > 0
    },
    async documentPieces(jobId) {
      const { rows } = await query('job-document', "SELECT data FROM conversion_job_pieces WHERE job_id = $1 AND kind = 'document' ORDER BY seq", [jobId])
      return rows.map((r) => r.data as Uint8Array)
    },
    async writePiece(jobId, lease, seq, bytes) {
      const { rows } = await query(
        'job-write-piece',
        `WITH j AS (UPDATE conversion_jobs SET written_bytes = written_bytes + $5 WHERE id = $1 AND lease = $2 AND status = 'running' RETURNING id)
        INSERT INTO conversion_job_pieces (job_id, kind, seq, data) SELECT id, 'result', $3, $4 FROM j RETURNING seq`,
        [jobId, lease, seq, bytes, bytes.byteLength],
      )
      return rows.length > 0
    },
    async resultPiece(jobId, seq) {
      const { rows } = await query(
        'job-result-piece',
        `SELECT p.data FROM conversion_job_pieces p JOIN conversion_jobs j ON j.id = p.job_id
        WHERE p.job_id = $1 AND p.kind = 'result' AND p.seq = $2 AND NOT j.result_gone`,
        [jobId, seq],
      )
      return rows[0] === undefined ? null : (rows[0].data as Uint8Array)
    },
    async release(jobId, lease, attempted) {
      const { rows } = await query(
        'job-release',
        `WITH j AS (UPDATE conversion_jobs SET status = 'queued', lease = NULL, lease_until_ms = NULL, node = NULL, pages_done = 0, written_bytes = 0,
            attempts = attempts - $3
          WHERE id = $1 AND lease = $2 AND status = 'running' RETURNING id),
        d AS (DELETE FROM conversion_job_pieces p USING j WHERE p.job_id = j.id AND p.kind = 'result')
        SELECT count(*) AS n FROM j`,
        [jobId, lease, attempted ? 0 : 1],
      )
      return Number(rows[0]?.n) > 0
    },
  }
}

/** endOps: a job's end with its event (one statement), a cancellation, and the poison jobs failed. */
function endOps({ query, audited }: Part): Pick<JobStore, 'finish' | 'cancel' | 'failSpent'> {
  return {
    async finish(jobId, lease, end, nowIso, audit) {
      const set =
        end.status === 'succeeded'
          ? `status = 'succeeded', result_type = $4, result_bytes = $5, result_name = $6, result_pages = $7, pages_done = $7, pages_total = $7, expires_at = $8::timestamptz`
          : `status = 'failed', error_code = $4, error_params = $5::jsonb, result_type = $6, result_bytes = $7, result_name = $8, result_pages = $9,
            expires_at = $10::timestamptz`
      const r = end.result
      const values =
        end.status === 'succeeded'
          ? [r!.type, r!.bytes, r!.name, r!.pages, end.expiresAt]
          : [end.error.code, JSON.stringify(end.error.params), r?.type ?? null, r?.bytes ?? null, r?.name ?? null, r?.pages ?? null, end.expiresAt ?? null]
      const first = 4 + values.length
      const { rows } = await query(
        null,
        `WITH j AS (UPDATE conversion_jobs SET ${set}, finished_at = $3::timestamptz, lease = NULL, lease_until_ms = NULL, sealed = NULL
            WHERE id = $1 AND lease = $2 AND status = 'running' RETURNING id, result_type),
          d AS (DELETE FROM conversion_job_pieces p USING j WHERE p.job_id = j.id AND (p.kind = 'document' OR j.result_type IS NULL)),
          e AS (${auditInsert(first, 'j')})
        SELECT count(*) AS n FROM j`,
        [jobId, lease, nowIso, ...values, ...audited(audit)],
      )
      return Number(rows[0]?.n) > 0
    },
    async cancel(accountId, jobId, nowIso, audit) {
      const { rows } = await query(
        'job-cancel',
        `WITH c AS (UPDATE conversion_jobs SET status = 'cancelled', finished_at = $3, lease = NULL, lease_until_ms = NULL, sealed = NULL
            WHERE account_id = $1 AND id = $2 AND status IN ('queued', 'running') RETURNING *),
          r AS (UPDATE conversion_jobs SET result_gone = true
            WHERE account_id = $1 AND id = $2 AND result_type IS NOT NULL AND NOT result_gone AND NOT EXISTS (SELECT 1 FROM c) RETURNING *),
          j AS (SELECT * FROM c UNION ALL SELECT * FROM r),
          d AS (DELETE FROM conversion_job_pieces p USING j WHERE p.job_id = j.id AND (p.kind = 'result' OR j.status = 'cancelled')),
          e AS (${auditInsert(4, 'c')}),
          f AS (${auditInsert(14, 'r')})
        SELECT * FROM j`,
        [accountId, jobId, nowIso, ...audited(audit('job.cancel')), ...audited(audit('job.result_delete'))],
      )
      return rows[0] === undefined ? null : toJob(rows[0])
    },
    async failSpent(nowMs, maxAttempts, nowIso, error, eventOf) {
      const { rows } = await query(
        'job-spent',
        'SELECT * FROM conversion_jobs WHERE status = \'running\' AND lease_until_ms <= $1 AND attempts >= $2 ORDER BY id COLLATE "C" LIMIT 100',
        [nowMs, maxAttempts],
      )
      const failed: ConversionJob[] = []
      for (const candidate of rows) {
        const event = eventOf(toJob(candidate))
        const done = await query(
          'job-fail-spent',
          `WITH j AS (UPDATE conversion_jobs SET status = 'failed', error_code = $4, error_params = $5::jsonb, finished_at = $6::timestamptz,
              lease = NULL, lease_until_ms = NULL, sealed = NULL
            WHERE id = $1 AND status = 'running' AND lease_until_ms <= $2 AND attempts >= $3 RETURNING *),
            d AS (DELETE FROM conversion_job_pieces p USING j WHERE p.job_id = j.id),
            e AS (${auditInsert(7, 'j')})
          SELECT * FROM j`,
          [String(candidate.id), nowMs, maxAttempts, error.code, JSON.stringify(error.params), nowIso, ...audited(event)],
        )
        if (done.rows[0] !== undefined) failed.push(toJob(done.rows[0]))
      }
      return failed
    },
  }
}

/** upkeepOps: the account's kept bytes, the pruning of expired results and old jobs, and the gauges. */
function upkeepOps({ query }: Part): Pick<JobStore, 'keptBytes' | 'prune' | 'gauges'> {
  return {
    async keptBytes(accountId) {
      const { rows } = await query('job-kept', KEPT, [accountId])
      return Number(rows[0]?.n)
    },
    async prune(nowIso, beforeIso) {
      const counts = { results: 0, jobs: 0 }
      const steps = {
        results: `WITH j AS (UPDATE conversion_jobs SET result_gone = true WHERE id IN (SELECT id FROM conversion_jobs
            WHERE result_type IS NOT NULL AND NOT result_gone AND expires_at <= $1 LIMIT 100) RETURNING id),
          d AS (DELETE FROM conversion_job_pieces p USING j WHERE p.job_id = j.id AND p.kind = 'result')
          SELECT count(*) AS n FROM j`,
        jobs: `WITH j AS (DELETE FROM conversion_jobs WHERE id IN (SELECT id FROM conversion_jobs WHERE finished_at < $1 LIMIT 100) RETURNING id),
          d AS (DELETE FROM conversion_job_pieces p USING j WHERE p.job_id = j.id)
          SELECT count(*) AS n FROM j`,
      }
      for (const what of ['results', 'jobs'] as const) {
        for (;;) {
          const { rows } = await query(`job-prune-${what}`, steps[what], [what === 'results' ? nowIso : beforeIso])
          const n = Number(rows[0]?.n)
          counts[what] += n
          if (n < 100) break
        }
      }
      return counts
    },
    async gauges() {
      const byStatus = { queued: 0, running: 0, succeeded: 0, failed: 0, cancelled: 0 }
      const [statuses, oldest, bytes] = await Promise.all([
        query('job-gauge-status', 'SELECT status, count(*) AS n FROM conversion_jobs GROUP BY status'),
        query('job-gauge-oldest', 'SELECT min(id COLLATE "C") AS id FROM conversion_jobs WHERE status = \'queued\''),
        query('job-gauge-bytes', 'SELECT coalesce(sum(result_bytes), 0) AS n FROM conversion_jobs WHERE result_type IS NOT NULL AND NOT result_gone'),
      ])
      for (const r of statuses.rows) byStatus[r.status as keyof typeof byStatus] = Number(r.n)
      const id = oldest.rows[0]?.id
      return { byStatus, oldestQueuedMs: id === null || id === undefined ? null : submittedMs(String(id)), resultBytes: Number(bytes.rows[0]?.n) }
    },
  }
}
