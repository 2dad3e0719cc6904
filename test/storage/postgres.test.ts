import { test } from 'node:test'
import assert from 'node:assert/strict'
import pg from 'pg'
import { draft, storeContract } from '../support/storage/contract.ts'
import { migrations } from '../../src/storage/migrations.ts'
import { UnavailableError } from '../../src/domain/errors.ts'
import { openPostgresStore } from '../../src/storage/postgres/store.ts'
import { TcpProxy } from '../support/proxy.ts'
import { databaseUrl, dropSchema, openTestPostgres, skipUnless, uniqueName } from '../support/services.ts'

const skip = skipUnless('TEST_DATABASE_URL')

storeContract('postgres', (clock) => openTestPostgres(undefined, clock), skip)

test('postgres: migrations are recorded once, also when two nodes start together', { skip }, async (t) => {
  const schema = uniqueName('t')
  t.after(() => dropSchema(schema))
  const [a, b] = await Promise.all([0, 1].map(() => openPostgresStore({ url: databaseUrl(), schema })))
  await a!.close()
  await b!.close()
  const client = new pg.Client({ connectionString: databaseUrl() })
  await client.connect()
  t.after(() => client.end())
  const { rows } = await client.query(`SELECT version FROM ${schema}.schema_migrations ORDER BY version`)
  assert.deepEqual(
    rows.map((r) => r.version),
    migrations.map((m) => m.version),
  )
})

test('postgres: an unreachable server is UnavailableError, at start-up and per call', { skip }, async (t) => {
  const url = new URL(databaseUrl())
  url.port = '1'
  await assert.rejects(
    openPostgresStore({ url: url.href, timeoutMs: 500 }),
    (error: Error) => error instanceof UnavailableError && error.dependency === 'PostgreSQL',
  )

  const schema = uniqueName('t')
  const proxy = await TcpProxy.start(databaseUrl())
  t.after(async () => {
    await proxy.close()
    await dropSchema(schema)
  })
  const store = await openPostgresStore({ url: proxy.via(databaseUrl()), schema, timeoutMs: 500 })
  t.after(() => store.close())
  assert.equal(await store.access.countAccounts(), 0)
  await proxy.cut()
  await assert.rejects(store.access.countAccounts(), (error: Error) => error instanceof UnavailableError && error.dependency === 'PostgreSQL')
  const account = { id: 'acc_x', name: 'x', status: 'active' as const, createdAt: new Date().toISOString() }
  await assert.rejects(store.access.createAccount(account, draft('account.create')), UnavailableError)
  await proxy.restore()
  assert.equal(await store.access.countAccounts(), 0, 'the pool reconnects by itself')
})

test('postgres: an audit event cannot be changed, even with SQL on the table', { skip }, async (t) => {
  const schema = uniqueName('t')
  t.after(() => dropSchema(schema))
  const store = await openPostgresStore({ url: databaseUrl(), schema })
  t.after(() => store.close())
  const event = await store.audit.append(draft('account.create'))
  const client = new pg.Client({ connectionString: databaseUrl() })
  await client.connect()
  t.after(() => client.end())
  await assert.rejects(client.query(`UPDATE ${schema}.audit_events SET outcome = 'failure' WHERE id = $1`, [event.id]), /audit events cannot be changed/)
  assert.equal((await store.audit.list({ limit: 1 })).items[0]?.outcome, 'success')
})

test('postgres: an event rolled back after its insert takes its outbox rows with it; committed, they stay', { skip }, async (t) => {
  const schema = uniqueName('t')
  t.after(() => dropSchema(schema))
  const store = await openPostgresStore({ url: databaseUrl(), schema })
  t.after(() => store.close())
  await store.access.createAccount({ id: 'acc_w', name: 'w', status: 'active', createdAt: new Date().toISOString() }, draft('account.create'))
  await store.webhooks.createEndpoint(
    { id: 'whe_1', accountId: 'acc_w', url: 'https://x.example', eventTypes: null, createdAt: new Date().toISOString(), sealedSecret: 's' },
    10,
    draft('webhook.create'),
  )
  const client = new pg.Client({ connectionString: databaseUrl(), options: `-c search_path=${schema}` })
  await client.connect()
  t.after(() => client.end())
  const insert = (id: string) =>
    client.query(
      `INSERT INTO audit_events (id, at, actor, action, target_type, target_id, account_id, ip, outcome, detail)
    VALUES ($1, now(), 'system', 'factor.created', 'factor', 'fac_1', 'acc_w', NULL, 'success', '{"userID":"u"}')`,
      [id],
    )
  const count = async () =>
    Number((await client.query('SELECT (SELECT count(*) FROM webhook_messages) + (SELECT count(*) FROM webhook_deliveries) AS n')).rows[0].n)
  await client.query('BEGIN')
  await insert('evt_000000000000000000rb')
  assert.equal(await count(), 2, 'the message and its delivery, in the transaction')
  await client.query('ROLLBACK')
  assert.equal(await count(), 0)
  assert.equal(await store.webhooks.pending(), 0)
  await insert('evt_000000000000000000ok')
  assert.equal(await count(), 2)
})
