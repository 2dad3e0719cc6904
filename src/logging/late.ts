/**
 * The log of what happens outside a request (a dependency dropping, a worker replaced, usage
 * not saved): the runtime's parts are built before the listener whose logger writes the
 * process's lines, so they log through a LateLog, which writes one JSON line to standard
 * error until that logger is attached, and to it afterwards.
 */

/** Log: the part of pino's logger that background parts use. */
export interface Log {
  info(fields: object | string, message?: string): void
  warn(fields: object | string, message?: string): void
  error(fields: object | string, message?: string): void
}

export class LateLog implements Log {
  #target: Log | null = null

  /** attach sends every later line to `logger` (the public app's). */
  attach(logger: Log): void {
    this.#target = logger
  }

  info(fields: object | string, message?: string): void {
    this.#write('info', fields, message)
  }

  warn(fields: object | string, message?: string): void {
    this.#write('warn', fields, message)
  }

  error(fields: object | string, message?: string): void {
    this.#write('error', fields, message)
  }

  #write(level: 'info' | 'warn' | 'error', fields: object | string, message?: string): void {
    if (this.#target !== null) {
      this.#target[level](fields, message)
      return
    }
    const entry = typeof fields === 'string' ? { msg: fields } : { ...fields, msg: message }
    const err = (entry as { err?: unknown }).err
    const line = err instanceof Error ? { ...entry, err: { message: err.message } } : entry
    process.stderr.write(`${JSON.stringify({ level, time: Date.now(), ...line })}\n`)
  }
}
