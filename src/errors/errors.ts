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
  override name = 'ApiError'
  readonly problems: readonly Problem[]
  readonly statusCode: number
  readonly headers: Record<string, string>

  constructor(problems: readonly Problem[], headers: Record<string, string> = {}, options?: ErrorOptions) {
    const first = problems[0]
    if (first === undefined) throw new TypeError('ApiError needs at least one problem')
    super(first.code, options)
    this.problems = problems
    this.statusCode = catalogue[first.code].status
    this.headers = headers
  }
}

/** apiError is the one-problem shorthand. */
export function apiError(code: ErrorCode, params?: Params, headers?: Record<string, string>): ApiError {
  return new ApiError([{ code, params }], headers)
}

/** errorBody renders problems in the shape the catalogue gives their first code. */
export function errorBody(problems: readonly Problem[]): string {
  const first = problems[0]!
  if (catalogue[first.code].shape === 'message') {
    return JSON.stringify({ message: render(first.code, first.params) })
  }
  return JSON.stringify(problems.map((p) => ({ type: 'Error', code: p.code, message: render(p.code, p.params) })))
}
