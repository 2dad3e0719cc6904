/**
 * npm run soak: every operation of the served OpenAPI documents (public and admin), driven with
 * the valid, boundary and hostile inputs of its entry in the input table (bench/soak/inputs/),
 * from several accounts at once for SOAK_SECONDS, against the real server as a child process on
 * a fresh store. It fails at start when an operation has no entry (or an entry no operation),
 * and after when any answer was a 5xx (other than a documented 503 with Retry-After), not
 * documented, not taken by its case, or a 200 cut short outside the documented case; when the
 * server's process tree is not back within SOAK_RSS_MARGIN_MB of its start 10 s after the load;
 * when an account keeps more than its caps; when the canary's p99 passes its bounds; or when the
 * server does not stop cleanly. docs/performance.md, "The soak", has the options and figures.
 */
import { writeFileSync } from 'node:fs'
import { createServer as createHttpServer } from 'node:http'
import { createServer as createNetServer, type Socket } from 'node:net'
import { memoryKinds, treeRssBytes, type MemoryKinds } from '../../test/support/process.ts'
import type { OpenApiDocument } from '../../test/support/conformance.ts'
import { makeAccount } from './accounts.ts'
import { runCanary, type CanaryKind } from './canary.ts'
import { coverage, describe, operationsOf } from './coverage.ts'
import { ADMIN, PUBLIC } from './inputs/index.ts'
import { probe } from './probe.ts'
import { startReceiver } from './receiver.ts'
import { Runner, type Account } from './run.ts'
import { adminToken, freshStore, startServer, type StoreKind } from './server.ts'
import { quantile, table, Tally } from './stats.ts'
import type { Case, Ctx, Operation } from './types.ts'

const SECONDS = Number(process.env.SOAK_SECONDS ?? 60)
const STORE = (process.env.SOAK_STORE ?? 'sqlite') as StoreKind
const ACCOUNTS = Number(process.env.SOAK_ACCOUNTS ?? 3)
const LANES = Number(process.env.SOAK_LANES ?? 3)
const RSS_MARGIN_MB = Number(process.env.SOAK_RSS_MARGIN_MB ?? 400)
/** The order the cases go in (a short run reaches only the first heavy ones): by default the UTC day's number, so that CI's runs take turns. */
const SEED = Number(process.env.SOAK_SEED ?? Math.floor(Date.now() / 86_400_000))
/** The canary's p99 bounds (ms), by kind: chosen from the runs recorded in docs/performance.md. */
const CANARY_P99_MS: Record<CanaryKind, number> = {
  ping: Number(process.env.SOAK_CANARY_TOTP_P99_MS ?? 1000),
  verifyOTP: Number(process.env.SOAK_CANARY_TOTP_P99_MS ?? 1000),
  conversion: Number(process.env.SOAK_CANARY_CONVERSION_P99_MS ?? 20_000),
}
/** What the soak's server runs with besides its defaults: the harness's receiver is on loopback; a stalled reader is dropped sooner. */
const SETTINGS: Record<string, string> = { WEBHOOK_ALLOW_PRIVATE: 'true', CLIENT_STALL_TIMEOUT_MS: '10000' }
const STALL_HOLD_MS = 15_000
const REQUEST_TIMEOUT_MS = 180_000
const SETTLE_MS = 10_000
/**
 * SOAK_TRACES: `off` (default, as a node ships); `on`, every span (always_on) exported to a collector of the harness's own that
 * takes them (counted, not kept); `stalled`, to one that takes connections and never answers (each export times out, the SDK's
 * queue stays at its bound and drops the rest). The RSS bound holds in each.
 */
const TRACES = process.env.SOAK_TRACES ?? 'off'
/** A file to write the figures to, as JSON (for docs/performance.md). */
const REPORT = process.env.SOAK_REPORT

