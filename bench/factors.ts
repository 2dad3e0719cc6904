/**
 * BENCH_ONLY=factors: verification of managed factors (POST /totp/users/{id}/verify, the
 * secret kept by the service) against stateless verifyOTP (the secret sent with each call),
 * on the same server and store, at 50 connections: each round runs both back to back in
 * alternating order, and the ratio is the median of the rounds' ratios. Both take the success
 * path on every call (a factor's user and a stateless secret each verified once in their time
 * step), so both write the verification state. Runs on SQLite, and on PostgreSQL + Redis when
 * BENCH_DATABASE_URL and BENCH_REDIS_URL (or the TEST_ ones) are set.
 *
 * The users (USERS, each with one active factor) are written straight to the store before
 * the server starts: the bench measures verification, not enrolment.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { randomBytes } from 'node:crypto'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import autocannon from 'autocannon'
import { HOTP, Secret } from 'otpauth'
import { loadConfig } from '../src/config/config.ts'
import { resolvePepper } from '../src/config/pepper.ts'
import { resolveKeyring } from '../src/config/encryption.ts'
import { openStore } from '../src/storage/factory.ts'
import { Accounts } from '../src/services/accounts.ts'
import { isFailure } from '../src/services/outcome.ts'
import { SYSTEM } from '../src/domain/accounts.ts'
import { sealContext } from '../src/totp/factors/core.ts'
import { newId } from '../src/domain/ids.ts'
import { waitFor } from './wait.ts'
import { onPostgresWithRedis } from './stores.ts'
import { CONNECTIONS, freePort, median, pinned, serve, type Figures } from './load.ts'

const SECONDS = Number(process.env.BENCH_SECONDS ?? 3)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5)
/** Enough users that none is verified twice in one 30 s step at the rates seen here (60 000 were too few on SQLite: 5 800/s). */
const USERS = Number(process.env.BENCH_USERS ?? 200_000)

interface Setup {
  apiKey: string
  secrets: Buffer[]
}

async function setup(env: Record<string, string>): Promise<Setup> {
  // Writing the users queues hundreds of writes on one account's row at once: a slow disk keeps some waiting past the
  // default STORE_TIMEOUT_MS for a pool's connection, which a setup step need not give up on.
  const config = loadConfig({ NODE_ENV: 'test', STORE_TIMEOUT_MS: '60000', ...env })
  const pepper = resolvePepper(config)
  const keyring = resolveKeyring(config)
  const store = await openStore(config, { maintenance: false })
  try {
    const accounts = new Accounts({ store, pepper, config })
    const ctx = { actor: SYSTEM }
    const account = await accounts.createAccount(ctx, { name: 'bench' })
    if (isFailure(account)) throw new Error(account.message)
    await accounts.setPlan(ctx, account.id, { rate: 0, burst: 1, quota: 0, period: 'month' })
    await accounts.setSubscription(ctx, account.id, config.region, 'totp', 'active')
    const issued = await accounts.issueKey(ctx, account.id, { name: 'bench' })
    if (isFailure(issued)) throw new Error(issued.message)
    const secrets: Buffer[] = []
    const now = new Date().toISOString()
    for (let start = 0; start < USERS; start += 500) {
      await Promise.all(
        Array.from({ length: Math.min(500, USERS - start) }, (_, j) => {
          const secret = randomBytes(20)
          secrets.push(secret)
          const userId = `user-${start + j}`
          const id = newId('fct')
          return store.factors.create(
            {
              id,
              type: 'totp',
              accountId: account.id,
              userId,
              applicationId: 'Bench',
              label: null,
              profile: 'universal',
              status: 'active',
              algorithm: 'SHA1',
              digits: 6,
              period: 30,
              drift: 0,
              sealed: keyring.seal(secret, sealContext(account.id, userId, id)),
              keyVersion: keyring.active,
              createdAt: now,
              expiresAt: null,
              activatedAt: now,
            },
            10,
            1_000_000,
            now,
            { actor: 'bench', action: 'factor.created', accountId: account.id, ip: null, outcome: 'success', target: { type: 'factor', id }, detail: {} },
          )
        }),
      )
    }
    return { apiKey: issued.apiKey, secrets }
  } finally {
    await store.close()
  }
}

