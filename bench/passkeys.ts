/**
 * BENCH_ONLY=passkeys: passkey sign-ins against managed factor verification and stateless
 * verifyOTP, on the same server and store, at 50 connections, driven by one client loop (each
 * of 50 concurrent loops makes a unit of work, waits for it, and starts the next), so that the
 * three are measured alike:
 * (1) a passkey sign-in: POST /totp/users/{id}/passkeys/authentication/options, the software
 *     authenticator's assertion (test/support/soft-authenticator.ts: an ECDSA P-256 signature,
 *     made on the load generator's CPU), then POST …/passkeys/authentication; a unit is done when
 *     the second call answers 200. Two HTTP requests per unit, the answer verified by
 *     @simplewebauthn/server, the challenge taken once and the counter moved compare-and-set;
 * (2) a managed factor verification: POST /totp/users/{id}/verify with the right code, a
 *     fresh user each time (as bench/factors.ts);
 * (3) stateless verifyOTP: POST /totp/verifyOTP with a fresh secret and its code (the baseline).
 * Every unit takes the success path; any other answer is counted as failed, not as done. Each
 * round runs the three back to back in an order that rotates; figures are medians of the rounds
 * and each ratio, (1)/(3) and (2)/(3), the median of the rounds' ratios. Runs on SQLite, and on
 * PostgreSQL + Redis when BENCH_DATABASE_URL and BENCH_REDIS_URL (or the TEST_ ones) are set.
 *
 * Not measured: the TOTP users (BENCH_USERS, each with one active factor) are written straight
 * to the store before the server starts, and the passkey users (BENCH_PASSKEY_USERS, one
 * passkey each) are registered through the API once the server is up (options, the
 * authenticator's attestation, registration), before the first round. The server runs with its
 * defaults, attempt limits included (FACTOR_USER_LIMIT, 20 a user a minute): the passkey users
 * are taken in turn, and enough of them that none comes near the limit.
 *
 * Each row also gives the CPU a unit costs where it is spent (bench/cpu.ts): the server process (all its
 * threads), PostgreSQL's processes and Redis's own count, in µs per unit done, medians of the rounds:
 * what docs/capacity.md plans from.
 *
 * The account's plan has no limits, so no call takes the throttle and quota step; BENCH_LIMITED=1 gives it
 * limits it never reaches, so that every call does (one more Redis script on PostgreSQL + Redis).
 *
 * BENCH_SECONDS (default 3) and BENCH_ROUNDS (default 5) set the length of a run;
 * BENCH_PASSKEYS_STORE=sqlite or postgres runs one store's alone.
 */
import http from 'node:http'
import { createPublicKey, generateKeyPairSync, randomBytes, sign, verify } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { HOTP, Secret } from 'otpauth'
import type { PublicKeyCredentialCreationOptionsJSON, PublicKeyCredentialRequestOptionsJSON } from '@simplewebauthn/server'
import { loadConfig } from '../src/config/config.ts'
import { resolvePepper } from '../src/config/pepper.ts'
import { resolveKeyring } from '../src/config/encryption.ts'
import { openStore } from '../src/storage/factory.ts'
import { Accounts } from '../src/services/accounts.ts'
import { Factors } from '../src/services/factors.ts'
import { isFailure } from '../src/services/outcome.ts'
import { SYSTEM } from '../src/domain/accounts.ts'
import { sealContext } from '../src/totp/factors/core.ts'
import { newId } from '../src/domain/ids.ts'
import { SoftAuthenticator } from '../test/support/soft-authenticator.ts'
import { waitFor } from './wait.ts'
import { onPostgresWithRedis } from './stores.ts'
import { postgresSince, postgresTimes, processSeconds, redisSeconds } from './cpu.ts'
import { Redis } from 'ioredis'
import { CONNECTIONS, freePort, median, pinned, serve } from './load.ts'

const SECONDS = Number(process.env.BENCH_SECONDS ?? 3)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5)
/** Enough TOTP users that none is verified twice in one 30 s step (the run's managed verifications stay well under this). */
const USERS = Number(process.env.BENCH_USERS ?? 100_000)
/** Enough passkey users that, taken in turn, none makes FACTOR_USER_LIMIT (20) attempts in a minute at the rates seen here. */
const PASSKEY_USERS = Number(process.env.BENCH_PASSKEY_USERS ?? 5_000)
/** BENCH_LIMITED=1: the account's plan has limits (never reached): each call's costs include the throttle and quota step. */
const LIMITED = process.env.BENCH_LIMITED === '1'
const ORIGIN = 'https://bench.example'
const RP_ID = 'bench.example'

interface Setup {
  apiKey: string
  secrets: Buffer[]
}

