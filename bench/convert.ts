/**
 * The conversion part of npm run bench, on the real corpus at 150 dpi: PNG pages per
 * second and PostScript seconds through HTTP, beside the native tools when they are
 * installed (bench/install-native-tools.sh: mutool, pdftoppm, gs, pdftops; never a runtime
 * dependency), throughput with 1 and 2 workers, and peak RSS and ping latency while 8
 * conversions of the 117-page file run at once.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { waitFor } from './wait.ts'

const ROOT = new URL('..', import.meta.url).pathname
const CORPUS = join(ROOT, '..', 'shared', 'corpus', 'real')
const DPI = 150
const PASSWORDS: Record<string, string> = { 'libreoffice-writer-password.pdf': 'openpassword' }
const BIG = 'GeoTopo-komprimiert.pdf'

const has = (tool: string) => spawnSync('sh', ['-c', `command -v ${tool}`]).status === 0
const percentile = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]!

interface Server { url: string; key: string; child: ChildProcess; dir: string }

function stop(server: Server): void {
  server.child.kill('SIGTERM')
  rmSync(server.dir, { recursive: true, force: true })
}

async function startServer(workers: number, key: () => Promise<{ dataDir: string; apiKey: string }>, port: number): Promise<Server> {
  const { dataDir, apiKey } = await key()
  const child = spawn(process.execPath, [join(ROOT, 'src/server.ts')], {
    env: { ...process.env, DATA_DIR: dataDir, PORT: String(port), LOG_LEVEL: 'warn', NODE_ENV: 'test', CONVERTER_WORKERS: String(workers), CONVERSION_TIMEOUT_MS: '600000', CONVERTER_QUEUE_PER_WORKER: '16' },
    stdio: ['ignore', 'ignore', 'inherit'],
  })
  const url = `http://127.0.0.1:${port}`
  await waitFor(`${url}/healthz`)
  return { url, key: apiKey, child, dir: dataDir }
}

async function convert(server: Server, route: 'generateImage' | 'generatePostscript', name: string, extra: Record<string, string> = {}): Promise<number> {
  const form = new FormData()
  form.append('pdfDocument', new Blob([readFileSync(join(CORPUS, name))]), name)
  if (route === 'generateImage') form.append('dpi', String(DPI))
  if (PASSWORDS[name]) form.append('password', PASSWORDS[name]!)
  for (const [k, v] of Object.entries(extra)) form.append(k, v)
  const res = await fetch(`${server.url}/converter/${route}`, { method: 'POST', headers: { 'x-api-key': server.key }, body: form })
  await res.arrayBuffer()
  if (res.status !== 200) throw new Error(`${name} ${route}: ${res.status}`)
  return Number(res.headers.get('x-page-count'))
}

/** timeTool runs a native tool over every file (into a scratch folder) and returns the seconds taken. */
function timeTool(files: string[], args: (file: string, out: string) => string[], tool: string): number {
  const out = mkdtempSync(join(tmpdir(), 'tessera-native-'))
  const start = performance.now()
  for (const f of files) {
    const r = spawnSync(tool, args(join(CORPUS, f), out), { stdio: 'ignore' })
    if (r.status !== 0) process.stderr.write(`${tool} failed on ${f}\n`)
  }
  const seconds = (performance.now() - start) / 1000
  rmSync(out, { recursive: true, force: true })
  return seconds
}

async function runAll(server: Server, files: string[], route: 'generateImage' | 'generatePostscript', concurrency: number): Promise<{ seconds: number; pages: number }> {
  const queue = [...files]
  let pages = 0
  const start = performance.now()
  await Promise.all(Array.from({ length: concurrency }, async () => {
    for (let f = queue.shift(); f !== undefined; f = queue.shift()) {
      const converted = await convert(server, route, f) // not `pages += await …`: that reads `pages` before the wait
      pages += converted
    }
  }))
  return { seconds: (performance.now() - start) / 1000, pages }
}

