import { JOB_END_CODES } from '../../src/openapi/job-view.ts'
import { IMPORT_LINE_CODES } from '../../src/services/factor-import.ts'
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { catalogue, ERROR_CODES } from '../../src/errors/catalogue.ts'
import { FILES, renderAll, renderOpenApi } from '../../scripts/docs.ts'
import { Ajv2020 } from 'ajv/dist/2020.js'

test('committed docs are what `npm run docs` generates (catalogue, route schemas, admin route schemas, client types, settings in docs/configuration.md)', async () => {
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
      if (Array.isArray(node)) {
        for (const n of node) walk(n, status)
        return
      }
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
  // And the codes only a conversion job ends with (its `error`, in an answer of 200), which the job's schema names.
  // And the codes only a bulk import's report gives (a line refused, in an answer of 200), which the import's description names.
  // JOB_STORAGE_FULL is both: a submission whose document would pass the account's storage is refused with it too.
  const outsideOperations = ['ROUTE_NOT_FOUND', 'GROUP_NOT_IN_REGION', 'ADMIN_ROUTE_NOT_FOUND', ...JOB_END_CODES, ...IMPORT_LINE_CODES].filter(
    (code) => code !== 'JOB_STORAGE_FULL',
  )
  const jobSchema = JSON.stringify((doc as { paths: Record<string, unknown> }).paths['/converter/jobs/{jobID}'])
  for (const code of JOB_END_CODES) assert.ok(jobSchema.includes(code), `the job's schema names ${code}`)
  const importSchema = JSON.stringify((admin as { paths: Record<string, unknown> }).paths['/admin/v1/accounts/{id}/factors/import'])
  for (const code of IMPORT_LINE_CODES) assert.ok(importSchema.includes(code), `the import's description names ${code}`)
  assert.deepEqual(
    [...new Set([...inPublic, ...inAdmin])].sort(),
    ERROR_CODES.filter((c) => !outsideOperations.includes(c)).sort(),
    'every code is answered by an operation of one document',
  )
  const description = (doc.info as { description: string }).description
  for (const code of ERROR_CODES) {
    assert.match(
      description,
      new RegExp(`^\\| \`${code}\` \\| ${catalogue[code].status} \\|`, 'm'),
      `${code} row in the document's description (what /docs shows)`,
    )
  }
  const adminDescription = (admin.info as { description: string }).description
  for (const code of [...inAdmin, 'ADMIN_ROUTE_NOT_FOUND']) {
    assert.match(
      adminDescription,
      new RegExp(`^\\| \`${code}\` \\| ${catalogue[code as keyof typeof catalogue].status} \\|`, 'm'),
      `${code} row in the admin document's description`,
    )
  }
  for (const [code, statuses] of statusOf) assert.deepEqual([...statuses], [String(catalogue[code as keyof typeof catalogue].status)], code)
})

test('every example in the OpenAPI documents, public and admin, is valid against its schema, and every JSON answer and body has one', async () => {
  // date-time as RFC 3339 has it; binary is a file, any string.
  const DATE_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/i
  const ajv = new Ajv2020({
    strict: false,
    allErrors: true,
    formats: { binary: true, 'date-time': (s: string) => DATE_TIME.test(s) && !Number.isNaN(Date.parse(s)) },
  })
  const problems: string[] = []
  const missing: string[] = []
  let checked = 0
  for (const which of ['public', 'admin'] as const) {
    const doc = (await renderOpenApi(which)) as { paths: Record<string, Record<string, OperationShape>>; components?: unknown }
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(item)) {
        const where = `${which} ${method.toUpperCase()} ${path}`
        const bodies = Object.entries(op.requestBody?.content ?? {})
        if (bodies.length > 0 && bodies.every(([, m]) => exampleOf(m) === undefined)) missing.push(`${where}: no example body`)
        const answers = Object.entries(op.responses ?? {}).flatMap(([status, r]) =>
          Object.entries(r.content ?? {}).map(([type, m]) => [status, type, m] as const),
        )
        const success = answers.filter(
          ([status, type, m]) => status.startsWith('2') && type === 'application/json' && m.schema?.['x-error-codes'] === undefined,
        )
        for (const [status, , m] of success) if (exampleOf(m) === undefined) missing.push(`${where} ${status}: no example answer`)
        for (const [label, media] of [
          ...bodies.map(([type, m]) => [`body ${type}`, m] as const),
          ...answers.map(([status, type, m]) => [`${status} ${type}`, m] as const),
        ]) {
          if (media.schema === undefined) continue
          // A schema with a $ref carries the document's components, where the reference points.
          const schema = JSON.stringify(media.schema).includes('"$ref"') ? { ...media.schema, components: doc.components } : media.schema
          const validate = ajv.compile(schema)
          for (const example of examplesOf(media)) {
            checked++
            if (!validate(example)) problems.push(`${where} ${label}: ${ajv.errorsText(validate.errors)}`)
          }
        }
      }
    }
  }
  assert.deepEqual(problems, [], 'examples that their schema refuses')
  assert.deepEqual(missing, [], 'operations without an example')
  assert.ok(checked > 40, `${checked} examples checked`)
})

