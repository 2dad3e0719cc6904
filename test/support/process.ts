/** Server processes for tests: the real `src/server.ts`, started on a free port and stopped after. */
import type { TestContext } from 'node:test'
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { readFileSync, readdirSync } from 'node:fs'

const SERVER = new URL('../../src/server.ts', import.meta.url).pathname

export interface ServerProcess {
  readonly child: ChildProcess
  /** Resolves with the port once the server listens and has logged "serving"; rejects if it exits first. */
  readonly ready: Promise<{ port: number; url: string }>
  output(): string
  errors(): string
  /** stop sends a signal and resolves with the exit code (null if killed by a signal). */
  stop(signal?: NodeJS.Signals): Promise<number | null>
}

export function startServer(env: Record<string, string>, t?: TestContext): ServerProcess {
  // The admin listener is off unless a test asks for it: its default port (3001) would collide between servers.
  // JSON logs unless a test asks otherwise: tests read them, whatever LOG_FORMAT the shell has.
  const child = spawn(process.execPath, [SERVER], {
    env: { ...process.env, PORT: '0', LOG_LEVEL: 'info', ADMIN_LISTEN: 'off', LOG_FORMAT: 'json', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  let err = ''
  child.stdout!.on('data', (d) => {
    out += d
  })
  child.stderr!.on('data', (d) => {
    err += d
  })
  const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>
  const ready = new Promise<{ port: number; url: string }>((resolve, reject) => {
    child.stdout!.on('data', () => {
      // Either format: a JSON line's "msg":"…", or a pretty line's "INFO: …".
      const m = /(?:"msg":"|INFO: )Server listening at http:\/\/127\.0\.0\.1:(\d+)/.exec(out)
      if (m && /(?:"msg":"|INFO: )serving\b/.test(out)) setTimeout(() => resolve({ port: Number(m[1]), url: `http://127.0.0.1:${m[1]}` }), 50)
    })
    child.on('exit', (code) => reject(new Error(`exited ${code}: ${err}`)))
  })
  ready.catch(() => undefined)
  t?.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })
  return {
    child,
    ready,
    output: () => out,
    errors: () => err,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode
      child.kill(signal)
      const [code] = await exited
      return code
    },
  }
}

/** treeRssBytes is the resident memory of a process and all its descendants, from /proc (Linux). */
export function treeRssBytes(pid: number): number {
  const children = new Map<number, number[]>()
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      // The command name (field 2) may hold spaces and parentheses: the parent pid follows the last ')'.
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)])
    } catch {
      /* exited meanwhile */
    }
  }
  let total = 0
  const todo = [pid]
  while (todo.length > 0) {
    const p = todo.pop()!
    try {
      total += Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${p}/status`, 'utf8'))?.[1] ?? 0) * 1024
    } catch {
      /* exited meanwhile */
    }
    todo.push(...(children.get(p) ?? []))
  }
  return total
}
