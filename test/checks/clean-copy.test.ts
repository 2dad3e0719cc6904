/**
 * The tests carry what they need: the corpus tier and the page operations' unit tests run in a
 * copy of the repository made of the files Git tracks (as they are in the working tree), in a
 * folder of its own with nothing beside it (no ../shared), as a clone elsewhere would be. With
 * TESSERA_REQUIRE_SERVICES=1 nothing may skip, and everything must pass: a test that reads
 * outside the repository, or a fixture left out of Git, fails here.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { CORPUS_TESTS } from '../support/corpus.ts'

const ROOT = resolve(import.meta.dirname, '../..')

/** tracked: the files of the repository Git tracks (its index), or why there are none (no Git, or not a checkout: a container's build stage). */
function tracked(): string[] | string {
  const ls = spawnSync('git', ['ls-files', '-z', '--cached'], { cwd: ROOT, encoding: 'utf8' })
  if (ls.error !== undefined || ls.status !== 0) return `no Git checkout to copy (${ls.error?.message ?? ls.stderr.trim()})`
  return ls.stdout.split('\0').filter((f) => f !== '')
}

/** copyRepository copies `files` from the working tree into `to`, modes kept; a tracked file deleted in the working tree is left out, as a commit would. */
function copyRepository(files: readonly string[], to: string): void {
  for (const file of files) {
    const from = join(ROOT, file)
    if (!existsSync(from)) continue
    mkdirSync(dirname(join(to, file)), { recursive: true })
    copyFileSync(from, join(to, file))
    chmodSync(join(to, file), statSync(from).mode)
  }
}

/** runTests runs the test command in `cwd` on CORPUS_TESTS, as CI does (services required), and gives its exit code and output. */
function runTests(cwd: string): Promise<{ code: number | null; out: string }> {
  // Not NODE_TEST_CONTEXT: the copy's runner reports as a run of its own does. One file at a time: this test holds one of the
  // suite's places, and its files convert whole corpora (with 2 at once on 2 CPUs, the suite's other place got no CPU left).
  const env = {
    ...Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== 'NODE_TEST_CONTEXT')),
    TESSERA_REQUIRE_SERVICES: '1',
    TEST_CONCURRENCY: '1',
  }
  const child = spawn(process.execPath, ['scripts/test.ts', ...CORPUS_TESTS], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  child.stdout.on('data', (c: Buffer) => (out += c.toString()))
  child.stderr.on('data', (c: Buffer) => (out += c.toString()))
  return new Promise((done) => child.on('close', (code) => done({ code, out })))
}

const summary = (out: string, what: string) => Number(new RegExp(`^ℹ ${what} (\\d+)$`, 'm').exec(out)?.[1] ?? Number.NaN)

const files = tracked()

test('in a copy of the repository with nothing beside it, the corpus tests skip nothing and pass', {
  skip: typeof files === 'string' ? files : false,
  timeout: 1_800_000,
}, async (t) => {
  const outside = mkdtempSync(join(tmpdir(), 'tessera-clean-copy-'))
  t.after(() => rmSync(outside, { recursive: true, force: true }))
  const copy = join(outside, 'tessera')
  copyRepository(files as string[], copy)
  assert.deepEqual(readdirSync(outside), ['tessera'], 'nothing beside the copy: no ../shared')
  // The packages as installed (npm ci would fetch them again); none of the repository's own files.
  symlinkSync(join(ROOT, 'node_modules'), join(copy, 'node_modules'), 'dir')
  assert.ok(existsSync(join(copy, 'test/fixtures/corpus/real/files.json')), 'the corpus is tracked by Git')

  const { code, out } = await runTests(copy)
  // Each test's line of the copy's run, and on failure what its reporter said of the failures.
  for (const line of out.split('\n').filter((l) => /^[✔✖﹣] /.test(l))) t.diagnostic(`in the copy: ${line}`)
  const failures = out.includes('✖ failing tests:') ? out.slice(out.indexOf('✖ failing tests:')) : out.slice(-4000)
  t.diagnostic(`in the copy: ${summary(out, 'tests')} tests, ${summary(out, 'pass')} passed, ${summary(out, 'skipped')} skipped`)
  const skipped = out.split('\n').filter((l) => l.trimStart().startsWith('﹣'))
  assert.equal(summary(out, 'skipped'), 0, `skipped in the copy:\n${skipped.join('\n')}`)
  assert.equal(summary(out, 'fail'), 0, failures)
  assert.equal(code, 0, failures)
  // Both parts ran: the corpus tier's conversions and the page operations on the whole corpus.
  assert.match(out, /✔ every real-world PDF converts to PNG/)
  assert.match(out, /✔ merge keeps every page of the whole corpus/)
})
