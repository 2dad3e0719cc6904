/**
 * A Redis Cluster of three primaries made for a test file: `redis-server --cluster-enabled yes`
 * on free ports, each in a folder of its own (no persistence), joined by `redis-cli --cluster
 * create`; stopped and removed when the file's tests are done. Started on first use, once.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after } from 'node:test'
import { toolSkip } from './services.ts'

/** The skip option of a test that needs the cluster: redis-server and redis-cli (the Debian package redis-server has both). */
export const clusterSkip = (): false | string => toolSkip('redis-server', 'redis-server') || toolSkip('redis-cli', 'redis-server')

export interface TestCluster {
  /** A node's URL (REDIS_URL with REDIS_CLUSTER=true). */
  readonly url: string
  readonly ports: readonly number[]
}

/** listenable: whether a TCP port on 127.0.0.1 can be taken now. */
function listenable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer()
    server.once('error', () => resolve(false))
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)))
  })
}

/** clusterPorts: three ports whose cluster bus ports (+10000) are free too. */
async function clusterPorts(): Promise<number[]> {
  const ports: number[] = []
  while (ports.length < 3) {
    const port = 20000 + Math.floor(Math.random() * 30000)
    if (!ports.includes(port) && (await listenable(port)) && (await listenable(port + 10000))) ports.push(port)
  }
  return ports
}

let started: Promise<TestCluster> | undefined
/** The cluster's servers and folder, for the file's end. */
const running: { servers: ChildProcess[]; dir: string | null } = { servers: [], dir: null }

// Registered as the module loads, so that it runs once the file's tests are done (an `after` called from inside a test would
// be that test's, and stop the cluster under the next one).
after(() => {
  for (const s of running.servers) s.kill('SIGKILL')
  if (running.dir !== null) rmSync(running.dir, { recursive: true, force: true })
})

/** redisCluster starts the file's cluster on first call (the same one after). */
export function redisCluster(): Promise<TestCluster> {
  started ??= start()
  return started
}

async function start(): Promise<TestCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-redis-cluster-'))
  running.dir = dir
  const ports = await clusterPorts()
  const servers: ChildProcess[] = ports.map((port) =>
    spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${port}.conf`].concat([
        '--dir',
        dir,
        '--save',
        '',
        '--appendonly',
        'no',
        '--cluster-node-timeout',
        '2000',
      ]),
      { stdio: 'ignore' },
    ),
  )
  running.servers = servers
  running.dir = dir
  for (const port of ports) {
    const deadline = Date.now() + 10_000
    while (
      spawnSync('redis-cli', ['-p', String(port), 'ping'])
        .stdout?.toString()
        .trim() !== 'PONG'
    ) {
      if (Date.now() > deadline) throw new Error(`redis-server on port ${port} did not start`)
      await new Promise((r) => setTimeout(r, 50))
    }
  }
  const made = spawnSync('redis-cli', ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '0', '--cluster-yes'])
  if (made.status !== 0) throw new Error(`redis-cli --cluster create: ${made.stdout} ${made.stderr}`)
  // The nodes agree on the slots a moment after: wait until each says the cluster is ok.
  const deadline = Date.now() + 15_000
  for (const port of ports) {
    while (!/cluster_state:ok/.test(spawnSync('redis-cli', ['-p', String(port), 'cluster', 'info']).stdout?.toString() ?? '')) {
      if (Date.now() > deadline) throw new Error('the Redis Cluster did not come up')
      await new Promise((r) => setTimeout(r, 100))
    }
  }
  return { url: `redis://127.0.0.1:${ports[0]}`, ports }
}

/** keysPerNode counts the keys under `prefix` on each primary: where the cluster put them. */
export function keysPerNode(cluster: TestCluster, prefix: string): number[] {
  return cluster.ports.map((port) => {
    const out = spawnSync('redis-cli', ['-p', String(port), '--scan', '--pattern', `${prefix}*`]).stdout?.toString() ?? ''
    return out.split('\n').filter((line) => line !== '').length
  })
}
