/**
 * onEachStore runs a bench on every store it can reach: the embedded SQLite in a scratch
 * folder, then PostgreSQL in a scratch database on BENCH_DATABASE_URL (or TEST_DATABASE_URL),
 * dropped after; it prints each store's table as it is done, and says so when PostgreSQL is
 * skipped.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { randomBytes } from 'node:crypto'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'

export type StoreName = 'SQLite' | 'PostgreSQL'

export async function onEachStore(what: string, run: (name: StoreName, env: Record<string, string>, dataDir: string) => Promise<string>): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), `tessera-bench-${what}-`))
  try {
    process.stdout.write(`${await run('SQLite', { DATA_DIR: dataDir }, dataDir)}\n`)
  } finally {
    rmSync(dataDir, { recursive: true, force: true })
  }
  const adminUrl = process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL
  if (adminUrl === undefined || adminUrl === '') {
    process.stdout.write(`The ${what} bench on PostgreSQL skipped: set BENCH_DATABASE_URL (or TEST_DATABASE_URL) to a server to create a scratch database on.\n\n`)
    return
  }
  const admin = new pg.Client({ connectionString: adminUrl })
  await admin.connect()
  const db = `tessera_bench_${what}_${randomBytes(4).toString('hex')}`
  await admin.query(`CREATE DATABASE ${db}`)
  const url = new URL(adminUrl)
  url.pathname = `/${db}`
  const pgDir = mkdtempSync(join(tmpdir(), `tessera-bench-${what}-`))
  try {
    process.stdout.write(`${await run('PostgreSQL', { DATA_DIR: pgDir, DATABASE_URL: url.href }, pgDir)}\n`)
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`).catch(() => undefined)
    await admin.end()
    rmSync(pgDir, { recursive: true, force: true })
  }
}
