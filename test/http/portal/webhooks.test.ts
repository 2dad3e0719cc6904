/**
 * The portal's webhooks page over HTTP: owners and admins add an endpoint (its secret shown
 * once, in a no-store answer), see it listed without the secret, read its delivery log, send
 * a delivery again and delete it behind a confirmation; developers are refused, forged forms
 * change nothing, what a user typed is escaped, and every change is in the audit trail.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { startApp } from '../../support/helper.ts'
import { signedInClient } from '../../support/portal-helper.ts'
import { Receiver, waitFor } from '../../support/receiver.ts'

const hooksOf = (id: string) => `/portal/accounts/${id}/webhooks`

test('portal webhooks: add (secret once), list, deliveries, send again, delete; roles, CSRF and escaping', async (t) => {
  const app = await startApp(t, { WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_POLL_MS: '50' })
  const receiver = await new Receiver().start()
  t.after(() => receiver.stop())
  const { client } = await signedInClient(app, { role: 'admin' })
  const base = hooksOf(app.accountId)
  const page = await client.get(base)
  assert.equal(page.status, 200)
  assert.match(page.text, /<a href="[^"]*\/webhooks" aria-current="page">Webhooks<\/a>/, 'in the account navigation')
  assert.match(page.text, /<label for="url">URL<\/label>/)

  const bad = await client.post(base, { url: 'ftp://x.example/<script>' })
  assert.equal(bad.status, 422)
  assert.match(bad.text, /aria-invalid="true"/)
  assert.ok(!bad.text.includes('<script>'), 'what was typed is escaped')
  assert.match(bad.text, /value="ftp:\/\/x.example\/&lt;script&gt;"/, 'and kept in the field')

  const forged = await client.post(base, { url: `http://127.0.0.1:${receiver.port}/` }, { csrf: false })
  assert.equal(forged.status, 403)
  assert.equal((await app.store.webhooks.listEndpoints(app.accountId)).length, 0, 'a forged form changes nothing')

  const made = await client.post(base, { url: `http://127.0.0.1:${receiver.port}/in`, eventTypes: 'factor.created' }, { from: base })
  assert.equal(made.status, 201)
  assert.equal(made.headers.get('cache-control'), 'no-store')
  const secret = /<pre class="secret" id="secret">(whsec_[^<]+)<\/pre>/.exec(made.text)?.[1]
  assert.ok(secret, 'the secret is shown')
  receiver.secret = secret
  const listed = await client.get(base)
  assert.ok(!listed.text.includes(secret), 'never again')
  assert.match(listed.text, /factor\.created/)
  const [endpoint] = await app.store.webhooks.listEndpoints(app.accountId)
  assert.ok(endpoint)

  const event = await app.store.audit.append({
    actor: 'system',
    action: 'factor.created',
    target: { type: 'factor', id: 'fac_1' },
    accountId: app.accountId,
    ip: null,
    outcome: 'success',
    detail: { userID: 'u1' },
  })
  await waitFor(() => receiver.deliveries.length === 1, 5000, 'the delivery')
  const deliveries = `${base}/${endpoint.id}/deliveries`
  await waitFor(async () => (await client.get(deliveries)).text.includes('delivered'), 5000, 'the log')
  assert.match(client.last!.text, new RegExp(event.id))
  const resent = await client.post(`${deliveries}/${event.id}/resend`, {})
  assert.equal(resent.status, 303)
  await waitFor(() => receiver.deliveries.length === 2, 5000, 'the second send')
  assert.ok(receiver.deliveries.every((d) => d.id === event.id && d.payload !== null))

  const { client: developer } = await signedInClient(app, { role: 'developer' })
  assert.equal((await developer.get(base)).status, 403, 'developers do not manage webhooks')

  const ask = await client.get(`${base}/${endpoint.id}/delete`)
  assert.match(ask.text, /Delete the endpoint/)
  assert.equal((await client.post(`${base}/${endpoint.id}/delete`, {})).status, 303, 'without the confirmation: asked again')
  assert.equal((await app.store.webhooks.listEndpoints(app.accountId)).length, 1)
  const gone = await client.post(`${base}/${endpoint.id}/delete`, { confirm: '1' }, { from: `${base}/${endpoint.id}/delete` })
  assert.equal(gone.location, `${base}?deleted=1`)
  assert.equal((await app.store.webhooks.listEndpoints(app.accountId)).length, 0)
  assert.equal((await client.get(`${base}/${endpoint.id}/deliveries`)).status, 404)
  const actions = (await app.store.audit.list({ accountId: app.accountId, limit: 100 })).items.filter((e) => e.target.type === 'webhook')
  assert.deepEqual(
    actions.map((e) => [e.action, e.actor.startsWith('portal-user:')]),
    [
      ['webhook.delete', true],
      ['webhook.resend', true],
      ['webhook.create', true],
    ],
  )
})
