/**
 * A job's sourceUrl and resultUrl under the SSRF rule, through real HTTP, with names resolved
 * by the lookup the test gives the node (no DNS): a name that resolves to a private address is
 * refused, and neither the answer, the job's stored error nor the log says which address, or
 * what kind; local names however spelt and the IPv6 forms of IPv4 are refused unlooked-up.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { startApp, testClock, type Running } from '../../support/helper.ts'
import { waitFor } from '../../support/receiver.ts'
import type { Lookup } from '../../../src/webhooks/address.ts'

const INTERNAL = '10.1.2.3'
const PUBLIC = '93.184.215.14'

const json = (app: Running, body: unknown) =>
  fetch(`${app.url}/converter/jobs`, { method: 'POST', headers: { 'x-api-key': app.key, 'content-type': 'application/json' }, body: JSON.stringify(body) })

/** A resolver as the test needs it: internal.example.com is private; rebind.example.com is public when first asked, private after. */
function resolver() {
  const asked: string[] = []
  const lookup: Lookup = async (host) => {
    asked.push(host)
    const name = host.replace(/\.$/, '')
    if (name === 'internal.example.com') return [{ address: INTERNAL, family: 4 }]
    if (name === 'mapped.example.com') return [{ address: `::ffff:${INTERNAL}`, family: 6 }]
    if (name === 'rebind.example.com') return [{ address: asked.filter((h) => h === host).length === 1 ? PUBLIC : INTERNAL, family: 4 }]
    return [{ address: PUBLIC, family: 4 }]
  }
  return { asked, lookup }
}

test('a sourceUrl or resultUrl whose name resolves to a private address is refused without saying which, or what kind', async (t) => {
  const { lookup } = resolver()
  const app = await startApp(t, { JOB_WORKERS: '0', PLAN_RATE: '0' }, testClock(), { lookup })
  for (const host of ['internal.example.com', 'internal.example.com.', 'mapped.example.com']) {
    const source = await json(app, { operation: 'image', sourceUrl: `https://${host}/doc.pdf` })
    const text = await source.text()
    assert.equal(source.status, 400, text)
    const [problem] = JSON.parse(text) as { code: string; message: string }[]
    assert.deepEqual(
      [problem!.code, problem!.message],
      [
        'SOURCE_URL_INVALID',
        `sourceUrl must reach a public address: ${host} resolves to an address that is not public (for development, WEBHOOK_ALLOW_PRIVATE=true on the server allows it).`,
      ],
    )
    const result = await json(app, { operation: 'image', sourceUrl: 'https://files.example.com/doc.pdf', resultUrl: `https://${host}/out` })
    const resultText = await result.text()
    assert.equal((JSON.parse(resultText) as { code: string }[])[0]!.code, 'RESULT_URL_INVALID')
    for (const answer of [text, resultText]) assert.ok(!answer.includes(INTERNAL) && !/private|a00:1/.test(answer), answer)
  }
  assert.ok(!app.logs.join('\n').includes(INTERNAL), 'nor the log')
})

test('local names, with their trailing dot or not, and the IPv6 forms of IPv4 are refused before any lookup', async (t) => {
  const { asked, lookup } = resolver()
  const app = await startApp(t, { JOB_WORKERS: '0', PLAN_RATE: '0' }, testClock(), { lookup })
  for (const url of [
    'https://localhost./doc.pdf',
    'https://example.internal/doc.pdf',
    'https://example.internal./doc.pdf',
    'https://printer.local./doc.pdf',
    'https://nas.home.arpa/doc.pdf',
    'https://intranet./doc.pdf',
    'https://[::ffff:8.8.8.8]/doc.pdf',
    'https://[::ffff:0:808:808]/doc.pdf',
    'https://[2001::1]/doc.pdf',
    'https://[2002:a01:203::1]/doc.pdf',
  ]) {
    const res = await json(app, { operation: 'image', sourceUrl: url })
    assert.equal(res.status, 400, url)
    assert.deepEqual(
      ((await res.json()) as { code: string }[]).map((p) => p.code),
      ['SOURCE_URL_INVALID'],
      url,
    )
  }
  assert.deepEqual(asked, [])
  assert.equal((await json(app, { operation: 'image', sourceUrl: 'https://files.example.com./doc.pdf' })).status, 202, 'a public name, trailing dot')
})

test('a name that turns private between submission and fetch fails the job; its error, stored or answered, and the log keep the address to themselves', async (t) => {
  const { lookup } = resolver()
  const app = await startApp(t, { JOB_POLL_MS: '50', PLAN_RATE: '0' }, testClock(), { lookup })
  const submitted = await json(app, { operation: 'image', sourceUrl: 'https://rebind.example.com/doc.pdf?X-Amz-Signature=secret' })
  assert.equal(submitted.status, 202, await submitted.clone().text())
  const { jobID } = (await submitted.json()) as { jobID: string }
  let text = ''
  await waitFor(
    async () => {
      text = await (await fetch(`${app.url}/converter/jobs/${jobID}`, { headers: { 'x-api-key': app.key } })).text()
      return /"status":"failed"/.test(text)
    },
    30_000,
    'the job to fail',
  )
  const body = JSON.parse(text) as { error: { code: string; message: string } }
  assert.deepEqual(body.error, {
    code: 'SOURCE_FETCH_FAILED',
    message: 'The document could not be fetched from sourceUrl: rebind.example.com resolves to an address that is not public.',
  })
  const stored = JSON.stringify(await app.store.jobs.get(app.accountId, jobID))
  assert.match(stored, /SOURCE_FETCH_FAILED/)
  for (const where of [text, stored, app.logs.join('\n')]) assert.ok(!where.includes(INTERNAL) && !where.includes('private address'), where.slice(0, 2000))
})
