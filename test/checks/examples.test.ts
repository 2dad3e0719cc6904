/**
 * Every curl example of the README and docs/ runs against a real node (and its admin API), with the real curl, in a folder of the
 * inputs the examples name, and does what its page says: exit status 0, the status and answer shown (test/support/examples.ts
 * reads them), the files written. How the page's words become a command that runs:
 *
 * - Each page runs in order, on an account of its own (made as the README's tour makes one) and a folder of its own holding
 *   report.pdf (8 pages), scan.pdf (4), form.pdf (a filled form), cover.pdf (1) and users.csv (the CSV factors.md shows).
 * - The shell has `KEY` (the page's key), `BASE` (the node), `ADMIN` (the admin listener), `TOKEN` and `ADMIN_TOKEN` (a write admin
 *   token) and `A` (`$ADMIN/admin/v1`): lines that set them in a page are not run, nor is anything but curl.
 *   `http://localhost:3000` is the node, `http://127.0.0.1:3001` the admin listener.
 * - Placeholders: `tsr_…` is the page's key and `acc_…` its account; a value shown in an answer (`JBSW…`, `fct_…`, `492039`,
 *   `job_19a5f3c2b7e4d1a2b3c4d`) stands for the real one in the rest of its block; another `fct_…`, `key_…`, `whe_…` or `job_…` is the
 *   latest of its kind an answer of the page gave. A `token` or `nextToken` of digits that no answer showed is what the user's
 *   authenticator shows for the secret the page last named (sent as `secret`, or answered as `secretKey`): the clock moves a
 *   minute first, as a user takes a moment to type, and `nextToken` is the code after `token`'s. `"credential":{…}` is the browser's
 *   answer to the options the page got last (a software authenticator of the relying party the page sets: example.com). A placeholder
 *   left after these is an error of the page.
 * - A command that downloads a job's `result` waits for the job to end, as the page says to. The files a command writes are checked
 *   and then removed, so that each example starts from the folder of inputs.
 * - A block after `<!-- example: not run, because … -->` is not run; the test lists them.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as mupdf from 'mupdf'
import { Secret, TOTP } from 'otpauth'
import { startAdmin } from '../support/admin-helper.ts'
import { createCaller, testClock } from '../support/helper.ts'
import { waitFor } from '../support/receiver.ts'
import { unzip } from '../support/convert.ts'
import { filledForm } from '../support/pdf-writer.ts'
import { SoftAuthenticator } from '../support/soft-authenticator.ts'
import { apply, type Bindings, type Example, examplesOf, lenient, matches, PAGES, type Shown, type Written } from '../support/examples.ts'
import { SYSTEM } from '../../src/domain/accounts.ts'

const CURL = '/usr/bin/curl'
const page = (n: number, extra: { text: string; x: number; y: number }[] = []) => ({
  lines: [{ text: `Page ${n}`, x: 72, y: 700 }, ...extra],
  fields: [],
})
const pdfOf = (pages: number) => filledForm(Array.from({ length: pages }, (_, i) => page(i + 1)))
/** The CSV the page on managed factors shows, its first csv block. */
const usersCsv = () => /```csv\n([\s\S]*?)```/.exec(readFileSync(new URL('../../docs/factors.md', import.meta.url), 'utf8'))?.[1] ?? ''
const INPUTS: Record<string, () => Buffer | string> = {
  'report.pdf': () => pdfOf(8),
  'scan.pdf': () => pdfOf(4),
  'cover.pdf': () => pdfOf(1),
  'form.pdf': () => filledForm([{ lines: [{ text: 'Name:', x: 72, y: 700 }], fields: [{ name: 'name', value: 'Jane Doe', x: 140, y: 696 }] }]),
  'users.csv': usersCsv,
}
/** The relying party the passkey examples' page sets up (factors.md, "Passkeys"). */
const RP = { rpId: 'example.com', origin: 'https://example.com' }

/** What a file's first bytes say it is, by its extension. */
const MAGIC: Record<string, (b: Buffer) => boolean> = {
  pdf: (b) => b.subarray(0, 5).toString('latin1') === '%PDF-',
  zip: (b) => b.readUInt32LE(0) === 0x04034b50,
  png: (b) => b.subarray(1, 4).toString('latin1') === 'PNG',
  jpg: (b) => b[0] === 0xff && b[1] === 0xd8,
  webp: (b) => b.subarray(8, 12).toString('latin1') === 'WEBP',
  tif: (b) => ['II*\0', 'MM\0*'].includes(b.subarray(0, 4).toString('latin1')),
  ps: (b) => b.subarray(0, 4).toString('latin1') === '%!PS',
}