interface MediaShape {
  schema?: object & { 'x-error-codes'?: string[]; examples?: unknown[] }
  example?: unknown
  examples?: Record<string, { value?: unknown }>
}
interface OperationShape {
  requestBody?: { content?: Record<string, MediaShape> }
  responses?: Record<string, { content?: Record<string, MediaShape> }>
}
/**
 * The examples of a body: @fastify/swagger moves a schema's one `examples` entry to `example` and several to the named `examples`,
 * except in a response given with its content.
 */
const examplesOf = (m: MediaShape): unknown[] =>
  m.example !== undefined ? [m.example] : m.examples !== undefined ? Object.values(m.examples).map((e) => e.value) : (m.schema?.examples ?? []).slice(0, 1)
const exampleOf = (m: MediaShape) => examplesOf(m)[0]

const ROOT = join(import.meta.dirname, '..', '..')
/** The pages people write (the generated references have their own test above). */
const GENERATED = new Set(['api.md', 'admin-api.md', 'errors.md', 'configuration.md'])
const written = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md') && !GENERATED.has(f))
    .map((f) => `docs/${f}`),
]
const read = (file: string) => readFileSync(join(ROOT, file), 'utf8')

/** slug is the anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens. */
const slug = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s-]/gu, '')
    .replace(/\s/g, '-')
const anchors = (text: string) => new Set([...text.matchAll(/^#+ (.+)$/gm)].map((m) => slug(m[1] ?? '')))

test('the README stays a front page: at most 12 KiB, its manual in docs/', () => {
  const size = Buffer.byteLength(read('README.md'))
  assert.ok(size <= 12288, `README.md is ${size} bytes; move the detail to a page in docs/`)
})

test('every relative link of the README and the docs pages leads to a file, and its #anchor to a heading there', () => {
  for (const file of written) {
    const text = read(file).replace(/```[\s\S]*?```/g, '')
    for (const [, target = ''] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(target)) continue
      const [path = '', anchor] = target.split('#')
      const resolved = path === '' ? file : join(dirname(file), path)
      assert.ok(existsSync(join(ROOT, resolved)), `${file}: link to ${target}`)
      if (anchor !== undefined && resolved.endsWith('.md')) assert.ok(anchors(read(resolved)).has(anchor), `${file}: anchor ${target}`)
    }
  }
})

test('user docs state facts, not history: no issue numbers, issue notes or commit hashes', () => {
  for (const file of written) {
    const text = read(file).replace(/^\[[^\]]+\]: .*$/gm, '')
    assert.doesNotMatch(text, /\bissues? (\d+|notes)\b/i, file)
    assert.doesNotMatch(text, /\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b/, `${file}: a commit hash`)
  }
})

test('docs/architecture.md names only paths that exist (its map of src/ follows the tree)', () => {
  const text = read('docs/architecture.md')
  const map = text.slice(text.indexOf('```\nsrc/'), text.indexOf('```', text.indexOf('```\nsrc/') + 3))
  const named = new Set<string>()
  let folder = ''
  for (const line of map.split('\n').slice(2)) {
    const root = /^(\S+)/.exec(line)
    const top = /^ {2}(\S+)/.exec(line)
    const nested = /^ {4}(\S+\/)/.exec(line)
    if (root?.[1]) named.add(root[1])
    else if (top?.[1]) {
      folder = `src/${top[1]}`
      named.add(folder)
    } else if (nested?.[1]) named.add(`${folder}${nested[1]}`)
  }
  for (const [, path = ''] of text.matchAll(/`((?:src|test|bench|scripts|docs)\/[\w./-]+)`/g)) named.add(path)
  assert.ok(named.size > 30, 'the map was read')
  for (const path of named) assert.ok(existsSync(join(ROOT, path)), `docs/architecture.md names ${path}`)
})
