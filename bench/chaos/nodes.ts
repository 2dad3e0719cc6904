/**
 * The chaos run's three nodes: each the real `src/server.ts` (test/support/process.ts's
 * startServer), on a port of its own that it keeps across restarts, as a node behind a load
 * balancer would, with the cluster's settings. A node is taken out of the rotation before it
 * is killed and put back once its `/readyz` answers 200, as a load balancer's health check
 * would; the requests it had under way are the ones a kill cuts.
 */
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { startServer, type ServerProcess } from '../../test/support/process.ts'
import { freePort, sleep } from './infra.ts'

export interface ChaosNode {
  readonly name: string
  readonly url: string
  readonly adminUrl: string
  /** In the rotation: listening and ready, not being killed. */
  up: boolean
  process: ServerProcess
  /** Every process this node has had, the current one last (their logs are read at the end). */
  readonly history: ServerProcess[]
  /** Exits that the run did not cause (a crash), with the exit code and the last log lines. */
  readonly crashes: string[]
  /** Set while the run kills or stops it on purpose. */
  expectingExit: boolean
}

/** waitReady polls `/readyz` until it answers 200; resolves with the time it did (epoch ms). */
export async function waitReady(url: string, timeoutMs = 120_000): Promise<number> {
  const end = Date.now() + timeoutMs
  for (;;) {
    const ok = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(3000) }).then(
      async (r) => {
        await r.arrayBuffer()
        return r.status === 200
      },
      () => false,
    )
    if (ok) return Date.now()
    if (Date.now() > end) throw new Error(`${url}/readyz did not answer 200 within ${timeoutMs} ms`)
    await sleep(50)
  }
}

export class Cluster {
  readonly nodes: ChaosNode[] = []
  readonly #env: Record<string, string>
  readonly #dir: string
  #turn = 0

  constructor(env: Record<string, string>, dir: string) {
    this.#env = env
    this.#dir = dir
  }

  async start(count: number): Promise<void> {
    for (let i = 1; i <= count; i++) {
      const [port, adminPort] = [await freePort(), await freePort()]
      const dataDir = join(this.#dir, `node-${i}`)
      mkdirSync(dataDir)
      const env = { ...this.#env, PORT: String(port), ADMIN_LISTEN: `127.0.0.1:${adminPort}`, DATA_DIR: dataDir }
      const node: ChaosNode = {
        name: `node-${i}`,
        url: `http://127.0.0.1:${port}`,
        adminUrl: `http://127.0.0.1:${adminPort}`,
        up: false,
        process: undefined as unknown as ServerProcess,
        history: [],
        crashes: [],
        expectingExit: false,
      }
      envs.set(node, env)
      this.nodes.push(node)
    }
    // One at a time: the first applies the migrations, as the compose file starts them.
    for (const node of this.nodes) await this.#spawn(node)
  }

  async #spawn(node: ChaosNode): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const server = startServer(envs.get(node)!)
      node.process = server
      node.history.push(server)
      node.expectingExit = false
      server.child.once('exit', (code, signal) => {
        if (node.expectingExit || node.process !== server) return
        node.up = false
        node.crashes.push(`${node.name} exited by itself (code ${code}, signal ${signal}) at ${new Date().toISOString()}: ${server.errors().slice(-2000)}`)
      })
      try {
        await server.ready
        await waitReady(node.url)
        node.up = true
        return
      } catch (error) {
        // A node that cannot start (its store away) exits; start it again, as a supervisor would.
        if (attempt >= 20) throw error
        node.expectingExit = true
        await server.stop('SIGKILL')
        await sleep(1000)
      }
    }
  }

  /** kill takes the node out of the rotation and SIGKILLs it; resolves once it is gone. */
  async kill(node: ChaosNode): Promise<void> {
    node.up = false
    node.expectingExit = true
    await node.process.stop('SIGKILL')
  }

  /** restart starts a killed node again; resolves with when it answered /readyz 200 (epoch ms). */
  async restart(node: ChaosNode): Promise<number> {
    await this.#spawn(node)
    return Date.now()
  }

  /** pick: the next node in the rotation that is up, after `not` (other nodes than those); null when none is. */
  pick(not: readonly ChaosNode[] = []): ChaosNode | null {
    for (let i = 0; i < this.nodes.length; i++) {
      const node = this.nodes[this.#turn++ % this.nodes.length]!
      if (node.up && !not.includes(node)) return node
    }
    // Fewer nodes up than asked apart: any that is up.
    return this.nodes.find((n) => n.up) ?? null
  }

  /** stopAll: SIGTERM to every node (each saves its usage counts and drains), SIGKILL after 30 s. */
  async stopAll(): Promise<(number | null)[]> {
    return Promise.all(
      this.nodes.map(async (node) => {
        node.up = false
        node.expectingExit = true
        const timer = setTimeout(() => node.process.child.kill('SIGKILL'), 30_000)
        const code = await node.process.stop('SIGTERM')
        clearTimeout(timer)
        return code
      }),
    )
  }

  /** killAll: SIGKILL to whatever still runs (cleanup). */
  killAll(): void {
    for (const node of this.nodes) {
      node.expectingExit = true
      for (const p of node.history) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL')
    }
  }
}

const envs = new WeakMap<ChaosNode, Record<string, string>>()