if (STORE !== 'sqlite' && STORE !== 'postgres') throw new Error('SOAK_STORE is sqlite or postgres')
if (!['off', 'on', 'stalled'].includes(TRACES)) throw new Error('SOAK_TRACES is off, on or stalled')
const say = (line: string) => process.stdout.write(`${line}\n`)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const mib = (bytes: number) => Math.round(bytes / 1024 / 1024)

async function soak(): Promise<number> {
  const { id: tokenId, token } = adminToken(store)
  const server = await startServer(store, { ...SETTINGS, ...collector.settings })
  say(
    `# soak: ${SECONDS} s on ${STORE === 'sqlite' ? 'SQLite' : 'PostgreSQL + Redis'}, ${ACCOUNTS} accounts × ${LANES} lanes, a heavy lane and a canary; SOAK_SEED=${SEED}; traces ${TRACES}`,
  )
  const docs = {
    public: (await (await fetch(`${server.url}/openapi.json`)).json()) as OpenApiDocument,
    admin: (await (await fetch(`${server.adminUrl}/admin/v1/openapi.json`)).json()) as OpenApiDocument,
  }
  const ops = [...operationsOf(docs.public, 'public'), ...operationsOf(docs.admin, 'admin')]
  const problems = [...describe(coverage(operationsOf(docs.public, 'public'), PUBLIC)), ...describe(coverage(operationsOf(docs.admin, 'admin'), ADMIN))]
  if (problems.length > 0) {
    for (const p of problems) say(`FAIL coverage: ${p}`)
    await server.stop()
    return 1
  }
  const table_ = { ...PUBLIC, ...ADMIN }
  say(`# ${ops.length} operations, ${ops.reduce((n, o) => n + table_[o.id]!.length, 0)} cases`)

  const make = (name: string, i: number, limited = false) => makeAccount(server.adminUrl, token, name, i, limited)
  const load: Account[] = []
  for (let i = 0; i < ACCOUNTS; i++) load.push(await makeAccount(server.adminUrl, token, `soak load ${i}`, i, i === 0, `${receiver.url}/hook/ok`))
  const canaryAccount = await make('soak canary', ACCOUNTS)
  const scratch = await make('soak scratch', ACCOUNTS + 1)
  const tally = new Tally()
  const runner = new Runner({
    urls: { public: server.url, admin: server.adminUrl },
    docs,
    ops: new Map(ops.map((o) => [o.id, o])),
    table: table_,
    adminToken: token,
    receiver: receiver.url,
    tally,
    timeoutMs: REQUEST_TIMEOUT_MS,
    stallMs: STALL_HOLD_MS,
  })
  const contexts = load.map((a) => runner.context(a, scratch))

  // Warm-up: each operation's first valid case once, so that the workers and engines the load uses are up before the start is measured.
  // Two at once, so that every conversion worker loads the engines it will use.
  const pair = [contexts[0]!, contexts[Math.min(1, contexts.length - 1)]!]
  for (const op of ops) await Promise.all(pair.map((ctx) => runner.run(ctx, op.id, table_[op.id]!.find((c) => c.kind === 'valid')!)))
  await sleep(5000)
  const rss = { start: treeRssBytes(server.pid), peak: 0, after: 0 }
  const held = { start: await heldBy(server.pid, server.adminUrl), after: null as Held | null }
  say(`# warmed up (${tally.failures} failures so far); the server's process tree: ${mib(rss.start)} MiB`)

  const end = Date.now() + SECONDS * 1000
  const sampler = setInterval(() => {
    rss.peak = Math.max(rss.peak, treeRssBytes(server.pid))
  }, 1000)
  const ticker = setInterval(() => say(`# ${Math.round((end - Date.now()) / 1000)} s left; ${sumRequests(tally)} answers, ${tally.failures} failures`), 30_000)
  const { light, heavy } = schedule(ops, table_, SEED)
  const lanes = Array.from({ length: ACCOUNTS * LANES }, (_, i) => lane(runner, contexts[i % contexts.length]!, light, () => Date.now() >= end))
  lanes.push(lane(runner, contexts[0]!, heavy, () => Date.now() >= end))
  const canary = runCanary(server.url, canaryAccount, () => Date.now() >= end)
  const canaryFigures = await canary
  await Promise.all(lanes)
  clearInterval(ticker)
  clearInterval(sampler)
  const drained = Date.now()
  await sleep(SETTLE_MS)
  rss.after = treeRssBytes(server.pid)
  held.after = await heldBy(server.pid, server.adminUrl)
  runner.close()
  const stopped = await server.stop()
  const figures = await probe(
    store,
    SETTINGS,
    [...load, canaryAccount, scratch].map((a, i) => ({ id: a.id, name: i < ACCOUNTS ? `load ${i}` : i === ACCOUNTS ? 'canary' : 'scratch' })),
    tokenId,
  )

  // The verdict.
  const failed: string[] = []
  say('')
  say(
    table(
      tally,
      ops.map((o) => o.id),
    ),
  )
  say('')
  for (const line of tally.lines) say(`FAIL ${line}`)
  if (tally.failures > 0) failed.push(`${tally.failures} answers failed (the first ${tally.lines.length} above)`)
  const slow = [...tally.slowest].sort(([, a], [, b]) => b - a).slice(0, 15)
  say(`slowest cases: ${slow.map(([k, ms]) => `${k} ${(ms / 1000).toFixed(1)} s`).join('; ')}`)
  // A list the lanes went all through must have had an answer for each of its cases; a heavy list a short run only began is reported.
  for (const [what, pairs] of [
    ['light', light],
    ['heavy', heavy],
  ] as const) {
    const through = (cursors.get(pairs) ?? 0) >= pairs.length
    const never = pairs.map(([id, c]) => `${id}: ${c.name}`).filter((k) => (tally.cases.get(k) ?? 0) === 0)
    for (const n of never) {
      const skip = runner.skipped.get(n)
      say(
        `${through ? 'NOT ANSWERED' : 'NOT REACHED'} ${n}${skip === undefined ? '' : ` (its request could not be made ${skip.times} times, the last: ${skip.why})`}`,
      )
    }
    say(
      `${what} cases: ${pairs.length - never.length} of ${pairs.length} answered${through ? '' : `; the ${what} lanes did not go all through them in ${SECONDS} s (SOAK_SEED orders them)`}`,
    )
    if (through && never.length > 0) failed.push(`${never.length} ${what} cases never answered`)
  }
  const stalls = [...tally.ops.values()].reduce((n, o) => n + o.stallDropped, 0)
  say(`readers that stopped reading and were dropped by the server (CLIENT_STALL_TIMEOUT_MS): ${stalls}`)
  const grew = rss.after - rss.start
  say(
    `RSS of the server's process tree: start ${mib(rss.start)} MiB, peak ${mib(rss.peak)} MiB, ${SETTLE_MS / 1000} s after the load ${mib(rss.after)} MiB (${grew >= 0 ? '+' : ''}${mib(grew)} MiB; limit +${RSS_MARGIN_MB} MiB)`,
  )
  say(`  where the server process holds it, at the start and after: ${describeHeld(held.start, held.after!)}`)
  if (grew > RSS_MARGIN_MB * 1024 * 1024) failed.push(`RSS ${mib(grew)} MiB above its start ${SETTLE_MS / 1000} s after the load`)
  for (const kind of Object.keys(canaryFigures.ms) as CanaryKind[]) {
    const ms = canaryFigures.ms[kind]
    const p99 = quantile(ms, 0.99)
    say(
      `canary ${kind}: ${ms.length} requests (${canaryFigures.refused[kind]} tries refused with 503 and Retry-After, tried again), p50 ${quantile(ms, 0.5).toFixed(0)} ms, p99 ${p99.toFixed(0)} ms (bound ${CANARY_P99_MS[kind]} ms), max ${Math.max(0, ...ms).toFixed(0)} ms`,
    )
    if (p99 > CANARY_P99_MS[kind]) failed.push(`canary ${kind} p99 ${p99.toFixed(0)} ms over ${CANARY_P99_MS[kind]} ms`)
  }
  for (const f of canaryFigures.failures) say(`FAIL canary ${f}`)
  if (canaryFigures.failures.length > 0) failed.push(`${canaryFigures.failures.length} canary requests failed`)
  for (const a of figures.accounts) say(`store, ${a.name}: ${[...a.figures].map(([n, [v, cap]]) => `${n} ${v}${cap === null ? '' : `/${cap}`}`).join(', ')}`)
  say(`store size: ${figures.size}`)
  for (const o of figures.over) failed.push(o)
  say(`receiver: ${[...receiver.seen].map(([k, n]) => `${k} ${n}`).join(', ') || 'nothing'}`)
  if (TRACES !== 'off') say(`traces (${TRACES}): ${collector.describe()}`)
  const errors = (server.logs.counts.get('error') ?? 0) + (server.logs.counts.get('fatal') ?? 0)
  say(
    `server log: ${[...server.logs.counts].map(([k, n]) => `${k} ${n}`).join(', ') || 'nothing at warn or above'}; stopped by SIGTERM with exit code ${stopped.code} in ${stopped.ms.toFixed(0)} ms, ${((drained - end) / 1000).toFixed(1)} s of draining`,
  )
  for (const line of server.logs.errors.slice(0, 20)) say(`LOG ${line}`)
  if (errors > 0) failed.push(`${errors} error lines in the server's log`)
  if (stopped.code !== 0) failed.push(`the server exited ${stopped.code} on SIGTERM`)
  if (REPORT !== undefined) {
    const cases = Object.fromEntries([...tally.cases].map(([k, n]) => [k, { answers: n, slowestMs: Math.round(tally.slowest.get(k) ?? 0) }]))
    const perOp = Object.fromEntries(
      [...tally.ops].map(([id, o]) => [
        id,
        {
          requests: o.requests,
          statuses: Object.fromEntries(o.statuses),
          p50: quantile(o.ms, 0.5),
          p99: quantile(o.ms, 0.99),
          documentedCuts: o.documentedCuts,
          failures: o.failures,
        },
      ]),
    )
    const canary = Object.fromEntries(
      Object.entries(canaryFigures.ms).map(([k, ms]) => [k, { requests: ms.length, p50: quantile(ms, 0.5), p99: quantile(ms, 0.99), max: Math.max(0, ...ms) }]),
    )
    const store_ = figures.accounts.map((a) => ({ name: a.name, ...Object.fromEntries([...a.figures].map(([n, [v]]) => [n, v])) }))
    writeFileSync(
      REPORT,
      `${JSON.stringify({ seconds: SECONDS, store: STORE, rss, canary, perOp, cases, storeFigures: store_, storeSize: figures.size, failed }, null, 1)}\n`,
    )
  }
  say('')
  if (failed.length === 0) say(`PASS: ${sumRequests(tally)} answers over ${SECONDS} s`)
  else for (const f of failed) say(`FAIL: ${f}`)
  return failed.length === 0 ? 0 : 1
}

