/**
 * The tables `store copy` copies, in the order it copies them, and how it reads each one: its columns
 * (with their kind, from the PostgreSQL schema) and its primary key, whose order is the order of its rows.
 * A table the schema gains must be added here: the copy refuses a store with a table it does not know,
 * and `tables.test.ts` fails first.
 */
import { COPY_MARKER } from './marker.ts'
import { kindOf, type Kind } from './values.ts'

/**
 * COPY_ORDER: every table of the schema but those below, each after the tables its foreign keys name (PostgreSQL checks
 * them as the rows arrive: only user triggers are disabled there).
 */
export const COPY_ORDER: readonly string[] = [
  'accounts',
  'api_keys',
  'subscriptions',
  'plans',
  'onboarding',
  'otp_state',
  'usage_daily',
  'usage_keys',
  'usage_keys_monthly',
  'usage_regions',
  'refusals_daily',
  'audit_events',
  'admin_tokens',
  'users',
  'members',
  'sessions',
  'email_tokens',
  'recovery_codes',
  'sso_providers',
  'sso_identities',
  'sso_requests',
  'totp_users',
  'totp_factors',
  'totp_recovery_codes',
  'factor_settings',
  'passkey_challenges',
  'attempt_windows',
  'idempotency_records',
  'webhook_event_types',
  'webhook_endpoints',
  'webhook_messages',
  'webhook_deliveries',
  'webhook_attempts',
  'conversion_jobs',
  'conversion_job_turns',
  'conversion_job_pieces',
  'record_tallies',
  'store_settings',
]

/** NOT_COPIED: each store's own record of its migrations (the target's are made by migrating it), and the copy's progress. */
export const NOT_COPIED: readonly string[] = ['schema_migrations', COPY_MARKER]

/**
 * SETTINGS: tables that hold what every node writes as it starts (store_settings: its WEBHOOK_PENDING_PER_ACCOUNT, which the
 * outbox trigger reads), not data: a store that only a node has started on counts as empty. They are copied all the same.
 */
export const SETTINGS: readonly string[] = ['store_settings']

/** A table as one end lays it out: its columns in order, with their declared types, and its primary key's columns in order. */
export interface Layout {
  readonly columns: readonly { readonly name: string; readonly type: string }[]
  readonly key: readonly string[]
}

export interface Column {
  readonly name: string
  readonly kind: Kind
}

/** Shape: how the copy reads and writes a table: its columns (the source's order), their kinds, its key. */
export interface Shape {
  readonly table: string
  readonly columns: readonly Column[]
  readonly key: readonly string[]
  /** The kinds of the key's columns, in key order. */
  readonly keyKinds: readonly Kind[]
}

/** SchemaMismatch: the two stores' schemas differ in a way the copy cannot bridge. */
export class SchemaMismatch extends Error {
  override name = 'SchemaMismatch'
}

/** unknownTables: the tables of a layout that the copy neither copies nor leaves out on purpose. */
export const unknownTables = (tables: Iterable<string>): string[] => [...tables].filter((t) => !COPY_ORDER.includes(t) && !NOT_COPIED.includes(t))

/**
 * shapes: every copied table's shape, from the layouts of the two ends and the PostgreSQL one's types; it throws when a
 * table is unknown or missing, when a column or the key differs, or when a column's type is one the copy does not know.
 */
export function shapes(source: ReadonlyMap<string, Layout>, target: ReadonlyMap<string, Layout>, postgres: ReadonlyMap<string, Layout>): Shape[] {
  const unknown = [...new Set([...unknownTables(source.keys()), ...unknownTables(target.keys())])]
  if (unknown.length > 0) throw new SchemaMismatch(`this version of Tessera does not know how to copy the table ${unknown.join(', ')}`)
  return COPY_ORDER.map((table) => {
    const from = source.get(table)
    const to = target.get(table)
    const typed = postgres.get(table)
    if (from === undefined || to === undefined || typed === undefined)
      throw new SchemaMismatch(`the table ${table} is missing from the ${from === undefined ? 'source' : 'target'}`)
    const names = (l: Layout) => l.columns.map((c) => c.name).sort()
    if (names(from).join() !== names(to).join()) {
      throw new SchemaMismatch(`the table ${table} has other columns in the source (${names(from).join(', ')}) than in the target (${names(to).join(', ')})`)
    }
    if (from.key.join() !== to.key.join() || from.key.length === 0)
      throw new SchemaMismatch(`the table ${table} has another primary key in the source than in the target`)
    const types = new Map(typed.columns.map((c) => [c.name, c.type]))
    const columns = from.columns.map(({ name }) => {
      const kind = kindOf(types.get(name) ?? '')
      if (kind === null) throw new SchemaMismatch(`the column ${table}.${name} is of a type the copy does not know (${types.get(name)})`)
      return { name, kind }
    })
    const keyKinds = from.key.map((k) => columns.find((c) => c.name === k)!.kind)
    if (keyKinds.some((k) => k !== 'text' && k !== 'integer')) throw new SchemaMismatch(`the primary key of ${table} is not of text and integers`)
    return { table, columns, key: from.key, keyKinds }
  })
}
