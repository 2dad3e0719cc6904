/** Malformed bodies of every kind on both converter routes: a 4xx in the catalogue's shape, never a 5xx. */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { startApp } from '../../support/helper.ts'
import { catalogue, ERROR_CODES } from '../../../src/errors/catalogue.ts'

const ROUTES = [
  '/converter/generateImage',
  '/converter/generatePostscript',
  '/converter/extractText',
  '/converter/merge',
  '/converter/split',
  '/converter/compress',
]
const B = 'XyZzY'
const part = (name: string, filename?: string) =>
  `--${B}\r\nContent-Disposition: form-data; name="${name}"${filename ? `; filename="${filename}"` : ''}\r\n${filename ? 'Content-Type: application/pdf\r\n' : ''}\r\n`

/** Each case: a name, the content-type header (null: none), the body. */
const CASES: [string, string | null, string | Buffer][] = [
  ['multipart without a boundary', 'multipart/form-data', 'xx'],
  ['multipart with an empty boundary', 'multipart/form-data; boundary=', 'xx'],
  ['multipart, empty body', `multipart/form-data; boundary=${B}`, ''],
  ['multipart, garbage body', `multipart/form-data; boundary=${B}`, Buffer.from('\x00\xff garbage \r\n\r\n--nope\r\n'.repeat(50), 'latin1')],
  ['multipart, a file part opened and never closed', `multipart/form-data; boundary=${B}`, `${part('pdfDocument', 'a.pdf')}%PDF-1.7\n1 0 obj`],
  ['multipart, a field part opened and never closed', `multipart/form-data; boundary=${B}`, `${part('dpi')}72`],
  ['multipart, headers never ended', `multipart/form-data; boundary=${B}`, `--${B}\r\nContent-Disposition: form-data; name="pdfDocument"`],
  [
    'multipart, a huge header line',
    `multipart/form-data; boundary=${B}`,
    `--${B}\r\nContent-Disposition: form-data; name="${'a'.repeat(100_000)}"\r\n\r\nx\r\n--${B}--\r\n`,
  ],
  ['multipart, a part without a name', `multipart/form-data; boundary=${B}`, `--${B}\r\nContent-Type: text/plain\r\n\r\nx\r\n--${B}--\r\n`],
  ['multipart, only the closing delimiter', `multipart/form-data; boundary=${B}`, `--${B}--\r\n`],
  ['multipart/mixed', `multipart/mixed; boundary=${B}`, `${part('pdfDocument', 'a.pdf')}%PDF-1.7\r\n--${B}--\r\n`],
  ['no content type', null, '%PDF-1.7'],
  ['wrong content type: JSON', 'application/json', '{"pdfDocument": "x"}'],
  ['wrong content type: broken JSON', 'application/json', '{"pdfDocument": '],
  ['wrong content type: a form', 'application/x-www-form-urlencoded', 'pdfDocument=%PDF-1.7'],
  ['wrong content type: text', 'text/plain', 'hello'],
  ['wrong content type: PDF', 'application/pdf', '%PDF-1.7\n'],
  ['garbage content type', ';;;=/==', 'x'],
  ['multipart with an unterminated quoted boundary', 'multipart/form-data; boundary="abc', 'x'],
]

test('malformed bodies on the converter routes get a catalogue 4xx, never a 5xx', async (t) => {
  const app = await startApp(t)
  for (const route of ROUTES) {
    for (const [name, type, body] of CASES) {
      const headers: Record<string, string> = { 'x-api-key': app.key }
      if (type !== null) headers['content-type'] = type
      const res = await fetch(app.url + route, { method: 'POST', headers, body: typeof body === 'string' ? body : new Uint8Array(body) }).catch(
        (e: unknown) => e as Error,
      )
      if (res instanceof Error) assert.fail(`${route} ${name}: ${res.message}`)
      const text = await res.text()
      assert.ok(res.status >= 400 && res.status < 500, `${route} ${name}: ${res.status} ${text}`)
      const problems = JSON.parse(text) as { type: string; code: string; message: string }[]
      assert.ok(Array.isArray(problems) && problems.length > 0, `${route} ${name}: ${text}`)
      for (const p of problems) {
        assert.equal(p.type, 'Error')
        assert.ok(ERROR_CODES.includes(p.code as never), `${route} ${name}: ${p.code}`)
        assert.equal(catalogue[p.code as keyof typeof catalogue].status, res.status, `${route} ${name}: status of ${p.code}`)
      }
      t.diagnostic(`${route} ${name}: ${res.status} ${problems.map((p) => p.code).join(',')}`)
    }
  }
  assert.ok(!app.logs.some((l) => /"level":50/.test(l)), 'no error logged')
})
