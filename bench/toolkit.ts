/**
 * The PDF toolkit part of npm run bench (BENCH_ONLY=toolkit): text extraction, merge, split,
 * compress, rotate and flatten on the real corpus, ours through HTTP against the real server
 * (all workers; from the request to the answer's last byte, one request at a time, as a user
 * sees it) beside the native tool doing the same to the same files as a process, spawn
 * included (bench/install-native-tools.sh: pdftotext, qpdf, gs; never a runtime dependency):
 *
 * - text: `format=text`, a request per file, beside `pdftotext file.pdf out.txt` (target: as fast);
 * - merge: the corpus in as few requests as a merge takes documents, beside `qpdf --empty --pages` (within 2×);
 * - split: every page a file (`every=1`) beside `qpdf --split-pages` (within 2×);
 * - compress: /ebook and /screen beside `gs -sDEVICE=pdfwrite -dPDFSETTINGS=` (within 1.3×), and the bytes each makes;
 * - rotate and flatten beside `qpdf --rotate=+90` and `qpdf --flatten-annotations=all --generate-appearances` (no target).
 *
 * Each comparison runs on the files both sides handle (a dry round, not timed, finds them; a
 * file one side fails on is left out and named). Each round times every side once, the order
 * alternating; the figures are the medians of the rounds' seconds, each ratio ours / native of
 * those medians. BENCH_TOOLKIT_ROUNDS (default 3) sets the rounds. The bench account has a plan
 * without throttling (makeKey in bench/bench.ts), so no request waits for the rate limiter.
 */
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { MAX_MERGE_DOCUMENTS } from '../src/converter/upload.ts'
import { has, password, startServer, stop } from './convert.ts'
import { median } from './load.ts'
import { BENCH_CORPUS as CORPUS } from './corpus.ts'

const ROUNDS = Number(process.env.BENCH_TOOLKIT_ROUNDS ?? 3)
const BIG = 'GeoTopo-komprimiert.pdf'
const ENCRYPTED = 'libreoffice-writer-password.pdf'
/** Left out everywhere: its page tree root is zeros, the native tools find no page in it. */
const UNREADABLE = 'unreadablemetadata.pdf'
/** Left out of the gs comparison: native gs 10.00 cannot initialise it (no pages processed). */
const GS_FAILS = 'cmyk-image.pdf'

type MakeKey = () => Promise<{ dataDir: string; apiKey: string }>
type Server = Awaited<ReturnType<typeof startServer>>

/** One side's work on one unit: the seconds it took and the bytes it made, or null when it failed. */
interface Timed {
  readonly seconds: number
  readonly bytes: number
}

/** A unit of work both sides do: one request of ours, one native process. */
interface Unit {
  readonly name: string
  /** The documents it takes (a merge's several). */
  readonly files: number
  ours(): Promise<Timed | null>
  native(): Timed | null
}

interface Case {
  readonly what: string
  readonly nativeLabel: string
  /** The most ours / native may be, or null: printed only. */
  readonly target: number | null
  readonly units: Unit[]
  /** Files left out before the dry round, and why. */
  readonly leftOut?: string
}

const cache = new Map<string, Buffer<ArrayBuffer>>()
const bytesOf = (file: string) => cache.get(file) ?? cache.set(file, readFileSync(join(CORPUS, file))).get(file)!
const pdfPassword = (file: string) => password(file, (p) => [p])[0]

