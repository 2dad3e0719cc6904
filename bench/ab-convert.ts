/**
 * A/B of conversion throughput: this tree against another checkout of the project (a baseline
 * commit), on the real corpus (test/fixtures/corpus/real, or BENCH_CORPUS) at 150 dpi, through HTTP, both servers
 * with 2 workers, in rounds whose order alternates; a ratio is taken within each round, then
 * the median (this machine's speed drifts). Each round: every file to PNG one at a time, the
 * corpus twice over by 4 clients at once, and the files under 100 kB to PostScript.
 *
 *   git worktree add ../baseline <commit> && ln -s "$PWD/node_modules" ../baseline/node_modules
 *   BENCH_BASELINE=../baseline node bench/ab-convert.ts
 *
 * Each server is launched with its own tree's LAUNCH_ENV (src/launch.ts), as it ships.
 * BENCH_ROUNDS (default 5) sets the number of rounds. A conversion that does not answer 200
 * is named at the end (the same file on both sides is no difference).
 */
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, readdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { freePort, median } from './load.ts'
import { demoServer } from './wait.ts'
import { BENCH_CORPUS as CORPUS } from './corpus.ts'

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5)
const BASELINE = process.env.BENCH_BASELINE
if (BASELINE === undefined || BASELINE === '') {
  process.stderr.write('BENCH_BASELINE must name a checkout of the baseline commit (see the comment at the top)\n')
  process.exit(2)
}
const ROOT = fileURLToPath(new URL('..', import.meta.url))
const files = readdirSync(CORPUS)
  .filter((f) => f.endsWith('.pdf') && !f.includes('password'))
  .map((name) => ({ name, bytes: readFileSync(join(CORPUS, name)) }))
const refused = new Set<string>()

interface Server {
  readonly name: string
  readonly url: string
  readonly key: string
}

async function start(name: string, root: string): Promise<Server> {
  const port = await freePort()
  const env = {
    PORT: String(port),
    DATA_DIR: mkdtempSync(join(tmpdir(), 'ab-convert-')),
    NODE_ENV: 'development',
    PLAN_RATE: '0',
    LOG_LEVEL: 'warn',
    ADMIN_LISTEN: 'off',
    CONVERTER_WORKERS: '2',
  }
  const child = spawn(process.execPath, [join(root, 'src/server.ts')], {
    env: { ...process.env, ...(await launchEnv(root)), ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  return { name, ...(await demoServer(child, port)) }
}

/** launchEnv: what a tree's server is launched with (its src/launch.ts; a tree older than it, nothing), each side as it ships. */
async function launchEnv(root: string): Promise<Readonly<Record<string, string>>> {
  const file = join(root, 'src/launch.ts')
  return existsSync(file) ? ((await import(pathToFileURL(file).href)) as { LAUNCH_ENV: Readonly<Record<string, string>> }).LAUNCH_ENV : {}
}

async function convert(server: Server, route: 'generateImage' | 'generatePostscript', file: { name: string; bytes: Buffer }): Promise<void> {
  const form = new FormData()
  form.append('pdfDocument', new Blob([Uint8Array.from(file.bytes)], { type: 'application/pdf' }), file.name)
  if (route === 'generateImage') form.append('dpi', '150')
  const res = await fetch(`${server.url}/converter/${route}`, { method: 'POST', headers: { 'x-api-key': server.key }, body: form })
  try {
    await res.arrayBuffer()
  } catch (error) {
    // A 200 the server cut after it began (a limit reached mid-stream, see the guide's "When an answer can end short") is named, not fatal.
    refused.add(`${server.name} ${route} ${file.name}: ${res.status} cut short (${(error as Error).message})`)
    return
  }
  if (res.status !== 200) refused.add(`${server.name} ${route} ${file.name}: ${res.status}`)
}

/** pass times one round's three loads on `server`, in seconds. */
async function pass(server: Server): Promise<number[]> {
  const times: number[] = []
  const timed = async (work: () => Promise<unknown>) => {
    const t0 = performance.now()
    await work()
    times.push((performance.now() - t0) / 1000)
  }
  await timed(async () => {
    for (const file of files) await convert(server, 'generateImage', file)
  })
  const queue = [...files, ...files]
  await timed(() =>
    Promise.all(
      Array.from({ length: 4 }, async () => {
        for (let file = queue.shift(); file !== undefined; file = queue.shift()) await convert(server, 'generateImage', file)
      }),
    ),
  )
  await timed(async () => {
    for (const file of files.filter((f) => f.bytes.length < 100_000)) await convert(server, 'generatePostscript', file)
  })
  return times
}

const base = await start('baseline', resolve(BASELINE))
const now = await start('this tree', ROOT)
await pass(base) // both warm: workers started, engines loaded
await pass(now)
const ratios: number[][] = [[], [], []]
for (let round = 0; round < ROUNDS; round++) {
  const first = round % 2 === 0 ? base : now
  const second = first === base ? now : base
  const a = await pass(first)
  const b = await pass(second)
  const [before, after] = first === base ? [a, b] : [b, a]
  for (let i = 0; i < 3; i++) ratios[i]!.push(before[i]! / after[i]!)
  console.log(`round ${round}: baseline ${before.map((s) => s.toFixed(1)).join(' / ')} s, this tree ${after.map((s) => s.toFixed(1)).join(' / ')} s`)
}
const m = ratios.map((r) => median(r).toFixed(3))
console.log(
  `throughput this tree / baseline (above 1: faster), medians of ${ROUNDS} alternating rounds: PNG one at a time ${m[0]}, PNG by 4 clients ${m[1]}, PostScript ${m[2]}`,
)
if (refused.size > 0) console.log(`not 200: ${[...refused].join('; ')}`)
process.exit(0)
