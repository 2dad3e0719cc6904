import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createCaller, startApp } from '../../support/helper.ts'
import { SKIP_CORPUS, real, upload } from '../../support/convert.ts'
import { formBomb } from '../../support/hostile.ts'
import { FairQueue } from '../../../src/converter/fair.ts'

const IMAGE = '/converter/generateImage'
const PS = '/converter/generatePostscript'

interface Answer {
  readonly status: number
  readonly ms: number
  readonly codes: string[]
  readonly retryAfter: string | null
}

/** send uploads `pdf` and times the whole answer (read to its end) from `t0`. */
async function send(url: string, path: string, key: string, pdf: Buffer, t0: number, fields: Record<string, string> = {}): Promise<Answer> {
  const res = await upload(url, path, key, pdf, fields)
  const body = Buffer.from(await res.arrayBuffer())
  const answer = res.status === 200 ? [] : (JSON.parse(body.toString()) as { code: string }[] | { message: string; code: string })
  // A 429 answers as the gateway's do, {message, code}; a refused document as a list.
  const problems = Array.isArray(answer) ? answer.map((p) => p.code) : [answer.code]
  return { status: res.status, ms: performance.now() - t0, codes: problems, retryAfter: res.headers.get('retry-after') }
}

test("one account's flood of form bombs: the over-limit ones get 429 at once, another account converts next, every bomb is cut at the page limit", {
  skip: SKIP_CORPUS,
}, async (t) => {
  const PAGE_MS = 2000
  const app = await startApp(t, {
    CONVERTER_WORKERS: '2',
    CONVERTER_MAX_PER_ACCOUNT: '4',
    CONVERSION_PAGE_TIMEOUT_MS: String(PAGE_MS),
    CONVERSION_TIMEOUT_MS: '30000',
  })
  const other = await createCaller(app.accounts)
  const small = real('minimal-document.pdf')
  // Both workers started, and what one small conversion takes alone.
  const warm = await Promise.all([0, 1].map(() => send(app.url, IMAGE, other.apiKey, small, performance.now(), { dpi: '72' })))
  assert.deepEqual(
    warm.map((a) => a.status),
    [200, 200],
  )

  const bomb = formBomb()
  const t0 = performance.now()
  const flood = Array.from({ length: 10 }, (_, i) => send(app.url, i % 2 === 0 ? IMAGE : PS, app.key, bomb, t0))
  await new Promise((r) => setTimeout(r, 300))
  const mine = await send(app.url, IMAGE, other.apiKey, small, performance.now(), { dpi: '72' })
  const mineAt = performance.now() - t0
  const answers = await Promise.all(flood)
  t.diagnostic(
    `flood: ${answers.map((a) => `${a.status} at ${a.ms.toFixed(0)} ms`).join(', ')}; the other account's conversion: ${mine.status} in ${mine.ms.toFixed(0)} ms (alone ${Math.max(...warm.map((a) => a.ms)).toFixed(0)} ms), done at ${mineAt.toFixed(0)} ms`,
  )

  const refused = answers.filter((a) => a.status === 429)
  const accepted = answers.filter((a) => a.status !== 429)
  assert.equal(refused.length, 6, 'four places for the account (two running, two waiting); the rest refused')
  for (const a of refused) {
    assert.deepEqual(a.codes, ['CONVERSIONS_PER_ACCOUNT'])
    assert.equal(a.retryAfter, '5')
    assert.ok(a.ms < PAGE_MS, `refused at once, not after a conversion (${a.ms.toFixed(0)} ms)`)
  }
  for (const a of accepted) {
    assert.equal(a.status, 422)
    assert.deepEqual(a.codes, ['CONVERSION_PAGE_TIMEOUT'])
    // Two rounds of the page limit (and a worker's start each), far from CONVERSION_TIMEOUT_MS.
    assert.ok(a.ms < 4 * PAGE_MS + 4000, `cut at the page limit (${a.ms.toFixed(0)} ms)`)
  }
  // Not 503, and not after the backlog: the next free worker is the other account's.
  assert.equal(mine.status, 200)
  assert.ok(mine.ms < PAGE_MS + 4000, `one conversion's time at most (${mine.ms.toFixed(0)} ms)`)
  assert.ok(mineAt < Math.max(...accepted.map((a) => a.ms)), "done before the account's backlog")
  assert.ok(app.logs.some((l) => l.includes('conversion worker replaced') && l.includes(`a page took longer than ${PAGE_MS} ms`)))
})

test('a form bomb is cut short at the page limit on both routes, well before the conversion limit, and the next conversion works', {
  skip: SKIP_CORPUS,
}, async (t) => {
  const app = await startApp(t, { CONVERTER_WORKERS: '1', CONVERSION_PAGE_TIMEOUT_MS: '1000', CONVERSION_TIMEOUT_MS: '20000' })
  const bomb = formBomb()
  for (const path of [IMAGE, PS]) {
    const a = await send(app.url, path, app.key, bomb, performance.now())
    assert.equal(a.status, 422, path)
    assert.deepEqual(a.codes, ['CONVERSION_PAGE_TIMEOUT'])
    assert.ok(a.ms < 6000, `${path}: stopped after ${a.ms.toFixed(0)} ms`)
    const next = await send(app.url, path, app.key, real('minimal-document.pdf'), performance.now())
    assert.equal(next.status, 200, path)
  }
  const res = await upload(app.url, IMAGE, app.key, bomb)
  assert.match(((await res.json()) as { message: string }[])[0]!.message, /limit of 1 seconds/)
})

test('the page limit is per page: a document whose pages each take a while converts in longer than the limit', { skip: SKIP_CORPUS }, async (t) => {
  const PAGE_MS = 1000
  const app = await startApp(t, { CONVERTER_WORKERS: '1', CONVERSION_PAGE_TIMEOUT_MS: String(PAGE_MS) })
  // 16384 squares a page: about a fifth of a second each, a few seconds in all.
  const slow = formBomb(7, 4, 16)
  for (const [path, fields] of [
    [PS, {}],
    [IMAGE, { dpi: '36' }],
  ] as const) {
    const a = await send(app.url, path, app.key, slow, performance.now(), fields)
    t.diagnostic(`${path}: ${a.status} in ${a.ms.toFixed(0)} ms`)
    assert.equal(a.status, 200, `${path}: ${a.codes.join()}`)
    if (path === PS) assert.ok(a.ms > PAGE_MS, `the whole took longer than one page may (${a.ms.toFixed(0)} ms)`)
  }
})

test('the queue gives the next turn to the account with the fewest running, then to the one that waited longest', () => {
  const queue = new FairQueue<string>()
  const running = new Map<string, number>([
    ['a', 2],
    ['b', 0],
    ['c', 0],
  ])
  for (const item of ['a1', 'a2', 'a3']) queue.push('a', item)
  queue.push('b', 'b1')
  queue.push('b', 'b2')
  queue.push('c', 'c1')
  const next = () => queue.shift((account) => running.get(account) ?? 0)
  assert.equal(next(), 'b1', 'b and c run nothing; b came first')
  assert.equal(next(), 'c1', 'c has not had a turn')
  assert.equal(next(), 'b2')
  running.set('a', 0)
  queue.push('d', 'd1')
  assert.equal(next(), 'a1', 'a has waited longest, without a turn')
  assert.equal(next(), 'd1', 'a newcomer before a backlog that has just had a turn')
  assert.equal(queue.remove('a', 'a2'), true)
  assert.equal(queue.remove('a', 'a2'), false)
  assert.equal(queue.size, 1)
  assert.deepEqual(queue.drain(), ['a3'])
  assert.equal(next(), undefined)
})
