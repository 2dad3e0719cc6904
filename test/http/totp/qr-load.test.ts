/**
 * Long QR data must not hold the event loop (issue 11, finding 4): 40 clients sending data
 * that does not fit, or the largest data that fits, while a ping is sent every 20 ms. Before
 * the fix, the first took pings to 4.6-7.1 s and the second to a p99 of 3.4 s.
 *
 * The CPU is shared (other processes, the load's own thread, the QR worker): a bound is
 * checked over up to five rounds and holds when one round meets it; every round's figures
 * are reported. The bounds are 30 times below what the unfixed code gives. A ping waits
 * behind the 40 requests in flight whatever they ask, and on a slow or busy machine that
 * alone can pass 100 ms: data that fits in no symbol is also held against a baseline
 * measured in the same round, the same bodies refused before any QR work (a bad `format`).
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { startApp, post } from '../../support/helper.ts'
import { pingLatencies, percentile, startLoad } from '../../support/load.ts'
import { planSymbol } from '../../../src/totp/qr/segments.ts'

const CLIENTS = 40
const ROUNDS = 5

/** mixedText is letters of both cases and digits, at random: the text whose segments `qrcode` took longest to choose. */
function mixedText(length: number, seed = 1): string {
  const alphabet = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'
  let x = seed
  let out = ''
  for (let i = 0; i < length; i++) {
    x = (x * 1103515245 + 12345) % 2147483648
    out += alphabet[x % alphabet.length]
  }
  return out
}

/** largestFitting is the longest prefix of `text` that fits at level M. */
function largestFitting(text: string): string {
  let low = 1
  let high = text.length
  while (low < high) {
    const mid = Math.ceil((low + high) / 2)
    if (planSymbol(text.slice(0, mid), 'M') !== null) low = mid
    else high = mid - 1
  }
  return text.slice(0, low)
}

interface Round {
  max: number
  p99: number
  median: number
  statuses: Record<string, number>
}

async function underLoad(url: string, key: string, data: string, extra: Record<string, string> = {}): Promise<Round> {
  const load = await startLoad({
    url,
    path: '/totp/generateQRCode',
    connections: CLIENTS,
    headers: { 'x-api-key': key, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ data, ...extra }).toString(),
  })
  await new Promise((resolve) => setTimeout(resolve, 500)) // the server's code warm (JIT) under this load
  const latencies = await pingLatencies(url, '/totp/ping', { 'x-api-key': key }, 20, 2000)
  const statuses = await load.stop()
  return { max: Math.max(...latencies), p99: percentile(latencies, 99), median: percentile(latencies, 50), statuses }
}

async function rounds(t: { diagnostic(message: string): void }, url: string, key: string, data: string, holds: (r: Round) => boolean): Promise<Round[]> {
  const seen: Round[] = []
  for (let i = 0; i < ROUNDS; i++) {
    const round = await underLoad(url, key, data)
    seen.push(round)
    t.diagnostic(
      `round ${i + 1}: ping median ${round.median.toFixed(1)} ms, p99 ${round.p99.toFixed(1)} ms, max ${round.max.toFixed(1)} ms; answers ${JSON.stringify(round.statuses)}`,
    )
    if (holds(round)) break
  }
  return seen
}

test('40 clients sending QR data that fits in no symbol: a ping every 20 ms never takes over 100 ms, or over 1.5 times its wait behind the same bodies refused before any QR work', async (t) => {
  const app = await startApp(t, { PLAN_RATE: '0' })
  const data = mixedText(15000)
  const seen: { round: Round; baseline: Round }[] = []
  for (let i = 0; i < ROUNDS; i++) {
    const baseline = await underLoad(app.url, app.key, data, { format: 'bogus' })
    const round = await underLoad(app.url, app.key, data)
    seen.push({ round, baseline })
    t.diagnostic(
      `round ${i + 1}: ping median ${round.median.toFixed(1)} ms, p99 ${round.p99.toFixed(1)} ms, max ${round.max.toFixed(1)} ms; ` +
        `behind bodies refused for their format: median ${baseline.median.toFixed(1)} ms, max ${baseline.max.toFixed(1)} ms; answers ${JSON.stringify(round.statuses)}`,
    )
    assert.deepEqual(Object.keys(round.statuses), ['400'], 'every answer is DATA_TOO_LONG')
    assert.deepEqual(Object.keys(baseline.statuses), ['400'], 'every baseline answer is FORMAT_INVALID')
    if (round.max <= 100 || round.max <= 1.5 * baseline.max) break
  }
  assert.ok(
    seen.some(({ round, baseline }) => round.max <= 100 || round.max <= 1.5 * baseline.max),
    `ping max per round: ${seen.map(({ round, baseline }) => `${round.max.toFixed(0)} (baseline ${baseline.max.toFixed(0)})`).join(', ')} ms`,
  )
})

test('40 clients sending the largest QR data that fits: ping p99 stays under 150 ms', async (t) => {
  const app = await startApp(t, { PLAN_RATE: '0' })
  const data = largestFitting(mixedText(4000))
  const over = await post(app.url, '/totp/generateQRCode', app.key, { data: `${data}x` })
  assert.equal(over.status, 400, 'one character more does not fit')
  const seen = await rounds(t, app.url, app.key, data, (r) => r.p99 < 150)
  for (const round of seen) assert.deepEqual(Object.keys(round.statuses), ['200'], 'every drawing is answered')
  assert.ok(
    seen.some((r) => r.p99 < 150),
    `ping p99 per round: ${seen.map((r) => r.p99.toFixed(0)).join(', ')} ms`,
  )
})
