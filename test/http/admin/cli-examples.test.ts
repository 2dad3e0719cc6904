/**
 * The admin CLI as the README and the operating guide show it: every `npm run admin -- …` example
 * that shows its output (on `# ` lines below it, or as a JSON comment beside it) is run, in order,
 * on a fresh DATA_DIR, and must print what is shown (`…` standing for what differs from run to
 * run; `acc_…` and `key_…` in a command are the account and key the examples before it made).
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { basename, join } from 'node:path'
import { admin } from '../../support/admin-helper.ts'
import { tempDir } from '../../support/helper.ts'

const ROOT = new URL('../../..', import.meta.url).pathname

interface Example {
  readonly line: number
  readonly args: string[]
  readonly shown: string
}

/** words splits a command line as the shell does for these examples (quotes, no expansions), up to an unquoted ` #`; and the comment. */
function words(line: string): { args: string[]; comment: string } {
  const args: string[] = []
  let word: string | null = null
  let quote: string | null = null
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!
    if (quote !== null) {
      if (c === quote) quote = null
      else word += c
    } else if (c === '"' || c === "'") {
      quote = c
      word ??= ''
    } else if (c === ' ') {
      if (word !== null) args.push(word)
      word = null
    } else if (c === '#' && word === null) {
      return { args, comment: line.slice(i + 1).trim() }
    } else word = (word ?? '') + c
  }
  if (word !== null) args.push(word)
  return { args, comment: '' }
}

/** examples: the CLI commands of a page's `sh` blocks that show their output. */
function examples(file: string): Example[] {
  const lines = readFileSync(`${ROOT}/${file}`, 'utf8').split('\n')
  const out: Example[] = []
  let inSh = false
  for (const [i, text] of lines.entries()) {
    if (text.startsWith('```')) inSh = !inSh && text === '```sh'
    if (!inSh || !text.startsWith('npm run admin -- ')) continue
    const { args, comment } = words(text.slice('npm run admin -- '.length))
    const below: string[] = []
    for (let j = i + 1; lines[j]?.startsWith('# '); j++) below.push(lines[j]!.slice(2))
    // A JSON comment beside the command may end with a remark in parentheses: "(shown once)".
    const shown = below.length > 0 ? below.join('\n') : comment.startsWith('{') ? comment.replace(/\s+\([^)]*\)$/, '') : null
    if (shown !== null) out.push({ line: i + 1, args, shown })
  }
  return out
}

/** pattern: what a page shows as a whole-output pattern, `…` standing for anything on its line. */
const pattern = (shown: string) =>
  new RegExp(
    `^${shown
      .split('…')
      .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
      .join('[^\\n]*')}$`,
  )

for (const file of ['README.md', 'docs/operating.md', 'docs/portal.md']) {
  test(`the admin CLI examples of ${file} print what they show`, async (t) => {
    const dir = tempDir(t)
    const found = examples(file)
    assert.ok(found.length >= 2, `${file} shows the output of some CLI commands`)
    const made: Record<string, string> = {}
    for (const example of found) {
      // A file the page names by an absolute path (a backup's /var/backups/…) is written in the test's own folder instead, never outside it.
      const files = new Map<string, string>()
      const args = example.args.map((a) => {
        if (a.startsWith('/')) {
          const inside = join(dir, `file-${files.size}-${basename(a)}`)
          files.set(inside, a)
          return inside
        }
        return a.replace(/^(acc|key)_…$/, (placeholder, kind: string) => made[kind] ?? placeholder)
      })
      const run = await admin(dir, args)
      assert.equal(run.code, 0, `${file}:${example.line}: ${run.stderr}`)
      let stdout = run.stdout.trimEnd()
      for (const [inside, shown] of files) stdout = stdout.replaceAll(inside, shown)
      assert.match(stdout, pattern(example.shown), `${file}:${example.line} prints what it shows`)
      for (const kind of ['acc', 'key']) {
        const id = new RegExp(`\\b${kind}_[0-9a-f]{16}\\b`).exec(run.stdout)?.[0]
        if (id !== undefined) made[kind] ??= id
      }
    }
  })
}
