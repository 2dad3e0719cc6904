/**
 * The webhooks page's guide is code people paste: its Node and its Python functions, taken from
 * the page as served, must accept a real delivery of this service and refuse a tampered body, a
 * wrong secret, a signature of another event and an old timestamp. Python runs when python3 is
 * on the PATH (Debian has it); without it, that half says so and skips, except in CI
 * (TESSERA_REQUIRE_SERVICES=1), where it fails.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { startApp } from '../../support/helper.ts'
import { signedInClient } from '../../support/portal-helper.ts'
import { factorEvent, Receiver, waitFor } from '../../support/receiver.ts'
import { EVENT_TYPES } from '../../../src/domain/events.ts'

const unescapeHtml = (s: string) =>
  s
    .replace(/&#39;/g, "'")
    .replace(/&quot;/g, '"')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&')

const codeOn = (page: string, id: string) => {
  const m = new RegExp(`<pre id="${id}">([\\s\\S]*?)</pre>`).exec(page)
  assert.ok(m, `the page shows #${id}`)
  return unescapeHtml(m[1]!)
}

const python = spawnSync('python3', ['--version']).status === 0

test("the guide's Node and Python verifiers accept a real delivery and refuse forgeries", async (t) => {
  const app = await startApp(t, { WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_POLL_MS: '50' })
  const receiver = await new Receiver().start()
  t.after(() => receiver.stop())
  const { client } = await signedInClient(app, { role: 'admin' })
  const base = `/portal/accounts/${app.accountId}/webhooks`
  const made = await client.post(base, { url: `http://127.0.0.1:${receiver.port}/in` }, { from: base })
  const secret = /<pre class="secret" id="secret">(whsec_[^<]+)<\/pre>/.exec(made.text)![1]!
  receiver.secret = secret
  await factorEvent(app, 'factor.activated', { detail: { userID: 'ünïcode "42"', factorID: 'fct_1' } })
  await waitFor(() => receiver.deliveries.length > 0, 5000, 'a delivery')
  const [delivery] = receiver.deliveries
  assert.ok(delivery?.payload, 'the specification’s own library verifies it')
  const headers = Object.fromEntries(['webhook-id', 'webhook-timestamp', 'webhook-signature'].map((h) => [h, String(delivery.headers[h])]))

  const page = (await client.get(base)).text
  assert.match(page, /<h2 id="receiving">Receiving events<\/h2>/)
  for (const h of ['webhook-id', 'webhook-timestamp', 'webhook-signature']) assert.match(page, new RegExp(`<dt><code>${h}</code></dt>`))
  const old = String(Number(headers['webhook-timestamp']) - 3600)
  const cases: [string, string, Record<string, string>, string, boolean][] = [
    ['the delivery', secret, headers, delivery.body, true],
    ['a tampered body', secret, headers, delivery.body.replace('fct_1', 'fct_2'), false],
    ['another secret', `whsec_${Buffer.alloc(32, 7).toString('base64')}`, headers, delivery.body, false],
    ['another id', secret, { ...headers, 'webhook-id': 'evt_other' }, delivery.body, false],
    ['an hour-old timestamp', secret, { ...headers, 'webhook-timestamp': old }, delivery.body, false],
    ['no signature', secret, { ...headers, 'webhook-signature': '' }, delivery.body, false],
    ['a garbled signature', secret, { ...headers, 'webhook-signature': 'v1,@@@ v2,abc' }, delivery.body, false],
  ]

  const dir = mkdtempSync(join(tmpdir(), 'tessera-guide-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const nodeFile = join(dir, 'verify.mjs')
  writeFileSync(nodeFile, codeOn(page, 'verify-node'))
  const { verifyWebhook } = (await import(pathToFileURL(nodeFile).href)) as { verifyWebhook: (s: string, h: Record<string, string>, b: string) => boolean }
  for (const [what, key, h, body, expected] of cases) {
    assert.equal(verifyWebhook(key, h, body), expected, `Node: ${what}`)
    assert.equal(verifyWebhook(key, h, Buffer.from(body) as unknown as string), expected, `Node, a Buffer body: ${what}`)
  }

  if (!python) {
    // As the other real tools: CI (TESSERA_REQUIRE_SERVICES=1) fails rather than skip.
    assert.notEqual(process.env.TESSERA_REQUIRE_SERVICES, '1', 'python3 is required to run the Python verifier')
    t.diagnostic('python3 is not on the PATH: the Python verifier was not run')
    return
  }
  const pyFile = join(dir, 'verify.py')
  writeFileSync(
    pyFile,
    `${codeOn(page, 'verify-python')}
import json, sys
for case in json.load(sys.stdin):
    print("true" if verify_webhook(case["secret"], case["headers"], case["body"].encode("utf-8")) else "false")
`,
  )
  const run = spawnSync('python3', [pyFile], { input: JSON.stringify(cases.map(([, key, h, body]) => ({ secret: key, headers: h, body }))), encoding: 'utf8' })
  assert.equal(run.status, 0, run.stderr)
  assert.deepEqual(
    run.stdout.trim().split('\n'),
    cases.map(([, , , , expected]) => String(expected)),
    `Python: ${cases.map(([what]) => what).join(', ')}`,
  )
})

test('the webhooks page offers and explains every event type of the one list, the conversion jobs’ included', async (t) => {
  const app = await startApp(t)
  const { client } = await signedInClient(app, { role: 'admin' })
  const page = (await client.get(`/portal/accounts/${app.accountId}/webhooks`)).text
  const table = /<caption>Event types<\/caption>([\s\S]*?)<\/table>/.exec(page)?.[1] ?? ''
  const offered = [...page.matchAll(/<input type="checkbox" id="type-\d+" name="eventTypes" value="([^"]+)"/g)].map((m) => m[1])
  const explained = [...table.matchAll(/<th scope="row"><code class="id">([^<]+)<\/code><\/th><td>([^<]+)<\/td>/g)].map((m) => [m[1], m[2]])
  assert.deepEqual(offered, [...EVENT_TYPES], 'a box for each type')
  assert.deepEqual(
    explained.map(([type]) => type),
    [...EVENT_TYPES],
    'a row for each type',
  )
  for (const [type, words] of explained) assert.ok((words ?? '').length > 20, `${type} says when it is sent`)
  assert.match(page, /conversion\.succeeded<\/code><\/th><td>A conversion job ended with its result/)
  assert.match(page, /conversion jobs that succeeded or failed/, 'the introduction names them too')
})
