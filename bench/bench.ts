/**
 * npm run bench: requests/s and p50/p99 latency of the TOTP routes at 50 connections,
 * each beside a bare Fastify route that takes the same request and answers the same
 * number of bytes, and beside the DIY service (bench/diy-server.ts: the routes as a
 * developer would write them without us), measured in the same run (each round runs the
 * three back to back, in an order that rotates; the figures are medians of the rounds,
 * each ratio the median of the rounds' ratios). QR drawing is compared with the `qrcode` package's
 * own `toDataURL` on the same text, called in process.
 *
 * BENCH_SECONDS (default 3) and BENCH_ROUNDS (default 5) set the length of a run.
 * The conversion parts read the tests' corpus (test/fixtures/corpus/real), or the folder BENCH_CORPUS names (bench/corpus.ts).
 * BENCH_ONLY=totp|scale|convert|formats|toolkit|jobs|admin|portal|signin|factors|passkeys|tracing runs one part (admin: the admin API's paging and
 * usage reports on 100 000 accounts, bench/admin.ts; formats: JPEG, WebP and TIFF pages against PNG and the native tools,
 * bench/formats.ts; toolkit: text, merge, split, compress, rotate and flatten against pdftotext, qpdf and gs,
 * bench/toolkit.ts; jobs: conversion jobs against synchronous conversions, bench/jobs.ts; passkeys: passkey sign-ins against
 * managed and stateless TOTP verification, bench/passkeys.ts).
 */
import { spawnSync, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import QRCode from 'qrcode'
import { HOTP, Secret } from 'otpauth'
import { loadConfig } from '../src/config/config.ts'
import { resolvePepper } from '../src/config/pepper.ts'
import { openStore } from '../src/storage/factory.ts'
import { Accounts } from '../src/services/accounts.ts'
import { isFailure } from '../src/services/outcome.ts'
import { SYSTEM } from '../src/domain/accounts.ts'
import { convertBench } from './convert.ts'
import { formatsBench } from './formats.ts'
import { toolkitBench } from './toolkit.ts'
import { waitFor } from './wait.ts'
import { CONNECTIONS, freePort, median, pinned, run, serve, type Figures, type Load } from './load.ts'
import { scaleBench } from './scale.ts'
import { adminBench } from './admin.ts'
import { portalBench } from './portal.ts'
import { signinBench } from './signin.ts'
import { factorsBench } from './factors.ts'
import { passkeysBench } from './passkeys.ts'
import { jobsBench } from './jobs.ts'
import { tracingBench } from './tracing.ts'

const SECONDS = Number(process.env.BENCH_SECONDS ?? 3)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5)

function inProcessRate(work: () => Promise<unknown>, seconds: number): Promise<number> {
  return (async () => {
    let n = 0
    const end = performance.now() + seconds * 1000
    while (performance.now() < end) {
      await work()
      n++
    }
    return n / seconds
  })()
}

/** makeKey makes a fresh store with one key subscribed to every group in this region. */
async function makeKey(): Promise<{ dataDir: string; apiKey: string }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'tessera-bench-'))
  const config = loadConfig({ DATA_DIR: dataDir, NODE_ENV: 'test' })
  const pepper = resolvePepper(config)
  const store = await openStore(config)
  const accounts = new Accounts({ store, pepper, config })
  const ctx = { actor: SYSTEM }
  const account = await accounts.createAccount(ctx, { name: 'bench' })
  if (isFailure(account)) throw new Error(account.message)
  // The bench measures the service, not the throttle: no limits for its account.
  await accounts.setPlan(ctx, account.id, { rate: 0, burst: 1, quota: 0, period: 'month' })
  await accounts.setSubscription(ctx, account.id, config.region, 'totp', 'active')
  await accounts.setSubscription(ctx, account.id, config.region, 'converter', 'active')
  const issued = await accounts.issueKey(ctx, account.id, { name: 'bench' })
  if (isFailure(issued)) throw new Error(issued.message)
  await store.close()
  return { dataDir, apiKey: issued.apiKey }
}