/** setup makes the account (no plan limits, the relying party set) and writes the TOTP users straight to the store. */
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
    // BENCH_LIMITED=1: a plan with a throttle and a quota never reached, so that every call also takes its limiter step (one Redis script).
    const plan = LIMITED
      ? { rate: 1_000_000, burst: 1_000_000, quota: 1e12, period: 'month' as const }
      : { rate: 0, burst: 1, quota: 0, period: 'month' as const }
    await accounts.setPlan(ctx, account.id, plan)
    await accounts.setSubscription(ctx, account.id, config.region, 'totp', 'active')
    const issued = await accounts.issueKey(ctx, account.id, { name: 'bench' })
    if (isFailure(issued)) throw new Error(issued.message)
    const set = await new Factors({ store, config, pepper, keyring }).updateSettings(ctx, account.id, { rpId: RP_ID, rpName: 'Bench', origins: [ORIGIN] })
    if (isFailure(set)) throw new Error(set.message)
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

/** The client: node:http on keep-alive connections, one per concurrent loop. */
interface Client {
  post(path: string, type: 'json' | 'form', body: string): Promise<{ status: number; body: string }>
  close(): void
}

function client(base: string, apiKey: string): Client {
  const url = new URL(base)
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONNECTIONS })
  const types = { json: 'application/json', form: 'application/x-www-form-urlencoded' }
  return {
    post: (path, type, body) =>
      new Promise((resolve, reject) => {
        const req = http.request(
          {
            host: url.hostname,
            port: url.port,
            path,
            method: 'POST',
            agent,
            headers: { 'x-api-key': apiKey, 'content-type': types[type], 'content-length': Buffer.byteLength(body) },
          },
          (res) => {
            const chunks: Buffer[] = []
            res.on('data', (c: Buffer) => chunks.push(c))
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }))
            res.on('error', reject)
          },
        )
        req.on('error', reject)
        req.end(body)
      }),
    close: () => agent.destroy(),
  }
}

interface Figures {
  /** Units done (the success path) per second. */
  rate: number
  p50: number
  p99: number
  failed: number
  /** The load generator's CPU time over the run's wall time (1: one core busy throughout). */
  cpu: number
  /** The first answers that were not the success path, for the printout. */
  seen: Set<string>
  /** CPU µs per unit done: the server process (all its threads), PostgreSQL, Redis (NaN where the store has none). */
  costs: Costs
}

interface Costs {
  node: number
  postgres: number
  redis: number
}

/** A meter reads the CPU the server and its stores have used: started before a run, read after it (seconds). */
type Meter = () => Promise<() => Promise<Costs>>

const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length === 0 ? 0 : s[Math.min(s.length - 1, Math.ceil(s.length * q) - 1)]!
}

/** A unit of work: null when done, or what answered instead. */
type Unit = () => Promise<string | null>

/** drive runs `unit` in CONNECTIONS concurrent loops for `seconds`: units done per second, and the latency of each. */
async function driveMetered(unit: Unit, seconds: number, meter: Meter): Promise<Figures> {
  const used = await meter()
  const latencies: number[] = []
  const seen = new Set<string>()
  let failed = 0
  const cpu = process.cpuUsage()
  const start = performance.now()
  const end = start + seconds * 1000
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (performance.now() < end) {
        const t0 = performance.now()
        const refused = await unit()
        if (refused === null) latencies.push(performance.now() - t0)
        else {
          failed++
          if (seen.size < 5) seen.add(refused)
        }
      }
    }),
  )
  const elapsed = (performance.now() - start) / 1000
  const self = process.cpuUsage(cpu)
  const busy = (self.user + self.system) / 1e6 / elapsed
  const spent = await used()
  const per = (x: number) => (x * 1e6) / Math.max(1, latencies.length)
  const costs = { node: per(spent.node), postgres: per(spent.postgres), redis: per(spent.redis) }
  return { rate: latencies.length / elapsed, p50: quantile(latencies, 0.5), p99: quantile(latencies, 0.99), failed, cpu: busy, seen, costs }
}

const refusal = (what: string, answer: { status: number; body: string }) => `${what} ${answer.status} ${answer.body.slice(0, 120)}`

/** registerPasskeys gives each passkey user one passkey through the API (options, attestation, registration), CONNECTIONS at a time. */
async function registerPasskeys(api: Client): Promise<{ authenticators: SoftAuthenticator[]; seconds: number }> {
  const authenticators = Array.from({ length: PASSKEY_USERS }, () => new SoftAuthenticator({ origin: ORIGIN, rpId: RP_ID }))
  const t0 = performance.now()
  let next = 0
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      for (let i = next++; i < PASSKEY_USERS; i = next++) {
        const user = `/totp/users/pk-${i}/passkeys/registration`
        const asked = await api.post(`${user}/options`, 'json', '{}')
        if (asked.status !== 200) throw new Error(refusal('registration options', asked))
        const { options } = JSON.parse(asked.body) as { options: PublicKeyCredentialCreationOptionsJSON }
        const made = await api.post(user, 'json', JSON.stringify({ credential: authenticators[i]!.register(options) }))
        if (made.status !== 201) throw new Error(refusal('registration', made))
      }
    }),
  )
  return { authenticators, seconds: (performance.now() - t0) / 1000 }
}

