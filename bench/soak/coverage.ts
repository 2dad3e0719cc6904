/**
 * The soak's coverage rule: every operation a served OpenAPI document lists has an entry in the
 * input table, with at least one valid and one hostile case, and the table names no operation
 * the documents no longer list. `npm run soak` refuses to start without it, and
 * test/checks/soak-coverage.test.ts holds the app's documents to the same rule, so that a new
 * route cannot slip past the soak.
 */
import type { Api, Operation, Table } from './types.ts'

const METHODS = new Set(['get', 'put', 'post', 'delete', 'patch', 'head', 'options'])

interface Document {
  readonly paths?: Readonly<Record<string, Readonly<Record<string, { operationId?: string; responses?: Record<string, unknown> }>>>>
}

/** operationsOf lists a document's operations (an operation without an operationId is named by its method and path). */
export function operationsOf(doc: unknown, api: Api): Operation[] {
  const ops: Operation[] = []
  for (const [path, methods] of Object.entries((doc as Document).paths ?? {})) {
    for (const [method, op] of Object.entries(methods)) {
      if (!METHODS.has(method)) continue
      ops.push({ api, id: op.operationId ?? `${method.toUpperCase()} ${path}`, method: method.toUpperCase(), path, statuses: Object.keys(op.responses ?? {}) })
    }
  }
  return ops
}

export interface Coverage {
  /** Operations of the documents without an entry (or with one that lacks a valid or a hostile case). */
  readonly missing: readonly string[]
  /** Entries of the table that name no operation of the documents. */
  readonly stale: readonly string[]
}

/** coverage holds the operations to the table. */
export function coverage(ops: readonly Operation[], table: Table): Coverage {
  const ids = new Set(ops.map((o) => o.id))
  const missing: string[] = []
  for (const op of ops) {
    const cases = table[op.id]
    if (cases === undefined) missing.push(`${op.id} (${op.method} ${op.path}): no entry in the soak's input table`)
    else {
      for (const kind of ['valid', 'hostile'] as const) {
        if (!cases.some((c) => c.kind === kind)) missing.push(`${op.id} (${op.method} ${op.path}): no ${kind} case`)
      }
    }
  }
  const stale = Object.keys(table)
    .filter((id) => !ids.has(id))
    .map((id) => `${id}: in the soak's input table, but no served operation has that operationId`)
  return { missing, stale }
}

/** describe gives the lines that explain a coverage failure, or none. */
export function describe(c: Coverage): string[] {
  if (c.missing.length === 0 && c.stale.length === 0) return []
  return [...c.missing, ...c.stale, 'Every operation needs its entry in bench/soak/inputs/ (valid, boundary and hostile inputs): see docs/development.md.']
}