/** checkFile: a file (or a zip's entry) is what a `# writes` line says: its type by its bytes, its pages, a zip's entries in order. */
function checkFile(bytes: Buffer, want: Written, problems: string[]): void {
  const extension = want.name.split('.').pop() ?? ''
  if (!(MAGIC[extension]?.(bytes) ?? false)) problems.push(`${want.name} is not a .${extension} file by its bytes`)
  if (want.pages !== null) {
    const type = extension === 'tif' ? 'image/tiff' : 'application/pdf'
    const pages = mupdf.Document.openDocument(bytes, type).countPages()
    if (pages !== want.pages) problems.push(`${want.name} has ${pages} pages, the page says ${want.pages}`)
  }
  if (want.entries !== null) {
    const entries = unzip(bytes)
    const names = entries.map((e) => e.name)
    if (names.join() !== want.entries.map((e) => e.name).join()) problems.push(`${want.name} holds ${names.join(', ')}`)
    else for (const [i, entry] of want.entries.entries()) checkFile(entries[i]!.data, entry, problems)
  }
}

/** The IDs an answer holds, by their prefix. */
function idsIn(value: unknown, found: Map<string, string>): void {
  if (typeof value === 'string') {
    const m = /^(acc|key|fct|whe|job)_[0-9A-Za-z]+$/.exec(value)
    if (m) found.set(m[1]!, value)
  } else if (value !== null && typeof value === 'object') for (const v of Object.values(value)) idsIn(v, found)
}

const json = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

test('every curl example of the README and docs/ runs and does what its page says', async (t) => {
  // The clock 13 s into a 30 s step, as the guide's answers show (`expiresIn` 17, `timeUsed` 13); it moves only a minute at a time.
  const clock = testClock(Math.floor(Date.now() / 30_000) * 30_000 + 13_000)
  const admin = await startAdmin(t, { PUBLIC_BASE_URL: 'https://eu.example.com', PLAN_RATE: '0' }, clock)
  const app = admin.pub
  const root = mkdtempSync(join(tmpdir(), 'tessera-examples-'))
  t.after(() => rmSync(root, { recursive: true, force: true }))
  const notRun: string[] = []
  const failures: string[] = []
  let ran = 0
  for (const file of PAGES) {
    const examples = examplesOf(file)
    if (examples.length === 0) continue
    const dir = join(root, file.replace(/\W/g, '_'))
    mkdirSync(dir)
    for (const [name, make] of Object.entries(INPUTS)) writeFileSync(join(dir, name), make())
    const inputs = new Set(readdirSync(dir))
    const { apiKey, accountId } = await createCaller(app.accounts)
    const env = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: dir,
      KEY: apiKey,
      BASE: app.url,
      ADMIN: admin.url,
      TOKEN: admin.write.secret,
      ADMIN_TOKEN: admin.write.secret,
      A: `${admin.url}/admin/v1`,
    }
    const page = { file, dir, env, apiKey, accountId, ids: new Map<string, string>(), secret: null as string | null, options: null as unknown }
    let bindings: Bindings = new Map()
    let block = 0
    let passkeys: SoftAuthenticator | null = null
    for (const example of examples) {
      const where = `${example.file}:${example.line}`
      if (example.notRun !== null) {
        notRun.push(`${where} (${example.notRun})`)
        continue
      }
      if (example.block !== block) bindings = new Map()
      block = example.block
      if (example.command.includes('/passkeys/') && passkeys === null) {
        await app.factors.updateSettings({ actor: SYSTEM }, accountId, { rpId: RP.rpId, rpName: 'Acme', origins: [RP.origin] })
        passkeys = new SoftAuthenticator(RP)
      }
      const problems: string[] = []
      const command = commandOf(example, page, bindings, clock, passkeys, app.url, admin.url, problems)
      if (problems.length > 0) {
        failures.push(`${where}: ${problems.join('; ')}\n  ${example.command}`)
        continue
      }
      const job = /\/converter\/jobs\/(job_\w+)\/result/.exec(command)?.[1]
      if (job !== undefined) {
        const ended = async () => {
          const view = (await (await fetch(`${app.url}/converter/jobs/${job}`, { headers: { 'x-api-key': apiKey } })).json()) as { status: string }
          return view.status !== 'queued' && view.status !== 'running'
        }
        await waitFor(ended, 60_000, `job ${job} to end`)
      }
      const runs = [example.answer, ...(example.again === null ? [] : [example.again])]
      for (const [i, want] of runs.entries()) {
        ran++
        const label = i === 0 ? where : `${where} (again)`
        const outcome = await run(command, dir, env)
        const wrote = readdirSync(dir).filter((f) => !inputs.has(f))
        const found = check(example, want, outcome, wrote, dir, bindings, page.ids, i === 0, problems)
        for (const f of wrote) rmSync(join(dir, f), { force: true })
        if (found.options !== undefined) page.options = found.options
        if (found.secret !== undefined) page.secret = found.secret
        if (problems.length > 0) {
          failures.push(`${label}: ${problems.join('; ')}\n  ${command.replace(/\n/g, ' ')}\n  answered ${outcome.status}: ${outcome.stdout.slice(0, 400)}`)
          break
        }
      }
    }
  }
  t.diagnostic(`${ran} runs of curl examples; not run (${notRun.length}): ${notRun.join(', ')}`)
  assert.deepEqual(failures, [], `examples that do not do what their page says:\n${failures.join('\n')}`)
  assert.ok(ran > 40, `${ran} examples ran`)
})

