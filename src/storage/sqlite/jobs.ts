/**
 * The SQLite job store: conversion jobs, their documents and results in pieces. Every
 * decision (an Idempotency-Key's job, the account's limit, a claim, a lease's holder) is one
 * synchronous step of the group commit's write transaction, so nothing comes between a check
 * and its write, across every process on the file. A job's end inserts its event in the same
 * step: the audit_events trigger writes the webhook outbox from it.
 */
import { randomBytes } from 'node:crypto'
import type { DatabaseSync, SQLInputValue } from 'node:sqlite'
import type { JobStore } from '../ports.ts'
import { submittedMs, type ConversionJob } from '../../domain/jobs.ts'
import { JOB_INSERT_COLUMNS, jobInsertValues, readJobCursor, toJob, traceParentOf } from '../job-rows.ts'
import type { GroupCommit } from './batch.ts'
import { part, type Part } from './part.ts'
import type { Stamps } from '../stamps.ts'
import type { Row } from '../rows.ts'
import { jobSealOps } from './job-seals.ts'

/** The jobs a claim may take: queued, or running with a lease run out and attempts left. */
const CLAIMABLE = "(status = 'queued' OR (status = 'running' AND lease_until_ms <= $now AND attempts < $max))"

function jobStatements(db: DatabaseSync) {
  return {
    get: db.prepare('SELECT * FROM conversion_jobs WHERE account_id = ? AND id = ?'),
    byId: db.prepare('SELECT * FROM conversion_jobs WHERE id = ?'),
    forget: db.prepare('UPDATE conversion_jobs SET idempotency_key = NULL WHERE account_id = ? AND idempotency_key = ? AND created_at < ?'),
    byKey: db.prepare('SELECT * FROM conversion_jobs WHERE account_id = ? AND idempotency_key = ?'),
    active: db.prepare("SELECT count(*) AS n FROM conversion_jobs WHERE account_id = ? AND status IN ('queued', 'running')"),
    insert: db.prepare(`INSERT INTO conversion_jobs (${JOB_INSERT_COLUMNS}) VALUES (?, ?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
    piece: db.prepare('INSERT INTO conversion_job_pieces (job_id, kind, seq, data) VALUES (?, ?, ?, ?)'),
    next: db.prepare(`WITH running AS (SELECT account_id, count(*) AS n FROM conversion_jobs
        WHERE status = 'running' AND lease_until_ms > $now GROUP BY account_id),
      firsts AS (SELECT account_id, min(id) AS id FROM conversion_jobs WHERE ${CLAIMABLE} GROUP BY account_id)
      SELECT f.id, f.account_id FROM firsts f LEFT JOIN running r ON r.account_id = f.account_id
        LEFT JOIN conversion_job_turns t ON t.account_id = f.account_id
      WHERE coalesce(r.n, 0) < $running ORDER BY coalesce(r.n, 0), coalesce(t.claimed_ms, 0), f.id LIMIT 1`),
    turn: db.prepare(`INSERT INTO conversion_job_turns (account_id, claimed_ms) VALUES (?, ?)
      ON CONFLICT (account_id) DO UPDATE SET claimed_ms = max(claimed_ms + 1, excluded.claimed_ms)`),
    take: db.prepare(`UPDATE conversion_jobs SET status = 'running', lease = $lease, lease_until_ms = $until, node = $node,
        attempts = attempts + 1, started_at = coalesce(started_at, $at), pages_done = 0, written_bytes = 0
      WHERE id = $id AND ${CLAIMABLE} RETURNING *`),
    dropPieces: db.prepare('DELETE FROM conversion_job_pieces WHERE job_id = ? AND kind = ?'),
    dropAll: db.prepare('DELETE FROM conversion_job_pieces WHERE job_id = ?'),
    renew: db.prepare(`UPDATE conversion_jobs SET lease_until_ms = ?, pages_done = ?, pages_total = ?
      WHERE id = ? AND lease = ? AND status = 'running'`),
    documentPieces: db.prepare("SELECT data FROM conversion_job_pieces WHERE job_id = ? AND kind = 'document' ORDER BY seq"),
    writePiece: db.prepare(`INSERT INTO conversion_job_pieces (job_id, kind, seq, data)
      SELECT id, 'result', ?, ? FROM conversion_jobs WHERE id = ? AND lease = ? AND status = 'running'`),
    written: db.prepare('UPDATE conversion_jobs SET written_bytes = written_bytes + ? WHERE id = ?'),
    resultPiece: db.prepare(`SELECT p.data FROM conversion_job_pieces p JOIN conversion_jobs j ON j.id = p.job_id
      WHERE p.job_id = ? AND p.kind = 'result' AND p.seq = ? AND j.result_gone = 0`),
    succeed: db.prepare(`UPDATE conversion_jobs SET status = 'succeeded', result_type = ?, result_bytes = ?, result_name = ?, result_pages = ?,
        expires_at = ?, finished_at = ?, pages_done = ?, pages_total = ?, lease = NULL, lease_until_ms = NULL, sealed = NULL
      WHERE id = ? AND lease = ? AND status = 'running'`),
    fail: db.prepare(`UPDATE conversion_jobs SET status = 'failed', error_code = ?, error_params = ?, finished_at = ?,
        result_type = ?, result_bytes = ?, result_name = ?, result_pages = ?, expires_at = ?, lease = NULL, lease_until_ms = NULL, sealed = NULL
      WHERE id = ? AND lease = ? AND status = 'running'`),
    release: db.prepare(`UPDATE conversion_jobs SET status = 'queued', lease = NULL, lease_until_ms = NULL, node = NULL, pages_done = 0, written_bytes = 0,
        attempts = attempts - ?
      WHERE id = ? AND lease = ? AND status = 'running'`),
    cancel: db.prepare(`UPDATE conversion_jobs SET status = 'cancelled', finished_at = ?, lease = NULL, lease_until_ms = NULL, sealed = NULL
      WHERE account_id = ? AND id = ? AND status IN ('queued', 'running') RETURNING *`),
    deleteResult: db.prepare(`UPDATE conversion_jobs SET result_gone = 1
      WHERE account_id = ? AND id = ? AND result_type IS NOT NULL AND result_gone = 0 RETURNING *`),
    spent: db.prepare("SELECT * FROM conversion_jobs WHERE status = 'running' AND lease_until_ms <= ? AND attempts >= ? ORDER BY id LIMIT 100"),
    failSpent: db.prepare(`UPDATE conversion_jobs SET status = 'failed', error_code = ?, error_params = ?, finished_at = ?,
        lease = NULL, lease_until_ms = NULL, sealed = NULL
      WHERE id = ? AND status = 'running' AND lease_until_ms <= ? AND attempts >= ? RETURNING *`),
    kept: db.prepare(`SELECT coalesce(sum(CASE WHEN status <> 'running' AND result_gone = 0 THEN coalesce(result_bytes, 0) ELSE 0 END), 0)
        + coalesce(sum(CASE WHEN status = 'running' THEN written_bytes ELSE 0 END), 0)
        + coalesce((SELECT sum(length(p.data)) FROM conversion_job_pieces p JOIN conversion_jobs d ON d.id = p.job_id
            WHERE d.account_id = $account AND d.status IN ('queued', 'running') AND p.kind = 'document'), 0) AS n
      FROM conversion_jobs WHERE account_id = $account`),
    expired: db.prepare(`UPDATE conversion_jobs SET result_gone = 1 WHERE id IN (SELECT id FROM conversion_jobs
        WHERE result_type IS NOT NULL AND result_gone = 0 AND expires_at <= ? LIMIT 100) RETURNING id`),
    old: db.prepare('DELETE FROM conversion_jobs WHERE id IN (SELECT id FROM conversion_jobs WHERE finished_at < ? LIMIT 100) RETURNING id'),
    byStatus: db.prepare('SELECT status, count(*) AS n FROM conversion_jobs GROUP BY status'),
    oldestQueued: db.prepare("SELECT min(id) AS id FROM conversion_jobs WHERE status = 'queued'"),
    resultBytes: db.prepare(
      'SELECT coalesce(sum(result_bytes), 0) AS n FROM conversion_jobs WHERE result_type IS NOT NULL AND result_gone = 0 AND expires_at IS NOT NULL',
    ),
  }
}

type Jobs = Part<ReturnType<typeof jobStatements>>

export function jobStore(db: DatabaseSync, batch: GroupCommit, stamps: Stamps): JobStore {
  const j = part(db, batch, stamps, jobStatements(db))
  return { ...submitOps(j), ...claimOps(j), ...endOps(j), ...upkeepOps(j), ...jobSealOps(db, batch) }
}

/** submitOps: a job submitted (an Idempotency-Key's earlier job, the account's limit, in the same step), read and listed. */
function submitOps({ db, q, batch }: Jobs): Pick<JobStore, 'submit' | 'get' | 'list'> {
  return {
    submit(job, document, idempotency, maxActive, maxBytes = Number.POSITIVE_INFINITY) {
      return batch.atomic(() => {
        if (idempotency !== null) {
          q.forget.run(job.accountId, idempotency.key, idempotency.sinceIso)
          const earlier = q.byKey.get(job.accountId, idempotency.key) as Row | undefined
          if (earlier !== undefined) {
            const found = toJob(earlier)
            return earlier.fingerprint === idempotency.fingerprint ? { replayed: found } : { mismatch: found }
          }
        }
        if (Number(q.active.get(job.accountId)?.n) >= maxActive) return { limit: maxActive }
        const size = document.reduce((n, piece) => n + piece.byteLength, 0)
        if (size > 0 && Number(q.kept.get({ account: job.accountId })?.n) + size > maxBytes) return { full: maxBytes }
        q.insert.run(...(jobInsertValues(job, idempotency, (flag) => (flag ? 1 : 0)) as SQLInputValue[]))
        for (const [seq, bytes] of document.entries()) q.piece.run(job.id, 'document', seq, bytes)
        return { created: toJob(q.byId.get(job.id) as Row) }
      })
    },
    async get(accountId, jobId) {
      const row = q.get.get(accountId, jobId) as Row | undefined
      return row ? toJob(row) : null
    },
    async list(accountId, { status, cursor, limit }) {
      const before = cursor === undefined ? null : readJobCursor(cursor)
      const where = ['account_id = ?', ...(status === undefined ? [] : ['status = ?']), ...(before === null ? [] : ['id < ?'])]
      const values = [accountId, ...(status === undefined ? [] : [status]), ...(before === null ? [] : [before]), limit + 1]
      const rows = db.prepare(`SELECT * FROM conversion_jobs WHERE ${where.join(' AND ')} ORDER BY id DESC LIMIT ?`).all(...values) as Row[]
      const items = rows.slice(0, limit).map(toJob)
      return { items, next: rows.length > limit && items.length > 0 ? items.at(-1)!.id : null }
    },
  }
}

/** claimOps: the runner's side of a claim: taken fairly, renewed, its document read and its result written under the lease. */
function claimOps({ q, batch }: Jobs): Pick<JobStore, 'claim' | 'renew' | 'documentPieces' | 'writePiece' | 'resultPiece' | 'release'> {
  return {
    claim(node, nowMs, leaseMs, maxRunning, maxAttempts) {
      const lease = randomBytes(12).toString('base64url')
      return batch.run(() => {
        const next = q.next.get({ now: nowMs, max: maxAttempts, running: maxRunning }) as Row | undefined
        if (next === undefined) return null
        const reclaimed = (q.byId.get(String(next.id)) as Row).status === 'running'
        const row = q.take.get({
          lease,
          until: nowMs + leaseMs,
          node,
          at: new Date(nowMs).toISOString(),
          id: String(next.id),
          now: nowMs,
          max: maxAttempts,
        }) as Row | undefined
        if (row === undefined) return null
        q.turn.run(String(row.account_id), nowMs)
        q.dropPieces.run(String(row.id), 'result')
        return { job: toJob(row), sealed: row.sealed === null ? null : String(row.sealed), lease, reclaimed, traceParent: traceParentOf(row) }
      })
    },
    async renew(jobId, lease, nowMs, leaseMs, pagesDone, pagesTotal) {
      const r = await batch.run(() => q.renew.run(nowMs + leaseMs, pagesDone, pagesTotal, jobId, lease))
      return Number(r.changes) > 0
    },
    async documentPieces(jobId) {
      return q.documentPieces.all(jobId).map((r) => r.data as Uint8Array)
    },
    writePiece(jobId, lease, seq, bytes) {
      return batch.run(() => {
        if (Number(q.writePiece.run(seq, bytes, jobId, lease).changes) === 0) return false
        q.written.run(bytes.byteLength, jobId)
        return true
      })
    },
    async resultPiece(jobId, seq) {
      const row = q.resultPiece.get(jobId, seq)
      return row === undefined ? null : (row.data as Uint8Array)
    },
    async release(jobId, lease, attempted) {
      return batch.run(() => {
        if (Number(q.release.run(attempted ? 0 : 1, jobId, lease).changes) === 0) return false
        q.dropPieces.run(jobId, 'result')
        return true
      })
    },
  }
}

/** endOps: a job's end with its event, a cancellation, and the poison jobs failed. */
function endOps({ q, batch, audit }: Jobs): Pick<JobStore, 'finish' | 'cancel' | 'failSpent'> {
  return {
    finish(jobId, lease, end, nowIso, event) {
      return batch.atomic(() => {
        const changed =
          end.status === 'succeeded'
            ? q.succeed.run(
                end.result.type,
                end.result.bytes,
                end.result.name,
                end.result.pages,
                end.expiresAt,
                nowIso,
                end.result.pages,
                end.result.pages,
                jobId,
                lease,
              )
            : q.fail.run(
                end.error.code,
                JSON.stringify(end.error.params),
                nowIso,
                end.result?.type ?? null,
                end.result?.bytes ?? null,
                end.result?.name ?? null,
                end.result?.pages ?? null,
                end.expiresAt ?? null,
                jobId,
                lease,
              )
        if (Number(changed.changes) === 0) return false
        q.dropPieces.run(jobId, 'document')
        if (end.status === 'failed' && end.result === undefined) q.dropPieces.run(jobId, 'result')
        audit(event)
        return true
      })
    },
    cancel(accountId, jobId, nowIso, event) {
      return batch.atomic(() => {
        const row = (q.cancel.get(nowIso, accountId, jobId) ?? q.deleteResult.get(accountId, jobId)) as Row | undefined
        if (row === undefined) return null
        const job: ConversionJob = toJob(row)
        if (job.status === 'cancelled') q.dropAll.run(jobId)
        else q.dropPieces.run(jobId, 'result')
        audit(event(job.status === 'cancelled' ? 'job.cancel' : 'job.result_delete'))
        return job
      })
    },
    failSpent(nowMs, maxAttempts, nowIso, error, eventOf) {
      return batch.atomic(() => {
        const failed: ConversionJob[] = []
        for (const candidate of q.spent.all(nowMs, maxAttempts) as Row[]) {
          const row = q.failSpent.get(error.code, JSON.stringify(error.params), nowIso, String(candidate.id), nowMs, maxAttempts) as Row | undefined
          if (row === undefined) continue
          const job = toJob(row)
          q.dropAll.run(job.id)
          audit(eventOf(job))
          failed.push(job)
        }
        return failed
      })
    },
  }
}

/** upkeepOps: the account's kept bytes, the pruning of expired results and old jobs, and the gauges. */
function upkeepOps({ q, batch }: Jobs): Pick<JobStore, 'keptBytes' | 'prune' | 'gauges'> {
  return {
    async keptBytes(accountId) {
      return Number(q.kept.get({ account: accountId })?.n)
    },
    async prune(nowIso, beforeIso) {
      // In steps of 100 jobs, each its own commit: a large backlog never holds the write lock long.
      const counts = { results: 0, jobs: 0 }
      for (const [what, statement] of [
        ['results', q.expired],
        ['jobs', q.old],
      ] as const) {
        for (;;) {
          const n = await batch.run(() => {
            const gone = statement.all(what === 'results' ? nowIso : beforeIso) as Row[]
            for (const r of gone) (what === 'results' ? (id: string) => q.dropPieces.run(id, 'result') : (id: string) => q.dropAll.run(id))(String(r.id))
            return gone.length
          })
          counts[what] += n
          if (n < 100) break
        }
      }
      return counts
    },
    async gauges() {
      const byStatus = { queued: 0, running: 0, succeeded: 0, failed: 0, cancelled: 0 }
      for (const r of q.byStatus.all() as Row[]) byStatus[r.status as keyof typeof byStatus] = Number(r.n)
      const oldest = q.oldestQueued.get()?.id
      return {
        byStatus,
        oldestQueuedMs: oldest === null || oldest === undefined ? null : submittedMs(String(oldest)),
        resultBytes: Number(q.resultBytes.get()?.n),
      }
    },
  }
}
