/**
 * A 200 is never cut short by a damaged page: every page asked for is loaded (and, for a page
 * operation, checked to be a page) before the answer begins, so a page the document cannot give
 * is 422 PAGE_UNREADABLE naming it. Fuzzed copies of a 100-page document (fixed seeds) through
 * text, split, images and PostScript: no 5xx, every 200 whole. The one answer that may still be
 * cut is documented: a streamed answer that passes MAX_OUTPUT_BYTES.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { startApp } from '../../support/helper.ts'
import { unzip, upload } from '../../support/convert.ts'
import { fuzzed, textPages } from '../../support/hostile.ts'

const CASES = [
  ['/converter/extractText', {}, 'json'],
  ['/converter/extractText', { format: 'text' }, 'text'],
  ['/converter/split', { every: '1' }, 'zip'],
  ['/converter/generateImage', { dpi: '36' }, 'zip'],
  ['/converter/generatePostscript', {}, 'ps'],
] as const

/** whole: what is wrong with a 200's body (null: nothing), as its kind is read. */
function whole(kind: (typeof CASES)[number][2], body: Buffer, pages: number): string | null {
  try {
    if (kind === 'json') return (JSON.parse(body.toString()) as unknown[]).length === pages ? null : 'not every page'
    if (kind === 'text') return body.toString().split('\f').length === pages + 1 ? null : 'not every page'
    if (kind === 'zip') return unzip(body).length === pages ? null : 'not every file'
    return body.subarray(-4096).toString('latin1').includes('%%EOF') ? null : 'no %%EOF'
  } catch (error) {
    return String(error)
  }
}

test('fuzzed 100-page documents: no 5xx, no 200 cut short; pages that cannot be read are 422 PAGE_UNREADABLE before the answer', {
  timeout: 300_000,
}, async (t) => {
  const app = await startApp(t, { PLAN_RATE: '0' })
  const base = textPages(100)
  const tally = new Map<string, number>()
  const problems: string[] = []
  for (let seed = 1; seed <= 60; seed++) {
    const pdf = fuzzed(base, seed)
    for (const [path, fields, kind] of CASES) {
      const res = await upload(app.url, path, app.key, pdf, fields)
      let body: Buffer
      try {
        body = Buffer.from(await res.arrayBuffer())
      } catch {
        problems.push(`seed ${seed} ${path} ${JSON.stringify(fields)}: ${res.status} cut short`)
        continue
      }
      const code = res.status === 200 ? 'ok' : (JSON.parse(body.toString()) as { code: string }[])[0]!.code
      tally.set(`${res.status} ${code}`, (tally.get(`${res.status} ${code}`) ?? 0) + 1)
      if (res.status >= 500) problems.push(`seed ${seed} ${path}: ${res.status} ${body.toString().slice(0, 200)}`)
      if (res.status === 200) {
        const wrong = whole(kind, body, Number(res.headers.get('x-page-count')))
        if (wrong !== null) problems.push(`seed ${seed} ${path} ${JSON.stringify(fields)}: 200 with ${body.length} bytes, ${wrong}`)
      }
    }
  }
  t.diagnostic([...tally].map(([k, n]) => `${k}: ${n}`).join(', '))
  assert.deepEqual(problems, [])
  assert.ok((tally.get('422 PAGE_UNREADABLE') ?? 0) > 0, 'some copies have pages that cannot be read')
})
