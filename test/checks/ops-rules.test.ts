/**
 * The operator's kit in docs/ops/ (issue 14): the alerting rules pass `promtool check rules`
 * and their own unit tests (`promtool test rules`: each alert fires on synthetic series and
 * stays silent where it must); every metric the rules and the Grafana dashboard query is one
 * the service registers; every dashboard query follows the region variable; and what an
 * alert tells the operator to look at exists: the dashboard panels it names, the settings and
 * error codes, the log lines. promtool comes from Debian's `prometheus` package: without it
 * the promtool tests skip with a notice, and fail when TESSERA_REQUIRE_SERVICES=1 (CI).
 *
 * The rules are read as text: no YAML parser is among the dependencies, and the file keeps a
 * regular layout (one `- alert:` block each; annotations as one-line `summary: "…"` and folded
 * `description: >-`). Prometheus's own reading of them is checked by test/cluster/prometheus.test.ts.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { createMetrics, REFUSAL_CAUSES, VERIFICATION_OUTCOMES, CONVERSION_OUTCOMES, REPLACEMENT_REASONS, SIGN_IN_OUTCOMES } from '../../src/metrics/metrics.ts'
import { settings } from '../../src/config/config.ts'
import { ERROR_CODES } from '../../src/errors/catalogue.ts'
import { toolSkip } from '../support/services.ts'

const ROOT = new URL('../..', import.meta.url).pathname
const OPS = join(ROOT, 'docs/ops')
const RULES = join(OPS, 'alerts.yml')
const RULE_TESTS = join(OPS, 'alerts.test.yml')
const DASHBOARD = join(OPS, 'grafana-dashboard.json')

const skip = toolSkip('promtool', 'prometheus')

interface AlertBlock {
  readonly name: string
  readonly text: string
  readonly forDuration: string | undefined
  readonly severity: string | undefined
  readonly summary: string | undefined
  /** The folded description, its lines joined by spaces, as Prometheus reads it. */
  readonly description: string | undefined
}

/** alertBlocks splits the rules file at each `- alert:` and reads what each block declares. */
function alertBlocks(text: string): AlertBlock[] {
  return text
    .split(/^\s*- alert: /m)
    .slice(1)
    .map((block) => {
      const lines = block.split('\n')
      const folded = /^( *)description: >-\n((?:\1 +.*\n?)+)/m.exec(block)
      return {
        name: lines[0]!.trim(),
        text: block,
        forDuration: /^\s+for: (\d+[smhd])\s*$/m.exec(block)?.[1],
        severity: /^\s+severity: (\S+)\s*$/m.exec(block)?.[1],
        summary: /^\s+summary: "(.*)"\s*$/m.exec(block)?.[1],
        description: folded?.[2]
          ?.split('\n')
          .map((l) => l.trim())
          .filter((l) => l !== '')
          .join(' '),
      }
    })
}

interface Panel {
  type: string
  title: string
  id: number
  gridPos: { x: number; y: number; w: number; h: number }
  datasource?: { uid: string }
  fieldConfig?: { defaults?: { unit?: string } }
  targets?: { expr: string; datasource?: { uid: string } }[]
  description?: string
  panels?: Panel[]
}
interface Dashboard {
  schemaVersion: number
  panels: Panel[]
  templating: { list: Record<string, unknown>[] }
  uid: string
  title: string
}

const rulesText = readFileSync(RULES, 'utf8')
const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as Dashboard
const allPanels = dashboard.panels.flatMap((p) => [p, ...(p.panels ?? [])])
const graphPanels = allPanels.filter((p) => p.type !== 'row')
const expressions = graphPanels.flatMap((p) => (p.targets ?? []).map((t) => t.expr))

/** Metric names in PromQL text (the service's own and the process defaults; `up` is Prometheus's). */
const metricNames = (promql: string) => [...promql.matchAll(/\b(?:tessera|process|nodejs)_[a-zA-Z0-9_]+/g)].map((m) => m[0])

test('promtool check rules accepts docs/ops/alerts.yml', { skip }, () => {
  const run = spawnSync('promtool', ['check', 'rules', RULES], { encoding: 'utf8' })
  assert.equal(run.status, 0, `promtool: ${run.stdout}${run.stderr}`)
  assert.match(run.stdout, new RegExp(`SUCCESS: ${alertBlocks(rulesText).length} rules found`))
})

