/**
 * The two relational stores keep one schema: after every migration, the same tables with the
 * same columns, primary keys and nullability. A migration written for one and forgotten (or
 * mistyped) for the other fails here, not in production.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { join } from 'node:path'
import pg from 'pg'
import { DatabaseSync } from 'node:sqlite'
import { openSqliteStore } from '../../src/storage/sqlite/store.ts'
import { openPostgresStore } from '../../src/storage/postgres/store.ts'
import { tempDir } from '../support/helper.ts'
import { databaseUrl, dropSchema, skipUnless, uniqueName } from '../support/services.ts'

const skip = skipUnless('TEST_DATABASE_URL')

/** table → "column notnull pk" lines, sorted */
type Shape = Record<string, string[]>

test('the SQLite and PostgreSQL schemas have the same tables, columns, keys and nullability', { skip }, async (t) => {
  const path = join(tempDir(t), 'db.sqlite')
  await openSqliteStore({ path, maintenance: false }).close()
  const db = new DatabaseSync(path)
  const sqlite: Shape = {}
  for (const { name } of db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").all()) {
    sqlite[String(name)] = db
      .prepare(`PRAGMA table_info(${String(name)})`)
      .all()
      // An INTEGER PRIMARY KEY or a WITHOUT ROWID key column is NOT NULL whatever it says.
      .map((c) =>
        `${String(c.name)} ${Number(c.notnull) === 1 || Number(c.pk) > 0 ? 'not null' : 'null'} ${Number(c.pk) > 0 ? `pk${Number(c.pk)}` : ''}`.trim(),
      )
      .sort()
  }
  db.close()

  const schema = uniqueName('t')
  t.after(() => dropSchema(schema))
  await (await openPostgresStore({ url: databaseUrl(), schema })).close()
  const client = new pg.Client({ connectionString: databaseUrl() })
  await client.connect()
  t.after(() => client.end())
  const { rows } = await client.query(
    `
    SELECT c.table_name, c.column_name, c.is_nullable, k.ordinal_position AS pk
    FROM information_schema.columns c
    LEFT JOIN information_schema.table_constraints tc
      ON tc.table_schema = c.table_schema AND tc.table_name = c.table_name AND tc.constraint_type = 'PRIMARY KEY'
    LEFT JOIN information_schema.key_column_usage k
      ON k.constraint_name = tc.constraint_name AND k.table_schema = c.table_schema AND k.column_name = c.column_name
    WHERE c.table_schema = $1`,
    [schema],
  )
  const postgres: Shape = {}
  for (const r of rows) {
    const line = `${r.column_name} ${r.is_nullable === 'NO' ? 'not null' : 'null'} ${r.pk === null ? '' : `pk${r.pk}`}`.trim()
    postgres[r.table_name] ??= []
    postgres[r.table_name]!.push(line)
  }
  for (const lines of Object.values(postgres)) lines.sort()
  assert.ok(Object.keys(sqlite).length >= 12, 'every table is read')
  assert.deepEqual(Object.keys(postgres).sort(), Object.keys(sqlite).sort(), 'the same tables')
  for (const table of Object.keys(sqlite)) assert.deepEqual(postgres[table], sqlite[table], table)
})