/**
 * checkMicros: what a sign-in's signature check costs at least, in µs of this process's CPU: the key's import from its JWK and one
 * ECDSA P-256 verification (node:crypto, synchronous: no library, no pool), as the server must do for every answer it has not seen.
 */
function checkMicros(): number {
  const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
  const jwk = publicKey.export({ format: 'jwk' })
  const data = randomBytes(200)
  const signature = sign('sha256', data, privateKey)
  let n = 0
  const t0 = performance.now()
  while (performance.now() - t0 < 500) {
    if (!verify('sha256', data, createPublicKey({ key: jwk, format: 'jwk' }), signature)) throw new Error('the check failed')
    n++
  }
  return ((performance.now() - t0) * 1000) / n
}

/** signingRate: the soft authenticator's assertions per second on this process's CPU (the load generator's share of a passkey sign-in). */
function signingRate(authenticator: SoftAuthenticator): number {
  const options: PublicKeyCredentialRequestOptionsJSON = { challenge: randomBytes(32).toString('base64url'), rpId: RP_ID }
  const t0 = performance.now()
  let n = 0
  while (performance.now() - t0 < 500) {
    authenticator.authenticate(options)
    n++
  }
  return n / ((performance.now() - t0) / 1000)
}

async function benchStore(name: string, env: Record<string, string>): Promise<string> {
  const { apiKey, secrets } = await setup(env)
  const port = await freePort()
  const server = serve('src/server.ts', { NODE_ENV: 'test', LOG_LEVEL: 'warn', ...env, PORT: String(port), ADMIN_LISTEN: 'off' })
  const target = `http://127.0.0.1:${port}`
  const api = client(target, apiKey)
  let redis: Redis | null = null
  try {
    await waitFor(`${target}/healthz`)
    const { authenticators, seconds: registering } = await registerPasskeys(api)

    let pk = 0
    const passkey: Unit = async () => {
      const i = pk++ % authenticators.length
      const at = `/totp/users/pk-${i}/passkeys/authentication`
      const asked = await api.post(`${at}/options`, 'json', '{}')
      if (asked.status !== 200) return refusal('options', asked)
      const { options } = JSON.parse(asked.body) as { options: PublicKeyCredentialRequestOptionsJSON }
      const signed = await api.post(at, 'json', JSON.stringify({ credential: authenticators[i]!.authenticate(options) }))
      return signed.status === 200 ? null : refusal('answer', signed)
    }
    let user = 0
    const factor: Unit = async () => {
      const i = user++ % secrets.length
      const answer = await api.post(`/totp/users/user-${i}/verify`, 'form', `token=${code(secrets[i]!)}`)
      return answer.status === 200 ? null : refusal('verify', answer)
    }
    const stateless: Unit = async () => {
      const secret = randomBytes(20)
      const base32 = new Secret({ buffer: secret.buffer.slice(secret.byteOffset, secret.byteOffset + 20) as ArrayBuffer }).base32
      const answer = await api.post('/totp/verifyOTP', 'form', `secret=${base32}&token=${code(secret)}`)
      return answer.status === 200 ? null : refusal('verifyOTP', answer)
    }

    redis = env.REDIS_URL === undefined ? null : new Redis(env.REDIS_URL)
    const kv = redis
    const meter: Meter = async () => {
      const node = processSeconds(server.pid!)
      const postgres = env.DATABASE_URL === undefined ? null : postgresTimes()
      const before = kv === null ? Number.NaN : await redisSeconds(kv)
      return async () => ({
        node: processSeconds(server.pid!) - node,
        postgres: postgres === null ? Number.NaN : postgresSince(postgres),
        redis: kv === null ? Number.NaN : (await redisSeconds(kv)) - before,
      })
    }
    const drive = (unit: Unit, seconds: number) => driveMetered(unit, seconds, meter)
    for (const unit of [passkey, factor, stateless]) await drive(unit, 1) // warm-up
    const p: Figures[] = []
    const f: Figures[] = []
    const s: Figures[] = []
    const passkeyRatios: number[] = []
    const factorRatios: number[] = []
    for (let r = 0; r < ROUNDS; r++) {
      const steps = [
        async () => p.push(await drive(passkey, SECONDS)),
        async () => f.push(await drive(factor, SECONDS)),
        async () => s.push(await drive(stateless, SECONDS)),
      ]
      for (let i = 0; i < steps.length; i++) await steps[(i + r) % steps.length]!()
      passkeyRatios.push(p[r]!.rate / s[r]!.rate)
      factorRatios.push(f[r]!.rate / s[r]!.rate)
    }
    const signing = signingRate(authenticators[0]!)
    const check = checkMicros()
    // The least a sign-in can cost the server: two requests as cheap as a stateless one, and the signature check.
    const floor = 2 * median(s.map((x) => x.costs.node)) + check

    const m = (fs: Figures[], k: 'rate' | 'p50' | 'p99' | 'cpu') => median(fs.map((x) => x[k]))
    const cost = (fs: Figures[], k: keyof Costs) => {
      const v = median(fs.map((x) => x.costs[k]))
      return Number.isNaN(v) ? '–' : v.toFixed(0)
    }
    const row = (label: string, requests: number, fs: Figures[]) =>
      `| ${label} | ${requests} | ${m(fs, 'rate').toFixed(0)} | ${m(fs, 'p50').toFixed(1)} | ${m(fs, 'p99').toFixed(1)} | ${(m(fs, 'cpu') * 100).toFixed(0)} % | ${cost(fs, 'node')} | ${cost(fs, 'postgres')} | ${cost(fs, 'redis')} | ${fs.reduce((n, x) => n + x.failed, 0)} |`
    const refused = [...new Set([...p, ...f, ...s].flatMap((x) => [...x.seen]))]
    const ratios = (xs: number[]) => xs.map((x) => x.toFixed(2)).join(', ')
    return [
      `## Passkey sign-ins against managed and stateless TOTP verification, ${name}: ${CONNECTIONS} concurrent loops, ${ROUNDS} rounds of ${SECONDS} s, medians (Node ${process.version}, ${cpus().length} CPUs, ${pinned ? 'server pinned to CPU 0, load generator to CPU 1' : 'not pinned'}; ${secrets.length} TOTP users, ${authenticators.length} passkey users registered through the API in ${registering.toFixed(1)} s; attempt limits at their defaults; ${LIMITED ? 'a plan with a throttle and a quota, never reached' : 'a plan without limits'})`,
      '',
      '| unit of work | HTTP requests | done/s | p50 ms | p99 ms | load generator CPU | server CPU µs/unit | PostgreSQL CPU µs/unit | Redis CPU µs/unit | failed |',
      '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
      row('POST /totp/verifyOTP (stateless, baseline)', 1, s),
      row('POST /totp/users/{id}/verify (managed factor)', 1, f),
      row('passkey sign-in: options, assertion, answer', 2, p),
      '',
      `Ratio passkey sign-in / stateless (median of the rounds' ratios): **${median(passkeyRatios).toFixed(2)}×** (rounds: ${ratios(passkeyRatios)})`,
      `Ratio managed factor / stateless (median of the rounds' ratios): **${median(factorRatios).toFixed(2)}×** (rounds: ${ratios(factorRatios)})`,
      `The soft authenticator signs ${signing.toFixed(0)} assertions/s on the load generator's CPU (its share of a passkey sign-in).`,
      `A signature check alone (the key's import and an ECDSA P-256 verification, node:crypto, on the load generator's CPU) takes ${check.toFixed(0)} µs: with two requests as cheap as a stateless one, the least a sign-in can cost the server is ${floor.toFixed(0)} µs of CPU, ${(median(s.map((x) => x.costs.node)) / floor).toFixed(2)}× of stateless at most on this machine; it cost ${median(p.map((x) => x.costs.node)).toFixed(0)} µs (${(floor / median(p.map((x) => x.costs.node))).toFixed(2)}× of that floor).`,
      ...(m(s, 'cpu') < 0.85
        ? []
        : [
            `The load generator was busy ${(m(s, 'cpu') * 100).toFixed(0)} % of the baseline's time: the stateless rate is near what the client can send, a floor of the server's; the ratios are ceilings.`,
          ]),
      ...(refused.length === 0 ? [] : ['', `Answers other than the success path (first seen): ${refused.join(' | ')}`]),
      '',
    ].join('\n')
  } finally {
    api.close()
    redis?.disconnect()
    server.kill('SIGTERM')
  }
}

export async function passkeysBench(): Promise<void> {
  const only = process.env.BENCH_PASSKEYS_STORE
  if (only !== 'postgres') {
    const dataDir = mkdtempSync(join(tmpdir(), 'tessera-bench-passkeys-'))
    try {
      process.stdout.write(`${await benchStore('SQLite', { DATA_DIR: dataDir })}\n`)
    } finally {
      rmSync(dataDir, { recursive: true, force: true })
    }
  }
  if (only !== 'sqlite') await onPostgresWithRedis('passkeys', (env) => benchStore('PostgreSQL + Redis', env))
}

if (import.meta.main) await passkeysBench()