async function totpBench(): Promise<void> {
  const { dataDir, apiKey } = await makeKey()
  const children: ChildProcess[] = []
  try {
    const env = { DATA_DIR: dataDir, NODE_ENV: 'test', LOG_LEVEL: 'warn' }

    const port = await freePort()
    const barePort = await freePort()
    const diyPort = await freePort()
    children.push(serve('src/server.ts', { ...env, PORT: String(port) }))
    children.push(serve('bench/bare-server.ts', { PORT: String(barePort) }))
    children.push(serve('bench/diy-server.ts', { PORT: String(diyPort), DIY_KEY: 'diy' }))
    const target = `http://127.0.0.1:${port}`
    const bare = `http://127.0.0.1:${barePort}`
    const diy = `http://127.0.0.1:${diyPort}`
    await waitFor(`${target}/healthz`)
    await waitFor(`${bare}/bare/10`)

    const key = { 'x-api-key': apiKey }
    const secret = new Secret().base32
    const otpUrl = `otpauth://totp/Bench%20App:user%40example.com?secret=${secret}&issuer=Bench%20App&algorithm=SHA1&digits=6&period=30`
    let user = 0
    // Every verifyOTP is a first use of its secret, so each one takes the success path (and writes state).
    const verifications = (count: number) => {
      const bodies: string[] = []
      const counter = Math.floor(Date.now() / 30000)
      for (let i = 0; i < count; i++) {
        const s = new Secret({ size: 20 })
        bodies.push(`secret=${s.base32}&token=${HOTP.generate({ secret: s, counter })}`)
      }
      let i = 0
      return () => bodies[i++ % bodies.length]!
    }

    const loads: [string, Load][] = [
      ['ping', { method: 'GET', path: '/totp/ping', headers: key }],
      ['getOTP', { method: 'POST', path: '/totp/getOTP', headers: key, body: `secret=${secret}` }],
      ['verifyOTP', { method: 'POST', path: '/totp/verifyOTP', headers: key, body: () => '' }],
      ['onboardUser', { method: 'POST', path: '/totp/onboardUser', headers: key, body: () => `userID=user${user++}%40example.com&applicationID=Bench%20App` }],
      ['generateQRCode', { method: 'POST', path: '/totp/generateQRCode', headers: { ...key, accept: '*/*' }, body: `data=${encodeURIComponent(otpUrl)}` }],
    ]

    const rows: string[] = []
    const rates: Record<string, number> = {}
    for (const [name, load] of loads) {
      const sample = await fetch(target + load.path, {
        method: load.method,
        headers: { ...load.headers, ...(load.body !== undefined ? { 'content-type': 'application/x-www-form-urlencoded' } : {}) },
        body: typeof load.body === 'function' ? (name === 'verifyOTP' ? verifications(1)() : load.body()) : load.body,
      })
      const size = (await sample.arrayBuffer()).byteLength
      if (!sample.ok) throw new Error(`${name} answered ${sample.status}`)
      // The baseline takes the same requests as the route, made the same way (a body per
      // request where the route has one), so that the load generator's share is the same.
      const forRound = (): Load => (name === 'verifyOTP' ? { ...load, body: verifications(Math.ceil(30_000 * SECONDS)) } : load)
      const bareOf = (l: Load): Load => ({ method: l.method, path: `/bare/${size}`, ...(l.body === undefined ? {} : { body: l.body }) })
      // The bare route ignores the bodies: one set of them serves all its rounds.
      const bareLoad = bareOf(forRound())
      // The DIY service (bench/diy-server.ts) answers the Renda routes, not the QR one; its key is its own.
      const withDiy = name !== 'generateQRCode'
      const diyLoad = (): Load => ({ ...forRound(), headers: { ...load.headers, 'x-api-key': 'diy' } })
      await run(target, forRound(), 1) // warm-up
      await run(bare, bareLoad, 1)
      if (withDiy) await run(diy, diyLoad(), 1)
      const t: Figures[] = []
      const b: Figures[] = []
      // Each round measures the three, back to back, in an order that rotates: this machine's
      // speed drifts over minutes, so each ratio is taken within a round, then the median.
      const ratios: number[] = []
      const diyRatios: number[] = []
      for (let r = 0; r < ROUNDS; r++) {
        let d: Figures | null = null
        const steps = [
          async () => t.push(await run(target, forRound(), SECONDS)),
          async () => b.push(await run(bare, bareLoad, SECONDS)),
          async () => {
            if (withDiy) d = await run(diy, diyLoad(), SECONDS)
          },
        ]
        for (let i = 0; i < steps.length; i++) await steps[(i + r) % steps.length]!()
        ratios.push(t[r]!.rps / b[r]!.rps)
        if (d !== null) diyRatios.push(t[r]!.rps / (d as Figures).rps)
      }
      const m = (fs: Figures[], k: keyof Figures) => median(fs.map((f) => f[k]))
      rates[name] = m(t, 'rps')
      rows.push(
        `| ${name} | ${size} | ${m(t, 'rps').toFixed(0)} | ${m(t, 'p50').toFixed(1)} | ${m(t, 'p99').toFixed(1)} | ` +
          `${m(b, 'rps').toFixed(0)} | ${m(b, 'p50').toFixed(1)} | ${m(b, 'p99').toFixed(1)} | **${median(ratios).toFixed(2)}×** | ` +
          `${withDiy ? `**${median(diyRatios).toFixed(2)}×**` : '–'} | ${t.reduce((n, f) => n + f.non2xx, 0)} |`,
      )
    }
    for (const c of children) c.kill('SIGTERM')

    // With the servers stopped, the in-process baseline has the machine to itself.
    const dataUrl = [] as number[]
    for (let r = 0; r < ROUNDS; r++) dataUrl.push(await inProcessRate(() => QRCode.toDataURL(otpUrl), Math.max(1, SECONDS / 2)))
    const toDataUrl = median(dataUrl)

    const out = [
      `## TOTP group: ${CONNECTIONS} connections, ${ROUNDS} rounds of ${SECONDS} s, medians (Node ${process.version}, ${cpus().length} CPUs, ${pinned ? 'server pinned to CPU 0, load generator to CPU 1' : 'not pinned'})`,
      '',
      '| route | bytes | req/s | p50 ms | p99 ms | bare req/s | bare p50 | bare p99 | ratio to bare | ratio to DIY | non-2xx |',
      '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
      ...rows,
      '',
      "## QR drawing against `qrcode`'s own `toDataURL` (same otpauth URL, in process, one core)",
      '',
      '| what | per second | ratio to toDataURL |',
      '| --- | --- | --- |',
      `| qrcode.toDataURL (in process) | ${toDataUrl.toFixed(0)} | 1.00× |`,
      `| POST /totp/generateQRCode (HTTP) | ${rates.generateQRCode!.toFixed(0)} | **${(rates.generateQRCode! / toDataUrl).toFixed(2)}×** |`,
      `| POST /totp/onboardUser (HTTP) | ${rates.onboardUser!.toFixed(0)} | **${(rates.onboardUser! / toDataUrl).toFixed(2)}×** |`,
      '',
    ]
    process.stdout.write(`${out.join('\n')}\n`)
  } finally {
    for (const c of children) c.kill('SIGTERM')
    rmSync(dataDir, { recursive: true, force: true })
  }
}

