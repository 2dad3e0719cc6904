/**
 * lazyChildLogger stands in for Fastify's per-request pino child: the child (its bindings
 * serialised, its prototype chain built) is made only when a line is actually written at
 * an enabled level. On a hot route that logs nothing this saves several microseconds a
 * request (measured with npm run bench); the lines it writes are the same.
 */
import type { FastifyBaseLogger } from 'fastify'

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace'
type Bindings = Record<string, unknown>

export class LazyChild {
  readonly #parent: FastifyBaseLogger
  readonly #bindings: Bindings
  #real: FastifyBaseLogger | undefined

  constructor(parent: FastifyBaseLogger, bindings: Bindings) {
    this.#parent = parent
    this.#bindings = bindings
  }

  #child(): FastifyBaseLogger {
    this.#real ??= this.#parent.child(this.#bindings)
    return this.#real
  }

  #write(level: Level, args: unknown[]): void {
    if ((this.#parent as unknown as { isLevelEnabled(l: string): boolean }).isLevelEnabled(level)) {
      ;(this.#child()[level] as (...a: unknown[]) => void)(...args)
    }
  }

  get level(): string {
    return this.#parent.level
  }

  set level(level: string) {
    this.#child().level = level
  }

  isLevelEnabled(level: string): boolean {
    return (this.#parent as unknown as { isLevelEnabled(l: string): boolean }).isLevelEnabled(level)
  }

  fatal(...args: unknown[]): void {
    this.#write('fatal', args)
  }
  error(...args: unknown[]): void {
    this.#write('error', args)
  }
  warn(...args: unknown[]): void {
    this.#write('warn', args)
  }
  info(...args: unknown[]): void {
    this.#write('info', args)
  }
  debug(...args: unknown[]): void {
    this.#write('debug', args)
  }
  trace(...args: unknown[]): void {
    this.#write('trace', args)
  }
  silent(): void {}

  child(bindings: Bindings, options?: object): FastifyBaseLogger {
    return this.#child().child(bindings, options)
  }
}

/** childLoggerFactory for Fastify: lazy unless the route asks for its own level or serializers. */
export function lazyChildLoggerFactory(
  logger: FastifyBaseLogger,
  bindings: Bindings,
  opts: NonNullable<Parameters<FastifyBaseLogger['child']>[1]>,
): FastifyBaseLogger {
  if (opts.level !== undefined || opts.serializers !== undefined) return logger.child(bindings, opts)
  return new LazyChild(logger, bindings) as unknown as FastifyBaseLogger
}
