import { test } from 'node:test'
import assert from 'node:assert/strict'
import { PNG } from 'pngjs'
import QRCode from 'qrcode'
import { post, startApp, codes } from '../../support/helper.ts'
import { decodeQr, dataUrlBytes, jsQR } from '../../support/qr.ts'
import { CAPACITY } from '../../../src/totp/qr/matrix.ts'
import { planSymbol } from '../../../src/totp/qr/segments.ts'

/** svgToText rasterises our SVG (one rect, one path of unit-high runs) and decodes it with jsQR. */
function svgToText(svg: string): string {
  const total = Number(/viewBox="0 0 (\d+) \1"/.exec(svg)![1])
  const d = /<path [^>]*d="([^"]*)"/.exec(svg)![1]!
  const scale = 4
  const side = total * scale
  const rgba = new Uint8ClampedArray(side * side * 4).fill(255)
  for (const [, x, y, w] of d.matchAll(/M(\d+) (\d+)h(\d+)v1h-\d+z/g)) {
    for (let py = Number(y) * scale; py < (Number(y) + 1) * scale; py++) {
      for (let px = Number(x) * scale; px < (Number(x) + Number(w)) * scale; px++) rgba.fill(0, (py * side + px) * 4, (py * side + px) * 4 + 3)
    }
  }
  const found = jsQR(rgba, side, side)
  assert.ok(found, 'the SVG holds a readable QR code')
  return Buffer.from(found.binaryData).toString('utf8')
}

test('generateQRCode returns a PNG that a QR decoder reads back, UTF-8 included', async (t) => {
  const app = await startApp(t)
  const data = 'Grüße aus Köln ✓ https://example.com/?a=1&b=2'
  const res = await post(app.url, '/totp/generateQRCode', app.key, { data }, { accept: '*/*' })
  assert.equal(res.status, 200)
  assert.equal(res.headers.get('content-type'), 'image/png')
  assert.equal(res.headers.get('cache-control'), 'no-store')
  const png = Buffer.from(await res.arrayBuffer())
  const { text, width, height } = decodeQr(png)
  assert.equal(text, data)
  assert.equal(width, height)
})

test('size, margin, ecc and colours shape the image', async (t) => {
  const app = await startApp(t)
  const res = await post(app.url, '/totp/generateQRCode', app.key, { data: 'hello', size: '300', margin: '2', ecc: 'h', color: '#1a2b3c', bgcolor: 'ffffff80' })
  assert.equal(res.status, 200)
  const image = PNG.sync.read(Buffer.from(await res.arrayBuffer()))
  assert.equal(image.width, 300)
  assert.equal(image.height, 300)
  // The top-left corner is quiet zone (background), the finder pattern starts after 2 modules.
  assert.deepEqual([...image.data.subarray(0, 4)], [255, 255, 255, 128])
  const total = 21 + 4 // version 1 at level H holds "hello"; 2 modules of margin each side
  const inFinder = Math.floor((2.5 * 300) / total)
  const i = (inFinder * 300 + inFinder) * 4
  assert.deepEqual([...image.data.subarray(i, i + 4)], [0x1a, 0x2b, 0x3c, 255])
})

test('a size too small for the symbol still gives one pixel per module', async (t) => {
  const app = await startApp(t)
  const data = 'x'.repeat(200)
  const res = await post(app.url, '/totp/generateQRCode', app.key, { data, size: '21' })
  const image = PNG.sync.read(Buffer.from(await res.arrayBuffer()))
  const modules = QRCode.create(data, { errorCorrectionLevel: 'M' }).modules.size + 2 * 4
  assert.equal(image.width, modules, 'one pixel per module, quiet zone included')
  assert.equal(decodeQr(Buffer.from(PNG.sync.write(image))).text, data)
})

test('SVG by format or Accept, JSON data URLs by Accept, format wins over Accept', async (t) => {
  const app = await startApp(t)
  const data = 'otpauth://totp/A:b?secret=ABC'
  const svg = await post(app.url, '/totp/generateQRCode', app.key, { data, format: 'svg' })
  assert.equal(svg.headers.get('content-type'), 'image/svg+xml; charset=utf-8')
  assert.equal(svgToText(await svg.text()), data)

  const bySvgAccept = await post(app.url, '/totp/generateQRCode', app.key, { data }, { accept: 'image/svg+xml' })
  assert.equal(bySvgAccept.headers.get('content-type'), 'image/svg+xml; charset=utf-8')

  const json = await post(app.url, '/totp/generateQRCode', app.key, { data }, { accept: 'application/json' })
  assert.equal(json.headers.get('content-type'), 'application/json; charset=utf-8')
  const body = (await json.json()) as { type: string; QRCode: string }
  assert.equal(body.type, 'Success')
  assert.equal(decodeQr(dataUrlBytes(body.QRCode, 'image/png')).text, data)

  const jsonSvg = await post(app.url, '/totp/generateQRCode', app.key, { data, format: 'svg' }, { accept: 'application/json' })
  const svgBody = (await jsonSvg.json()) as { QRCode: string }
  assert.equal(svgToText(dataUrlBytes(svgBody.QRCode, 'image/svg+xml').toString()), data)

  const pngOverSvg = await post(app.url, '/totp/generateQRCode', app.key, { data, format: 'png' }, { accept: 'image/svg+xml' })
  assert.equal(pngOverSvg.headers.get('content-type'), 'image/png')

  const weighted = await post(app.url, '/totp/generateQRCode', app.key, { data }, { accept: 'image/png;q=0.5, application/json' })
  assert.equal(weighted.headers.get('content-type'), 'application/json; charset=utf-8')
})

