import { test } from 'node:test'
import assert from 'node:assert/strict'
import { get, startApp } from '../../support/helper.ts'
import { SKIP_CORPUS, damaged, damagedFiles, real, upload } from '../../support/convert.ts'

const TIMEOUT_MS = 15_000

test('every damaged or hostile PDF gets a conversion or a 4xx JSON error within the time limit, and the service keeps serving', {
  skip: SKIP_CORPUS,
  timeout: 1_200_000,
}, async (t) => {
  const app = await startApp(t, { CONVERSION_TIMEOUT_MS: String(TIMEOUT_MS) })
  const tally = new Map<string, number>()
  const count = (key: string) => tally.set(key, (tally.get(key) ?? 0) + 1)
  const files = damagedFiles()
  assert.ok(files.length >= 90, `${files.length} files`)
  for (const name of files) {
    for (const [path, fields] of [
      ['/converter/generateImage', { dpi: '36' }],
      // A thumbnail written by libvips and joined into one TIFF: the other formats' path.
      ['/converter/generateImage', { format: 'tiff', width: '48' }],
      ['/converter/generatePostscript', {}],
      ['/converter/extractText', { format: 'structured' }],
      ['/converter/split', { every: '1' }],
      ['/converter/rotate', { angle: '90' }],
      ['/converter/flatten', {}],
      ['/converter/compress', { preset: 'screen' }],
    ] as const) {
      // The app's clock stands still in tests: moved on a second a call, the account's throttle refills as it would.
      app.clock.advance(1000)
      const started = performance.now()
      const res = await upload(app.url, path, app.key, damaged(name), fields, name)
      const body = Buffer.from(await res.arrayBuffer())
      const seconds = (performance.now() - started) / 1000
      const what = `${name} ${path}: ${res.status} in ${seconds.toFixed(1)} s`
      assert.ok(res.status === 200 || (res.status >= 400 && res.status < 500), what)
      assert.ok(seconds < TIMEOUT_MS / 1000 + 5, `${what}: over the time limit`)
      if (res.status === 200) {
        assert.ok(body.length > 0, what)
        count(`${path.split('/').pop()} converted`)
      } else {
        const problems = JSON.parse(body.toString()) as { type: string; code: string }[]
        assert.ok(Array.isArray(problems), `${what}: ${body.toString().slice(0, 200)}`)
        assert.equal(problems[0]!.type, 'Error', what)
        count(`${path.split('/').pop()} ${res.status} ${problems[0]!.code}`)
      }
    }
  }
  assert.equal((await get(app.url, '/totp/ping', app.key)).status, 200, 'ping after the sweep')
  t.diagnostic(
    [...tally]
      .sort()
      .map(([k, v]) => `${k}: ${v}`)
      .join('\n'),
  )
})

test('every damaged or hostile PDF merged with a good one gets a PDF or a 4xx naming the document', { skip: SKIP_CORPUS, timeout: 600_000 }, async (t) => {
  const app = await startApp(t, { CONVERSION_TIMEOUT_MS: String(TIMEOUT_MS) })
  const tally = new Map<string, number>()
  for (const name of damagedFiles()) {
    app.clock.advance(1000)
    const form = new FormData()
    form.append('pdfDocument', new Blob([new Uint8Array(real('minimal-document.pdf'))]), 'good.pdf')
    form.append('pdfDocument', new Blob([new Uint8Array(damaged(name))]), name)
    const res = await fetch(`${app.url}/converter/merge`, { method: 'POST', headers: { 'x-api-key': app.key }, body: form })
    const body = Buffer.from(await res.arrayBuffer())
    const what = `${name}: ${res.status} ${body.subarray(0, 200).toString()}`
    assert.ok(res.status === 200 || (res.status >= 400 && res.status < 500), what)
    const key = res.status === 200 ? 'merged' : `${res.status} ${(JSON.parse(body.toString()) as { code: string }[])[0]!.code}`
    tally.set(key, (tally.get(key) ?? 0) + 1)
  }
  assert.equal((await get(app.url, '/totp/ping', app.key)).status, 200, 'ping after the sweep')
  t.diagnostic([...tally].map(([k, v]) => `${k}: ${v}`).join('\n'))
})
