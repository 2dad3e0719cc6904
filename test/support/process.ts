/** Server processes for tests: the real `src/server.ts`, started on a free port and stopped after. */
import type { TestContext } from 'node:test'
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { readFileSync, readdirSync } from 'node:fs'
import { LAUNCH_ENV } from '../../src/launch.ts'

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
    env: { ...process.env, ...LAUNCH_ENV, PORT: '0', LOG_LEVEL: 'info', ADMIN_LISTEN: 'off', LOG_FORMAT: 'json', ...env },
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

/** MemoryKinds: where a process's resident memory is, in bytes, by the kind of mapping that holds it (/proc/PID/smaps). */
export interface MemoryKinds {
  /** Anonymous mappings of 1 GiB or more of address space: WebAssembly memories (each reserves its whole range and guard). */
  readonly reservations: number
  /** Anonymous mappings that start on a 64 MiB boundary and are no larger: glibc's per-thread malloc arenas. */
  readonly arenas: number
  /** The main malloc heap ([heap]). */
  readonly brk: number
  /** Every other anonymous mapping: V8's heap pages, large buffers (mmapped by malloc), thread stacks. */
  readonly otherAnonymous: number
  /** Mappings of files: the executable, libraries, and what is read through them. */
  readonly files: number
}

/** memoryKinds sorts the resident memory of one process by the kind of mapping that holds it. */
export function memoryKinds(pid: number): MemoryKinds {
  const kinds = { reservations: 0, arenas: 0, brk: 0, otherAnonymous: 0, files: 0 }
  let text: string
  try {
    text = readFileSync(`/proc/${pid}/smaps`, 'utf8')
  } catch {
    return kinds
  }
  let size = 0
  let start = 0
  let path = ''
  for (const line of text.split('\n')) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \d+\s*(.*)$/.exec(line)
    if (head !== null) {
      start = Number.parseInt(head[1]!, 16)
      size = Number.parseInt(head[2]!, 16) - start
      path = head[3]!
      continue
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line)
    if (rss === null) continue
    const bytes = Number(rss[1]) * 1024
    if (path === '[heap]') kinds.brk += bytes
    else if (path.startsWith('/')) kinds.files += bytes
    else if (size >= 1 << 30) kinds.reservations += bytes
    else if (start % (64 << 20) === 0 && size <= 64 << 20) kinds.arenas += bytes
    else kinds.otherAnonymous += bytes
  }
  return kinds
}