interface Page {
  readonly apiKey: string
  readonly accountId: string
  readonly ids: Map<string, string>
  secret: string | null
  options: unknown
}

/** commandOf: the example as it runs here, its placeholders filled as the file's header says, or problems. */
function commandOf(
  example: Example,
  page: Page,
  bindings: Bindings,
  clock: { now(): number; advance(ms: number): void },
  passkeys: SoftAuthenticator | null,
  base: string,
  adminBase: string,
  problems: string[],
): string {
  let command = apply(example.command, bindings)
    .replaceAll('http://localhost:3000', base)
    .replaceAll('localhost:3000', base.replace('http://', ''))
    .replaceAll('http://127.0.0.1:3001', adminBase)
    .replaceAll('tsr_…', page.apiKey)
    .replaceAll('acc_…', page.accountId)
  command = command.replace(/\b(fct|key|whe|job)_…/g, (placeholder, kind: string) => page.ids.get(kind) ?? placeholder)
  const sent = /-d secret=([A-Z2-7]+)/.exec(command)?.[1]
  if (sent !== undefined) page.secret = sent
  if (/-d (?:token|nextToken)=\d+\b/.test(command)) {
    if (page.secret === null) problems.push('a code, and no secret named before it')
    else {
      clock.advance(60_000)
      const totp = new TOTP({ secret: Secret.fromBase32(page.secret) })
      command = command
        .replace(/-d token=\d+\b/, `-d token=${totp.generate({ timestamp: clock.now() })}`)
        .replace(/-d nextToken=\d+\b/, `-d nextToken=${totp.generate({ timestamp: clock.now() + 30_000 })}`)
    }
  }
  if (command.includes('"credential":{…}')) {
    const options = page.options as Parameters<SoftAuthenticator['register']>[0] & Parameters<SoftAuthenticator['authenticate']>[0]
    if (passkeys === null || options === null) problems.push('a credential, and no options got before it')
    else {
      const answer = command.includes('/registration') ? passkeys.register(options) : passkeys.authenticate(options)
      command = command.replace('"credential":{…}', `"credential":${JSON.stringify(answer)}`)
    }
  }
  const left = /\S*…\S*/.exec(command)?.[0]
  if (left !== undefined && problems.length === 0) problems.push(`the placeholder ${left} stands for nothing this page gave`)
  return command
}

interface Outcome {
  readonly code: number | null
  readonly status: number
  readonly stdout: string
  readonly stderr: string
}

/** The status curl writes after the answer, on its error stream, where the answer's own bytes never go. */
const MARK = '@@tessera-example-status='

const execFileAsync = promisify(execFile)