/** post sends one request of ours (documents in `pdfDocument` parts, in order) and times it to the answer's last byte. */
async function post(server: Server, route: string, files: string[], fields: Record<string, string>, retried = false): Promise<Timed | null> {
  const form = new FormData()
  for (const f of files) form.append('pdfDocument', new Blob([bytesOf(f)]), f)
  for (const [k, v] of Object.entries(fields)) form.append(k, v)
  const start = performance.now()
  let res: Response
  try {
    res = await fetch(`${server.url}/converter/${route}`, { method: 'POST', headers: { 'x-api-key': server.key }, body: form })
  } catch (error) {
    // A kept-alive connection the server closed while the native tools ran (its idle timeout): once more, on a new one.
    if (retried) throw new Error(`${route} ${files.join(' ')}: ${String(error)}`, { cause: error })
    return post(server, route, files, fields, true)
  }
  const body = await res.arrayBuffer()
  const seconds = (performance.now() - start) / 1000
  if (res.status !== 200) {
    process.stderr.write(`toolkit: ${route} ${files.join(' ')}: ${res.status} ${Buffer.from(body).toString().slice(0, 200)}\n`)
    return null
  }
  return { seconds, bytes: body.byteLength }
}

/** single: a request of ours on one file, its password sent when it has one. */
const single = (server: Server, route: string, file: string, fields: Record<string, string>) => {
  const pw = pdfPassword(file)
  return post(server, route, [file], pw === undefined ? fields : { ...fields, password: pw })
}

/** native runs a tool as a process (its output in a fresh scratch folder, `args` given that folder) and times it. */
function native(tool: string, args: (out: string) => string[]): Timed | null {
  const out = mkdtempSync(join(tmpdir(), 'tessera-toolkit-'))
  try {
    const start = performance.now()
    const r = spawnSync(tool, args(out), { stdio: ['ignore', 'pipe', 'pipe'], encoding: 'latin1' })
    const seconds = (performance.now() - start) / 1000
    const made = readdirSync(out)
    // gs gives up on a file it cannot read and still exits 0, with a blank page; qpdf exits 3 on warnings, its output made.
    const gaveUp = /No pages will be processed/.test(r.stdout + r.stderr)
    const ok = (r.status === 0 || (tool === 'qpdf' && r.status === 3)) && made.length > 0 && !gaveUp
    return ok ? { seconds, bytes: made.reduce((a, f) => a + statSync(join(out, f)).size, 0) } : null
  } finally {
    rmSync(out, { recursive: true, force: true })
  }
}

const inCorpus = (file: string) => join(CORPUS, file)

function textCases(server: Server, files: string[]): Case[] {
  const unit = (f: string): Unit => ({
    name: f,
    files: 1,
    ours: () => single(server, 'extractText', f, { format: 'text' }),
    native: () => native('pdftotext', (o) => [...password(f, (p) => ['-upw', p]), inCorpus(f), join(o, 'out.txt')]),
  })
  const nativeLabel = '`pdftotext file.pdf out.txt`'
  return [
    { what: 'Text (`format=text`), a request per file', nativeLabel, target: 1, units: files.map(unit), leftOut: `${UNREADABLE} (unreadable)` },
    { what: `Text, ${BIG} alone (117 pages)`, nativeLabel, target: 1, units: [unit(BIG)] },
  ]
}

function mergeCases(server: Server, files: string[]): Case[] {
  const unit = (docs: string[]): Unit => ({
    name: docs.join(' + '),
    files: docs.length,
    ours: () => post(server, 'merge', docs, {}),
    native: () => native('qpdf', (o) => ['--empty', '--pages', ...docs.map(inCorpus), '--', join(o, 'out.pdf')]),
  })
  // A merge takes MAX_MERGE_DOCUMENTS documents at the most: the corpus in that many requests, as even as they come.
  const mergeable = files.filter((f) => f !== ENCRYPTED)
  const requests = Math.ceil(mergeable.length / MAX_MERGE_DOCUMENTS)
  const chunks = Array.from({ length: requests }, (_, i) => mergeable.filter((_, j) => j % requests === i))
  const nativeLabel = '`qpdf --empty --pages f1 f2 … -- out.pdf`'
  return [
    {
      what: `Merge, the corpus in ${requests} requests (≤ ${MAX_MERGE_DOCUMENTS} documents each)`,
      nativeLabel,
      target: 2,
      units: chunks.map(unit),
      leftOut: `${ENCRYPTED} (encrypted), ${UNREADABLE} (unreadable)`,
    },
    { what: `Merge, ${BIG} + pdflatex-4-pages.pdf`, nativeLabel, target: 2, units: [unit([BIG, 'pdflatex-4-pages.pdf'])] },
  ]
}

