/**
 * The alert path of compose.cluster.yaml, with the shipped files: a real Prometheus reads
 * deploy/prometheus.yml and a real Alertmanager deploy/alertmanager/alertmanager.yml (Debian's
 * `prometheus` and `prometheus-alertmanager`), with the values an operator fills in filled in
 * by the test: its own SMTP server (STARTTLS, a certificate Alertmanager trusts through
 * SSL_CERT_FILE, the password read from the file the configuration names) and its own webhook
 * receiver. Prometheus scrapes a node that does not answer, so TesseraNodeDown, the rule of
 * docs/ops/alerts.yml with its `for` cut to 0 s, fires; the test asserts that the alert reaches
 * both receivers with its labels and rendered summary, and that the test alert of the docs
 * (`amtool alert add`) does too. Skips without the tools, and fails instead when
 * TESSERA_REQUIRE_SERVICES=1 (CI).
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync, spawn, spawnSync } from 'node:child_process'
import { once } from 'node:events'
import http from 'node:http'
import { readFileSync, writeFileSync } from 'node:fs'
import { type AddressInfo, createServer } from 'node:net'
import { join } from 'node:path'
import { tempDir } from '../support/helper.ts'
import { type Received, smtp } from '../support/smtp.ts'
import { toolSkip } from '../support/services.ts'

const ROOT = new URL('../..', import.meta.url).pathname
/** Debian names the binary prometheus-alertmanager; upstream's release calls it alertmanager. */
const ALERTMANAGER = spawnSync('alertmanager', ['--version']).status === 0 ? 'alertmanager' : 'prometheus-alertmanager'
const skip =
  toolSkip('prometheus', 'prometheus') ||
  toolSkip(ALERTMANAGER, 'prometheus-alertmanager') ||
  toolSkip('amtool', 'prometheus-alertmanager') ||
  toolSkip('openssl', 'openssl', ['version'])

/** fill replaces each placeholder of a shipped file, which must be there exactly once: the test fills in what the file holds. */
function fill(file: string, values: Readonly<Record<string, string>>): string {
  let text = readFileSync(join(ROOT, file), 'utf8')
  for (const [from, to] of Object.entries(values)) {
    assert.equal(text.split(from).length - 1, 1, `${file} holds "${from}" once`)
    text = text.replace(from, to)
  }
  return text
}

/** nodeDownRule: TesseraNodeDown's block of docs/ops/alerts.yml as a rules file of its own, firing at once instead of after 2 minutes. */
function nodeDownRule(): string {
  const rules = readFileSync(join(ROOT, 'docs/ops/alerts.yml'), 'utf8')
  const block = /^ {6}- alert: TesseraNodeDown\n(?: {8}.*\n|\n)+/m.exec(rules)?.[0]
  assert.ok(block?.includes('        for: 2m\n'), 'TesseraNodeDown with its for: 2m')
  return `groups:\n  - name: test\n    rules:\n${block!.replace('        for: 2m\n', '        for: 0s\n')}`
}

async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address() as AddressInfo
  server.close()
  await once(server, 'close')
  return port
}

