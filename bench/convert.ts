/**
 * The conversion part of npm run bench, on the real corpus at 150 dpi, through HTTP, beside
 * the native tools when they are installed (bench/install-native-tools.sh: mutool, pdftoppm,
 * gs; never a runtime dependency):
 *
 * - PNG pages per second, one conversion at a time: ours on 1 worker and on all workers (a
 *   document's pages split across them), native `mutool draw` single-threaded and with its
 *   threads option (`-T`, which works only in banded mode, `-B`), and `pdftoppm`;
 * - PostScript seconds beside native `gs -sDEVICE=ps2write`, and per file;
 * - the p50 of a one-page conversion beside `mutool draw` of the same page as a process;
 * - a one-page conversion's latency alone and while the 117-page file runs on every worker;
 * - total pages per second while 8 clients convert at once, with and without page splitting;
 * - peak RSS and ping latency while 8 conversions of the 117-page file run at once.
 *
 * Each comparison runs on the files both sides convert (a native tool that fails on a file,
 * or converts none of its pages, leaves it out of that comparison). Each round measures every
 * side once, the order alternating; the figures are medians of the rounds, each ratio the
 * median of the rounds' ratios. BENCH_CONVERT_ROUNDS (default 3) sets the rounds.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { median } from './load.ts'
import { waitFor } from './wait.ts'
import { BENCH_CORPUS as CORPUS } from './corpus.ts'
import { LAUNCH_ENV } from '../src/launch.ts'

const ROOT = new URL('..', import.meta.url).pathname
const DPI = 150
const ROUNDS = Number(process.env.BENCH_CONVERT_ROUNDS ?? 3)
const PASSWORDS: Record<string, string> = { 'libreoffice-writer-password.pdf': 'openpassword' }
const BIG = 'GeoTopo-komprimiert.pdf'
/** The one-page conversion: a page of text, rules and a figure (LaTeX), and the same page as mutool draws it. */
const ONE_PAGE = { file: 'pdflatex-image.pdf', page: 1 }
const ONE_PAGE_CALLS = 40

export const has = (tool: string) => spawnSync('sh', ['-c', `command -v ${tool}`]).status === 0
const percentile = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]!
const x = (n: number) => `${n.toFixed(2)}×`

interface Server {
  url: string
  key: string
  child: ChildProcess
  dir: string
}

export function stop(server: Server): void {
  server.child.kill('SIGTERM')
  rmSync(server.dir, { recursive: true, force: true })
}

type MakeKey = () => Promise<{ dataDir: string; apiKey: string }>

