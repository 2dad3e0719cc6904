/**
 * The options each conversion operation takes (src/converter/route-fields.ts): a field of
 * another operation is refused with 400 OPTION_NOT_TAKEN naming it and the operation, by the
 * route's multipart upload and by a job, as a form or a JSON body, never ignored; what Renda.io
 * clients send generateImage and generatePostscript is still taken; and the OpenAPI document
 * gives each route the fields the table gives it.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { startApp } from '../../support/helper.ts'
import { upload } from '../../support/convert.ts'
import { filledForm } from '../../support/pdf-writer.ts'
import { FIELDS_TAKEN, OPERATION_ROUTES, OPTION_FIELDS, type OptionField } from '../../../src/converter/route-fields.ts'
import { JOB_OPERATIONS, type JobOperation } from '../../../src/domain/jobs.ts'

const PDF = filledForm([{ lines: [{ text: 'A page of text', x: 72, y: 720 }], fields: [] }])

/** A value each field takes where it is taken. */
const VALUES: Readonly<Record<OptionField, string>> = {
  dpi: '150',
  pages: '1',
  colorMode: 'gray',
  password: 'secret',
  format: 'png',
  width: '100',
  height: '100',
  quality: '80',
  compression: 'lzw',
  bitDepth: '8',
  ranges: '1',
  every: '1',
  angle: '90',
  preset: 'ebook',
}

/** What each operation needs besides its document to be accepted (a merge: a second document). */
const NEEDS: Readonly<Partial<Record<JobOperation, Record<string, string>>>> = { split: { every: '1' }, rotate: { angle: '90' } }

const notTaken = (operation: JobOperation) => OPTION_FIELDS.filter((field) => !FIELDS_TAKEN[operation].includes(field))

/** form: a multipart body with the document (twice for a merge) and the fields. */
function form(operation: JobOperation, fields: Record<string, string>): FormData {
  const body = new FormData()
  for (let i = 0; i < (operation === 'merge' ? 2 : 1); i++) body.append('pdfDocument', new Blob([new Uint8Array(PDF)], { type: 'application/pdf' }), 'a.pdf')
  for (const [k, v] of Object.entries(fields)) body.append(k, v)
  return body
}

async function problems(res: Response): Promise<{ code: string; message: string }[]> {
  assert.equal(res.status, 400, `${res.status} ${res.headers.get('content-type')}`)
  return (await res.json()) as { code: string; message: string }[]
}

test('every operation refuses each field it does not take, as a route, as a job form and as a JSON job, naming the field and the operation', async (t) => {
  const app = await startApp(t, { JOB_WORKERS: '0', PLAN_RATE: '0', WEBHOOK_ALLOW_PRIVATE: 'true' })
  const headers = { 'x-api-key': app.key }
  let refused = 0
  for (const operation of JOB_OPERATIONS) {
    const route = OPERATION_ROUTES[operation]
    for (const field of notTaken(operation)) {
      const fields = { ...NEEDS[operation], [field]: VALUES[field] }
      const sync = await fetch(`${app.url}/converter/${route}`, { method: 'POST', headers, body: form(operation, fields) })
      assert.deepEqual(
        await problems(sync),
        [{ type: 'Error', code: 'OPTION_NOT_TAKEN', message: `${field} is not an option of ${route}.` }],
        `${route} ${field}`,
      )

      const job = await fetch(`${app.url}/converter/jobs`, { method: 'POST', headers, body: form(operation, { operation, ...fields }) })
      assert.deepEqual(
        await problems(job),
        [{ type: 'Error', code: 'OPTION_NOT_TAKEN', message: `${field} is not an option of ${operation}.` }],
        `${operation} job ${field}`,
      )

      // A merge's documents are uploaded: as JSON it is refused its sourceUrl too, and its documents.
      const json = await fetch(`${app.url}/converter/jobs`, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json' },
        body: JSON.stringify({ operation, sourceUrl: 'https://127.0.0.1/a.pdf', ...fields }),
      })
      const found = await problems(json)
      assert.ok(
        found.some((p) => p.code === 'OPTION_NOT_TAKEN' && p.message === `${field} is not an option of ${operation}.`),
        `${operation} JSON job ${field}: ${JSON.stringify(found)}`,
      )
      if (operation !== 'merge') assert.equal(found.length, 1, `${operation} JSON job ${field}: ${JSON.stringify(found)}`)
      refused++
    }
  }
  t.diagnostic(`${refused} fields refused by each door`)
  // Every field is refused by some operation, and all at once: two fields, two problems, a bad value of a field not taken only refused.
  const twice = await upload(app.url, '/converter/extractText', app.key, PDF, { dpi: 'abc', colorMode: 'gray' })
  assert.deepEqual(
    (await problems(twice)).map((p) => p.message),
    ['dpi is not an option of extractText.', 'colorMode is not an option of extractText.'],
  )
  // An empty field is no field.
  assert.equal((await upload(app.url, '/converter/flatten', app.key, PDF, { pages: '', angle: ' ' })).status, 200)
})

test('what Renda.io clients send generateImage and generatePostscript is taken: dpi, pages, colorMode and password on both', async (t) => {
  const app = await startApp(t, { PLAN_RATE: '0' })
  for (const route of ['generateImage', 'generatePostscript']) {
    const res = await upload(app.url, `/converter/${route}`, app.key, PDF, { dpi: '100', pages: '1', colorMode: 'gray', password: '' })
    assert.equal(res.status, 200, `${route}: ${res.status}`)
    await res.arrayBuffer()
  }
  // A bad dpi is still a bad dpi on generatePostscript, though it changes nothing there.
  const bad = await upload(app.url, '/converter/generatePostscript', app.key, PDF, { dpi: '9000' })
  assert.deepEqual(
    (await problems(bad)).map((p) => p.code),
    ['DPI_INVALID'],
  )
})

test('the OpenAPI document gives each route the fields the table gives its operation', async (t) => {
  const app = await startApp(t)
  const doc = (await (await fetch(`${app.url}/openapi.json`)).json()) as {
    paths: Record<string, { post: { requestBody: { content: Record<string, { schema: { properties: Record<string, unknown> } }> } } }>
  }
  for (const operation of JOB_OPERATIONS) {
    const route = OPERATION_ROUTES[operation]
    const { properties } = doc.paths[`/converter/${route}`]!.post.requestBody.content['multipart/form-data']!.schema
    assert.deepEqual(
      Object.keys(properties)
        .filter((field) => field !== 'pdfDocument')
        .sort(),
      [...FIELDS_TAKEN[operation]].sort(),
      route,
    )
  }
})
