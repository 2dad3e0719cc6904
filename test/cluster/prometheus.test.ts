/**
 * A real Prometheus (Debian's `prometheus`) scraping two real nodes that share PostgreSQL and
 * Redis, through their admin listeners, with docs/ops/alerts.yml loaded: the request count it
 * sums across the nodes is the number of calls the test made, both targets are up, every
 * alerting rule is loaded and evaluates without error, and every query of the Grafana
 * dashboard is one Prometheus accepts. Skips without the services or without prometheus, and
 * fails instead when TESSERA_REQUIRE_SERVICES=1 (CI).
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadConfig } from '../../src/config/config.ts'
import { resolvePepper } from '../../src/config/pepper.ts'
import { openStore } from '../../src/storage/factory.ts'
import { Accounts } from '../../src/services/accounts.ts'
import { createCaller, get, tempDir } from '../support/helper.ts'
import { startServer } from '../support/process.ts'
import { createDatabase, dropPrefix, redisUrl, skipUnless, toolSkip, uniqueName } from '../support/services.ts'

const PROMETHEUS = 'prometheus'
const ROOT = new URL('../..', import.meta.url).pathname
const RULES = join(ROOT, 'docs/ops/alerts.yml')
const DASHBOARD = join(ROOT, 'docs/ops/grafana-dashboard.json')
const PEPPER = 'prometheus-test-pepper-'.padEnd(40, 'x')

const skip = skipUnless('TEST_DATABASE_URL', 'TEST_REDIS_URL') || toolSkip(PROMETHEUS, 'prometheus')

/** freePort asks the system for a port nobody listens on (closed again before Prometheus takes it). */
async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address() as { port: number }
  server.close()
  await once(server, 'close')
  return port
}