const only = process.env.BENCH_ONLY
if (only === undefined || only === 'totp') await totpBench()
if (only === undefined || only === 'scale') process.stdout.write(`${await scaleBench(SECONDS, ROUNDS)}\n`)
if (only === undefined || only === 'convert') {
  // The conversion workers need both CPUs: unpin every thread of this process first.
  if (pinned) spawnSync('taskset', ['-a', '-p', '-c', `0-${cpus().length - 1}`, String(process.pid)], { stdio: 'ignore' })
  process.stdout.write(`${await convertBench(makeKey, await freePort())}\n`)
}
if (only === undefined || only === 'formats') {
  if (pinned) spawnSync('taskset', ['-a', '-p', '-c', `0-${cpus().length - 1}`, String(process.pid)], { stdio: 'ignore' })
  process.stdout.write(`${await formatsBench(makeKey, await freePort())}\n`)
}
if (only === undefined || only === 'toolkit') {
  if (pinned) spawnSync('taskset', ['-a', '-p', '-c', `0-${cpus().length - 1}`, String(process.pid)], { stdio: 'ignore' })
  process.stdout.write(`${await toolkitBench(makeKey, await freePort())}\n`)
}
if (only === undefined || only === 'jobs') await jobsBench()
if (only === undefined || only === 'admin') await adminBench()
if (only === undefined || only === 'portal') await portalBench()
if (only === undefined || only === 'signin') await signinBench()
if (only === undefined || only === 'factors') await factorsBench()
if (only === undefined || only === 'passkeys') await passkeysBench()
if (only === undefined || only === 'tracing') await tracingBench()
