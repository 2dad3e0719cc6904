/**
 * The soak's accounts, made through the admin API as an operator would: each subscribed to
 * every group this node serves, with a key, and the passkey relying party set. The first load
 * account keeps the default plan (its throttle answers 429 under load, as it would for a
 * customer); the others, the canary and the scratch account have no limits.
 */
import type { Account } from './run.ts'

export const RP_ID = 'soak.example'
export const ORIGIN = `https://${RP_ID}`

async function admin<T>(base: string, token: string, method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
  const text = await res.text()
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`)
  return JSON.parse(text) as T
}

/**
 * makeAccount creates one account with its subscriptions, plan, relying party, a key, and a
 * webhook endpoint at `hook` when given (its events then go there from the start).
 */
export async function makeAccount(adminUrl: string, token: string, name: string, index: number, limited: boolean, hook?: string): Promise<Account> {
  const { id } = await admin<{ id: string }>(adminUrl, token, 'POST', '/admin/v1/accounts', { name })
  for (const group of ['totp', 'converter']) {
    await admin(adminUrl, token, 'PUT', `/admin/v1/accounts/${id}/subscriptions/eu/${group}`, { status: 'active' })
  }
  if (!limited) await admin(adminUrl, token, 'PUT', `/admin/v1/accounts/${id}/plan`, { rate: 0, burst: 1, quota: 0, period: 'month' })
  await admin(adminUrl, token, 'PATCH', `/admin/v1/accounts/${id}/factor-settings`, { rpId: RP_ID, rpName: 'Soak', origins: [ORIGIN] })
  const { apiKey } = await admin<{ apiKey: string }>(adminUrl, token, 'POST', `/admin/v1/accounts/${id}/keys`, { name: `${name} key` })
  const webhook = hook === undefined ? undefined : (await admin<{ id: string }>(adminUrl, token, 'POST', `/admin/v1/accounts/${id}/webhooks`, { url: hook })).id
  return { id, key: apiKey, index, ...(webhook === undefined ? {} : { webhook }) }
}