const code = (secret: Buffer) =>
  HOTP.generate({
    secret: new Secret({ buffer: secret.buffer.slice(secret.byteOffset, secret.byteOffset + secret.length) as ArrayBuffer }),
    counter: Math.floor(Date.now() / 30_000),
  })

async function load(url: string, apiKey: string, next: () => { path: string; body: string }, seconds: number): Promise<Figures> {
  const result = await autocannon({
    url,
    connections: CONNECTIONS,
    duration: seconds,
    requests: [
      {
        method: 'POST',
        headers: { 'x-api-key': apiKey, 'content-type': 'application/x-www-form-urlencoded' },
        setupRequest: (req: object) => ({ ...req, ...next() }),
      },
    ],
  })
  return { rps: result.requests.average, total: result.requests.total, p50: result.latency.p50, p99: result.latency.p99, non2xx: result.non2xx + result.errors }
}

async function benchStore(name: string, env: Record<string, string>): Promise<string> {
  const { apiKey, secrets } = await setup(env)
  const port = await freePort()
  const server = serve('src/server.ts', { NODE_ENV: 'test', LOG_LEVEL: 'warn', ...env, PORT: String(port), ADMIN_LISTEN: 'off' })
  try {
    const target = `http://127.0.0.1:${port}`
    await waitFor(`${target}/healthz`)
    let user = 0
    const factor = () => {
      const i = user++ % secrets.length
      return { path: `/totp/users/user-${i}/verify`, body: `token=${code(secrets[i]!)}` }
    }
    const stateless = () => {
      const secret = randomBytes(20)
      return {
        path: '/totp/verifyOTP',
        body: `secret=${new Secret({ buffer: secret.buffer.slice(secret.byteOffset, secret.byteOffset + 20) as ArrayBuffer }).base32}&token=${code(secret)}`,
      }
    }
    await load(target, apiKey, factor, 1)
    await load(target, apiKey, stateless, 1)
    const f: Figures[] = []
    const s: Figures[] = []
    const ratios: number[] = []
    for (let r = 0; r < ROUNDS; r++) {
      if (r % 2 === 0) {
        f.push(await load(target, apiKey, factor, SECONDS))
        s.push(await load(target, apiKey, stateless, SECONDS))
      } else {
        s.push(await load(target, apiKey, stateless, SECONDS))
        f.push(await load(target, apiKey, factor, SECONDS))
      }
      ratios.push(f[r]!.rps / s[r]!.rps)
    }
    const m = (fs: Figures[], k: keyof Figures) => median(fs.map((x) => x[k]))
    const row = (label: string, fs: Figures[]) =>
      `| ${label} | ${m(fs, 'rps').toFixed(0)} | ${m(fs, 'p50').toFixed(1)} | ${m(fs, 'p99').toFixed(1)} | ${fs.reduce((n, x) => n + x.non2xx, 0)} |`
    return [
      `## Factor verification against stateless verifyOTP, ${name}: ${CONNECTIONS} connections, ${ROUNDS} rounds of ${SECONDS} s, medians (Node ${process.version}, ${cpus().length} CPUs, ${pinned ? 'server pinned to CPU 0, load generator to CPU 1' : 'not pinned'}; ${secrets.length} users)`,
      '',
      '| route | req/s | p50 ms | p99 ms | non-2xx |',
      '| --- | --- | --- | --- | --- |',
      row('POST /totp/verifyOTP (stateless, baseline)', s),
      row('POST /totp/users/{id}/verify (managed factor)', f),
      '',
      `Ratio factor / stateless (median of the rounds' ratios): **${median(ratios).toFixed(2)}×** (rounds: ${ratios.map((x) => x.toFixed(2)).join(', ')})`,
      '',
    ].join('\n')
  } finally {
    server.kill('SIGTERM')
  }
}

export async function factorsBench(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'tessera-bench-factors-'))
  try {
    process.stdout.write(`${await benchStore('SQLite', { DATA_DIR: dataDir })}\n`)
  } finally {
    rmSync(dataDir, { recursive: true, force: true })
  }
  await onPostgresWithRedis('factors', (env) => benchStore('PostgreSQL + Redis', env))
}

if (import.meta.main) await factorsBench()
