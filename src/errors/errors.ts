/**
 * ApiError carries one or more catalogue problems to the error handler, which turns them
 * into the catalogue's body shape. Expected outcomes (a wrong OTP) are returned as data by
 * the core; routes turn them into an ApiError at the edge.
 */
import { catalogue, render, type ErrorCode } from './catalogue.ts'

export type Params = Record<string, string | number>

export interface Problem {
  readonly code: ErrorCode
  readonly params?: Params
}

export class ApiError extends Error {
  readonly problems: readonly Problem[]
  readonly statusCode: number
  readonly headers: Record<string, string>

  constructor(problems: readonly Problem[], headers: Record<string, string> = {}, options?: ErrorOptions) {
    const first = problems[0]
    if (first === undefined) throw new TypeError('ApiError needs at least one problem')
    // An ApiError is an answer, not a fault: capturing a stack trace would cost more than the rest of the request.
    const limit = Error.stackTraceLimit
    Error.stackTraceLimit = 0
    super(first.code, options)
    Error.stackTraceLimit = limit
    this.name = 'ApiError'
    this.problems = problems
    this.statusCode = catalogue[first.code].status
    this.headers = headers
  }
}

/** answerError makes an Error without a stack trace: for expected outcomes, where the trace would cost more than the request. */
export function answerError(message: string): Error {
  const limit = Error.stackTraceLimit
  Error.stackTraceLimit = 0
  const error = new Error(message)
  Error.stackTraceLimit = limit
  return error
}

/** apiError is the one-problem shorthand. */
export function apiError(code: ErrorCode, params?: Params, headers?: Record<string, string>): ApiError {
  return new ApiError([{ code, params }], headers)
}

/** errorBody renders problems in the shape the catalogue gives their first code. */
export function errorBody(problems: readonly Problem[]): string {
  const first = problems[0]!
  const shape = catalogue[first.code].shape
  if (shape === 'message') return JSON.stringify({ message: render(first.code, first.params) })
  if (shape === 'coded') return JSON.stringify({ message: render(first.code, first.params), code: first.code })
  return JSON.stringify(problems.map((p) => ({ type: 'Error', code: p.code, message: render(p.code, p.params) })))
}
