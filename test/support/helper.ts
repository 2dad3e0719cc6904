/**
 * Test helpers: start the real app on a real port with a fresh SQLite store in a temp dir,
 * a movable clock and captured logs; create accounts and keys through the real store.
 * Every answer a test fetches from such an app is checked against the OpenAPI document the
 * app serves (conformance.ts): a test fails on an answer the document does not describe.
 */
import { Idempotency } from '../../src/services/idempotency.ts'
import type { TestContext } from 'node:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createServer as createNetServer, type AddressInfo } from 'node:net'
import type { FastifyInstance } from 'fastify'
import { loadConfig, type Config } from '../../src/config/config.ts'
import { resolvePepper } from '../../src/config/pepper.ts'
import type { Pepper } from '../../src/crypto/keyed.ts'
import { openStore } from '../../src/storage/factory.ts'
import type { Store } from '../../src/storage/ports.ts'
import { buildApp } from '../../src/app.ts'
import { GROUPS, REGIONS, groupServedIn, type Group, type Region } from '../../src/domain/regions.ts'
import { Accounts, type KeyInput } from '../../src/services/accounts.ts'
import { Factors } from '../../src/services/factors.ts'
import { Totp } from '../../src/services/totp.ts'
import { resolveKeyring } from '../../src/config/encryption.ts'
import { isFailure } from '../../src/services/outcome.ts'
import { SYSTEM } from '../../src/domain/accounts.ts'
import { checkAnswersFrom, type OpenApiDocument } from './conformance.ts'
import type { Lookup } from '../../src/webhooks/address.ts'

export interface Clock {
  now: () => number
  set(ms: number): void
  advance(ms: number): void
}

export function testClock(start = Date.now()): Clock {
  let t = start
  return {
    now: () => t,
    set: (ms) => {
      t = ms
    },
    advance: (ms) => {
      t += ms
    },
  }
}

export interface Running {
  readonly url: string
  readonly app: FastifyInstance
  readonly store: Store
  readonly config: Config
  readonly pepper: Pepper
  /** The accounts layer over the same store, on the same clock. */
  readonly accounts: Accounts
  /** The factors and TOTP services over the same store (operators' calls), on the same clock. */
  readonly factors: Factors
  readonly totp: Totp
  /** Idempotency-Key records over the same store and keyring (an admin API the test builds takes it). */
  readonly idempotency: Idempotency
  readonly clock: Clock
  readonly dataDir: string
  /** Every log line written so far. */
  readonly logs: string[]
  /** A key of an active account subscribed to every group in every region that serves it. */
  readonly key: string
  readonly accountId: string
  readonly keyId: string
}

export function tempDir(t: TestContext, prefix = 'tessera-test-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** AppExtras: what a test gives the app beside its settings. */
export interface AppExtras {
  /** How outbound URLs' names resolve (webhooks, jobs' sourceUrl and resultUrl): a test makes `internal.example.com` resolve where it needs, without DNS. */
  readonly lookup?: Lookup
  /** The port to listen on (default: any free one); a test that must know its URL before it starts (a redirect URI) picks one with freePort. */
  readonly port?: number
}

/** freePort: a port free now on 127.0.0.1. */
export async function freePort(): Promise<number> {
  const server = createNetServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as AddressInfo).port
  await new Promise((resolve) => server.close(resolve))
  return port
}

export async function startApp(t: TestContext, env: Record<string, string> = {}, clock = testClock(), extras: AppExtras = {}): Promise<Running> {
  const dataDir = env.DATA_DIR ?? tempDir(t)
  const config = loadConfig({ NODE_ENV: 'test', LOG_LEVEL: 'info', ...env, DATA_DIR: dataDir })
  const pepper = resolvePepper(config)
  // The store stamps by the app's clock: a test that moves it moves every stored time.
  const store = await openStore(config, { clock: clock.now })
  const logs: string[] = []
  const app = await buildApp({
    config,
    store,
    pepper,
    now: clock.now,
    ...(extras.lookup === undefined ? {} : { lookup: extras.lookup }),
    logStream: {
      write: (line) => {
        logs.push(line)
      },
    },
  })
  await app.listen({ port: extras.port ?? 0, host: '127.0.0.1' })
  t.after(async () => {
    await app.close()
    await store.close()
  })
  const address = app.server.address()
  if (address === null || typeof address === 'string') throw new Error('no port')
  const url = `http://127.0.0.1:${address.port}`
  // app.swagger() is what /openapi.json serves; taken in-process, so that a test that fills the node's connections is not disturbed.
  const stopChecking = checkAnswersFrom(url, () => app.swagger() as unknown as OpenApiDocument)
  t.after(() => {
    const mismatches = stopChecking()
    if (mismatches.length > 0) throw new Error(`answers not described by the OpenAPI document:\n${mismatches.join('\n')}`)
  })
  const accounts = new Accounts({ store, pepper, config, now: clock.now })
  const { apiKey, accountId, keyId } = await createCaller(accounts)
  const factors = new Factors({ store, config, pepper, keyring: resolveKeyring(config), now: clock.now })
  const idempotency = new Idempotency({ store, config, keyring: resolveKeyring(config), now: clock.now })
  return {
    url,
    app,
    store,
    config,
    pepper,
    accounts,
    factors,
    totp: new Totp({ store, config, pepper }),
    idempotency,
    clock,
    dataDir,
    logs,
    key: apiKey,
    accountId,
    keyId,
  }
}

/** createCaller makes an account with a key and the given active subscriptions (default: every group where it is served). */
export async function createCaller(
  accounts: Accounts,
  subscriptions: readonly (readonly [Region, Group])[] = REGIONS.flatMap((r) => GROUPS.filter((g) => groupServedIn(g, r)).map((g) => [r, g] as const)),
  key: KeyInput = { name: 'test key' },
): Promise<{ apiKey: string; accountId: string; keyId: string }> {
  const ctx = { actor: SYSTEM }
  const account = await accounts.createAccount(ctx, { name: 'test' })
  if (isFailure(account)) throw new Error(account.message)
  for (const [region, group] of subscriptions) {
    const set = await accounts.setSubscription(ctx, account.id, region, group, 'active')
    if (isFailure(set)) throw new Error(set.message)
  }
  const issued = await accounts.issueKey(ctx, account.id, key)
  if (isFailure(issued)) throw new Error(issued.message)
  return { apiKey: issued.apiKey, accountId: account.id, keyId: issued.key.id }
}

/** post sends form fields (application/x-www-form-urlencoded) with a key. */
export function post(
  base: string,
  path: string,
  key: string | undefined,
  fields: Record<string, string>,
  headers: Record<string, string> = {},
): Promise<Response> {
  return fetch(base + path, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...(key === undefined ? {} : { 'x-api-key': key }), ...headers },
    body: new URLSearchParams(fields).toString(),
  })
}

export function get(base: string, path: string, key: string | undefined, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(base + path, { headers: { ...(key === undefined ? {} : { 'x-api-key': key }), ...headers } })
}

/** codes returns the catalogue codes of an error-list body. */
export async function codes(res: Response): Promise<string[]> {
  const body = (await res.json()) as { code: string }[] | { code?: string }
  // A list answer names each problem's code; a coded one (a 429 beside the gateway's) its one code.
  if (!Array.isArray(body)) return body.code === undefined ? [] : [body.code]
  return body.map((e) => e.code)
}
