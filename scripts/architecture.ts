/**
 * npm run architecture: the rules of the layout, checked on the module graph (dependency-cruiser),
 * so that they hold without anyone remembering them. Exits 1 with one line per violation.
 *
 * dependency-cruiser parses TypeScript with the TypeScript compiler's JavaScript API, which
 * TypeScript 7 (the project's type checker) does not have: with it, dependency-cruiser finds
 * no transpiler, cruises 0 modules and passes. So its `typescript` is resolved to the
 * TypeScript 5 of the typegen workspace (a resolve hook below), and the check refuses to pass
 * on a graph that is suspiciously small.
 */
import { registerHooks } from 'node:module'
import { pathToFileURL } from 'node:url'
import { join, resolve } from 'node:path'

const ROOT = resolve(import.meta.dirname, '..')
const TS5 = join(ROOT, 'scripts/typegen/node_modules/typescript')

registerHooks({
  resolve(specifier, context, next) {
    if (context.parentURL?.includes('/dependency-cruiser/') && (specifier === 'typescript' || specifier.startsWith('typescript/'))) {
      const file = specifier === 'typescript' ? 'lib/typescript.js' : specifier.slice('typescript/'.length)
      return { url: pathToFileURL(join(TS5, file)).href, shortCircuit: true }
    }
    return next(specifier, context)
  },
})

/** The doors: modules that turn HTTP, HTML forms or a command line into service calls. */
const DOORS = '^src/(portal|admin|api)/|^src/totp/(factors/)?routes\\.ts$|^src/converter/(job-)?routes\\.ts$'
const TESTS = '\\.test\\.ts$|^test/'

export interface Rule {
  readonly name: string
  readonly comment: string
  readonly severity: 'error'
  readonly from: Record<string, unknown>
  readonly to: Record<string, unknown>
}

export const RULES: readonly Rule[] = [
  {
    name: 'doors-use-services',
    comment: 'A door (routes, portal pages, admin API, CLI) reaches the store only through a service: import services/ and domain/, never storage/.',
    severity: 'error',
    from: { path: DOORS, pathNot: TESTS },
    to: { path: '^src/storage/' },
  },
  {
    name: 'domain-imports-nothing-of-ours',
    comment: 'domain/ is at the bottom: entities, their errors and policies import nothing but each other (and Node itself).',
    severity: 'error',
    from: { path: '^src/domain/' },
    to: { pathNot: '^src/domain/', dependencyTypesNot: ['core'] },
  },
  {
    name: 'services-below-doors',
    comment: 'A service serves every door alike: it never imports one (routes, portal pages, admin API, CLI).',
    severity: 'error',
    from: { path: '^src/services/', pathNot: TESTS },
    to: { path: DOORS },
  },
  {
    name: 'storage-below-services',
    comment: 'The store adapters serve the services: they never import a service, a door or the HTTP layer.',
    severity: 'error',
    from: { path: '^src/storage/', pathNot: TESTS },
    to: { path: '^src/(services|portal|admin|api|http|totp|converter|gateway)/|^src/(app|runtime|server|main)\\.ts$' },
  },
  {
    name: 'groups-apart',
    comment: 'The TOTP and conversion groups never import each other.',
    severity: 'error',
    from: { path: '^src/(totp|converter)/' },
    to: { path: '^src/(totp|converter)/', pathNot: '^src/$1/' },
  },
  {
    name: 'no-test-code-in-runtime',
    comment: 'Runtime code never imports test code (test/, *.test.ts, node:test): it would ship in the image.',
    severity: 'error',
    from: { path: '^src/', pathNot: TESTS },
    to: { path: `${TESTS}|^node:test$|^test$` },
  },
]

export interface Violation {
  readonly rule: string
  readonly from: string
  readonly to: string
}

/** checkArchitecture cruises `root`'s src/ (and test/ when there) and answers the modules seen and the violations. */
export async function checkArchitecture(root = ROOT): Promise<{ modules: number; violations: Violation[] }> {
  const { cruise } = await import('dependency-cruiser')
  const result = await cruise(['src'], {
    baseDir: root,
    validate: true,
    ruleSet: { forbidden: RULES as never },
    tsPreCompilationDeps: true,
    doNotFollow: { path: 'node_modules' },
    exclude: { path: 'node_modules' },
    moduleSystems: ['es6'],
    tsConfig: { fileName: join(root, 'tsconfig.json') },
  })
  if (typeof result.output === 'string') throw new Error('dependency-cruiser answered text, not a graph')
  const output = result.output
  const violations = output.summary.violations.map((v) => ({ rule: v.rule.name, from: v.from, to: v.to }))
  return { modules: output.modules.length, violations }
}

/**
 * As a command: `node scripts/architecture.ts [root] [--json]`. One tree a process:
 * dependency-cruiser keeps caches keyed by relative paths, so a second tree cruised in the
 * same process is answered from the first.
 */
if (import.meta.main) {
  const args = process.argv.slice(2)
  const root = args.find((a) => !a.startsWith('--')) ?? ROOT
  const { modules, violations } = await checkArchitecture(resolve(root))
  if (args.includes('--json')) {
    process.stdout.write(`${JSON.stringify({ modules, violations })}\n`)
    process.exit(0)
  }
  // A TypeScript-less dependency-cruiser sees no module and finds nothing: never a pass.
  if (modules < 50) {
    process.stderr.write(`architecture: only ${modules} modules cruised; is the TypeScript 5 of scripts/typegen installed?\n`)
    process.exit(1)
  }
  for (const v of violations) process.stderr.write(`architecture: ${v.rule}: ${v.from} → ${v.to}\n`)
  const comments = new Map(RULES.map((r) => [r.name, r.comment]))
  for (const rule of new Set(violations.map((v) => v.rule))) process.stderr.write(`  ${rule}: ${comments.get(rule)}\n`)
  process.stdout.write(`architecture: ${modules} modules, ${violations.length} violations\n`)
  process.exit(violations.length === 0 ? 0 : 1)
}
