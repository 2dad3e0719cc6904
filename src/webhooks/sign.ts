/** Standard Webhooks signatures: `v1,` and the base64 HMAC-SHA256 of `id.timestamp.body` under the secret's key. */
import { createHmac } from 'node:crypto'
import { secretKey } from './secret.ts'

export function signature(secret: string, id: string, timestampSeconds: number, body: string): string {
  return `v1,${createHmac('sha256', secretKey(secret)).update(`${id}.${timestampSeconds}.${body}`).digest('base64')}`
}
