/**
 * The errors a store or a list can raise to its callers, which each door maps to its answer. Nothing here imports anything of ours.
 */

/** CursorError: a cursor this store did not give out (the caller answers 400). */
export class CursorError extends Error {
  constructor() {
    super('malformed cursor')
    this.name = 'CursorError'
  }
}

/**
 * LastOwnerError: the change would leave an account without an owner (the caller answers
 * 409); nothing was written.
 */
export class LastOwnerError extends Error {
  constructor() {
    super('an account keeps at least one owner')
    this.name = 'LastOwnerError'
  }
}

/** UnavailableError: a dependency (named) cannot be reached; the caller gets 503, not 500. */
export class UnavailableError extends Error {
  readonly dependency: string
  constructor(dependency: string, cause: unknown) {
    super(`${dependency} is unreachable: ${cause instanceof Error ? cause.message : String(cause)}`, { cause })
    this.name = 'UnavailableError'
    this.dependency = dependency
  }
}
