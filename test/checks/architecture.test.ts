/**
 * The layout's rules (scripts/architecture.ts) hold on the tree, and the check does fail: a
 * throw-away tree with one deliberate violation of each rule gets each reported.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { execFileSync } from 'node:child_process'
import { RULES, type Violation } from '../../scripts/architecture.ts'

const SCRIPT = new URL('../../scripts/architecture.ts', import.meta.url).pathname

/** One tree a process: dependency-cruiser's caches would answer a second tree from the first. */
function checkArchitecture(root?: string): { modules: number; violations: Violation[] } {
  const out = execFileSync(process.execPath, [SCRIPT, ...(root === undefined ? [] : [root]), '--json'], { encoding: 'utf8' })
  return JSON.parse(out) as { modules: number; violations: Violation[] }
}

test('the tree keeps every architecture rule', async () => {
  const { modules, violations } = checkArchitecture()
  assert.ok(modules > 200, `only ${modules} modules cruised: the check would pass on anything`)
  assert.deepEqual(violations, [])
})

test('the check fails on a deliberate violation of each rule', async () => {
  const root = mkdtempSync(join(tmpdir(), 'tessera-arch-'))
  const files: Record<string, string> = {
    'tsconfig.json': JSON.stringify({ compilerOptions: { module: 'nodenext', allowImportingTsExtensions: true, noEmit: true } }),
    'src/storage/ports.ts': 'export interface Store { write(): Promise<void> }\n',
    // A type-only import is still a door reaching the store.
    'src/portal/page.ts': "import type { Store } from '../storage/ports.ts'\nexport const page = (store: Store) => store.write()\n",
    'src/admin/cli.ts': "import { service } from '../services/users.ts'\nexport const run = () => service()\n",
    'src/services/users.ts': "import type { Store } from '../storage/ports.ts'\nexport const service = (store?: Store) => store\n",
    'src/services/team.ts': "import { page } from '../portal/page.ts'\nexport const team = page\n",
    'src/domain/user.ts': "import { service } from '../services/users.ts'\nexport const user = service\n",
    'src/storage/sqlite.ts': "import { service } from '../services/users.ts'\nexport const adapter = service\n",
    'src/totp/otp.ts': "import { render } from '../converter/render.ts'\nexport const otp = render\n",
    'src/converter/render.ts': 'export const render = 1\n',
    'src/runtime.ts': "import { test } from 'node:test'\nimport { helper } from '../test/helper.ts'\nexport const t = [test, helper]\n",
    'test/helper.ts': 'export const helper = 1\n',
  }
  try {
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(root, path)), { recursive: true })
      writeFileSync(join(root, path), text)
    }
    const { violations } = checkArchitecture(root)
    const seen = violations.map((v) => `${v.rule}: ${v.from} → ${v.to}`).sort()
    assert.deepEqual(seen, [
      'domain-imports-nothing-of-ours: src/domain/user.ts → src/services/users.ts',
      'doors-use-services: src/portal/page.ts → src/storage/ports.ts',
      'groups-apart: src/totp/otp.ts → src/converter/render.ts',
      'no-test-code-in-runtime: src/runtime.ts → node:test',
      'no-test-code-in-runtime: src/runtime.ts → test/helper.ts',
      'services-below-doors: src/services/team.ts → src/portal/page.ts',
      'storage-below-services: src/storage/sqlite.ts → src/services/users.ts',
    ])
    // Every rule has a failing case here.
    assert.deepEqual(new Set(violations.map((v) => v.rule)), new Set(RULES.map((r) => r.name)))
  } finally {
    rmSync(root, { recursive: true, force: true })
  }
})