export async function startServer(makeKey: MakeKey, port: number, env: Record<string, string>): Promise<Server> {
  const { dataDir, apiKey } = await makeKey()
  const child = spawn(process.execPath, [join(ROOT, 'src/server.ts')], {
    env: {
      ...process.env,
      ...LAUNCH_ENV,
      DATA_DIR: dataDir,
      PORT: String(port),
      LOG_LEVEL: 'warn',
      NODE_ENV: 'test',
      ADMIN_LISTEN: 'off',
      CONVERSION_TIMEOUT_MS: '600000',
      CONVERTER_QUEUE_PER_WORKER: '16',
      ...env,
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  })
  const url = `http://127.0.0.1:${port}`
  await waitFor(`${url}/healthz`)
  const server = { url, key: apiKey, child, dir: dataDir }
  // Start every worker (a conversion per worker at once), so that no measurement pays for it.
  const workers = Number(env.CONVERTER_WORKERS ?? 1)
  await Promise.all(Array.from({ length: workers }, () => convert(server, 'generateImage', 'pdflatex-4-pages.pdf')))
  return server
}

async function convert(
  server: Server,
  route: 'generateImage' | 'generatePostscript',
  name: string,
  extra: Record<string, string> = {},
  retried = false,
): Promise<number> {
  const form = new FormData()
  form.append('pdfDocument', new Blob([readFileSync(join(CORPUS, name))]), name)
  if (route === 'generateImage') form.append('dpi', String(DPI))
  if (PASSWORDS[name]) form.append('password', PASSWORDS[name]!)
  for (const [k, v] of Object.entries(extra)) form.append(k, v)
  let res: Response
  try {
    res = await fetch(`${server.url}/converter/${route}`, { method: 'POST', headers: { 'x-api-key': server.key }, body: form })
  } catch (error) {
    // A kept-alive connection the server closed while the native tools ran (its idle timeout): once more, on a new one.
    if (retried) throw new Error(`${name} ${route}: ${String(error)}`, { cause: error })
    return convert(server, route, name, extra, true)
  }
  const body = await res.arrayBuffer()
  if (res.status !== 200) throw new Error(`${name} ${route}: ${res.status} ${Buffer.from(body).toString().slice(0, 300)}`)
  return Number(res.headers.get('x-page-count'))
}

/** ours converts each file in turn (one at a time) and returns the seconds each took. */
async function ours(server: Server, files: string[], route: 'generateImage' | 'generatePostscript'): Promise<Map<string, number>> {
  const seconds = new Map<string, number>()
  for (const f of files) {
    const start = performance.now()
    await convert(server, route, f)
    seconds.set(f, (performance.now() - start) / 1000)
  }
  return seconds
}

interface Native {
  readonly label: string
  readonly tool: string
  args(file: string, out: string): string[]
}

export const password = (f: string, flag: (p: string) => string[]) => (PASSWORDS[f] ? flag(PASSWORDS[f]!) : [])

const MUTOOL: Native = {
  label: 'mutool draw, single-threaded',
  tool: 'mutool',
  args: (f, o) => ['draw', '-q', ...password(f, (p) => ['-p', p]), '-r', String(DPI), '-o', join(o, 'p%d.png'), join(CORPUS, f)],
}
const MUTOOL_THREADS: Native = {
  label: `mutool draw -B 256 -T ${cpus().length} (banded, its threads)`,
  tool: 'mutool',
  args: (f, o) => [
    'draw',
    '-q',
    ...password(f, (p) => ['-p', p]),
    '-B',
    '256',
    '-T',
    String(cpus().length),
    '-r',
    String(DPI),
    '-o',
    join(o, 'p%d.png'),
    join(CORPUS, f),
  ],
}
const PDFTOPPM: Native = {
  label: 'pdftoppm',
  tool: 'pdftoppm',
  args: (f, o) => [...password(f, (p) => ['-upw', p]), '-r', String(DPI), '-png', join(CORPUS, f), join(o, 'p')],
}
const GS_PS: Native = {
  label: 'gs -sDEVICE=ps2write',
  tool: 'gs',
  args: (f, o) => [
    '-q',
    '-dSAFER',
    '-dBATCH',
    '-dNOPAUSE',
    ...password(f, (p) => [`-sPDFPassword=${p}`]),
    '-sDEVICE=ps2write',
    `-sOutputFile=${join(o, 'out.ps')}`,
    join(CORPUS, f),
  ],
}

/** runNative runs a tool on each file (into a fresh scratch folder) and returns the seconds each took, and the files it converted. */
function runNative(native: Native, files: string[]): { seconds: Map<string, number>; converted: Set<string> } {
  const seconds = new Map<string, number>()
  const converted = new Set<string>()
  for (const f of files) {
    const out = mkdtempSync(join(tmpdir(), 'tessera-native-'))
    const start = performance.now()
    const r = spawnSync(native.tool, native.args(f, out), { stdio: ['ignore', 'pipe', 'pipe'], encoding: 'latin1' })
    seconds.set(f, (performance.now() - start) / 1000)
    const made = readdirSync(out)
    // gs gives up on a file it cannot read and still exits 0, with a blank page: no conversion.
    const gaveUp = /No pages will be processed/.test(r.stdout + r.stderr)
    if (r.status === 0 && made.length > 0 && !gaveUp) converted.add(f)
    rmSync(out, { recursive: true, force: true })
  }
  return { seconds, converted }
}

const sum = (seconds: Map<string, number>, files: Iterable<string>) => [...files].reduce((a, f) => a + seconds.get(f)!, 0)

/** A side of a comparison: how to time one round over a set of files. */
interface Side {
  readonly label: string
  round(files: string[]): Promise<Map<string, number>>
}

/**
 * compare runs the sides in alternating order for ROUNDS rounds over `files` (only those
 * every native side converts) and gives each side's median seconds and per-file medians.
 */
async function compare(sides: Side[], files: string[]): Promise<{ files: string[]; rounds: Map<string, number>[][] }> {
  const rounds: Map<string, number>[][] = []
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 === 0 ? sides : [...sides].reverse()
    const timed = new Map<Side, Map<string, number>>()
    for (const side of order) timed.set(side, await side.round(files))
    rounds.push(sides.map((s) => timed.get(s)!))
  }
  return { files, rounds }
}