test('promtool test rules: every alert fires on its synthetic series and stays silent where it must', { skip }, () => {
  const run = spawnSync('promtool', ['test', 'rules', RULE_TESTS], { encoding: 'utf8', cwd: OPS })
  assert.equal(run.status, 0, `promtool: ${run.stdout}${run.stderr}`)
  assert.match(run.stdout, /SUCCESS/)
})

test('each alert has a for, a severity, a summary and a description, and a test case that fires it and one that must not', () => {
  const alerts = alertBlocks(rulesText)
  assert.ok(alerts.length >= 12, `${alerts.length} alerts`)
  assert.equal(new Set(alerts.map((a) => a.name)).size, alerts.length, 'alert names are unique')
  // Each evaluation of the unit tests: the alert it checks, and whether it expects none.
  const cases = readFileSync(RULE_TESTS, 'utf8')
    .split(/^\s*- eval_time: /m)
    .slice(1)
    .map((c) => ({
      alertname: /^\s+alertname: (\S+)/m.exec(c)?.[1],
      silent: /^\s+exp_alerts: \[\]\s*$/m.test(c),
    }))
  for (const alert of alerts) {
    assert.ok(alert.forDuration !== undefined && alert.forDuration !== '0m', `${alert.name}: a for`)
    assert.ok(['critical', 'warning'].includes(alert.severity ?? ''), `${alert.name}: severity critical or warning`)
    assert.ok((alert.summary ?? '').length > 10, `${alert.name}: a summary`)
    assert.ok((alert.description ?? '').length > 100, `${alert.name}: a description that says where to look`)
    assert.ok(
      cases.some((c) => c.alertname === alert.name && !c.silent),
      `${alert.name}: a case where it fires`,
    )
    assert.ok(
      cases.some((c) => c.alertname === alert.name && c.silent),
      `${alert.name}: a case where it must not fire`,
    )
  }
  assert.deepEqual([...new Set(cases.map((c) => c.alertname))].sort(), alerts.map((a) => a.name).sort(), 'the tests check only alerts that exist')
  // The operating guide's table of alerts ("Dashboard and alerts") has one row per alert, with its severity.
  const rows = [...readFileSync(join(ROOT, 'docs/operating.md'), 'utf8').matchAll(/^\| `(Tessera\w+)` \| (\w+) \|/gm)].map((m) => `${m[1]} ${m[2]}`)
  assert.deepEqual(rows.sort(), alerts.map((a) => `${a.name} ${a.severity}`).sort(), 'docs/operating.md rows: alert and severity')
})

