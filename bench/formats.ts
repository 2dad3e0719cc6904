/**
 * The image formats part of npm run bench (BENCH_ONLY=formats), on the real corpus at 150 dpi,
 * through HTTP, one conversion at a time, whole documents, on all workers:
 *
 * - pages per second written as PNG, JPEG (quality 90), WebP (the default quality,
 *   80, at WEBP_EFFORT), TIFF (the default, LZW; one multi-page file) and a thumbnail (WebP,
 *   width=320), each beside PNG's in the same rounds. The issue's target: every image format
 *   within 1.2× PNG's time (its pages/s at least PNG's / 1.2);
 * - JPEG, WebP and TIFF beside the native pipeline a user would script (the tools of
 *   bench/install-native-tools.sh): `mutool draw -r 150` to a PNG per page, then per page
 *   ImageMagick's `convert -quality 90` to JPEG, `cwebp -q 80` to WebP, `convert -compress lzw`
 *   to TIFF (the pages joined by `tiffcp`), every spawn timed, a document's pages one after
 *   another (with BENCH_FORMATS_PARALLEL=1, again with mutool's threads, `-B 256 -T n`, and
 *   n encoders at once, n the CPUs: about 40 s more a round). The pipelines' `mutool draw`
 *   step runs once a round and counts in each of the three;
 * - the bytes each format answers over the corpus (a zip of pages, or one TIFF, for several).
 *
 * Each round runs every side once, the order reversed every other round; the figures are
 * medians of the rounds, each ratio the median of the rounds' ratios. A native comparison
 * leaves out the files a tool fails on, and is skipped when a tool is missing.
 * BENCH_FORMATS_ROUNDS (default 3) sets the rounds.
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs'
import { cpus, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { has, password, startServer, stop } from './convert.ts'
import { median } from './load.ts'
import { WEBP_EFFORT } from '../src/domain/images.ts'
import { BENCH_CORPUS as CORPUS } from './corpus.ts'

const DPI = 150
const ROUNDS = Number(process.env.BENCH_FORMATS_ROUNDS ?? 3)
const BIG = 'GeoTopo-komprimiert.pdf'
/** The issue's target: a format's seconds at most 1.2× PNG's for the same documents. */
const TARGET = 1.2
const N = cpus().length

type Server = Awaited<ReturnType<typeof startServer>>
/** Seconds each file took. */
type Times = Map<string, number>

const FORMATS = [
  { key: 'png', label: 'PNG', fields: {} },
  { key: 'jpeg', label: 'JPEG, quality 90', fields: { format: 'jpeg', quality: '90' } },
  { key: 'webp', label: `WebP, default quality (80), effort ${WEBP_EFFORT}`, fields: { format: 'webp' } },
  { key: 'tiff', label: 'TIFF, default (LZW)', fields: { format: 'tiff' } },
  { key: 'thumb', label: 'thumbnail: WebP, width=320', fields: { format: 'webp', width: '320' } },
] as const

interface Answer {
  pages: number
  bytes: number
  type: string
}

/** post converts a file with the given fields (the dpi unless a box is asked for) and reads the whole answer. */
async function post(server: Server, name: string, fields: Readonly<Record<string, string>>, retried = false): Promise<Answer> {
  const form = new FormData()
  form.append('pdfDocument', new Blob([readFileSync(join(CORPUS, name))]), name)
  if (fields.width === undefined && fields.height === undefined) form.append('dpi', String(DPI))
  for (const p of password(name, (p) => [p])) form.append('password', p)
  for (const [k, v] of Object.entries(fields)) form.append(k, v)
  let res: Response
  try {
    res = await fetch(`${server.url}/converter/generateImage`, { method: 'POST', headers: { 'x-api-key': server.key }, body: form })
  } catch (error) {
    // A kept-alive connection the server closed while the native tools ran: once more, on a new one.
    if (retried) throw new Error(`${name}: ${String(error)}`, { cause: error })
    return post(server, name, fields, true)
  }
  const body = await res.arrayBuffer()
  if (res.status !== 200) throw new Error(`${name} ${JSON.stringify(fields)}: ${res.status} ${Buffer.from(body).toString().slice(0, 300)}`)
  return { pages: Number(res.headers.get('x-page-count')), bytes: body.byteLength, type: res.headers.get('content-type') ?? '' }
}