type Pair = readonly [string, Case]

/** schedule orders every case of every operation, the heavy ones apart, in a shuffle of `from` (the same for the same seed). */
function schedule(ops: readonly Operation[], t: typeof PUBLIC, from: number): { light: Pair[]; heavy: Pair[] } {
  const all: Pair[] = ops.flatMap((o) => t[o.id]!.map((c) => [o.id, c] as const))
  let seed = from & 0x7fffffff
  const random = () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff
    return seed / 0x7fffffff
  }
  for (let i = all.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1))
    ;[all[i], all[j]] = [all[j]!, all[i]!]
  }
  return { light: all.filter(([, c]) => c.heavy !== true), heavy: all.filter(([, c]) => c.heavy === true) }
}

const cursors = new WeakMap<Pair[], number>()

/** lane runs the pairs in turn (lanes on one list share its cursor) until `stop()`. */
async function lane(runner: Runner, ctx: Ctx, pairs: Pair[], stop: () => boolean): Promise<void> {
  while (!stop() && pairs.length > 0) {
    const at = cursors.get(pairs) ?? 0
    cursors.set(pairs, at + 1)
    const [opId, c] = pairs[at % pairs.length]!
    await runner.run(ctx, opId, c)
  }
}

function sumRequests(t: Tally): number {
  let n = 0
  for (const s of t.ops.values()) n += s.requests
  return n
}