/** until polls `probe` every 200 ms until it gives a value, or fails naming `what` at the deadline. */
async function until<T>(what: string, deadline: number, probe: () => Promise<T | undefined>): Promise<T> {
  let last: unknown
  for (;;) {
    try {
      const value = await probe()
      if (value !== undefined) return value
    } catch (error) {
      last = error
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last === undefined ? '' : `: ${String(last)}`}`)
    await new Promise((r) => setTimeout(r, 200))
  }
}

interface Sample {
  metric: Record<string, string>
  value: [number, string]
}

test('a real Prometheus scrapes two nodes on one PostgreSQL and Redis: the sum of their counters is the calls made, the alert rules load and evaluate, the dashboard queries run', {
  skip,
  timeout: 40_000,
}, async (t) => {
  const databaseUrl = await createDatabase(t)
  const prefix = `${uniqueName('t')}:`
  t.after(() => dropPrefix(prefix))
  const env = { NODE_ENV: 'test', PEPPER, DATABASE_URL: databaseUrl, REDIS_URL: redisUrl(), REDIS_PREFIX: prefix, ADMIN_LISTEN: '127.0.0.1:0' }
  const config = loadConfig({ ...env, DATA_DIR: tempDir(t) })
  const store = await openStore(config)
  t.after(() => store.close())
  const accounts = new Accounts({ store, pepper: resolvePepper(config), config })
  const { apiKey } = await createCaller(accounts)

  const nodes = [startServer({ ...env, DATA_DIR: tempDir(t) }, t), startServer({ ...env, DATA_DIR: tempDir(t) }, t)]
  const urls = (await Promise.all(nodes.map((n) => n.ready))).map((r) => r.url)
  // The "serving" line names the admin listener's address (its port chosen by the system).
  const admins = nodes.map((n) => /"admin":"([\d.]+:\d+)"/.exec(n.output())![1]!)

  // Prometheus, in a directory of its own removed once it has exited.
  const dir = mkdtempSync(join(tmpdir(), 'tessera-prometheus-'))
  const port = await freePort()
  const api = `http://127.0.0.1:${port}/api/v1`
  // JSON is YAML: the configuration is written as JSON.
  writeFileSync(
    join(dir, 'prometheus.yml'),
    JSON.stringify({
      global: { scrape_interval: '1s', scrape_timeout: '1s', evaluation_interval: '1s' },
      rule_files: [RULES],
      scrape_configs: [{ job_name: 'tessera', static_configs: admins.map((target, i) => ({ targets: [target], labels: { node: 'ab'[i] } })) }],
    }),
  )
  const prometheus = spawn(
    PROMETHEUS,
    [`--config.file=${join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn'],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  )
  let prometheusLog = ''
  prometheus.stderr.on('data', (d) => {
    prometheusLog += d
  })
  t.after(async () => {
    if (prometheus.exitCode === null && prometheus.signalCode === null) {
      prometheus.kill('SIGKILL')
      await once(prometheus, 'exit')
    }
    rmSync(dir, { recursive: true, force: true })
  })
  const deadline = Date.now() + 25_000
  const query = async (promql: string): Promise<Sample[]> => {
    const res = await fetch(`${api}/query?${new URLSearchParams({ query: promql })}`)
    const body = (await res.json()) as { status: string; error?: string; data: { resultType: string; result: Sample[] } }
    assert.equal(body.status, 'success', `${promql}: ${body.error}`)
    return body.data.result
  }

  /** ping sends `counts[i]` pings with the key to node i, at once on both nodes. */
  const ping = (counts: number[]) =>
    Promise.all(
      urls.map(async (url, i) => {
        for (let n = 0; n < counts[i]!; n++) assert.equal((await get(url, '/totp/ping', apiKey)).status, 200)
      }),
    )
  /** pingsSeen waits until Prometheus's sum across the nodes is `total`. */
  const pingsSeen = (total: number) =>
    until(`${total} pings in Prometheus`, deadline, async () => {
      const [sum] = await query('sum(tessera_http_requests_total{route="/totp/ping",status="200"})')
      return sum !== undefined && Number(sum.value[1]) === total ? Number(sum.value[1]) : undefined
    })

  // 7 pings on a and 5 on b before the first scrape, and a refusal on each (no key).
  await ping([7, 5])
  for (const url of urls) assert.equal((await get(url, '/totp/ping', undefined)).status, 403)

  await until('Prometheus to be ready', deadline, async () => {
    if (prometheus.exitCode !== null) throw new Error(`prometheus exited ${prometheus.exitCode}: ${prometheusLog}`)
    return (await fetch(`http://127.0.0.1:${port}/-/ready`)).ok || undefined
  })

  await t.test('both targets are up, and the pings summed across the nodes are the pings sent', async () => {
    assert.equal(await pingsSeen(12), 7 + 5)
    // More after Prometheus has seen the first ones: the counters move between scrapes.
    await ping([3, 2])
    assert.equal(await pingsSeen(17), 12 + 3 + 2)
    const byNode = await query('sum by (node) (tessera_http_requests_total{route="/totp/ping",status="200"})')
    assert.deepEqual(Object.fromEntries(byNode.map((s) => [s.metric.node, Number(s.value[1])])), { a: 10, b: 7 })
    const up = await query('up{job="tessera"}')
    assert.deepEqual(up.map((s) => [s.metric.node, s.value[1]]).sort(), [
      ['a', '1'],
      ['b', '1'],
    ])
    const [refused] = await query('sum(tessera_gateway_refusals_total{cause="missing"})')
    assert.equal(Number(refused!.value[1]), 2)
    // What the store panels and TesseraStoreDown/TesseraRedisDown read: both dependencies up on both nodes.
    const dependencies = await query('tessera_dependency_up{job="tessera"}')
    assert.deepEqual(dependencies.map((s) => `${s.metric.node} ${s.metric.dependency} ${s.value[1]}`).sort(), [
      'a postgres 1',
      'a redis 1',
      'b postgres 1',
      'b redis 1',
    ])
    const regions = (await (await fetch(`${api}/label/region/values?${new URLSearchParams({ 'match[]': 'tessera_build_info' })}`)).json()) as { data: string[] }
    assert.deepEqual(regions.data, ['eu'], "what the dashboard's region variable lists")
  })

  await t.test('every alerting rule of docs/ops/alerts.yml is loaded, evaluated without error, with its severity and annotations', async () => {
    const expected = [...readFileSync(RULES, 'utf8').matchAll(/^\s*- alert: (\w+)/gm)].map((m) => m[1]!).sort()
    type Rule = {
      type: string
      name: string
      health: string
      lastError?: string
      duration: number
      labels: Record<string, string>
      annotations: Record<string, string>
    }
    const rules = await until('every rule evaluated', deadline, async () => {
      const body = (await (await fetch(`${api}/rules?type=alert`)).json()) as { data: { groups: { rules: Rule[] }[] } }
      const all = body.data.groups.flatMap((g) => g.rules)
      return all.length === expected.length && all.every((r) => r.health !== 'unknown') ? all : undefined
    })
    assert.deepEqual(rules.map((r) => r.name).sort(), expected)
    for (const rule of rules) {
      assert.equal(rule.health, 'ok', `${rule.name}: ${rule.lastError}`)
      assert.ok(rule.duration > 0, `${rule.name}: a for`)
      assert.ok(['critical', 'warning'].includes(rule.labels.severity ?? ''), `${rule.name}: a severity`)
      assert.ok(rule.annotations.summary && rule.annotations.description, `${rule.name}: a summary and a description`)
    }
  })

  await t.test('every query of the Grafana dashboard runs, and the traffic panels show the calls', async () => {
    const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as { panels: { title: string; type: string; targets?: { expr: string }[] }[] }
    // Grafana's part: the region variable set to All (.*), $__rate_interval to a minute.
    const grafana = (expr: string) => expr.replaceAll('$region', '.*').replaceAll('$__rate_interval', '1m')
    let withData = 0
    for (const panel of dashboard.panels) {
      for (const target of panel.targets ?? []) {
        const result = await query(grafana(target.expr))
        if (result.length > 0) withData++
      }
    }
    assert.ok(withData > 10, `${withData} queries with data`)
    // The traffic panel's rate shows the pings sent between scrapes.
    const traffic = grafana(dashboard.panels.find((p) => p.title === 'Requests by route and status')!.targets![0]!.expr)
    await until('the pings on the traffic panel', deadline, async () => {
      const series = await query(traffic)
      return series.some((s) => s.metric.route === '/totp/ping' && s.metric.status === '200' && Number(s.value[1]) > 0) || undefined
    })
  })
})