function pageCases(server: Server, files: string[]): Case[] {
  const qpdf = (f: string, args: (o: string) => string[]) => native('qpdf', (o) => [...password(f, (p) => [`--password=${p}`]), ...args(o)])
  const leftOut = `${UNREADABLE} (unreadable)`
  return [
    {
      what: 'Split, every page a file (`every=1`)',
      nativeLabel: '`qpdf --split-pages file out-%d.pdf`',
      target: 2,
      leftOut,
      units: files.map((f) => ({
        name: f,
        files: 1,
        ours: () => single(server, 'split', f, { every: '1' }),
        native: () => qpdf(f, (o) => ['--split-pages', inCorpus(f), join(o, 'out-%d.pdf')]),
      })),
    },
    {
      what: 'Rotate (`angle=90`)',
      nativeLabel: '`qpdf --rotate=+90 in.pdf out.pdf`',
      target: null,
      leftOut,
      units: files.map((f) => ({
        name: f,
        files: 1,
        ours: () => single(server, 'rotate', f, { angle: '90' }),
        native: () => qpdf(f, (o) => ['--rotate=+90', inCorpus(f), join(o, 'out.pdf')]),
      })),
    },
    {
      what: 'Flatten',
      nativeLabel: '`qpdf --flatten-annotations=all --generate-appearances in.pdf out.pdf`',
      target: null,
      leftOut,
      units: files.map((f) => ({
        name: f,
        files: 1,
        ours: () => single(server, 'flatten', f, {}),
        native: () => qpdf(f, (o) => ['--flatten-annotations=all', '--generate-appearances', inCorpus(f), join(o, 'out.pdf')]),
      })),
    },
  ]
}

function compressCases(server: Server, files: string[]): Case[] {
  const gsFiles = files.filter((f) => f !== GS_FAILS)
  const gs = (f: string, preset: string) =>
    native('gs', (o) => [
      '-q',
      '-dSAFER',
      '-dBATCH',
      '-dNOPAUSE',
      ...password(f, (p) => [`-sPDFPassword=${p}`]),
      '-sDEVICE=pdfwrite',
      `-dPDFSETTINGS=/${preset}`,
      `-sOutputFile=${join(o, 'out.pdf')}`,
      inCorpus(f),
    ])
  return ['ebook', 'screen'].map((preset) => ({
    what: `Compress (\`preset=${preset}\`)`,
    nativeLabel: `\`gs -sDEVICE=pdfwrite -dPDFSETTINGS=/${preset}\``,
    target: 1.3,
    leftOut: `${UNREADABLE} (unreadable), ${GS_FAILS} (native gs 10.00 fails on it)`,
    units: gsFiles.map((f) => ({ name: f, files: 1, ours: () => single(server, 'compress', f, { preset }), native: () => gs(f, preset) })),
  }))
}

interface Result {
  readonly kept: Unit[]
  readonly dropped: string[]
  /** Per round, each side's seconds and bytes over the kept units: [ours, native]. */
  readonly rounds: [Timed, Timed][]
}

const total = (ts: Timed[]): Timed => ({ seconds: ts.reduce((a, t) => a + t.seconds, 0), bytes: ts.reduce((a, t) => a + t.bytes, 0) })

