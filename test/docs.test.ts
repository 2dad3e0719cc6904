import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { catalogue, ERROR_CODES } from '../src/errors/catalogue.ts'
import { FILES, renderAll, renderOpenApi } from '../scripts/docs.ts'

test('committed docs are what `npm run docs` generates (catalogue, route schemas, admin route schemas, client types, settings)', async () => {
  const fresh = await renderAll()
  for (const [name, text] of Object.entries(fresh)) {
    assert.equal(readFileSync(FILES[name as keyof typeof FILES], 'utf8'), text, `${name} is stale: run npm run docs`)
  }
})

test('the catalogue, docs/errors.md and the OpenAPI documents, public and admin (their operations and descriptions), name the same codes', async () => {
  const errorsMd = readFileSync(FILES.errors, 'utf8')
  for (const code of ERROR_CODES) {
    assert.match(errorsMd, new RegExp(`^\\| \`${code}\` \\| ${catalogue[code].status} \\|`, 'm'), `${code} row in errors.md`)
  }
  const rows = errorsMd.split('\n').filter((l) => /^\| `[A-Z_]+` \|/.test(l))
  assert.equal(rows.length, ERROR_CODES.length, 'one row per code, no extra rows')

  const doc = await renderOpenApi()
  const admin = await renderOpenApi('admin')
  const codesOf = (document: Record<string, unknown>, statusOf: Map<string, Set<string>>): Set<string> => {
    const inDoc = new Set<string>()
    const walk = (node: unknown, status?: string): void => {
      if (Array.isArray(node)) return node.forEach((n) => walk(n, status))
      if (node === null || typeof node !== 'object') return
      for (const [k, v] of Object.entries(node)) {
        if (k === 'x-error-codes') {
          for (const code of v as string[]) {
            inDoc.add(code)
            if (status) statusOf.set(code, new Set([...(statusOf.get(code) ?? []), status]))
          }
        } else walk(v, k === 'responses' ? undefined : /^\d{3}$/.test(k) ? k : status)
      }
    }
    walk(document)
    return inDoc
  }
  const statusOf = new Map<string, Set<string>>()
  const inPublic = codesOf(doc, statusOf)
  const inAdmin = codesOf(admin, statusOf)
  // The 404s of no route belong to no documented operation (an unknown route; the conversion group outside eu): the descriptions' tables have them.
  const outsideOperations = ['ROUTE_NOT_FOUND', 'GROUP_NOT_IN_REGION', 'ADMIN_ROUTE_NOT_FOUND']
  assert.deepEqual([...new Set([...inPublic, ...inAdmin])].sort(), ERROR_CODES.filter((c) => !outsideOperations.includes(c)).sort(), 'every code is answered by an operation of one document')
  const description = (doc.info as { description: string }).description
  for (const code of ERROR_CODES) {
    assert.match(description, new RegExp(`^\\| \`${code}\` \\| ${catalogue[code].status} \\|`, 'm'), `${code} row in the document's description (what /docs shows)`)
  }
  const adminDescription = (admin.info as { description: string }).description
  for (const code of [...inAdmin, 'ADMIN_ROUTE_NOT_FOUND']) {
    assert.match(adminDescription, new RegExp(`^\\| \`${code}\` \\| ${catalogue[code as keyof typeof catalogue].status} \\|`, 'm'), `${code} row in the admin document's description`)
  }
  for (const [code, statuses] of statusOf) assert.deepEqual([...statuses], [String(catalogue[code as keyof typeof catalogue].status)], code)
})
