/**
 * The webhook block of the storage contract (storeContract runs it on every store): the
 * outbox is written with the audit event it reports, or not at all; claims never hand a
 * delivery to two workers; a lease that runs out makes a claimed delivery due again.
 */
import assert from 'node:assert/strict'
import type { AuditDraft, AuditEvent } from '../../../src/domain/accounts.ts'
import type { NewWebhookEndpoint } from '../../../src/domain/webhooks.ts'
import type { Store } from '../../../src/storage/ports.ts'
import { CursorError } from '../../../src/domain/errors.ts'
import { newId } from '../../../src/domain/ids.ts'
import { EVENT_TYPES } from '../../../src/domain/events.ts'
import { TRACE_KEY } from '../../../src/storage/stamps.ts'
import { begin, startTracing, stopTracing } from '../../../src/tracing/tracing.ts'
import { loadConfig } from '../../../src/config/config.ts'

type WithStore = (title: string, body: (s: Store) => Promise<void>) => void

/** event: an audit event of `accountId` with action `type` (as the factor code writes them). */
function event(accountId: string, type: string, detail: Record<string, unknown> = { userID: 'u1', factorID: 'fac_1' }): AuditDraft {
  return { actor: 'system', action: type, target: { type: 'factor', id: 'fac_1' }, accountId, ip: null, outcome: 'success', detail }
}

const change = (accountId: string, action: string, id = 'x'): AuditDraft => ({
  actor: 'cli',
  action,
  target: { type: 'webhook', id },
  accountId,
  ip: null,
  outcome: 'success',
  detail: {},
})

function endpoint(accountId: string, eventTypes: readonly string[] | null = null): NewWebhookEndpoint {
  return { id: newId('whe'), accountId, url: 'https://hooks.example.com/in', eventTypes, createdAt: new Date().toISOString(), sealedSecret: 'sealed' }
}

async function account(store: Store): Promise<string> {
  const id = newId('acc')
  const draft = change(id, 'account.create')
  await store.access.createAccount({ id, name: 'w', status: 'active', createdAt: new Date().toISOString() }, draft)
  return id
}

const LATER = () => Date.now() + 1000

