/**
 * The test tiers stay apart (docs/development.md, "Where a test goes"): a browser is opened by
 * test/browser/ (and test/cluster/, which needs several processes more than a browser), never
 * by test/http/ or src/. So no module under test/http/ or src/ reaches test/support/browser.ts,
 * directly or through another module of ours; and the check does fail on a tree that does.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, relative, resolve } from 'node:path'

const ROOT = resolve(import.meta.dirname, '../..')
const BROWSER = 'test/support/browser.ts'
const KEPT_APART = ['test/http', 'src']

/** Static imports and re-exports, side-effect imports and dynamic imports of a literal path. */
const IMPORT = /(?:\bfrom\s*|\bimport\s*\(?\s*)(['"])([^'"]+)\1/g

/** tsFiles: every .ts file under `dir`, as paths relative to `root`. */
function tsFiles(root: string, dir: string): string[] {
  const full = join(root, dir)
  if (!existsSync(full)) return []
  return readdirSync(full, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => join(dir, f))
}

/** ourImports: the modules of the repository that `file` imports by a relative path. */
function ourImports(root: string, file: string): string[] {
  const text = readFileSync(join(root, file), 'utf8')
  return [...text.matchAll(IMPORT)]
    .map((m) => m[2]!)
    .filter((spec) => spec.startsWith('.'))
    .map((spec) => relative(root, resolve(root, dirname(file), spec)))
    .filter((path) => existsSync(join(root, path)))
}

/** browserChains: for each module under test/http/ or src/ that reaches the browser helper, the chain of imports that does. */
function browserChains(root: string): string[] {
  const chains: string[] = []
  for (const start of KEPT_APART.flatMap((dir) => tsFiles(root, dir))) {
    const via = new Map<string, string>([[start, '']])
    const queue = [start]
    while (queue.length > 0) {
      const file = queue.shift()!
      if (file === BROWSER) {
        const chain = [file]
        for (let at = via.get(file)!; at !== ''; at = via.get(at)!) chain.unshift(at)
        chains.push(chain.join(' → '))
        break
      }
      for (const next of ourImports(root, file)) {
        if (via.has(next)) continue
        via.set(next, file)
        queue.push(next)
      }
    }
  }
  return chains.sort()
}

test('no module under test/http/ or src/ imports test/support/browser.ts, directly or through another', () => {
  assert.ok(tsFiles(ROOT, 'test/http').length > 20, 'test/http/ holds the HTTP tests: the check would pass on nothing')
  assert.ok(existsSync(join(ROOT, BROWSER)), `${BROWSER} is where it is checked to be`)
  assert.deepEqual(browserChains(ROOT), [])
})

test('the check fails on an HTTP test or a module of src/ that reaches the browser helper', () => {
  const root = mkdtempSync(join(tmpdir(), 'tessera-tiers-'))
  const files: Record<string, string> = {
    [BROWSER]: 'export const openBrowser = 1\n',
    'test/support/portal.ts': "export { openBrowser } from './browser.ts'\n",
    'test/support/helper.ts': 'export const startApp = 1\n',
    'test/http/portal/direct.test.ts': "import { openBrowser } from '../../support/browser.ts'\nexport const t = openBrowser\n",
    'test/http/portal/through.test.ts': "import { openBrowser } from '../../support/portal.ts'\nexport const t = openBrowser\n",
    'test/http/portal/dynamic.test.ts': "export const t = await import('../../support/browser.ts')\n",
    'test/http/portal/fine.test.ts': "import { startApp } from '../../support/helper.ts'\nexport const t = startApp\n",
    'test/browser/portal.test.ts': "import { openBrowser } from '../support/browser.ts'\nexport const t = openBrowser\n",
    'src/page.ts': "import '../test/support/browser.ts'\n",
  }
  try {
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(root, path)), { recursive: true })
      writeFileSync(join(root, path), text)
    }
    assert.deepEqual(browserChains(root), [
      'src/page.ts → test/support/browser.ts',
      'test/http/portal/direct.test.ts → test/support/browser.ts',
      'test/http/portal/dynamic.test.ts → test/support/browser.ts',
      'test/http/portal/through.test.ts → test/support/portal.ts → test/support/browser.ts',
    ])
  } finally {
    rmSync(root, { recursive: true, force: true })
  }
})