/** run runs a command with the real curl in a shell (bash, as the pages' blocks are), in the page's folder (the node answers meanwhile). */
async function run(command: string, dir: string, env: Record<string, string>): Promise<Outcome> {
  const script = `curl() { ${CURL} --write-out '%{stderr}${MARK}%{http_code}\\n' "$@"; }\n${command}\n`
  let done: { code: number | null; stdout: string; stderr: string }
  try {
    done = { code: 0, ...(await execFileAsync('bash', ['-c', script], { cwd: dir, env, encoding: 'utf8', timeout: 120_000, maxBuffer: 64 * 1048576 })) }
  } catch (error) {
    const failed = error as { code?: number | string; stdout?: string; stderr?: string }
    done = { code: typeof failed.code === 'number' ? failed.code : null, stdout: failed.stdout ?? '', stderr: failed.stderr ?? String(error) }
  }
  const mark = new RegExp(`${MARK}(\\d{3})`).exec(done.stderr)
  return { code: done.code, status: Number(mark?.[1] ?? 0), stdout: done.stdout, stderr: done.stderr.replace(/@@tessera-example-status=\d{3}\n?/, '') }
}

/** check holds an outcome to its page: exit 0, the status and answer shown, the files written. What the answer holds for later. */
function check(
  example: Example,
  want: Shown,
  outcome: Outcome,
  wrote: readonly string[],
  dir: string,
  bindings: Bindings,
  ids: Map<string, string>,
  first: boolean,
  problems: string[],
): { options?: unknown; secret?: string } {
  if (outcome.code !== 0) problems.push(`curl exited ${outcome.code}: ${outcome.stderr.trim().slice(0, 200)}`)
  if (want.status === null ? outcome.status < 200 || outcome.status > 299 : outcome.status !== want.status)
    problems.push(`status ${outcome.status}, the page shows ${want.status ?? 'a success'}`)
  const answer = json(outcome.stdout)
  if (want.body !== null) {
    const lines = want.body.split('\n')
    const shownValues = lines.length > 1 ? lines.map((l) => lenient(l)) : [lenient(want.body)]
    const real = lines.length > 1 ? outcome.stdout.trim().split('\n').map(json) : [answer]
    if (real.length !== shownValues.length) problems.push(`${real.length} JSON lines, the page shows ${shownValues.length}`)
    else for (const [i, s] of shownValues.entries()) matches(s, real[i], bindings, problems)
  }
  if (first) {
    const files = example.writes.map((w) => w.name)
    if (wrote.join() !== files.join()) problems.push(`wrote [${wrote.join(', ')}], the page says [${files.join(', ')}]`)
    else for (const w of example.writes) checkFile(readFileSync(join(dir, w.name)), w, problems)
    if (/\s-(O|o|\w*O\w*)\b/.test(example.command) && example.writes.length === 0) problems.push('it writes a file, and no # writes line says which')
  }
  const found: { options?: unknown; secret?: string } = {}
  for (const value of outcome.stdout.trim().split('\n').map(json)) {
    idsIn(value, ids)
    const v = value as { options?: unknown; secretKey?: string } | undefined
    if (v?.options !== undefined) found.options = v.options
    if (typeof v?.secretKey === 'string') found.secret = v.secretKey
  }
  return found
}

test('the examples test fails on an example that does not do what its page says', () => {
  const shown = lenient('{"type":"Success","valid":true,"otp":"492039","secret":"JBSW…",…}')
  const bindings: Bindings = new Map()
  const problems: string[] = []
  matches(shown, { type: 'Success', valid: false, otp: '12345', secret: 'JBSWY3DP', more: 1 }, bindings, problems)
  assert.deepEqual(problems, ['$.valid: false, the docs show true', '$.otp: "12345", the docs show "492039"'])
  assert.equal(bindings.get('JBSW…'), 'JBSWY3DP', 'a value shown as JBSW… stands for the real one after it')
  const closed: string[] = []
  matches(lenient('{"a":[1,…]}'), { a: [1, 2], b: 3 }, new Map(), closed)
  assert.deepEqual(closed, ['$: members the docs do not show (and no …): b'])
  const [example] = examplesOf(
    'page.md',
    '<!-- example: not run, because it names your host -->\n```sh\ncurl -s https://example.org/ping  # 204\n# writes a.zip: a-1.pdf (3 pages), a-2.pdf\n```\n',
  )
  assert.deepEqual([example?.notRun, example?.answer.status, example?.writes[0]?.entries?.map((e) => e.pages)], ['it names your host', 204, [3, null]])
  assert.ok(existsSync(CURL), 'curl is where the test runs it')
})