const store = await freshStore(STORE)
const receiver = await startReceiver()
const collector = await startCollector(TRACES)
// Ctrl-C or a SIGTERM still drops the scratch store (the server is killed as this process exits).
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => void store.drop().finally(() => process.exit(130)))
let exitCode = 1
try {
  exitCode = await soak()
} finally {
  await receiver.close()
  await collector.close()
  await store.drop()
}
process.exit(exitCode)

/** Held: the server process's resident memory by the kind of mapping, and its main thread's V8 heap and external memory (its /metrics). */
type Held = MemoryKinds & { readonly v8Heap: number; readonly external: number }

/** heldBy reads where the server process holds its memory: /proc/PID/smaps, and the main thread's heap figures from the admin listener's /metrics. */
async function heldBy(pid: number, adminUrl: string): Promise<Held> {
  const text = await fetch(`${adminUrl}/metrics`).then(
    (r) => r.text(),
    () => '',
  )
  const metric = (name: string) => Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)`, 'm').exec(text)?.[1] ?? Number.NaN)
  return { ...memoryKinds(pid), v8Heap: metric('nodejs_heap_size_total_bytes'), external: metric('nodejs_external_memory_bytes') }
}

function describeHeld(start: Held, after: Held): string {
  const names: Record<keyof Held, string> = {
    reservations: 'WebAssembly memories',
    arenas: 'malloc arenas',
    brk: 'malloc heap',
    otherAnonymous: 'other anonymous',
    files: 'files',
    v8Heap: "main thread's V8 heap",
    external: 'its external memory',
  }
  return (Object.keys(names) as (keyof Held)[]).map((k) => `${names[k]} ${mib(start[k])} → ${mib(after[k])} MiB`).join(', ')
}

/** The soak's OTLP collector (SOAK_TRACES): the server's settings that send it spans, what it saw, and its close. */
interface Collector {
  readonly settings: Record<string, string>
  describe(): string
  close(): Promise<void>
}

async function startCollector(mode: string): Promise<Collector> {
  if (mode === 'off') return { settings: {}, describe: () => 'off', close: async () => {} }
  const sockets = new Set<Socket>()
  let [exports, bytes] = [0, 0]
  const server =
    mode === 'on'
      ? createHttpServer((request, response) => {
          request.on('data', (chunk: Buffer) => {
            bytes += chunk.length
          })
          request.on('end', () => {
            exports++
            response.writeHead(200, { 'content-type': 'application/x-protobuf' }).end()
          })
        })
      : createNetServer((socket) => {
          // Taken, never answered: the exporter's timeout ends each export.
          sockets.add(socket)
          socket.on('close', () => sockets.delete(socket))
          socket.resume()
        })
  server.on('connection', (socket: Socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`
  return {
    settings: { OTEL_EXPORTER_OTLP_ENDPOINT: url, OTEL_TRACES_SAMPLER: 'always_on', OTEL_SERVICE_NAME: 'tessera-soak' },
    describe: () =>
      mode === 'on' ? `${exports} exports taken, ${mib(bytes)} MiB of spans` : `the collector never answered; ${sockets.size} connections open at the end`,
    close: async () => {
      for (const s of sockets) s.destroy()
      await new Promise((resolve) => server.close(resolve))
    },
  }
}