test('every metric the rules and the dashboard query is registered by src/metrics/metrics.ts', async () => {
  const metrics = createMetrics({ region: 'eu', perAccount: true })
  const registered = new Map((await metrics.registry.getMetricsAsJSON()).map((m) => [m.name, String(m.type)]))
  /** known: a registered name, or a histogram's (or summary's) _bucket, _sum or _count series. */
  const known = (name: string) => {
    if (registered.has(name)) return true
    const base = name.replace(/_(bucket|sum|count)$/, '')
    return base !== name && ['histogram', 'summary'].includes(registered.get(base) ?? '')
  }
  const inRules = metricNames(rulesText.replace(/^\s*#.*$/gm, ''))
  const inDashboard = expressions.flatMap(metricNames)
  assert.ok(inRules.length > 20 && inDashboard.length > 40, 'names were found')
  for (const name of new Set([...inRules, ...inDashboard])) assert.ok(known(name), `${name} is not a metric the service exports`)
  // The dashboard covers every tessera_* metric: a new one is a new panel.
  const shown = new Set(inDashboard.map((n) => (known(n) && !registered.has(n) ? n.replace(/_(bucket|sum|count)$/, '') : n)))
  for (const name of registered.keys()) if (name.startsWith('tessera_')) assert.ok(shown.has(name), `${name} has a panel`)
})

test('the dashboard imports as it should: schema 39+, a Prometheus data source variable, a multi-value region variable, every query by region, units, no overlapping panels', () => {
  assert.ok(dashboard.schemaVersion >= 39)
  assert.ok(dashboard.uid && dashboard.title)
  const variable = (name: string) => dashboard.templating.list.find((v) => v.name === name) as Record<string, unknown> | undefined
  assert.deepEqual([variable('datasource')?.type, variable('datasource')?.query], ['datasource', 'prometheus'])
  const region = variable('region')!
  assert.equal(region.type, 'query')
  assert.equal(region.multi, true)
  assert.equal(region.includeAll, true)
  assert.equal((region.datasource as { uid: string }).uid, '${datasource}')
  assert.equal((region.query as { query: string }).query, 'label_values(tessera_build_info, region)')

  assert.equal(new Set(allPanels.map((p) => p.id)).size, allPanels.length, 'panel ids are unique')
  assert.ok(graphPanels.length >= 30, `${graphPanels.length} panels`)
  for (const panel of graphPanels) {
    assert.equal(panel.datasource?.uid, '${datasource}', `${panel.title}: the data source variable`)
    assert.ok(panel.fieldConfig?.defaults?.unit, `${panel.title}: a unit`)
    assert.ok((panel.description ?? '').length > 0, `${panel.title}: a description`)
    assert.ok((panel.targets ?? []).length > 0, `${panel.title}: a query`)
    for (const target of panel.targets!) {
      assert.match(target.expr, /region=~"\$region"/, `${panel.title}: ${target.expr}`)
      assert.equal(
        target.expr.match(/\{/g)?.length,
        target.expr.match(/region=~"\$region"/g)?.length,
        `${panel.title}: every selector by region: ${target.expr}`,
      )
      assert.equal(target.datasource?.uid, '${datasource}')
    }
  }
  const units = new Set(graphPanels.map((p) => p.fieldConfig!.defaults!.unit))
  for (const unit of ['s', 'bytes', 'reqps', 'percentunit', 'Bps']) assert.ok(units.has(unit), `some panel in ${unit}`)

  // Layout: 24 columns, no two panels on the same cell.
  const cells = new Set<string>()
  for (const { title, gridPos: g } of allPanels) {
    assert.ok(g.x >= 0 && g.w > 0 && g.x + g.w <= 24, `${title} fits in 24 columns`)
    for (let x = g.x; x < g.x + g.w; x++) {
      for (let y = g.y; y < g.y + g.h; y++) {
        assert.ok(!cells.has(`${x},${y}`), `${title} overlaps another panel at ${x},${y}`)
        cells.add(`${x},${y}`)
      }
    }
  }
})

test('what the alerts tell the operator to look at exists: the panels they name, settings and error codes, log lines, label values', () => {
  const titles = new Set(graphPanels.map((p) => p.title))
  const settingNames = new Set(Object.values(settings).map((s) => s.env))
  const codes = new Set<string>(ERROR_CODES)
  const labelValues = new Set<string>([...REFUSAL_CAUSES, ...VERIFICATION_OUTCOMES, ...CONVERSION_OUTCOMES, ...REPLACEMENT_REASONS, ...SIGN_IN_OUTCOMES])
  const sources = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
      const path = join(dir, e.name)
      if (e.isDirectory()) return sources(path)
      return e.name.endsWith('.ts') && !e.name.endsWith('.test.ts') ? [readFileSync(path, 'utf8')] : []
    })
  const code = sources(join(ROOT, 'src')).join('\n')
  // Template actions ({{ ... }}, quoted or not) are not text the operator reads as such.
  const plain = (text: string) => text.replace(/"\{\{.*?\}\}"/g, '').replace(/\{\{.*?\}\}/g, '')
  const alerts = alertBlocks(rulesText)
  for (const alert of alerts) {
    const text = plain(`${alert.summary} ${alert.description}`)
    for (const [, title] of text.matchAll(/[Pp]anel "([^"]+)"/g))
      assert.ok(titles.has(title!), `${alert.name} names panel "${title}", which the dashboard lacks`)
    for (const [name] of text.matchAll(/\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b/g)) {
      assert.ok(settingNames.has(name) || codes.has(name), `${alert.name} names ${name}: neither a setting nor an error code`)
    }
    // Every other quoted phrase is a label value or a line of the code (a log message).
    for (const [, quoted] of plain(alert.description ?? '').matchAll(/"([^"]+)"/g)) {
      if (titles.has(quoted!) || labelValues.has(quoted!)) continue
      assert.ok(code.includes(quoted!), `${alert.name} quotes "${quoted}", which is no panel, label value or log line of src/`)
    }
  }
  // The alert names the descriptions point to exist.
  const names = new Set(alerts.map((a) => a.name))
  for (const alert of alerts)
    for (const [name] of (alert.description ?? '').matchAll(/\bTessera[A-Z]\w+/g)) assert.ok(names.has(name), `${alert.name} refers to ${name}`)
  // And the dashboard's descriptions name settings that exist.
  for (const panel of graphPanels) {
    for (const [name] of (panel.description ?? '').matchAll(/\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b/g)) {
      assert.ok(settingNames.has(name) || codes.has(name), `panel "${panel.title}" names ${name}`)
    }
  }
})
