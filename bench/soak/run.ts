/**
 * Running a case: its request made for its account, sent to the operation's own method and path
 * (from the served document, so that an entry cannot claim one operation and call another), the
 * answer judged and counted, and what it leaves kept for later cases.
 */
import type { Agent } from 'node:http'
import type { OpenApiDocument } from '../../test/support/conformance.ts'
import { agent, exchange } from './http.ts'
import { judge } from './judge.ts'
import type { Tally } from './stats.ts'
import type { Answer, Api, Case, Ctx, Operation, Request, Table } from './types.ts'

export interface Account {
  readonly id: string
  readonly key: string
  readonly index: number
  /** A webhook endpoint made with the account, never deleted (the cases' own come and go). */
  readonly webhook?: string
}

export interface Target {
  readonly urls: Readonly<Record<Api, string>>
  readonly docs: Readonly<Record<Api, OpenApiDocument>>
  readonly ops: ReadonlyMap<string, Operation>
  readonly table: Table
  readonly adminToken: string
  readonly receiver: string
  readonly tally: Tally
  readonly timeoutMs: number
  readonly stallMs: number
}

let counter = 0

export class Runner {
  readonly #t: Target
  readonly #adminAgent = agent()
  /** Cases whose request could not be made (a prerequisite was refused), by `operationId: case`: how often, and the last reason. */
  readonly skipped = new Map<string, { times: number; why: string }>()

  constructor(target: Target) {
    this.#t = target
  }

  /** context makes the Ctx of one account: its own connections and what its cases keep. */
  context(account: Account, scratch: Account): Ctx {
    const own = agent()
    const ctx: Ctx = {
      account,
      scratch,
      adminToken: this.#t.adminToken,
      receiver: this.#t.receiver,
      next: () => ++counter,
      kept: new Map(),
      call: (opId, request) => this.#send(ctx, own, opId, { name: `(for another case)`, kind: 'valid', make: () => request }, request),
    }
    agents.set(ctx, own)
    return ctx
  }

  /** run makes one case's request and sends it; a case whose request cannot be made is counted as skipped. */
  async run(ctx: Ctx, opId: string, c: Case): Promise<Answer | null> {
    let request: Request
    try {
      request = await c.make(ctx)
    } catch (error) {
      const key = `${opId}: ${c.name}`
      this.skipped.set(key, { times: (this.skipped.get(key)?.times ?? 0) + 1, why: (error as Error).message })
      return null
    }
    return this.#send(ctx, agents.get(ctx)!, opId, c, request)
  }

  async #send(ctx: Ctx, own: Agent, opId: string, c: Case, request: Request): Promise<Answer> {
    const op = this.#t.ops.get(opId)
    if (op === undefined) throw new Error(`no served operation ${opId}`)
    const path = op.path.replace(/\{([^}]+)\}/g, (_m, name: string) => {
      const value = request.params?.[name]
      if (value === undefined) throw new Error(`${opId}: ${c.name} gives no {${name}}`)
      return value
    })
    const headers: Record<string, string> = {
      ...(op.api === 'public' ? { 'x-api-key': ctx.account.key } : { authorization: `Bearer ${this.#t.adminToken}` }),
      ...request.headers,
    }
    for (const [k, v] of Object.entries(headers)) if (v === '') delete headers[k]
    const mode = request.mode ?? 'read'
    const answer = await exchange({
      origin: this.#t.urls[op.api],
      path: `${path}${request.query === undefined ? '' : `?${request.query}`}`,
      method: op.method,
      headers,
      body: request.body,
      mode,
      agent: op.api === 'public' ? own : this.#adminAgent,
      timeoutMs: this.#t.timeoutMs,
      stallMs: this.#t.stallMs,
    })
    const verdict = await judge(this.#t.docs[op.api], op, c, mode, path, answer)
    const what = `${op.method} ${path.length > 120 ? `${path.slice(0, 120)}…` : path}${request.note === undefined ? '' : `, ${request.note}`}, ${mode}`
    this.#t.tally.add(opId, c.name, answer, verdict, what)
    c.after?.(ctx, answer, request)
    return answer
  }

  close(): void {
    this.#adminAgent.destroy()
  }
}

const agents = new WeakMap<Ctx, Agent>()