export async function convertBench(makeKey: MakeKey, port: number): Promise<string> {
  const files = readdirSync(CORPUS)
    .filter((f) => f.endsWith('.pdf'))
    .sort()
  const out: string[] = [`## Conversion: real corpus (${files.length} files), ${DPI} dpi, ${cpus().length} CPUs, medians of ${ROUNDS} alternating rounds`, '']
  const all = await startServer(makeKey, port, { CONVERTER_WORKERS: String(cpus().length) })
  const one = await startServer(makeKey, port + 1, { CONVERTER_WORKERS: '1' })
  const servers = [all, one]
  try {
    // Page counts, and which files each native tool converts (a dry round, not timed).
    const pageCount = new Map<string, number>()
    for (const f of files) pageCount.set(f, await convert(all, 'generateImage', f, { pages: '' }))
    const natives = [MUTOOL, MUTOOL_THREADS, PDFTOPPM].filter((n) => has(n.tool))
    const convertedBy = new Map(natives.map((n) => [n, runNative(n, files).converted]))
    const pngFiles = files.filter((f) => natives.every((n) => convertedBy.get(n)!.has(f)))
    const left = files.filter((f) => !pngFiles.includes(f))

    const sides: Side[] = [
      { label: `ours, ${cpus().length} workers (pages split)`, round: (fs) => ours(all, fs, 'generateImage') },
      { label: 'ours, 1 worker', round: (fs) => ours(one, fs, 'generateImage') },
      ...natives.map((n) => ({ label: `${n.label} (native)`, round: async (fs: string[]) => runNative(n, fs).seconds })),
    ]
    const png = await compare(sides, pngFiles)
    const multi = pngFiles.filter((f) => pageCount.get(f)! > 1)
    for (const [title, set] of [
      [`all ${pngFiles.length} files`, pngFiles],
      [`the ${multi.length} files of several pages`, multi],
    ] as const) {
      const pages = set.reduce((a, f) => a + pageCount.get(f)!, 0)
      const rate = (round: Map<string, number>[], i: number) => pages / sum(round[i]!, set)
      out.push(
        `PNG, one conversion at a time, ${title} (${pages} pages):`,
        '',
        '| what | pages/s | ours (all workers) at | ours (1 worker) at |',
        '| --- | --- | --- | --- |',
      )
      for (const [i, side] of sides.entries()) {
        const r = median(png.rounds.map((round) => rate(round, i)))
        const vsAll = median(png.rounds.map((round) => rate(round, 0) / rate(round, i)))
        const vsOne = median(png.rounds.map((round) => rate(round, 1) / rate(round, i)))
        out.push(`| ${side.label} | ${r.toFixed(1)} | **${x(vsAll)}** | ${x(vsOne)} |`)
      }
      out.push('')
    }
    if (left.length > 0) out.push(`Left out of the PNG comparison (a native tool fails on them): ${left.join(', ')}.`, '')
    const heavy = [...multi].sort((a, b) => pageCount.get(b)! - pageCount.get(a)!)
    out.push(
      'Per file (several pages), pages/s:',
      '',
      `| file | pages | ${sides.map((s) => s.label).join(' | ')} |`,
      `| --- | --- | ${sides.map(() => '---').join(' | ')} |`,
    )
    for (const f of heavy) {
      const cells = sides.map((_, i) => (pageCount.get(f)! / median(png.rounds.map((round) => round[i]!.get(f)!))).toFixed(1))
      out.push(`| ${f} | ${pageCount.get(f)} | ${cells.join(' | ')} |`)
    }
    out.push('')

    // PostScript: one at a time, beside native gs on the files it converts.
    if (has('gs')) {
      const psFiles = [...runNative(GS_PS, files).converted].sort()
      const psSides: Side[] = [
        { label: 'ours', round: (fs) => ours(all, fs, 'generatePostscript') },
        { label: 'gs -sDEVICE=ps2write (native)', round: async (fs) => runNative(GS_PS, fs).seconds },
      ]
      const ps = await compare(psSides, psFiles)
      const total = (i: number) => median(ps.rounds.map((round) => sum(round[i]!, psFiles)))
      const ratio = median(ps.rounds.map((round) => sum(round[0]!, psFiles) / sum(round[1]!, psFiles)))
      out.push(
        `PostScript, one at a time, the ${psFiles.length} files native gs converts${psFiles.length < files.length ? ` (not: ${files.filter((f) => !psFiles.includes(f)).join(', ')})` : ''}:`,
        '',
        '| what | seconds (all) | ours takes |',
        '| --- | --- | --- |',
        `| ours | ${total(0).toFixed(2)} | |`,
        `| gs -sDEVICE=ps2write (native) | ${total(1).toFixed(2)} | **${x(ratio)}** as long |`,
        '',
      )
      const slowest = [...psFiles].sort((a, b) => median(ps.rounds.map((r) => r[1]!.get(b)!)) - median(ps.rounds.map((r) => r[1]!.get(a)!))).slice(0, 8)
      out.push('The files native gs takes longest on:', '', '| file | ours s | gs s | ours takes |', '| --- | --- | --- | --- |')
      for (const f of slowest) {
        const o = median(ps.rounds.map((r) => r[0]!.get(f)!))
        const g = median(ps.rounds.map((r) => r[1]!.get(f)!))
        out.push(`| ${f} | ${o.toFixed(2)} | ${g.toFixed(2)} | ${x(median(ps.rounds.map((r) => r[0]!.get(f)! / r[1]!.get(f)!)))} |`)
      }
      out.push('')
    } else out.push('PostScript: native gs not installed (bench/install-native-tools.sh).', '')

    // One page: the p50 of a conversion through HTTP beside mutool drawing the same page as a process.
    const oursOne: number[] = []
    const mutoolOne: number[] = []
    const page = { pages: String(ONE_PAGE.page) }
    for (let i = 0; i < ONE_PAGE_CALLS; i++) {
      const timeOurs = async () => {
        const start = performance.now()
        await convert(all, 'generateImage', ONE_PAGE.file, page)
        oursOne.push(performance.now() - start)
      }
      const timeMutool = () => {
        if (!has('mutool')) return
        const dir = mkdtempSync(join(tmpdir(), 'tessera-native-'))
        const start = performance.now()
        spawnSync('mutool', ['draw', '-q', '-r', String(DPI), '-o', join(dir, 'p.png'), join(CORPUS, ONE_PAGE.file), String(ONE_PAGE.page)], {
          stdio: 'ignore',
        })
        mutoolOne.push(performance.now() - start)
        rmSync(dir, { recursive: true, force: true })
      }
      if (i % 2 === 0) {
        await timeOurs()
        timeMutool()
      } else {
        timeMutool()
        await timeOurs()
      }
    }
    const p50 = percentile(oursOne, 0.5)
    out.push(
      `One-page conversion (${ONE_PAGE.file}, page ${ONE_PAGE.page}, ${ONE_PAGE_CALLS} calls each, alternating): ours through HTTP p50 **${p50.toFixed(1)} ms** (p90 ${percentile(oursOne, 0.9).toFixed(1)} ms)` +
        (mutoolOne.length > 0
          ? `; \`mutool draw\` as a process p50 ${percentile(mutoolOne, 0.5).toFixed(1)} ms: ours takes **${x(p50 / percentile(mutoolOne, 0.5))}** as long.`
          : '.'),
      '',
    )

    // Fair share: a one-page conversion alone, then while the 117-page file runs on every worker.
    const small = async () => {
      const start = performance.now()
      await convert(all, 'generateImage', 'minimal-document.pdf')
      return performance.now() - start
    }
    const alone: number[] = []
    for (let i = 0; i < 10; i++) alone.push(await small())
    let bigDone = false
    const big = convert(all, 'generateImage', BIG).then(() => {
      bigDone = true
    })
    await new Promise((r) => setTimeout(r, 500))
    const during: number[] = []
    while (!bigDone) {
      during.push(await small())
      await new Promise((r) => setTimeout(r, 100))
    }
    await big
    const bigPageMs = (1000 * median(png.rounds.map((round) => round[1]!.get(BIG)!))) / pageCount.get(BIG)!
    out.push(
      `Fair share: a one-page conversion (minimal-document.pdf) takes p50 ${percentile(alone, 0.5).toFixed(1)} ms alone, **p50 ${percentile(during, 0.5).toFixed(1)} ms, max ${Math.max(...during).toFixed(1)} ms** ` +
        `(${during.length} calls) while ${BIG} (117 pages) converts on every worker; a page of that file takes ${bigPageMs.toFixed(0)} ms on one worker.`,
      '',
    )
  } finally {
    servers.forEach(stop)
  }

  // Eight clients at once: the corpus twice over, with and without page splitting (the same number of workers).
  const split = await startServer(makeKey, port + 2, { CONVERTER_WORKERS: String(cpus().length) })
  const whole = await startServer(makeKey, port + 3, { CONVERTER_WORKERS: String(cpus().length), CONVERTER_SPLIT_PAGES: 'false' })
  try {
    const load = async (server: Server) => {
      const queue = [...files, ...files]
      let pages = 0
      const start = performance.now()
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          for (let f = queue.shift(); f !== undefined; f = queue.shift()) {
            const converted = await convert(server, 'generateImage', f)
            pages += converted
          }
        }),
      )
      return pages / ((performance.now() - start) / 1000)
    }
    const rates: [number, number][] = []
    for (let r = 0; r < ROUNDS; r++) {
      if (r % 2 === 0) rates.push([await load(split), await load(whole)])
      else {
        const w = await load(whole)
        rates.push([await load(split), w])
      }
    }
    out.push(
      `Eight clients at once (the corpus twice over, ${cpus().length} workers): pages split **${median(rates.map((r) => r[0])).toFixed(1)} pages/s**, ` +
        `one worker per document ${median(rates.map((r) => r[1])).toFixed(1)} pages/s: **${x(median(rates.map((r) => r[0] / r[1])))}**.`,
      '',
    )
  } finally {
    stop(split)
    stop(whole)
  }

  // Peak RSS and ping latency during 8 concurrent conversions of the 117-page file.
  const load = await startServer(makeKey, port + 4, { CONVERTER_WORKERS: String(cpus().length) })
  try {
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
    out.push(
      `8 concurrent conversions of ${BIG} (117 pages each, ${cpus().length} workers): ${seconds.toFixed(1)} s, **peak RSS ${peak.toFixed(0)} MiB** (VmHWM of the server process, workers included); ` +
        `ping meanwhile: ${pings.length} calls, p50 ${percentile(pings, 0.5).toFixed(1)} ms, **p99 ${percentile(pings, 0.99).toFixed(1)} ms**.`,
      '',
    )
  } finally {
    stop(load)
  }
  return out.join('\n')
}