/** run spawns a tool and tells whether it exited 0. */
function run(tool: string, args: string[]): Promise<boolean> {
  return new Promise((resolve) => {
    const child = spawn(tool, args, { stdio: 'ignore' })
    child.on('error', () => resolve(false))
    child.on('close', (code) => resolve(code === 0))
  })
}

/** pool runs the tasks, n at a time, in order, and tells whether all succeeded. */
async function pool(tasks: (() => Promise<boolean>)[], n: number): Promise<boolean> {
  let next = 0
  let ok = true
  const lane = async () => {
    for (let i = next++; i < tasks.length; i = next++) if (!(await tasks[i]!())) ok = false
  }
  await Promise.all(Array.from({ length: n }, lane))
  return ok
}

/** A native encoder: per page, from page `p<i>.png` to `p<i>.<ext>`; `join` makes one file of the pages. */
interface Encoder {
  readonly key: 'jpeg' | 'webp' | 'tiff'
  readonly tools: string[]
  readonly label: string
  page(png: string, out: string): [string, string[]]
  readonly ext: string
  join?(pages: string[], out: string): [string, string[]]
}

const ENCODERS: Encoder[] = [
  { key: 'jpeg', tools: ['convert'], label: '`convert -quality 90` per page', ext: 'jpg', page: (png, out) => ['convert', [png, '-quality', '90', out]] },
  { key: 'webp', tools: ['cwebp'], label: '`cwebp -q 80` per page', ext: 'webp', page: (png, out) => ['cwebp', ['-quiet', '-q', '80', png, '-o', out]] },
  {
    key: 'tiff',
    tools: ['convert', 'tiffcp'],
    label: '`convert -compress lzw` per page, `tiffcp` to join',
    ext: 'tif',
    page: (png, out) => ['convert', [png, '-compress', 'lzw', out]],
    join: (pages, out) => ['tiffcp', [...pages, out]],
  },
]

/** A native variant: the pages one after another, or mutool's threads and `lanes` encoders at once. */
interface Variant {
  readonly key: 'seq' | 'par'
  readonly label: string
  readonly lanes: number
  readonly draw: string[]
}

const SEQUENTIAL: Variant = { key: 'seq', label: 'sequential', lanes: 1, draw: [] }
const PARALLEL: Variant = { key: 'par', label: 'parallel', lanes: N, draw: ['-B', '256', '-T', String(N)] }
const VARIANTS = process.env.BENCH_FORMATS_PARALLEL === '1' ? [SEQUENTIAL, PARALLEL] : [SEQUENTIAL]

/** encode runs an encoder over a document's PNG pages (`pages` in order) in `dir`; false when a step failed. */
async function encode(encoder: Encoder, dir: string, pages: string[], lanes: number): Promise<boolean> {
  const outs = pages.map((p) => join(dir, p.replace(/\.png$/, `.${encoder.ext}`)))
  const tasks = pages.map((p, i) => () => {
    const [tool, args] = encoder.page(join(dir, p), outs[i]!)
    return run(tool, args)
  })
  if (!(await pool(tasks, lanes))) return false
  if (encoder.join === undefined || outs.length < 2) return true
  const [tool, args] = encoder.join(outs, join(dir, `all.${encoder.ext}`))
  return run(tool, args)
}

/**
 * nativeRound runs a variant's pipelines over the files: per file, `mutool draw` once, then each
 * encoder on its pages. It gives the seconds of each step per file ('mutool', then each encoder's
 * key), a file absent from a step's times where that step failed.
 */