test('data over the QR capacity of the level is a 400 naming the limit; a lower level may hold it', async (t) => {
  const app = await startApp(t)
  const data = 'x'.repeat(2332) // binary mode: level M holds 2331 bytes, L 2953
  const res = await post(app.url, '/totp/generateQRCode', app.key, { data })
  assert.equal(res.status, 400)
  const [problem] = (await res.json()) as { code: string; message: string }[]
  assert.equal(problem!.code, 'DATA_TOO_LONG')
  assert.match(problem!.message, /level M: the limit is 2331 bytes/)
  const atLimit = await post(app.url, '/totp/generateQRCode', app.key, { data: data.slice(1) })
  assert.equal(atLimit.status, 200)
  const low = await post(app.url, '/totp/generateQRCode', app.key, { data, ecc: 'L' })
  assert.equal(low.status, 200)
  assert.equal(decodeQr(Buffer.from(await low.arrayBuffer())).text, data)
  assert.deepEqual(await codes(await post(app.url, '/totp/generateQRCode', app.key, { data: 'x'.repeat(2954), ecc: 'L' })), ['DATA_TOO_LONG'])
})

test('the capacity check is exact: the largest data of each kind fits at every level, one character more does not', async (t) => {
  const app = await startApp(t)
  const kinds = { bytes: 'x', alphanumeric: 'A', numeric: '7' } as const
  for (const ecc of ['L', 'M', 'Q', 'H'] as const) {
    for (const [kind, ch] of Object.entries(kinds) as [keyof typeof kinds, string][]) {
      const limit = CAPACITY[ecc][kind]
      const fits = await post(app.url, '/totp/generateQRCode', app.key, { data: ch.repeat(limit), ecc })
      assert.equal(fits.status, 200, `${limit} ${kind} at ${ecc} fit`)
      assert.equal(QRCode.create(ch.repeat(limit), { errorCorrectionLevel: ecc }).version, 40, 'the encoder agrees: version 40')
      assert.deepEqual(
        await codes(await post(app.url, '/totp/generateQRCode', app.key, { data: ch.repeat(limit + 1), ecc })),
        ['DATA_TOO_LONG'],
        `${limit + 1} ${kind} at ${ecc}`,
      )
    }
  }
  // UTF-8 counts in bytes: 777 three-byte characters are 2331 bytes.
  assert.equal((await post(app.url, '/totp/generateQRCode', app.key, { data: '✓'.repeat(777) })).status, 200)
  assert.deepEqual(await codes(await post(app.url, '/totp/generateQRCode', app.key, { data: '✓'.repeat(778) })), ['DATA_TOO_LONG'])
})

test('mixed text is split into numeric, alphanumeric and byte segments that a decoder reads back', async (t) => {
  const app = await startApp(t)
  for (const data of [
    `ORDER 12345678901234567890 https://example.com/a?b=1 ${'0123456789'.repeat(30)} Grüße ✓ 😀 ${'ABCDEF:/'.repeat(20)}`,
    'a1B2c3'.repeat(60),
  ]) {
    const res = await post(app.url, '/totp/generateQRCode', app.key, { data, ecc: 'L' })
    assert.equal(res.status, 200)
    assert.equal(decodeQr(Buffer.from(await res.arrayBuffer())).text, data)
  }
})

test('the plan never refuses what qrcode itself encodes, and never needs a larger version', () => {
  const alphabet = ['a', 'B', '1', '2', '3', 'Z', ' ', ':', 'é', '✓', '😀', '%', 'x', '9']
  let x = 7
  const random = () => {
    x = (x * 1103515245 + 12345) % 2147483648
    return x / 2147483648
  }
  for (let i = 0; i < 150; i++) {
    const length = 1 + Math.floor(random() ** 2 * 3000)
    const digits = random()
    let text = ''
    for (let j = 0; j < length; j++) text += random() < digits ? alphabet[2 + Math.floor(random() * 2)] : alphabet[Math.floor(random() * alphabet.length)]
    for (const ecc of ['L', 'M', 'Q', 'H'] as const) {
      let theirs: number | null = null
      try {
        theirs = QRCode.create(text, { errorCorrectionLevel: ecc }).version
      } catch {
        /* too big for qrcode's own split */
      }
      const ours = planSymbol(text, ecc)
      if (theirs !== null) assert.ok(ours !== null && ours.version <= theirs, `${ecc}, ${length} characters: qrcode version ${theirs}, ours ${ours?.version}`)
    }
  }
})

test('large QR codes past the drawing queue get 503 QR_BUSY with Retry-After; small ones are drawn in place meanwhile', async (t) => {
  const app = await startApp(t, { QR_WORKERS: '1', QR_QUEUE_PER_WORKER: '1', PLAN_RATE: '0' })
  const data = 'x'.repeat(2000)
  const answers = await Promise.all(Array.from({ length: 8 }, () => post(app.url, '/totp/generateQRCode', app.key, { data, size: '2048' })))
  const statuses = answers.map((r) => r.status)
  assert.ok(statuses.filter((s) => s === 200).length >= 2, `one drawn, one waiting: ${statuses}`)
  const busy = answers.find((r) => r.status === 503)
  assert.ok(busy, `the rest turned away: ${statuses}`)
  assert.equal(busy.headers.get('retry-after'), '1')
  assert.deepEqual(await codes(busy), ['QR_BUSY'])
  const drawn = answers.find((r) => r.status === 200)!
  assert.equal(decodeQr(Buffer.from(await drawn.arrayBuffer())).text, data)
  assert.equal((await post(app.url, '/totp/generateQRCode', app.key, { data: 'small' })).status, 200)
})