/** measure finds the units both sides do (a dry round), then times ROUNDS rounds, the sides' order alternating. */
async function measure(c: Case): Promise<Result> {
  const kept: Unit[] = []
  const dropped: string[] = []
  for (const u of c.units) {
    const ours = await u.ours()
    const theirs = u.native()
    if (ours !== null && theirs !== null) kept.push(u)
    else dropped.push(`${u.name} (${ours === null ? 'ours' : 'native'} failed)`)
  }
  const rounds: [Timed, Timed][] = []
  for (let r = 0; r < ROUNDS; r++) {
    const ours = async () => {
      const ts: Timed[] = []
      for (const u of kept) ts.push((await u.ours())!)
      return total(ts)
    }
    const theirs = () => total(kept.map((u) => u.native()!))
    if (r % 2 === 0) {
      const o = await ours()
      rounds.push([o, theirs()])
    } else {
      const t = theirs()
      rounds.push([await ours(), t])
    }
  }
  return { kept, dropped, rounds }
}

const x = (n: number) => `${n.toFixed(2)}×`
const mib = (n: number) => `${(n / 1048576).toFixed(2)} MiB`

/** row is a case's line in the table, and its notes (what was left out; for compress, the bytes each side made). */
function row(c: Case, res: Result): { line: string; notes: string[] } {
  const ours = median(res.rounds.map((r) => r[0].seconds))
  const theirs = median(res.rounds.map((r) => r[1].seconds))
  const ratio = ours / theirs
  const verdict = c.target === null ? '(print only)' : ratio <= c.target ? '**met**' : '**not met**'
  const target = c.target === null ? '–' : `≤ ${x(c.target)}`
  const line = `| ${c.what} | ${res.kept.reduce((a, u) => a + u.files, 0)} | ${res.kept.length} | ${ours.toFixed(3)} | ${c.nativeLabel} | ${theirs.toFixed(3)} | **${x(ratio)}** | ${target} | ${verdict} |`
  const notes: string[] = []
  const out = [...(c.leftOut ? [c.leftOut] : []), ...res.dropped]
  if (out.length > 0) notes.push(`${c.what}: left out ${out.join(', ')}.`)
  if (c.what.startsWith('Compress')) {
    const last = res.rounds.at(-1)!
    const input = res.kept.reduce((a, u) => a + bytesOf(u.name).byteLength, 0)
    notes.push(
      `${c.what}: output ${mib(last[0].bytes)} ours (never more than the upload: the upload itself when pdfwrite's is larger) against ${mib(last[1].bytes)} gs's, ` +
        `from ${mib(input)} in (ours/gs ${x(last[0].bytes / last[1].bytes)}).`,
    )
  }
  return { line, notes }
}

export async function toolkitBench(makeKey: MakeKey, port: number): Promise<string> {
  const files = readdirSync(CORPUS)
    .filter((f) => f.endsWith('.pdf') && f !== UNREADABLE)
    .sort()
  const missing = ['pdftotext', 'qpdf', 'gs'].filter((t) => !has(t))
  if (missing.length > 0) return `PDF toolkit bench skipped: ${missing.join(', ')} not installed (bench/install-native-tools.sh).\n`
  const server = await startServer(makeKey, port, { CONVERTER_WORKERS: String(cpus().length) })
  const lines: string[] = []
  const notes: string[] = []
  try {
    // Every worker loads Ghostscript (a compression per worker at once) before anything is timed.
    await Promise.all(Array.from({ length: cpus().length }, () => single(server, 'compress', 'pdflatex-4-pages.pdf', { preset: 'ebook' })))
    const cases = [...textCases(server, files), ...mergeCases(server, files), ...pageCases(server, files), ...compressCases(server, files)]
    for (const c of cases) {
      const r = row(c, await measure(c))
      lines.push(r.line)
      notes.push(...r.notes)
    }
  } finally {
    stop(server)
  }
  return [
    `## PDF toolkit: real corpus, ours through HTTP (${cpus().length} workers, a request at a time) beside the native tools as processes, medians of ${ROUNDS} alternating rounds`,
    '',
    '| operation | files | requests / processes | ours s | native | native s | ours/native | target | |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    ...lines,
    '',
    ...notes.map((n) => `- ${n}`),
    '',
  ].join('\n')
}