export async function convertBench(makeKey: () => Promise<{ dataDir: string; apiKey: string }>, port: number): Promise<string> {
  const files = readdirSync(CORPUS).filter((f) => f.endsWith('.pdf')).sort()
  const plain = files.filter((f) => !PASSWORDS[f])
  const out: string[] = [`## Conversion: real corpus (${files.length} files), ${DPI} dpi`, '']

  // PNG: one conversion at a time (one worker busy) against each native tool run one file at a time.
  const two = await startServer(2, makeKey, port)
  try {
    await runAll(two, ['minimal-document.pdf'], 'generateImage', 1) // start the workers
    const png = await runAll(two, files, 'generateImage', 1)
    const rows = [`| Tessera over HTTP (one conversion at a time) | ${png.pages} | ${png.seconds.toFixed(1)} | ${(png.pages / png.seconds).toFixed(1)} | 1.00× |`]
    const native: [string, string, (f: string, o: string) => string[]][] = [
      ['mutool draw', 'mutool', (f, o) => ['draw', '-q', '-r', String(DPI), '-o', join(o, 'p%d.png'), f]],
      ['pdftoppm', 'pdftoppm', (f, o) => ['-r', String(DPI), '-png', f, join(o, 'p')]],
      ['gs png16m', 'gs', (f, o) => ['-q', '-dSAFER', '-dBATCH', '-dNOPAUSE', '-sDEVICE=png16m', `-r${DPI}`, `-sOutputFile=${join(o, 'p%d.png')}`, f]],
    ]
    for (const [label, tool, args] of native) {
      if (!has(tool)) {
        rows.push(`| ${label} | not installed (bench/install-native-tools.sh) | | | |`)
        continue
      }
      const seconds = timeTool(plain, args, tool)
      const pages = png.pages - 1 // the encrypted one-page file is left out of the native runs
      const rate = pages / seconds
      rows.push(`| ${label} (native) | ${pages} | ${seconds.toFixed(1)} | ${rate.toFixed(1)} | Tessera at **${((png.pages / png.seconds) / rate).toFixed(2)}×** |`)
    }
    out.push('PNG, pages per second:', '', '| what | pages | seconds | pages/s | ratio |', '| --- | --- | --- | --- | --- |', ...rows, '')

    // PostScript: seconds per document.
    const ps = await runAll(two, files, 'generatePostscript', 1)
    const psRows = [`| Tessera over HTTP (one at a time) | ${ps.seconds.toFixed(1)} | ${(ps.seconds / files.length).toFixed(2)} | 1.00× |`]
    const psNative: [string, string, (f: string, o: string) => string[]][] = [
      ['gs -sDEVICE=ps2write', 'gs', (f, o) => ['-q', '-dSAFER', '-dBATCH', '-dNOPAUSE', '-sDEVICE=ps2write', `-sOutputFile=${join(o, 'out.ps')}`, f]],
      ['pdftops', 'pdftops', (f, o) => [f, join(o, 'out.ps')]],
    ]
    for (const [label, tool, args] of psNative) {
      if (!has(tool)) {
        psRows.push(`| ${label} | not installed | | |`)
        continue
      }
      const seconds = timeTool(plain, args, tool) * files.length / plain.length
      psRows.push(`| ${label} (native) | ${seconds.toFixed(1)} | ${(seconds / files.length).toFixed(2)} | Tessera takes **${(ps.seconds / seconds).toFixed(2)}×** as long |`)
    }
    out.push('PostScript, seconds per document:', '', '| what | seconds (all) | s/document | ratio |', '| --- | --- | --- | --- |', ...psRows, '')

    stop(two)

    // Throughput: a fresh server for each pool size, the same load (2 conversions at a time).
    const rates: number[] = []
    for (const [i, workers] of [1, 2].entries()) {
      const server = await startServer(workers, makeKey, port + 1 + i)
      await runAll(server, ['pdflatex-4-pages.pdf', 'pdflatex-4-pages.pdf'], 'generateImage', 2) // start the workers
      const run = await runAll(server, files, 'generateImage', 2)
      rates.push(run.pages / run.seconds)
      stop(server)
    }
    out.push('Throughput, PNG, 2 conversions at a time:', '', '| workers | pages/s | ratio |', '| --- | --- | --- |',
      `| 1 | ${rates[0]!.toFixed(1)} | 1.00× |`, `| 2 | ${rates[1]!.toFixed(1)} | ${(rates[1]! / rates[0]!).toFixed(2)}× |`, '')

    // Peak RSS and ping latency during 8 concurrent conversions of the 117-page file.
    const load = await startServer(2, makeKey, port + 3)
    const pings: number[] = []
    let running = true
    const pinger = (async () => {
      while (running) {
        const t = performance.now()
        await (await fetch(`${load.url}/totp/ping`, { headers: { 'x-api-key': load.key } })).arrayBuffer()
        pings.push(performance.now() - t)
        await new Promise((r) => setTimeout(r, 10))
      }
    })()
    const start = performance.now()
    await Promise.all(Array.from({ length: 8 }, () => convert(load, 'generateImage', BIG)))
    const seconds = (performance.now() - start) / 1000
    running = false
    await pinger
    const status = readFileSync(`/proc/${load.child.pid}/status`, 'utf8')
    const peak = Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? 0) / 1024
    stop(load)
    out.push(`8 concurrent conversions of ${BIG} (117 pages each, 2 workers): ${seconds.toFixed(1)} s, **peak RSS ${peak.toFixed(0)} MiB** (VmHWM of the server process, workers included); ` +
      `ping meanwhile: ${pings.length} calls, p50 ${percentile(pings, 0.5).toFixed(1)} ms, **p99 ${percentile(pings, 0.99).toFixed(1)} ms**.`, '')
  } finally {
    stop(two)
  }
  return out.join('\n')
}
