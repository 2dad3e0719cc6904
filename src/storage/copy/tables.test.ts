/**
 * What `store copy` must know of the schema, checked on the schema the migrations make: every table is
 * either copied or left out on purpose (a table a later migration adds fails here until the copy knows it),
 * each table comes after the tables its foreign keys name, and every key is of text and integers. And the
 * canonical values both ends hash, whatever their driver gave.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { openSqliteDatabase } from '../sqlite/store.ts'
import { Stamps } from '../stamps.ts'
import { COPY_ORDER, NOT_COPIED, SchemaMismatch, shapes, unknownTables, type Layout } from './tables.ts'
import { canonical, fromPostgres, fromSqlite, timeOfPostgres, timeOfSqlite } from './values.ts'

function schema(): { tables: string[]; parents: Map<string, string[]>; layouts: Map<string, Layout> } {
  const db = openSqliteDatabase(':memory:', new Stamps())
  try {
    const tables = db
      .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
      .all()
      .map((r) => String(r.name))
    const parents = new Map(
      tables.map((t) => [
        t,
        [
          ...new Set(
            db
              .prepare(`PRAGMA foreign_key_list(${t})`)
              .all()
              .map((f) => String(f.table)),
          ),
        ],
      ]),
    )
    const layouts = new Map<string, Layout>()
    for (const t of tables) {
      const info = db.prepare(`PRAGMA table_info(${t})`).all()
      layouts.set(t, {
        columns: info.map((c) => ({ name: String(c.name), type: String(c.type) })),
        key: info
          .filter((c) => Number(c.pk) > 0)
          .sort((a, b) => Number(a.pk) - Number(b.pk))
          .map((c) => String(c.name)),
      })
    }
    return { tables, parents, layouts }
  } finally {
    db.close()
  }
}

test('every table of the schema is copied or left out on purpose, once', () => {
  const { tables } = schema()
  assert.deepEqual(unknownTables(tables), [], 'tables the copy does not know: add them to COPY_ORDER (after the tables their foreign keys name)')
  const copied = tables.filter((t) => !NOT_COPIED.includes(t))
  assert.deepEqual([...COPY_ORDER].sort(), copied.sort(), 'COPY_ORDER names the tables of the schema, no more')
  assert.equal(new Set(COPY_ORDER).size, COPY_ORDER.length, 'each once')
})

test('each table is copied after the tables its foreign keys name (PostgreSQL checks them as rows arrive)', () => {
  const { parents } = schema()
  for (const [i, table] of COPY_ORDER.entries()) {
    for (const parent of parents.get(table) ?? []) {
      assert.ok(COPY_ORDER.indexOf(parent) < i, `${table} names ${parent}, which must come before it`)
    }
  }
})

test('shapes: every column has a kind and every key is of text and integers, on the types PostgreSQL gives; an unknown table or type is refused', () => {
  const { layouts } = schema()
  // PostgreSQL's types, as its migrations declare them (TEXT → text, INTEGER → bigint is enough for the kinds checked here).
  const typed = new Map(
    [...layouts].map(([t, l]) => [t, { ...l, columns: l.columns.map((c) => ({ name: c.name, type: c.type === 'TEXT' ? 'text' : 'bigint' })) }]),
  )
  for (const [t, l] of typed) typed.set(t, { ...l, columns: l.columns.map((c) => (c.name === 'data' ? { name: c.name, type: 'bytea' } : c)) })
  const made = shapes(layouts, layouts, typed)
  assert.equal(made.length, COPY_ORDER.length)
  for (const s of made) assert.ok(s.key.length > 0, `${s.table} has a primary key`)

  const extra = new Map(layouts).set('widgets', { columns: [{ name: 'id', type: 'TEXT' }], key: ['id'] })
  assert.throws(
    () => shapes(extra, layouts, typed),
    (e: Error) => e instanceof SchemaMismatch && /does not know how to copy the table widgets/.test(e.message),
  )
  const odd = new Map(typed).set('accounts', { ...typed.get('accounts')!, columns: typed.get('accounts')!.columns.map((c) => ({ ...c, type: 'numeric' })) })
  assert.throws(() => shapes(layouts, layouts, odd), /accounts\.id is of a type the copy does not know \(numeric\)/)
})

test('canonical values: both drivers give the same text for the same value', () => {
  assert.equal(timeOfPostgres('2026-11-29 12:00:00+00'), '2026-11-29T12:00:00.000Z')
  assert.equal(timeOfPostgres('2026-11-29 12:00:00.12+00'), '2026-11-29T12:00:00.120Z')
  assert.equal(timeOfPostgres('2026-11-29 12:00:00.123456+00'), '2026-11-29T12:00:00.123456Z', 'microseconds no store wrote are kept, not dropped')
  assert.equal(timeOfSqlite('2026-11-29T12:00:00.120Z'), '2026-11-29T12:00:00.120Z')
  assert.equal(timeOfSqlite('2026-11-29T12:00:00Z'), '2026-11-29T12:00:00.000Z')
  assert.equal(canonical('json', '{"z":1,"a":{"y":[1,{"d":1,"c":2}],"b":null}}'), canonical('json', '{"a": {"b": null, "y": [1, {"c": 2, "d": 1}]}, "z": 1}'))
  assert.equal(canonical('boolean', fromSqlite('boolean', 1n)), canonical('boolean', fromPostgres('boolean', true)))
  assert.equal(canonical('integer', fromSqlite('integer', 9007199254740993n)), canonical('integer', fromPostgres('integer', '9007199254740993')))
  assert.equal(canonical('float', fromSqlite('float', 0.1)), canonical('float', fromPostgres('float', 0.1)))
  assert.equal(canonical('bytes', new Uint8Array([1, 2])), canonical('bytes', Buffer.from([1, 2])))
  assert.notEqual(canonical('text', ''), canonical('text', null))
  assert.equal(canonical('text', null), null)
})