export function webhookContract(withStore: WithStore): void {
  withStore('webhooks: endpoints are created within the limit, listed, and deleted with their pending deliveries', async (store) => {
    const w = store.webhooks
    const a = await account(store)
    const first = { ...endpoint(a), createdAt: new Date(Date.now() - 1000).toISOString() }
    assert.equal(await w.createEndpoint(first, 2, change(a, 'webhook.create', first.id)), true)
    const second = endpoint(a, ['factor.created', 'factor.deleted'])
    assert.equal(await w.createEndpoint(second, 2, change(a, 'webhook.create', second.id)), true)
    assert.equal(await w.createEndpoint(endpoint(a), 2, change(a, 'webhook.create')), false, 'the limit')
    const { sealedSecret: _, ...shown } = second
    assert.deepEqual(await w.getEndpoint(a, second.id), shown)
    assert.deepEqual(
      (await w.listEndpoints(a)).map((e) => e.id),
      [first.id, second.id],
    )
    assert.equal(await w.getEndpoint('acc_other', first.id), null, 'another account sees none')
    assert.equal((await store.audit.list({ accountId: a, action: 'webhook.create', limit: 10 })).items.length, 2)

    await store.audit.append(event(a, 'factor.activated'))
    await store.audit.append(event(a, 'factor.created'))
    await store.audit.append(event(a, 'account.update'))
    await store.audit.append(event(await account(store), 'factor.created'))
    assert.equal((await w.listDeliveries(first.id, { limit: 10 })).items.length, 2, 'every event type')
    assert.deepEqual(
      (await w.listDeliveries(second.id, { limit: 10 })).items.map((d) => d.eventType),
      ['factor.created'],
      'its types only',
    )
    assert.equal(await w.pending(), 3)

    assert.equal(await w.deleteEndpoint('acc_other', first.id, change(a, 'webhook.delete')), false)
    assert.equal(await w.deleteEndpoint(a, first.id, change(a, 'webhook.delete', first.id)), true)
    assert.equal(await w.deleteEndpoint(a, first.id, change(a, 'webhook.delete', first.id)), false, 'once')
    assert.deepEqual(
      (await w.listDeliveries(first.id, { limit: 10 })).items.map((d) => d.status),
      ['cancelled', 'cancelled'],
    )
    assert.equal(await w.pending(), 1)
    assert.equal(await w.createEndpoint(endpoint(a), 2, change(a, 'webhook.create')), true, 'a deleted endpoint frees its place')
    await store.audit.append(event(a, 'factor.deleted'))
    assert.equal((await w.listDeliveries(first.id, { limit: 10 })).items.length, 2, 'a deleted endpoint gets nothing new')

    // A key rotation re-seals live endpoints' secrets, compare-and-set; deleted ones are left.
    const live = await w.sealedSecrets('', 10)
    assert.deepEqual(live.map((r) => r.id).sort(), (await w.listEndpoints(a)).map((e) => e.id).sort())
    assert.equal(live.find((r) => r.id === second.id)?.sealed, second.sealedSecret)
    assert.equal(await w.resealSecret(second.id, 'changed meanwhile', 'v2.x'), false)
    assert.equal(await w.resealSecret(second.id, second.sealedSecret, 'v2.new'), true)
    assert.equal((await w.sealedSecrets('', 10)).find((r) => r.id === second.id)?.sealed, 'v2.new')
  })

  withStore('webhooks: every event type reaches the outbox, with the event as the message', async (store) => {
    const w = store.webhooks
    const a = await account(store)
    const e = endpoint(a)
    await w.createEndpoint(e, 10, change(a, 'webhook.create', e.id))
    const written: AuditEvent[] = []
    for (const type of EVENT_TYPES) written.push(await store.audit.append(event(a, type, { userID: 'u', type })))
    const claimed = await w.claim(100, LATER(), 60_000)
    assert.deepEqual(claimed.map((c) => c.eventType).sort(), [...EVENT_TYPES].sort())
    for (const c of claimed) {
      const source = written.find((x) => x.id === c.messageId)!
      assert.deepEqual(
        { type: c.eventType, at: c.at, data: c.data, url: c.url, secret: c.sealedSecret, account: c.accountId, tries: c.tries },
        { type: source.action, at: source.at, data: source.detail, url: e.url, secret: 'sealed', account: a, tries: 0 },
      )
      assert.equal(c.sinceMs, Date.parse(source.at))
    }
  })

  withStore('webhooks: an event written in a trace gives its deliveries the trace; its detail, stored and sent, is the one given', async (store) => {
    const w = store.webhooks
    const a = await account(store)
    const e = endpoint(a)
    await w.createEndpoint(e, 10, change(a, 'webhook.create', e.id))
    // Tracing on in this process (a sampler that exports nothing): stamps.ts gives the event the current span's traceparent
    // under TRACE_KEY, and the insert moves it out of the detail into the event's own column.
    await startTracing(loadConfig({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_TRACES_SAMPLER: 'always_off' }))
    let traceparent = ''
    let traced: AuditEvent
    let plain: AuditEvent
    try {
      const span = begin('test', {})
      traceparent = span.traceparent
      traced = await span.within(() => store.audit.append(event(a, 'factor.created', { userID: 'u', n: 1.5, text: 'é "q"' })))
      span.end()
      // Outside a span, a detail that names a trace itself is not believed.
      plain = await store.audit.append(event(a, 'factor.deleted', { userID: 'v', [TRACE_KEY]: '00-11111111111111111111111111111111-1111111111111111-01' }))
    } finally {
      await stopTracing()
    }
    assert.match(traceparent, /^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/)
    const claimed = await w.claim(10, LATER(), 60_000)
    const byId = new Map(claimed.map((c) => [c.messageId, c]))
    assert.equal(byId.get(traced.id)?.traceParent, traceparent)
    assert.deepEqual(byId.get(traced.id)?.data, { userID: 'u', n: 1.5, text: 'é "q"' }, 'the message has no trace in it')
    assert.equal(byId.get(plain.id)?.traceParent, null)
    assert.deepEqual(byId.get(plain.id)?.data, { userID: 'v' })
    const listed = await store.audit.list({ accountId: a, limit: 10 })
    assert.deepEqual(listed.items.find((x) => x.id === traced.id)?.detail, { userID: 'u', n: 1.5, text: 'é "q"' }, 'the audit trail shows the detail as given')
  })

  withStore('webhooks: a write that fails leaves neither its change, its event nor an outbox row', async (store) => {
    const w = store.webhooks
    const a = await account(store)
    await w.createEndpoint(endpoint(a), 10, change(a, 'webhook.create'))
    const key = {
      id: newId('key'),
      accountId: a,
      name: 'k',
      hash: 'h-dup',
      hint: 'dup',
      createdAt: new Date().toISOString(),
      expiresAt: null,
      scope: { groups: null, regions: null },
    }
    await store.access.createKey(key, event(a, 'factor.created'))
    assert.equal(await w.pending(), 1)
    await assert.rejects(store.access.createKey({ ...key, id: newId('key') }, event(a, 'factor.deleted')), 'a duplicate key hash')
    assert.equal((await store.audit.list({ accountId: a, action: 'factor.deleted', limit: 10 })).items.length, 0)
    assert.equal(await w.pending(), 1, 'no outbox row')
    assert.equal((await w.claim(10, LATER(), 1000)).length, 1)
  })

  withStore('webhooks: many parallel claims never hand a delivery out twice', async (store) => {
    const w = store.webhooks
    const a = await account(store)
    await w.createEndpoint(endpoint(a), 10, change(a, 'webhook.create'))
    await w.createEndpoint(endpoint(a), 10, change(a, 'webhook.create'))
    await Promise.all(Array.from({ length: 30 }, () => store.audit.append(event(a, 'factor.created'))))
    const now = LATER()
    const batches = await Promise.all(Array.from({ length: 40 }, () => w.claim(3, now, 60_000)))
    const keys = batches.flat().map((c) => `${c.endpointId}/${c.messageId}`)
    assert.equal(keys.length, 60, 'every delivery claimed')
    assert.equal(new Set(keys).size, 60, 'none twice')
    assert.equal(await w.due(now), false)
    assert.deepEqual(await w.claim(10, now, 60_000), [])
  })

  withStore('webhooks: a lease that runs out makes the delivery due again; only the lease holder finishes it', async (store) => {
    const w = store.webhooks
    const a = await account(store)
    const e = endpoint(a)
    await w.createEndpoint(e, 10, change(a, 'webhook.create'))
    await store.audit.append(event(a, 'factor.created'))
    const now = LATER()
    assert.equal(await w.due(now), true)
    const [first] = await w.claim(10, now, 5000)
    assert.ok(first)
    assert.deepEqual(await w.claim(10, now + 4999, 5000), [], 'leased')
    assert.equal(await w.due(now + 4999), false)
    const [again] = await w.claim(10, now + 5000, 5000)
    assert.equal(again?.messageId, first.messageId, 'due again once the lease ran out')
    assert.notEqual(again.lease, first.lease)
    const attempt = { atMs: now + 5001, statusCode: 500, durationMs: 12, error: 'HTTP 500' }
    await w.finish({ endpointId: e.id, messageId: first.messageId, lease: first.lease, attempt, outcome: 'delivered', nextAtMs: now })
    assert.equal((await w.listDeliveries(e.id, { limit: 1 })).items[0]?.status, 'pending', 'the stale holder changes nothing')
    await w.finish({
      endpointId: e.id,
      messageId: first.messageId,
      lease: again.lease,
      attempt: { ...attempt, atMs: now + 5002 },
      outcome: 'retry',
      nextAtMs: now + 9000,
    })
    assert.equal(await w.due(now + 8999), false)
    const [third] = await w.claim(10, now + 9000, 5000)
    assert.equal(third?.tries, 1)
    await w.finish({
      endpointId: e.id,
      messageId: first.messageId,
      lease: third!.lease,
      attempt: { atMs: now + 9001, statusCode: 204, durationMs: 3, error: null },
      outcome: 'delivered',
      nextAtMs: now + 9001,
    })
    const [delivery] = (await w.listDeliveries(e.id, { limit: 10 })).items
    assert.equal(delivery?.status, 'delivered')
    assert.equal(delivery.nextAttemptAt, null)
    assert.deepEqual(
      delivery.attempts.map((x) => x.statusCode),
      [204, 500, 500],
      'every attempt, newest first',
    )
    assert.equal(await w.pending(), 0)
  })

  withStore('webhooks: deliveries page newest first; a re-send makes one due now; retention prunes finished ones', async (store) => {
    const w = store.webhooks
    const a = await account(store)
    const e = endpoint(a)
    await w.createEndpoint(e, 10, change(a, 'webhook.create'))
    const events = []
    for (let i = 0; i < 5; i++) events.push(await store.audit.append(event(a, 'factor.created', { n: i })))
    const page1 = await w.listDeliveries(e.id, { limit: 2 })
    assert.deepEqual(
      page1.items.map((d) => d.id),
      [events[4]!.id, events[3]!.id],
    )
    const page2 = await w.listDeliveries(e.id, { limit: 2, cursor: page1.next! })
    const page3 = await w.listDeliveries(e.id, { limit: 2, cursor: page2.next! })
    assert.deepEqual(
      [...page2.items, ...page3.items].map((d) => d.id),
      [events[2]!.id, events[1]!.id, events[0]!.id],
    )
    assert.equal(page3.next, null)
    await assert.rejects(w.listDeliveries(e.id, { limit: 2, cursor: 'nope' }), CursorError)

    const now = LATER()
    for (const c of await w.claim(10, now, 1000)) {
      await w.finish({
        endpointId: c.endpointId,
        messageId: c.messageId,
        lease: c.lease,
        attempt: { atMs: now, statusCode: 410, durationMs: 1, error: 'HTTP 410' },
        outcome: 'failed',
        nextAtMs: now,
      })
    }
    assert.equal(await w.pending(), 0)
    assert.equal(await w.resend(e.id, 'evt_missing', now, change(a, 'webhook.resend')), false)
    assert.equal(await w.resend(e.id, events[0]!.id, now + 10, change(a, 'webhook.resend', e.id)), true)
    const [resent] = await w.claim(10, now + 10, 1000)
    assert.deepEqual([resent?.messageId, resent?.tries, resent?.sinceMs], [events[0]!.id, 0, now + 10], 'a fresh retry window')
    assert.equal(await w.prune(now + 1), 4, 'the finished ones last changed before the bound')
    assert.deepEqual(
      (await w.listDeliveries(e.id, { limit: 10 })).items.map((d) => d.id),
      [events[0]!.id],
    )
    assert.equal(await w.deleteEndpoint(a, e.id, change(a, 'webhook.delete')), true)
    assert.equal(await w.resend(e.id, events[0]!.id, now, change(a, 'webhook.resend')), false, 'not for a deleted endpoint')
  })

  withStore('webhooks: a deletion with deletedKept removes the deleted endpoints past it, oldest first, with their deliveries and attempts', async (store) => {
    const w = store.webhooks
    const a = await account(store)
    const ends = [endpoint(a), endpoint(a), endpoint(a), endpoint(a)]
    for (const e of ends) assert.equal(await w.createEndpoint(e, 10, change(a, 'webhook.create', e.id)), true)
    await store.audit.append(event(a, 'factor.created'))
    assert.equal(await w.pending(), 4)
    const now = Date.now() + 1000
    const inFlight = (await w.claim(10, now, 60_000)).find((c) => c.endpointId === ends[0]!.id)!
    for (const e of ends.slice(0, 3)) {
      assert.equal(await w.deleteEndpoint(a, e.id, change(a, 'webhook.delete', e.id), 1), true)
      await new Promise((r) => setTimeout(r, 5))
    }
    // A delivery sent while its endpoint was deleted and pruned leaves no attempt behind.
    await w.finish({ ...inFlight, attempt: { atMs: now, statusCode: 204, durationMs: 1, error: null }, outcome: 'delivered', nextAtMs: now })
    const log = async (id: string) => (await w.listDeliveries(id, { limit: 10 })).items.map((d) => [d.status, d.attempts.length])
    assert.deepEqual(await log(ends[0]!.id), [], 'pruned')
    assert.deepEqual(await log(ends[1]!.id), [], 'pruned')
    assert.deepEqual(await log(ends[2]!.id), [['cancelled', 0]], 'the one deleted last is kept')
    assert.deepEqual(await log(ends[3]!.id), [['pending', 0]], 'a live endpoint keeps its own')
    assert.equal(await w.pending(), 1)
    assert.deepEqual(
      (await w.listEndpoints(a)).map((e) => e.id),
      [ends[3]!.id],
    )
  })

  withStore(
    'webhooks: an account keeps at most its cap of pending deliveries however many events come at once; the rest are dropped, counted once',
    async (store) => {
      const w = store.webhooks
      await w.setPendingCap(25)
      const a = await account(store)
      const other = await account(store)
      const [e1, e2] = [endpoint(a), endpoint(a)].sort((x, y) => (x.id < y.id ? -1 : 1))
      for (const e of [e1!, e2!, endpoint(other)]) assert.equal(await w.createEndpoint(e, 10, change(e.accountId, 'webhook.create', e.id)), true)
      // 40 events at once, two deliveries each: 25 written, 55 dropped; every event is kept in the audit trail.
      await Promise.all(Array.from({ length: 40 }, () => store.audit.append(event(a, 'factor.created'))))
      assert.equal(await w.pending(), 25)
      assert.equal((await store.audit.list({ accountId: a, action: 'factor.created', limit: 100 })).items.length, 40)
      const pendingOf = async (id: string) => (await w.listDeliveries(id, { limit: 100 })).items.filter((d) => d.status === 'pending').length
      assert.equal((await pendingOf(e1!.id)) + (await pendingOf(e2!.id)), 25)
      assert.deepEqual(await w.takeDropped(), [{ accountId: a, deliveries: 55 }])
      assert.deepEqual(await w.takeDropped(), [], 'taken once')
      // Another account has room of its own.
      await store.audit.append(event(other, 'factor.created'))
      assert.equal(await w.pending(), 26)
      // A delivery that leaves pending (delivered, or cancelled with its endpoint) gives its room back.
      const claimed = (await w.claim(100, LATER(), 60_000)).filter((c) => c.accountId === a && c.endpointId === e1!.id)
      for (const c of claimed.slice(0, 4)) {
        const at = LATER()
        await w.finish({
          endpointId: c.endpointId,
          messageId: c.messageId,
          lease: c.lease,
          attempt: { atMs: at, statusCode: 200, durationMs: 1, error: null },
          outcome: 'delivered',
          nextAtMs: at,
        })
      }
      await Promise.all(Array.from({ length: 3 }, () => store.audit.append(event(a, 'factor.created'))))
      assert.deepEqual(await w.takeDropped(), [{ accountId: a, deliveries: 2 }], 'room for 4 of the 6')
      const e2Pending = await pendingOf(e2!.id)
      assert.equal(await w.deleteEndpoint(a, e2!.id, change(a, 'webhook.delete', e2!.id)), true)
      await store.audit.append(event(a, 'factor.created'))
      assert.deepEqual(await w.takeDropped(), [], `the ${e2Pending} cancelled gave room back`)
      assert.equal(await w.pending(), 26 - e2Pending + 1)
    },
  )
}