/** until polls `probe` every 200 ms until it gives a value, or fails naming `what` after `ms`. */
async function until<T>(what: string, ms: number, probe: () => T | undefined | Promise<T | undefined>, log: () => string): Promise<T> {
  const end = Date.now() + ms
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}\n${log()}`)
    await new Promise((r) => setTimeout(r, 200))
  }
}

interface Notification {
  status: string
  alerts: { status: string; labels: Record<string, string>; annotations: Record<string, string> }[]
}

test('the shipped Prometheus and Alertmanager configurations take a firing alert to the operator: by e-mail and by webhook', {
  skip,
  timeout: 60_000,
}, async (t) => {
  const dir = tempDir(t)
  const check = spawnSync('amtool', ['check-config', join(ROOT, 'deploy/alertmanager/alertmanager.yml')], { encoding: 'utf8' })
  assert.equal(check.status, 0, `amtool check-config on the shipped file: ${check.stdout}${check.stderr}`)

  // The SMTP server's certificate, for 127.0.0.1: Alertmanager trusts it through SSL_CERT_FILE, as a mail server's public one.
  execFileSync(
    'openssl',
    ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1'].concat([
      '-addext',
      'subjectAltName=IP:127.0.0.1',
      '-keyout',
      join(dir, 'key.pem'),
      '-out',
      join(dir, 'cert.pem'),
    ]),
    { stdio: 'ignore' },
  )
  const password = 'the-smtp-password'
  const signIns: string[] = []
  const mail = await smtp(t, {
    disabledCommands: [],
    key: readFileSync(join(dir, 'key.pem')),
    cert: readFileSync(join(dir, 'cert.pem')),
    onAuth(auth, session, callback) {
      signIns.push(`${auth.username}:${auth.password}:${session.secure ? 'tls' : 'plain'}`)
      if (auth.password !== password) return callback(new Error('wrong password'))
      callback(null, { user: auth.username })
    },
  })
  const hooks: Notification[] = []
  const receiver = http.createServer((req, res) => {
    let body = ''
    req.on('data', (chunk) => {
      body += chunk
    })
    req.on('end', () => {
      if (req.method === 'POST' && req.url === '/alertmanager') hooks.push(JSON.parse(body) as Notification)
      res.statusCode = 204
      res.end()
    })
  })
  receiver.listen(0, '127.0.0.1')
  await once(receiver, 'listening')
  t.after(() => receiver.close())

  writeFileSync(join(dir, 'smtp-password'), password)
  writeFileSync(
    join(dir, 'alertmanager.yml'),
    fill('deploy/alertmanager/alertmanager.yml', {
      'smtp_smarthost: smtp.example.com:587': `smtp_smarthost: 127.0.0.1:${mail.port}`,
      '/etc/alertmanager/smtp-password': join(dir, 'smtp-password'),
      'url: https://hooks.example.com/alertmanager': `url: http://127.0.0.1:${(receiver.address() as AddressInfo).port}/alertmanager`,
      // Not a placeholder: the wait for more alerts of a group, cut from 30 s.
      'group_wait: 30s': 'group_wait: 1s',
    }),
  )
  const filled = spawnSync('amtool', ['check-config', join(dir, 'alertmanager.yml')], { encoding: 'utf8' })
  assert.equal(filled.status, 0, `amtool check-config on the filled file: ${filled.stdout}${filled.stderr}`)

  const alertmanagerPort = await freePort()
  const alertmanagerUrl = `http://127.0.0.1:${alertmanagerPort}`
  const nodePort = await freePort() // nobody listens there: the node is down
  writeFileSync(join(dir, 'alerts.yml'), nodeDownRule())
  writeFileSync(join(dir, 'metrics-token'), 'a-token')
  writeFileSync(
    join(dir, 'prometheus.yml'),
    fill('deploy/prometheus.yml', {
      'scrape_interval: 15s': 'scrape_interval: 1s',
      'evaluation_interval: 15s': 'evaluation_interval: 1s',
      '/etc/prometheus/alerts.yml': join(dir, 'alerts.yml'),
      '"alertmanager:9093"': `"127.0.0.1:${alertmanagerPort}"`,
      '/etc/prometheus/metrics-token': join(dir, 'metrics-token'),
      '["tessera-1:3000", "tessera-2:3000"]': `["127.0.0.1:${nodePort}"]`,
    }),
  )

  let log = ''
  const run = (command: string, args: string[], env: NodeJS.ProcessEnv = process.env) => {
    const child = spawn(command, args, { env, stdio: ['ignore', 'ignore', 'pipe'] })
    child.stderr.on('data', (d) => {
      log += `${command}: ${d}`
    })
    t.after(async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL')
        await once(child, 'exit')
      }
    })
    return child
  }
  // The command line of compose.cluster.yaml's alertmanager service, with the test's addresses and files.
  run(
    ALERTMANAGER,
    [
      `--config.file=${join(dir, 'alertmanager.yml')}`,
      `--storage.path=${join(dir, 'alertmanager')}`,
      '--cluster.listen-address=',
      `--web.listen-address=127.0.0.1:${alertmanagerPort}`,
      '--log.level=warn',
    ],
    { ...process.env, SSL_CERT_FILE: join(dir, 'cert.pem') },
  )
  run('prometheus', [
    `--config.file=${join(dir, 'prometheus.yml')}`,
    `--storage.tsdb.path=${join(dir, 'prometheus')}`,
    `--web.listen-address=127.0.0.1:${await freePort()}`,
    '--log.level=warn',
  ])

  const messages = (subject: string) => mail.received.filter((m: Received) => m.raw.includes(subject))
  await t.test('TesseraNodeDown, fired by Prometheus, arrives by e-mail and by webhook with its labels and summary', async () => {
    const hook = await until(
      'the webhook notification',
      30_000,
      () => hooks.find((n) => n.alerts.some((a) => a.labels.alertname === 'TesseraNodeDown')),
      () => log,
    )
    assert.equal(hook.status, 'firing')
    const alert = hook.alerts.find((a) => a.labels.alertname === 'TesseraNodeDown')!
    assert.equal(alert.labels.severity, 'critical')
    assert.equal(alert.labels.instance, `127.0.0.1:${nodePort}`)
    assert.equal(alert.annotations.summary, `Prometheus cannot scrape 127.0.0.1:${nodePort} (tessera)`)
    const [message] = await until(
      'the e-mail',
      15_000,
      () => (messages('TesseraNodeDown').length > 0 ? messages('TesseraNodeDown') : undefined),
      () => log,
    )
    assert.equal(message!.from, 'alertmanager@example.com')
    assert.deepEqual(message!.to, ['oncall@example.com'])
    assert.match(message!.raw, /^Subject: \[FIRING:1\] TesseraNodeDown/m)
    assert.ok(message!.raw.replace(/=\r?\n/g, '').includes(`Prometheus cannot scrape 127.0.0.1:${nodePort} (tessera)`), 'the summary in the body')
    // Signed in over STARTTLS with the password of the file the configuration names.
    assert.deepEqual([...new Set(signIns)], [`alertmanager@example.com:${password}:tls`])
  })

  await t.test("the docs' test alert (amtool alert add) arrives too", async () => {
    const added = spawnSync(
      'amtool',
      ['alert', 'add', 'TesseraTest', 'severity=warning', '--annotation=summary=A test of the alert path', `--alertmanager.url=${alertmanagerUrl}`],
      { encoding: 'utf8' },
    )
    assert.equal(added.status, 0, `${added.stdout}${added.stderr}`)
    const hook = await until(
      'the test alert by webhook',
      15_000,
      () => hooks.find((n) => n.alerts.some((a) => a.labels.alertname === 'TesseraTest')),
      () => log,
    )
    assert.equal(hook.alerts[0]!.annotations.summary, 'A test of the alert path')
    const [message] = await until(
      'the test alert by e-mail',
      15_000,
      () => (messages('TesseraTest').length > 0 ? messages('TesseraTest') : undefined),
      () => log,
    )
    // The title docs/deploy.md says it has.
    assert.match(message!.raw, /^Subject: \[FIRING:1\] TesseraTest \(warning\)\r?$/m)
  })
})