async function nativeRound(variant: Variant, encoders: Encoder[], files: string[]): Promise<Map<string, Times>> {
  const steps = new Map<string, Times>([['mutool', new Map()], ...encoders.map((e): [string, Times] => [e.key, new Map()])])
  for (const f of files) {
    const dir = mkdtempSync(join(tmpdir(), 'tessera-formats-'))
    try {
      let start = performance.now()
      const drawArgs = ['draw', '-q', ...password(f, (p) => ['-p', p]), ...variant.draw, '-r', String(DPI), '-o', join(dir, 'p%d.png'), join(CORPUS, f)]
      const drawn = await run('mutool', drawArgs)
      const seconds = (performance.now() - start) / 1000
      const pages = readdirSync(dir)
        .filter((p) => p.endsWith('.png'))
        .sort((a, b) => Number(a.slice(1, -4)) - Number(b.slice(1, -4)))
      if (!drawn || pages.length === 0) continue
      steps.get('mutool')!.set(f, seconds)
      for (const encoder of encoders) {
        start = performance.now()
        if (await encode(encoder, dir, pages, variant.lanes)) steps.get(encoder.key)!.set(f, (performance.now() - start) / 1000)
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }
  return steps
}

/** What a run measured: per round, the seconds per file of each side ('png'…'thumb', 'seq mutool', 'par webp'…). */
interface Measured {
  files: string[]
  rounds: Map<string, Times>[]
  answers: Map<string, Map<string, Answer>>
}

async function measure(server: Server, encoders: Encoder[], files: string[]): Promise<Measured> {
  const answers = new Map<string, Map<string, Answer>>(FORMATS.map((f) => [f.key, new Map()]))
  const rounds: Map<string, Times>[] = []
  const oursSteps = FORMATS.map((format) => async (round: Map<string, Times>) => {
    const times: Times = new Map()
    for (const f of files) {
      const start = performance.now()
      const answer = await post(server, f, format.fields)
      times.set(f, (performance.now() - start) / 1000)
      answers.get(format.key)!.set(f, answer)
    }
    round.set(format.key, times)
  })
  const nativeSteps = (encoders.length === 0 ? [] : VARIANTS).map((variant) => async (round: Map<string, Times>) => {
    for (const [step, times] of await nativeRound(variant, encoders, files)) round.set(`${variant.key} ${step}`, times)
  })
  const steps = [...oursSteps, ...nativeSteps]
  for (let r = 0; r < ROUNDS; r++) {
    const round = new Map<string, Times>()
    for (const step of r % 2 === 0 ? steps : [...steps].reverse()) await step(round)
    rounds.push(round)
  }
  return { files, rounds, answers }
}

const x = (n: number) => `${n.toFixed(2)}×`
const total = (times: Times, files: Iterable<string>) => [...files].reduce((a, f) => a + times.get(f)!, 0)
const pagesOf = (m: Measured, files: Iterable<string>) => [...files].reduce((a, f) => a + m.answers.get('png')!.get(f)!.pages, 0)

/** oursTable: each format's pages/s beside PNG's, and the target. */
function oursTable(m: Measured): string[] {
  const pages = pagesOf(m, m.files)
  const bigPages = pagesOf(m, [BIG])
  const out = [
    `### Ours, one conversion at a time, all ${m.files.length} files (${pages} pages), ${N} workers`,
    '',
    `| format | pages/s | ${BIG} pages/s | pages/s ÷ PNG's | seconds ÷ PNG's | target | met |`,
    '| --- | --- | --- | --- | --- | --- | --- |',
  ]
  for (const format of FORMATS) {
    const rate = median(m.rounds.map((r) => pages / total(r.get(format.key)!, m.files)))
    const bigRate = median(m.rounds.map((r) => bigPages / r.get(format.key)!.get(BIG)!))
    const ratio = median(m.rounds.map((r) => total(r.get(format.key)!, m.files) / total(r.get('png')!, m.files)))
    const target = format.key === 'png' ? '| – | –' : `| ≤ ${x(TARGET)} | ${ratio <= TARGET ? 'met' : '**not met**'}`
    out.push(`| ${format.label} | ${rate.toFixed(1)} | ${bigRate.toFixed(1)} | ${x(1 / ratio)} | **${x(ratio)}** ${target} |`)
  }
  out.push('')
  return out
}

/** nativeTable: ours beside the native pipelines, on the files every round of both variants converted. */
function nativeTable(m: Measured, encoders: Encoder[], missing: string[]): string[] {
  const out = [
    `### Against the native pipeline (mutool draw -r ${DPI}, then a tool per page; spawns included)`,
    '',
    `| format | native | files (pages) | ours s | ${VARIANTS.map((v) => `native s, ${v.label} | ours takes`).join(' | ')} |`,
    `| --- | --- | --- | --- | ${VARIANTS.map(() => '--- | ---').join(' | ')} |`,
  ]
  const left: string[] = []
  for (const encoder of encoders) {
    const steps = VARIANTS.flatMap((v) => [`${v.key} mutool`, `${v.key} ${encoder.key}`])
    const files = m.files.filter((f) => m.rounds.every((r) => steps.every((s) => r.get(s)!.has(f))))
    for (const f of m.files) if (!files.includes(f)) left.push(`${f} (${encoder.key})`)
    const ours = (r: Map<string, Times>) => total(r.get(encoder.key)!, files)
    const native = (r: Map<string, Times>, v: Variant) => total(r.get(`${v.key} mutool`)!, files) + total(r.get(`${v.key} ${encoder.key}`)!, files)
    const draw = (r: Map<string, Times>, v: Variant) => total(r.get(`${v.key} mutool`)!, files)
    const cells = VARIANTS.map(
      (v) =>
        `${median(m.rounds.map((r) => native(r, v))).toFixed(2)} (${median(m.rounds.map((r) => draw(r, v))).toFixed(2)}) | ` +
        `**${x(median(m.rounds.map((r) => ours(r) / native(r, v))))}**`,
    )
    const oursSeconds = median(m.rounds.map(ours)).toFixed(2)
    out.push(`| ${encoder.key.toUpperCase()} | ${encoder.label} | ${files.length} (${pagesOf(m, files)}) | ${oursSeconds} | ${cells.join(' | ')} |`)
  }
  if (encoders.length === 0) return [...out.slice(0, 1), '', ...missing.map((reason) => `Skipped: ${reason}.`), '']
  const parallel =
    VARIANTS.length > 1
      ? `parallel: \`mutool draw -B 256 -T ${N}\` and ${N} encoders at once`
      : 'a parallel variant (mutool -T, encoders at once) with BENCH_FORMATS_PARALLEL=1'
  out.push('', `Native s: the whole pipeline, its \`mutool draw\` step in brackets; sequential: a page at a time; ${parallel}.`)
  if (left.length > 0) out.push(`Left out (a native tool failed on them): ${left.join(', ')}.`)
  for (const reason of missing) out.push(`Skipped: ${reason}.`)
  out.push('')
  return out
}

/** sizesTable: the bytes each format answered over the corpus, beside PNG's. */
function sizesTable(m: Measured): string[] {
  const bytes = (key: string) => [...m.answers.get(key)!.values()].reduce((a, answer) => a + answer.bytes, 0)
  const png = bytes('png')
  const out = [
    `### Output sizes, all ${m.files.length} files (a zip of pages, or one TIFF, for a document of several)`,
    '',
    '| format | bytes | ÷ PNG |',
    '| --- | --- | --- |',
  ]
  for (const format of FORMATS) out.push(`| ${format.label} | ${bytes(format.key).toLocaleString('en')} | ${x(bytes(format.key) / png)} |`)
  out.push('')
  return out
}

export async function formatsBench(makeKey: Parameters<typeof startServer>[0], port: number): Promise<string> {
  const files = readdirSync(CORPUS)
    .filter((f) => f.endsWith('.pdf'))
    .sort()
  const missing: string[] = []
  const encoders = has('mutool')
    ? ENCODERS.filter((e) => {
        const absent = e.tools.filter((t) => !has(t))
        if (absent.length > 0) missing.push(`${e.key.toUpperCase()} against native (${absent.join(', ')} not installed: bench/install-native-tools.sh)`)
        return absent.length === 0
      })
    : []
  if (!has('mutool')) missing.push('every native comparison (mutool not installed: bench/install-native-tools.sh)')
  const began = performance.now()
  const loadAtStart = loadavg()[0]!
  const server = await startServer(makeKey, port, { CONVERTER_WORKERS: String(N) })
  try {
    // Every worker loads libvips (sharp) before anything is timed.
    for (const format of FORMATS) await Promise.all(Array.from({ length: N }, () => post(server, 'pdflatex-4-pages.pdf', format.fields)))
    const m = await measure(server, encoders, files)
    return [
      `## Image formats: real corpus (${files.length} files), ${DPI} dpi, ${N} CPUs, medians of ${ROUNDS} alternating rounds`,
      '',
      ...oursTable(m),
      ...nativeTable(m, encoders, missing),
      ...sizesTable(m),
      `This part took ${((performance.now() - began) / 1000).toFixed(0)} s (load average ${loadAtStart.toFixed(1)} at its start, ${loadavg()[0]!.toFixed(1)} at its end).`,
      '',
    ].join('\n')
  } finally {
    stop(server)
  }
}
