/**
 * The soak's coverage rule, held here too so that `npm test` catches what `npm run soak` would
 * refuse at start: every operation of the app's OpenAPI documents (public and admin, as
 * `npm run docs` builds them) has an entry in the soak's input table (bench/soak/inputs/) with a
 * valid and a hostile case, and no entry names an operation that is gone. No server, no load.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { renderOpenApi } from '../../scripts/docs.ts'
import { coverage, describe, operationsOf } from '../../bench/soak/coverage.ts'
import { ADMIN, PUBLIC } from '../../bench/soak/inputs/index.ts'
import type { Case } from '../../bench/soak/types.ts'

test('every operation of the public and admin documents has its entry in the soak input table, and every entry an operation', async () => {
  const pub = operationsOf(await renderOpenApi('public'), 'public')
  const admin = operationsOf(await renderOpenApi('admin'), 'admin')
  assert.ok(pub.length > 30 && admin.length > 20, 'the documents list the operations: the rule would pass on nothing')
  assert.deepEqual([...describe(coverage(pub, PUBLIC)), ...describe(coverage(admin, ADMIN))], [])
})

test('the rule fails on an operation without an entry, an entry without a hostile case, and an entry without an operation', () => {
  const doc = {
    paths: {
      '/a': { get: { operationId: 'getA', responses: { 200: {} } }, post: { operationId: 'postA', responses: { 201: {} } } },
      '/b/{id}': { delete: { operationId: 'deleteB', responses: { 204: {} } } },
    },
  }
  const valid: Case = { name: 'v', kind: 'valid', make: () => ({}) }
  const hostile: Case = { name: 'h', kind: 'hostile', make: () => ({}) }
  const found = coverage(operationsOf(doc, 'public'), { getA: [valid, hostile], postA: [valid], gone: [valid, hostile] })
  assert.deepEqual(found.missing, ['postA (POST /a): no hostile case', "deleteB (DELETE /b/{id}): no entry in the soak's input table"])
  assert.deepEqual(found.stale, ["gone: in the soak's input table, but no served operation has that operationId"])
})
